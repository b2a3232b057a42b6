//! Differential test of the GEO commands against a real redis-server (see
//! `common/diff.rs`): random points (mostly clustered so searches find
//! some, sometimes anywhere, sometimes invalid), random searches of every
//! form with every option in random order (bad values included), stored
//! results read back with their scores, odd scores written by ZADD, and
//! a RESP3 session. Replies must be byte-identical, so scores, distances,
//! coordinates, orders and errors all match Redis's.

mod common;

use common::diff::{self, b, Raw};

struct Gen<'r> {
    rng: &'r mut fastrand::Rng,
    /// The command being built is GEOSEARCHSTORE.
    storing: bool,
}

impl Gen<'_> {
    fn pick<'a>(&mut self, opts: &[&'a str]) -> &'a str {
        opts[self.rng.usize(..opts.len())]
    }

    /// A source key: mostly GEO sets, sometimes a string or a missing key.
    fn key(&mut self) -> Vec<u8> {
        match self.rng.u8(..20) {
            0 => b("str"),
            1 => b("nokey"),
            _ => format!("g{}", self.rng.u8(..3)).into_bytes(),
        }
    }

    fn dest(&mut self) -> Vec<u8> {
        match self.rng.u8(..40) {
            0 => b("str"),
            1 => b("g0"),
            _ => format!("d{}", self.rng.u8(..2)).into_bytes(),
        }
    }

    fn member(&mut self) -> Vec<u8> {
        match self.rng.u8(..30) {
            0 => b("nomember"),
            1 => b(""),
            _ => format!("m{}", self.rng.u8(..25)).into_bytes(),
        }
    }

    /// A coordinate in `lo..hi`, printed with a random number of decimals.
    fn coord(&mut self, lo: f64, hi: f64) -> Vec<u8> {
        let v = lo + (hi - lo) * self.rng.f64();
        let decimals = self.rng.usize(0..10);
        format!("{v:.decimals$}").into_bytes()
    }

    /// A longitude/latitude pair: clustered around Sicily, anywhere, on
    /// the limits, or invalid.
    fn lon_lat(&mut self) -> [Vec<u8>; 2] {
        match self.rng.u8(..20) {
            0 => [
                b(self.pick(&["180", "-180", "181", "abc", "inf"])),
                self.coord(-85.0, 85.0),
            ],
            1 => [
                self.coord(-180.0, 180.0),
                b(self.pick(&["85.05112878", "-85.05112878", "85.06", "-90", "nan"])),
            ],
            2..=5 => [self.coord(-180.0, 180.0), self.coord(-85.05, 85.05)],
            _ => [self.coord(12.0, 16.0), self.coord(36.0, 39.0)],
        }
    }

    fn unit(&mut self) -> Vec<u8> {
        match self.rng.u8(..30) {
            0 => b("parsec"),
            _ => b(self.pick(&["m", "km", "km", "km", "ft", "mi", "KM", "Mi"])),
        }
    }

    /// A distance scaled to `unit` (up to about 300 km), sometimes huge or
    /// invalid.
    fn distance(&mut self, unit: &[u8]) -> Vec<u8> {
        let per_km = match unit.to_ascii_lowercase().as_slice() {
            b"m" => 1000.0,
            b"ft" => 3280.8,
            b"mi" => 0.6214,
            _ => 1.0,
        };
        match self.rng.u8(..40) {
            0 => b(self.pick(&["-1", "abc", "0", "inf", "1e400"])),
            1 => format!("{}", self.rng.u32(..20_000_000)).into_bytes(),
            _ => format!("{:.2}", 300.0 * per_km * self.rng.f64()).into_bytes(),
        }
    }

    /// `distance unit`.
    fn radius(&mut self) -> [Vec<u8>; 2] {
        let unit = self.unit();
        [self.distance(&unit), unit]
    }

    fn count(&mut self) -> Vec<u8> {
        match self.rng.u8(..25) {
            0 => b(self.pick(&["0", "-1", "x", "9223372036854775807"])),
            _ => format!("{}", self.rng.u8(1..12)).into_bytes(),
        }
    }

    fn geoadd(&mut self) -> Vec<Vec<u8>> {
        let mut c = vec![b("GEOADD"), self.key()];
        if self.rng.u8(..3) == 0 {
            for _ in 0..self.rng.usize(1..3) {
                c.push(b(self.pick(&["NX", "XX", "CH", "ch"])));
            }
        }
        let n = if self.rng.u8(..15) == 0 {
            0
        } else {
            self.rng.usize(1..6)
        };
        for _ in 0..n {
            c.extend(self.lon_lat());
            c.push(self.member());
        }
        if self.rng.u8(..25) == 0 {
            c.push(b("dangling"));
        }
        c
    }

    /// Random search options, as Redis's parser meets them in any order;
    /// about one command in eight gets a misplaced or broken one.
    fn options(&mut self, store: bool, search: bool) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for _ in 0..self.rng.usize(0..5) {
            match self.rng.u8(..8) {
                0 => out.push(b("WITHDIST")),
                1 => out.push(b("WITHHASH")),
                2 => out.push(b("WITHCOORD")),
                3 | 4 => {
                    out.push(b("COUNT"));
                    out.push(self.count());
                    if self.rng.bool() {
                        out.push(b("ANY"));
                    }
                }
                5 => out.push(b("ASC")),
                6 => out.push(b("DESC")),
                _ if store => {
                    out.push(b(self.pick(&["STORE", "STOREDIST"])));
                    out.push(self.dest());
                }
                _ => {}
            }
        }
        // Storing results with WITH* options is an error; keep it rare.
        if (store || self.storing) && self.rng.u8(..8) != 0 {
            out.retain(|a| !a.starts_with(b"WITH"));
        }
        if self.rng.u8(..8) == 0 {
            let bad = match self.rng.u8(..5) {
                0 => vec![b("ANY")],
                1 => vec![b(self.pick(&["bogus", "COUNT", "STORE"]))],
                2 if search => vec![b("STOREDIST")],
                3 if search => vec![b("FROMMEMBER"), self.member()],
                _ => vec![b("BYRADIUS")],
            };
            let at = self.rng.usize(..=out.len());
            out.splice(at..at, bad);
        }
        out
    }

    /// GEOSEARCH's centre and shape, sometimes missing, doubled or broken.
    fn centre_and_shape(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        match self.rng.u8(..12) {
            0 => {}
            1..=3 => {
                out.push(b("FROMMEMBER"));
                out.push(self.member());
            }
            _ => {
                out.push(b("FROMLONLAT"));
                out.extend(self.lon_lat());
            }
        }
        match self.rng.u8(..12) {
            0 => {}
            1..=5 => {
                out.push(b("BYRADIUS"));
                out.extend(self.radius());
            }
            _ => {
                out.push(b("BYBOX"));
                let unit = self.unit();
                out.push(self.distance(&unit));
                out.push(self.distance(&unit));
                out.push(unit);
            }
        }
        if self.rng.u8(..10) == 0 {
            let i = self.rng.usize(..=out.len());
            let j = self.rng.usize(..=out.len());
            let (i, j) = (i.min(j), i.max(j));
            out[i..j].reverse();
        }
        out
    }

    fn search(&mut self) -> Vec<Vec<u8>> {
        match self.rng.u8(..6) {
            0 => {
                let name = self.pick(&["GEORADIUS", "GEORADIUS_RO"]);
                let mut c = vec![b(name), self.key()];
                c.extend(self.lon_lat());
                c.extend(self.radius());
                c.extend(self.options(name == "GEORADIUS", false));
                c
            }
            1 => {
                let name = self.pick(&["GEORADIUSBYMEMBER", "GEORADIUSBYMEMBER_RO"]);
                let mut c = vec![b(name), self.key(), self.member()];
                c.extend(self.radius());
                c.extend(self.options(name == "GEORADIUSBYMEMBER", false));
                c
            }
            2 | 3 => {
                let mut c = vec![b("GEOSEARCH"), self.key()];
                c.extend(self.centre_and_shape());
                c.extend(self.options(false, true));
                c
            }
            _ => {
                let mut c = vec![b("GEOSEARCHSTORE"), self.dest(), self.key()];
                c.extend(self.centre_and_shape());
                self.storing = true;
                c.extend(self.options(false, true));
                self.storing = false;
                if self.rng.bool() {
                    c.push(b("STOREDIST"));
                }
                c
            }
        }
    }

    fn command(&mut self) -> Vec<Vec<u8>> {
        match self.rng.u8(..30) {
            0..=7 => self.geoadd(),
            8..=15 => self.search(),
            16 | 17 => {
                let mut c = vec![b("GEODIST"), self.key(), self.member(), self.member()];
                match self.rng.u8(..6) {
                    0 => {}
                    1 => {
                        c.push(self.unit());
                        c.push(b("extra"));
                    }
                    _ => c.push(self.unit()),
                }
                c
            }
            18 | 19 => {
                let mut c = vec![b(self.pick(&["GEOHASH", "GEOPOS"])), self.key()];
                for _ in 0..self.rng.usize(0..4) {
                    c.push(self.member());
                }
                c
            }
            20 | 21 => vec![b("ZRANGE"), self.dest(), b("0"), b("-1"), b("WITHSCORES")],
            22 => {
                // Scores no GEOADD makes: negative, past 52 bits, infinite.
                let score =
                    self.pick(&["-1", "4503599627370496", "1e300", "inf", "-inf", "0", "3.5"]);
                vec![b("ZADD"), self.key(), b(score), self.member()]
            }
            23 => vec![b("ZREM"), self.key(), self.member()],
            24 => vec![b("SET"), b("str"), b("x")],
            25 => vec![b("EXISTS"), self.dest()],
            26 => vec![b("TYPE"), self.dest()],
            _ => vec![b("ZCARD"), self.key()],
        }
    }
}

#[test]
fn random_geo_sequences_match_redis() {
    if !diff::redis_server_available() {
        return;
    }
    diff::run(|rng| {
        if rng.u8(..15) == 0 {
            diff::transaction(rng, |r| {
                Gen {
                    rng: r,
                    storing: false,
                }
                .command()
            })
        } else {
            vec![Gen {
                rng,
                storing: false,
            }
            .command()]
        }
    });
}

/// Coordinates are RESP3 doubles, distances bulk strings, hashes integers.
#[test]
fn resp3_geo_replies_match_redis() {
    if !diff::redis_server_available() {
        return;
    }
    let redis = diff::start_redis();
    let vireo = common::Server::start(&[]);
    let mut conns = [Raw::connect(vireo.port), Raw::connect(redis.port)];
    let lines: &[&str] = &[
        "HELLO 3",
        "GEOADD s 13.361389 38.115556 Palermo 15.087269 37.502669 Catania 2.35 48.85 Paris",
        "GEOPOS s Palermo nope Paris",
        "GEODIST s Palermo Catania km",
        "GEOHASH s Palermo Paris nope",
        "GEORADIUS s 15 37 200 km WITHDIST WITHCOORD WITHHASH ASC",
        "GEOSEARCH s FROMMEMBER Paris BYBOX 3000 3000 km WITHCOORD DESC COUNT 2",
        "GEOSEARCH nokey FROMLONLAT 1 2 BYRADIUS 1 m",
        "GEODIST nokey a b",
    ];
    let mut replies: [Vec<Vec<u8>>; 2] = Default::default();
    for (conn, out) in conns.iter_mut().zip(replies.iter_mut()) {
        for line in lines {
            let args: Vec<Vec<u8>> = line.split(' ').map(b).collect();
            out.push(conn.send(&args));
        }
    }
    // HELLO's reply names the server; everything after it must match.
    for (i, line) in lines.iter().enumerate().skip(1) {
        assert_eq!(
            String::from_utf8_lossy(&replies[0][i]),
            String::from_utf8_lossy(&replies[1][i]),
            "{line}"
        );
    }
}
