//! Workload generators: which key each request touches, how large its value
//! is, and which command template it uses.
//!
//! Every generator here is deterministic given its seed, so a run can be
//! repeated, and cheap per request (no allocation, O(1) sampling), so the
//! client spends its core on the network rather than on itself.

use std::fmt;
use std::str::FromStr;

/// How keys are drawn from the key space `0..key_space`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KeyPattern {
    /// Key `i mod key_space` for the i-th request of the run (all
    /// connections share one counter), so N requests touch N distinct keys
    /// when N ≤ key space. Used by `--preload`.
    Sequential,
    /// Every key equally likely.
    Uniform,
    /// Zipf's law with the given exponent `s > 0`: key rank `k` (0-based)
    /// has probability ∝ `1/(k+1)^s`. Rank 0 is the hottest key.
    Zipf(f64),
    /// Normal distribution centred on the middle of the key space with
    /// standard deviation `sigma × key_space`; samples outside are redrawn.
    Gaussian(f64),
}

/// Default Zipf exponent when `zipf` is given without one.
pub const DEFAULT_ZIPF: f64 = 0.99;
/// Default Gaussian σ as a fraction of the key space (±3σ covers it).
pub const DEFAULT_SIGMA: f64 = 1.0 / 6.0;

impl FromStr for KeyPattern {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (s, None),
        };
        let num = |what: &str, default: f64| -> Result<f64, String> {
            match arg {
                None => Ok(default),
                Some(a) => match a.parse::<f64>() {
                    Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
                    _ => Err(format!("{what} must be a positive number, got {a:?}")),
                },
            }
        };
        let no_arg = |p: KeyPattern| match arg {
            None => Ok(p),
            Some(_) => Err(format!("key pattern {name:?} takes no parameter")),
        };
        match name.to_ascii_lowercase().as_str() {
            "seq" | "sequential" => no_arg(KeyPattern::Sequential),
            "uniform" | "random" => no_arg(KeyPattern::Uniform),
            "zipf" => Ok(KeyPattern::Zipf(num("zipf exponent", DEFAULT_ZIPF)?)),
            "gaussian" | "normal" => {
                Ok(KeyPattern::Gaussian(num("gaussian sigma", DEFAULT_SIGMA)?))
            }
            _ => Err(format!(
                "unknown key pattern {s:?} (use seq, uniform, zipf[:EXP] or gaussian[:SIGMA])"
            )),
        }
    }
}

impl fmt::Display for KeyPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyPattern::Sequential => write!(f, "seq"),
            KeyPattern::Uniform => write!(f, "uniform"),
            KeyPattern::Zipf(s) => write!(f, "zipf:{s}"),
            KeyPattern::Gaussian(sd) => write!(f, "gaussian:{sd}"),
        }
    }
}

/// Zipf sampler over ranks `1..=n` by rejection-inversion (W. Hörmann and
/// G. Derflinger, "Rejection-inversion to generate variates from monotone
/// discrete distributions", ACM TOMACS 6(3), 1996).
///
/// It needs O(1) memory and expected O(1) time per sample for any `n`, where
/// a cumulative table would cost 8 bytes per key. The idea: sample a
/// continuous variable from the integral of the hat function `h(x) = x^-s`
/// by inversion, round it to the nearest integer `k`, and accept `k` when
/// the sample falls under the histogram bar of `k`, which holds for almost
/// every sample.
#[derive(Debug, Clone)]
pub struct Zipf {
    n: f64,
    s: f64,
    /// `H(1.5) - h(1)`: one end of the interval sampled uniformly; its
    /// inverse image covers rank 1 (the hat's area for rank 1 is `h(1)`).
    h_x1: f64,
    /// `H(n + 0.5)`: the other end, the hat's area up to rank n.
    h_n: f64,
    /// Acceptance shortcut: `k - x ≤ shortcut` always accepts.
    shortcut: f64,
}

impl Zipf {
    /// A sampler over `1..=n` with exponent `s > 0`.
    pub fn new(n: u64, s: f64) -> Self {
        assert!(n >= 1 && s > 0.0 && s.is_finite());
        let mut z = Zipf {
            n: n as f64,
            s,
            h_x1: 0.0,
            h_n: 0.0,
            shortcut: 0.0,
        };
        z.h_x1 = z.big_h(1.5) - 1.0;
        z.h_n = z.big_h(z.n + 0.5);
        z.shortcut = 2.0 - z.big_h_inv(z.big_h(2.5) - z.h(2.0));
        z
    }

    /// The unnormalised mass `x^-s`.
    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    /// `H(x) = ∫₁ˣ t^-s dt`, written as `ln x · f((1-s) ln x)` with
    /// `f(y) = (eʸ-1)/y` so that s = 1 (where it becomes `ln x`) needs no
    /// special case and stays accurate near it.
    fn big_h(&self, x: f64) -> f64 {
        let lx = x.ln();
        expm1_over_x((1.0 - self.s) * lx) * lx
    }

    /// Inverse of [`Self::big_h`].
    fn big_h_inv(&self, y: f64) -> f64 {
        let t = (y * (1.0 - self.s)).max(-1.0);
        (log1p_over_x(t) * y).exp()
    }

    /// One sample in `1..=n`; `u01` yields uniform numbers in [0, 1).
    pub fn sample(&self, mut u01: impl FnMut() -> f64) -> u64 {
        loop {
            let u = self.h_n + u01() * (self.h_x1 - self.h_n);
            let x = self.big_h_inv(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.shortcut || u >= self.big_h(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }
}

/// `(e^x - 1)/x`, continuous at 0.
fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x / 2.0 * (1.0 + x / 3.0 * (1.0 + x / 4.0))
    }
}

/// `ln(1 + x)/x`, continuous at 0.
fn log1p_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - x / 4.0))
    }
}

/// Draws key indices in `0..space` by a [`KeyPattern`]. One per connection,
/// each with its own random stream.
#[derive(Debug, Clone)]
pub struct KeyGen {
    pattern: KeyPattern,
    space: u64,
    zipf: Option<Zipf>,
    rng: fastrand::Rng,
}

impl KeyGen {
    /// A generator over `0..space` (space ≥ 1) seeded with `seed`.
    pub fn new(pattern: KeyPattern, space: u64, seed: u64) -> Self {
        let space = space.max(1);
        let zipf = match pattern {
            KeyPattern::Zipf(s) => Some(Zipf::new(space, s)),
            _ => None,
        };
        KeyGen {
            pattern,
            space,
            zipf,
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    /// The key index for the request whose run-wide sequence number is `seq`
    /// (only the sequential pattern looks at it).
    pub fn next(&mut self, seq: u64) -> u64 {
        match self.pattern {
            KeyPattern::Sequential => seq % self.space,
            KeyPattern::Uniform => self.rng.u64(0..self.space),
            KeyPattern::Zipf(_) => {
                let rng = &mut self.rng;
                self.zipf
                    .as_ref()
                    .expect("zipf sampler")
                    .sample(|| rng.f64())
                    - 1
            }
            KeyPattern::Gaussian(sigma) => {
                let mean = (self.space as f64 - 1.0) / 2.0;
                let sd = sigma * self.space as f64;
                for _ in 0..64 {
                    let v = (mean + sd * self.standard_normal()).round();
                    if v >= 0.0 && v < self.space as f64 {
                        return v as u64;
                    }
                }
                mean as u64
            }
        }
    }

    /// A standard normal variate (Box–Muller; one of the pair is dropped,
    /// which keeps the generator stateless at negligible cost).
    fn standard_normal(&mut self) -> f64 {
        let u1 = 1.0 - self.rng.f64(); // (0, 1]: ln is finite
        let u2 = self.rng.f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// Value size per request: fixed (`64`) or uniform over an inclusive range
/// (`32-1024`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataSize {
    /// Smallest size in bytes.
    pub min: usize,
    /// Largest size in bytes (equal to `min` when fixed).
    pub max: usize,
}

/// Largest accepted value size; keeps a typo from allocating gigabytes.
pub const MAX_DATA_SIZE: usize = 512 * 1024 * 1024;

impl DataSize {
    /// A size for one request.
    pub fn sample(&self, rng: &mut fastrand::Rng) -> usize {
        if self.min == self.max {
            self.min
        } else {
            rng.usize(self.min..=self.max)
        }
    }
}

impl FromStr for DataSize {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let num = |t: &str| -> Result<usize, String> {
            let v: usize = t
                .trim()
                .parse()
                .map_err(|_| format!("bad data size {t:?} (use N or MIN-MAX bytes)"))?;
            if v > MAX_DATA_SIZE {
                return Err(format!("data size {v} exceeds {MAX_DATA_SIZE}"));
            }
            Ok(v)
        };
        let (min, max) = match s.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => {
                let v = num(s)?;
                (v, v)
            }
        };
        if min > max {
            return Err(format!("data size range {s:?} has min > max"));
        }
        Ok(DataSize { min, max })
    }
}

impl fmt::Display for DataSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.min == self.max {
            write!(f, "{}", self.min)
        } else {
            write!(f, "{}-{}", self.min, self.max)
        }
    }
}

/// Parses a colon-separated weight list such as `1:10`.
pub fn parse_weights(s: &str) -> Result<Vec<u32>, String> {
    let w: Vec<u32> = s
        .split(':')
        .map(|p| {
            p.trim()
                .parse::<u32>()
                .map_err(|_| format!("bad weight {p:?} in {s:?}"))
        })
        .collect::<Result<_, _>>()?;
    if w.iter().all(|&x| x == 0) {
        return Err(format!("weights {s:?} are all zero"));
    }
    if w.iter().map(|&x| u64::from(x)).sum::<u64>() > 1_000_000 {
        return Err(format!("weights {s:?} sum to more than 1000000"));
    }
    Ok(w)
}

/// Expands weights into one cycle of template indices, interleaved so each
/// template appears as evenly spread as possible (smooth weighted
/// round-robin): `[1, 3]` gives `[1, 1, 0, 1]`-like orders rather than
/// `[0, 1, 1, 1]`. Request `i` of a run uses `cycle[i % cycle.len()]`, so
/// any multiple of the cycle length reproduces the ratio exactly.
pub fn weighted_cycle(weights: &[u32]) -> Vec<u16> {
    let total: i64 = weights.iter().map(|&w| i64::from(w)).sum();
    let mut credit = vec![0i64; weights.len()];
    let mut out = Vec::with_capacity(total as usize);
    for _ in 0..total {
        let mut best = 0;
        for (i, &w) in weights.iter().enumerate() {
            credit[i] += i64::from(w);
            if credit[i] > credit[best] {
                best = i;
            }
        }
        credit[best] -= total;
        out.push(best as u16);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draw(p: KeyPattern, space: u64, n: usize) -> Vec<u64> {
        let mut g = KeyGen::new(p, space, 7);
        (0..n as u64).map(|i| g.next(i)).collect()
    }

    #[test]
    fn parse_patterns() {
        assert_eq!("seq".parse::<KeyPattern>(), Ok(KeyPattern::Sequential));
        assert_eq!("uniform".parse::<KeyPattern>(), Ok(KeyPattern::Uniform));
        assert_eq!(
            "zipf".parse::<KeyPattern>(),
            Ok(KeyPattern::Zipf(DEFAULT_ZIPF))
        );
        assert_eq!("zipf:1.2".parse::<KeyPattern>(), Ok(KeyPattern::Zipf(1.2)));
        assert_eq!(
            "gaussian:0.1".parse::<KeyPattern>(),
            Ok(KeyPattern::Gaussian(0.1))
        );
        assert!("zipf:-1".parse::<KeyPattern>().is_err());
        assert!("zipf:x".parse::<KeyPattern>().is_err());
        assert!("seq:3".parse::<KeyPattern>().is_err());
        assert!("pareto".parse::<KeyPattern>().is_err());
    }

    #[test]
    fn sequential_walks_and_wraps() {
        assert_eq!(draw(KeyPattern::Sequential, 4, 6), vec![0, 1, 2, 3, 0, 1]);
    }

    #[test]
    fn every_pattern_stays_in_bounds() {
        for p in [
            KeyPattern::Uniform,
            KeyPattern::Zipf(0.5),
            KeyPattern::Zipf(0.99),
            KeyPattern::Zipf(1.0),
            KeyPattern::Zipf(2.5),
            KeyPattern::Gaussian(DEFAULT_SIGMA),
            KeyPattern::Gaussian(3.0),
        ] {
            for space in [1, 2, 10, 1000] {
                assert!(
                    draw(p, space, 20_000).iter().all(|&k| k < space),
                    "{p} {space}"
                );
            }
        }
    }

    #[test]
    fn uniform_covers_the_space_evenly() {
        let mut counts = [0u32; 10];
        for k in draw(KeyPattern::Uniform, 10, 100_000) {
            counts[k as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }

    /// The frequency of rank r must follow 1/r^s: compare against the exact
    /// probabilities for a small space.
    #[test]
    fn zipf_matches_its_law() {
        for s in [0.6, 0.99, 1.0, 1.5] {
            let n = 20u64;
            let draws = 200_000;
            let mut counts = vec![0f64; n as usize];
            for k in draw(KeyPattern::Zipf(s), n, draws) {
                counts[k as usize] += 1.0;
            }
            let norm: f64 = (1..=n).map(|r| (r as f64).powf(-s)).sum();
            for (i, c) in counts.iter().enumerate() {
                let p = ((i + 1) as f64).powf(-s) / norm;
                let expect = p * draws as f64;
                let tol = 5.0 * expect.sqrt() + 10.0;
                assert!(
                    (c - expect).abs() < tol,
                    "s={s} rank {i}: {c} vs {expect:.0}"
                );
            }
        }
    }

    #[test]
    fn zipf_is_skewed_and_uniform_is_not() {
        let top_share = |p| {
            let ks = draw(p, 100_000, 100_000);
            ks.iter().filter(|&&k| k < 100).count() as f64 / ks.len() as f64
        };
        // With s = 0.99 the hottest 0.1% of 100k keys get roughly 40% of hits.
        assert!(top_share(KeyPattern::Zipf(0.99)) > 0.3);
        assert!(top_share(KeyPattern::Uniform) < 0.01);
        // A larger exponent concentrates more.
        assert!(top_share(KeyPattern::Zipf(1.5)) > top_share(KeyPattern::Zipf(0.99)));
    }

    #[test]
    fn gaussian_is_centred_with_the_requested_spread() {
        let space = 10_000u64;
        let ks = draw(KeyPattern::Gaussian(0.05), space, 50_000);
        let mean = ks.iter().map(|&k| k as f64).sum::<f64>() / ks.len() as f64;
        let var = ks.iter().map(|&k| (k as f64 - mean).powi(2)).sum::<f64>() / ks.len() as f64;
        assert!((mean - 5_000.0).abs() < 20.0, "mean {mean}");
        assert!((var.sqrt() - 500.0).abs() < 20.0, "sd {}", var.sqrt());
    }

    #[test]
    fn generators_are_deterministic_per_seed() {
        let a = draw(KeyPattern::Zipf(0.99), 1000, 100);
        let b = draw(KeyPattern::Zipf(0.99), 1000, 100);
        assert_eq!(a, b);
        let mut other = KeyGen::new(KeyPattern::Zipf(0.99), 1000, 8);
        let c: Vec<u64> = (0..100).map(|i| other.next(i)).collect();
        assert_ne!(a, c);
    }

    #[test]
    fn data_sizes() {
        assert_eq!("64".parse::<DataSize>(), Ok(DataSize { min: 64, max: 64 }));
        assert_eq!(
            "10-20".parse::<DataSize>(),
            Ok(DataSize { min: 10, max: 20 })
        );
        assert!("20-10".parse::<DataSize>().is_err());
        assert!("x".parse::<DataSize>().is_err());
        assert!("1-".parse::<DataSize>().is_err());
        assert!("999999999999".parse::<DataSize>().is_err());
        let d: DataSize = "10-13".parse().unwrap();
        let mut rng = fastrand::Rng::with_seed(1);
        let mut seen = [false; 4];
        for _ in 0..1000 {
            let v = d.sample(&mut rng);
            assert!((10..=13).contains(&v));
            seen[v - 10] = true;
        }
        assert_eq!(seen, [true; 4], "both ends of the range are reachable");
        let fixed: DataSize = "7".parse().unwrap();
        assert_eq!(fixed.sample(&mut rng), 7);
        assert_eq!(fixed.to_string(), "7");
        assert_eq!(d.to_string(), "10-13");
    }

    #[test]
    fn weights_and_cycles() {
        assert_eq!(parse_weights("1:10"), Ok(vec![1, 10]));
        assert!(parse_weights("0:0").is_err());
        assert!(parse_weights("1:x").is_err());
        let c = weighted_cycle(&[1, 10]);
        assert_eq!(c.len(), 11);
        assert_eq!(c.iter().filter(|&&i| i == 0).count(), 1);
        let c = weighted_cycle(&[2, 2]);
        assert_eq!(c, vec![0, 1, 0, 1], "equal weights alternate");
        let c = weighted_cycle(&[3, 0, 1]);
        assert_eq!(c.len(), 4);
        assert!(!c.contains(&1));
    }
}
