//! Redis Sentinel (Debian's `redis-sentinel`, or `redis-server --sentinel`)
//! watching a Vireo master with two Vireo replicas: three sentinels agree
//! the master is down when it is killed, promote a replica with MULTI /
//! SLAVEOF NO ONE / CONFIG REWRITE / CLIENT KILL / EXEC, point the other
//! replica at it, and a client that asks Sentinel for the master keeps
//! writing. Skipped with a note when no sentinel binary is installed.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, fresh_dir, ok, q};

/// A process of this test (a Vireo server or a sentinel), killed when
/// dropped.
struct Proc {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Proc {
    fn conn(&self) -> redis::Connection {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap();
        let con = client.get_connection().expect("connect");
        con.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        con
    }
}

/// How to run a sentinel here: `redis-sentinel CONF`, or
/// `redis-server CONF --sentinel` (the same binary in Debian's packages).
fn sentinel_command() -> Option<Vec<&'static str>> {
    let runs = |bin: &str| {
        Command::new(bin)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if runs("redis-sentinel") {
        Some(vec!["redis-sentinel"])
    } else if runs("redis-server") {
        Some(vec!["redis-server"])
    } else {
        None
    }
}

/// Starts a process from a config file it may rewrite (both Vireo and
/// Sentinel do on CONFIG REWRITE and failover) and waits for PING.
fn spawn(bin: &[&str], sentinel: bool, conf: &str) -> Proc {
    for _ in 0..5 {
        let port = free_port();
        let dir = fresh_dir();
        let path = dir.join("node.conf");
        let text = format!(
            "port {port}\nbind 127.0.0.1\ndir {}\n{conf}\n",
            dir.display()
        );
        std::fs::write(&path, text).unwrap();
        let mut cmd = Command::new(bin[0]);
        cmd.arg(&path);
        if sentinel && bin[0] == "redis-server" {
            cmd.arg("--sentinel");
        }
        let log = std::fs::File::create(dir.join("log")).unwrap();
        let child = cmd
            .stdout(Stdio::from(log))
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let mut p = Proc { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if common::answers_ping(port) {
                return p;
            }
            if let Ok(Some(_)) = p.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    panic!("{bin:?} did not start");
}

fn vireo(conf: &str) -> Proc {
    spawn(&[env!("CARGO_BIN_EXE_vireo")], false, conf)
}

/// Waits up to `secs` seconds for `f`, failing with `what` (and the
/// sentinels' logs, which tell why a failover did not happen).
fn eventually(what: &str, secs: u64, logs: &[&Path], mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for log in logs {
        eprintln!("--- {}", log.display());
        eprintln!("{}", std::fs::read_to_string(log).unwrap_or_default());
    }
    panic!("timed out waiting for {what}");
}

fn field(info: &str, name: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::to_string)
}

fn info(con: &mut redis::Connection, section: &str) -> String {
    redis::cmd("INFO")
        .arg(section)
        .query(con)
        .unwrap_or_default()
}

/// The master's address as a sentinel reports it.
fn master_addr(sentinel: &Proc) -> Option<(String, u16)> {
    let mut con = sentinel.conn();
    let addr: Option<(String, String)> = redis::cmd("SENTINEL")
        .arg("get-master-addr-by-name")
        .arg("mymaster")
        .query(&mut con)
        .ok()?;
    let (host, port) = addr?;
    Some((host, port.parse().ok()?))
}

/// What SENTINEL MASTER says of one field.
fn sentinel_master_field(sentinel: &Proc, name: &str) -> Option<String> {
    let mut con = sentinel.conn();
    let fields: Vec<String> = redis::cmd("SENTINEL")
        .arg("master")
        .arg("mymaster")
        .query(&mut con)
        .ok()?;
    let at = fields.iter().position(|f| f == name)?;
    fields.get(at + 1).cloned()
}

#[test]
fn sentinel_promotes_a_vireo_replica_when_the_master_dies() {
    let Some(sentinel_bin) = sentinel_command() else {
        eprintln!("note: neither redis-sentinel nor redis-server is installed; skipping the Sentinel test");
        return;
    };
    let node_conf = "save \"\"\nappendonly no\nrepl-ping-replica-period 1";
    let master = vireo(node_conf);
    let replica_conf = format!("{node_conf}\nreplicaof 127.0.0.1 {}", master.port);
    let replicas = [vireo(&replica_conf), vireo(&replica_conf)];
    let mut m = master.conn();
    eventually("two replicas online", 20, &[], || {
        let text = info(&mut m, "replication");
        (0..2)
            .all(|i| field(&text, &format!("slave{i}")).is_some_and(|s| s.contains("state=online")))
    });
    ok(&mut m, &["SET", "before", "1"]);

    let sentinel_conf = format!(
        "sentinel monitor mymaster 127.0.0.1 {} 2\n\
         sentinel down-after-milliseconds mymaster 1000\n\
         sentinel failover-timeout mymaster 6000\n\
         sentinel parallel-syncs mymaster 2",
        master.port
    );
    let sentinels: Vec<Proc> = (0..3)
        .map(|_| spawn(&sentinel_bin, true, &sentinel_conf))
        .collect();
    let logs: Vec<PathBuf> = sentinels.iter().map(|s| s.dir.join("log")).collect();
    let logs: Vec<&Path> = logs.iter().map(PathBuf::as_path).collect();
    eventually(
        "the sentinels to see the replicas and each other",
        30,
        &logs,
        || {
            sentinels.iter().all(|s| {
                sentinel_master_field(s, "num-slaves").as_deref() == Some("2")
                    && sentinel_master_field(s, "num-other-sentinels").as_deref() == Some("2")
            })
        },
    );

    let old_port = master.port;
    drop(m);
    drop(master);
    let mut promoted = None;
    eventually("a sentinel to name a new master", 50, &logs, || {
        promoted = master_addr(&sentinels[0]).filter(|(_, port)| *port != old_port);
        promoted.is_some()
    });
    let (_, new_port) = promoted.unwrap();
    let new_master = replicas
        .iter()
        .find(|r| r.port == new_port)
        .expect("the new master is one of the replicas");
    let other = replicas.iter().find(|r| r.port != new_port).unwrap();

    // A client that asks Sentinel where the master is writes there.
    let mut nm = new_master.conn();
    eventually("the promoted replica to be a master", 20, &logs, || {
        field(&info(&mut nm, "replication"), "role").as_deref() == Some("master")
    });
    // The other sentinels learn the new configuration from the leader's
    // hello messages, a moment later.
    eventually("every sentinel to name the new master", 30, &logs, || {
        sentinels
            .iter()
            .all(|s| master_addr(s).is_some_and(|(_, port)| port == new_port))
    });
    for i in 0..20 {
        let (_, port) = master_addr(&sentinels[1]).expect("a master address");
        assert_eq!(port, new_port);
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let mut con = client.get_connection().unwrap();
        ok(&mut con, &["SET", &format!("after:{i}"), "x"]);
    }
    assert_eq!(
        q(&mut nm, &["GET", "before"]).unwrap(),
        redis::Value::BulkString(b"1".to_vec())
    );

    // The surviving replica follows the new master and gets its writes.
    let mut oc = other.conn();
    eventually(
        "the other replica to follow the new master",
        40,
        &logs,
        || {
            let text = info(&mut oc, "replication");
            field(&text, "master_port").as_deref() == Some(&new_port.to_string())
                && field(&text, "master_link_status").as_deref() == Some("up")
        },
    );
    eventually("the writes to reach the other replica", 20, &logs, || {
        q(&mut oc, &["GET", "after:19"]).ok() == Some(redis::Value::BulkString(b"x".to_vec()))
    });
    // Sentinel's CONFIG REWRITE recorded the new roles in the files.
    let conf = std::fs::read_to_string(other.dir.join("node.conf")).unwrap();
    assert!(
        conf.contains(&format!("replicaof 127.0.0.1 {new_port}")),
        "{conf}"
    );
    let conf = std::fs::read_to_string(new_master.dir.join("node.conf")).unwrap();
    assert!(!conf.contains("replicaof"), "{conf}");
}
