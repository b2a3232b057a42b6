//! Hand-written SVG charts: the latency-by-percentile curve (x axis in
//! "nines", log scale, as HdrHistogram plots are usually drawn, so the
//! tail gets as much room as the median) next to throughput over time.
//!
//! SVG needs no dependency and opens in any browser.

use crate::run::Sample;
use hdrhistogram::Histogram;
use std::fmt::Write as _;

/// Colours for successive series (colour-blind-friendly palette).
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
];

/// One latency curve.
pub struct Curve<'a> {
    /// Legend text.
    pub label: String,
    /// Stroke colour.
    pub color: &'a str,
    /// Latencies in nanoseconds.
    pub hist: &'a Histogram<u64>,
}

/// One throughput line.
pub struct Line<'a> {
    /// Legend text (lines with equal labels share one legend entry).
    pub label: String,
    /// Stroke colour.
    pub color: &'a str,
    /// The samples.
    pub points: &'a [Sample],
}

const W: f64 = 1100.0;
const H: f64 = 480.0;
const TOP: f64 = 70.0;
const BOTTOM: f64 = 410.0;
const LEFT: (f64, f64) = (80.0, 560.0);
const RIGHT: (f64, f64) = (650.0, 1070.0);

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A "nice" axis maximum ≥ `v` (1, 2, 2.5 or 5 times a power of ten) and
/// its tick step.
pub fn nice_axis(v: f64) -> (f64, f64) {
    let v = if v.is_finite() && v > 0.0 { v } else { 1.0 };
    let mag = 10f64.powf(v.log10().floor());
    for (m, step) in [(1.0, 0.2), (2.0, 0.5), (2.5, 0.5), (5.0, 1.0), (10.0, 2.0)] {
        if v <= m * mag * (1.0 + 1e-9) {
            return (m * mag, step * mag);
        }
    }
    (10.0 * mag, 2.0 * mag)
}

/// Tick label for a decade of the percentile axis: 0 → "0%", 1 → "90%",
/// 2 → "99%", 3 → "99.9%"…
pub fn nines_label(decade: u32) -> String {
    match decade {
        0 => "0%".into(),
        1 => "90%".into(),
        d => format!("99.{}%", "9".repeat(d as usize - 2)).replace("99.%", "99%"),
    }
}

fn fmt_tick(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if v.abs() >= 1e3 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `(decades, ms)` points of a percentile curve: x = log10(1/(1-p)).
pub fn curve_points(h: &Histogram<u64>, decades: u32) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let steps = decades * 20;
    let mut pts: Vec<(f64, f64)> = (0..steps)
        .map(|i| {
            let d = f64::from(i) / 20.0;
            let p = 1.0 - 10f64.powf(-d);
            (d, h.value_at_quantile(p) as f64 / 1e6)
        })
        .collect();
    pts.push((f64::from(decades), h.max() as f64 / 1e6));
    pts
}

/// Renders the chart.
pub fn svg(title: &str, curves: &[Curve<'_>], lines: &[Line<'_>]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{}" y="24" font-size="15" text-anchor="middle">{}</text>"#,
        W / 2.0,
        esc(title)
    );

    // Left panel: latency by percentile.
    let count = curves.iter().map(|c| c.hist.len()).max().unwrap_or(0);
    let decades = ((count.max(10) as f64).log10().ceil() as u32).clamp(1, 6);
    let all: Vec<Vec<(f64, f64)>> = curves
        .iter()
        .map(|c| curve_points(c.hist, decades))
        .collect();
    let ymax = all.iter().flatten().map(|p| p.1).fold(0.0, f64::max);
    let (ytop, ystep) = nice_axis(ymax);
    let (x0, x1) = LEFT;
    let xs = |d: f64| x0 + (x1 - x0) * d / f64::from(decades);
    let ys = |v: f64| BOTTOM - (BOTTOM - TOP) * v / ytop;
    axes(&mut o, LEFT, "percentile (log scale)", "latency (ms)");
    for d in 0..=decades {
        let x = xs(f64::from(d));
        let _ = writeln!(
            o,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{BOTTOM}" stroke="#ddd"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            BOTTOM + 16.0,
            nines_label(d)
        );
    }
    y_ticks(&mut o, LEFT, ytop, ystep);
    for (c, pts) in curves.iter().zip(&all) {
        polyline(&mut o, c.color, pts.iter().map(|&(d, v)| (xs(d), ys(v))));
    }
    legend(
        &mut o,
        x0,
        curves.iter().map(|c| (c.label.as_str(), c.color)),
    );

    // Right panel: throughput over time.
    let tmax = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|s| s.t))
        .fold(0.0, f64::max);
    let omax = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|s| s.ops_per_sec))
        .fold(0.0, f64::max);
    let (ttop, tstep) = nice_axis(tmax);
    let (otop, ostep) = nice_axis(omax);
    let (r0, r1) = RIGHT;
    let xt = |t: f64| r0 + (r1 - r0) * t / ttop;
    let yo = |v: f64| BOTTOM - (BOTTOM - TOP) * v / otop;
    axes(&mut o, RIGHT, "time (s)", "throughput (ops/s)");
    let mut t = 0.0;
    while t <= ttop * (1.0 + 1e-9) {
        let x = xt(t);
        let _ = writeln!(
            o,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{BOTTOM}" stroke="#eee"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            BOTTOM + 16.0,
            fmt_tick(t)
        );
        t += tstep;
    }
    y_ticks(&mut o, RIGHT, otop, ostep);
    for l in lines {
        polyline(
            &mut o,
            l.color,
            std::iter::once((xt(0.0), yo(l.points.first().map_or(0.0, |s| s.ops_per_sec))))
                .chain(l.points.iter().map(|s| (xt(s.t), yo(s.ops_per_sec)))),
        );
    }
    let mut seen = Vec::new();
    for l in lines {
        if !seen.iter().any(|(s, _): &(&str, &str)| *s == l.label) {
            seen.push((l.label.as_str(), l.color));
        }
    }
    legend(&mut o, r0, seen.into_iter());
    o.push_str("</svg>\n");
    o
}

fn axes(o: &mut String, (x0, x1): (f64, f64), xlabel: &str, ylabel: &str) {
    let _ = writeln!(
        o,
        r##"<rect x="{x0}" y="{TOP}" width="{}" height="{}" fill="none" stroke="#444"/>"##,
        x1 - x0,
        BOTTOM - TOP
    );
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        (x0 + x1) / 2.0,
        BOTTOM + 36.0,
        esc(xlabel)
    );
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" text-anchor="middle" transform="rotate(-90 {} {})">{}</text>"#,
        x0 - 55.0,
        (TOP + BOTTOM) / 2.0,
        x0 - 55.0,
        (TOP + BOTTOM) / 2.0,
        esc(ylabel)
    );
}

fn y_ticks(o: &mut String, (x0, x1): (f64, f64), top: f64, step: f64) {
    let mut v = 0.0;
    while v <= top * (1.0 + 1e-9) {
        let y = BOTTOM - (BOTTOM - TOP) * v / top;
        let _ = writeln!(
            o,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            x0 - 6.0,
            y + 4.0,
            fmt_tick(v)
        );
        v += step;
    }
}

fn polyline(o: &mut String, color: &str, pts: impl Iterator<Item = (f64, f64)>) {
    let mut s = String::new();
    for (x, y) in pts {
        let _ = write!(s, "{x:.1},{y:.1} ");
    }
    let _ = writeln!(
        o,
        r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
        s.trim_end()
    );
}

fn legend<'a>(o: &mut String, x: f64, items: impl Iterator<Item = (&'a str, &'a str)>) {
    let mut x = x;
    for (label, color) in items {
        let _ = writeln!(
            o,
            r#"<rect x="{x}" y="{}" width="14" height="4" fill="{color}"/><text x="{}" y="{}">{}</text>"#,
            TOP - 20.0,
            x + 18.0,
            TOP - 14.0,
            esc(label)
        );
        x += 26.0 + 7.0 * label.chars().count() as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::new_histogram;

    #[test]
    fn axis_and_labels() {
        assert_eq!(nice_axis(0.73), (1.0, 0.2));
        assert_eq!(nice_axis(1.7), (2.0, 0.5));
        assert_eq!(nice_axis(420.0), (500.0, 100.0));
        assert_eq!(nice_axis(0.0), (1.0, 0.2));
        assert_eq!(nines_label(0), "0%");
        assert_eq!(nines_label(1), "90%");
        assert_eq!(nines_label(2), "99%");
        assert_eq!(nines_label(4), "99.99%");
    }

    #[test]
    fn curve_is_monotone_and_ends_at_max() {
        let mut h = new_histogram();
        for v in 1..=10_000u64 {
            h.record(v * 100).unwrap();
        }
        let pts = curve_points(&h, 4);
        assert!(pts.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(pts.last().unwrap().1, h.max() as f64 / 1e6);
        let svg = svg(
            "t <&>",
            &[Curve {
                label: "all".into(),
                color: PALETTE[0],
                hist: &h,
            }],
            &[Line {
                label: "x".into(),
                color: PALETTE[1],
                points: &[Sample {
                    t: 0.25,
                    ops_per_sec: 100.0,
                }],
            }],
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("t &lt;&amp;&gt;"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("99.9%"));
    }
}
