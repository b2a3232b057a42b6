//! Integration tests of the introspection families: CLIENT, INFO, CONFIG,
//! SLOWLOG, MONITOR, MEMORY, LATENCY, TIME and SHUTDOWN, against the real
//! binary. Replies are compared byte for byte where Redis 7.0.15's are
//! deterministic.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A raw RESP2/RESP3 connection returning each reply's exact bytes.
struct Raw {
    r: BufReader<TcpStream>,
}

impl Raw {
    fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Raw {
            r: BufReader::new(s),
        }
    }

    fn send(&mut self, args: &[&str]) {
        let mut buf = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            buf.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        self.r.get_mut().write_all(&buf).unwrap();
    }

    /// Sends a command and reads one whole reply.
    fn cmd(&mut self, args: &[&str]) -> String {
        self.send(args);
        self.reply()
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        let n = self.r.read_line(&mut l).expect("read");
        assert!(n > 0, "connection closed");
        l
    }

    /// Reads one complete reply, returning its raw text.
    fn reply(&mut self) -> String {
        let l = self.line();
        let n = || l[1..l.len() - 2].parse::<i64>().unwrap();
        match l.as_bytes()[0] {
            b'$' | b'=' if n() >= 0 => {
                let mut body = vec![0; n() as usize + 2];
                self.r.read_exact(&mut body).unwrap();
                l.clone() + &String::from_utf8_lossy(&body)
            }
            b'*' | b'~' | b'>' | b'%' if n() >= 0 => {
                let items = if l.starts_with('%') { 2 * n() } else { n() };
                let mut all = l.clone();
                for _ in 0..items {
                    all += &self.reply();
                }
                all
            }
            _ => l,
        }
    }

    /// True once the server closed the connection (waits up to 5 s).
    fn closed(&mut self) -> bool {
        self.r
            .get_mut()
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut b = [0u8; 1];
        matches!(self.r.read(&mut b), Ok(0))
    }
}

/// The body of a bulk or verbatim reply.
fn body(reply: &str) -> &str {
    let start = reply.find("\r\n").unwrap() + 2;
    let b = &reply[start..reply.len() - 2];
    b.strip_prefix("txt:").unwrap_or(b)
}

fn info_field(info: &str, field: &str) -> Option<String> {
    info.split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(String::from)
}

fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

#[test]
fn client_setname_getname_id_info() {
    let srv = common::Server::start(&[]);
    let mut c = Raw::connect(srv.port);
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), "$-1\r\n");
    assert_eq!(
        c.cmd(&["CLIENT", "SETNAME", "a b"]),
        "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"
    );
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "alpha"]), "+OK\r\n");
    assert_eq!(c.cmd(&["client", "getname"]), bulk("alpha"));
    let id = c.cmd(&["CLIENT", "ID"]);
    assert!(id.starts_with(':'));
    let id = id[1..id.len() - 2].to_string();
    let info = c.cmd(&["CLIENT", "INFO"]);
    let line = body(&info);
    assert!(
        line.starts_with(&format!("id={id} addr=127.0.0.1:")),
        "{line}"
    );
    assert!(
        line.contains(" name=alpha ")
            && line.contains(" cmd=client|info ")
            && line.ends_with("resp=2\n")
    );
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", ""]), "+OK\r\n");
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), "$-1\r\n");
    assert_eq!(
        c.cmd(&["CLIENT", "ID", "x"]),
        "-ERR wrong number of arguments for 'client|id' command\r\n"
    );
    assert_eq!(
        c.cmd(&["CLIENT", "FOO"]),
        "-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n"
    );
    let help = c.cmd(&["CLIENT", "HELP"]);
    assert!(help.contains("+CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n"));
    assert!(help.ends_with("+HELP\r\n+    Prints this help.\r\n"));
    // RESP3 turns CLIENT INFO into a verbatim string.
    c.cmd(&["HELLO", "3"]);
    assert!(c.cmd(&["CLIENT", "INFO"]).contains("\r\ntxt:id="));
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), "_\r\n");
}

#[test]
fn client_list_filters_and_errors() {
    let srv = common::Server::start(&[]);
    let mut a = Raw::connect(srv.port);
    let mut b = Raw::connect(srv.port);
    b.cmd(&["CLIENT", "SETNAME", "bee"]);
    let b_id = b.cmd(&["CLIENT", "ID"]);
    let b_id = b_id[1..b_id.len() - 2].to_string();
    let list = a.cmd(&["CLIENT", "LIST"]);
    let lines: Vec<&str> = body(&list).lines().collect();
    assert_eq!(lines.len(), 2, "{list}");
    assert!(body(&list).ends_with('\n'));
    assert!(lines.iter().any(|l| l.contains(" name=bee ")));
    let fields: Vec<&str> = lines[0]
        .split(' ')
        .map(|f| f.split('=').next().unwrap())
        .collect();
    assert_eq!(
        fields,
        "id addr laddr fd name age idle flags db sub psub ssub multi qbuf qbuf-free argv-mem multi-mem rbs rbp \
         obl oll omem tot-mem events cmd user redir resp"
            .split(' ')
            .collect::<Vec<_>>()
    );
    let only_b = a.cmd(&["CLIENT", "LIST", "ID", &b_id, "999999"]);
    assert!(
        body(&only_b).starts_with(&format!("id={b_id} ")) && body(&only_b).lines().count() == 1
    );
    assert_eq!(a.cmd(&["CLIENT", "LIST", "ID", "-5"]), "$0\r\n\r\n");
    assert_eq!(
        body(&a.cmd(&["CLIENT", "LIST", "TYPE", "normal"]))
            .lines()
            .count(),
        2
    );
    assert_eq!(a.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]), "$0\r\n\r\n");
    assert_eq!(
        a.cmd(&["CLIENT", "LIST", "TYPE", "foo"]),
        "-ERR Unknown client type 'foo'\r\n"
    );
    assert_eq!(
        a.cmd(&["CLIENT", "LIST", "TYPE", "normal", "x"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        a.cmd(&["CLIENT", "LIST", "ID", "1", "abc"]),
        "-ERR Invalid client ID\r\n"
    );
    assert_eq!(a.cmd(&["CLIENT", "LIST", "ID"]), "-ERR syntax error\r\n");
    assert_eq!(a.cmd(&["CLIENT", "LIST", "foo"]), "-ERR syntax error\r\n");
    // Flags follow the connection's state.
    a.cmd(&["CLIENT", "NO-EVICT", "on"]);
    assert!(body(&a.cmd(&["CLIENT", "INFO"])).contains(" flags=e "));
    assert_eq!(
        a.cmd(&["CLIENT", "NO-EVICT", "maybe"]),
        "-ERR syntax error\r\n"
    );
    a.cmd(&["CLIENT", "NO-EVICT", "off"]);
    assert!(body(&a.cmd(&["CLIENT", "INFO"])).contains(" flags=N "));
}

#[test]
fn client_kill_from_another_connection_closes_the_victim() {
    let srv = common::Server::start(&[]);
    let mut killer = Raw::connect(srv.port);
    let mut victim = Raw::connect(srv.port);
    let id = victim.cmd(&["CLIENT", "ID"]);
    let id = &id[1..id.len() - 2];
    assert_eq!(killer.cmd(&["CLIENT", "KILL", "ID", id]), ":1\r\n");
    assert!(victim.closed(), "the killed client must be disconnected");
    assert_eq!(killer.cmd(&["CLIENT", "KILL", "ID", id]), ":0\r\n");

    // Old form, by address: OK or an error.
    let mut victim2 = Raw::connect(srv.port);
    let info = victim2.cmd(&["CLIENT", "INFO"]);
    let addr = body(&info)
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap()
        .to_string();
    assert_eq!(killer.cmd(&["CLIENT", "KILL", &addr]), "+OK\r\n");
    assert!(victim2.closed());
    assert_eq!(
        killer.cmd(&["CLIENT", "KILL", "1.2.3.4:5"]),
        "-ERR No such client\r\n"
    );

    // Filters and their errors.
    for (args, want) in [
        (
            &["ID", "0"][..],
            "-ERR client-id should be greater than 0\r\n",
        ),
        (
            &["ID", "abc"][..],
            "-ERR client-id should be greater than 0\r\n",
        ),
        (&["TYPE", "foo"][..], "-ERR Unknown client type 'foo'\r\n"),
        (&["USER", "bob"][..], "-ERR No such user 'bob'\r\n"),
        (&["SKIPME", "maybe"][..], "-ERR syntax error\r\n"),
        (&["ID", "9", "SKIPME"][..], "-ERR syntax error\r\n"),
        (&["FOO", "bar"][..], "-ERR syntax error\r\n"),
        (&["TYPE", "master"][..], ":0\r\n"),
        (&["USER", "default"][..], ":0\r\n"),
    ] {
        let mut cmd = vec!["CLIENT", "KILL"];
        cmd.extend_from_slice(args);
        assert_eq!(killer.cmd(&cmd), want, "{cmd:?}");
    }

    // SKIPME no kills the caller too, after its reply.
    let mut other = Raw::connect(srv.port);
    other.cmd(&["PING"]);
    assert_eq!(
        killer.cmd(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "no"]),
        ":2\r\n"
    );
    assert!(killer.closed());
    assert!(other.closed());
}

#[test]
fn client_reply_off_skip_on() {
    let srv = common::Server::start(&[]);
    let mut c = Raw::connect(srv.port);
    c.send(&["CLIENT", "REPLY", "OFF"]);
    c.send(&["PING", "a"]);
    c.send(&["SET", "k", "v"]);
    assert_eq!(c.cmd(&["CLIENT", "REPLY", "ON"]), "+OK\r\n");
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
    c.send(&["CLIENT", "REPLY", "SKIP"]);
    c.send(&["PING", "skipped"]);
    assert_eq!(c.cmd(&["PING", "shown"]), bulk("shown"));
    assert_eq!(
        c.cmd(&["CLIENT", "REPLY", "maybe"]),
        "-ERR syntax error\r\n"
    );
}

#[test]
fn client_pause_write_holds_writes_until_unpause() {
    let srv = common::Server::start(&[]);
    let mut admin = Raw::connect(srv.port);
    assert_eq!(
        admin.cmd(&["CLIENT", "PAUSE", "abc"]),
        "-ERR timeout is not an integer or out of range\r\n"
    );
    assert_eq!(
        admin.cmd(&["CLIENT", "PAUSE", "-1"]),
        "-ERR timeout is negative\r\n"
    );
    assert_eq!(
        admin.cmd(&["CLIENT", "PAUSE", "10", "foo"]),
        "-ERR CLIENT PAUSE mode must be WRITE or ALL\r\n"
    );
    assert_eq!(
        admin.cmd(&["CLIENT", "PAUSE", "10", "write", "x"]),
        "-ERR unknown subcommand or wrong number of arguments for 'PAUSE'. Try CLIENT HELP.\r\n"
    );
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "20000", "WRITE"]), "+OK\r\n");

    let port = srv.port;
    let (tx, rx) = mpsc::channel();
    let writer = std::thread::spawn(move || {
        let mut w = Raw::connect(port);
        let reply = w.cmd(&["SET", "k", "v"]);
        tx.send((reply, Instant::now())).unwrap();
    });
    let mut reader = Raw::connect(srv.port);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        reader.cmd(&["GET", "k"]),
        "$-1\r\n",
        "reads go through during a write pause"
    );
    let unpaused_at = Instant::now();
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), "+OK\r\n");
    let (reply, replied_at) = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("SET runs after UNPAUSE");
    assert_eq!(reply, "+OK\r\n");
    assert!(
        replied_at >= unpaused_at,
        "the SET must wait for the pause to end"
    );
    writer.join().unwrap();
    assert_eq!(reader.cmd(&["GET", "k"]), bulk("v"));
}

#[test]
fn a_paused_server_expires_nothing() {
    let srv = common::Server::start(&[]);
    let mut c = Raw::connect(srv.port);
    let expired = |c: &mut Raw| {
        let info = c.cmd(&["INFO", "stats"]);
        info_field(&info, "expired_keys").unwrap()
    };
    assert_eq!(c.cmd(&["MULTI"]), "+OK\r\n");
    c.cmd(&["SET", "a", "1", "PX", "10"]);
    c.cmd(&["SET", "b", "1", "PX", "10"]);
    c.cmd(&["CLIENT", "PAUSE", "20000", "WRITE"]);
    assert!(c.cmd(&["EXEC"]).starts_with("*3\r\n"));
    std::thread::sleep(Duration::from_millis(300));
    // Past their TTL they read as gone, but neither the read nor the
    // active expiry cycle deletes them while the pause lasts.
    assert_eq!(c.cmd(&["GET", "a"]), "$-1\r\n");
    assert_eq!(c.cmd(&["GET", "b"]), "$-1\r\n");
    assert_eq!(expired(&mut c), "0");
    assert_eq!(c.cmd(&["CLIENT", "UNPAUSE"]), "+OK\r\n");
    assert_eq!(c.cmd(&["GET", "a"]), "$-1\r\n");
    assert_eq!(c.cmd(&["GET", "b"]), "$-1\r\n");
    assert_eq!(expired(&mut c), "2");
}

/// INFO's sections and their field names, in order.
fn section_fields(info: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for l in info.split("\r\n") {
        if let Some(title) = l.strip_prefix("# ") {
            out.push((title.to_string(), Vec::new()));
        } else if let Some((k, _)) = l.split_once(':') {
            out.last_mut().unwrap().1.push(k.to_string());
        }
    }
    out
}

#[test]
fn info_sections_and_format() {
    let srv = common::Server::start(&[]);
    let mut c = Raw::connect(srv.port);
    c.cmd(&["SET", "k", "v"]);
    // The start-up probe's connection may not be reaped yet.
    let deadline = Instant::now() + Duration::from_secs(5);
    let default = loop {
        let info = c.cmd(&["INFO"]);
        if info_field(body(&info), "connected_clients").as_deref() == Some("1")
            || Instant::now() > deadline
        {
            break info;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let text = body(&default);
    assert!(text.starts_with("# Server\r\nredis_version:7.0.15\r\n"));
    assert!(text.ends_with("avg_ttl=0\r\n") && !text.replace("\r\n", "").contains('\n'));
    assert!(text.contains("io_threads_active:") && text.contains("\r\n\r\n# Clients\r\n"));
    let titles: Vec<String> = section_fields(text).into_iter().map(|s| s.0).collect();
    assert_eq!(
        titles,
        [
            "Server",
            "Clients",
            "Memory",
            "Persistence",
            "Stats",
            "Replication",
            "CPU",
            "Modules",
            "Errorstats",
            "Cluster",
            "Keyspace"
        ]
    );
    assert!(info_field(text, "vireo_version").is_some());
    assert_eq!(
        info_field(text, "db0").as_deref(),
        Some("keys=1,expires=0,avg_ttl=0")
    );
    assert_eq!(info_field(text, "tcp_port"), Some(srv.port.to_string()));
    assert_eq!(info_field(text, "role").as_deref(), Some("master"));
    assert_eq!(info_field(text, "connected_clients").as_deref(), Some("1"));
    assert!(
        info_field(text, "used_memory")
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > 0
    );
    assert!(info_field(text, "used_cpu_user").unwrap().contains('.'));

    let everything = body(&c.cmd(&["INFO", "everything"])).to_string();
    let titles: Vec<String> = section_fields(&everything)
        .into_iter()
        .map(|s| s.0)
        .collect();
    assert_eq!(titles.len(), 13);
    assert_eq!(
        titles[8..11],
        ["Commandstats", "Errorstats", "Latencystats"]
    );
    assert_eq!(section_fields(body(&c.cmd(&["INFO", "all"]))).len(), 13);
    assert_eq!(c.cmd(&["INFO", "nosuch"]), "$0\r\n\r\n");
    assert_eq!(
        c.cmd(&["INFO", "CLUSTER"]),
        "$30\r\n# Cluster\r\ncluster_enabled:0\r\n\r\n"
    );
    assert_eq!(
        body(&c.cmd(&["info", "keyspace", "cluster"])),
        "# Cluster\r\ncluster_enabled:0\r\n\r\n# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n"
    );
    assert_eq!(c.cmd(&["INFO", "modules"]), "$11\r\n# Modules\r\n\r\n");
    let with_cmd: Vec<String> = section_fields(body(&c.cmd(&["INFO", "default", "commandstats"])))
        .into_iter()
        .map(|s| s.0)
        .collect();
    assert_eq!(with_cmd.len(), 12);
    c.cmd(&["HELLO", "3"]);
    assert_eq!(
        c.cmd(&["INFO", "cluster"]),
        "=34\r\ntxt:# Cluster\r\ncluster_enabled:0\r\n\r\n"
    );
}

/// Field names of Redis 7.0.15's INFO everything, per section, for the
/// sections whose fields do not depend on what ran.
fn redis_info_fields() -> Vec<(String, Vec<String>)> {
    let port = common::free_port();
    let mut child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server must be installed (apt-get install redis-server)");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut conn = loop {
        if common::answers_ping(port) {
            let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            break Raw {
                r: BufReader::new(s),
            };
        }
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    let info = conn.cmd(&["INFO", "everything"]);
    let _ = child.kill();
    let _ = child.wait();
    section_fields(body(&info))
}

#[test]
fn info_field_names_and_order_match_redis() {
    let srv = common::Server::start(&["--save", "", "--appendonly", "no"]);
    let mut c = Raw::connect(srv.port);
    let ours = section_fields(body(&c.cmd(&["INFO", "everything"])));
    let theirs = redis_info_fields();
    let dynamic = ["Commandstats", "Errorstats", "Latencystats", "Keyspace"];
    let strip = |s: Vec<(String, Vec<String>)>| -> Vec<(String, Vec<String>)> {
        s.into_iter()
            .map(|(t, f)| {
                let f = if dynamic.contains(&t.as_str()) {
                    Vec::new()
                } else {
                    f
                };
                (t, f.into_iter().filter(|n| n != "vireo_version").collect())
            })
            .collect()
    };
    assert_eq!(strip(ours), strip(theirs));
}

fn cmdstat(c: &mut Raw, name: &str) -> Option<String> {
    info_field(
        body(&c.cmd(&["INFO", "commandstats"])),
        &format!("cmdstat_{name}"),
    )
}

#[test]
fn commandstats_and_errorstats_count() {
    let srv = common::Server::start(&[]);
    let mut c = Raw::connect(srv.port);
    c.cmd(&["SET", "a", "1"]);
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), "+OK\r\n");
    for _ in 0..3 {
        c.cmd(&["SET", "a", "1"]);
    }
    c.cmd(&["GET", "a"]);
    c.cmd(&["CLIENT", "KILL", "ID", "0"]);
    c.cmd(&["NOSUCHCOMMAND"]);
    c.cmd(&["AUTH", "someone", "wrong"]);
    let set = cmdstat(&mut c, "set").unwrap();
    assert!(set.starts_with("calls=3,usec="), "{set}");
    assert!(set.ends_with(",rejected_calls=0,failed_calls=0"));
    // A known command with the wrong arity is a rejected call of it.
    c.cmd(&["GET"]);
    let get = cmdstat(&mut c, "get").unwrap();
    assert!(get.ends_with(",rejected_calls=1,failed_calls=0"), "{get}");
    assert!(cmdstat(&mut c, "get").unwrap().starts_with("calls=1,"));
    let kill = cmdstat(&mut c, "client|kill").unwrap();
    assert!(
        kill.starts_with("calls=1,") && kill.ends_with("failed_calls=1"),
        "{kill}"
    );
    assert!(cmdstat(&mut c, "config|resetstat")
        .unwrap()
        .starts_with("calls=1,"));
    let per_call = set
        .split(',')
        .find_map(|f| f.strip_prefix("usec_per_call="))
        .unwrap();
    assert_eq!(per_call.split('.').nth(1).map(str::len), Some(2));

    let errors = body(&c.cmd(&["INFO", "errorstats"])).to_string();
    assert_eq!(
        errors,
        "# Errorstats\r\nerrorstat_ERR:count=3\r\nerrorstat_WRONGPASS:count=1\r\n"
    );
    assert_eq!(
        info_field(body(&c.cmd(&["INFO", "stats"])), "total_error_replies").as_deref(),
        Some("4")
    );
    let stats = body(&c.cmd(&["INFO", "stats"])).to_string();
    assert!(
        info_field(&stats, "total_commands_processed")
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 8
    );
    assert!(
        info_field(&stats, "total_reads_processed")
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 8
    );
    assert!(
        info_field(&stats, "total_writes_processed")
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 8
    );

    // Histograms: LATENCY HISTOGRAM and INFO latencystats see the same calls.
    let h = c.cmd(&["LATENCY", "HISTOGRAM", "set"]);
    assert!(
        h.starts_with("*2\r\n$3\r\nset\r\n*4\r\n$5\r\ncalls\r\n:3\r\n$14\r\nhistogram_usec\r\n*"),
        "{h}"
    );
    let all = c.cmd(&["LATENCY", "HISTOGRAM"]);
    assert!(all.contains("$3\r\nget\r\n") && all.contains("$11\r\nclient|kill\r\n"));
    let cfg = c.cmd(&["LATENCY", "HISTOGRAM", "config", "nosuch"]);
    assert!(
        cfg.starts_with("*2\r\n$16\r\nconfig|resetstat\r\n"),
        "{cfg}"
    );
    let lat = body(&c.cmd(&["INFO", "latencystats"])).to_string();
    let p = info_field(&lat, "latency_percentiles_usec_set").unwrap();
    assert!(
        p.starts_with("p50=") && p.contains(",p99=") && p.contains(",p99.9="),
        "{p}"
    );

    c.cmd(&["CONFIG", "RESETSTAT"]);
    assert_eq!(cmdstat(&mut c, "set"), None);
    assert_eq!(body(&c.cmd(&["INFO", "errorstats"])), "# Errorstats\r\n");
    assert_eq!(c.cmd(&["LATENCY", "HISTOGRAM", "set"]), "*0\r\n");
}

#[test]
fn config_get_set_round_trip_and_errors() {
    let srv = common::Server::start(&[]);
    let mut c = Raw::connect(srv.port);
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "10mb"]), "+OK\r\n");
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "maxmemory"]),
        "*2\r\n$9\r\nmaxmemory\r\n$8\r\n10485760\r\n"
    );
    assert_eq!(
        info_field(body(&c.cmd(&["INFO", "memory"])), "maxmemory").as_deref(),
        Some("10485760")
    );
    assert_eq!(
        info_field(body(&c.cmd(&["INFO", "memory"])), "maxmemory_human").as_deref(),
        Some("10.00M")
    );
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "maxmemory",
            "0",
            "maxmemory-policy",
            "allkeys-lru"
        ]),
        "+OK\r\n"
    );
    assert_eq!(
        info_field(body(&c.cmd(&["INFO", "memory"])), "maxmemory_policy").as_deref(),
        Some("allkeys-lru")
    );
    let two = c.cmd(&[
        "CONFIG",
        "GET",
        "maxmemory",
        "maxmemory-policy",
        "maxmemory",
    ]);
    assert!(
        two.starts_with("*4\r\n") && two.contains("allkeys-lru"),
        "{two}"
    );
    assert_eq!(c.cmd(&["CONFIG", "GET", "nosuch*"]), "*0\r\n");
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory", "abc"]),
        "-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value\r\n"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "nosuch", "1"]),
        "-ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'\r\n"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory", "1", "port"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory"]),
        "-ERR wrong number of arguments for 'config|set' command\r\n"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory", "1", "maxmemory", "2"]),
        "-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - duplicate parameter\r\n"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "REWRITE"]),
        "-ERR The server is running without a config file\r\n"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "RESETSTAT", "x"]),
        "-ERR wrong number of arguments for 'config|resetstat' command\r\n"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "FOO"]),
        "-ERR unknown subcommand 'FOO'. Try CONFIG HELP.\r\n"
    );
    assert!(c
        .cmd(&["CONFIG", "HELP"])
        .starts_with("*11\r\n+CONFIG <subcommand>"));
    c.cmd(&["HELLO", "3"]);
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "maxmemory"]),
        "%1\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n"
    );
}

/// Kills a child process when dropped.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn config_rewrite_writes_the_file() {
    let dir = std::env::temp_dir().join(format!("vireo-intro-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("vireo.conf");
    std::fs::write(&file, "# my config\nmaxmemory 1mb\n").unwrap();
    // The config file must come first, so this server is started by hand.
    let port = common::free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_vireo"))
        .arg(&file)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn vireo");
    let _guard = KillOnDrop(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !common::answers_ping(port) {
        assert!(Instant::now() < deadline, "vireo did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut c = Raw::connect(port);
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "2mb"]), "+OK\r\n");
    assert_eq!(c.cmd(&["CONFIG", "REWRITE"]), "+OK\r\n");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("# my config") && text.contains("maxmemory 2097152"),
        "{text}"
    );
    let cf = info_field(body(&c.cmd(&["INFO", "server"])), "config_file").unwrap();
    assert!(cf.ends_with("vireo.conf"), "{cf}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn slowlog_records_commands() {
    let srv = common::Server::start(&[]);
    let mut c = Raw::connect(srv.port);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd(&["SLOWLOG", "RESET"]), "+OK\r\n");
    c.cmd(&["CLIENT", "SETNAME", "slowpoke"]);
    let info = c.cmd(&["CLIENT", "INFO"]);
    let addr = body(&info)
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap()
        .to_string();
    c.cmd(&["SET", "k", "v"]);
    let e = c.cmd(&["SLOWLOG", "GET", "1"]);
    assert!(e.starts_with("*1\r\n*6\r\n:"), "{e}");
    let tail = format!(
        "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n{}{}",
        bulk(&addr),
        bulk("slowpoke")
    );
    assert!(e.ends_with(&tail), "{e}");
    // Entries so far: RESET, SETNAME, CLIENT INFO, SET, SLOWLOG GET.
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]), ":5\r\n");
    assert!(c.cmd(&["SLOWLOG", "GET", "-1"]).starts_with("*6\r\n"));
    assert_eq!(c.cmd(&["SLOWLOG", "GET", "0"]), "*0\r\n");
    assert_eq!(
        c.cmd(&["SLOWLOG", "GET", "-2"]),
        "-ERR count should be greater than or equal to -1\r\n"
    );
    assert_eq!(
        c.cmd(&["SLOWLOG", "GET", "x"]),
        "-ERR count should be greater than or equal to -1\r\n"
    );
    assert_eq!(
        c.cmd(&["SLOWLOG", "GET", "1", "2"]),
        "-ERR unknown subcommand or wrong number of arguments for 'GET'. Try SLOWLOG HELP.\r\n"
    );
    assert!(c
        .cmd(&["SLOWLOG", "HELP"])
        .starts_with("*12\r\n+SLOWLOG <subcommand>"));
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
    c.cmd(&["SLOWLOG", "RESET"]);
    c.cmd(&["SET", "k", "v"]);
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]), ":0\r\n");
}

/// MONITOR and SLOWLOG hide secrets as Redis does, and a function's
/// FCALL line comes before the commands it runs.
#[test]
fn monitor_and_slowlog_redact_secrets_and_order_fcall_first() {
    let srv = common::Server::start(&[]);
    let mut m = Raw::connect(srv.port);
    assert_eq!(m.cmd(&["MONITOR"]), "+OK\r\n");
    let mut c = Raw::connect(srv.port);
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    c.cmd(&["AUTH", "user", "secret"]);
    c.cmd(&["HELLO", "2", "AUTH", "user", "secret"]);
    c.cmd(&["FUNCTION", "LOAD", "#!lua name=t\nredis.register_function('t', function() return redis.call('set', 'foo', 'bar') end)"]);
    c.cmd(&["FCALL", "t", "0"]);
    assert!(m
        .line()
        .ends_with(" \"AUTH\" \"(redacted)\" \"(redacted)\"\r\n"));
    let hello = m.line();
    assert!(
        hello.ends_with(" \"HELLO\" \"2\" \"AUTH\" \"(redacted)\" \"(redacted)\"\r\n"),
        "{hello}"
    );
    assert!(m.line().contains("\"FUNCTION\" \"LOAD\""));
    assert!(m.line().ends_with(" \"FCALL\" \"t\" \"0\"\r\n"));
    assert!(m.line().ends_with(" [0 lua] \"set\" \"foo\" \"bar\"\r\n"));
    c.cmd(&["SLOWLOG", "RESET"]);
    c.cmd(&["CONFIG", "SET", "masterauth", "pw"]);
    let log = c.cmd(&["SLOWLOG", "GET", "1"]);
    assert!(
        log.contains("$6\r\nCONFIG\r\n$3\r\nSET\r\n$10\r\nmasterauth\r\n$10\r\n(redacted)\r\n"),
        "{log}"
    );
}

#[test]
fn monitor_receives_other_clients_commands() {
    let srv = common::Server::start(&[]);
    let mut m = Raw::connect(srv.port);
    assert_eq!(m.cmd(&["MONITOR"]), "+OK\r\n");
    let mut c = Raw::connect(srv.port);
    c.cmd(&["SELECT", "3"]);
    c.cmd(&["SET", "key", "a \"b\"\n"]);
    let info = c.cmd(&["CLIENT", "INFO"]);
    let addr = body(&info)
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap()
        .to_string();
    let line = m.line();
    // The database shown is the one selected once the command ran.
    assert!(
        line.starts_with('+') && line.ends_with(&format!(" [3 {addr}] \"SELECT\" \"3\"\r\n")),
        "{line}"
    );
    let line = m.line();
    assert!(
        line.ends_with(&format!(
            " [3 {addr}] \"SET\" \"key\" \"a \\\"b\\\"\\n\"\r\n"
        )),
        "{line}"
    );
    let stamp = line[1..].split(' ').next().unwrap();
    let (secs, micros) = stamp.split_once('.').unwrap();
    assert_eq!(micros.len(), 6);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(now.abs_diff(secs.parse().unwrap()) < 60);
    assert!(m.line().ends_with("\"CLIENT\" \"INFO\"\r\n"));
    // Admin commands (CLIENT LIST) are not fed; the monitor shows as 'O'.
    let list = c.cmd(&["CLIENT", "LIST"]);
    assert!(body(&list)
        .lines()
        .any(|l| l.contains(" flags=O ") && l.contains(" cmd=monitor ")));
    c.cmd(&["PING"]);
    assert!(m.line().ends_with("\"PING\"\r\n"));
    // MONITOR clients count as replicas, not connected clients, in INFO.
    assert_eq!(
        info_field(body(&c.cmd(&["INFO", "clients"])), "connected_clients").as_deref(),
        Some("1")
    );
    // A MONITOR that disconnects is dropped from the list of monitors.
    drop(m);
    let deadline = Instant::now() + Duration::from_secs(5);
    while body(&c.cmd(&["CLIENT", "LIST"])).lines().count() != 1 {
        assert!(Instant::now() < deadline, "the monitor did not go away");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
}

#[test]
fn time_and_lastsave_shapes() {
    let srv = common::Server::start(&[]);
    let mut c = common::Server::conn(&srv);
    let t: Vec<String> = redis::cmd("TIME").query(&mut c).unwrap();
    assert_eq!(t.len(), 2);
    let secs: u64 = t[0].parse().unwrap();
    let micros: u64 = t[1].parse().unwrap();
    assert!(micros < 1_000_000);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(now.abs_diff(secs) < 60);
    let last: u64 = redis::cmd("LASTSAVE").query(&mut c).unwrap();
    assert!(last <= now + 1 && now - last < 600);
}

#[test]
fn memory_and_latency_commands() {
    let srv = common::Server::start(&[]);
    let mut c = Raw::connect(srv.port);
    c.cmd(&["SET", "foo", "bar"]);
    let usage = c.cmd(&["MEMORY", "USAGE", "foo"]);
    let n: u64 = usage[1..usage.len() - 2].parse().unwrap();
    assert!((20..1000).contains(&n), "{usage}");
    assert_eq!(c.cmd(&["MEMORY", "USAGE", "nokey"]), "$-1\r\n");
    assert_eq!(c.cmd(&["MEMORY", "USAGE", "foo", "SAMPLES", "0"]), usage);
    assert_eq!(
        c.cmd(&["MEMORY", "USAGE", "foo", "SAMPLES"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        c.cmd(&["MEMORY", "USAGE", "foo", "SAMPLES", "-1"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        c.cmd(&["MEMORY", "USAGE", "foo", "SAMPLES", "x"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    let stats = c.cmd(&["MEMORY", "STATS"]);
    assert!(
        stats.starts_with("*56\r\n$14\r\npeak.allocated\r\n:"),
        "{stats}"
    );
    assert!(stats.contains("$4\r\ndb.0\r\n*6\r\n$23\r\noverhead.hashtable.main\r\n"));
    assert!(stats.contains("$10\r\nkeys.count\r\n:1\r\n"));
    assert!(!body(&c.cmd(&["MEMORY", "DOCTOR"])).is_empty());
    assert_eq!(c.cmd(&["MEMORY", "PURGE"]), "+OK\r\n");
    assert_eq!(
        c.cmd(&["MEMORY", "MALLOC-STATS"]),
        bulk("Stats not supported for the current allocator")
    );
    assert!(c.cmd(&["MEMORY", "HELP"]).starts_with("*14\r\n"));

    assert_eq!(c.cmd(&["LATENCY", "LATEST"]), "*0\r\n");
    assert_eq!(c.cmd(&["LATENCY", "HISTORY", "command"]), "*0\r\n");
    assert_eq!(c.cmd(&["LATENCY", "RESET"]), ":0\r\n");
    assert_eq!(
        c.cmd(&["LATENCY", "GRAPH", "command"]),
        "-ERR No samples available for event 'command'\r\n"
    );
    assert!(body(&c.cmd(&["LATENCY", "DOCTOR"])).contains("disabled"));
    assert!(c
        .cmd(&["LATENCY", "HELP"])
        .starts_with("*17\r\n+LATENCY <subcommand>"));
    c.cmd(&["HELLO", "3"]);
    let h = c.cmd(&["LATENCY", "HISTOGRAM", "set"]);
    assert!(
        h.starts_with(
            "%1\r\n$3\r\nset\r\n%2\r\n$5\r\ncalls\r\n:1\r\n$14\r\nhistogram_usec\r\n%1\r\n:"
        ),
        "{h}"
    );
    let stats = c.cmd(&["MEMORY", "STATS"]);
    assert!(
        stats.starts_with("%28\r\n") && stats.contains("$18\r\ndataset.percentage\r\n,"),
        "{stats}"
    );
}

#[test]
fn shutdown_exits_with_status_zero() {
    let mut srv = common::Server::start(&[]);
    let mut c = Raw::connect(srv.port);
    assert_eq!(
        c.cmd(&["SHUTDOWN", "ABORT"]),
        "-ERR No shutdown in progress.\r\n"
    );
    assert_eq!(c.cmd(&["SHUTDOWN", "FOO"]), "-ERR syntax error\r\n");
    assert_eq!(
        c.cmd(&["SHUTDOWN", "NOSAVE", "SAVE"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        c.cmd(&["SHUTDOWN", "ABORT", "NOW"]),
        "-ERR syntax error\r\n"
    );
    c.cmd(&["MULTI"]);
    assert_eq!(
        c.cmd(&["SHUTDOWN"]),
        "-ERR Command not allowed inside a transaction\r\n"
    );
    c.cmd(&["DISCARD"]);
    c.send(&["SHUTDOWN", "NOSAVE"]);
    assert!(c.closed(), "SHUTDOWN closes the connection without a reply");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = srv.child().try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
}
