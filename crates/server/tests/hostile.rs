//! Hostile clients (issue 2, "Bad input"): malformed RESP, absurd declared
//! lengths, huge commands and pipelines, clients that vanish mid-command or
//! never read, buffer limits, slow and idle clients, `maxclients`, and a
//! seeded random-input harness. Every case must end in Redis's error reply
//! and/or a closed connection, with the server up, other clients served and
//! memory bounded.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use common::{q, Server};

/// What a raw client saw: every byte received, and whether the server
/// closed the connection (rather than going quiet).
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    bytes: String,
    closed: bool,
}

/// A raw socket to `port` with a read timeout.
fn raw_conn(port: u16, read_timeout: Duration) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(read_timeout)).unwrap();
    s
}

/// Reads until the server closes the connection (EOF or reset) or nothing
/// arrives for `quiet`.
fn read_until_quiet(s: &mut TcpStream, quiet: Duration) -> Seen {
    s.set_read_timeout(Some(quiet)).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    let closed = loop {
        match s.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                break false
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break true,
        }
    };
    Seen {
        bytes: String::from_utf8_lossy(&out).into_owned(),
        closed,
    }
}

/// Sends `bytes` on a fresh connection (a write failing because the server
/// already closed is fine) and reports what came back.
fn exchange(port: u16, bytes: &[u8], quiet: Duration) -> Seen {
    let mut s = raw_conn(port, quiet);
    let _ = s.write_all(bytes);
    read_until_quiet(&mut s, quiet)
}

/// Resident memory of a process, in KiB (`field` is e.g. "VmRSS" or
/// "VmHWM", the peak).
fn proc_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// A numeric field of an INFO section.
fn info_u64(con: &mut redis::Connection, section: &str, field: &str) -> u64 {
    let text: String = redis::cmd("INFO").arg(section).query(con).expect("INFO");
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
}

/// Waits (up to 10 s) until exactly `n` clients are connected; returns
/// whether that happened.
fn wait_for_clients(con: &mut redis::Connection, n: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if info_u64(con, "clients", "connected_clients") == n {
            return true;
        }
        thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A PING round trip on a raw connection: afterwards the server has
/// surely adopted it (so client counts include it).
fn greet(s: &mut TcpStream) {
    s.write_all(b"PING\r\n").unwrap();
    let mut got = [0u8; 7];
    s.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"+PONG\r\n");
}

/// Asserts the server still serves a brand-new client.
fn assert_serving(srv: &Server) {
    let mut con = srv.conn();
    assert_eq!(
        q(&mut con, &["PING"]).unwrap(),
        redis::Value::SimpleString("PONG".into())
    );
}

/// A RESP multibulk command.
fn resp(args: &[&[u8]]) -> Vec<u8> {
    let mut b = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        b.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        b.extend_from_slice(a);
        b.extend_from_slice(b"\r\n");
    }
    b
}

/// True when Debian's redis-server is installed (the reference).
fn have_redis() -> bool {
    std::process::Command::new("redis-server")
        .arg("--version")
        .output()
        .is_ok()
}

const INVALID_MBULK: &str = "-ERR Protocol error: invalid multibulk length\r\n";
const INVALID_BULK: &str = "-ERR Protocol error: invalid bulk length\r\n";
const UNBALANCED: &str = "-ERR Protocol error: unbalanced quotes in request\r\n";

/// Malformed (and oddly formed) requests with Redis 7.0.15's exact answer
/// and whether it closes the connection afterwards.
fn protocol_cases() -> Vec<(Vec<u8>, &'static str, bool)> {
    let big = |prefix: &[u8], fill: u8| {
        let mut v = prefix.to_vec();
        v.resize(prefix.len() + 70_000, fill);
        v
    };
    vec![
        (b"*1\r\n$x\r\n".to_vec(), INVALID_BULK, true),
        (b"*x\r\n".to_vec(), INVALID_MBULK, true),
        (b"*\r\n".to_vec(), INVALID_MBULK, true),
        (b"*01\r\n".to_vec(), INVALID_MBULK, true),
        (b"*1 \r\n".to_vec(), INVALID_MBULK, true),
        (b"*+1\r\n".to_vec(), INVALID_MBULK, true),
        (b"*2147483648\r\n".to_vec(), INVALID_MBULK, true),
        (b"*99999999999999999999\r\n".to_vec(), INVALID_MBULK, true),
        // Counts up to INT_MAX are accepted (and wait for their arguments).
        (b"*2147483647\r\n".to_vec(), "", false),
        (b"*1048577\r\n".to_vec(), "", false),
        (b"*-1\r\nPING\r\n".to_vec(), "+PONG\r\n", false),
        (b"*0\r\nPING\r\n".to_vec(), "+PONG\r\n", false),
        // An empty command inside a pipeline, which Vireo's look-ahead
        // scans before running the first command.
        (
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*0\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
                .to_vec(),
            "+OK\r\n$1\r\nv\r\n",
            false,
        ),
        (
            b"*1\r\n:1\r\n".to_vec(),
            "-ERR Protocol error: expected '$', got ':'\r\n",
            true,
        ),
        (
            b"*1\r\n+PING\r\n".to_vec(),
            "-ERR Protocol error: expected '$', got '+'\r\n",
            true,
        ),
        (b"*1\r\n$-1\r\n".to_vec(), INVALID_BULK, true),
        (b"*1\r\n$\r\n".to_vec(), INVALID_BULK, true),
        (b"*1\r\n$04\r\nPING\r\n".to_vec(), INVALID_BULK, true),
        (b"*1\r\n$536870913\r\n".to_vec(), INVALID_BULK, true),
        (b"*1\r\n$536870912\r\nabc".to_vec(), "", false),
        (b"*1\r\n$4\r\nPI".to_vec(), "", false),
        // Commands before the bad one run; then the error, then the close.
        (
            b"PING\r\n*1\r\n$x\r\nPING\r\n".to_vec(),
            "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n",
            true,
        ),
        (
            big(b"*1\r\n$", b'1'),
            "-ERR Protocol error: too big bulk count string\r\n",
            true,
        ),
        (
            big(b"*", b'1'),
            "-ERR Protocol error: too big mbulk count string\r\n",
            true,
        ),
        (
            big(b"", b'x'),
            "-ERR Protocol error: too big inline request\r\n",
            true,
        ),
        // Redis skips the bytes after a payload and after '\r' unchecked.
        (
            b"*3\r\n$3\r\nSET\r\n$4\r\nhost\r\n$1\r\nbXXPING\r\n".to_vec(),
            "+OK\r\n+PONG\r\n",
            false,
        ),
        (b"*1\r\n$4\r\nPING\rX".to_vec(), "+PONG\r\n", false),
        (
            b"*1\r\n$4\r\nPING\r\nPING\r\n".to_vec(),
            "+PONG\r\n+PONG\r\n",
            false,
        ),
        // Anything not starting with '*' is an inline command.
        (
            b"$4\r\nPING\r\n".to_vec(),
            "-ERR unknown command '$4', with args beginning with: \r\n+PONG\r\n",
            false,
        ),
        (
            b":1\r\n".to_vec(),
            "-ERR unknown command ':1', with args beginning with: \r\n",
            false,
        ),
        (b"\x00\x01\x02\r\n".to_vec(), "", false),
        (b"\r\n\r\nPING\r\n".to_vec(), "+PONG\r\n", false),
        (b"PING\n".to_vec(), "+PONG\r\n", false),
        (
            b"SET hostile:a \"b c\"\r\nGET hostile:a\r\n".to_vec(),
            "+OK\r\n$3\r\nb c\r\n",
            false,
        ),
        (
            b"ECHO \"\\x41\\n\" 'it\\'s'\r\n".to_vec(),
            "-ERR wrong number of arguments for 'echo' command\r\n",
            false,
        ),
        (b"ECHO \"\\x41\\n\"\r\n".to_vec(), "$2\r\nA\n\r\n", false),
        (b"SET a \"b\r\n".to_vec(), UNBALANCED, true),
        (b"SET a 'b\r\n".to_vec(), UNBALANCED, true),
        (b"SET a \"b\"c\r\n".to_vec(), UNBALANCED, true),
    ]
}

/// Runs every protocol case on its own connection, in parallel.
fn run_protocol_cases(port: u16) -> Vec<Seen> {
    let cases = protocol_cases();
    thread::scope(|s| {
        let handles: Vec<_> = cases
            .iter()
            .map(|(input, _, _)| s.spawn(move || exchange(port, input, Duration::from_millis(400))))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Asserts every protocol case gets its expected reply and close from the
/// server at `port` (`who` names it in failures).
fn check_protocol_cases(port: u16, who: &str) {
    let seen = run_protocol_cases(port);
    for ((input, reply, closed), got) in protocol_cases().iter().zip(seen) {
        let shown = String::from_utf8_lossy(&input[..input.len().min(40)]);
        assert_eq!(
            got,
            Seen {
                bytes: reply.to_string(),
                closed: *closed
            },
            "{who}: input {shown:?}"
        );
    }
}

#[test]
fn malformed_resp_gets_redis_errors_then_close() {
    let srv = Server::start(&[]);
    check_protocol_cases(srv.port, "vireo");
    assert_serving(&srv);
}

/// The expectations above are Redis's own behaviour (skipped when
/// redis-server is not installed; `.ci/run` installs it).
#[test]
fn malformed_resp_expectations_match_real_redis() {
    if !have_redis() {
        eprintln!("redis-server not installed: skipping the reference check");
        return;
    }
    let redis = common::diff::start_redis();
    check_protocol_cases(redis.port, "redis-server");
}

#[test]
fn unauthenticated_clients_get_small_limits() {
    let srv = Server::start(&["--requirepass", "pw"]);
    let quiet = Duration::from_millis(400);
    let unauth_mbulk = "-ERR Protocol error: unauthenticated multibulk length\r\n";
    let unauth_bulk = "-ERR Protocol error: unauthenticated bulk length\r\n";
    for (input, reply, closed) in [
        (&b"*11\r\n"[..], unauth_mbulk, true),
        (b"*10\r\n$16385\r\n", unauth_bulk, true),
        (b"*10\r\n$16384\r\n", "", false),
        (
            b"*1\r\n$4\r\nPING\r\n",
            "-NOAUTH Authentication required.\r\n",
            false,
        ),
    ] {
        let want = Seen {
            bytes: reply.into(),
            closed,
        };
        assert_eq!(exchange(srv.port, input, quiet), want, "{input:?}");
    }
    // Once authenticated, the normal limits apply.
    let mut big = b"AUTH pw\r\n".to_vec();
    let keys: Vec<Vec<u8>> = (0..20).map(|i| format!("k{i}").into_bytes()).collect();
    let mut del: Vec<&[u8]> = vec![b"DEL"];
    del.extend(keys.iter().map(|k| k.as_slice()));
    big.extend(resp(&del));
    big.extend(resp(&[b"SET", b"v", &[b'x'; 20_000]]));
    let got = exchange(srv.port, &big, quiet);
    assert_eq!(got.bytes, "+OK\r\n:0\r\n+OK\r\n");
    assert!(!got.closed);
}

#[test]
fn giant_declared_lengths_do_not_allocate() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    let before = proc_kb(srv.pid(), "VmRSS");
    // 200 clients each announce a 512 MiB value and send three bytes of it.
    let n = 200;
    let mut hostile: Vec<TcpStream> = (0..n)
        .map(|_| {
            let mut s = raw_conn(srv.port, Duration::from_secs(5));
            s.write_all(b"*3\r\n$3\r\nSET\r\n$5\r\ngiant\r\n$536870912\r\nabc")
                .unwrap();
            s
        })
        .collect();
    assert!(wait_for_clients(&mut con, n + 1));
    thread::sleep(Duration::from_millis(300));
    assert_serving(&srv);
    let grown = proc_kb(srv.pid(), "VmRSS").saturating_sub(before);
    assert!(
        grown < 64 * 1024,
        "RSS grew by {grown} KiB for {n} announced 512 MiB bulks"
    );
    // Memory follows the bytes that really arrive.
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..4 {
        hostile[0].write_all(&chunk).unwrap();
    }
    thread::sleep(Duration::from_millis(300));
    let grown = proc_kb(srv.pid(), "VmRSS").saturating_sub(before);
    assert!(
        grown < 96 * 1024,
        "RSS grew by {grown} KiB after 4 MiB sent"
    );
    // They give up: nothing was stored, and every connection is released.
    hostile.clear();
    assert!(wait_for_clients(&mut con, 1));
    assert_eq!(
        q(&mut con, &["EXISTS", "giant"]).unwrap(),
        redis::Value::Int(0)
    );
}

#[test]
fn proto_max_bulk_len_is_enforced() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    q(&mut con, &["CONFIG", "SET", "proto-max-bulk-len", "1mb"]).unwrap();
    let quiet = Duration::from_millis(400);
    let over = exchange(
        srv.port,
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1048577\r\n",
        quiet,
    );
    assert_eq!(
        over,
        Seen {
            bytes: INVALID_BULK.into(),
            closed: true
        }
    );
    let mut at_limit = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1048576\r\n".to_vec();
    at_limit.resize(at_limit.len() + (1 << 20), b'v');
    at_limit.extend_from_slice(b"\r\n");
    let ok = exchange(srv.port, &at_limit, quiet);
    assert_eq!(
        ok,
        Seen {
            bytes: "+OK\r\n".into(),
            closed: false
        }
    );
    assert_eq!(
        q(&mut con, &["STRLEN", "k"]).unwrap(),
        redis::Value::Int(1 << 20)
    );
}

/// Writes `data` in 64 KiB pieces from another thread while this one waits
/// for `expect` (the whole reply) to come back; returns the elapsed time.
fn send_and_expect(port: u16, data: Vec<u8>, expect: &[u8]) -> Duration {
    let mut s = raw_conn(port, Duration::from_secs(120));
    let mut w = s.try_clone().unwrap();
    let start = Instant::now();
    let writer = thread::spawn(move || {
        for piece in data.chunks(64 * 1024) {
            w.write_all(piece).unwrap();
        }
    });
    let mut got = vec![0u8; expect.len()];
    s.read_exact(&mut got).expect("read replies");
    let elapsed = start.elapsed();
    writer.join().unwrap();
    assert!(
        got == expect,
        "replies differ (first bytes {:?})",
        String::from_utf8_lossy(&got[..got.len().min(100)])
    );
    elapsed
}

/// Generous bound for work that is linear in a million items: catches
/// quadratic behaviour (which would take hours) without timing flakiness.
fn linear_bound() -> Duration {
    if cfg!(debug_assertions) {
        Duration::from_secs(30)
    } else {
        Duration::from_secs(5)
    }
}

#[test]
fn million_argument_commands_run_in_linear_time() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    let pairs = 500_000;
    let keys: Vec<Vec<u8>> = (0..2 * pairs)
        .map(|i| format!("m{i}").into_bytes())
        .collect();
    let mut mset: Vec<&[u8]> = vec![b"MSET"];
    for k in &keys[..pairs] {
        mset.extend([k.as_slice(), b"v"]);
    }
    let took = send_and_expect(srv.port, resp(&mset), b"+OK\r\n");
    assert!(took < linear_bound(), "MSET of 1M arguments took {took:?}");
    assert_eq!(
        q(&mut con, &["DBSIZE"]).unwrap(),
        redis::Value::Int(pairs as i64)
    );
    let mut del: Vec<&[u8]> = vec![b"DEL"];
    del.extend(keys.iter().map(|k| k.as_slice()));
    let took = send_and_expect(srv.port, resp(&del), format!(":{pairs}\r\n").as_bytes());
    assert!(took < linear_bound(), "DEL of 1M keys took {took:?}");
    assert_eq!(q(&mut con, &["DBSIZE"]).unwrap(), redis::Value::Int(0));
}

#[test]
fn huge_pipeline_is_answered_in_order() {
    let srv = Server::start(&[]);
    let n = 100_000;
    let mut data = Vec::new();
    let mut expect = Vec::new();
    for i in 1..=n {
        if i % 10 == 0 {
            data.extend_from_slice(b"PING\r\n");
            expect.extend_from_slice(b"+PONG\r\n");
        }
        data.extend(resp(&[b"INCR", b"ctr"]));
        expect.extend_from_slice(format!(":{i}\r\n").as_bytes());
    }
    let took = send_and_expect(srv.port, data, &expect);
    assert!(took < linear_bound(), "pipeline took {took:?}");
}

#[test]
fn clients_vanishing_mid_command_do_not_disturb_others() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    q(&mut con, &["SET", "big", &"x".repeat(1 << 20)]).unwrap();
    // Half a bulk, then gone.
    for _ in 0..50 {
        let mut s = raw_conn(srv.port, Duration::from_secs(1));
        s.write_all(b"*3\r\n$3\r\nSET\r\n$4\r\nhalf\r\n$100\r\nonly-some-of-it")
            .unwrap();
    }
    // A command sent in full, then gone before its (large) reply is read.
    for i in 0..50 {
        let mut s = raw_conn(srv.port, Duration::from_secs(1));
        s.write_all(format!("SET gone{i} 1\r\nGET big\r\n").as_bytes())
            .unwrap();
    }
    // Bytes received before the close are still executed, as by Redis
    // (waited for: the server may not even have accepted them yet).
    let gone: Vec<String> = (0..50).map(|i| format!("gone{i}")).collect();
    let mut exists = vec!["EXISTS"];
    exists.extend(gone.iter().map(String::as_str));
    let deadline = Instant::now() + Duration::from_secs(10);
    while q(&mut con, &exists).unwrap() != redis::Value::Int(50) {
        assert!(
            Instant::now() < deadline,
            "commands of vanished clients lost"
        );
        thread::sleep(Duration::from_millis(20));
    }
    assert!(wait_for_clients(&mut con, 1), "connections leaked");
    assert_eq!(
        q(&mut con, &["EXISTS", "half"]).unwrap(),
        redis::Value::Int(0)
    );
    assert_serving(&srv);
}

/// Reads what a client dropped for its output limit can still get (what
/// the kernel had buffered, never the rest of its pending replies) and
/// checks the connection ends.
fn assert_dropped(s: &mut TcpStream) {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0usize;
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => total += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                assert!(
                    !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
                    "connection still open after {total} bytes"
                );
                break;
            }
        }
        assert!(total < 64 << 20, "still receiving replies: {total} bytes");
    }
}

/// Sets `key` to `size` bytes and lowers the normal clients' output limits.
fn setup_output_limit(con: &mut redis::Connection, key: &str, size: usize, limits: &str) {
    q(con, &["SET", key, &"x".repeat(size)]).unwrap();
    q(
        con,
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            &format!("normal {limits}"),
        ],
    )
    .unwrap();
}

/// A client that writes `GET big` commands and never reads: the server must
/// drop it at the hard limit, with its peak memory near that limit, and give
/// the memory back.
#[test]
fn non_reading_client_is_dropped_at_hard_output_limit() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    setup_output_limit(&mut con, "big", 1 << 20, "10mb 5mb 2");
    let used_before = info_u64(&mut con, "memory", "used_memory");
    let peak_before = proc_kb(srv.pid(), "VmHWM");
    let mut s = raw_conn(srv.port, Duration::from_secs(5));
    greet(&mut s);
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    // At most 400 replies (400 MiB unbounded) in batches of 20, so a
    // regression fails the bound below instead of exhausting the machine.
    let batch = "GET big\r\n".repeat(20);
    let mut write_failed = false;
    for _ in 0..20 {
        if s.write_all(batch.as_bytes()).is_err() {
            write_failed = true;
            break;
        }
        thread::sleep(Duration::from_millis(5));
    }
    assert!(
        wait_for_clients(&mut con, 1),
        "the non-reading client was not disconnected (write failed: {write_failed})"
    );
    assert_dropped(&mut s);
    let peak = proc_kb(srv.pid(), "VmHWM").saturating_sub(peak_before);
    assert!(peak < 80 * 1024, "peak RSS grew by {peak} KiB");
    let used_after = info_u64(&mut con, "memory", "used_memory");
    assert!(
        used_after < used_before + 4 * 1024 * 1024,
        "used_memory {used_before} -> {used_after} after the client was dropped"
    );
    // A client that reads its replies is not limited.
    for _ in 0..30 {
        let v: Vec<u8> = redis::cmd("GET").arg("big").query(&mut con).unwrap();
        assert_eq!(v.len(), 1 << 20);
    }
    assert_serving(&srv);
}

/// A big reply's buffer is given back once it is sent, even though the
/// client stays connected.
#[test]
fn output_buffer_shrinks_after_a_big_reply() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    q(&mut con, &["SET", "huge", &"x".repeat(16 << 20)]).unwrap();
    let before = info_u64(&mut con, "memory", "used_memory");
    let v: Vec<u8> = redis::cmd("GET").arg("huge").query(&mut con).unwrap();
    assert_eq!(v.len(), 16 << 20);
    let after = info_u64(&mut con, "memory", "used_memory");
    assert!(
        after < before + (2 << 20),
        "used_memory {before} -> {after} after a 16 MiB reply was sent"
    );
}

/// Earlier replies of a pipeline stay pending while a later CLIENT REPLY
/// OFF/SKIP drops its own (rolling back by length once lost them when the
/// connection had written anything before).
#[test]
fn client_reply_off_in_a_pipeline_keeps_earlier_replies() {
    let srv = Server::start(&[]);
    let mut s = raw_conn(srv.port, Duration::from_secs(5));
    greet(&mut s);
    s.write_all(b"PING\r\nCLIENT REPLY SKIP\r\nPING\r\nECHO a\r\nCLIENT REPLY OFF\r\nPING\r\n")
        .unwrap();
    let seen = read_until_quiet(&mut s, Duration::from_millis(500));
    assert_eq!(seen.bytes, "+PONG\r\n$1\r\na\r\n");
}

/// The limit also bounds one command that replies a lot: an EXEC of many
/// big GETs stops buffering at the hard limit and the client is dropped.
#[test]
fn exec_of_big_replies_is_bounded_by_output_limit() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    setup_output_limit(&mut con, "big", 1 << 20, "10mb 5mb 2");
    let peak_before = proc_kb(srv.pid(), "VmHWM");
    let mut s = raw_conn(srv.port, Duration::from_secs(5));
    greet(&mut s);
    let mut tx = b"MULTI\r\n".to_vec();
    tx.extend("GET big\r\n".repeat(150).as_bytes());
    tx.extend_from_slice(b"EXEC\r\n");
    s.write_all(&tx).unwrap();
    assert!(wait_for_clients(&mut con, 1), "client not dropped");
    assert_dropped(&mut s);
    let peak = proc_kb(srv.pid(), "VmHWM").saturating_sub(peak_before);
    assert!(peak < 80 * 1024, "peak RSS grew by {peak} KiB");
    assert_serving(&srv);
}

/// Over the soft limit for longer than its seconds: dropped too.
#[test]
fn non_reading_client_is_dropped_after_soft_limit_seconds() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    setup_output_limit(&mut con, "mid", 256 * 1024, "0 512kb 1");
    let mut s = raw_conn(srv.port, Duration::from_secs(5));
    greet(&mut s);
    s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut dropped = false;
    while Instant::now() < deadline {
        if s.write_all(b"GET mid\r\n").is_err()
            || info_u64(&mut con, "clients", "connected_clients") == 1
        {
            dropped = true;
            break;
        }
        thread::sleep(Duration::from_millis(50));
    }
    assert!(dropped, "client over the soft limit was never dropped");
    assert!(wait_for_clients(&mut con, 1));
    assert_serving(&srv);
}

#[test]
fn query_buffer_limit_closes_the_connection() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    q(
        &mut con,
        &["CONFIG", "SET", "client-query-buffer-limit", "1mb"],
    )
    .unwrap();
    let mut s = raw_conn(srv.port, Duration::from_secs(5));
    s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2097152\r\n");
    let chunk = vec![b'x'; 100_000];
    for _ in 0..15 {
        if s.write_all(&chunk).is_err() {
            break;
        }
    }
    // Redis closes without a reply.
    let seen = read_until_quiet(&mut s, Duration::from_secs(5));
    assert_eq!(
        seen,
        Seen {
            bytes: String::new(),
            closed: true
        }
    );
    assert!(wait_for_clients(&mut con, 1));
    assert_eq!(q(&mut con, &["EXISTS", "k"]).unwrap(), redis::Value::Int(0));
    assert_serving(&srv);
}

#[test]
fn slow_clients_still_work() {
    let srv = Server::start(&[]);
    let mut s = raw_conn(srv.port, Duration::from_secs(5));
    let mut data = resp(&[b"SET", b"slow", b"hello"]);
    data.extend_from_slice(b"GET slow\r\n");
    for b in &data {
        s.write_all(&[*b]).unwrap();
        thread::sleep(Duration::from_millis(10));
    }
    let mut got = vec![0u8; "+OK\r\n$5\r\nhello\r\n".len()];
    s.read_exact(&mut got).unwrap();
    assert_eq!(got, b"+OK\r\n$5\r\nhello\r\n");
}

#[test]
fn idle_clients_are_closed_after_timeout() {
    let srv = Server::start(&["--timeout", "1"]);
    let mut idle = raw_conn(srv.port, Duration::from_secs(1));
    let mut busy = raw_conn(srv.port, Duration::from_secs(1));
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(3500) {
        busy.write_all(b"PING\r\n").unwrap();
        let mut got = [0u8; 7];
        busy.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"+PONG\r\n");
        thread::sleep(Duration::from_millis(200));
    }
    let seen = read_until_quiet(&mut idle, Duration::from_secs(5));
    assert_eq!(
        seen,
        Seen {
            bytes: String::new(),
            closed: true
        }
    );
}

#[test]
fn maxclients_refuses_extra_connections() {
    let srv = Server::start(&["--maxclients", "2"]);
    // Let the start-up probe connection go away.
    thread::sleep(Duration::from_millis(300));
    let quiet = Duration::from_millis(500);
    // Three connections opened back to back, before any says a word.
    let mut conns: Vec<TcpStream> = (0..3).map(|_| raw_conn(srv.port, quiet)).collect();
    let mut outcomes: Vec<(Seen, usize)> = conns
        .iter_mut()
        .enumerate()
        .map(|(i, s)| {
            let _ = s.write_all(b"PING\r\n");
            (read_until_quiet(s, quiet), i)
        })
        .collect();
    outcomes.sort_by(|a, b| a.0.bytes.cmp(&b.0.bytes));
    let pong = Seen {
        bytes: "+PONG\r\n".into(),
        closed: false,
    };
    let refused = Seen {
        bytes: "-ERR max number of clients reached\r\n".into(),
        closed: true,
    };
    let seen: Vec<&Seen> = outcomes.iter().map(|(s, _)| s).collect();
    assert_eq!(seen, vec![&pong, &pong, &refused]);
    // Once an accepted client leaves, there is room again.
    drop(conns.remove(outcomes[0].1));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = exchange(srv.port, b"PING\r\n", quiet);
        if seen == pong {
            break;
        }
        assert_eq!(seen, refused);
        assert!(Instant::now() < deadline, "no room after a client left");
        thread::sleep(Duration::from_millis(50));
    }
}

/// A random integer argument, biased toward edge cases.
fn rand_int(rng: &mut fastrand::Rng) -> String {
    match rng.u8(0..8) {
        0 => "-1".into(),
        1 => "0".into(),
        2 => i64::MAX.to_string(),
        3 => i64::MIN.to_string(),
        4 => "9223372036854775808".into(),
        5 => "1.5".into(),
        6 => rng.i64(..).to_string(),
        _ => rng.i64(-100..100).to_string(),
    }
}

/// A random valid-looking command (from families that neither stop,
/// pause nor reconfigure the server, nor allocate huge values).
fn rand_command(rng: &mut fastrand::Rng) -> Vec<Vec<u8>> {
    let key = |rng: &mut fastrand::Rng| format!("r{}", rng.u8(0..16));
    let val = |rng: &mut fastrand::Rng| -> String {
        (0..rng.usize(0..24)).map(|_| rng.alphanumeric()).collect()
    };
    let words: Vec<String> = match rng.u8(0..28) {
        0 => vec!["SET".into(), key(rng), val(rng)],
        1 => vec!["GET".into(), key(rng)],
        2 => vec!["INCR".into(), key(rng)],
        3 => vec!["INCRBY".into(), key(rng), rand_int(rng)],
        4 => vec!["APPEND".into(), key(rng), val(rng)],
        5 => vec!["DEL".into(), key(rng), key(rng)],
        6 => vec!["MSET".into(), key(rng), val(rng), key(rng), val(rng)],
        7 => vec!["MGET".into(), key(rng), key(rng), key(rng)],
        8 => vec!["EXPIRE".into(), key(rng), rand_int(rng)],
        9 => vec!["GETRANGE".into(), key(rng), rand_int(rng), rand_int(rng)],
        10 => vec![
            "SETRANGE".into(),
            key(rng),
            rng.u16(0..200).to_string(),
            val(rng),
        ],
        11 => vec!["PING".into()],
        12 => vec!["ECHO".into(), val(rng)],
        13 => vec!["MULTI".into()],
        14 => vec!["EXEC".into()],
        15 => vec!["DISCARD".into()],
        16 => vec!["WATCH".into(), key(rng)],
        17 => vec!["SELECT".into(), rand_int(rng)],
        18 => vec!["LPUSH".into(), key(rng), val(rng)],
        19 => vec!["HSET".into(), key(rng), val(rng), val(rng)],
        20 => vec!["SADD".into(), key(rng), val(rng)],
        21 => vec!["ZADD".into(), key(rng), rand_int(rng), val(rng)],
        22 => vec!["LRANGE".into(), key(rng), rand_int(rng), rand_int(rng)],
        23 => vec!["TTL".into(), key(rng)],
        24 => vec!["TYPE".into(), key(rng)],
        25 => vec!["HELLO".into(), rng.u8(1..5).to_string()],
        26 => {
            let mode = ["ON", "OFF", "SKIP", "MAYBE"][rng.usize(0..4)];
            vec!["CLIENT".into(), "REPLY".into(), mode.into()]
        }
        _ => vec!["NOSUCHCOMMAND".into(), val(rng)],
    };
    words.into_iter().map(String::into_bytes).collect()
}

/// One piece of a hostile stream: a valid command (multibulk or inline),
/// or (the `true` ones) garbage, a truncated or corrupted command,
/// protocol-looking tokens, or an absurd declared length.
fn rand_piece(rng: &mut fastrand::Rng) -> (Vec<u8>, bool) {
    let args = rand_command(rng);
    let arg_refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    // Mostly valid commands, so connections live long enough for state
    // (transactions, WATCH, RESP3) to build up between the hostile pieces.
    let kind = rng.u8(0..40);
    let bytes = match kind {
        0..=27 => resp(&arg_refs),
        28..=33 => {
            let mut line = Vec::new();
            for a in &args {
                match rng.u8(0..4) {
                    0 => {
                        line.push(b'"');
                        line.extend_from_slice(a);
                        line.extend_from_slice(b"\\x41\\n\" ");
                    }
                    1 => {
                        line.push(b'\'');
                        line.extend_from_slice(a);
                        line.extend_from_slice(b"' ");
                    }
                    _ => {
                        line.extend_from_slice(a);
                        line.push(b' ');
                    }
                }
            }
            line.extend_from_slice(b"\r\n");
            line
        }
        34 => (0..rng.usize(0..300)).map(|_| rng.u8(..)).collect(),
        35 => {
            let mut c = resp(&arg_refs);
            c.truncate(rng.usize(0..c.len()));
            c
        }
        36 => {
            let mut c = resp(&arg_refs);
            let i = rng.usize(0..c.len());
            c[i] = rng.u8(..);
            c
        }
        37 | 38 => {
            const TOKENS: &[&str] = &[
                "*",
                "$",
                "\r\n",
                "\r",
                "\n",
                "-1",
                "0",
                "1",
                "3",
                "01",
                "99999999999",
                "2147483648",
                "\"",
                "'",
                " ",
                "PING",
                "\0",
                ":",
                "+",
            ];
            (0..rng.usize(1..20))
                .flat_map(|_| TOKENS[rng.usize(0..TOKENS.len())].bytes())
                .collect()
        }
        _ => format!(
            "*2\r\n$4\r\nECHO\r\n${}\r\nsome",
            rng.u32(..) as u64 * rng.u64(1..4)
        )
        .into_bytes(),
    };
    (bytes, kind >= 34)
}

/// Throws one seeded hostile stream at the server in random-sized writes,
/// reconnecting whenever the server closes the connection; a reader thread
/// drains every reply.
fn hostile_stream(port: u16, seed: u64, pieces: usize) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut left = pieces;
    while left > 0 {
        let s = raw_conn(port, Duration::from_secs(30));
        s.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut r = s.try_clone().unwrap();
        let reader = thread::spawn(move || {
            let mut buf = [0u8; 65536];
            while matches!(r.read(&mut buf), Ok(n) if n > 0) {}
        });
        let mut w = s;
        'conn: while left > 0 {
            left -= 1;
            let (piece, hostile) = rand_piece(&mut rng);
            let mut rest = piece.as_slice();
            while !rest.is_empty() {
                let n = rng.usize(1..=rest.len().min(4096));
                if w.write_all(&rest[..n]).is_err() {
                    break 'conn;
                }
                rest = &rest[n..];
            }
            // A hostile piece often leaves the connection swallowing what
            // follows (a pending giant bulk, half a command): half of the
            // time, start afresh.
            if hostile && rng.bool() {
                break;
            }
        }
        let _ = w.shutdown(std::net::Shutdown::Both);
        reader.join().unwrap();
    }
}

/// Seeded random byte streams (valid commands mixed with garbage) on
/// several connections at once: the server must stay up, keep serving, and
/// release every connection. Reproduce or soak with VIREO_HOSTILE_SEED and
/// VIREO_HOSTILE_PIECES.
#[test]
fn random_hostile_streams_never_bring_the_server_down() {
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let seed = env("VIREO_HOSTILE_SEED", 0x5eed_f00d);
    let pieces = env("VIREO_HOSTILE_PIECES", 1500) as usize;
    eprintln!("hostile streams: VIREO_HOSTILE_SEED={seed} VIREO_HOSTILE_PIECES={pieces}");
    let mut srv = Server::start(&[]);
    let port = srv.port;
    thread::scope(|s| {
        for i in 0..6 {
            s.spawn(move || hostile_stream(port, seed.wrapping_add(i), pieces));
        }
    });
    assert!(
        srv.child().try_wait().unwrap().is_none(),
        "server exited (seed {seed})"
    );
    assert_serving(&srv);
    let mut con = srv.conn();
    assert!(
        wait_for_clients(&mut con, 1),
        "connections leaked (seed {seed})"
    );
    // The streams really exercised commands, not just the error path.
    let ran = info_u64(&mut con, "stats", "total_commands_processed");
    eprintln!("hostile streams: {ran} commands executed");
    assert!(
        ran as usize > pieces,
        "only {ran} commands ran (seed {seed})"
    );
    let rss = proc_kb(srv.pid(), "VmHWM");
    assert!(rss < 512 * 1024, "peak RSS {rss} KiB (seed {seed})");
}
