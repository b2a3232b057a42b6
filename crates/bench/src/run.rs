//! The load engine: client threads, each driving its connections with one
//! `mio` event loop, pipelining up to `--pipeline` requests per connection.
//!
//! Latency is measured per request, from the moment the request is queued
//! for sending (closed loop) or from its *intended* send time when a target
//! rate is given (open loop), so that a stalled server cannot hide its
//! stall by slowing the client down ("coordinated omission").

use crate::reply::{Reply, ReplyReader};
use crate::stats::{new_histogram, Percentiles, RunStats};
use crate::template::{encode_command, push_decimal, Template};
use crate::workload::{DataSize, KeyGen, KeyPattern};
use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};
use std::collections::VecDeque;
use std::fmt;
use std::io::{self, IsTerminal, Read, Write};
use std::net::ToSocketAddrs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Consecutive failures (refused connections, dropped connections, reply
/// timeouts) with no reply in between, after which a connection gives up
/// for the rest of the run. This is what bounds a run against a dead or
/// hung server.
const MAX_STRIKES: u32 = 5;
/// Pause before reconnecting after the n-th consecutive failure is
/// `(n - 1) ×` this (the first retry is immediate).
const RECONNECT_BACKOFF: Duration = Duration::from_millis(200);
/// How often threads publish their latencies for the progress line and
/// the main thread samples throughput for the plot.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// Longest a client thread sleeps in `poll` before rechecking timeouts.
const MAX_POLL_WAIT: Duration = Duration::from_millis(50);

/// The server under test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Host name or address.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl std::str::FromStr for Target {
    type Err = String;

    /// Parses `HOST:PORT`, `[V6]:PORT` or a bare `PORT` (on 127.0.0.1).
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("bad address {s:?} (use HOST:PORT)");
        if let Ok(port) = s.parse::<u16>() {
            return Ok(Target {
                host: "127.0.0.1".into(),
                port,
            });
        }
        let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(bad());
        }
        Ok(Target {
            host: host.to_string(),
            port: port.parse().map_err(|_| bad())?,
        })
    }
}

/// What to send: templates, their mix, keys and values.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Command templates.
    pub templates: Vec<Template>,
    /// One cycle of template indices; request `i` uses `cycle[i % len]`.
    pub cycle: Vec<u16>,
    /// Prefix of every key.
    pub key_prefix: Vec<u8>,
    /// Number of distinct keys.
    pub key_space: u64,
    /// How keys are drawn.
    pub key_pattern: KeyPattern,
    /// Value sizes.
    pub data_size: DataSize,
    /// Base seed of every random stream.
    pub seed: u64,
    /// Value bytes: requests use a prefix of this buffer.
    pub data: Arc<Vec<u8>>,
}

impl Workload {
    /// A workload; the value buffer is filled with seeded random
    /// alphanumerics.
    pub fn new(
        templates: Vec<Template>,
        cycle: Vec<u16>,
        key_prefix: &str,
        key_space: u64,
        key_pattern: KeyPattern,
        data_size: DataSize,
        seed: u64,
    ) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed ^ 0x5eed);
        let data = (0..data_size.max)
            .map(|_| rng.alphanumeric() as u8)
            .collect();
        Workload {
            templates,
            cycle,
            key_prefix: key_prefix.as_bytes().to_vec(),
            key_space: key_space.max(1),
            key_pattern,
            data_size,
            seed,
            data: Arc::new(data),
        }
    }

    /// Empty stats matching this workload's templates.
    pub fn new_stats(&self) -> RunStats {
        RunStats::new(
            self.templates
                .iter()
                .map(|t| (t.name.as_str(), t.source.as_str(), t.is_read)),
        )
    }

    /// A short human description of the mix, e.g. `SET:GET 1:10`.
    pub fn mix_label(&self) -> String {
        let mut weights = vec![0u32; self.templates.len()];
        for &i in &self.cycle {
            weights[i as usize] += 1;
        }
        let names: Vec<&str> = self.templates.iter().map(|t| t.name.as_str()).collect();
        let w: Vec<String> = weights.iter().map(u32::to_string).collect();
        format!("{} {}", names.join(":"), w.join(":"))
    }
}

/// When a run ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    /// After this many requests in total (over all connections).
    Requests(u64),
    /// After this long (requests in flight are then awaited).
    Time(Duration),
}

/// How to run: connections, pipelining, pacing, timeouts.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Server address.
    pub target: Target,
    /// Client threads.
    pub threads: usize,
    /// Connections per thread.
    pub clients: usize,
    /// Requests in flight per connection.
    pub pipeline: usize,
    /// End of the run.
    pub limit: Limit,
    /// Target total ops/s (open loop), or `None` for as fast as possible.
    pub rate: Option<f64>,
    /// Send `HELLO 3` on connect.
    pub resp3: bool,
    /// ACL user for AUTH.
    pub user: Option<String>,
    /// Password for AUTH.
    pub password: Option<String>,
    /// Database to SELECT.
    pub db: Option<u32>,
    /// Limit for establishing a connection.
    pub connect_timeout: Duration,
    /// Limit for waiting on a reply while requests are in flight.
    pub reply_timeout: Duration,
    /// Draw the live progress line (only honoured on a terminal).
    pub progress: bool,
}

/// One throughput sample of the run's timeline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Seconds since the start of the run (end of the interval).
    pub t: f64,
    /// Replies per second over the interval.
    pub ops_per_sec: f64,
}

/// The outcome of one run.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The server measured.
    pub target: Target,
    /// Merged measurements of all threads.
    pub stats: RunStats,
    /// From the moment all connections were up to the last reply.
    pub elapsed: Duration,
    /// Throughput over time, one sample per quarter second.
    pub timeline: Vec<Sample>,
}

impl RunResult {
    /// Replies per second.
    pub fn ops_per_sec(&self) -> f64 {
        per_sec(self.stats.replies(), self.elapsed)
    }

    /// Bytes per second received.
    pub fn bytes_in_per_sec(&self) -> f64 {
        per_sec(self.stats.bytes_in, self.elapsed)
    }

    /// Bytes per second sent.
    pub fn bytes_out_per_sec(&self) -> f64 {
        per_sec(self.stats.bytes_out, self.elapsed)
    }

    /// Latency percentiles over all commands.
    pub fn percentiles(&self) -> Percentiles {
        Percentiles::of(&self.stats.overall_latency())
    }

    /// Hits / reads over the read commands, if any read was answered.
    pub fn hit_ratio(&self) -> Option<f64> {
        match self.stats.hit_ratio_parts() {
            Some((h, n)) if n > 0 => Some(h as f64 / n as f64),
            _ => None,
        }
    }
}

fn per_sec(n: u64, d: Duration) -> f64 {
    let s = d.as_secs_f64();
    if s > 0.0 {
        n as f64 / s
    } else {
        0.0
    }
}

/// State shared by the client threads and the main thread.
struct Shared {
    /// Requests claimed so far (the run-wide request sequence).
    issued: AtomicU64,
    /// Replies received so far.
    completed: AtomicU64,
    /// Set when a timed run is over: send nothing new.
    stop: AtomicBool,
    /// Latencies published by the threads, for the live p99.
    live: Mutex<Histogram<u64>>,
}

/// Opens a connection and performs AUTH / HELLO / SELECT, blocking, with
/// the configured timeouts. Returns a non-blocking stream ready for `mio`.
pub fn connect(cfg: &RunConfig) -> Result<std::net::TcpStream, String> {
    let addrs: Vec<_> = (cfg.target.host.as_str(), cfg.target.port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {}: {e}", cfg.target))?
        .collect();
    let mut last = format!("no address for {}", cfg.target);
    let mut stream = None;
    for a in addrs {
        match std::net::TcpStream::connect_timeout(&a, cfg.connect_timeout) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = format!("cannot connect to {}: {e}", cfg.target),
        }
    }
    let mut s = stream.ok_or(last)?;
    let io = |e: io::Error| format!("{}: {e}", cfg.target);
    s.set_nodelay(true).map_err(io)?;
    let mut req = Vec::new();
    let mut what = Vec::new();
    if let Some(pass) = &cfg.password {
        match &cfg.user {
            Some(u) => encode_command(&mut req, &[b"AUTH", u.as_bytes(), pass.as_bytes()]),
            None => encode_command(&mut req, &[b"AUTH", pass.as_bytes()]),
        }
        what.push("AUTH");
    }
    if cfg.resp3 {
        encode_command(&mut req, &[b"HELLO", b"3"]);
        what.push("HELLO 3");
    }
    if let Some(db) = cfg.db {
        encode_command(&mut req, &[b"SELECT", db.to_string().as_bytes()]);
        what.push("SELECT");
    }
    if !what.is_empty() {
        s.set_read_timeout(Some(cfg.reply_timeout)).map_err(io)?;
        s.set_write_timeout(Some(cfg.reply_timeout)).map_err(io)?;
        s.write_all(&req).map_err(io)?;
        let mut reader = ReplyReader::new();
        let mut buf = Vec::new();
        let mut replies = Vec::new();
        let mut chunk = [0u8; 4096];
        while replies.len() < what.len() {
            let n = s
                .read(&mut chunk)
                .map_err(|e| format!("{}: no reply to {}: {e}", cfg.target, what[replies.len()]))?;
            if n == 0 {
                return Err(format!(
                    "{}: connection closed during handshake",
                    cfg.target
                ));
            }
            buf.extend_from_slice(&chunk[..n]);
            let used = reader
                .feed(&buf, |r| replies.push(r))
                .map_err(|e| format!("{}: {e}", cfg.target))?;
            buf.drain(..used);
        }
        for (r, w) in replies.iter().zip(&what) {
            if let Reply::Error(msg) = r {
                return Err(format!("{}: {w} failed: {msg}", cfg.target));
            }
        }
        s.set_read_timeout(None).map_err(io)?;
        s.set_write_timeout(None).map_err(io)?;
    }
    s.set_nonblocking(true).map_err(io)?;
    Ok(s)
}

/// Runs the workload once against `cfg.target` and returns the merged
/// measurements. Fails only when the server cannot be reached at all (or
/// the handshake is refused); later failures are counted, not fatal.
pub fn run(cfg: &RunConfig, wl: &Arc<Workload>) -> Result<RunResult, String> {
    if cfg.threads == 0 || cfg.clients == 0 || cfg.pipeline == 0 {
        return Err("--threads, --clients and --pipeline must be at least 1".into());
    }
    if wl.templates.is_empty() || wl.cycle.is_empty() {
        return Err("no command to send".into());
    }
    // Fail fast, with a clear message, when the server is not there.
    drop(connect(cfg)?);

    let shared = Arc::new(Shared {
        issued: AtomicU64::new(0),
        completed: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        live: Mutex::new(new_histogram()),
    });
    let barrier = Arc::new(Barrier::new(cfg.threads + 1));
    let mut handles = Vec::new();
    for tid in 0..cfg.threads {
        let (cfg, wl, shared, barrier) = (cfg.clone(), wl.clone(), shared.clone(), barrier.clone());
        let h = thread::Builder::new()
            .name(format!("bench-{tid}"))
            .spawn(move || Worker::new(tid, &cfg, &wl, &shared).run(&barrier))
            .map_err(|e| format!("cannot start thread: {e}"))?;
        handles.push(h);
    }
    barrier.wait();
    let start = Instant::now();
    let show = cfg.progress && io::stdout().is_terminal();
    let mut timeline = Vec::new();
    let mut last_sample = (start, 0u64);
    let mut next_sample = start + SAMPLE_EVERY;
    while !handles.iter().all(|h| h.is_finished()) {
        thread::sleep(Duration::from_millis(10));
        let now = Instant::now();
        if let Limit::Time(d) = cfg.limit {
            if now >= start + d {
                shared.stop.store(true, Ordering::Relaxed);
            }
        }
        if now >= next_sample {
            next_sample += SAMPLE_EVERY;
            let done = shared.completed.load(Ordering::Relaxed);
            let dt = now.duration_since(last_sample.0).as_secs_f64();
            timeline.push(Sample {
                t: now.duration_since(start).as_secs_f64(),
                ops_per_sec: (done - last_sample.1) as f64 / dt,
            });
            last_sample = (now, done);
            if show {
                let p99 = {
                    let h = shared.live.lock().unwrap_or_else(|e| e.into_inner());
                    if h.is_empty() {
                        0.0
                    } else {
                        h.value_at_quantile(0.99) as f64 / 1e6
                    }
                };
                let line = format!(
                    "{:>7.1}s  {:>11.0} ops/s  {:>11} replies  p99 {:.3} ms",
                    now.duration_since(start).as_secs_f64(),
                    timeline.last().map_or(0.0, |s| s.ops_per_sec),
                    done,
                    p99
                );
                let mut out = io::stdout().lock();
                let _ = write!(out, "\r\x1b[2K{line}");
                let _ = out.flush();
            }
        }
    }
    if show {
        let mut out = io::stdout().lock();
        let _ = write!(out, "\r\x1b[2K");
        let _ = out.flush();
    }
    let mut stats = wl.new_stats();
    let mut end = start;
    for h in handles {
        let (s, finished) = h
            .join()
            .map_err(|_| "a client thread panicked".to_string())?;
        stats.merge(&s);
        end = end.max(finished);
    }
    let elapsed = end.duration_since(start);
    let done = shared.completed.load(Ordering::Relaxed);
    let tail = end.saturating_duration_since(last_sample.0).as_secs_f64();
    if tail > 0.001 && done > last_sample.1 {
        timeline.push(Sample {
            t: elapsed.as_secs_f64(),
            ops_per_sec: (done - last_sample.1) as f64 / tail,
        });
    }
    Ok(RunResult {
        target: cfg.target.clone(),
        stats,
        elapsed,
        timeline,
    })
}

/// Why a connection was dropped.
enum Hangup {
    Closed,
    Io(io::Error),
    Protocol(String),
    Timeout,
}

impl fmt::Display for Hangup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Hangup::Closed => write!(f, "connection closed by server"),
            Hangup::Io(e) => write!(f, "connection error: {e}"),
            Hangup::Protocol(e) => write!(f, "protocol error: {e}"),
            Hangup::Timeout => write!(f, "reply timeout"),
        }
    }
}

/// One client connection and its pipeline.
struct Conn {
    stream: Option<TcpStream>,
    wbuf: Vec<u8>,
    wpos: usize,
    rbuf: Vec<u8>,
    rstart: usize,
    rlen: usize,
    reader: ReplyReader,
    /// Requests awaiting a reply: (latency origin, template index).
    inflight: VecDeque<(Instant, u16)>,
    keys: KeyGen,
    rng: fastrand::Rng,
    key: Vec<u8>,
    /// Open loop: intended send time of the next request.
    next_due: Instant,
    /// No more requests will be sent on this connection.
    exhausted: bool,
    /// Gave up reconnecting.
    dead: bool,
    ever_connected: bool,
    /// Consecutive failures without a reply in between.
    strikes: u32,
    retry_at: Instant,
    /// When the oldest in-flight request last saw progress.
    last_progress: Instant,
}

impl Conn {
    /// Records a failure: schedules the next connection attempt, or gives
    /// up after too many in a row.
    fn strike(&mut self, now: Instant) {
        self.strikes += 1;
        if self.strikes >= MAX_STRIKES {
            self.dead = true;
            self.exhausted = true;
        } else {
            self.retry_at = now + RECONNECT_BACKOFF * (self.strikes - 1);
        }
    }

    fn done(&self) -> bool {
        self.dead || (self.exhausted && self.inflight.is_empty())
    }
}

/// A client thread.
struct Worker<'a> {
    cfg: &'a RunConfig,
    wl: &'a Workload,
    shared: &'a Shared,
    poll: Poll,
    conns: Vec<Conn>,
    stats: RunStats,
    live: Histogram<u64>,
    /// Open loop: time between two requests of one connection.
    interval: Option<Duration>,
    /// Open loop: wakes the event loop at the next send time.
    timer: Option<Timer>,
}

/// Token of the open-loop timer in a worker's `Poll`.
const TIMER: Token = Token(usize::MAX);

/// A one-shot monotonic timerfd registered with a worker's `Poll`, for
/// wake-ups more precise than epoll's millisecond timeout.
struct Timer {
    fd: OwnedFd,
}

impl Timer {
    fn new(poll: &Poll) -> io::Result<Timer> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        poll.registry()
            .register(&mut SourceFd(&fd.as_raw_fd()), TIMER, Interest::READABLE)?;
        Ok(Timer { fd })
    }

    /// Fires once, `after` from now (which must not be zero).
    fn arm(&self, after: Duration) -> io::Result<()> {
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let value = Timespec::try_from(after).map_err(|_| io::ErrorKind::InvalidInput)?;
        timerfd_settime(
            &self.fd,
            TimerfdTimerFlags::empty(),
            &Itimerspec {
                it_interval: zero,
                it_value: value,
            },
        )?;
        Ok(())
    }

    /// Consumes the expiry count so the next expiry is a fresh edge.
    fn clear(&self) {
        let mut buf = [0u8; 8];
        let _ = rustix::io::read(&self.fd, &mut buf);
    }
}

impl<'a> Worker<'a> {
    fn new(tid: usize, cfg: &'a RunConfig, wl: &'a Workload, shared: &'a Shared) -> Self {
        let total_conns = (cfg.threads * cfg.clients) as f64;
        let interval = cfg
            .rate
            .filter(|r| *r > 0.0)
            .map(|r| Duration::from_secs_f64(total_conns / r));
        let now = Instant::now();
        let conns = (0..cfg.clients)
            .map(|c| {
                let id = (tid * cfg.clients + c) as u64;
                let seed = wl.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(id);
                Conn {
                    stream: None,
                    wbuf: Vec::with_capacity(4096),
                    wpos: 0,
                    rbuf: vec![0; 16 * 1024],
                    rstart: 0,
                    rlen: 0,
                    reader: ReplyReader::new(),
                    inflight: VecDeque::with_capacity(cfg.pipeline),
                    keys: KeyGen::new(wl.key_pattern, wl.key_space, seed),
                    rng: fastrand::Rng::with_seed(seed ^ 0xda7a),
                    key: Vec::with_capacity(wl.key_prefix.len() + 20),
                    next_due: now,
                    exhausted: false,
                    dead: false,
                    ever_connected: false,
                    strikes: 0,
                    retry_at: now,
                    last_progress: now,
                }
            })
            .collect();
        let poll = Poll::new().expect("epoll instance");
        // Without a timerfd the open loop falls back to epoll's timeout.
        let timer = interval.and_then(|_| Timer::new(&poll).ok());
        Worker {
            cfg,
            wl,
            shared,
            poll,
            timer,
            conns,
            stats: wl.new_stats(),
            live: new_histogram(),
            interval,
        }
    }

    fn run(mut self, barrier: &Barrier) -> (RunStats, Instant) {
        for i in 0..self.conns.len() {
            self.try_connect(i);
        }
        barrier.wait();
        let start = Instant::now();
        // Spread the open-loop schedules of the connections over one interval.
        if let Some(iv) = self.interval {
            let total = (self.cfg.threads * self.cfg.clients) as u32;
            for (i, c) in self.conns.iter_mut().enumerate() {
                c.next_due = start + iv * (i as u32) / total.max(1);
            }
        }
        let mut events = Events::with_capacity(256);
        let mut next_publish = start + SAMPLE_EVERY;
        loop {
            let now = Instant::now();
            if self.shared.stop.load(Ordering::Relaxed) {
                for c in &mut self.conns {
                    c.exhausted = true;
                }
            }
            let mut wait = MAX_POLL_WAIT;
            for i in 0..self.conns.len() {
                let c = &self.conns[i];
                if c.stream.is_none() {
                    if !c.done() && now >= c.retry_at {
                        self.try_connect(i);
                    }
                    continue;
                }
                if !c.inflight.is_empty()
                    && now.duration_since(c.last_progress) > self.cfg.reply_timeout
                {
                    self.drop_conn(i, Hangup::Timeout);
                    continue;
                }
                self.fill(i, now);
                let c = &self.conns[i];
                if self.interval.is_some() && !c.exhausted && c.inflight.len() < self.cfg.pipeline {
                    wait = wait.min(c.next_due.saturating_duration_since(now));
                }
            }
            if now >= next_publish {
                next_publish = now + SAMPLE_EVERY;
                self.publish();
            }
            if self.conns.iter().all(Conn::done) {
                break;
            }
            // epoll sleeps in whole milliseconds (rounded up), which would
            // make open-loop requests late by up to 1 ms, and lateness counts
            // as latency there: the open loop wakes on a timerfd instead,
            // armed with nanosecond precision for the next send time.
            let timeout = match &self.timer {
                Some(t) if wait < MAX_POLL_WAIT => {
                    if wait.is_zero() || t.arm(wait).is_err() {
                        Duration::ZERO
                    } else {
                        MAX_POLL_WAIT
                    }
                }
                _ => wait,
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    self.stats.add_error(&format!("poll failed: {e}"));
                    break;
                }
            }
            for ev in events.iter() {
                let i = ev.token().0;
                if ev.token() == TIMER {
                    if let Some(t) = &self.timer {
                        t.clear();
                    }
                    continue;
                }
                if self.conns[i].stream.is_none() {
                    continue;
                }
                if ev.is_writable() {
                    if let Err(d) = self.flush(i) {
                        self.drop_conn(i, d);
                        continue;
                    }
                }
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    match self.read(i) {
                        Ok(()) => self.fill(i, Instant::now()),
                        Err(d) => self.drop_conn(i, d),
                    }
                }
            }
        }
        let finished = Instant::now();
        self.publish();
        (self.stats, finished)
    }

    /// Hands this thread's recent latencies to the progress line.
    fn publish(&mut self) {
        if self.live.is_empty() {
            return;
        }
        let mut h = self.shared.live.lock().unwrap_or_else(|e| e.into_inner());
        let _ = h.add(&self.live);
        drop(h);
        self.live.reset();
    }

    /// (Re)connects connection `i`, with backoff and a retry limit.
    fn try_connect(&mut self, i: usize) {
        let result = connect(self.cfg).and_then(|s| {
            let mut s = TcpStream::from_std(s);
            self.poll
                .registry()
                .register(&mut s, Token(i), Interest::READABLE | Interest::WRITABLE)
                .map_err(|e| format!("cannot register socket: {e}"))?;
            Ok(s)
        });
        let now = Instant::now();
        let c = &mut self.conns[i];
        match result {
            Ok(s) => {
                c.stream = Some(s);
                if c.ever_connected {
                    self.stats.reconnects += 1;
                }
                c.ever_connected = true;
                c.last_progress = now;
                if self.interval.is_some() && c.next_due < now {
                    // Requests not sent while disconnected are not owed.
                    c.next_due = now;
                }
            }
            Err(e) => {
                self.stats.add_error(&e);
                c.strike(now);
            }
        }
    }

    /// Drops connection `i`; its in-flight requests are counted as lost.
    fn drop_conn(&mut self, i: usize, why: Hangup) {
        let c = &mut self.conns[i];
        if let Some(mut s) = c.stream.take() {
            let _ = self.poll.registry().deregister(&mut s);
        }
        let lost = c.inflight.len() as u64;
        c.inflight.clear();
        c.wbuf.clear();
        c.wpos = 0;
        c.rstart = 0;
        c.rlen = 0;
        c.reader.reset();
        c.strike(Instant::now());
        self.stats.lost += lost;
        // One entry per request left without a reply, or one for the
        // disconnection itself when nothing was in flight.
        if lost > 0 {
            self.stats
                .add_errors(&format!("{why} (request lost)"), lost);
        } else {
            self.stats.add_errors(&format!("{why}"), 1);
        }
    }

    /// Queues as many requests as the pipeline (and, open loop, the
    /// schedule) allows on connection `i`, then writes.
    fn fill(&mut self, i: usize, now: Instant) {
        let (cfg, wl) = (self.cfg, self.wl);
        let c = &mut self.conns[i];
        if c.stream.is_none() || c.exhausted {
            return;
        }
        let room = cfg.pipeline.saturating_sub(c.inflight.len()) as u64;
        if room == 0 {
            return;
        }
        let want = match self.interval {
            None => room,
            Some(iv) => {
                if now < c.next_due {
                    return;
                }
                let behind = now.duration_since(c.next_due).as_nanos() / iv.as_nanos().max(1);
                room.min(behind as u64 + 1)
            }
        };
        let first = self.shared.issued.fetch_add(want, Ordering::Relaxed);
        let granted = match cfg.limit {
            Limit::Requests(total) if first >= total => 0,
            Limit::Requests(total) => want.min(total - first),
            Limit::Time(_) => want,
        };
        if granted < want {
            c.exhausted = true;
        }
        if c.inflight.is_empty() && granted > 0 {
            c.last_progress = now;
        }
        for seq in first..first + granted {
            let ti = wl.cycle[(seq % wl.cycle.len() as u64) as usize];
            let t = &wl.templates[ti as usize];
            c.key.clear();
            if t.uses_key() {
                c.key.extend_from_slice(&wl.key_prefix);
                push_decimal(&mut c.key, c.keys.next(seq));
            }
            let size = if t.uses_data() {
                wl.data_size.sample(&mut c.rng)
            } else {
                0
            };
            t.encode(&mut c.wbuf, &c.key, &wl.data[..size]);
            let origin = match self.interval {
                Some(iv) => {
                    let due = c.next_due;
                    c.next_due += iv;
                    due
                }
                None => now,
            };
            c.inflight.push_back((origin, ti));
        }
        if let Err(d) = self.flush(i) {
            self.drop_conn(i, d);
        }
    }

    /// Writes pending output of connection `i` until done or the socket
    /// is full.
    fn flush(&mut self, i: usize) -> Result<(), Hangup> {
        let c = &mut self.conns[i];
        let Some(s) = c.stream.as_mut() else {
            return Ok(());
        };
        while c.wpos < c.wbuf.len() {
            match s.write(&c.wbuf[c.wpos..]) {
                Ok(0) => return Err(Hangup::Closed),
                Ok(n) => {
                    c.wpos += n;
                    self.stats.bytes_out += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Hangup::Io(e)),
            }
        }
        if c.wpos == c.wbuf.len() {
            c.wbuf.clear();
            c.wpos = 0;
        }
        Ok(())
    }

    /// Reads everything available on connection `i` and accounts replies.
    fn read(&mut self, i: usize) -> Result<(), Hangup> {
        loop {
            let c = &mut self.conns[i];
            if c.rlen == c.rbuf.len() {
                if c.rstart > 0 {
                    c.rbuf.copy_within(c.rstart..c.rlen, 0);
                    c.rlen -= c.rstart;
                    c.rstart = 0;
                } else {
                    let n = c.rbuf.len() * 2;
                    c.rbuf.resize(n, 0);
                }
            }
            let s = c.stream.as_mut().expect("connected");
            match s.read(&mut c.rbuf[c.rlen..]) {
                Ok(0) => return Err(Hangup::Closed),
                Ok(n) => {
                    c.rlen += n;
                    self.stats.bytes_in += n as u64;
                    self.account(i)?;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Hangup::Io(e)),
            }
        }
    }

    /// Parses the complete replies in connection `i`'s buffer.
    fn account(&mut self, i: usize) -> Result<(), Hangup> {
        let now = Instant::now();
        let c = &mut self.conns[i];
        let stats = &mut self.stats;
        let live = &mut self.live;
        let inflight = &mut c.inflight;
        let mut got = 0u64;
        let mut unexpected = 0u64;
        let used = c
            .reader
            .feed(&c.rbuf[c.rstart..c.rlen], |reply| {
                let Some((origin, ti)) = inflight.pop_front() else {
                    unexpected += 1;
                    return;
                };
                got += 1;
                let ns = now.saturating_duration_since(origin).as_nanos() as u64;
                let cmd = &mut stats.commands[ti as usize];
                cmd.replies += 1;
                cmd.latency.saturating_record(ns.max(1));
                live.saturating_record(ns.max(1));
                match reply {
                    Reply::Nil => cmd.nils += 1,
                    Reply::Error(msg) => {
                        cmd.errors += 1;
                        stats.add_error(&msg);
                    }
                    _ => {}
                }
            })
            .map_err(|e| Hangup::Protocol(e.0))?;
        c.rstart += used;
        if c.rstart == c.rlen {
            c.rstart = 0;
            c.rlen = 0;
        }
        if got > 0 {
            c.last_progress = now;
            c.strikes = 0;
            self.shared.completed.fetch_add(got, Ordering::Relaxed);
        }
        if unexpected > 0 {
            return Err(Hangup::Protocol(format!(
                "{unexpected} replies without a request"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let t: Target = "localhost:7000".parse().unwrap();
        assert_eq!((t.host.as_str(), t.port), ("localhost", 7000));
        let t: Target = "[::1]:7000".parse().unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 7000));
        assert_eq!(t.to_string(), "[::1]:7000");
        let t: Target = "6380".parse().unwrap();
        assert_eq!(t.to_string(), "127.0.0.1:6380");
        assert!("host".parse::<Target>().is_err());
        assert!(":1".parse::<Target>().is_err());
        assert!("h:99999".parse::<Target>().is_err());
    }
}
