//! Human-readable and JSON reports of single runs and A/B comparisons.

use crate::run::{RunConfig, RunResult, Workload};
use crate::stats::{AbFigure, Percentiles};
use serde_json::{json, Value};
use std::fmt::Write as _;

/// `12345678.9` → `12,345,679`.
pub fn thousands(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if v < 0.0 && digits != "0" {
        out.insert(0, '-');
    }
    out
}

/// Bytes per second as `12.3 MB/s` (decimal units).
pub fn rate_bytes(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.2} GB/s", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.2} MB/s", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.2} kB/s", v / 1e3)
    } else {
        format!("{v:.0} B/s")
    }
}

/// One line describing the run's shape.
pub fn describe(cfg: &RunConfig, wl: &Workload) -> String {
    let limit = match cfg.limit {
        crate::run::Limit::Requests(n) => format!("{n} requests"),
        crate::run::Limit::Time(d) => format!("{:.1} s", d.as_secs_f64()),
    };
    let rate = cfg
        .rate
        .map(|r| {
            format!(
                ", target {} ops/s (latency from intended send time)",
                thousands(r)
            )
        })
        .unwrap_or_default();
    format!(
        "{mix}, {limit}, {t} thread(s) × {c} clients, pipeline {p}, {d} B values, {k} keys ({pat}){rate}{resp}",
        mix = wl.mix_label(),
        t = cfg.threads,
        c = cfg.clients,
        p = cfg.pipeline,
        d = wl.data_size,
        k = wl.key_space,
        pat = wl.key_pattern,
        resp = if cfg.resp3 { ", RESP3" } else { "" },
    )
}

fn pct_line(p: &Percentiles) -> String {
    format!(
        "p50 {:.3}   p95 {:.3}   p99 {:.3}   p99.9 {:.3}   max {:.3}   mean {:.3}",
        p.p50, p.p95, p.p99, p.p999, p.max, p.mean
    )
}

/// The full text report of one run.
pub fn text(label: &str, r: &RunResult) -> String {
    let s = &r.stats;
    let mut o = String::new();
    let _ = writeln!(o, "{label} → {}", r.target);
    let _ = writeln!(
        o,
        "  replies     {} in {:.3} s = {} ops/s",
        thousands(s.replies() as f64),
        r.elapsed.as_secs_f64(),
        thousands(r.ops_per_sec())
    );
    let _ = writeln!(o, "  latency ms  {}", pct_line(&r.percentiles()));
    if let Some((hits, reads)) = s.hit_ratio_parts() {
        let ratio = if reads > 0 {
            format!("{:.2}%", hits as f64 * 100.0 / reads as f64)
        } else {
            "-".into()
        };
        let _ = writeln!(
            o,
            "  hit ratio   {ratio} ({hits} hits / {reads} reads answered)"
        );
    }
    let _ = writeln!(
        o,
        "  traffic     in {}   out {}",
        rate_bytes(r.bytes_in_per_sec()),
        rate_bytes(r.bytes_out_per_sec())
    );
    let _ = writeln!(
        o,
        "  reconnects  {}   lost requests {}",
        s.reconnects, s.lost
    );
    let _ = writeln!(
        o,
        "  {:<10} {:>11} {:>11} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9}",
        "command", "replies", "ops/s", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "hit %", "errors"
    );
    for c in &s.commands {
        let p = Percentiles::of(&c.latency);
        let hit = if c.is_read && c.replies > c.errors {
            format!(
                "{:.2}",
                c.hits() as f64 * 100.0 / (c.replies - c.errors) as f64
            )
        } else {
            "-".into()
        };
        let _ = writeln!(
            o,
            "  {:<10} {:>11} {:>11} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>8} {:>9}",
            c.name,
            c.replies,
            thousands(c.replies as f64 / r.elapsed.as_secs_f64().max(1e-9)),
            p.p50,
            p.p99,
            p.p999,
            p.max,
            hit,
            c.errors
        );
    }
    if s.errors.is_empty() {
        let _ = writeln!(o, "  errors      none");
    } else {
        let _ = writeln!(o, "  errors      {} in all, by message:", s.error_total());
        let mut errs: Vec<(&String, &u64)> = s.errors.iter().collect();
        errs.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (msg, n) in errs {
            let _ = writeln!(o, "  {n:>12}  {msg}");
        }
    }
    o
}

/// A one-line summary (for `--quiet`).
pub fn quiet_line(label: &str, r: &RunResult) -> String {
    let p = r.percentiles();
    let mut line = format!(
        "{label}: {} ops/s, p50 {:.3} ms, p99 {:.3} ms, p99.9 {:.3} ms",
        thousands(r.ops_per_sec()),
        p.p50,
        p.p99,
        p.p999
    );
    if let Some(h) = r.hit_ratio() {
        let _ = write!(line, ", hits {:.1}%", h * 100.0);
    }
    let errors = r.stats.error_total();
    if errors > 0 {
        let _ = write!(line, ", {errors} errors");
    }
    line
}

fn pct_json(p: &Percentiles) -> Value {
    json!({"p50": p.p50, "p95": p.p95, "p99": p.p99, "p99_9": p.p999, "max": p.max, "mean": p.mean})
}

/// The machine-readable form of one run.
pub fn run_json(r: &RunResult) -> Value {
    let s = &r.stats;
    let secs = r.elapsed.as_secs_f64().max(1e-9);
    let mut errors: Vec<(&String, &u64)> = s.errors.iter().collect();
    errors.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let (hits, reads) = s.hit_ratio_parts().unwrap_or((0, 0));
    json!({
        "target": r.target.to_string(),
        "elapsed_s": r.elapsed.as_secs_f64(),
        "replies": s.replies(),
        "ops_per_sec": r.ops_per_sec(),
        "latency_ms": pct_json(&r.percentiles()),
        "hit_ratio": r.hit_ratio(),
        "hits": hits,
        "reads": reads,
        "bytes_in": s.bytes_in,
        "bytes_out": s.bytes_out,
        "bytes_in_per_sec": r.bytes_in_per_sec(),
        "bytes_out_per_sec": r.bytes_out_per_sec(),
        "reconnects": s.reconnects,
        "lost": s.lost,
        "error_replies": s.error_replies(),
        "errors_total": s.error_total(),
        "errors": errors.iter().map(|(m, n)| json!({"message": m, "count": n})).collect::<Vec<_>>(),
        "commands": s.commands.iter().map(|c| json!({
            "name": c.name,
            "template": c.template,
            "replies": c.replies,
            "ops_per_sec": c.replies as f64 / secs,
            "errors": c.errors,
            "nils": c.nils,
            "hit_ratio": if c.is_read && c.replies > c.errors {
                Some(c.hits() as f64 / (c.replies - c.errors) as f64)
            } else { None },
            "latency_ms": pct_json(&Percentiles::of(&c.latency)),
        })).collect::<Vec<_>>(),
        "timeline": r.timeline.iter().map(|s| json!([s.t, s.ops_per_sec])).collect::<Vec<_>>(),
    })
}

/// The run's settings, for the JSON report.
pub fn config_json(cfg: &RunConfig, wl: &Workload) -> Value {
    let (requests, test_time) = match cfg.limit {
        crate::run::Limit::Requests(n) => (Some(n), None),
        crate::run::Limit::Time(d) => (None, Some(d.as_secs_f64())),
    };
    json!({
        "target": cfg.target.to_string(),
        "threads": cfg.threads,
        "clients_per_thread": cfg.clients,
        "pipeline": cfg.pipeline,
        "requests": requests,
        "test_time_s": test_time,
        "rate": cfg.rate,
        "resp": if cfg.resp3 { 3 } else { 2 },
        "db": cfg.db,
        "data_size": wl.data_size.to_string(),
        "key_prefix": String::from_utf8_lossy(&wl.key_prefix),
        "key_space": wl.key_space,
        "key_pattern": wl.key_pattern.to_string(),
        "mix": wl.mix_label(),
        "commands": wl.templates.iter().map(|t| t.source.clone()).collect::<Vec<_>>(),
        "seed": wl.seed,
    })
}

/// The figures compared in A/B mode, computed from each side's rounds.
pub fn ab_figures(a: &[RunResult], b: &[RunResult]) -> Vec<AbFigure> {
    type Getter = fn(&RunResult) -> f64;
    let mut list: Vec<(&str, bool, Getter)> = vec![
        ("ops/s", true, |r| r.ops_per_sec()),
        ("p50 ms", false, |r| r.percentiles().p50),
        ("p95 ms", false, |r| r.percentiles().p95),
        ("p99 ms", false, |r| r.percentiles().p99),
        ("p99.9 ms", false, |r| r.percentiles().p999),
        ("max ms", false, |r| r.percentiles().max),
        ("in MB/s", true, |r| r.bytes_in_per_sec() / 1e6),
        ("out MB/s", true, |r| r.bytes_out_per_sec() / 1e6),
    ];
    if a.iter().chain(b).any(|r| r.hit_ratio().is_some()) {
        list.push(("hit ratio", true, |r| r.hit_ratio().unwrap_or(f64::NAN)));
    }
    list.push(("errors", false, |r| r.stats.error_total() as f64));
    list.into_iter()
        .map(|(name, hib, get)| {
            let av: Vec<f64> = a.iter().map(get).collect();
            let bv: Vec<f64> = b.iter().map(get).collect();
            AbFigure::new(name, hib, &av, &bv)
        })
        .collect()
}

fn num(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v == 0.0 {
        "0".into()
    } else if v.abs() >= 1000.0 {
        thousands(v)
    } else if v.abs() >= 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.4}")
    }
}

fn ratio(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.3}")
    } else {
        "-".into()
    }
}

/// `lo–hi`, or `-` when neither is defined.
fn range(lo: f64, hi: f64) -> String {
    if lo.is_finite() || hi.is_finite() {
        format!("{}–{}", ratio(lo), ratio(hi))
    } else {
        "-".into()
    }
}

/// The A/B table.
pub fn ab_text(a: &str, b: &str, rounds: usize, figures: &[AbFigure]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "A/B comparison over {rounds} rounds (each round runs A then B)"
    );
    let _ = writeln!(o, "  A = {a}");
    let _ = writeln!(o, "  B = {b}");
    let _ = writeln!(
        o,
        "  ratio = median(B) / median(A); spread = min–max and interquartile range of the per-round ratios B_i/A_i"
    );
    let _ = writeln!(
        o,
        "  ops/s and MB/s: higher is better (ratio > 1 favours B); latency and errors: lower is better (ratio < 1 favours B)"
    );
    let _ = writeln!(
        o,
        "  {:<10} {:>13} {:>13} {:>7} {:>15} {:>15} {:>7} {:>7}",
        "figure", "median A", "median B", "B/A", "min–max", "IQR", "better", "B wins"
    );
    for f in figures {
        let _ = writeln!(
            o,
            "  {:<10} {:>13} {:>13} {:>7} {:>15} {:>15} {:>7} {:>7}",
            f.name,
            num(f.a_median),
            num(f.b_median),
            ratio(f.ratio),
            range(f.min, f.max),
            range(f.q1, f.q3),
            f.better(),
            format!("{}/{}", f.b_wins, f.a.len()),
        );
    }
    o
}

/// The machine-readable form of an A/B figure.
pub fn ab_figure_json(f: &AbFigure) -> Value {
    json!({
        "name": f.name,
        "higher_is_better": f.higher_is_better,
        "a": f.a,
        "b": f.b,
        "a_median": f.a_median,
        "b_median": f.b_median,
        "ratio_b_over_a": f.ratio,
        "round_ratios": f.round_ratios,
        "round_ratio_min": f.min,
        "round_ratio_max": f.max,
        "round_ratio_q1": f.q1,
        "round_ratio_q3": f.q3,
        "b_wins": f.b_wins,
        "better": f.better(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_formats() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(1234567.0), "1,234,567");
        assert_eq!(thousands(-1234.0), "-1,234");
        assert_eq!(thousands(f64::NAN), "-");
        assert_eq!(rate_bytes(1_500_000.0), "1.50 MB/s");
        assert_eq!(rate_bytes(12.0), "12 B/s");
    }
}
