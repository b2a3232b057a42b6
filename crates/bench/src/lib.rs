//! `vireo bench`: a load generator for Redis-compatible servers.
//!
//! It speaks RESP over TCP with any number of client threads, connections
//! and pipeline depth; draws keys sequentially, uniformly, by Zipf's law or
//! a Gaussian; mixes any command templates in fixed ratios; records every
//! request's latency in HDR histograms (coordinated-omission-aware when a
//! target rate is given) and reports throughput, percentiles, hit ratio,
//! bytes and errors as text, JSON and an SVG chart. `--compare` runs the
//! same workload alternately against two servers and reports medians and
//! ratios, so comparisons hold on a noisy machine. `--null-server` turns it
//! into a constant-reply server that measures the loopback ceiling.
//!
//! The `vireo` binary calls [`main_from_args`] for `vireo bench …`.

#![forbid(unsafe_code)]

pub mod null_server;
pub mod plot;
pub mod reply;
pub mod report;
pub mod run;
pub mod stats;
pub mod template;
pub mod workload;

use clap::Parser;
use run::{Limit, RunConfig, RunResult, Target, Workload};
use serde_json::json;
use std::ffi::OsString;
use std::io::Write;
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use template::Template;
use workload::{DataSize, KeyPattern};

/// Requests per run when neither `--requests` nor `--test-time` is given.
pub const DEFAULT_REQUESTS: u64 = 100_000;

/// Command-line options of `vireo bench`.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "vireo bench",
    version,
    about = "Load generator for Redis-compatible servers: throughput, latency percentiles, A/B comparison, plots",
    long_about = "Load generator for Redis-compatible servers (RESP2/RESP3 over TCP).\n\n\
Each client thread drives --clients connections with up to --pipeline requests in flight each. \
Every request's latency goes into an HDR histogram; the report gives ops/s, p50/p95/p99/p99.9/max, \
hit ratio of reads (nil replies are misses), bytes/s in and out, reconnections and errors grouped by message.\n\n\
Without --command the workload is SET/GET in the --ratio mix. Templates may contain __key__ \
(--key-prefix + a key index drawn by --key-pattern from --key-space) and __data__ (a value of --data-size bytes).",
    after_help = "Examples:\n  \
vireo bench --port 6379 --ratio 1:10 --key-pattern zipf:0.99 --preload\n  \
vireo bench --command 'LPUSH list __data__' --command 'LPOP list' --test-time 10\n  \
vireo bench --rate 50000 --test-time 30 --plot latency.svg --json out.json\n  \
vireo bench --port 6379 --compare 127.0.0.1:6380 --rounds 7 --pipeline 16\n  \
vireo bench --null-server --port 7777 --threads 1\n\n\
Exit status: 0 when the run completed (even with error replies, which are reported), \
1 when the server could not be reached or no request was answered, 2 on bad usage."
)]
pub struct Cli {
    /// Server host name or address.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,

    /// Server TCP port (with --null-server: the port to listen on; 0 picks one).
    #[arg(long, default_value_t = 6379)]
    pub port: u16,

    /// Client threads, each with its own event loop (with --null-server: server threads).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,

    /// Connections per client thread.
    #[arg(long, default_value_t = 50)]
    pub clients: usize,

    /// Requests in flight per connection (1 = no pipelining).
    #[arg(long, default_value_t = 1)]
    pub pipeline: usize,

    /// Total requests over all connections [default: 100000 unless --test-time].
    #[arg(long, conflicts_with = "test_time")]
    pub requests: Option<u64>,

    /// Run for this many seconds instead of a request count.
    #[arg(long, value_name = "SECS")]
    pub test_time: Option<f64>,

    /// Value size in bytes: fixed (64) or uniform over a range (32-1024).
    #[arg(long, default_value = "64", value_name = "N|MIN-MAX")]
    pub data_size: DataSize,

    /// Prefix of every key.
    #[arg(long, default_value = "key:")]
    pub key_prefix: String,

    /// Number of distinct keys (indices 0..N-1 follow the prefix).
    #[arg(long, default_value_t = 100_000, value_name = "N")]
    pub key_space: u64,

    /// Key distribution: seq (each request the next key), uniform, zipf[:EXP]
    /// (default exponent 0.99; rank 0 hottest) or gaussian[:SIGMA] (σ as a
    /// fraction of the key space, default 1/6, centred).
    #[arg(long, default_value = "uniform", value_name = "PATTERN")]
    pub key_pattern: KeyPattern,

    /// SET:GET weights of the default workload, e.g. 1:10 [default: 1:10].
    #[arg(long, value_name = "SET:GET", conflicts_with = "command")]
    pub ratio: Option<String>,

    /// A command template, e.g. "SET __key__ __data__" or "HSET h __key__ __data__"; repeat
    /// for a mix. Words split on spaces; quotes group words.
    #[arg(long = "command", value_name = "TEMPLATE")]
    pub command: Vec<String>,

    /// Weights of the --command templates in order, e.g. 1:3 [default: all 1].
    #[arg(long, value_name = "W1:W2:…", requires = "command")]
    pub command_ratio: Option<String>,

    /// Protocol version: 3 sends HELLO 3 on every connection.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(2..=3))]
    pub resp: u8,

    /// Password: each connection sends AUTH [USER] PASSWORD first.
    #[arg(long, value_name = "PASSWORD")]
    pub auth: Option<String>,

    /// ACL user name for AUTH (needs --auth).
    #[arg(long, requires = "auth")]
    pub user: Option<String>,

    /// Database number to SELECT on each connection.
    #[arg(long)]
    pub db: Option<u32>,

    /// Before measuring, SET keys 0..N-1 (N defaults to --key-space), so reads hit.
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "0")]
    pub preload: Option<u64>,

    /// Target total ops/s (open loop). Latency is then measured from each
    /// request's intended send time, so server stalls are not hidden.
    #[arg(long, value_name = "OPS")]
    pub rate: Option<f64>,

    /// Seed of the key and value-size generators (runs are repeatable).
    #[arg(long, default_value_t = 0x7669_7265_6f)]
    pub seed: u64,

    /// Seconds allowed to establish a connection.
    #[arg(long, default_value_t = 2.0, value_name = "SECS")]
    pub connect_timeout: f64,

    /// Seconds without any reply, while requests are in flight, after which
    /// the connection is considered dead, dropped and reopened.
    #[arg(long, default_value_t = 10.0, value_name = "SECS")]
    pub timeout: f64,

    /// Write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Write an SVG chart to FILE: latency by percentile (log scale) and throughput over time.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,

    /// A/B mode: also run against HOST:PORT (B), alternating A B A B… for --rounds rounds;
    /// prints per-figure medians, the ratio median(B)/median(A) and the spread of per-round ratios.
    #[arg(long, value_name = "HOST:PORT")]
    pub compare: Option<Target>,

    /// Rounds of the A/B comparison.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub rounds: u64,

    /// Name of this run in reports (defaults to the workload mix).
    #[arg(long)]
    pub label: Option<String>,

    /// No progress line; one summary line per run instead of the full report.
    #[arg(long, short)]
    pub quiet: bool,

    /// Run the null server instead: listen on --host:--port with --threads
    /// threads and answer every command with a constant reply (+OK; GET: a
    /// --data-size bulk; LRANGE key 0 N: N+1 of those; PING: +PONG). Stops
    /// after --test-time if given.
    #[arg(long)]
    pub null_server: bool,

    /// With --null-server: answer this command (any case) with an error reply.
    #[arg(long, value_name = "COMMAND", requires = "null_server")]
    pub null_error: Option<String>,
}

/// Entry point of `vireo bench`. `args` starts with the program name
/// (`bench` when called from `vireo`), as `std::env::args_os()` would.
/// Returns the process exit code.
pub fn main_from_args<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    match execute(&cli) {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("vireo bench: {msg}");
            1
        }
    }
}

fn secs(v: f64, what: &str) -> Result<Duration, String> {
    if v.is_finite() && v > 0.0 && v < 1e9 {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(format!("{what} must be a positive number of seconds"))
    }
}

/// Builds the workload described by the options.
pub fn workload_from(cli: &Cli) -> Result<Workload, String> {
    let (templates, weights) = if cli.command.is_empty() {
        let ratio = cli.ratio.as_deref().unwrap_or("1:10");
        let w = workload::parse_weights(ratio)?;
        if w.len() != 2 {
            return Err(format!("--ratio {ratio:?} needs two weights, SET:GET"));
        }
        let t = vec![
            Template::parse("SET __key__ __data__")?,
            Template::parse("GET __key__")?,
        ];
        (t, w)
    } else {
        let t = cli
            .command
            .iter()
            .map(|c| Template::parse(c))
            .collect::<Result<Vec<_>, _>>()?;
        let w = match &cli.command_ratio {
            Some(r) => workload::parse_weights(r)?,
            None => vec![1; t.len()],
        };
        if w.len() != t.len() {
            return Err(format!(
                "--command-ratio has {} weights for {} templates",
                w.len(),
                t.len()
            ));
        }
        (t, w)
    };
    // Templates with zero weight are never sent; drop them from the report.
    let (templates, weights): (Vec<_>, Vec<_>) = templates
        .into_iter()
        .zip(weights)
        .filter(|(_, w)| *w > 0)
        .unzip();
    Ok(Workload::new(
        templates,
        workload::weighted_cycle(&weights),
        &cli.key_prefix,
        cli.key_space,
        cli.key_pattern,
        cli.data_size,
        cli.seed,
    ))
}

/// Builds the run settings described by the options.
pub fn config_from(cli: &Cli) -> Result<RunConfig, String> {
    if cli.threads == 0 || cli.clients == 0 || cli.pipeline == 0 {
        return Err("--threads, --clients and --pipeline must be at least 1".into());
    }
    if cli.key_space == 0 {
        return Err("--key-space must be at least 1".into());
    }
    let limit = match cli.test_time {
        Some(t) => Limit::Time(secs(t, "--test-time")?),
        None => Limit::Requests(cli.requests.unwrap_or(DEFAULT_REQUESTS)),
    };
    if let Some(r) = cli.rate {
        if !(r.is_finite() && r > 0.0) {
            return Err("--rate must be a positive number of ops/s".into());
        }
    }
    Ok(RunConfig {
        target: Target {
            host: cli.host.clone(),
            port: cli.port,
        },
        threads: cli.threads,
        clients: cli.clients,
        pipeline: cli.pipeline,
        limit,
        rate: cli.rate,
        resp3: cli.resp == 3,
        user: cli.user.clone(),
        password: cli.auth.clone(),
        db: cli.db,
        connect_timeout: secs(cli.connect_timeout, "--connect-timeout")?,
        reply_timeout: secs(cli.timeout, "--timeout")?,
        progress: !cli.quiet,
    })
}

/// Fills keys `0..n` with SET on `cfg.target`, unmeasured.
pub fn preload(cfg: &RunConfig, wl: &Workload, n: u64) -> Result<RunResult, String> {
    let fill = Workload {
        templates: vec![Template::parse("SET __key__ __data__")?],
        cycle: vec![0],
        key_pattern: KeyPattern::Sequential,
        ..wl.clone()
    };
    let cfg = RunConfig {
        limit: Limit::Requests(n),
        pipeline: cfg.pipeline.max(16),
        rate: None,
        progress: false,
        ..cfg.clone()
    };
    run::run(&cfg, &Arc::new(fill))
}

fn do_preload(cli: &Cli, cfg: &RunConfig, wl: &Workload) -> Result<Option<RunResult>, String> {
    let Some(n) = cli.preload else {
        return Ok(None);
    };
    let n = if n == 0 || n > wl.key_space {
        wl.key_space
    } else {
        n
    };
    let r = preload(cfg, wl, n)?;
    if !cli.quiet {
        println!(
            "preloaded {} keys on {} in {:.2} s ({} errors)",
            r.stats.replies(),
            cfg.target,
            r.elapsed.as_secs_f64(),
            r.stats.error_total()
        );
    }
    Ok(Some(r))
}

fn write_file(path: &PathBuf, body: &str) -> Result<(), String> {
    std::fs::write(path, body).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn execute(cli: &Cli) -> Result<i32, String> {
    if cli.null_server {
        return null_server_main(cli);
    }
    let wl = Arc::new(workload_from(cli)?);
    let cfg = config_from(cli)?;
    let label = cli.label.clone().unwrap_or_else(|| wl.mix_label());
    if let Some(b) = &cli.compare {
        return compare_main(cli, &cfg, &wl, &label, b);
    }
    if !cli.quiet {
        println!("vireo bench: {}", report::describe(&cfg, &wl));
    }
    let pre = do_preload(cli, &cfg, &wl)?;
    let r = run::run(&cfg, &wl)?;
    if cli.quiet {
        println!("{}", report::quiet_line(&label, &r));
    } else {
        print!("{}", report::text(&label, &r));
    }
    if let Some(path) = &cli.json {
        let doc = json!({
            "tool": "vireo bench",
            "version": env!("CARGO_PKG_VERSION"),
            "label": label,
            "config": report::config_json(&cfg, &wl),
            "preload": pre.as_ref().map(|p| json!({"keys": p.stats.replies(), "elapsed_s": p.elapsed.as_secs_f64(), "errors": p.stats.error_total()})),
            "result": report::run_json(&r),
        });
        write_file(path, &serde_json::to_string_pretty(&doc).expect("json"))?;
    }
    if let Some(path) = &cli.plot {
        let overall = r.stats.overall_latency();
        let mut curves = vec![plot::Curve {
            label: "all".into(),
            color: plot::PALETTE[0],
            hist: &overall,
        }];
        if r.stats.commands.len() > 1 {
            for (i, c) in r.stats.commands.iter().enumerate() {
                curves.push(plot::Curve {
                    label: c.name.clone(),
                    color: plot::PALETTE[(i + 1) % plot::PALETTE.len()],
                    hist: &c.latency,
                });
            }
        }
        let lines = [plot::Line {
            label: "ops/s".into(),
            color: plot::PALETTE[0],
            points: &r.timeline,
        }];
        let title = format!("vireo bench: {label} → {}", r.target);
        write_file(path, &plot::svg(&title, &curves, &lines))?;
    }
    let _ = std::io::stdout().flush();
    Ok(if r.stats.replies() == 0 { 1 } else { 0 })
}

fn compare_main(
    cli: &Cli,
    cfg: &RunConfig,
    wl: &Arc<Workload>,
    label: &str,
    b: &Target,
) -> Result<i32, String> {
    let targets = [cfg.target.clone(), b.clone()];
    if !cli.quiet {
        println!("vireo bench: {}", report::describe(cfg, wl));
        println!(
            "A/B: A = {}, B = {}, {} rounds",
            targets[0], targets[1], cli.rounds
        );
    }
    for t in &targets {
        let c = RunConfig {
            target: t.clone(),
            ..cfg.clone()
        };
        do_preload(cli, &c, wl)?;
    }
    let mut sides: [Vec<RunResult>; 2] = [Vec::new(), Vec::new()];
    for round in 1..=cli.rounds {
        for (side, t) in targets.iter().enumerate() {
            let c = RunConfig {
                target: t.clone(),
                ..cfg.clone()
            };
            let r = run::run(&c, wl)?;
            if !cli.quiet {
                let name = ["A", "B"][side];
                println!(
                    "{}",
                    report::quiet_line(&format!("round {round}/{} {name} {t}", cli.rounds), &r)
                );
            }
            sides[side].push(r);
        }
    }
    let figures = report::ab_figures(&sides[0], &sides[1]);
    print!(
        "{}",
        report::ab_text(
            &targets[0].to_string(),
            &targets[1].to_string(),
            cli.rounds as usize,
            &figures
        )
    );
    if let Some(path) = &cli.json {
        let doc = json!({
            "tool": "vireo bench",
            "version": env!("CARGO_PKG_VERSION"),
            "label": label,
            "config": report::config_json(cfg, wl),
            "compare": {
                "a": targets[0].to_string(),
                "b": targets[1].to_string(),
                "rounds": cli.rounds,
                "order": "each round runs A then B",
                "ratio": "median(B) / median(A)",
                "spread": "min, max and quartiles of the per-round ratios B_i / A_i",
            },
            "figures": figures.iter().map(report::ab_figure_json).collect::<Vec<_>>(),
            "a_rounds": sides[0].iter().map(report::run_json).collect::<Vec<_>>(),
            "b_rounds": sides[1].iter().map(report::run_json).collect::<Vec<_>>(),
        });
        write_file(path, &serde_json::to_string_pretty(&doc).expect("json"))?;
    }
    if let Some(path) = &cli.plot {
        let merged: Vec<_> = sides
            .iter()
            .map(|rs| {
                let mut h = stats::new_histogram();
                for r in rs {
                    let _ = h.add(r.stats.overall_latency());
                }
                h
            })
            .collect();
        let curves: Vec<plot::Curve> = (0..2)
            .map(|s| plot::Curve {
                label: format!("{} {} (all rounds)", ["A", "B"][s], targets[s]),
                color: plot::PALETTE[s],
                hist: &merged[s],
            })
            .collect();
        let lines: Vec<plot::Line> = (0..2)
            .flat_map(|s| {
                let label = format!("{} {}", ["A", "B"][s], targets[s]);
                sides[s].iter().map(move |r| (s, label.clone(), r))
            })
            .map(|(s, label, r)| plot::Line {
                label,
                color: plot::PALETTE[s],
                points: &r.timeline,
            })
            .collect();
        let title = format!("vireo bench A/B: {label}, {} rounds", cli.rounds);
        write_file(path, &plot::svg(&title, &curves, &lines))?;
    }
    let answered = sides.iter().flatten().all(|r| r.stats.replies() > 0);
    Ok(if answered { 0 } else { 1 })
}

fn null_server_main(cli: &Cli) -> Result<i32, String> {
    let addr = (cli.host.as_str(), cli.port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {}: {e}", cli.host))?
        .next()
        .ok_or_else(|| format!("no address for {}", cli.host))?;
    let server = null_server::NullServer::start(&null_server::NullConfig {
        addr,
        threads: cli.threads,
        get_size: cli.data_size.min,
        error_command: cli.null_error.clone(),
    })
    .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    println!(
        "null server listening on {} ({} thread(s))",
        server.local_addr(),
        cli.threads.max(1)
    );
    let _ = std::io::stdout().flush();
    match cli.test_time {
        Some(t) => {
            std::thread::sleep(secs(t, "--test-time")?);
            let n = server.commands();
            server.stop();
            if !cli.quiet {
                println!("null server answered {n} commands");
            }
        }
        None => server.wait(),
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied()))
    }

    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn defaults_give_a_set_get_mix() {
        let cli = parse(&[]).unwrap();
        let wl = workload_from(&cli).unwrap();
        assert_eq!(wl.mix_label(), "SET:GET 1:10");
        let cfg = config_from(&cli).unwrap();
        assert_eq!(cfg.limit, Limit::Requests(DEFAULT_REQUESTS));
        assert_eq!(cfg.target.to_string(), "127.0.0.1:6379");
    }

    #[test]
    fn options_are_parsed() {
        let cli = parse(&[
            "--command",
            "LPUSH l __data__",
            "--command",
            "LPOP l",
            "--command-ratio",
            "2:1",
            "--test-time",
            "1.5",
            "--key-pattern",
            "zipf:1.1",
            "--data-size",
            "8-16",
            "--preload",
            "--resp",
            "3",
        ])
        .unwrap();
        assert_eq!(cli.preload, Some(0));
        let wl = workload_from(&cli).unwrap();
        assert_eq!(wl.mix_label(), "LPUSH:LPOP 2:1");
        assert_eq!(wl.key_pattern, KeyPattern::Zipf(1.1));
        let cfg = config_from(&cli).unwrap();
        assert_eq!(cfg.limit, Limit::Time(Duration::from_millis(1500)));
        assert!(cfg.resp3);
    }

    #[test]
    fn bad_options_are_rejected() {
        assert!(parse(&["--resp", "4"]).is_err());
        assert!(parse(&["--requests", "5", "--test-time", "1"]).is_err());
        assert!(parse(&["--ratio", "1:1", "--command", "PING"]).is_err());
        assert!(parse(&["--key-pattern", "nope"]).is_err());
        assert!(parse(&["--rounds", "0"]).is_err());
        let cli = parse(&["--ratio", "1:2:3"]).unwrap();
        assert!(workload_from(&cli).is_err());
        let cli = parse(&["--command", "GET a", "--command-ratio", "1:2"]).unwrap();
        assert!(workload_from(&cli).is_err());
        let cli = parse(&["--clients", "0"]).unwrap();
        assert!(config_from(&cli).is_err());
    }

    #[test]
    fn help_and_usage_exit_codes() {
        assert_eq!(main_from_args(["bench", "--bogus"]), 2);
        let help = parse(&["--help"]).unwrap_err();
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
        assert_eq!(help.exit_code(), 0);
    }
}
