//! Replication, replica side: Vireo processes on loopback following each
//! other (full sync, partial resync after a dropped link, chains,
//! promotion with PSYNC2), what a replica refuses (READONLY, MASTERDOWN),
//! logical expiry, INFO/ROLE/CLIENT LIST on replicas; interop with
//! redis-server as the master (skipped without redis-server); and masters
//! that misbehave (garbage, a truncated RDB, a cut link) or a replica of
//! itself.

mod common;

use common::{eventually, log_has, start_logged, wait_log};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use common::diff::redis_server_available;
use common::{err, info_field, ok, q, Server};

fn replicaof(c: &mut redis::Connection, port: u16) {
    ok(c, &["REPLICAOF", "127.0.0.1", &port.to_string()]);
}

fn wait_up(c: &mut redis::Connection) {
    eventually("the link to come up", || {
        info_field(c, "master_link_status") == "up"
    });
}

fn digest(c: &mut redis::Connection) -> String {
    match ok(c, &["DEBUG", "DIGEST"]) {
        redis::Value::SimpleString(s) => s,
        other => panic!("DEBUG DIGEST: {other:?}"),
    }
}

/// Waits until the replica holds the master's data and has applied every
/// byte the master streamed (the master streams its writes a moment after
/// running them).
fn wait_same_data(master: &mut redis::Connection, replica: &mut redis::Connection) {
    eventually("the replica to hold the master's data", || {
        digest(replica) == digest(master)
    });
    eventually("the replica to reach the master's offset", || {
        info_field(replica, "master_repl_offset") == info_field(master, "master_repl_offset")
    });
}

fn get(c: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).unwrap()
}

/// `bind-source-addr`: the replica's link to its master leaves from that
/// address (the master lists the replica under it); an address this host
/// cannot bind falls back to an unbound connection, as Redis's
/// best-effort binding does.
#[test]
fn the_link_to_the_master_leaves_from_bind_source_addr() {
    if TcpListener::bind("127.0.0.2:0").is_err() {
        eprintln!("note: 127.0.0.2 cannot be bound here; skipping");
        return;
    }
    let m = Server::start(&["--protected-mode", "no"]);
    let mut mc = m.conn();
    for (source, listed) in [
        ("127.0.0.2", "ip=127.0.0.2,"),
        ("192.0.2.1", "ip=127.0.0.1,"),
    ] {
        let r = Server::start(&[]);
        let mut rc = r.conn();
        ok(&mut rc, &["CONFIG", "SET", "bind-source-addr", source]);
        replicaof(&mut rc, m.port);
        wait_up(&mut rc);
        let slave0 = info_field(&mut mc, "slave0");
        assert!(slave0.contains(listed), "{source}: {slave0}");
        drop(r);
        eventually("the replica to be gone", || {
            info_field(&mut mc, "connected_slaves") == "0"
        });
    }
}

#[test]
fn a_replica_syncs_follows_and_refuses_writes() {
    let (m, _) = start_logged(&[]);
    let (r, rlog) = start_logged(&[]);
    let (mut mc, mut rc) = (m.conn(), r.conn());
    for i in 0..300 {
        ok(&mut mc, &["SET", &format!("k{i}"), &i.to_string()]);
    }
    ok(&mut mc, &["RPUSH", "list", "a", "b"]);
    replicaof(&mut rc, m.port);
    wait_up(&mut rc);
    for line in [
        "Connecting to MASTER 127.0.0.1:",
        "MASTER <-> REPLICA sync started",
        "Master replied to PING, replication can continue...",
        "Full resync from master: ",
        "MASTER <-> REPLICA sync: Flushing old data",
        "MASTER <-> REPLICA sync: Loading DB in memory",
        "MASTER <-> REPLICA sync: Finished with success",
    ] {
        assert!(log_has(&rlog, line), "missing {line:?}");
    }
    // Writes after the sync, a transaction, another database.
    ok(&mut mc, &["INCR", "k1"]);
    ok(&mut mc, &["MULTI"]);
    ok(&mut mc, &["LPUSH", "list", "z"]);
    ok(&mut mc, &["SELECT", "3"]);
    ok(&mut mc, &["SET", "in3", "x"]);
    ok(&mut mc, &["EXEC"]);
    ok(&mut mc, &["SELECT", "0"]);
    assert_eq!(ok(&mut mc, &["WAIT", "1", "5000"]), redis::Value::Int(1));
    wait_same_data(&mut mc, &mut rc);
    assert_eq!(get(&mut rc, "k1").as_deref(), Some("2"));
    assert_eq!(
        err(&mut rc, &["SET", "x", "1"]),
        "READONLY You can't write against a read only replica."
    );
    assert_eq!(info_field(&mut rc, "role"), "slave");
    assert_eq!(info_field(&mut rc, "master_port"), m.port.to_string());
    assert_eq!(info_field(&mut rc, "master_sync_in_progress"), "0");
    assert_eq!(info_field(&mut rc, "slave_read_only"), "1");
    assert_eq!(
        info_field(&mut rc, "master_replid"),
        info_field(&mut mc, "master_replid")
    );
    let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut rc).unwrap();
    assert_eq!(role[0], redis::Value::BulkString(b"slave".to_vec()));
    assert_eq!(role[3], redis::Value::BulkString(b"connected".to_vec()));
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut rc).unwrap();
    assert!(list.contains("flags=M "), "{list}");
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut mc).unwrap();
    assert!(list.contains("flags=S "), "{list}");
    // A writable replica takes writes of its own.
    ok(&mut rc, &["CONFIG", "SET", "replica-read-only", "no"]);
    ok(&mut rc, &["SET", "local", "1"]);
    // Same master again: nothing to do.
    assert_eq!(
        ok(&mut rc, &["REPLICAOF", "127.0.0.1", &m.port.to_string()]),
        redis::Value::SimpleString("OK Already connected to specified master".into())
    );
    assert_eq!(
        err(&mut rc, &["REPLICAOF", "127.0.0.1", "70000"]),
        "ERR Invalid master port"
    );
}

#[test]
fn a_dropped_link_continues_with_a_partial_resync() {
    let (m, mlog) = start_logged(&[]);
    let (r, rlog) = start_logged(&[]);
    let (mut mc, mut rc) = (m.conn(), r.conn());
    // The stream selects database 9 once: after each partial resync the
    // replica must still apply it there.
    ok(&mut mc, &["SELECT", "9"]);
    ok(&mut rc, &["SELECT", "9"]);
    ok(&mut mc, &["SET", "a", "1"]);
    replicaof(&mut rc, m.port);
    wait_up(&mut rc);
    let replid = info_field(&mut rc, "master_replid");
    for round in 0..3 {
        assert_eq!(
            ok(&mut rc, &["CLIENT", "KILL", "TYPE", "master"]),
            redis::Value::Int(1)
        );
        ok(&mut mc, &["INCR", "a"]);
        ok(&mut mc, &["SET", &format!("r{round}"), "x"]);
        let continued = (round + 1).to_string();
        eventually("the partial resync", || {
            info_field(&mut mc, "sync_partial_ok") == continued
        });
        wait_up(&mut rc);
        wait_same_data(&mut mc, &mut rc);
    }
    assert_eq!(info_field(&mut mc, "sync_full"), "1");
    wait_log(&rlog, "Caching the disconnected master state.");
    wait_log(&rlog, "Trying a partial resynchronization (request ");
    wait_log(
        &rlog,
        "MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization.",
    );
    wait_log(&mlog, "Partial resynchronization request from 127.0.0.1:");
    assert_eq!(info_field(&mut rc, "master_replid"), replid);
    assert_eq!(get(&mut rc, "a").as_deref(), Some("4"));
}

/// The dump records the history (repl-id, repl-offset, repl-stream-db):
/// a replica restarted on it, and then a master restarted on its own,
/// each continue with a partial resync, in the stream's database.
#[test]
fn restarts_on_a_dump_continue_with_a_partial_resync() {
    let debug = ["--save", "", "--enable-debug-command", "yes"];
    let m = Server::start(&debug);
    let mut mc = m.conn();
    ok(&mut mc, &["SELECT", "3"]);
    ok(&mut mc, &["SET", "n", "1"]);
    let replicaof_arg = format!("127.0.0.1 {}", m.port);
    let args = [&debug[..], &["--replicaof", replicaof_arg.as_str()]].concat();
    let r = Server::start(&args);
    let mut rc = r.conn();
    wait_up(&mut rc);
    wait_same_data(&mut mc, &mut rc);
    ok(&mut rc, &["SAVE"]);
    let dir = r.kill_keep_dir();
    ok(&mut mc, &["INCR", "n"]);
    let r = Server::start_in(dir, &args);
    let mut rc = r.conn();
    wait_up(&mut rc);
    assert_eq!(info_field(&mut mc, "sync_partial_ok"), "1");
    assert_eq!(info_field(&mut mc, "sync_full"), "1");
    ok(&mut mc, &["INCR", "n"]);
    wait_same_data(&mut mc, &mut rc);
    ok(&mut rc, &["SELECT", "3"]);
    assert_eq!(get(&mut rc, "n").as_deref(), Some("3"));
    // The master now: its old id becomes its secondary one, and a key
    // the dump holds already expired is deleted through the backlog.
    ok(&mut mc, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    ok(&mut mc, &["SET", "gone", "v", "PX", "1"]);
    wait_same_data(&mut mc, &mut rc);
    std::thread::sleep(Duration::from_millis(20));
    let replid = info_field(&mut mc, "master_replid");
    let offset: u64 = info_field(&mut mc, "master_repl_offset").parse().unwrap();
    ok(&mut mc, &["SAVE"]);
    let mdir = m.kill_keep_dir();
    let m = Server::start_in(mdir, &debug);
    let mut mc = m.conn();
    assert_eq!(info_field(&mut mc, "master_replid2"), replid);
    assert_eq!(
        info_field(&mut mc, "second_repl_offset"),
        (offset + 1).to_string()
    );
    let after: u64 = info_field(&mut mc, "master_repl_offset").parse().unwrap();
    assert!(
        after > offset,
        "the DEL of the expired key is in the backlog"
    );
    ok(&mut rc, &["REPLICAOF", "127.0.0.1", &m.port.to_string()]);
    eventually("the partial resync with the restarted master", || {
        info_field(&mut mc, "sync_partial_ok") == "1"
    });
    assert_eq!(info_field(&mut mc, "sync_full"), "0");
    ok(&mut mc, &["SELECT", "3"]);
    ok(&mut mc, &["INCR", "n"]);
    wait_same_data(&mut mc, &mut rc);
    assert_eq!(ok(&mut rc, &["DBSIZE"]), redis::Value::Int(1));
}

#[test]
fn chained_replicas_get_the_masters_stream_verbatim() {
    let (a, _) = start_logged(&[]);
    let (b, _) = start_logged(&[]);
    let (c, _) = start_logged(&[]);
    let (mut ac, mut bc, mut cc) = (a.conn(), b.conn(), c.conn());
    ok(&mut ac, &["DEBUG", "POPULATE", "1000"]);
    replicaof(&mut bc, a.port);
    wait_up(&mut bc);
    replicaof(&mut cc, b.port);
    wait_up(&mut cc);
    for i in 0..200 {
        ok(&mut ac, &["HSET", "h", &format!("f{i}"), "v"]);
        ok(&mut ac, &["INCRBY", "n", "3"]);
    }
    ok(&mut ac, &["DEL", "key:1"]);
    wait_same_data(&mut ac, &mut bc);
    wait_same_data(&mut ac, &mut cc);
    assert_eq!(
        info_field(&mut cc, "master_replid"),
        info_field(&mut ac, "master_replid")
    );
    assert_eq!(info_field(&mut bc, "connected_slaves"), "1");
}

#[test]
fn a_promoted_replica_lets_its_sibling_continue_partially() {
    let (a, _) = start_logged(&[]);
    let (b, blog) = start_logged(&[]);
    let (c, clog) = start_logged(&[]);
    let (mut ac, mut bc, mut cc) = (a.conn(), b.conn(), c.conn());
    for con in [&mut ac, &mut bc, &mut cc] {
        ok(con, &["SELECT", "3"]);
    }
    ok(&mut ac, &["SET", "x", "1"]);
    replicaof(&mut bc, a.port);
    replicaof(&mut cc, a.port);
    wait_up(&mut bc);
    wait_up(&mut cc);
    ok(&mut ac, &["SET", "y", "2"]);
    wait_same_data(&mut ac, &mut bc);
    wait_same_data(&mut ac, &mut cc);
    let old_id = info_field(&mut bc, "master_replid");
    drop(ac);
    drop(a);
    ok(&mut bc, &["REPLICAOF", "NO", "ONE"]);
    wait_log(&blog, "MASTER MODE enabled (user request from ");
    wait_log(&blog, "Setting secondary replication ID to ");
    assert_eq!(info_field(&mut bc, "role"), "master");
    assert_eq!(info_field(&mut bc, "master_replid2"), old_id);
    ok(&mut bc, &["SET", "z", "3"]);
    ok(&mut bc, &["SELECT", "4"]);
    ok(&mut bc, &["SET", "in4", "x"]);
    ok(&mut bc, &["SELECT", "3"]);
    replicaof(&mut cc, b.port);
    wait_up(&mut cc);
    wait_same_data(&mut bc, &mut cc);
    wait_log(&blog, "Partial resynchronization request from 127.0.0.1:");
    wait_log(&clog, "Master replication ID changed to ");
    assert_eq!(get(&mut cc, "z").as_deref(), Some("3"));
    assert_eq!(info_field(&mut cc, "master_replid2"), old_id);
}

#[test]
fn expired_keys_wait_for_the_masters_deletion_on_a_replica() {
    let (m, _) = start_logged(&[]);
    let (r, _) = start_logged(&[]);
    let (mut mc, mut rc) = (m.conn(), r.conn());
    ok(&mut mc, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    replicaof(&mut rc, m.port);
    wait_up(&mut rc);
    ok(&mut mc, &["SET", "short", "v", "PX", "100"]);
    wait_same_data(&mut mc, &mut rc);
    std::thread::sleep(Duration::from_millis(200));
    // Reads on the replica see it gone, but it stays until the master's DEL.
    assert_eq!(get(&mut rc, "short"), None);
    assert_eq!(ok(&mut rc, &["DBSIZE"]), redis::Value::Int(1));
    assert_eq!(get(&mut mc, "short"), None);
    eventually("the master's DEL to arrive", || {
        ok(&mut rc, &["DBSIZE"]) == redis::Value::Int(0)
    });
}

#[test]
fn a_replica_without_its_master_serves_stale_data_or_refuses() {
    let (r, rlog) = start_logged(&["--replica-serve-stale-data", "no"]);
    let mut rc = r.conn();
    // Nobody listens there: the link stays down and retries.
    let dead = common::free_port();
    replicaof(&mut rc, dead);
    wait_log(&rlog, "Error condition on socket for SYNC");
    assert_eq!(info_field(&mut rc, "master_link_status"), "down");
    assert_eq!(
        err(&mut rc, &["GET", "k"]),
        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."
    );
    // INFO and friends are allowed with stale data.
    assert_eq!(info_field(&mut rc, "role"), "slave");
    ok(
        &mut rc,
        &["CONFIG", "SET", "replica-serve-stale-data", "yes"],
    );
    assert_eq!(get(&mut rc, "k"), None);
    ok(&mut rc, &["REPLICAOF", "NO", "ONE"]);
    ok(&mut rc, &["SET", "k", "v"]);
}

#[test]
fn a_replica_of_itself_keeps_serving() {
    let (r, rlog) = start_logged(&[]);
    let mut rc = r.conn();
    ok(&mut rc, &["SET", "k", "v"]);
    replicaof(&mut rc, r.port);
    wait_log(
        &rlog,
        "Master is currently unable to PSYNC but should be in the future: -NOMASTERLINK",
    );
    assert_eq!(info_field(&mut rc, "master_link_status"), "down");
    assert_eq!(get(&mut rc, "k").as_deref(), Some("v"));
    ok(&mut rc, &["REPLICAOF", "NO", "ONE"]);
    assert_eq!(info_field(&mut rc, "role"), "master");
}

/// A fake master: answers the handshake with `+OK`s, then PSYNC with
/// `psync_reply`, then sends `payload` and closes (or, with `keep_open`,
/// holds the link until the replica drops it).
fn fake_master(psync_reply: &'static [u8], payload: Vec<u8>, keep_open: bool) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        // Serve the first few attempts the same way.
        for _ in 0..3 {
            let Ok((s, _)) = listener.accept() else {
                return;
            };
            let _ = serve_fake(s, psync_reply, &payload, keep_open);
        }
    });
    port
}

fn serve_fake(
    s: TcpStream,
    psync_reply: &[u8],
    payload: &[u8],
    keep_open: bool,
) -> std::io::Result<()> {
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut w = s.try_clone()?;
    let mut r = BufReader::new(s);
    loop {
        let mut head = String::new();
        r.read_line(&mut head)?;
        let n: usize = head.trim_start_matches('*').trim().parse().unwrap_or(0);
        let mut args = Vec::new();
        for _ in 0..n {
            let mut len = String::new();
            r.read_line(&mut len)?;
            let len: usize = len.trim_start_matches('$').trim().parse().unwrap_or(0);
            let mut arg = vec![0; len + 2];
            r.read_exact(&mut arg)?;
            arg.truncate(len);
            args.push(String::from_utf8_lossy(&arg).to_uppercase());
        }
        match args.first().map(String::as_str) {
            Some("PING") => w.write_all(b"+PONG\r\n")?,
            Some("PSYNC") => {
                w.write_all(psync_reply)?;
                w.write_all(payload)?;
                let mut sink = [0u8; 1024];
                if keep_open {
                    loop {
                        match r.read(&mut sink) {
                            Ok(0) => break,
                            Ok(_) => {}
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                            Err(_) => break,
                        }
                    }
                }
                return Ok(());
            }
            _ => w.write_all(b"+OK\r\n")?,
        }
    }
}

#[test]
fn a_misbehaving_master_is_logged_and_never_takes_the_replica_down() {
    let fullresync: &'static [u8] = b"+FULLRESYNC 0123456789012345678901234567890123456789 0\r\n";
    let cases: Vec<(&'static [u8], Vec<u8>, &str)> = vec![
        (
            fullresync,
            b"garbage\r\n".to_vec(),
            "Bad protocol from MASTER, the first byte is not '$'",
        ),
        (
            fullresync,
            b"-ERR out of luck\r\n".to_vec(),
            "MASTER aborted replication with an error: ERR out of luck",
        ),
        (
            fullresync,
            b"$1000\r\nREDIS0010".to_vec(),
            "I/O error trying to sync with MASTER: connection lost",
        ),
        (
            fullresync,
            b"$20\r\nREDIS0010\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff".to_vec(),
            "Failed trying to load the MASTER synchronization DB from disk",
        ),
        (
            b"+WHAT\r\n",
            Vec::new(),
            "Unexpected reply to PSYNC from master: +WHAT",
        ),
    ];
    for (reply, payload, line) in cases {
        let (r, rlog) = start_logged(&[]);
        let mut rc = r.conn();
        let port = fake_master(reply, payload, false);
        replicaof(&mut rc, port);
        wait_log(&rlog, line);
        assert_eq!(info_field(&mut rc, "master_link_status"), "down");
        assert_eq!(
            ok(&mut rc, &["PING"]),
            redis::Value::SimpleString("PONG".into())
        );
        ok(&mut rc, &["REPLICAOF", "NO", "ONE"]);
    }
    // The same with diskless loading: the truncated RDB leaves the dataset
    // empty and the server up.
    let (r, rlog) = start_logged(&["--repl-diskless-load", "on-empty-db"]);
    let mut rc = r.conn();
    let mark = "m".repeat(40);
    let mut payload = format!("$EOF:{mark}\r\n").into_bytes();
    payload.extend_from_slice(b"REDIS0010\xfa");
    let port = fake_master(fullresync, payload, false);
    replicaof(&mut rc, port);
    wait_log(
        &rlog,
        "receiving streamed RDB from master with EOF to parser",
    );
    wait_log(
        &rlog,
        "Failed trying to load the MASTER synchronization DB from socket",
    );
    assert_eq!(ok(&mut rc, &["DBSIZE"]), redis::Value::Int(0));
}

/// A payload in the diskless form (`$EOF:<mark>`), as a diskless Redis
/// master sends it, loads through disk and straight from the socket.
#[test]
fn a_diskless_master_payload_loads_into_the_replica() {
    let (m, _) = start_logged(&[]);
    let mut mc = m.conn();
    ok(&mut mc, &["SET", "from", "master"]);
    // Take the master's RDB through a raw SYNC, then serve it with an EOF
    // mark, as a diskless Redis master does.
    let mut s = TcpStream::connect(("127.0.0.1", m.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"SYNC\r\n").unwrap();
    let mut r = BufReader::new(s);
    let mut head = String::new();
    while head.trim().is_empty() {
        head.clear();
        r.read_line(&mut head).unwrap();
    }
    let len: usize = head.trim()[1..].parse().unwrap();
    let mut rdb = vec![0; len];
    r.read_exact(&mut rdb).unwrap();
    let mark = "k".repeat(40);
    let mut payload = format!("$EOF:{mark}\r\n").into_bytes();
    payload.extend_from_slice(&rdb);
    payload.extend_from_slice(mark.as_bytes());
    for load in ["disabled", "swapdb"] {
        let (rep, rlog) = start_logged(&["--repl-diskless-load", load]);
        let mut rc = rep.conn();
        let fake = fake_master(
            b"+FULLRESYNC 0123456789012345678901234567890123456789 0\r\n",
            payload.clone(),
            true,
        );
        replicaof(&mut rc, fake);
        wait_log(&rlog, "MASTER <-> REPLICA sync: Finished with success");
        assert_eq!(get(&mut rc, "from").as_deref(), Some("master"));
        assert_eq!(
            info_field(&mut rc, "master_replid"),
            "0123456789012345678901234567890123456789"
        );
    }
}

#[test]
fn vireo_follows_redis_server() {
    if !redis_server_available() {
        return;
    }
    let master = common::diff::start_redis_with(&["--enable-debug-command", "yes"]);
    let mclient = redis::Client::open(format!("redis://127.0.0.1:{}/", master.port)).unwrap();
    let mut mc = mclient.get_connection().unwrap();
    ok(&mut mc, &["DEBUG", "POPULATE", "2000"]);
    ok(&mut mc, &["HSET", "h", "a", "1", "b", "2"]);
    ok(&mut mc, &["ZADD", "z", "1", "x", "2", "y"]);
    ok(&mut mc, &["SET", "ttl", "v", "EX", "1000"]);
    ok(&mut mc, &["CONFIG", "SET", "repl-diskless-sync-delay", "0"]);
    let (r, _) = start_logged(&[]);
    let mut rc = r.conn();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (mut w, stop) = (mclient.get_connection().unwrap(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                ok(&mut w, &["INCR", &format!("c{}", i % 40)]);
                ok(&mut w, &["RPUSH", "log", &i.to_string()]);
                i += 1;
            }
        })
    };
    replicaof(&mut rc, master.port);
    wait_up(&mut rc);
    // A dropped link continues from Redis's backlog.
    ok(&mut rc, &["CLIENT", "KILL", "TYPE", "master"]);
    wait_up(&mut rc);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    ok(
        &mut mc,
        &["EVAL", "redis.call('set','lua','1') return 1", "0"],
    );
    assert_eq!(ok(&mut mc, &["WAIT", "1", "5000"]), redis::Value::Int(1));
    wait_same_data(&mut mc, &mut rc);
    assert_eq!(info_field(&mut mc, "sync_partial_ok"), "1");
    let _ = q(&mut rc, &["PING"]);
}

/// A replica logging to an AOF rewrites it from the master's data after a
/// full sync, then logs the stream: restarted alone, it has the data.
#[test]
fn a_replica_with_an_aof_restarts_with_the_masters_data() {
    let (m, _) = start_logged(&[]);
    let mut mc = m.conn();
    ok(&mut mc, &["DEBUG", "POPULATE", "500"]);
    let (r, _) = start_logged(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut rc = r.conn();
    let rewrites = info_field(&mut rc, "aof_rewrites");
    replicaof(&mut rc, m.port);
    wait_up(&mut rc);
    ok(&mut mc, &["SET", "after", "sync"]);
    ok(&mut mc, &["DEL", "key:3"]);
    wait_same_data(&mut mc, &mut rc);
    eventually("the rewrite after the sync", || {
        info_field(&mut rc, "aof_rewrite_in_progress") == "0"
            && info_field(&mut rc, "aof_rewrites") != rewrites
    });
    let want = digest(&mut mc);
    drop(rc);
    let dir = r.kill_keep_dir();
    let again = Server::start_in(
        dir,
        &["--appendonly", "yes", "--enable-debug-command", "yes"],
    );
    let mut ac = again.conn();
    assert_eq!(digest(&mut ac), want);
}

/// Keys a writable replica's own clients give a TTL expire there; keys of
/// the master stay until the master deletes them, even once a local client
/// touched them.
#[test]
fn a_writable_replica_expires_only_its_own_keys() {
    let (m, _) = start_logged(&[]);
    let (r, _) = start_logged(&["--replica-read-only", "no"]);
    let (mut mc, mut rc) = (m.conn(), r.conn());
    ok(&mut mc, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    replicaof(&mut rc, m.port);
    wait_up(&mut rc);
    ok(&mut mc, &["PFADD", "hll", "a", "b"]);
    ok(&mut mc, &["PEXPIRE", "hll", "100"]);
    wait_same_data(&mut mc, &mut rc);
    // A local write to the master's key (PFCOUNT caches), then a key of
    // the replica's own with a TTL.
    ok(&mut rc, &["PFCOUNT", "hll"]);
    ok(&mut rc, &["SET", "mine", "1", "PX", "100"]);
    eventually("the replica's own key to expire", || {
        ok(&mut rc, &["DBSIZE"]) == redis::Value::Int(1)
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(ok(&mut rc, &["DBSIZE"]), redis::Value::Int(1));
    assert_eq!(
        q(&mut rc, &["EXISTS", "hll"]).unwrap(),
        redis::Value::Int(0)
    );
}

/// A replica that switches to a sibling (same master history) continues
/// with a partial resync: it leaves its old master cached.
#[test]
fn switching_to_a_sibling_continues_partially() {
    let (a, _) = start_logged(&[]);
    let (b, _) = start_logged(&[]);
    let (c, _) = start_logged(&[]);
    let (mut ac, mut bc, mut cc) = (a.conn(), b.conn(), c.conn());
    ok(&mut ac, &["SET", "k", "1"]);
    replicaof(&mut bc, a.port);
    replicaof(&mut cc, a.port);
    wait_up(&mut bc);
    wait_up(&mut cc);
    ok(&mut ac, &["INCR", "k"]);
    wait_same_data(&mut ac, &mut bc);
    wait_same_data(&mut ac, &mut cc);
    replicaof(&mut cc, b.port);
    wait_up(&mut cc);
    ok(&mut ac, &["INCR", "k"]);
    wait_same_data(&mut ac, &mut cc);
    assert_eq!(info_field(&mut bc, "sync_partial_ok"), "1");
    assert_eq!(info_field(&mut bc, "sync_full"), "0");
    assert_eq!(get(&mut cc, "k").as_deref(), Some("3"));
}

/// A replica stopped (SIGSTOP) and resumed keeps its link: the read
/// interrupted by the stop is retried, not taken for a lost master.
#[test]
fn a_stopped_and_resumed_replica_keeps_its_link() {
    let (m, _) = start_logged(&[]);
    let (r, _) = start_logged(&[]);
    let (mut mc, mut rc) = (m.conn(), r.conn());
    replicaof(&mut rc, m.port);
    wait_up(&mut rc);
    let signal = |sig: &str| {
        let status = std::process::Command::new("kill")
            .args([sig, &r.pid().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    };
    signal("-STOP");
    ok(&mut mc, &["SET", "while", "stopped"]);
    std::thread::sleep(Duration::from_millis(1200));
    signal("-CONT");
    assert_eq!(ok(&mut mc, &["WAIT", "1", "5000"]), redis::Value::Int(1));
    assert_eq!(get(&mut rc, "while").as_deref(), Some("stopped"));
    assert_eq!(info_field(&mut mc, "sync_partial_ok"), "0");
    assert_eq!(info_field(&mut mc, "sync_full"), "1");
}

/// A replica whose master is unreachable, with `replica-serve-stale-data
/// no`, runs only commands flagged `stale`; for scripts the flag is the
/// script's `allow-stale`, and inside such a script a command not flagged
/// `stale` is refused.
#[test]
fn a_stale_replica_runs_only_allow_stale_scripts() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let library = "#!lua name=stale\n\
        redis.register_function{function_name='plain', callback=function() return 'hello' end, flags={'no-writes'}}\n\
        redis.register_function{function_name='stale_ok', callback=function() return 'hello' end, flags={'allow-stale', 'no-writes'}}\n\
        redis.register_function{function_name='stale_get', callback=function() return redis.call('get', 'x') end, flags={'allow-stale', 'no-writes'}}\n\
        redis.register_function{function_name='stale_info', callback=function() return redis.call('info', 'server') end, flags={'allow-stale', 'no-writes'}}";
    ok(&mut c, &["FUNCTION", "LOAD", library]);
    ok(&mut c, &["CONFIG", "SET", "replica-serve-stale-data", "no"]);
    // Port 1: nobody listens, the link stays down.
    ok(&mut c, &["REPLICAOF", "127.0.0.1", "1"]);
    let e = err(&mut c, &["FCALL", "plain", "0"]);
    assert!(e.starts_with("MASTERDOWN"), "{e}");
    let e = err(&mut c, &["GET", "x"]);
    assert!(e.starts_with("MASTERDOWN"), "{e}");
    assert_eq!(
        ok(&mut c, &["FCALL", "stale_ok", "0"]),
        redis::Value::BulkString(b"hello".to_vec())
    );
    let e = err(&mut c, &["FCALL", "stale_get", "0"]);
    assert!(
        e.contains("Can not execute the command on a stale replica"),
        "{e}"
    );
    match ok(&mut c, &["FCALL", "stale_info", "0"]) {
        redis::Value::BulkString(b) => {
            assert!(String::from_utf8_lossy(&b).contains("redis_version"))
        }
        other => panic!("{other:?}"),
    }
    // Inside a transaction the refusal comes when the command is queued.
    ok(&mut c, &["MULTI"]);
    let e = err(&mut c, &["FCALL", "plain", "0"]);
    assert!(e.starts_with("MASTERDOWN"), "{e}");
    ok(&mut c, &["FCALL", "stale_ok", "0"]);
    let e = err(&mut c, &["EXEC"]);
    assert!(e.starts_with("EXECABORT"), "{e}");
    ok(&mut c, &["REPLICAOF", "NO", "ONE"]);
    assert_eq!(
        ok(&mut c, &["FCALL", "plain", "0"]),
        redis::Value::BulkString(b"hello".to_vec())
    );
}

/// EVAL scripts on a stale replica (`replica-serve-stale-data no`): EVAL
/// itself is flagged `stale`, so a script without a shebang is refused
/// MASTERDOWN when it starts; a shebang script needs `allow-stale`, and
/// inside it commands flagged `stale` (ECHO) run while others are refused.
#[test]
fn a_stale_replica_runs_eval_scripts_by_their_shebang() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    ok(&mut c, &["CONFIG", "SET", "replica-serve-stale-data", "no"]);
    ok(&mut c, &["REPLICAOF", "127.0.0.1", "1"]);
    let masterdown =
        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";
    let e = err(&mut c, &["EVAL", "return redis.call('get','x')", "1", "x"]);
    assert_eq!(e, masterdown);
    let e = err(&mut c, &["EVAL", "#!lua flags=no-writes\nreturn 1", "0"]);
    assert_eq!(e, masterdown);
    let stale_ok = "#!lua flags=allow-stale,no-writes\n";
    let run =
        |c: &mut redis::Connection, body: &str| q(c, &["EVAL", &format!("{stale_ok}{body}"), "0"]);
    assert_eq!(run(&mut c, "return 1").unwrap(), redis::Value::Int(1));
    let e = run(&mut c, "return redis.call('get','x')").unwrap_err();
    assert!(
        e.to_string()
            .contains("Can not execute the command on a stale replica"),
        "{e}"
    );
    let echoed = redis::Value::BulkString(b"foobar".to_vec());
    assert_eq!(
        run(&mut c, "return redis.call('echo','foobar')").unwrap(),
        echoed
    );
    let sha = match ok(
        &mut c,
        &[
            "SCRIPT",
            "LOAD",
            &format!("{stale_ok}return redis.call('echo','foobar')"),
        ],
    ) {
        redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
        other => panic!("SCRIPT LOAD: {other:?}"),
    };
    assert_eq!(ok(&mut c, &["EVALSHA", &sha, "0"]), echoed);
    ok(&mut c, &["REPLICAOF", "NO", "ONE"]);
}

/// On a read-only replica a script's first write is refused READONLY
/// (with the script's location), also when the script was queued in a
/// transaction while the server was a master; a script without writes
/// runs, in a transaction too.
#[test]
fn a_read_only_replica_refuses_the_writes_of_scripts() {
    let master = Server::start(&[]);
    let mut mc = master.conn();
    ok(&mut mc, &["SET", "x", "some value"]);
    let replica = Server::start(&[]);
    let mut rc = replica.conn();
    replicaof(&mut rc, master.port);
    wait_up(&mut rc);
    let write = "redis.call('set','x',1) return 1";
    let e = err(&mut rc, &["EVAL", write, "1", "x"]);
    assert!(
        e.starts_with("READONLY You can't write against a read only replica. script: "),
        "{e}"
    );
    let e = err(&mut rc, &["EVAL", "#!lua\nreturn 1", "0"]);
    assert_eq!(e, "READONLY You can't write against a read only replica.");
    ok(&mut rc, &["MULTI"]);
    ok(
        &mut rc,
        &[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('get','x')",
            "1",
            "x",
        ],
    );
    assert_eq!(
        ok(&mut rc, &["EXEC"]),
        redis::Value::Array(vec![redis::Value::BulkString(b"some value".to_vec())])
    );
    // Queued while a master, run once a replica again.
    ok(&mut rc, &["REPLICAOF", "NO", "ONE"]);
    let mut queued = replica.conn();
    ok(&mut queued, &["MULTI"]);
    ok(&mut queued, &["EVAL", write, "1", "x"]);
    replicaof(&mut rc, master.port);
    // The one reply of EXEC is the script's error (the redis crate
    // returns a transaction's error as the error of EXEC).
    let e = err(&mut queued, &["EXEC"]);
    assert!(
        e.starts_with("READONLY You can't write against a read only replica. script: "),
        "{e}"
    );
    assert_eq!(get(&mut rc, "x").as_deref(), Some("some value"));
}

/// A replica that leaves its master and comes back continues partially in
/// the database the master's stream had selected (the master sends no
/// SELECT on `+CONTINUE`).
#[test]
fn a_replica_coming_back_continues_in_the_streams_database() {
    let (a, _) = start_logged(&[]);
    let (b, _) = start_logged(&[]);
    let (mut ac, mut bc) = (a.conn(), b.conn());
    ok(&mut ac, &["SELECT", "9"]);
    ok(&mut ac, &["SET", "k", "1"]);
    replicaof(&mut bc, a.port);
    wait_up(&mut bc);
    wait_same_data(&mut ac, &mut bc);
    // Away to a master that is not there, then back.
    replicaof(&mut bc, common::free_port());
    ok(&mut ac, &["SET", "k", "2"]);
    replicaof(&mut bc, a.port);
    wait_up(&mut bc);
    wait_same_data(&mut ac, &mut bc);
    assert_eq!(info_field(&mut ac, "sync_partial_ok"), "1");
    ok(&mut bc, &["SELECT", "9"]);
    assert_eq!(get(&mut bc, "k").as_deref(), Some("2"));
}

/// `repl-backlog-ttl`: a master without replicas for longer frees its
/// backlog, with a new replication id (a replica coming back must sync in
/// full, and the master's writes no longer move its offset); a replica
/// keeps its backlog however long it has no replicas of its own, and once
/// promoted keeps it for the ttl counted from the promotion.
#[test]
fn a_master_frees_its_backlog_after_the_ttl_and_a_replica_keeps_it() {
    let (m, mlog) = start_logged(&["--repl-backlog-ttl", "1"]);
    let (r, _) = start_logged(&["--repl-backlog-ttl", "3"]);
    let (mut mc, mut rc) = (m.conn(), r.conn());
    replicaof(&mut rc, m.port);
    wait_up(&mut rc);
    wait_log(
        &mlog,
        "Replication backlog created, my new replication IDs are '",
    );
    ok(&mut mc, &["SET", "a", "1"]);
    wait_same_data(&mut mc, &mut rc);
    let history = info_field(&mut mc, "master_replid");
    assert_eq!(info_field(&mut mc, "repl_backlog_active"), "1");
    // Longer than its ttl as a replica without replicas of its own: it
    // keeps its backlog.
    std::thread::sleep(Duration::from_millis(4500));
    assert_eq!(info_field(&mut rc, "repl_backlog_active"), "1");
    // Promoted, it keeps it still: the ttl counts from the promotion.
    ok(&mut rc, &["REPLICAOF", "NO", "ONE"]);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(info_field(&mut rc, "role"), "master");
    assert_eq!(info_field(&mut rc, "repl_backlog_active"), "1");
    // Its master, left without replicas, frees its backlog a second later
    // (more than the ttl).
    wait_log(
        &mlog,
        "Replication backlog freed after 1 seconds without connected replicas.",
    );
    assert_eq!(info_field(&mut mc, "repl_backlog_active"), "0");
    assert_eq!(info_field(&mut mc, "repl_backlog_histlen"), "0");
    assert_ne!(info_field(&mut mc, "master_replid"), history);
    assert_eq!(info_field(&mut mc, "master_replid2"), "0".repeat(40));
    let offset = info_field(&mut mc, "master_repl_offset");
    ok(&mut mc, &["SET", "b", "2"]);
    assert_eq!(info_field(&mut mc, "master_repl_offset"), offset);
    // Back to the master: the history it had is gone, a full sync.
    let refused: u64 = info_field(&mut mc, "sync_partial_err").parse().unwrap();
    replicaof(&mut rc, m.port);
    wait_up(&mut rc);
    wait_same_data(&mut mc, &mut rc);
    assert_eq!(info_field(&mut mc, "sync_full"), "2");
    assert_eq!(
        info_field(&mut mc, "sync_partial_err"),
        (refused + 1).to_string()
    );
    assert_eq!(get(&mut rc, "b").as_deref(), Some("2"));
}

/// FLUSHALL during a diskless transfer stops it, as Redis's kills its RDB
/// child: the replica connects again and syncs the flushed dataset in a
/// new transfer.
#[test]
fn flushall_ends_a_running_diskless_transfer() {
    let (m, mlog) = start_logged(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ]);
    let (r, rlog) = start_logged(&["--repl-diskless-load", "swapdb"]);
    let (mut mc, mut rc) = (m.conn(), r.conn());
    ok(&mut mc, &["DEBUG", "POPULATE", "2000", "test", "1000"]);
    // 100 ms per key: the transfer would take minutes.
    ok(&mut mc, &["CONFIG", "SET", "rdb-key-save-delay", "100000"]);
    replicaof(&mut rc, m.port);
    wait_log(&rlog, "MASTER <-> REPLICA sync: Loading DB in memory");
    ok(&mut mc, &["FLUSHALL"]);
    wait_log(
        &mlog,
        "Diskless rdb transfer aborted: the dataset was flushed.",
    );
    eventually("a second transfer", || {
        std::fs::read_to_string(&mlog)
            .unwrap_or_default()
            .matches("Background RDB transfer started by pid")
            .count()
            == 2
    });
    wait_up(&mut rc);
    assert_eq!(ok(&mut rc, &["DBSIZE"]), redis::Value::Int(0));
    assert_eq!(
        ok(&mut mc, &["PING"]),
        redis::Value::SimpleString("PONG".into())
    );
}
