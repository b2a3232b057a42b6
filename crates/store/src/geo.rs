//! The GEO commands' math, as Redis 7.0 computes it: scores from
//! coordinates and back, GEOHASH strings, haversine distances, units, the
//! grid boxes (and so sorted-set score ranges) a radius or box search
//! scans, the exact membership tests, and the number formats of replies.
//!
//! A GEO set is a sorted set whose scores are 52-bit geohashes (see
//! [`crate::geohash`]). A search picks a grid step from the radius so the
//! centre's box and its eight neighbours cover the search shape, drops
//! neighbours the shape cannot reach, scans each remaining box's score
//! range, and keeps the members whose decoded position passes the exact
//! test. The steps, the order boxes are scanned in and the floating-point
//! operations follow Redis's `geo.c` and `geohash_helper.c`, so replies
//! match Redis digit for digit (trigonometry goes through the platform's
//! libm, as Redis's does).
//!
//! The commands' argument parsing and replies live in the server; this
//! module gives them [`Shape`], [`search`], [`sort_points`] and the
//! formatting helpers.

use std::cmp::Ordering;

use crate::geohash::{self, Area, HashBits, Neighbors, Range, STEP_MAX};
use crate::zset::ZSet;

/// Earth's quadratic mean radius in meters, the one Redis uses.
pub const EARTH_RADIUS_M: f64 = 6_372_797.560_856;
/// Half the Web Mercator world's width in meters (the step estimate's
/// starting scale).
const MERCATOR_MAX: f64 = 20_037_726.37;
/// Degrees to radians, as Redis's `deg_rad` (M_PI / 180).
const D_R: f64 = std::f64::consts::PI / 180.0;

/// 2^63, where C's conversions of doubles to 64-bit integers overflow.
const TWO_63: f64 = 9_223_372_036_854_775_808.0;

/// The error reply for an unknown unit.
pub const UNIT_ERROR: &str = "ERR unsupported unit provided. please use M, KM, FT, MI";

/// A distance unit of the GEO commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// `m`
    Meters,
    /// `km`
    Kilometers,
    /// `ft`
    Feet,
    /// `mi`
    Miles,
}

impl Unit {
    /// Parses a unit argument, case-insensitively; `None` means
    /// [`UNIT_ERROR`].
    pub fn parse(arg: &[u8]) -> Option<Unit> {
        [
            (&b"m"[..], Unit::Meters),
            (b"km", Unit::Kilometers),
            (b"ft", Unit::Feet),
            (b"mi", Unit::Miles),
        ]
        .into_iter()
        .find(|(name, _)| arg.eq_ignore_ascii_case(name))
        .map(|(_, u)| u)
    }

    /// Meters per unit (divide meters by it to convert to the unit).
    pub fn to_meters(self) -> f64 {
        match self {
            Unit::Meters => 1.0,
            Unit::Kilometers => 1000.0,
            Unit::Feet => 0.3048,
            Unit::Miles => 1609.34,
        }
    }
}

/// Checks a (longitude, latitude) argument pair against the indexable
/// limits; the error is Redis's reply (`ERR invalid longitude,latitude
/// pair 200.000000,10.000000`).
pub fn check_lon_lat(lon: f64, lat: f64) -> Result<(), String> {
    let lon_ok = (geohash::LONG_MIN..=geohash::LONG_MAX).contains(&lon);
    let lat_ok = (geohash::LAT_MIN..=geohash::LAT_MAX).contains(&lat);
    if lon_ok && lat_ok {
        Ok(())
    } else {
        Err(lon_lat_error(lon, lat))
    }
}

/// Redis's reply for a position outside the limits.
fn lon_lat_error(lon: f64, lat: f64) -> String {
    format!("ERR invalid longitude,latitude pair {lon:.6},{lat:.6}")
}

/// GEOADD's score for a position (checked with [`check_lon_lat`]): the
/// 52-bit geohash, which the server stores as the member's score.
pub fn score_of(lon: f64, lat: f64) -> Result<u64, String> {
    check_lon_lat(lon, lat)?;
    let hash = geohash::encode_wgs84(lon, lat, STEP_MAX).ok_or_else(|| lon_lat_error(lon, lat))?;
    Ok(hash.align52())
}

/// A score as the unsigned integer Redis's `(uint64_t)score` gives on
/// x86-64, for any double a user could ZADD: negatives wrap, NaN and
/// values outside the 64-bit range give the "integer indefinite" result.
pub fn score_to_bits(score: f64) -> u64 {
    const INDEFINITE: u64 = 1 << 63;
    let signed = |x: f64| {
        if x.is_nan() || !(-TWO_63..TWO_63).contains(&x) {
            INDEFINITE
        } else {
            x as i64 as u64
        }
    };
    if score.is_nan() || score < TWO_63 {
        signed(score)
    } else {
        signed(score - TWO_63) ^ INDEFINITE
    }
}

/// The position a score stands for, (longitude, latitude): the centre of
/// its step-26 box, clamped to the limits (GEOPOS's values; Redis's
/// `decodeGeohash`, which cannot fail at step 26).
pub fn lon_lat_of_score(score: f64) -> (f64, f64) {
    let hash = HashBits {
        bits: score_to_bits(score),
        step: STEP_MAX,
    };
    geohash::decode_to_lon_lat_wgs84(hash).unwrap_or_default()
}

/// GEOHASH's 11-character string for a score: the decoded position
/// re-encoded with the standard -90..90 latitude range, 52 bits in base32
/// and a final `0` for the 55th to 53rd bits Redis does not have.
pub fn geohash_string(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = lon_lat_of_score(score);
    let bits = geohash::encode(
        geohash::WGS84_LONG,
        geohash::STANDARD_LAT,
        lon,
        lat,
        STEP_MAX,
    )
    .map_or(0, |h| h.bits);
    let mut out = [b'0'; 11];
    for (i, c) in out.iter_mut().take(10).enumerate() {
        let shift = 52 - (i + 1) * 5;
        *c = ALPHABET[((bits >> shift) & 0x1f) as usize];
    }
    out
}

/// Degrees to radians.
fn deg_rad(deg: f64) -> f64 {
    deg * D_R
}

/// Radians to degrees.
fn rad_deg(rad: f64) -> f64 {
    rad / D_R
}

/// Meters between two latitudes on a meridian.
pub fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// Great-circle distance in meters (haversine, Redis's earth radius);
/// points on one meridian take the exact meridian formula, as in Redis.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let v = ((deg_rad(lon2) - deg_rad(lon1)) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (deg_rad(lat1), deg_rad(lat2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

/// The grid step whose boxes are about as big as `range_meters` at
/// latitude `lat` (Redis's `geohashEstimateStepsByRadius`), 1..=26.
/// Commands refuse negative radii; here they count as 0 (Redis's loop
/// would never end on one).
pub fn estimate_steps_by_radius(range_meters: f64, lat: f64) -> u8 {
    if range_meters <= 0.0 {
        return STEP_MAX;
    }
    let mut range = range_meters;
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    // Meridians converge towards the poles: use bigger boxes there.
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, i32::from(STEP_MAX)) as u8
}

/// What a search covers, in the query's unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ShapeKind {
    /// BYRADIUS / GEORADIUS: a circle of this radius.
    Radius(f64),
    /// BYBOX: a box this wide (east-west) and high (north-south).
    Box {
        /// East-west extent.
        width: f64,
        /// North-south extent.
        height: f64,
    },
}

/// A search: its centre, its shape and the unit's size in meters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    /// Centre longitude.
    pub lon: f64,
    /// Centre latitude.
    pub lat: f64,
    /// Radius or box, in the unit.
    pub kind: ShapeKind,
    /// Meters per unit ([`Unit::to_meters`]); reply distances are divided
    /// by it.
    pub to_meters: f64,
}

/// The boxes a search scans: the centre's box and its neighbours, the
/// unneeded ones set to [`HashBits::ZERO`] (Redis's `GeoHashRadius`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchAreas {
    /// The box holding the centre.
    pub hash: HashBits,
    /// That box's extent.
    pub area: Area,
    /// Its neighbours.
    pub neighbors: Neighbors,
}

/// Scores `min <= score < max` of one box.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScoreRange {
    /// Smallest score inside (inclusive).
    pub min: u64,
    /// First score past the box (exclusive).
    pub max: u64,
}

impl ScoreRange {
    /// The scores of the members inside a box.
    pub fn of(hash: HashBits) -> ScoreRange {
        let next = HashBits {
            bits: hash.bits + 1,
            step: hash.step,
        };
        ScoreRange {
            min: hash.align52(),
            max: next.align52(),
        }
    }
}

/// A member found by a search.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// The member.
    pub member: Vec<u8>,
    /// Its score (WITHHASH prints it as an integer).
    pub score: f64,
    /// Decoded longitude.
    pub lon: f64,
    /// Decoded latitude.
    pub lat: f64,
    /// Distance from the centre in meters (divide by
    /// [`Shape::to_meters`] for replies and STOREDIST).
    pub dist: f64,
}

impl Shape {
    /// Half the height and half the width, in meters.
    fn half_extents(&self) -> (f64, f64) {
        match self.kind {
            ShapeKind::Radius(r) => (self.to_meters * r, self.to_meters * r),
            ShapeKind::Box { width, height } => (
                self.to_meters * (height / 2.0),
                self.to_meters * (width / 2.0),
            ),
        }
    }

    /// The bounding box, `[min_lon, min_lat, max_lon, max_lat]`, with
    /// longitudes widened where the shape is widest (Redis's
    /// `geohashBoundingBox`).
    pub fn bounding_box(&self) -> [f64; 4] {
        let (height, width) = self.half_extents();
        let lat_delta = rad_deg(height / EARTH_RADIUS_M);
        let long_delta = |lat: f64| rad_deg(width / EARTH_RADIUS_M / deg_rad(lat).cos());
        let long_delta_top = long_delta(self.lat + lat_delta);
        let long_delta_bottom = long_delta(self.lat - lat_delta);
        let d = if self.lat < 0.0 {
            long_delta_bottom
        } else {
            long_delta_top
        };
        [
            self.lon - d,
            self.lat - lat_delta,
            self.lon + d,
            self.lat + lat_delta,
        ]
    }

    /// The radius the grid step is chosen for, in meters: the radius, or
    /// the half-diagonal of a box.
    fn radius_meters(&self) -> f64 {
        let r = match self.kind {
            ShapeKind::Radius(r) => r,
            ShapeKind::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        };
        r * self.to_meters
    }

    /// The centre's box at `step`, with its neighbours.
    fn areas_at(&self, step: u8) -> SearchAreas {
        let hash =
            geohash::encode_wgs84(self.lon, self.lat, step).unwrap_or(HashBits { bits: 0, step });
        let area = geohash::decode_wgs84(hash).unwrap_or(Area {
            hash,
            longitude: Range { min: 0.0, max: 0.0 },
            latitude: Range { min: 0.0, max: 0.0 },
        });
        SearchAreas {
            hash,
            area,
            neighbors: geohash::neighbors(hash),
        }
    }

    /// The boxes to scan (Redis's `geohashCalculateAreasByShapeWGS84`):
    /// the step from the radius, one step coarser when a neighbour does
    /// not reach the bounding box's edge, then neighbours on sides the
    /// bounding box does not reach dropped.
    pub fn areas(&self) -> SearchAreas {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounding_box();
        let mut steps = estimate_steps_by_radius(self.radius_meters(), self.lat);
        let mut a = self.areas_at(steps);
        let side = |h: HashBits| geohash::decode_wgs84(h);
        let short = side(a.neighbors.north).is_some_and(|n| n.latitude.max < max_lat)
            || side(a.neighbors.south).is_some_and(|s| s.latitude.min > min_lat)
            || side(a.neighbors.east).is_some_and(|e| e.longitude.max < max_lon)
            || side(a.neighbors.west).is_some_and(|w| w.longitude.min > min_lon);
        if steps > 1 && short {
            steps -= 1;
            a = self.areas_at(steps);
        }
        if steps >= 2 {
            let n = &mut a.neighbors;
            let zero =
                |boxes: [&mut HashBits; 3]| boxes.into_iter().for_each(|b| *b = HashBits::ZERO);
            if a.area.latitude.min < min_lat {
                zero([&mut n.south, &mut n.south_west, &mut n.south_east]);
            }
            if a.area.latitude.max > max_lat {
                zero([&mut n.north, &mut n.north_east, &mut n.north_west]);
            }
            if a.area.longitude.min < min_lon {
                zero([&mut n.west, &mut n.south_west, &mut n.north_west]);
            }
            if a.area.longitude.max > max_lon {
                zero([&mut n.east, &mut n.south_east, &mut n.north_east]);
            }
        }
        a
    }

    /// Whether the member at `score` is inside the shape, and if so its
    /// position and distance in meters (Redis's `geoWithinShape`).
    pub fn test(&self, score: f64) -> Option<(f64, f64, f64)> {
        let (lon, lat) = lon_lat_of_score(score);
        let dist = match self.kind {
            ShapeKind::Radius(r) => {
                let d = distance(self.lon, self.lat, lon, lat);
                // NaN distances pass, as in Redis (`d > radius` is false).
                if d > r * self.to_meters {
                    return None;
                }
                d
            }
            ShapeKind::Box { width, height } => {
                if lat_distance(lat, self.lat) > height * self.to_meters / 2.0 {
                    return None;
                }
                if distance(lon, lat, self.lon, lat) > width * self.to_meters / 2.0 {
                    return None;
                }
                distance(self.lon, self.lat, lon, lat)
            }
        };
        Some((lon, lat, dist))
    }
}

impl SearchAreas {
    /// The nine boxes in Redis's scan order: centre, N, S, E, W, NE, NW,
    /// SE, SW (zeroed ones included).
    pub fn boxes(&self) -> [HashBits; 9] {
        let n = &self.neighbors;
        [
            self.hash,
            n.north,
            n.south,
            n.east,
            n.west,
            n.north_east,
            n.north_west,
            n.south_east,
            n.south_west,
        ]
    }

    /// The score ranges to scan, in order: zeroed boxes are skipped, and so
    /// is a box equal to the last scanned one unless that was the centre
    /// (huge radii make neighbours coincide; Redis compares this way).
    pub fn score_ranges(&self) -> Vec<ScoreRange> {
        let boxes = self.boxes();
        let mut out = Vec::with_capacity(9);
        let mut last = 0;
        for (i, b) in boxes.iter().enumerate() {
            if b.is_zero() || (last != 0 && *b == boxes[last]) {
                continue;
            }
            out.push(ScoreRange::of(*b));
            last = i;
        }
        out
    }
}

/// Runs a search over a GEO set: scans each box's scores in order and
/// keeps the members inside the shape. `limit` (COUNT with ANY; 0 for
/// none) stops the scan once that many were found, as in Redis, so which
/// members come back depends on the scan order.
pub fn search(zset: &ZSet, shape: &Shape, limit: usize) -> Vec<Point> {
    let mut found = Vec::new();
    let full = |found: &Vec<Point>| limit != 0 && found.len() >= limit;
    for range in shape.areas().score_ranges() {
        if full(&found) {
            break;
        }
        let start = zset.rank_by_score(range.min as f64, false);
        let end = zset.rank_by_score(range.max as f64, false);
        for (member, score) in zset.range(start, end, false) {
            if let Some((lon, lat, dist)) = shape.test(score) {
                found.push(Point {
                    member: member.to_vec(),
                    score,
                    lon,
                    lat,
                    dist,
                });
            }
            if full(&found) {
                break;
            }
        }
    }
    found
}

/// The order of search results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sort {
    /// Scan order (no ASC/DESC, no COUNT).
    Unsorted,
    /// Nearest first.
    Asc,
    /// Farthest first.
    Desc,
}

/// Orders found points by distance and keeps the first `count` (0 for
/// all). Like Redis: a full sort is stable (glibc's merge sort), and when
/// fewer than all are kept a partial quicksort ([`partial_qsort`]) orders
/// just the kept prefix, which decides the order of equal distances.
pub fn sort_points(points: &mut Vec<Point>, sort: Sort, count: usize) {
    let cmp: fn(&Point, &Point) -> Ordering = match sort {
        Sort::Unsorted => |_, _| Ordering::Equal,
        Sort::Asc => |a, b| cmp_dist(a.dist, b.dist),
        Sort::Desc => |a, b| cmp_dist(a.dist, b.dist).reverse(),
    };
    let keep = if count == 0 {
        points.len()
    } else {
        count.min(points.len())
    };
    if sort != Sort::Unsorted {
        if keep == points.len() {
            points.sort_by(cmp);
        } else {
            partial_qsort(points, 0, keep - 1, &cmp);
        }
    }
    points.truncate(keep);
}

/// Redis's distance comparator: greater, equal, otherwise less (so a NaN
/// compares less on both sides).
fn cmp_dist(a: f64, b: f64) -> Ordering {
    if a > b {
        Ordering::Greater
    } else if a == b {
        Ordering::Equal
    } else {
        Ordering::Less
    }
}

/// The index of the median of three elements, picked with Redis's
/// `med3` comparisons.
fn med3<T>(v: &[T], a: usize, b: usize, c: usize, cmp: &impl Fn(&T, &T) -> Ordering) -> usize {
    let lt = |x: usize, y: usize| cmp(&v[x], &v[y]) == Ordering::Less;
    let gt = |x: usize, y: usize| cmp(&v[x], &v[y]) == Ordering::Greater;
    if lt(a, b) {
        if lt(b, c) {
            b
        } else if lt(a, c) {
            c
        } else {
            a
        }
    } else if gt(b, c) {
        b
    } else if lt(a, c) {
        a
    } else {
        c
    }
}

/// Swaps `n` elements starting at `a` with those starting at `b`.
fn swap_runs<T>(v: &mut [T], a: usize, b: usize, n: usize) {
    for i in 0..n {
        v.swap(a + i, b + i);
    }
}

/// Redis's `pqsort`: Bentley-McIlroy quicksort (median of three, or of
/// nine above 40 elements; insertion sort below 7; a three-way partition)
/// that only descends into parts holding positions up to `last` of the
/// whole array. `v` starts at position `base` of it. Reproduced step for
/// step because the order of equal elements among the kept ones depends
/// on every swap.
fn partial_qsort<T>(
    mut v: &mut [T],
    mut base: usize,
    last: usize,
    cmp: &impl Fn(&T, &T) -> Ordering,
) {
    loop {
        let n = v.len();
        if n < 7 {
            for m in 1..n {
                let mut l = m;
                while l > 0 && cmp(&v[l - 1], &v[l]) == Ordering::Greater {
                    v.swap(l, l - 1);
                    l -= 1;
                }
            }
            return;
        }
        v.swap(0, pivot_index(v, cmp));
        let (pa, pb, pc, pd) = partition(v, cmp);
        let r = pa.min(pb - pa);
        swap_runs(v, 0, pb - r, r);
        let r = (pd - pc).min(n - pd - 1);
        swap_runs(v, pb, n - r, r);
        let (left, right) = (pb - pa, pd - pc);
        if left > 1 && base <= last {
            partial_qsort(&mut v[..left], base, last, cmp);
        }
        if right <= 1 || base + n - right > last {
            return;
        }
        v = &mut v[n - right..];
        base += n - right;
    }
}

/// The pivot of a part of 7 or more elements.
fn pivot_index<T>(v: &[T], cmp: &impl Fn(&T, &T) -> Ordering) -> usize {
    let n = v.len();
    let mut pm = n / 2;
    if n > 7 {
        let (mut pl, mut pn) = (0, n - 1);
        if n > 40 {
            let d = n / 8;
            pl = med3(v, pl, pl + d, pl + 2 * d, cmp);
            pm = med3(v, pm - d, pm, pm + d, cmp);
            pn = med3(v, pn - 2 * d, pn - d, pn, cmp);
        }
        pm = med3(v, pl, pm, pn, cmp);
    }
    pm
}

/// The three-way partition around `v[0]`: equal elements gather at both
/// ends; returns the final (pa, pb, pc, pd) cursors.
fn partition<T>(v: &mut [T], cmp: &impl Fn(&T, &T) -> Ordering) -> (usize, usize, usize, usize) {
    let (mut pa, mut pb) = (1, 1);
    let (mut pc, mut pd) = (v.len() - 1, v.len() - 1);
    loop {
        while pb <= pc {
            let c = cmp(&v[pb], &v[0]);
            if c == Ordering::Greater {
                break;
            }
            if c == Ordering::Equal {
                v.swap(pa, pb);
                pa += 1;
            }
            pb += 1;
        }
        while pb <= pc {
            let c = cmp(&v[pc], &v[0]);
            if c == Ordering::Less {
                break;
            }
            if c == Ordering::Equal {
                v.swap(pc, pd);
                pd -= 1;
            }
            pc -= 1;
        }
        if pb > pc {
            return (pa, pb, pc, pd);
        }
        v.swap(pb, pc);
        pb += 1;
        pc -= 1;
    }
}

/// A distance as Redis prints it (WITHDIST, GEODIST): fixed point with
/// four decimals, rounded half to even (`fixedpoint_d2string`).
pub fn format_distance(d: f64) -> String {
    if d == 0.0 {
        return "0.0000".to_owned();
    }
    let scaled = (d * 10000.0).round_ties_even();
    // llrint gives LLONG_MIN for NaN and out-of-range values on x86-64.
    let v = if (-TWO_63..TWO_63).contains(&scaled) {
        scaled as i64
    } else {
        i64::MIN
    };
    let sign = if v < 0 { "-" } else { "" };
    let m = v.unsigned_abs();
    format!("{sign}{}.{:04}", m / 10000, m % 10000)
}

/// A coordinate as Redis prints it (GEOPOS, WITHCOORD): `%.17Lf` of the
/// exact value with trailing zeros and dot removed, `-0` as `0`.
pub fn format_coordinate(x: f64) -> String {
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if x.is_nan() {
        return "nan".to_owned();
    }
    let s = format!("{x:.17}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_owned()
    } else {
        s.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zset::Limits;

    proptest::proptest! {
        /// Any score decodes, and any shape around a valid centre yields
        /// areas and membership answers, without panicking or hanging.
        #[test]
        fn arbitrary_numbers_never_panic(
            score in proptest::num::f64::ANY,
            lon in -180.0f64..=180.0,
            lat in geohash::LAT_MIN..=geohash::LAT_MAX,
            a in proptest::num::f64::ANY,
            b in proptest::num::f64::ANY,
            boxed in proptest::bool::ANY,
        ) {
            let (plon, plat) = lon_lat_of_score(score);
            proptest::prop_assert!(plon.abs() <= 180.0 && plat.abs() <= geohash::LAT_MAX);
            let _ = geohash_string(score);
            let _ = format_distance(a);
            let _ = format_coordinate(a);
            let kind = if boxed { ShapeKind::Box { width: a, height: b } } else { ShapeKind::Radius(a) };
            let shape = Shape { lon, lat, kind, to_meters: 1.0 };
            let ranges = shape.areas().score_ranges();
            proptest::prop_assert!(ranges.len() <= 9);
            let _ = shape.test(score);
        }
    }

    #[test]
    fn partial_qsort_orders_the_kept_prefix() {
        let mut rng = fastrand::Rng::with_seed(3);
        for _ in 0..500 {
            let n = rng.usize(1..200);
            let v: Vec<(u8, usize)> = (0..n).map(|i| (rng.u8(..20), i)).collect();
            let keep = rng.usize(1..=n);
            let mut p = v.clone();
            partial_qsort(&mut p, 0, keep - 1, &|a: &(u8, usize), b: &(u8, usize)| {
                a.0.cmp(&b.0)
            });
            let mut sorted = v.clone();
            sorted.sort();
            let mut got: Vec<(u8, usize)> = p.clone();
            got.sort();
            assert_eq!(got, sorted, "a permutation");
            let keys: Vec<u8> = p[..keep].iter().map(|e| e.0).collect();
            let want: Vec<u8> = sorted[..keep].iter().map(|e| e.0).collect();
            assert_eq!(keys, want);
        }
    }

    /// Palermo and Catania, the positions of Redis's documentation.
    const PALERMO: (f64, f64) = (13.361389, 38.115556);
    const CATANIA: (f64, f64) = (15.087269, 37.502669);

    #[test]
    fn scores_positions_and_hashes_of_known_points() {
        let p = score_of(PALERMO.0, PALERMO.1).unwrap();
        let c = score_of(CATANIA.0, CATANIA.1).unwrap();
        assert_eq!((p, c), (3_479_099_956_230_698, 3_479_447_370_796_909));
        let (lon, lat) = lon_lat_of_score(p as f64);
        assert_eq!(format_coordinate(lon), "13.36138933897018433");
        assert_eq!(format_coordinate(lat), "38.11555639549629859");
        assert_eq!(&geohash_string(p as f64), b"sqc8b49rny0");
        assert_eq!(&geohash_string(c as f64), b"sqdtr74hyu0");
        let (clon, clat) = lon_lat_of_score(c as f64);
        let d = distance(lon, lat, clon, clat);
        assert_eq!(format_distance(d), "166274.1516");
        assert_eq!(
            format_distance(d / Unit::Kilometers.to_meters()),
            "166.2742"
        );
    }

    #[test]
    fn lon_lat_limits_and_error_text() {
        assert_eq!(check_lon_lat(180.0, geohash::LAT_MAX), Ok(()));
        assert_eq!(
            check_lon_lat(200.0, 10.0),
            Err("ERR invalid longitude,latitude pair 200.000000,10.000000".to_owned())
        );
        assert!(score_of(0.0, 85.06).is_err());
    }

    #[test]
    fn units_parse_case_insensitively() {
        assert_eq!(Unit::parse(b"KM"), Some(Unit::Kilometers));
        assert_eq!(Unit::parse(b"Mi").map(Unit::to_meters), Some(1609.34));
        assert_eq!(Unit::parse(b"ft").map(Unit::to_meters), Some(0.3048));
        assert_eq!(Unit::parse(b"meters"), None);
    }

    #[test]
    fn score_conversion_follows_x86_64_c() {
        assert_eq!(score_to_bits(5.9), 5);
        assert_eq!(score_to_bits(-1.0), u64::MAX);
        assert_eq!(score_to_bits(f64::NAN), 1 << 63);
        assert_eq!(score_to_bits(1e300), 0);
        assert_eq!(score_to_bits(-1e300), 1 << 63);
        assert_eq!(score_to_bits(1.5e19), 15_000_000_000_000_000_000);
    }

    #[test]
    fn number_formats() {
        assert_eq!(format_distance(0.0), "0.0000");
        assert_eq!(format_distance(0.00005), "0.0000"); // a tie rounds to even
        assert_eq!(format_distance(12.345_678_9), "12.3457");
        assert_eq!(format_distance(-1.5), "-1.5000");
        assert_eq!(format_distance(f64::NAN), "-922337203685477.5808");
        assert_eq!(format_coordinate(-0.0), "0");
        assert_eq!(format_coordinate(2.0), "2");
        assert_eq!(format_coordinate(0.1), "0.10000000000000001");
    }

    #[test]
    fn step_estimate_follows_radius_and_latitude() {
        assert_eq!(estimate_steps_by_radius(0.0, 0.0), 26);
        assert_eq!(estimate_steps_by_radius(1.0, 0.0), 24);
        assert_eq!(estimate_steps_by_radius(1.0, 70.0), 23);
        assert_eq!(estimate_steps_by_radius(1.0, -81.0), 22);
        assert_eq!(estimate_steps_by_radius(1e9, 0.0), 1);
        assert_eq!(estimate_steps_by_radius(5000.0, 0.0), 11);
    }

    #[test]
    fn areas_cover_the_search_and_skip_far_sides() {
        let shape = Shape {
            lon: 15.0,
            lat: 37.0,
            kind: ShapeKind::Radius(200.0),
            to_meters: 1000.0,
        };
        let areas = shape.areas();
        let [min_lon, min_lat, max_lon, max_lat] = shape.bounding_box();
        let covered: Vec<Area> = areas
            .boxes()
            .iter()
            .filter(|b| !b.is_zero())
            .map(|b| geohash::decode_wgs84(*b).unwrap())
            .collect();
        let lo_lon = covered
            .iter()
            .map(|a| a.longitude.min)
            .fold(f64::MAX, f64::min);
        let hi_lat = covered
            .iter()
            .map(|a| a.latitude.max)
            .fold(f64::MIN, f64::max);
        assert!(lo_lon <= min_lon && hi_lat >= max_lat);
        assert!(covered.iter().any(|a| a.longitude.max >= max_lon));
        assert!(covered.iter().any(|a| a.latitude.min <= min_lat));
        for r in areas.score_ranges() {
            assert!(r.min < r.max && r.max <= 1 << 52);
        }
    }

    #[test]
    fn identical_neighbours_are_scanned_once() {
        // A huge radius gives step 1: the grid has 2x2 boxes and the
        // neighbours repeat.
        let shape = Shape {
            lon: 0.0,
            lat: 0.0,
            kind: ShapeKind::Radius(19_000.0),
            to_meters: 1000.0,
        };
        let areas = shape.areas();
        assert_eq!(areas.hash.step, 1);
        let ranges = areas.score_ranges();
        assert!(ranges.len() < 9);
        let boxes: Vec<HashBits> = areas.boxes().into_iter().filter(|b| !b.is_zero()).collect();
        assert_eq!(boxes.len(), 9);
    }

    /// A GEO set of the given positions.
    fn geo_set(points: &[(&str, f64, f64)]) -> ZSet {
        let entries = points
            .iter()
            .map(|(m, lon, lat)| (m.as_bytes().to_vec(), score_of(*lon, *lat).unwrap() as f64))
            .collect();
        ZSet::from_entries(entries, Limits::default())
    }

    #[test]
    fn search_by_radius_and_box() {
        let z = geo_set(&[
            ("Palermo", PALERMO.0, PALERMO.1),
            ("Catania", CATANIA.0, CATANIA.1),
            ("edge1", 12.758489, 38.788135),
            ("edge2", 17.241510, 38.788135),
        ]);
        let radius = |km: f64| Shape {
            lon: 15.0,
            lat: 37.0,
            kind: ShapeKind::Radius(km),
            to_meters: 1000.0,
        };
        let mut found = search(&z, &radius(200.0), 0);
        sort_points(&mut found, Sort::Asc, 0);
        let names: Vec<&[u8]> = found.iter().map(|p| p.member.as_slice()).collect();
        assert_eq!(names, [&b"Catania"[..], b"Palermo"]);
        assert_eq!(format_distance(found[0].dist / 1000.0), "56.4413");
        let mut wide = search(&z, &radius(400.0), 0);
        assert_eq!(wide.len(), 4);
        sort_points(&mut wide, Sort::Desc, 1);
        assert_eq!(wide.len(), 1);
        assert!(wide[0].member.starts_with(b"edge"));
        assert_eq!(search(&z, &radius(400.0), 2).len(), 2);
        let boxed = Shape {
            lon: 15.0,
            lat: 37.0,
            kind: ShapeKind::Box {
                width: 400.0,
                height: 400.0,
            },
            to_meters: 1000.0,
        };
        assert_eq!(search(&z, &boxed, 0).len(), 4);
    }
}
