//! Measurements behind INFO, LATENCY and MEMORY that are not plain
//! counters: per-command latency histograms, the latency monitor's event
//! series, the sampled "instantaneous" rates, and the memory report
//! INFO memory and MEMORY STATS / DOCTOR share.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use vireo_store::clock::now_ms;

use crate::memory::alloc;
use crate::server::{Server, WorkerStats};

/// Buckets of a command latency histogram. Bucket `k` holds durations up
/// to `1032 * 2^k - 1` ns, the reporting levels Redis's `LATENCY
/// HISTOGRAM` walks (powers of two from 1024 ns in an HDR histogram with
/// two significant figures). The last bucket reaches past 1 s, the
/// largest duration Redis tracks.
pub const HIST_BUCKETS: usize = 21;

/// The histogram bucket of a command that ran for `us` microseconds.
/// Redis records `us * 1000` ns, clamped to 1 ns ..= 1 s.
pub fn hist_bucket(us: u64) -> usize {
    let ns = us.saturating_mul(1000).clamp(1, 1_000_000_000);
    let q = ns / 1032;
    let k = (u64::BITS - q.leading_zeros()) as usize;
    k.min(HIST_BUCKETS - 1)
}

/// Upper bound, in nanoseconds, of histogram bucket `k`.
pub fn hist_bucket_ns(k: usize) -> u64 {
    (1032u64 << k) - 1
}

/// The histogram of one command, summed over workers.
#[derive(Clone, Copy, Default)]
pub struct Histogram {
    /// Count per bucket.
    pub buckets: [u64; HIST_BUCKETS],
}

impl Histogram {
    /// Adds a worker's bucket counters.
    pub fn add(&mut self, counters: &[AtomicU64; HIST_BUCKETS]) {
        for (b, c) in self.buckets.iter_mut().zip(counters) {
            *b += c.load(Ordering::Relaxed);
        }
    }

    /// Number of samples.
    pub fn total(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// (upper bound in µs, cumulative count) for each bucket where the
    /// cumulative count grows: what `LATENCY HISTOGRAM` reports.
    pub fn cumulative(&self) -> Vec<(u64, u64)> {
        let mut acc = 0;
        let mut out = Vec::new();
        for (k, &n) in self.buckets.iter().enumerate() {
            if n > 0 {
                acc += n;
                out.push((hist_bucket_ns(k) / 1000, acc));
            }
        }
        out
    }

    /// The latency in µs under which `pct` percent of the samples fall, as
    /// the upper bound of the bucket holding that sample (so it is exact
    /// to within a factor of two; Redis's full HDR histogram is finer).
    pub fn percentile_us(&self, pct: f64) -> f64 {
        let total = self.total();
        let want = ((pct.min(100.0) / 100.0) * total as f64 + 0.5) as u64;
        let want = want.max(1);
        let mut acc = 0;
        for (k, &n) in self.buckets.iter().enumerate() {
            acc += n;
            if acc >= want {
                return hist_bucket_ns(k) as f64 / 1000.0;
            }
        }
        0.0
    }
}

/// Samples an event series keeps, like Redis's LATENCY_TS_LEN.
const LATENCY_SERIES_LEN: usize = 160;

/// The recorded spikes of one latency event.
#[derive(Clone, Default)]
pub struct LatencySeries {
    /// (Unix seconds, latency in ms), oldest first; at most one per second.
    pub samples: VecDeque<(u64, u64)>,
    /// Largest latency ever recorded for the event.
    pub max: u64,
}

/// The latency monitor (LATENCY LATEST / HISTORY / RESET / GRAPH): event
/// series fed when something takes at least `latency-monitor-threshold` ms.
#[derive(Default)]
pub struct LatencyMonitor {
    events: Mutex<BTreeMap<&'static str, LatencySeries>>,
}

impl LatencyMonitor {
    /// Records `ms` for `event` if the monitor is on (`threshold` > 0) and
    /// the latency reaches the threshold.
    pub fn sample_if_needed(&self, threshold: u64, event: &'static str, ms: u64) {
        if threshold > 0 && ms >= threshold {
            self.add(event, ms, now_ms() / 1000);
        }
    }

    /// Adds a sample at `now_s`; several in one second keep the largest.
    pub fn add(&self, event: &'static str, ms: u64, now_s: u64) {
        let mut events = self.events.lock();
        let series = events.entry(event).or_default();
        series.max = series.max.max(ms);
        if let Some(last) = series.samples.back_mut() {
            if last.0 == now_s {
                last.1 = last.1.max(ms);
                return;
            }
        }
        if series.samples.len() == LATENCY_SERIES_LEN {
            series.samples.pop_front();
        }
        series.samples.push_back((now_s, ms));
    }

    /// A copy of every series, by event name.
    pub fn snapshot(&self) -> Vec<(&'static str, LatencySeries)> {
        self.events
            .lock()
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect()
    }

    /// A copy of one event's series.
    pub fn series(&self, event: &[u8]) -> Option<LatencySeries> {
        let name = std::str::from_utf8(event).ok()?;
        self.events.lock().get(name).cloned()
    }

    /// Forgets one event; true if it had samples.
    pub fn reset_event(&self, event: &[u8]) -> bool {
        let Ok(name) = std::str::from_utf8(event) else {
            return false;
        };
        self.events.lock().remove(name).is_some()
    }

    /// Forgets every event; returns how many there were.
    pub fn reset_all(&self) -> usize {
        let mut events = self.events.lock();
        let n = events.len();
        events.clear();
        n
    }
}

/// Samples averaged for an instantaneous rate (Redis's
/// STATS_METRIC_SAMPLES).
const RATE_SAMPLES: usize = 16;
/// Minimum time between two rate samples, in ms: Redis samples every
/// 100 ms; the slack keeps a cron tick that wakes a little early from
/// skipping a sample.
const RATE_PERIOD_MS: u64 = 90;

/// A rate INFO reports as "instantaneous".
#[derive(Clone, Copy)]
pub enum Rate {
    /// Commands per second.
    Commands = 0,
    /// Bytes read from clients per second.
    NetInput = 1,
    /// Bytes written to clients per second.
    NetOutput = 2,
}

#[derive(Default)]
struct RateTrack {
    samples: [u64; RATE_SAMPLES],
    idx: usize,
    last_ms: u64,
    last_count: u64,
}

impl RateTrack {
    fn push(&mut self, now: u64, count: u64) {
        let elapsed = now.saturating_sub(self.last_ms);
        let per_sec = count
            .saturating_sub(self.last_count)
            .saturating_mul(1000)
            .checked_div(elapsed)
            .unwrap_or(0);
        self.samples[self.idx] = per_sec;
        self.idx = (self.idx + 1) % RATE_SAMPLES;
        self.last_ms = now;
        self.last_count = count;
    }

    fn average(&self) -> u64 {
        self.samples.iter().sum::<u64>() / RATE_SAMPLES as u64
    }
}

/// Rolling per-second rates, sampled by the cron thread every 100 ms and
/// averaged over the last 16 samples, as Redis's `trackInstantaneousMetric`.
#[derive(Default)]
pub struct Rates {
    tracks: Mutex<[RateTrack; 3]>,
}

impl Rates {
    /// Takes a sample of the worker counters unless the last one is less
    /// than about 100 ms old.
    pub fn sample_if_due(&self, workers: &[std::sync::Arc<WorkerStats>]) {
        let now = now_ms();
        let mut tracks = self.tracks.lock();
        if now.saturating_sub(tracks[0].last_ms) < RATE_PERIOD_MS {
            return;
        }
        let readings = [
            sum_workers(workers, |w| &w.commands),
            sum_workers(workers, |w| &w.net_input_bytes),
            sum_workers(workers, |w| &w.net_output_bytes),
        ];
        for (t, r) in tracks.iter_mut().zip(readings) {
            t.push(now, r);
        }
    }

    /// The averaged rate, per second.
    pub fn get(&self, rate: Rate) -> u64 {
        self.tracks.lock()[rate as usize].average()
    }
}

/// Sums one counter over the worker threads.
/// Records `ms` for `event` in the latency monitor when it reaches
/// `latency-monitor-threshold` (Redis's `latencyAddSampleIfNeeded`).
pub fn sample_latency(server: &Server, event: &'static str, ms: u64) {
    let threshold = server
        .config
        .hot
        .latency_monitor_threshold
        .load(Ordering::Relaxed);
    server
        .metrics
        .latency
        .sample_if_needed(threshold, event, ms);
}

pub fn sum_workers(
    workers: &[std::sync::Arc<WorkerStats>],
    f: impl Fn(&WorkerStats) -> &AtomicU64,
) -> u64 {
    workers.iter().map(|w| f(w).load(Ordering::Relaxed)).sum()
}

/// The measurements above, as the server holds them.
pub struct Metrics {
    /// LATENCY event series.
    pub latency: LatencyMonitor,
    /// Instantaneous rates for INFO stats.
    pub rates: Rates,
    /// Allocated bytes once the server was set up (INFO
    /// `used_memory_startup`).
    pub used_memory_startup: u64,
}

impl Metrics {
    /// Fresh metrics; `used_memory_startup` is read now.
    pub fn new() -> Self {
        Metrics {
            latency: LatencyMonitor::default(),
            rates: Rates::default(),
            used_memory_startup: crate::memory::alloc::used_memory() as u64,
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Memory figures shared by INFO memory and MEMORY STATS / DOCTOR.
#[derive(Default)]
pub struct MemoryReport {
    /// Bytes allocated now.
    pub used: u64,
    /// Highest `used` seen.
    pub peak: u64,
    /// Bytes allocated once the server was set up.
    pub startup: u64,
    /// Resident set size of the process.
    pub rss: u64,
    /// Memory the allocator holds (mimalloc's committed bytes; on Linux it
    /// estimates its resident memory by the same figure, so this is both
    /// Redis's allocator "active" and "resident").
    pub active: u64,
    /// What clients hold: query and output buffers, connection state,
    /// queued transactions.
    pub clients: u64,
    /// Estimated hash table overhead per non-empty database.
    pub dbs: Vec<DbOverhead>,
    /// Everything that is not data: startup, clients, hash tables.
    pub overhead: u64,
    /// Keys in all databases.
    pub keys: u64,
}

/// Estimated table overhead of one database (MEMORY STATS `db.N`).
pub struct DbOverhead {
    /// Database index.
    pub db: usize,
    /// Bytes the key table spends per key beyond the data.
    pub main_overhead: u64,
    /// Bytes the expiry index spends.
    pub expires_overhead: u64,
}

impl MemoryReport {
    /// Measures the server now (and raises the recorded peak if needed).
    pub fn collect(server: &Server) -> MemoryReport {
        let used = alloc::used_memory() as u64;
        let peak = server
            .used_memory_peak
            .fetch_max(used, Ordering::Relaxed)
            .max(used);
        // What every client holds, as accounted for `maxmemory-clients`
        // (Redis's `mem_clients_normal` is the same figure).
        let clients = server.clients.memory_total();
        // Per key, the table holds the key handle and the entry; per key
        // with a TTL, the expiry index holds another key handle.
        let entry = (std::mem::size_of::<vireo_store::Key>()
            + std::mem::size_of::<vireo_store::Entry>()) as u64;
        let key = std::mem::size_of::<vireo_store::Key>() as u64;
        let sizes = server.keyspace.db_sizes();
        let keys = sizes.iter().map(|d| d.0 as u64).sum();
        let dbs: Vec<DbOverhead> = sizes
            .into_iter()
            .enumerate()
            .filter(|(_, (keys, _))| *keys > 0)
            .map(|(db, (keys, expires))| DbOverhead {
                db,
                main_overhead: keys as u64 * entry,
                expires_overhead: expires as u64 * key,
            })
            .collect();
        let startup = server.metrics.used_memory_startup;
        let tables: u64 = dbs
            .iter()
            .map(|d| d.main_overhead + d.expires_overhead)
            .sum();
        MemoryReport {
            used,
            peak,
            startup,
            rss: rss_bytes(),
            active: alloc::allocator_stats().committed,
            clients,
            dbs,
            overhead: startup + clients + tables,
            keys,
        }
    }

    /// Bytes that are data rather than overhead.
    pub fn dataset(&self) -> u64 {
        self.used.saturating_sub(self.overhead)
    }
}

/// Resident set size from /proc/self/status (0 where unavailable).
fn rss_bytes() -> u64 {
    proc_status_kb("/proc/self/status", "VmRSS:") * 1024
}

/// Total physical memory from /proc/meminfo (0 where unavailable).
pub fn total_system_memory() -> u64 {
    proc_status_kb("/proc/meminfo", "MemTotal:") * 1024
}

/// The `kB` figure of a `Field:   N kB` line of a /proc file.
fn proc_status_kb(path: &str, field: &str) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_follow_redis_reporting_levels() {
        // Upper bounds in µs as LATENCY HISTOGRAM prints them.
        let levels: Vec<u64> = (0..12).map(|k| hist_bucket_ns(k) / 1000).collect();
        assert_eq!(
            levels,
            vec![1, 2, 4, 8, 16, 33, 66, 132, 264, 528, 1056, 2113]
        );
        assert_eq!(hist_bucket(0), 0);
        assert_eq!(hist_bucket(1), 0);
        assert_eq!(hist_bucket(2), 1);
        assert_eq!(hist_bucket(3), 2);
        assert_eq!(hist_bucket(4), 2);
        assert_eq!(hist_bucket(5), 3);
        assert_eq!(hist_bucket(16), 4);
        assert_eq!(hist_bucket(17), 5);
        assert_eq!(hist_bucket(33), 5);
        assert_eq!(hist_bucket(34), 6);
        assert_eq!(hist_bucket(u64::MAX), HIST_BUCKETS - 1);
        assert_eq!(hist_bucket(1_000_000), HIST_BUCKETS - 1);
    }

    #[test]
    fn cumulative_and_percentiles() {
        let mut h = Histogram::default();
        h.buckets[2] = 3;
        h.buckets[4] = 1;
        assert_eq!(h.total(), 4);
        assert_eq!(h.cumulative(), vec![(4, 3), (16, 4)]);
        assert_eq!(h.percentile_us(50.0), 4.127);
        assert_eq!(h.percentile_us(99.0), 16.511);
        assert_eq!(Histogram::default().percentile_us(50.0), 0.0);
    }

    #[test]
    fn latency_series_keeps_one_sample_per_second_and_the_max() {
        let m = LatencyMonitor::default();
        m.add("command", 50, 100);
        m.add("command", 20, 101);
        m.add("command", 30, 102);
        m.add("command", 10, 102);
        let s = m.series(b"command").unwrap();
        assert_eq!(
            s.samples,
            VecDeque::from(vec![(100, 50), (101, 20), (102, 30)])
        );
        assert_eq!(s.max, 50);
        for t in 0..200 {
            m.add("command", 1, 1000 + t);
        }
        assert_eq!(
            m.series(b"command").unwrap().samples.len(),
            LATENCY_SERIES_LEN
        );
        assert!(m.reset_event(b"command"));
        assert!(!m.reset_event(b"command"));
        m.sample_if_needed(0, "command", 100);
        m.sample_if_needed(10, "command", 9);
        assert_eq!(m.reset_all(), 0);
        m.sample_if_needed(10, "fast-command", 10);
        assert_eq!(m.reset_all(), 1);
    }

    #[test]
    fn rate_tracks_average_sixteen_samples() {
        let mut t = RateTrack::default();
        t.push(1000, 0);
        t.push(1100, 100);
        assert_eq!(t.samples[1], 1000);
        assert_eq!(t.average(), 1000 / 16);
    }
}
