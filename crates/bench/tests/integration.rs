//! End-to-end runs of the load generator against the in-process null server
//! (always) and Debian's redis-server (when installed): request counts,
//! error tables, reconnection, JSON output and the bounded handling of a
//! server that never answers. No assertion depends on timing.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vireo_bench::null_server::{NullConfig, NullServer};
use vireo_bench::run::{self, Limit, RunConfig, Target, Workload};
use vireo_bench::template::Template;
use vireo_bench::workload::{weighted_cycle, KeyPattern};

fn null_server(error_command: Option<&str>) -> NullServer {
    NullServer::start(&NullConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        threads: 2,
        get_size: 16,
        error_command: error_command.map(str::to_string),
    })
    .expect("null server starts")
}

fn config(addr: SocketAddr, requests: u64) -> RunConfig {
    RunConfig {
        target: Target {
            host: addr.ip().to_string(),
            port: addr.port(),
        },
        threads: 2,
        clients: 4,
        pipeline: 8,
        limit: Limit::Requests(requests),
        rate: None,
        resp3: false,
        user: None,
        password: None,
        db: None,
        connect_timeout: Duration::from_secs(2),
        reply_timeout: Duration::from_secs(10),
        progress: false,
    }
}

fn workload(templates: &[&str], weights: &[u32], pattern: KeyPattern) -> Arc<Workload> {
    Arc::new(Workload::new(
        templates
            .iter()
            .map(|t| Template::parse(t).unwrap())
            .collect(),
        weighted_cycle(weights),
        "key:",
        1000,
        pattern,
        "10-20".parse().unwrap(),
        42,
    ))
}

#[test]
fn counts_requests_and_reports_errors_against_the_null_server() {
    let server = null_server(Some("FOO"));
    let wl = workload(
        &["SET __key__ __data__", "GET __key__", "FOO __key__"],
        &[1, 2, 1],
        KeyPattern::Zipf(0.99),
    );
    let r = run::run(&config(server.local_addr(), 2000), &wl).expect("run");
    let s = &r.stats;
    assert_eq!(s.replies(), 2000, "every request answered once");
    assert_eq!(s.commands[0].replies, 500);
    assert_eq!(s.commands[1].replies, 1000);
    assert_eq!(s.commands[2].replies, 500);
    assert_eq!(s.commands[2].errors, 500);
    assert_eq!(s.commands[0].errors + s.commands[1].errors, 0);
    assert_eq!(s.errors.get("ERR null server rejects 'FOO'"), Some(&500));
    assert_eq!(s.error_total(), 500);
    assert_eq!(
        s.hit_ratio_parts(),
        Some((1000, 1000)),
        "the null server always hits"
    );
    assert_eq!((s.reconnects, s.lost), (0, 0));
    assert_eq!(s.overall_latency().len(), 2000, "one latency per reply");
    assert_eq!(
        server.commands(),
        2000,
        "the server saw exactly the requests"
    );
    assert!(s.bytes_out > 0 && s.bytes_in > 0);
    server.stop();
}

#[test]
fn open_loop_rate_mode_sends_everything() {
    let server = null_server(None);
    let wl = workload(&["GET __key__"], &[1], KeyPattern::Uniform);
    let mut cfg = config(server.local_addr(), 500);
    cfg.rate = Some(20_000.0);
    let r = run::run(&cfg, &wl).expect("run");
    assert_eq!(r.stats.replies(), 500);
    assert_eq!(r.stats.error_total(), 0);
}

#[test]
fn reconnects_after_the_server_closes_the_connection() {
    let server = null_server(None);
    // The null server closes the connection after answering QUIT.
    let wl = workload(&["GET __key__", "QUIT"], &[4, 1], KeyPattern::Uniform);
    let mut cfg = config(server.local_addr(), 200);
    cfg.threads = 1;
    cfg.clients = 1;
    cfg.pipeline = 1;
    let r = run::run(&cfg, &wl).expect("run");
    let s = &r.stats;
    assert!(s.reconnects >= 1, "reconnected: {s:?}");
    assert_eq!(s.replies() + s.lost, 200, "each request answered or lost");
    assert!(s.lost <= 40, "at most the request after each QUIT is lost");
    assert!(s.commands[1].replies >= 1);
}

#[test]
fn an_unreachable_server_fails_fast() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let wl = workload(&["PING"], &[1], KeyPattern::Uniform);
    let err = run::run(&config(([127, 0, 0, 1], port).into(), 10), &wl).unwrap_err();
    assert!(err.contains("cannot connect"), "{err}");
}

#[test]
fn a_server_that_never_answers_does_not_hang_the_run() {
    // Accepts connections (via the backlog) but never reads or writes.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let wl = workload(&["PING"], &[1], KeyPattern::Uniform);
    let mut cfg = config(silent.local_addr().unwrap(), 1_000_000);
    cfg.threads = 1;
    cfg.clients = 2;
    cfg.reply_timeout = Duration::from_millis(200);
    let r = run::run(&cfg, &wl).expect("run ends");
    let s = &r.stats;
    assert_eq!(s.replies(), 0);
    assert!(s.lost > 0);
    assert!(
        s.errors.keys().any(|m| m.contains("reply timeout")),
        "{:?}",
        s.errors
    );
    drop(silent);
}

#[test]
fn command_line_run_writes_json_and_svg() {
    let server = null_server(Some("nope"));
    let dir = std::env::temp_dir().join(format!("vireo-bench-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("out.json");
    let svg = dir.join("out.svg");
    let port = server.local_addr().port().to_string();
    let code = vireo_bench::main_from_args([
        "bench",
        "--port",
        &port,
        "--requests",
        "2000",
        "--clients",
        "5",
        "--pipeline",
        "4",
        "--command",
        "SET __key__ __data__",
        "--command",
        "NOPE __key__",
        "--command-ratio",
        "3:1",
        "--preload",
        "100",
        "--quiet",
        "--json",
        json.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let r = &doc["result"];
    assert_eq!(r["replies"], 2000);
    assert_eq!(r["commands"][0]["replies"], 1500);
    assert_eq!(r["commands"][1]["errors"], 500);
    assert_eq!(r["errors"][0]["message"], "ERR null server rejects 'nope'");
    assert_eq!(r["errors"][0]["count"], 500);
    assert_eq!(doc["preload"]["keys"], 100);
    assert!(r["latency_ms"]["p99"].as_f64().unwrap() > 0.0);
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(picture.starts_with("<svg") && picture.contains("<polyline"));
    // preload (100 SETs) + the run
    assert_eq!(server.commands(), 2100);
    std::fs::remove_dir_all(&dir).unwrap();
    server.stop();
}

#[test]
fn compare_mode_reports_ratios() {
    let a = null_server(None);
    let b = null_server(None);
    let dir = std::env::temp_dir().join(format!("vireo-bench-ab-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("ab.json");
    let code = vireo_bench::main_from_args([
        "bench".to_string(),
        "--port".into(),
        a.local_addr().port().to_string(),
        "--compare".into(),
        format!("127.0.0.1:{}", b.local_addr().port()),
        "--rounds".into(),
        "3".into(),
        "--requests".into(),
        "300".into(),
        "--clients".into(),
        "3".into(),
        "--quiet".into(),
        "--json".into(),
        json.to_str().unwrap().into(),
    ]);
    assert_eq!(code, 0);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["a_rounds"].as_array().unwrap().len(), 3);
    assert_eq!(doc["b_rounds"].as_array().unwrap().len(), 3);
    let ops = &doc["figures"][0];
    assert_eq!(ops["name"], "ops/s");
    assert_eq!(ops["round_ratios"].as_array().unwrap().len(), 3);
    assert!(ops["ratio_b_over_a"].as_f64().unwrap() > 0.0);
    for r in doc["a_rounds"].as_array().unwrap() {
        assert_eq!(r["replies"], 300);
    }
    assert_eq!(a.commands(), 900);
    assert_eq!(b.commands(), 900);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Debian's redis-server on a free port, stopped on drop.
struct Redis(Child);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn redis_server_errors_hits_and_resp3() {
    let bin = Path::new("/usr/bin/redis-server");
    if !bin.exists() {
        eprintln!("skipped: {} is not installed", bin.display());
        return;
    }
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let child = Command::new(bin)
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--appendonly", "no", "--daemonize", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server starts");
    let _guard = Redis(child);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Fill keys 0..99 of 200: sequential GETs over all 200 then hit half.
    let fill = workload(&["SET __key__ __data__"], &[1], KeyPattern::Sequential);
    let mut cfg = config(addr, 100);
    let r = run::run(&cfg, &fill).unwrap();
    assert_eq!(r.stats.replies(), 100);

    let wl = Arc::new(Workload::new(
        vec![
            Template::parse("GET __key__").unwrap(),
            Template::parse("NOSUCHCMD __key__").unwrap(),
        ],
        weighted_cycle(&[1, 1]),
        "key:",
        400,
        KeyPattern::Sequential,
        "8".parse().unwrap(),
        1,
    ));
    cfg.limit = Limit::Requests(400);
    cfg.resp3 = true;
    let r = run::run(&cfg, &wl).unwrap();
    let s = &r.stats;
    assert_eq!(s.replies(), 400);
    // Requests 0,2,4,… are GETs of keys 0,2,…,398: keys below 100 exist.
    assert_eq!(s.hit_ratio_parts(), Some((50, 200)));
    assert_eq!(s.commands[1].errors, 200);
    let (msg, n) = s.errors.iter().next().unwrap();
    assert_eq!(*n, 200, "one group for all keys: {:?}", s.errors);
    assert!(msg.starts_with("ERR unknown command 'NOSUCHCMD'"), "{msg}");
}
