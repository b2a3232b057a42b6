//! Pub/Sub, keyspace notifications and client tracking against the real
//! server, with subscribers and publishers on different workers, and the
//! same scripts compared with a real `redis-server` when one is installed.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A raw RESP connection that reads whole values as their bytes.
struct Raw {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

impl Raw {
    fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Raw {
            w: s.try_clone().unwrap(),
            r: BufReader::new(s),
        }
    }

    fn send(&mut self, args: &[&str]) {
        let mut b = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            b.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        self.w.write_all(&b).unwrap();
    }

    /// Sends a command and reads one value.
    fn call(&mut self, args: &[&str]) -> String {
        self.send(args);
        self.read()
    }

    /// One RESP value as text (CRLFs kept).
    fn read(&mut self) -> String {
        let mut out = Vec::new();
        self.value(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    fn value(&mut self, out: &mut Vec<u8>) {
        let mut line = Vec::new();
        self.r.read_until(b'\n', &mut line).expect("read");
        assert!(!line.is_empty(), "connection closed");
        out.extend_from_slice(&line);
        let n: i64 = std::str::from_utf8(&line[1..line.len() - 2])
            .unwrap_or("0")
            .parse()
            .unwrap_or(0);
        match line[0] {
            b'$' | b'=' if n >= 0 => {
                let mut body = vec![0; n as usize + 2];
                self.r.read_exact(&mut body).unwrap();
                out.extend_from_slice(&body);
            }
            b'*' | b'>' | b'~' => (0..n.max(0)).for_each(|_| self.value(out)),
            b'%' => (0..2 * n.max(0)).for_each(|_| self.value(out)),
            _ => {}
        }
    }
}

/// `["message", channel, payload]` as RESP2 text.
fn message(kind: &str, parts: &[&str]) -> String {
    let mut s = format!("*{}\r\n${}\r\n{kind}\r\n", parts.len() + 1, kind.len());
    for p in parts {
        s.push_str(&format!("${}\r\n{p}\r\n", p.len()));
    }
    s
}

#[test]
fn messages_reach_every_worker_in_order_and_publish_counts_receivers() {
    let srv = common::Server::start(&["--io-threads", "4"]);
    let mut subs: Vec<Raw> = (0..6).map(|_| Raw::connect(srv.port)).collect();
    for s in subs.iter_mut().take(5) {
        assert_eq!(
            s.call(&["SUBSCRIBE", "news"]),
            "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n"
        );
    }
    let p = subs[5].call(&["PSUBSCRIBE", "n*"]);
    assert!(p.starts_with("*3\r\n$10\r\npsubscribe\r\n"), "{p}");
    let mut publisher = Raw::connect(srv.port);
    for i in 0..500 {
        let n = publisher.call(&["PUBLISH", "news", &i.to_string()]);
        assert_eq!(n, ":6\r\n", "five channel subscribers and one pattern");
    }
    for s in subs.iter_mut().take(5) {
        for i in 0..500 {
            assert_eq!(s.read(), message("message", &["news", &i.to_string()]));
        }
    }
    for i in 0..500 {
        assert_eq!(
            subs[5].read(),
            message("pmessage", &["n*", "news", &i.to_string()])
        );
    }
    assert_eq!(publisher.call(&["PUBLISH", "other", "x"]), ":0\r\n");
    let numsub = publisher.call(&["PUBSUB", "NUMSUB", "news", "none"]);
    assert_eq!(numsub, "*4\r\n$4\r\nnews\r\n:5\r\n$4\r\nnone\r\n:0\r\n");
    assert_eq!(publisher.call(&["PUBSUB", "NUMPAT"]), ":1\r\n");
    // Disconnected subscribers are forgotten.
    drop(subs);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(publisher.call(&["PUBLISH", "news", "x"]), ":0\r\n");
    assert_eq!(publisher.call(&["PUBSUB", "CHANNELS"]), "*0\r\n");
}

#[test]
fn resp2_subscribed_mode_limits_commands_and_resp3_does_not() {
    let srv = common::Server::start(&["--io-threads", "2"]);
    let mut c = Raw::connect(srv.port);
    c.call(&["SUBSCRIBE", "a"]);
    assert_eq!(
        c.call(&["GET", "x"]),
        "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"
    );
    assert_eq!(c.call(&["PING"]), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    assert_eq!(c.call(&["PING", "hi"]), "*2\r\n$4\r\npong\r\n$2\r\nhi\r\n");
    assert_eq!(c.call(&["RESET"]), "+RESET\r\n");
    assert_eq!(c.call(&["GET", "x"]), "$-1\r\n");
    // RESP3: pushes interleave with replies; the publisher's own copy
    // comes before PUBLISH's reply.
    c.call(&["HELLO", "3"]);
    assert_eq!(
        c.call(&["SUBSCRIBE", "a"]),
        ">3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n"
    );
    assert_eq!(c.call(&["GET", "x"]), "_\r\n");
    assert_eq!(
        c.call(&["PUBLISH", "a", "m"]),
        ">3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\nm\r\n"
    );
    assert_eq!(c.read(), ":1\r\n");
    assert_eq!(
        c.call(&["UNSUBSCRIBE", "zz"]),
        ">3\r\n$11\r\nunsubscribe\r\n$2\r\nzz\r\n:1\r\n"
    );
}

/// A server with `client-output-buffer-limit pubsub <limit>`, a client
/// subscribed to `channel` that never reads (kept open), and a publisher.
struct Flood {
    srv: common::Server,
    _lazy: Raw,
    publisher: Raw,
}

impl Flood {
    fn start(args: &[&str], limit: &str, channel: &str) -> Flood {
        let srv = common::Server::start(args);
        let mut con = srv.conn();
        let limit = format!("pubsub {limit}");
        common::ok(
            &mut con,
            &["CONFIG", "SET", "client-output-buffer-limit", &limit],
        );
        let mut lazy = Raw::connect(srv.port);
        lazy.call(&["SUBSCRIBE", channel]);
        let publisher = Raw::connect(srv.port);
        Flood {
            srv,
            _lazy: lazy,
            publisher,
        }
    }
}

#[test]
fn a_subscriber_that_never_reads_is_cut_off_and_the_publisher_goes_on() {
    let Flood {
        srv,
        _lazy,
        mut publisher,
    } = Flood::start(&["--io-threads", "2"], "256kb 0 0", "flood");
    let mut con = srv.conn();
    let payload = "x".repeat(16 * 1024);
    for _ in 0..2000 {
        publisher.call(&["PUBLISH", "flood", &payload]);
    }
    let mut gone = false;
    for _ in 0..50 {
        if publisher.call(&["PUBLISH", "flood", "x"]) == ":0\r\n" {
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(gone, "the lazy subscriber was not disconnected");
    let list = common::q(&mut con, &["CLIENT", "LIST", "TYPE", "pubsub"]).unwrap();
    assert_eq!(list, redis::Value::BulkString(Vec::new()));
}

/// The soft limit: a subscriber over it is kept while the time allowed has
/// not passed (counted in whole wall-clock seconds, as Redis does) and cut
/// off once it has, while traffic goes on.
#[test]
fn a_subscriber_over_the_soft_limit_goes_after_its_seconds() {
    let Flood {
        srv: _srv,
        _lazy,
        mut publisher,
    } = Flood::start(&[], "0 64kb 1", "soft");
    let payload = "x".repeat(16 * 1024);
    // Fill the socket buffers and go over the soft limit.
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_millis(300) {
        publisher.call(&["PUBLISH", "soft", &payload]);
    }
    let over = std::time::Instant::now();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        publisher.call(&["PUBLISH", "soft", "x"]),
        ":1\r\n",
        "cut off too early"
    );
    let mut gone_after = None;
    while over.elapsed() < Duration::from_secs(6) {
        if publisher.call(&["PUBLISH", "soft", &payload]) == ":0\r\n" {
            gone_after = Some(over.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let gone_after = gone_after.expect("the subscriber over the soft limit was not disconnected");
    assert!(gone_after >= Duration::from_millis(200), "{gone_after:?}");
}

/// The soft limit with no traffic after going over it: the server's
/// periodic check (Redis's clientsCron) still cuts the subscriber off once
/// its seconds are up, with nothing more written to it.
#[test]
fn a_subscriber_over_the_soft_limit_goes_even_when_traffic_stops() {
    let Flood {
        srv,
        _lazy,
        mut publisher,
    } = Flood::start(&[], "0 64kb 1", "quiet");
    let mut con = srv.conn();
    let payload = "x".repeat(16 * 1024);
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_millis(300) {
        publisher.call(&["PUBLISH", "quiet", &payload]);
    }
    // Nothing more is published: only the periodic check can act.
    let pubsub_clients = |con: &mut redis::Connection| {
        common::q(con, &["CLIENT", "LIST", "TYPE", "pubsub"]).unwrap()
    };
    assert_ne!(
        pubsub_clients(&mut con),
        redis::Value::BulkString(Vec::new())
    );
    common::eventually("the quiet subscriber to be cut off", || {
        pubsub_clients(&mut con) == redis::Value::BulkString(Vec::new())
    });
    assert!(started.elapsed() >= Duration::from_secs(1));
}

#[test]
fn keyspace_events_arrive_in_redis_order() {
    let srv = common::Server::start(&["--io-threads", "2"]);
    let mut con = srv.conn();
    common::ok(
        &mut con,
        &["CONFIG", "SET", "notify-keyspace-events", "KEAn"],
    );
    assert_eq!(
        common::q(&mut con, &["CONFIG", "GET", "notify-keyspace-events"]).unwrap(),
        redis::Value::Array(vec![
            redis::Value::BulkString(b"notify-keyspace-events".to_vec()),
            redis::Value::BulkString(b"AKE".to_vec()),
        ])
    );
    let mut sub = Raw::connect(srv.port);
    sub.call(&["PSUBSCRIBE", "__keyevent@0__:*"]);
    for cmd in [
        &["RPUSH", "l", "a"][..],
        &["LPOP", "l"],
        &["SET", "s", "1", "EX", "100"],
        &["RENAME", "s", "t"],
        &["HSET", "h", "f", "v"],
        &["DEL", "h", "t", "nothing"],
    ] {
        common::ok(&mut con, cmd);
    }
    let expected = [
        ("new", "l"),
        ("rpush", "l"),
        ("lpop", "l"),
        ("del", "l"),
        ("new", "s"),
        ("set", "s"),
        ("expire", "s"),
        ("new", "t"),
        ("rename_from", "s"),
        ("rename_to", "t"),
        ("new", "h"),
        ("hset", "h"),
        ("del", "h"),
        ("del", "t"),
    ];
    for (event, key) in expected {
        let ch = format!("__keyevent@0__:{event}");
        assert_eq!(
            sub.read(),
            message("pmessage", &["__keyevent@0__:*", &ch, key])
        );
    }
}

#[test]
fn tracking_invalidates_resp3_and_redirected_resp2_clients() {
    let srv = common::Server::start(&["--io-threads", "3"]);
    let mut writer = Raw::connect(srv.port);
    let mut cache = Raw::connect(srv.port);
    cache.call(&["HELLO", "3"]);
    assert_eq!(cache.call(&["CLIENT", "TRACKING", "on"]), "+OK\r\n");
    cache.call(&["GET", "k"]);
    writer.call(&["SET", "k", "1"]);
    assert_eq!(cache.read(), ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n");
    // Once reported, a key is forgotten until read again.
    writer.call(&["SET", "k", "2"]);
    assert_eq!(cache.call(&["PING"]), "+PONG\r\n");
    // A RESP2 client redirecting to a subscriber of __redis__:invalidate.
    let mut sink = Raw::connect(srv.port);
    let sink_id = sink.call(&["CLIENT", "ID"]);
    let sink_id = sink_id.trim_start_matches(':').trim();
    sink.call(&["SUBSCRIBE", "__redis__:invalidate"]);
    let mut r2 = Raw::connect(srv.port);
    assert_eq!(
        r2.call(&["CLIENT", "TRACKING", "on", "REDIRECT", sink_id]),
        "+OK\r\n"
    );
    r2.call(&["MGET", "a", "b"]);
    writer.call(&["SET", "a", "1"]);
    assert_eq!(
        sink.read(),
        "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\na\r\n"
    );
    writer.call(&["FLUSHALL"]);
    assert_eq!(
        sink.read(),
        "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n"
    );
    assert_eq!(r2.call(&["CLIENT", "GETREDIR"]), format!(":{sink_id}\r\n"));
}

/// Scripts track as Redis 7.0 does: a read inside a script makes the caller
/// track the script's declared keys, a script that only writes tracks
/// nothing, and EVAL_RO alone (without a read inside) tracks nothing.
#[test]
fn scripts_track_their_declared_keys_when_they_read() {
    let srv = common::Server::start(&["--io-threads", "2"]);
    let mut writer = Raw::connect(srv.port);
    let mut cache = Raw::connect(srv.port);
    cache.call(&["HELLO", "3"]);
    assert_eq!(cache.call(&["CLIENT", "TRACKING", "on"]), "+OK\r\n");
    cache.call(&["EVAL", "redis.call('set', 'other', 'x')", "1", "w"]);
    cache.call(&["EVAL_RO", "redis.call('ping')", "1", "p"]);
    cache.call(&["EVAL", "redis.call('get', 'other')", "2", "d1", "d2"]);
    // Only the read script's declared keys were tracked; `other` was read
    // but not declared, `w` and `p` were declared by scripts that did not read.
    for key in ["w", "p", "other", "d1"] {
        writer.call(&["SET", key, "v"]);
    }
    assert_eq!(
        cache.read(),
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$2\r\nd1\r\n"
    );
    assert_eq!(cache.call(&["PING"]), "+PONG\r\n");
}

/// INFO's `tracking_clients` of a server.
fn tracking_clients(c: &mut Raw) -> usize {
    let info = c.call(&["INFO", "clients"]);
    info.lines()
        .find_map(|l| l.strip_prefix("tracking_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("tracking_clients in INFO")
}

/// The tracking count (and the hook bit behind it) follows clients that
/// turn tracking off, quit without reading, or close: invalidations stop
/// when the last tracker goes and start again with the next one.
#[test]
fn tracking_count_follows_clients_that_leave() {
    let srv = common::Server::start(&["--io-threads", "3"]);
    let mut admin = Raw::connect(srv.port);
    let mut quitter = Raw::connect(srv.port);
    let mut closer = Raw::connect(srv.port);
    let mut cache = Raw::connect(srv.port);
    cache.call(&["HELLO", "3"]);
    for c in [&mut quitter, &mut closer, &mut cache] {
        assert_eq!(c.call(&["CLIENT", "TRACKING", "on", "BCAST"]), "+OK\r\n");
    }
    assert_eq!(tracking_clients(&mut admin), 3);
    // QUIT sent and its reply never read; a socket closed.
    quitter.send(&["QUIT"]);
    drop(closer);
    assert_eq!(cache.call(&["CLIENT", "TRACKING", "off"]), "+OK\r\n");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while tracking_clients(&mut admin) != 0 {
        assert!(std::time::Instant::now() < deadline, "trackers left over");
        std::thread::sleep(Duration::from_millis(10));
    }
    admin.call(&["SET", "k", "1"]);
    assert_eq!(cache.call(&["PING"]), "+PONG\r\n");
    assert_eq!(cache.call(&["CLIENT", "TRACKING", "on"]), "+OK\r\n");
    assert_eq!(tracking_clients(&mut admin), 1);
    cache.call(&["GET", "k"]);
    admin.call(&["SET", "k", "2"]);
    assert_eq!(cache.read(), ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n");
    drop(quitter);
}

/// The same scripts on Vireo and on redis-server: every reply and every
/// message a subscriber receives must be identical.
#[test]
fn replies_and_messages_match_redis() {
    if std::process::Command::new("redis-server")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("redis-server not on PATH: differential Pub/Sub test skipped");
        return;
    }
    let redis = common::diff::start_redis();
    let vireo = common::Server::start(&["--io-threads", "2"]);
    let a = transcript(redis.port);
    let b = transcript(vireo.port);
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x, y);
    }
}

/// Runs a fixed script plus seeded random Pub/Sub traffic and returns what
/// every connection received.
fn transcript(port: u16) -> Vec<String> {
    let mut log = Vec::new();
    let mut admin = Raw::connect(port);
    admin.call(&["FLUSHALL"]);
    admin.call(&["CONFIG", "SET", "notify-keyspace-events", "KEg$lshzxe"]);
    let mut sub = Raw::connect(port);
    let mut psub = Raw::connect(port);
    for cmd in [
        &["SUBSCRIBE", "c1", "c2", "c1"][..],
        &["UNSUBSCRIBE", "c9"],
        &["SSUBSCRIBE", "s1"],
    ] {
        sub.send(cmd);
        for _ in 1..cmd.len() {
            log.push(sub.read());
        }
    }
    psub.send(&["PSUBSCRIBE", "c?", "__key*__:*"]);
    log.push(psub.read());
    log.push(psub.read());
    let mut rng = fastrand::Rng::with_seed(24);
    let channels = ["c1", "c2", "c3", "s1"];
    for _ in 0..200 {
        let ch = channels[rng.usize(..channels.len())];
        let msg = rng.u32(..1000).to_string();
        let cmd: Vec<&str> = match rng.u8(..6) {
            0 => vec!["PUBLISH", ch, &msg],
            1 => vec!["SPUBLISH", ch, &msg],
            2 => vec!["SET", ch, &msg],
            3 => vec!["LPUSH", ch, &msg],
            4 => vec!["DEL", ch],
            _ => vec!["PUBSUB", "NUMSUB", ch],
        };
        let reply = admin.call(&cmd);
        log.push(reply);
    }
    log.push(admin.call(&["PUBSUB", "NUMPAT"]));
    log.push(admin.call(&["PUBSUB", "SHARDNUMSUB", "s1", "s2"]));
    // Everything published has reached the subscribers once a PING sent
    // after it is answered (the receiving side orders them).
    std::thread::sleep(Duration::from_millis(200));
    sub.send(&["PING"]);
    psub.send(&["PING"]);
    for c in [&mut sub, &mut psub] {
        loop {
            let v = c.read();
            let done = v.starts_with("*2\r\n$4\r\npong");
            log.push(v);
            if done {
                break;
            }
        }
    }
    log
}

/// The keyspace events of the stream, HyperLogLog and GEO families and of
/// read misses, in order, against redis-server: every event a pattern
/// subscriber receives for a fixed script plus seeded random stream
/// commands must be identical.
#[test]
fn stream_hll_geo_and_keymiss_events_match_redis() {
    if !common::diff::redis_server_available() {
        eprintln!("redis-server not on PATH: differential keyspace event test skipped");
        return;
    }
    let redis = common::diff::start_redis();
    let vireo = common::Server::start(&["--io-threads", "2"]);
    let a = event_transcript(redis.port);
    let b = event_transcript(vireo.port);
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x, y, "entry {i} differs (redis, vireo)");
    }
    assert_eq!(a.len(), b.len());
    let all = b.concat();
    for event in [
        "xadd",
        "xtrim",
        "xdel",
        "xsetid",
        "xgroup-create",
        "xgroup-setid",
        "xgroup-createconsumer",
        "xgroup-delconsumer",
        "xgroup-destroy",
        "pfadd",
        "georadiusstore",
        "geosearchstore",
        "keymiss",
    ] {
        let channel = format!("__keyevent@0__:{event}\r\n");
        assert!(all.contains(&channel), "no {event} event");
    }
    // Consumers named by XREADGROUP (twice: by a reader served at once and
    // by a blocked one), XCLAIM, XAUTOCLAIM and CREATECONSUMER.
    let created = all
        .matches("__keyevent@0__:xgroup-createconsumer\r\n")
        .count();
    assert!(created >= 6, "{created} consumer creations");
}

/// The fixed part of [`event_transcript`]: each family's events, the
/// consumer creations of every command that names a consumer, and misses.
const EVENT_SCRIPT: &[&[&str]] = &[
    &["XADD", "s", "1-1", "f", "v"],
    &["XADD", "s", "MAXLEN", "1", "2-1", "f", "v"],
    &["XADD", "s", "MAXLEN", "5", "3-1", "f", "v"],
    &["XADD", "nos", "NOMKSTREAM", "*", "f", "v"],
    &["XTRIM", "s", "MAXLEN", "0"],
    &["XTRIM", "s", "MAXLEN", "0"],
    &["XADD", "s", "4-1", "f", "v"],
    &["XDEL", "s", "4-1", "9-9"],
    &["XDEL", "s", "4-1"],
    &["XSETID", "s", "10-0"],
    &["XGROUP", "CREATE", "s", "g", "$"],
    &["XGROUP", "CREATE", "s", "g", "$"],
    &["XGROUP", "CREATE", "m", "g", "$", "MKSTREAM"],
    &["XGROUP", "SETID", "s", "g", "0"],
    &["XGROUP", "CREATECONSUMER", "s", "g", "alice"],
    &["XGROUP", "CREATECONSUMER", "s", "g", "alice"],
    &["XADD", "s", "11-1", "f", "v"],
    &["XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"],
    &["XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"],
    &["XREADGROUP", "GROUP", "g", "carol", "STREAMS", "s", "0"],
    &["XCLAIM", "s", "g", "dave", "0", "11-1"],
    &["XAUTOCLAIM", "s", "g", "erin", "0", "0"],
    &["XGROUP", "DELCONSUMER", "s", "g", "bob"],
    &["XGROUP", "DELCONSUMER", "s", "g", "nobody"],
    &["XGROUP", "DESTROY", "s", "g"],
    &["XGROUP", "DESTROY", "s", "g"],
    &["PFADD", "h", "a", "b"],
    &["PFADD", "h", "a"],
    &["PFADD", "h2", "c"],
    &["PFMERGE", "h3", "h", "h2"],
    &["PFCOUNT", "h", "h2"],
    &[
        "GEOADD", "geo", "13.36", "38.11", "Palermo", "15.08", "37.50", "Catania",
    ],
    &[
        "GEOSEARCHSTORE",
        "gs",
        "geo",
        "FROMMEMBER",
        "Palermo",
        "BYRADIUS",
        "200",
        "km",
        "ASC",
    ],
    &["GEORADIUS", "geo", "15", "37", "200", "km", "STORE", "gr"],
    &[
        "GEORADIUSBYMEMBER",
        "geo",
        "Palermo",
        "1",
        "m",
        "STORE",
        "gs",
    ],
    &[
        "GEOSEARCHSTORE",
        "gr",
        "nogeo",
        "FROMLONLAT",
        "0",
        "0",
        "BYRADIUS",
        "1",
        "km",
    ],
    &["GET", "missing"],
    &["OBJECT", "ENCODING", "missing"],
    &["EXISTS", "missing", "s"],
    &["XRANGE", "missing", "-", "+"],
    &["PFCOUNT", "missing"],
    &["MGET", "missing", "h", "missing2"],
];

/// Runs [`EVENT_SCRIPT`], a blocked XREADGROUP served by an XADD, and
/// seeded random stream commands with every class on (`KEA` plus `n` and
/// `m`); returns the replies and every event received, in order.
fn event_transcript(port: u16) -> Vec<String> {
    let mut log = Vec::new();
    let mut admin = Raw::connect(port);
    admin.call(&["FLUSHALL"]);
    admin.call(&["CONFIG", "SET", "notify-keyspace-events", "KEAnm"]);
    let mut sub = Raw::connect(port);
    sub.send(&["PSUBSCRIBE", "__key*__:*", "done"]);
    sub.read();
    sub.read();
    for cmd in EVENT_SCRIPT {
        log.push(admin.call(cmd));
    }
    // A consumer created when a blocked reader is served.
    admin.call(&["XGROUP", "CREATE", "b", "g", "$", "MKSTREAM"]);
    let mut reader = Raw::connect(port);
    reader.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "zed",
        "BLOCK",
        "0",
        "STREAMS",
        "b",
        ">",
    ]);
    std::thread::sleep(Duration::from_millis(200));
    log.push(admin.call(&["XADD", "b", "1-1", "f", "v"]));
    log.push(reader.read());
    let mut rng = fastrand::Rng::with_seed(2424);
    for _ in 0..300 {
        let key = ["r1", "r2"][rng.usize(..2)];
        let id = format!("{}-{}", rng.u32(..50), rng.u32(..3));
        let consumer = ["c1", "c2", "c3"][rng.usize(..3)];
        let cmd: Vec<&str> = match rng.u8(..9) {
            0 | 1 => vec!["XADD", key, "MAXLEN", "3", "*", "f", "v"],
            2 => vec!["XDEL", key, &id],
            3 => vec!["XTRIM", key, "MINID", &id],
            4 => vec!["XGROUP", "CREATE", key, "g", "0", "MKSTREAM"],
            5 => vec![
                "XREADGROUP",
                "GROUP",
                "g",
                consumer,
                "COUNT",
                "1",
                "STREAMS",
                key,
                ">",
            ],
            6 => vec!["XCLAIM", key, "g", consumer, "0", &id],
            7 => vec!["XGROUP", "DELCONSUMER", key, "g", consumer],
            _ => vec!["DEL", key],
        };
        // The replies of `*` IDs differ between servers; their events not.
        let reply = admin.call(&cmd);
        if cmd[0] != "XADD" && cmd[0] != "XREADGROUP" && cmd[0] != "XCLAIM" {
            log.push(reply);
        }
    }
    admin.call(&["PUBLISH", "done", "x"]);
    loop {
        let v = sub.read();
        let done = v.contains("\r\ndone\r\n");
        log.push(v);
        if done {
            break;
        }
    }
    log
}
