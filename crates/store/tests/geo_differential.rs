//! Differential tests of `vireo_store::geo` against a real redis-server:
//! random points are GEOADDed to Redis and put in a `ZSet` with the
//! module's scores, then GEOPOS, GEOHASH, GEODIST and GEOSEARCH replies
//! from Redis must equal the replies built from the module's results, to
//! the last printed digit and in the same order. Each test skips, with a
//! note, when redis-server is not installed.

mod common;

use common::{Redis, Reply};
use vireo_store::geo::{self, Shape, ShapeKind, Sort, Unit};
use vireo_store::geohash;
use vireo_store::zset::{Limits, ZSet};

/// A bulk reply of text.
fn bulk(s: &str) -> Reply {
    Reply::Bulk(Some(s.as_bytes().to_vec()))
}

/// A random position of one of several kinds of place.
fn position(rng: &mut fastrand::Rng, around: (f64, f64)) -> (f64, f64) {
    let span = |rng: &mut fastrand::Rng, lo: f64, hi: f64| lo + rng.f64() * (hi - lo);
    match rng.u8(..10) {
        0..=4 => (
            (around.0 + span(rng, -3.0, 3.0)).clamp(-180.0, 180.0),
            (around.1 + span(rng, -3.0, 3.0)).clamp(geohash::LAT_MIN, geohash::LAT_MAX),
        ),
        5 => (
            span(rng, 179.0, 180.0) * if rng.bool() { 1.0 } else { -1.0 },
            span(rng, -60.0, 60.0),
        ),
        6 => (
            span(rng, -180.0, 180.0),
            span(rng, 80.0, geohash::LAT_MAX) * if rng.bool() { 1.0 } else { -1.0 },
        ),
        7 => [
            (180.0, geohash::LAT_MAX),
            (-180.0, geohash::LAT_MIN),
            (0.0, 0.0),
            (-0.0, 45.0),
        ][rng.usize(..4)],
        _ => (
            span(rng, -180.0, 180.0),
            span(rng, geohash::LAT_MIN, geohash::LAT_MAX),
        ),
    }
}

/// The same random GEO set in Redis (key `key`) and in a `ZSet`.
fn populate(
    r: &mut Redis,
    rng: &mut fastrand::Rng,
    key: &str,
    n: usize,
    around: (f64, f64),
) -> (ZSet, Vec<String>) {
    let mut entries = Vec::new();
    let mut names = Vec::new();
    for i in 0..n {
        let (lon, lat) = position(rng, around);
        let name = format!("p{i}");
        let added = r.cmd(&[
            "GEOADD",
            key,
            &format!("{lon:.17}"),
            &format!("{lat:.17}"),
            &name,
        ]);
        assert_eq!(added, Reply::Int(1), "GEOADD {lon} {lat}");
        let score = geo::score_of(lon, lat).expect("valid position");
        let theirs: f64 = r
            .cmd(&["ZSCORE", key, &name])
            .text()
            .parse()
            .expect("score");
        assert_eq!(theirs, score as f64, "score of {lon},{lat}");
        entries.push((name.clone().into_bytes(), score as f64));
        names.push(name);
    }
    (ZSet::from_entries(entries, Limits::default()), names)
}

/// GEOPOS, GEOHASH and GEODIST of every member (some pairs) match.
fn check_lookups(r: &mut Redis, rng: &mut fastrand::Rng, key: &str, z: &ZSet, names: &[String]) {
    let mut args = vec!["GEOPOS", key];
    args.extend(names.iter().map(String::as_str));
    let positions = r.cmd(&args).array();
    args[0] = "GEOHASH";
    let hashes = r.cmd(&args).array();
    for ((name, pos), hash) in names.iter().zip(positions).zip(hashes) {
        let score = z.score(name.as_bytes()).expect("member");
        let (lon, lat) = geo::lon_lat_of_score(score);
        let want = Reply::Array(Some(vec![
            bulk(&geo::format_coordinate(lon)),
            bulk(&geo::format_coordinate(lat)),
        ]));
        assert_eq!(want, pos, "GEOPOS {name}");
        assert_eq!(
            Reply::Bulk(Some(geo::geohash_string(score).to_vec())),
            hash,
            "GEOHASH {name}"
        );
    }
    for _ in 0..50 {
        let (a, b) = (
            &names[rng.usize(..names.len())],
            &names[rng.usize(..names.len())],
        );
        let unit = ["m", "km", "mi", "ft", "KM"][rng.usize(..5)];
        let theirs = r.cmd(&["GEODIST", key, a, b, unit]);
        let (alon, alat) = geo::lon_lat_of_score(z.score(a.as_bytes()).expect("member"));
        let (blon, blat) = geo::lon_lat_of_score(z.score(b.as_bytes()).expect("member"));
        let to_m = Unit::parse(unit.as_bytes()).expect("unit").to_meters();
        let want = geo::format_distance(geo::distance(alon, alat, blon, blat) / to_m);
        assert_eq!(bulk(&want), theirs, "GEODIST {a} {b} {unit}");
    }
}

/// One random GEOSEARCH, asked of Redis and computed with the module.
fn check_search(r: &mut Redis, rng: &mut fastrand::Rng, key: &str, z: &ZSet, around: (f64, f64)) {
    let (mut lon, mut lat) = position(rng, around);
    let unit = ["m", "km", "mi", "ft"][rng.usize(..4)];
    let to_meters = Unit::parse(unit.as_bytes()).expect("unit").to_meters();
    // Sizes from meters to thousands of kilometers, in the unit.
    let size = |rng: &mut fastrand::Rng| 10f64.powf(rng.f64() * 7.0) / to_meters;
    let kind = if rng.bool() {
        ShapeKind::Radius(size(rng))
    } else {
        ShapeKind::Box {
            width: size(rng),
            height: size(rng),
        }
    };
    let mut args = vec!["GEOSEARCH".to_owned(), key.to_owned()];
    if rng.u8(..4) == 0 {
        // FROMMEMBER: the centre is the member's decoded position.
        let (member, score) = z.get(rng.usize(..z.len())).expect("member");
        (lon, lat) = geo::lon_lat_of_score(score);
        args.extend([
            "FROMMEMBER".into(),
            String::from_utf8(member.to_vec()).expect("name"),
        ]);
    } else {
        args.extend([
            "FROMLONLAT".into(),
            format!("{lon:.17}"),
            format!("{lat:.17}"),
        ]);
        (lon, lat) = (args[3].parse().expect("lon"), args[4].parse().expect("lat"));
    }
    match kind {
        ShapeKind::Radius(rad) => args.extend(["BYRADIUS".into(), format!("{rad:.17}")]),
        ShapeKind::Box { width, height } => args.extend([
            "BYBOX".into(),
            format!("{width:.17}"),
            format!("{height:.17}"),
        ]),
    }
    args.push(unit.into());
    // The sizes as Redis parses the text sent, so both sides use the same doubles.
    let shape = Shape {
        lon,
        lat,
        kind: reparse(kind),
        to_meters,
    };
    let sort = [Sort::Unsorted, Sort::Asc, Sort::Desc][rng.usize(..3)];
    match sort {
        Sort::Asc => args.push("ASC".into()),
        Sort::Desc => args.push("DESC".into()),
        Sort::Unsorted => {}
    }
    let (count, any) = match rng.u8(..4) {
        0 => (rng.usize(1..20), false),
        1 => (rng.usize(1..20), true),
        _ => (0, false),
    };
    if count > 0 {
        args.extend(["COUNT".into(), count.to_string()]);
        if any {
            args.push("ANY".into());
        }
    }
    args.extend(["WITHCOORD".into(), "WITHDIST".into(), "WITHHASH".into()]);
    let theirs = r.cmd(&args);
    let mut found = geo::search(z, &shape, if any { count } else { 0 });
    let sort = if count > 0 && sort == Sort::Unsorted && !any {
        Sort::Asc
    } else {
        sort
    };
    geo::sort_points(&mut found, sort, count);
    let ours: Vec<Reply> = found
        .iter()
        .map(|p| {
            Reply::Array(Some(vec![
                Reply::Bulk(Some(p.member.clone())),
                bulk(&geo::format_distance(p.dist / to_meters)),
                Reply::Int(p.score as i64),
                Reply::Array(Some(vec![
                    bulk(&geo::format_coordinate(p.lon)),
                    bulk(&geo::format_coordinate(p.lat)),
                ])),
            ]))
        })
        .collect();
    assert_eq!(Reply::Array(Some(ours)), theirs, "{}", args.join(" "));
}

/// The shape's sizes as Redis parses the `{:.17}` text sent to it.
fn reparse(kind: ShapeKind) -> ShapeKind {
    let back = |x: f64| format!("{x:.17}").parse::<f64>().expect("number");
    match kind {
        ShapeKind::Radius(r) => ShapeKind::Radius(back(r)),
        ShapeKind::Box { width, height } => ShapeKind::Box {
            width: back(width),
            height: back(height),
        },
    }
}

#[test]
fn geo_replies_match_redis() {
    let Some(mut r) = Redis::start("geo_replies_match_redis") else {
        return;
    };
    let mut rng = fastrand::Rng::with_seed(0x6e0);
    for round in 0..6 {
        let key = format!("geo{round}");
        let around = (rng.f64() * 340.0 - 170.0, rng.f64() * 160.0 - 80.0);
        let n = [20, 100, 400][round % 3];
        let (z, names) = populate(&mut r, &mut rng, &key, n, around);
        check_lookups(&mut r, &mut rng, &key, &z, &names);
        for _ in 0..150 {
            check_search(&mut r, &mut rng, &key, &z, around);
        }
    }
}

#[test]
fn odd_scores_decode_like_redis() {
    let Some(mut r) = Redis::start("odd_scores_decode_like_redis") else {
        return;
    };
    let scores = [
        "-1",
        "-0",
        "1e300",
        "-1e300",
        "9007199254740993",
        "1.5e19",
        "4503599627370495.5",
        "inf",
        "-inf",
        "4503599627370496",
    ];
    for (i, s) in scores.iter().enumerate() {
        let name = format!("m{i}");
        r.cmd(&["ZADD", "odd", s, &name]);
        let score: f64 = r
            .cmd(&["ZSCORE", "odd", &name])
            .text()
            .parse()
            .expect("score");
        let (lon, lat) = geo::lon_lat_of_score(score);
        let want = Reply::Array(Some(vec![Reply::Array(Some(vec![
            bulk(&geo::format_coordinate(lon)),
            bulk(&geo::format_coordinate(lat)),
        ]))]));
        assert_eq!(
            want,
            r.cmd(&["GEOPOS", "odd", &name]),
            "GEOPOS of score {s}"
        );
        let hash = Reply::Array(Some(vec![Reply::Bulk(Some(
            geo::geohash_string(score).to_vec(),
        ))]));
        assert_eq!(
            hash,
            r.cmd(&["GEOHASH", "odd", &name]),
            "GEOHASH of score {s}"
        );
    }
}
