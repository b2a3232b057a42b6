//! The interleaved geohash Redis stores GEO members with.
//!
//! A position becomes two fixed-point numbers of `step` bits each (the
//! latitude's and the longitude's offset inside their ranges), and the
//! hash interleaves them, latitude bits in the even positions and
//! longitude bits in the odd ones. At Redis's step of 26 that is a 52-bit
//! integer, exactly representable as a sorted-set score, and nearby
//! positions share prefixes, so a box of the grid is a range of scores.
//!
//! Everything here follows Redis 7.0's `geohash.c` operation for
//! operation (the same divisions, multiplications and truncations in the
//! same order), because GEOPOS, GEOHASH and the search results print the
//! decoded values to 17 digits and must match Redis's to the last one.
//! Latitudes are limited to ±85.05112878 (the Web Mercator square), as in
//! Redis.

/// Bits per coordinate of a stored GEO score (26 + 26 = 52 bits).
pub const STEP_MAX: u8 = 26;
/// Southernmost latitude Redis can index.
pub const LAT_MIN: f64 = -85.051_128_78;
/// Northernmost latitude Redis can index.
pub const LAT_MAX: f64 = 85.051_128_78;
/// Westernmost longitude.
pub const LONG_MIN: f64 = -180.0;
/// Easternmost longitude.
pub const LONG_MAX: f64 = 180.0;

/// An interval of one coordinate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    /// Lower bound.
    pub min: f64,
    /// Upper bound.
    pub max: f64,
}

impl Range {
    /// Redis treats an all-zero range as "not given".
    fn is_zero(self) -> bool {
        self.min == 0.0 && self.max == 0.0
    }
}

/// The longitude range of stored scores.
pub const WGS84_LONG: Range = Range {
    min: LONG_MIN,
    max: LONG_MAX,
};
/// The latitude range of stored scores.
pub const WGS84_LAT: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};
/// The latitude range of standard geohash strings (GEOHASH's output).
pub const STANDARD_LAT: Range = Range {
    min: -90.0,
    max: 90.0,
};

/// A geohash: `step` bits per coordinate, interleaved in `bits`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HashBits {
    /// The interleaved bits (latitude in even positions).
    pub bits: u64,
    /// Bits per coordinate (1..=32).
    pub step: u8,
}

impl HashBits {
    /// The "no box" marker (Redis's `GZERO`): search areas that are not
    /// needed are set to it.
    pub const ZERO: HashBits = HashBits { bits: 0, step: 0 };

    /// True for [`HashBits::ZERO`].
    pub fn is_zero(self) -> bool {
        self == HashBits::ZERO
    }

    /// The hash shifted to 52 bits: the smallest score inside its box.
    pub fn align52(self) -> u64 {
        let shift = 52u32.saturating_sub(u32::from(self.step) * 2);
        self.bits << shift
    }
}

/// A box of the grid: its hash and the coordinates it spans.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Area {
    /// The box's hash.
    pub hash: HashBits,
    /// Longitudes covered.
    pub longitude: Range,
    /// Latitudes covered.
    pub latitude: Range,
}

impl Area {
    /// The box's centre as (longitude, latitude), clamped to the WGS84
    /// limits (Redis's `geohashDecodeAreaToLongLat`).
    pub fn center(&self) -> (f64, f64) {
        let lon = ((self.longitude.min + self.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
        let lat = ((self.latitude.min + self.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
        (lon, lat)
    }
}

/// Spreads the low 32 bits of `v` to the even bit positions.
fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | x << 16) & 0x0000_ffff_0000_ffff;
    x = (x | x << 8) & 0x00ff_00ff_00ff_00ff;
    x = (x | x << 4) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | x << 2) & 0x3333_3333_3333_3333;
    (x | x << 1) & 0x5555_5555_5555_5555
}

/// Gathers the even bit positions of `x` into 32 bits.
fn gather(x: u64) -> u32 {
    let mut x = x & 0x5555_5555_5555_5555;
    x = (x | x >> 1) & 0x3333_3333_3333_3333;
    x = (x | x >> 2) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | x >> 4) & 0x00ff_00ff_00ff_00ff;
    x = (x | x >> 8) & 0x0000_ffff_0000_ffff;
    ((x | x >> 16) & 0x0000_0000_ffff_ffff) as u32
}

/// Interleaves: `lat` bits in even positions, `lon` bits in odd ones.
fn interleave(lat: u32, lon: u32) -> u64 {
    spread(lat) | spread(lon) << 1
}

/// Splits interleaved bits into (latitude part, longitude part).
fn deinterleave(bits: u64) -> (u32, u32) {
    (gather(bits), gather(bits >> 1))
}

/// C's conversion of a non-negative double below 2^33 to `uint32_t` as
/// x86-64 compilers emit it (truncate to 64 bits, keep the low 32).
fn to_u32_like_c(x: f64) -> u32 {
    x as i64 as u32
}

/// Encodes a position inside the given ranges with `step` bits per
/// coordinate. `None` for a step outside 1..=32, an all-zero range, or a
/// position outside the WGS84 limits or the ranges.
pub fn encode(
    long_range: Range,
    lat_range: Range,
    lon: f64,
    lat: f64,
    step: u8,
) -> Option<HashBits> {
    if step == 0 || step > 32 || lat_range.is_zero() || long_range.is_zero() {
        return None;
    }
    let outside = |v: f64, r: Range| v < r.min || v > r.max;
    if outside(lon, WGS84_LONG)
        || outside(lat, WGS84_LAT)
        || outside(lon, long_range)
        || outside(lat, lat_range)
    {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_offset = (lat - lat_range.min) / (lat_range.max - lat_range.min) * scale;
    let lon_offset = (lon - long_range.min) / (long_range.max - long_range.min) * scale;
    Some(HashBits {
        bits: interleave(to_u32_like_c(lat_offset), to_u32_like_c(lon_offset)),
        step,
    })
}

/// [`encode`] with the WGS84 ranges scores use.
pub fn encode_wgs84(lon: f64, lat: f64, step: u8) -> Option<HashBits> {
    encode(WGS84_LONG, WGS84_LAT, lon, lat, step)
}

/// The box a hash stands for inside the given ranges; `None` for
/// [`HashBits::ZERO`] or an all-zero range.
pub fn decode(long_range: Range, lat_range: Range, hash: HashBits) -> Option<Area> {
    if hash.is_zero() || lat_range.is_zero() || long_range.is_zero() || hash.step > 32 {
        return None;
    }
    let (ilat, ilon) = deinterleave(hash.bits);
    let scale = (1u64 << hash.step) as f64;
    let edge = |i: u32, r: Range| r.min + (f64::from(i) / scale) * (r.max - r.min);
    Some(Area {
        hash,
        latitude: Range {
            min: edge(ilat, lat_range),
            max: edge(ilat.wrapping_add(1), lat_range),
        },
        longitude: Range {
            min: edge(ilon, long_range),
            max: edge(ilon.wrapping_add(1), long_range),
        },
    })
}

/// [`decode`] with the WGS84 ranges scores use.
pub fn decode_wgs84(hash: HashBits) -> Option<Area> {
    decode(WGS84_LONG, WGS84_LAT, hash)
}

/// The clamped centre of a hash's box, (longitude, latitude) (Redis's
/// `geohashDecodeToLongLatWGS84`).
pub fn decode_to_lon_lat_wgs84(hash: HashBits) -> Option<(f64, f64)> {
    decode_wgs84(hash).map(|a| a.center())
}

/// The eight boxes around one, same step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Neighbors {
    /// Above (higher latitude).
    pub north: HashBits,
    /// Right (higher longitude).
    pub east: HashBits,
    /// Left.
    pub west: HashBits,
    /// Below.
    pub south: HashBits,
    /// Above right.
    pub north_east: HashBits,
    /// Below right.
    pub south_east: HashBits,
    /// Above left.
    pub north_west: HashBits,
    /// Below left.
    pub south_west: HashBits,
}

/// Moves a hash one box along the coordinate whose bits sit in positions
/// `own` (the other coordinate's bits are kept), wrapping around.
fn step_along(hash: HashBits, own: u64, d: i8) -> HashBits {
    if d == 0 {
        return hash;
    }
    let width = 64u32.saturating_sub(u32::from(hash.step) * 2);
    let fill = |mask: u64| mask.checked_shr(width).unwrap_or(0);
    let other = !own;
    let zz = fill(other);
    let mut v = hash.bits & own;
    if d > 0 {
        v = v.wrapping_add(zz.wrapping_add(1));
    } else {
        v = (v | zz).wrapping_sub(zz.wrapping_add(1));
    }
    HashBits {
        bits: (v & fill(own)) | (hash.bits & other),
        step: hash.step,
    }
}

/// Longitude bits (odd positions).
const LON_BITS: u64 = 0xaaaa_aaaa_aaaa_aaaa;
/// Latitude bits (even positions).
const LAT_BITS: u64 = 0x5555_5555_5555_5555;

/// Moves `dx` boxes east (negative: west) and `dy` north.
fn moved(hash: HashBits, dx: i8, dy: i8) -> HashBits {
    step_along(step_along(hash, LON_BITS, dx), LAT_BITS, dy)
}

/// The eight neighbours of a box (Redis's `geohashNeighbors`).
pub fn neighbors(hash: HashBits) -> Neighbors {
    Neighbors {
        north: moved(hash, 0, 1),
        east: moved(hash, 1, 0),
        west: moved(hash, -1, 0),
        south: moved(hash, 0, -1),
        north_east: moved(hash, 1, 1),
        south_east: moved(hash, 1, -1),
        north_west: moved(hash, -1, 1),
        south_west: moved(hash, -1, -1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleave_round_trips() {
        let mut rng = fastrand::Rng::with_seed(5);
        for _ in 0..1000 {
            let (a, b) = (rng.u32(..), rng.u32(..));
            assert_eq!(deinterleave(interleave(a, b)), (a, b));
        }
        assert_eq!(interleave(1, 0), 1);
        assert_eq!(interleave(0, 1), 2);
    }

    #[test]
    fn encode_checks_limits() {
        assert_eq!(encode_wgs84(0.0, 85.1, 26), None);
        assert_eq!(encode_wgs84(180.1, 0.0, 26), None);
        assert_eq!(encode_wgs84(0.0, 0.0, 0), None);
        assert_eq!(encode_wgs84(0.0, 0.0, 33), None);
        // The middle of the world: the top bit of each coordinate set.
        let h = encode_wgs84(0.0, 0.0, 26).unwrap();
        assert_eq!(h.bits, 3 << 50);
        // The north-east corner reaches one past the last box.
        let corner = encode_wgs84(LONG_MAX, LAT_MAX, 26).unwrap();
        assert_eq!(corner.bits, interleave(1 << 26, 1 << 26));
    }

    #[test]
    fn decode_contains_the_encoded_point() {
        let mut rng = fastrand::Rng::with_seed(9);
        for _ in 0..1000 {
            let lon = rng.f64() * 360.0 - 180.0;
            let lat = rng.f64() * 170.0 - 85.0;
            let a = decode_wgs84(encode_wgs84(lon, lat, 26).unwrap()).unwrap();
            assert!(a.longitude.min <= lon && lon <= a.longitude.max);
            assert!(a.latitude.min <= lat && lat <= a.latitude.max);
            let (clon, clat) = a.center();
            assert!((clon - lon).abs() < 1e-5 && (clat - lat).abs() < 1e-5);
        }
        assert_eq!(decode_wgs84(HashBits::ZERO), None);
    }

    #[test]
    fn neighbours_are_adjacent_boxes() {
        let h = encode_wgs84(13.361389, 38.115556, 10).unwrap();
        let a = decode_wgs84(h).unwrap();
        let n = neighbors(h);
        let east = decode_wgs84(n.east).unwrap();
        assert_eq!(east.longitude.min, a.longitude.max);
        assert_eq!(east.latitude, a.latitude);
        let south_west = decode_wgs84(n.south_west).unwrap();
        assert_eq!(south_west.longitude.max, a.longitude.min);
        assert_eq!(south_west.latitude.max, a.latitude.min);
        let north = decode_wgs84(n.north).unwrap();
        assert_eq!(north.latitude.min, a.latitude.max);
        // Stepping east then west returns home; east of the last column wraps.
        assert_eq!(neighbors(n.east).west, h);
        let edge = encode_wgs84(179.9, 0.0, 4).unwrap();
        assert_eq!(
            decode_wgs84(neighbors(edge).east).unwrap().longitude.min,
            -180.0
        );
    }

    #[test]
    fn align52_shifts_to_score_width() {
        let h = HashBits {
            bits: 0b101010,
            step: 3,
        };
        assert_eq!(h.align52(), 0b101010 << 46);
        assert_eq!(HashBits { bits: 7, step: 26 }.align52(), 7);
    }
}
