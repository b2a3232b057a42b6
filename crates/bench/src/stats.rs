//! Measurements of a run (per-command HDR histograms, counters, errors),
//! how per-thread measurements merge, and the robust statistics used to
//! compare two servers over several rounds.

use hdrhistogram::Histogram;
use std::collections::BTreeMap;

/// Largest latency a histogram records, in nanoseconds (60 s); larger
/// values are clamped to it rather than lost.
pub const MAX_LATENCY_NS: u64 = 60_000_000_000;
/// Significant decimal digits kept by the histograms (0.1% resolution).
pub const SIGFIG: u8 = 3;
/// Distinct error messages kept per run; further ones are pooled.
const MAX_ERROR_KINDS: usize = 64;
/// Label of the pool of messages past [`MAX_ERROR_KINDS`].
const OTHER_ERRORS: &str = "(other error messages)";

/// A latency histogram in nanoseconds with the crate's bounds.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, SIGFIG).expect("valid histogram bounds")
}

/// Measurements for one command template.
#[derive(Debug, Clone)]
pub struct CommandStats {
    /// Upper-cased command name.
    pub name: String,
    /// The template text.
    pub template: String,
    /// Whether nil replies are misses (the command is a read).
    pub is_read: bool,
    /// Replies received (errors included).
    pub replies: u64,
    /// Nil replies.
    pub nils: u64,
    /// Error replies.
    pub errors: u64,
    /// Latency of every reply, in nanoseconds.
    pub latency: Histogram<u64>,
}

impl CommandStats {
    /// Empty stats for a template.
    pub fn new(name: &str, template: &str, is_read: bool) -> Self {
        CommandStats {
            name: name.to_string(),
            template: template.to_string(),
            is_read,
            replies: 0,
            nils: 0,
            errors: 0,
            latency: new_histogram(),
        }
    }

    /// Hits among the replies of a read: replies that were neither nil nor
    /// errors.
    pub fn hits(&self) -> u64 {
        self.replies - self.nils - self.errors
    }
}

/// Everything measured by one run (or one thread of it, before merging).
#[derive(Debug, Clone)]
pub struct RunStats {
    /// One entry per template, in template order.
    pub commands: Vec<CommandStats>,
    /// Error replies and client-side failures, grouped by message.
    pub errors: BTreeMap<String, u64>,
    /// Bytes received from the server.
    pub bytes_in: u64,
    /// Bytes sent to the server.
    pub bytes_out: u64,
    /// Successful reconnections after a dropped connection.
    pub reconnects: u64,
    /// Requests sent whose reply never came (connection dropped or timed out).
    pub lost: u64,
}

impl RunStats {
    /// Empty stats for the given `(name, template, is_read)` list.
    pub fn new<'a>(templates: impl IntoIterator<Item = (&'a str, &'a str, bool)>) -> Self {
        RunStats {
            commands: templates
                .into_iter()
                .map(|(n, t, r)| CommandStats::new(n, t, r))
                .collect(),
            errors: BTreeMap::new(),
            bytes_in: 0,
            bytes_out: 0,
            reconnects: 0,
            lost: 0,
        }
    }

    /// Adds another thread's measurements to these. Both must describe the
    /// same templates in the same order.
    pub fn merge(&mut self, other: &RunStats) {
        assert_eq!(self.commands.len(), other.commands.len(), "same templates");
        for (a, b) in self.commands.iter_mut().zip(&other.commands) {
            a.replies += b.replies;
            a.nils += b.nils;
            a.errors += b.errors;
            a.latency.add(&b.latency).expect("histograms share bounds");
        }
        for (msg, n) in &other.errors {
            self.add_error_count(msg, *n);
        }
        self.bytes_in += other.bytes_in;
        self.bytes_out += other.bytes_out;
        self.reconnects += other.reconnects;
        self.lost += other.lost;
    }

    /// Counts one error with the given message (normalised first).
    pub fn add_error(&mut self, msg: &str) {
        self.add_error_count(&normalize_error(msg), 1);
    }

    /// Counts `n` errors with the given message (normalised first).
    pub fn add_errors(&mut self, msg: &str, n: u64) {
        self.add_error_count(&normalize_error(msg), n);
    }

    fn add_error_count(&mut self, msg: &str, n: u64) {
        if let Some(c) = self.errors.get_mut(msg) {
            *c += n;
        } else if self.errors.len() < MAX_ERROR_KINDS || msg == OTHER_ERRORS {
            self.errors.insert(msg.to_string(), n);
        } else {
            *self.errors.entry(OTHER_ERRORS.to_string()).or_insert(0) += n;
        }
    }

    /// All replies across templates.
    pub fn replies(&self) -> u64 {
        self.commands.iter().map(|c| c.replies).sum()
    }

    /// All error replies across templates.
    pub fn error_replies(&self) -> u64 {
        self.commands.iter().map(|c| c.errors).sum()
    }

    /// Total of the error table (error replies plus client-side failures).
    pub fn error_total(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Latency of all templates together.
    pub fn overall_latency(&self) -> Histogram<u64> {
        let mut h = new_histogram();
        for c in &self.commands {
            h.add(&c.latency).expect("histograms share bounds");
        }
        h
    }

    /// `(hits, reads)` over the read templates, or `None` without reads.
    pub fn hit_ratio_parts(&self) -> Option<(u64, u64)> {
        let reads: Vec<&CommandStats> = self.commands.iter().filter(|c| c.is_read).collect();
        if reads.is_empty() {
            return None;
        }
        let hits = reads.iter().map(|c| c.hits()).sum();
        let total = reads.iter().map(|c| c.replies - c.errors).sum();
        Some((hits, total))
    }
}

/// Groups error messages that differ only in numbers or quoted arguments:
/// Redis echoes the first arguments of an unknown command, which would
/// otherwise make one group per key. Runs of digits become `N`.
pub fn normalize_error(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut in_digits = false;
    for ch in msg.chars() {
        if ch.is_ascii_digit() {
            if !in_digits {
                out.push('N');
            }
            in_digits = true;
        } else {
            in_digits = false;
            out.push(ch);
        }
    }
    out
}

/// Latency percentiles of a histogram, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest recorded value.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

impl Percentiles {
    /// Reads the percentiles off a nanosecond histogram (zeros when empty).
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Percentiles {
                p50: 0.0,
                p95: 0.0,
                p99: 0.0,
                p999: 0.0,
                max: 0.0,
                mean: 0.0,
            };
        }
        let ms = |ns: u64| ns as f64 / 1e6;
        Percentiles {
            p50: ms(h.value_at_quantile(0.50)),
            p95: ms(h.value_at_quantile(0.95)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
            mean: h.mean() / 1e6,
        }
    }
}

/// Median of the values (mean of the middle two for an even count); NaN
/// for an empty slice.
pub fn median(values: &[f64]) -> f64 {
    quantile(values, 0.5)
}

/// The `q`-quantile (0 ≤ q ≤ 1) by linear interpolation between order
/// statistics (the common "type 7" definition: position `q·(n-1)`). NaN
/// values are ignored; NaN for no values.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let pos = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// One figure (say, ops/s or p99) compared between servers A and B.
///
/// Convention: the ratio is **B/A**, `median(B) / median(A)`, so for
/// throughput a ratio above 1 means B is faster and for latency a ratio
/// below 1 means B is faster. The spread describes the per-round ratios
/// `B_i / A_i` (each round runs A then B back to back, so slow drift of the
/// machine affects both sides of a round alike).
#[derive(Debug, Clone, PartialEq)]
pub struct AbFigure {
    /// The figure's name, e.g. `ops/s` or `p99 ms`.
    pub name: String,
    /// True when a larger value is better (throughput), false for latency.
    pub higher_is_better: bool,
    /// A's value per round.
    pub a: Vec<f64>,
    /// B's value per round.
    pub b: Vec<f64>,
    /// Median of A's values.
    pub a_median: f64,
    /// Median of B's values.
    pub b_median: f64,
    /// `b_median / a_median` (NaN when A's median is 0).
    pub ratio: f64,
    /// Per-round ratios `b[i] / a[i]` (rounds where `a[i]` is 0 are NaN).
    pub round_ratios: Vec<f64>,
    /// Smallest per-round ratio.
    pub min: f64,
    /// Largest per-round ratio.
    pub max: f64,
    /// First quartile of the per-round ratios.
    pub q1: f64,
    /// Third quartile of the per-round ratios.
    pub q3: f64,
    /// Rounds in which B did better than A on this figure.
    pub b_wins: usize,
}

impl AbFigure {
    /// Computes medians, the ratio of medians and the spread of the
    /// per-round ratios. `a` and `b` hold one value per round, paired by
    /// index.
    pub fn new(name: &str, higher_is_better: bool, a: &[f64], b: &[f64]) -> Self {
        assert_eq!(a.len(), b.len(), "one value per round on each side");
        let div = |x: f64, y: f64| if y == 0.0 { f64::NAN } else { x / y };
        let round_ratios: Vec<f64> = a.iter().zip(b).map(|(&x, &y)| div(y, x)).collect();
        let a_median = median(a);
        let b_median = median(b);
        let b_wins = a
            .iter()
            .zip(b)
            .filter(|(&x, &y)| if higher_is_better { y > x } else { y < x })
            .count();
        AbFigure {
            name: name.to_string(),
            higher_is_better,
            a: a.to_vec(),
            b: b.to_vec(),
            a_median,
            b_median,
            ratio: div(b_median, a_median),
            min: quantile(&round_ratios, 0.0),
            max: quantile(&round_ratios, 1.0),
            q1: quantile(&round_ratios, 0.25),
            q3: quantile(&round_ratios, 0.75),
            round_ratios,
            b_wins,
        }
    }

    /// Which side the ratio of medians favours: "B", "A" or "=".
    pub fn better(&self) -> &'static str {
        if self.ratio.is_nan() || self.a_median == self.b_median {
            "="
        } else if (self.b_median > self.a_median) == self.higher_is_better {
            "B"
        } else {
            "A"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats() -> RunStats {
        RunStats::new([
            ("SET", "SET __key__ __data__", false),
            ("GET", "GET __key__", true),
        ])
    }

    #[test]
    fn merging_threads_adds_counts_and_histograms() {
        let mut a = stats();
        let mut b = stats();
        // Thread A: fast SETs; thread B: slow GETs with some misses.
        for v in 1..=1000u64 {
            a.commands[0].latency.record(v * 1_000).unwrap();
            a.commands[0].replies += 1;
        }
        for v in 1..=1000u64 {
            b.commands[1].latency.record(1_000_000 + v * 1_000).unwrap();
            b.commands[1].replies += 1;
        }
        b.commands[1].nils = 250;
        a.bytes_in = 10;
        b.bytes_in = 5;
        a.add_error("ERR x 12");
        b.add_error("ERR x 99");
        b.add_error("WRONGTYPE y");
        b.reconnects = 2;
        let mut m = stats();
        m.merge(&a);
        m.merge(&b);
        assert_eq!(m.replies(), 2000);
        assert_eq!(m.bytes_in, 15);
        assert_eq!(m.reconnects, 2);
        assert_eq!(m.errors.get("ERR x N"), Some(&2));
        assert_eq!(m.errors.get("WRONGTYPE y"), Some(&1));
        assert_eq!(m.hit_ratio_parts(), Some((750, 1000)));
        let all = m.overall_latency();
        assert_eq!(all.len(), 2000);
        // The merged median sits between the two threads' ranges and the
        // max is the slow thread's max.
        let p = Percentiles::of(&all);
        assert!((0.99..=1.01).contains(&p.p50), "{p:?}");
        assert!((1.99..=2.01).contains(&p.max), "{p:?}");
        assert!((1.98..=2.0).contains(&p.p99), "{p:?}");
        // Per-command histograms stay separate.
        assert_eq!(m.commands[0].latency.len(), 1000);
        assert!(m.commands[0].latency.max() <= 1_001_000);
    }

    #[test]
    fn error_kinds_are_capped() {
        let mut s = stats();
        for i in 0..100 {
            s.add_error(&format!("ERR kind {}", char::from(b'a' + (i % 26) as u8)));
            s.add_error(&format!("ERR other {}", char::from(b'a' + (i % 26) as u8)).repeat(2));
        }
        for i in 0..30 {
            s.add_error(&format!("ERR extra {}", "z".repeat(i + 1)));
        }
        assert!(s.errors.len() <= MAX_ERROR_KINDS + 1);
        assert_eq!(s.error_total(), 230);
        assert!(s.errors.contains_key(OTHER_ERRORS));
    }

    #[test]
    fn normalising_errors() {
        assert_eq!(
            normalize_error("ERR unknown command 'FOO', with args beginning with: 'key:123' "),
            "ERR unknown command 'FOO', with args beginning with: 'key:N' "
        );
        assert_eq!(
            normalize_error("WRONGTYPE Operation"),
            "WRONGTYPE Operation"
        );
    }

    #[test]
    fn medians_and_quantiles() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert_eq!(median(&[f64::NAN, 5.0]), 5.0);
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&v, 1.0), 5.0);
        assert_eq!(quantile(&v, 0.25), 2.0);
        assert_eq!(quantile(&[1.0, 2.0], 0.25), 1.25);
    }

    #[test]
    fn ab_throughput_figure() {
        let a = [100.0, 110.0, 90.0, 100.0];
        let b = [150.0, 165.0, 180.0, 100.0];
        let f = AbFigure::new("ops/s", true, &a, &b);
        assert_eq!(f.a_median, 100.0);
        assert_eq!(f.b_median, 157.5);
        assert!((f.ratio - 1.575).abs() < 1e-12);
        assert_eq!(f.round_ratios, vec![1.5, 1.5, 2.0, 1.0]);
        assert_eq!((f.min, f.max), (1.0, 2.0));
        assert_eq!((f.q1, f.q3), (1.375, 1.625));
        assert_eq!(f.b_wins, 3);
        assert_eq!(f.better(), "B");
    }

    #[test]
    fn ab_latency_figure_lower_is_better() {
        let f = AbFigure::new("p99 ms", false, &[1.0, 1.0, 1.0], &[2.0, 0.5, 2.0]);
        assert_eq!(f.ratio, 2.0);
        assert_eq!(f.b_wins, 1);
        assert_eq!(f.better(), "A");
        let zero = AbFigure::new("errors", false, &[0.0], &[3.0]);
        assert!(zero.ratio.is_nan() && zero.round_ratios[0].is_nan());
        assert_eq!(zero.better(), "=");
    }
}
