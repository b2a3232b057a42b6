//! `maxmemory-clients` (Redis 7.0 client eviction): the option's CONFIG
//! SET/GET forms, clients over the limit disconnected biggest first
//! (whether their memory is a query buffer, unread replies or a queued
//! transaction), CLIENT NO-EVICT, and INFO `evicted_clients`.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{err, ok, q};

fn config_get(con: &mut redis::Connection, name: &str) -> String {
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query(con)
        .unwrap();
    v[1].clone()
}

fn config_set(con: &mut redis::Connection, name: &str, value: &str) {
    ok(con, &["CONFIG", "SET", name, value]);
}

fn evicted_clients(con: &mut redis::Connection) -> u64 {
    common::info_field(con, "evicted_clients").parse().unwrap()
}

/// Field `f` of the CLIENT LIST line of the client named `name`.
fn client_field(con: &mut redis::Connection, name: &str, f: &str) -> Option<String> {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(con).unwrap();
    let needle = format!(" name={name} ");
    let line = list.lines().find(|l| l.contains(&needle))?;
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{f}=")))
        .map(String::from)
}

fn exists(con: &mut redis::Connection, name: &str) -> bool {
    client_field(con, name, "id").is_some()
}

fn tot_mem(con: &mut redis::Connection, name: &str) -> usize {
    client_field(con, name, "tot-mem")
        .unwrap_or_else(|| panic!("no client {name}"))
        .parse()
        .unwrap()
}

/// Waits up to ten seconds for `cond`.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A raw connection named `name` (its CLIENT SETNAME answered).
fn named_socket(port: u16, name: &str) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let cmd = format!(
        "*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n${}\r\n{name}\r\n",
        name.len()
    );
    s.write_all(cmd.as_bytes()).unwrap();
    let mut ok = [0u8; 5];
    s.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"+OK\r\n");
    s
}

/// Sends the start of a command whose one argument is `n` bytes long, all
/// of them but the final CRLF, so the server keeps it all in the query
/// buffer. Write errors (the server closed on us) are ignored.
fn fill_query_buffer(s: &mut TcpStream, n: usize) {
    let mut bytes = format!("*1\r\n${n}\r\n").into_bytes();
    bytes.resize(bytes.len() + n, b'v');
    let _ = s.write_all(&bytes);
}

/// CLIENT LIST's `qbuf` once [`fill_query_buffer`] sent `n` bytes.
fn qbuf_of(n: usize) -> String {
    (n + format!("*1\r\n${n}\r\n").len()).to_string()
}

/// True once the server has closed `s` (EOF or a reset).
fn closed(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return true,
            Ok(_) => {}
        }
    }
}

/// A server and a control connection that is itself exempt from eviction.
fn setup(limit: &str) -> (common::Server, redis::Connection) {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    ok(&mut con, &["CLIENT", "SETNAME", "control"]);
    ok(&mut con, &["CLIENT", "NO-EVICT", "on"]);
    config_set(&mut con, "maxmemory-clients", limit);
    (srv, con)
}

#[test]
fn config_accepts_bytes_and_percentages() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    assert_eq!(config_get(&mut con, "maxmemory-clients"), "0");
    for (set, get) in [
        ("10%", "10%"),
        ("100%", "100%"),
        ("0%", "0"),
        ("1mb", "1048576"),
        ("3000000", "3000000"),
        ("2k", "2000"),
        ("0", "0"),
    ] {
        config_set(&mut con, "maxmemory-clients", set);
        assert_eq!(
            config_get(&mut con, "maxmemory-clients"),
            get,
            "after {set}"
        );
    }
    let e = err(&mut con, &["CONFIG", "SET", "maxmemory-clients", "101%"]);
    assert!(
        e.contains("percentage argument must be less or equal to 100"),
        "{e}"
    );
    for bad in ["abc", "-5%", "%", "5.5%", "-1"] {
        let e = err(&mut con, &["CONFIG", "SET", "maxmemory-clients", bad]);
        assert!(
            e.contains("argument must be a memory or percent value"),
            "{bad}: {e}"
        );
    }
    // A failed SET leaves the value alone; the option is given at start-up too.
    assert_eq!(config_get(&mut con, "maxmemory-clients"), "0");
    drop(srv);
    let srv = common::Server::start(&["--maxmemory-clients", "5%"]);
    let mut con = srv.conn();
    assert_eq!(config_get(&mut con, "maxmemory-clients"), "5%");
}

#[test]
fn client_with_a_big_query_buffer_is_evicted() {
    let (srv, mut con) = setup("3000000");
    assert_eq!(evicted_clients(&mut con), 0);
    // Under the limit: the client stays, and tot-mem shows its buffer.
    let mut small = named_socket(srv.port, "small");
    fill_query_buffer(&mut small, 1_000_000);
    wait_for("qbuf of 1 MB", || {
        client_field(&mut con, "small", "qbuf") == Some(qbuf_of(1_000_000))
    });
    assert!(tot_mem(&mut con, "small") >= 1_000_000);
    assert_eq!(evicted_clients(&mut con), 0);
    // Over it: disconnected.
    let mut big = named_socket(srv.port, "big");
    fill_query_buffer(&mut big, 3_000_000);
    assert!(closed(&mut big));
    wait_for("eviction", || !exists(&mut con, "big"));
    assert_eq!(evicted_clients(&mut con), 1);
    assert!(exists(&mut con, "small"));
    assert!(exists(&mut con, "control"));
    // CONFIG RESETSTAT zeroes the counter.
    ok(&mut con, &["CONFIG", "RESETSTAT"]);
    assert_eq!(evicted_clients(&mut con), 0);
}

#[test]
fn client_with_unread_replies_is_evicted() {
    let (srv, mut con) = setup("3000000");
    ok(&mut con, &["SET", "big", &"x".repeat(200_000)]);
    let mut lazy = named_socket(srv.port, "lazy");
    // Keeps asking for the big value without ever reading a reply.
    let get = b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n".repeat(5);
    let deadline = Instant::now() + Duration::from_secs(20);
    // (One CLIENT LIST per check: the client may go between two.)
    while let Some(mem) = client_field(&mut con, "lazy", "tot-mem") {
        assert!(Instant::now() < deadline, "never evicted");
        assert!(mem.parse::<usize>().unwrap() < 3_000_000 * 2);
        if lazy.write_all(&get).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    wait_for("eviction", || !exists(&mut con, "lazy"));
    assert_eq!(evicted_clients(&mut con), 1);
    assert!(closed(&mut lazy));
}

#[test]
fn client_with_a_big_transaction_is_evicted() {
    let (srv, mut con) = setup("3000000");
    let mut c = srv.conn();
    ok(&mut c, &["CLIENT", "SETNAME", "multi"]);
    let value = "v".repeat(750_000);
    // A transaction whose queued commands stay under the limit is fine.
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["SET", "k", &value]);
    ok(&mut c, &["SET", "k", &value]);
    let multi_mem: usize = client_field(&mut con, "multi", "multi-mem")
        .unwrap()
        .parse()
        .unwrap();
    assert!(multi_mem >= 1_500_000, "multi-mem={multi_mem}");
    ok(&mut c, &["EXEC"]);
    assert_eq!(client_field(&mut con, "multi", "multi-mem").unwrap(), "0");
    // One that grows past it is cut off.
    ok(&mut c, &["MULTI"]);
    let mut failed = false;
    for _ in 0..6 {
        if q(&mut c, &["SET", "k", &value]).is_err() {
            failed = true;
            break;
        }
    }
    assert!(failed, "the client was never evicted");
    assert!(!exists(&mut con, "multi"));
    assert_eq!(evicted_clients(&mut con), 1);
}

#[test]
fn no_evict_clients_are_spared_until_they_opt_out() {
    let (srv, mut con) = setup("3000000");
    ok(&mut con, &["SET", "big", &"x".repeat(500_000)]);
    // A query buffer over the limit on a NO-EVICT client is tolerated.
    let mut kept = named_socket(srv.port, "kept");
    kept.write_all(b"*3\r\n$6\r\nCLIENT\r\n$8\r\nNO-EVICT\r\n$2\r\non\r\n")
        .unwrap();
    let mut reply = [0u8; 5];
    kept.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"+OK\r\n");
    fill_query_buffer(&mut kept, 3_500_000);
    wait_for("qbuf of 3.5 MB", || {
        client_field(&mut con, "kept", "qbuf") == Some(qbuf_of(3_500_000))
    });
    assert!(tot_mem(&mut con, "kept") > 3_000_000);
    assert!(client_field(&mut con, "kept", "flags")
        .unwrap()
        .contains('e'));
    std::thread::sleep(Duration::from_millis(300));
    assert!(exists(&mut con, "kept"));
    assert_eq!(evicted_clients(&mut con), 0);
    // Its memory still counts: another client over what is left goes.
    let mut other = named_socket(srv.port, "other");
    fill_query_buffer(&mut other, 100_000);
    assert!(closed(&mut other));
    assert_eq!(evicted_clients(&mut con), 1);
    assert!(exists(&mut con, "kept"));
    drop(kept);

    // A NO-EVICT client piles up unread replies, then turns NO-EVICT off:
    // it is evicted then.
    let mut lazy = named_socket(srv.port, "lazy");
    let mut cmds = b"*3\r\n$6\r\nCLIENT\r\n$8\r\nNO-EVICT\r\n$2\r\non\r\n".to_vec();
    cmds.extend(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n".repeat(40));
    lazy.write_all(&cmds).unwrap();
    wait_for("10 MB of replies", || {
        client_field(&mut con, "lazy", "tot-mem")
            .is_some_and(|m| m.parse::<usize>().unwrap() > 5_000_000)
    });
    assert!(exists(&mut con, "lazy"));
    lazy.write_all(b"*3\r\n$6\r\nCLIENT\r\n$8\r\nNO-EVICT\r\n$3\r\noff\r\n")
        .unwrap();
    wait_for("eviction", || !exists(&mut con, "lazy"));
    assert_eq!(evicted_clients(&mut con), 2);
}

#[test]
fn percentage_of_maxmemory() {
    let (srv, mut con) = setup("0");
    config_set(&mut con, "maxmemory", "40mb");
    config_set(&mut con, "maxmemory-clients", "10%");
    // 10% of 40 MiB is about 4.2 MB: 1 MB fits, 5 MB does not. (The
    // small client must stay below half the limit: the big one's buffer
    // passes through every size on its way up, and whichever of the two is
    // bigger when the total crosses the limit is the one evicted.)
    let mut small = named_socket(srv.port, "small");
    fill_query_buffer(&mut small, 1_000_000);
    wait_for("qbuf of 1 MB", || {
        client_field(&mut con, "small", "qbuf") == Some(qbuf_of(1_000_000))
    });
    let mut big = named_socket(srv.port, "big");
    fill_query_buffer(&mut big, 5_000_000);
    assert!(closed(&mut big));
    assert!(exists(&mut con, "small"));
    assert_eq!(evicted_clients(&mut con), 1);
    // Without maxmemory a percentage means no limit.
    config_set(&mut con, "maxmemory", "0");
    let mut big = named_socket(srv.port, "big2");
    fill_query_buffer(&mut big, 5_000_000);
    wait_for("qbuf of 5 MB", || {
        client_field(&mut con, "big2", "qbuf") == Some(qbuf_of(5_000_000))
    });
    assert_eq!(evicted_clients(&mut con), 1);
    // Setting maxmemory back evicts at once: the biggest client first,
    // and only as many as needed.
    config_set(&mut con, "maxmemory", "40mb");
    assert!(!exists(&mut con, "big2"));
    assert!(exists(&mut con, "small"));
    assert_eq!(evicted_clients(&mut con), 2);
}

#[test]
fn lowering_the_limit_evicts_biggest_clients_first() {
    let (srv, mut con) = setup("0");
    let sizes = [
        ("s1", 130_000),
        ("s2", 130_000),
        ("m1", 1_000_000),
        ("m2", 1_000_000),
        ("l1", 3_000_000),
        ("l2", 3_000_000),
    ];
    let mut socks = Vec::new();
    for (name, n) in sizes {
        let mut s = named_socket(srv.port, name);
        fill_query_buffer(&mut s, n);
        wait_for("a full query buffer", || {
            client_field(&mut con, name, "qbuf") == Some(qbuf_of(n))
        });
        socks.push(s);
    }
    let mem = |con: &mut redis::Connection, names: &[&str]| -> usize {
        names.iter().map(|n| tot_mem(con, n)).sum()
    };
    let all = ["s1", "s2", "m1", "m2", "l1", "l2", "control"];
    // Room for everything but one of the two largest: only one goes.
    let limit = mem(&mut con, &all) - tot_mem(&mut con, "l2") / 2;
    config_set(&mut con, "maxmemory-clients", &limit.to_string());
    let left: Vec<&str> = all
        .iter()
        .copied()
        .filter(|n| exists(&mut con, n))
        .collect();
    assert_eq!(left.len(), 6, "{left:?}");
    assert!(
        left.contains(&"m1")
            && left.contains(&"m2")
            && left.contains(&"s1")
            && left.contains(&"s2")
    );
    assert_eq!(evicted_clients(&mut con), 1);
    // Room for the small ones only: the middle ones and the other large
    // one go, the small ones stay.
    let limit = mem(&mut con, &["s1", "s2", "control"]) + 100_000;
    config_set(&mut con, "maxmemory-clients", &limit.to_string());
    for n in ["l1", "l2", "m1", "m2"] {
        assert!(!exists(&mut con, n), "{n} still connected");
    }
    for n in ["s1", "s2", "control"] {
        assert!(exists(&mut con, n), "{n} was evicted");
    }
    assert_eq!(evicted_clients(&mut con), 4);
    drop(socks);
}
