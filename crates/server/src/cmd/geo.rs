//! GEO commands (Redis's `geo.c`): GEOADD, GEODIST, GEOHASH, GEOPOS, the
//! GEORADIUS family (and its `_RO` forms), GEOSEARCH and GEOSEARCHSTORE.
//!
//! A GEO set is a sorted set whose scores are 52-bit geohashes; the math
//! (scores, distances, search areas, number formats) is
//! [`vireo_store::geo`]'s. This file parses arguments and replies exactly
//! as Redis 7.0 does, errors and their order included.
//!
//! GEOADD works as Redis's: it rewrites itself into `ZADD key [options]
//! score member ...` and runs the sorted-set family's ZADD through the
//! command table, then propagates that ZADD. The searches share one parser
//! and one runner ([`search_generic`], Redis's `georadiusGeneric`); their
//! STORE/STOREDIST results are stored through
//! [`super::shared::store_zset_result`] and propagate as executed.

use vireo_resp::number::{parse_f64, parse_i64};
use vireo_resp::{Args, OwnedArgs, Protocol, ReplyBuf};
use vireo_store::geo::{self, Point, Shape, ShapeKind, Sort, Unit, UNIT_ERROR};
use vireo_store::zset::ZSet;
use vireo_store::{Keys, ValueRef};

use super::shared::store_zset_result;
use super::{errors, flags::*, is, spec, table, text, CommandSpec, Ctx, KeySpec, KEY1};

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    spec("geoadd", -5, WRITE | DENYOOM, KEY1, geoadd),
    spec("geodist", -4, READONLY, KEY1, geodist),
    spec("geohash", -2, READONLY, KEY1, geohash),
    spec("geopos", -2, READONLY, KEY1, geopos),
    spec("georadius", -6, WRITE | DENYOOM, RADIUS_KEYS, georadius),
    spec("georadius_ro", -6, READONLY, KEY1, georadius_ro),
    spec(
        "georadiusbymember",
        -5,
        WRITE | DENYOOM,
        RADIUS_KEYS,
        georadiusbymember,
    ),
    spec(
        "georadiusbymember_ro",
        -5,
        READONLY,
        KEY1,
        georadiusbymember_ro,
    ),
    spec("geosearch", -7, READONLY, KEY1, geosearch),
    spec(
        "geosearchstore",
        -8,
        WRITE | DENYOOM,
        KeySpec::Range {
            first: 1,
            last: 2,
            step: 1,
        },
        geosearchstore,
    ),
];

/// GEORADIUS and GEORADIUSBYMEMBER: the source key and, with STORE or
/// STOREDIST, the destination (COMMAND reports Redis's triple 1 1 1).
const RADIUS_KEYS: KeySpec = KeySpec::Custom {
    first: 1,
    last: 1,
    step: 1,
    find: radius_keys,
};

/// The keys a GEORADIUS-style command may touch: the source and every
/// argument after a STORE or STOREDIST word (the parser takes one of
/// them, so locking them all covers whichever it takes).
fn radius_keys(args: Args<'_>) -> Vec<usize> {
    let mut keys = vec![1];
    for i in 2..args.len().saturating_sub(1) {
        let arg = args.get(i);
        if is(arg, "store") || is(arg, "storedist") {
            keys.push(i + 1);
        }
    }
    keys
}

/// The key exists but does not hold a sorted set.
struct WrongType;

/// The sorted set at `key` for reading (counting a keyspace hit or miss).
fn read_zset<'k>(
    keys: &'k mut Keys<'_>,
    db: usize,
    key: &[u8],
) -> Result<Option<&'k ZSet>, WrongType> {
    match keys.get_read(db, key) {
        None => Ok(None),
        Some(e) => match e.value() {
            ValueRef::ZSet(z) => Ok(Some(z)),
            _ => Err(WrongType),
        },
    }
}

/// A float argument as Redis's `getDoubleFromObjectOrReply` parses it;
/// `error` is the reply when it is not one.
fn float_arg(out: &mut ReplyBuf, arg: &[u8], error: &str) -> Option<f64> {
    let v = parse_f64(arg);
    if v.is_none() {
        out.error(error);
    }
    v
}

/// A longitude and latitude pair (Redis's `extractLongLatOrReply`).
fn lon_lat_arg(out: &mut ReplyBuf, lon: &[u8], lat: &[u8]) -> Option<(f64, f64)> {
    let lon = float_arg(out, lon, errors::NOT_FLOAT)?;
    let lat = float_arg(out, lat, errors::NOT_FLOAT)?;
    match geo::check_lon_lat(lon, lat) {
        Ok(()) => Some((lon, lat)),
        Err(msg) => {
            out.error(&msg);
            None
        }
    }
}

/// A unit argument: meters per unit.
fn unit_arg(out: &mut ReplyBuf, arg: &[u8]) -> Option<f64> {
    match Unit::parse(arg) {
        Some(unit) => Some(unit.to_meters()),
        None => {
            out.error(UNIT_ERROR);
            None
        }
    }
}

/// `radius unit` (Redis's `extractDistanceOrReply`): the radius and the
/// meters per unit.
fn radius_arg(out: &mut ReplyBuf, radius: &[u8], unit: &[u8]) -> Option<(f64, f64)> {
    let r = float_arg(out, radius, "ERR need numeric radius")?;
    if r < 0.0 {
        out.error("ERR radius cannot be negative");
        return None;
    }
    Some((r, unit_arg(out, unit)?))
}

/// `width height unit` (Redis's `extractBoxOrReply`).
fn box_arg(out: &mut ReplyBuf, args: [&[u8]; 3]) -> Option<(ShapeKind, f64)> {
    let width = float_arg(out, args[0], "ERR need numeric width")?;
    let height = float_arg(out, args[1], "ERR need numeric height")?;
    if width < 0.0 || height < 0.0 {
        out.error("ERR height or width cannot be negative");
        return None;
    }
    Some((ShapeKind::Box { width, height }, unit_arg(out, args[2])?))
}

/// The decoded position of a member, or None if it is not in the set.
fn member_position(z: &ZSet, member: &[u8]) -> Option<(f64, f64)> {
    z.score(member).map(geo::lon_lat_of_score)
}

/// Replies a coordinate as Redis's `addReplyHumanLongDouble`: a bulk
/// string in RESP2, a double in RESP3, both in `%.17Lf` form trimmed.
fn reply_coordinate(out: &mut ReplyBuf, x: f64) {
    let text = geo::format_coordinate(x);
    if out.protocol() == Protocol::Resp3 {
        out.raw(format!(",{text}\r\n").as_bytes());
    } else {
        out.bulk(text.as_bytes());
    }
}

/// Replies a distance as Redis's `addReplyDoubleDistance` (a bulk string
/// with four decimals in both protocols).
fn reply_distance(out: &mut ReplyBuf, meters: f64) {
    out.bulk(geo::format_distance(meters).as_bytes());
}

// ---------------------------------------------------------------- GEOADD

/// GEOADD key [NX|XX] [CH] longitude latitude member [...]: adds or moves
/// members; replies as ZADD does (the number added, or changed with CH).
fn geoadd(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let (mut nx, mut xx) = (false, false);
    let mut first = 2;
    while first < args.len() {
        let opt = args.get(first);
        if is(opt, "nx") {
            nx = true;
        } else if is(opt, "xx") {
            xx = true;
        } else if !is(opt, "ch") {
            break;
        }
        first += 1;
    }
    if !(args.len() - first).is_multiple_of(3) || (nx && xx) {
        return ctx.out.error(errors::SYNTAX);
    }
    let mut zadd = OwnedArgs::new();
    zadd.push(b"zadd");
    for opt in args.iter().take(first).skip(1) {
        zadd.push(opt);
    }
    let mut digits = itoa::Buffer::new();
    for at in (first..args.len()).step_by(3) {
        let Some((lon, lat)) = lon_lat_arg(ctx.out, args.get(at), args.get(at + 1)) else {
            return;
        };
        let score = match geo::score_of(lon, lat) {
            Ok(score) => score,
            Err(msg) => return ctx.out.error(&msg),
        };
        zadd.push(digits.format(score).as_bytes());
        zadd.push(args.get(at + 2));
    }
    run_zadd(ctx, &zadd);
}

/// Runs `zadd` (a ZADD command line) through the command table in place of
/// the running command, and propagates it if it changed anything.
fn run_zadd(ctx: &mut Ctx<'_>, zadd: &OwnedArgs) {
    let Some(cmd) = table().lookup(b"zadd") else {
        return ctx.out.error("ERR unknown command 'zadd'");
    };
    let dirty = ctx.dirty;
    (cmd.spec.handler)(ctx, zadd.as_args());
    if ctx.dirty > dirty {
        let line: Vec<&[u8]> = zadd.as_args().iter().collect();
        ctx.propagate(&line);
    }
}

// ------------------------------------------------- GEODIST GEOHASH GEOPOS

/// GEODIST key member1 member2 [unit]: the distance between two members
/// (null if either is missing).
fn geodist(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let to_meters = match args.len() {
        4 => 1.0,
        5 => match unit_arg(ctx.out, args.get(4)) {
            Some(m) => m,
            None => return,
        },
        _ => return ctx.out.error(errors::SYNTAX),
    };
    let z = match read_zset(&mut ctx.keys, ctx.db, args.get(1)) {
        Ok(Some(z)) => z,
        Ok(None) => return ctx.out.null(),
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
    };
    match (
        member_position(z, args.get(2)),
        member_position(z, args.get(3)),
    ) {
        (Some((lon1, lat1)), Some((lon2, lat2))) => {
            reply_distance(ctx.out, geo::distance(lon1, lat1, lon2, lat2) / to_meters)
        }
        _ => ctx.out.null(),
    }
}

/// GEOHASH key [member ...]: each member's 11-character geohash (null for
/// missing members).
fn geohash(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let z = match read_zset(&mut ctx.keys, ctx.db, args.get(1)) {
        Ok(z) => z,
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
    };
    ctx.out.array(args.len() - 2);
    for member in args.iter().skip(2) {
        match z.and_then(|z| z.score(member)) {
            Some(score) => ctx.out.bulk(&geo::geohash_string(score)),
            None => ctx.out.null(),
        }
    }
}

/// GEOPOS key [member ...]: each member's [longitude, latitude] (a null
/// array for missing members).
fn geopos(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let z = match read_zset(&mut ctx.keys, ctx.db, args.get(1)) {
        Ok(z) => z,
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
    };
    ctx.out.array(args.len() - 2);
    for member in args.iter().skip(2) {
        match z.and_then(|z| member_position(z, member)) {
            Some((lon, lat)) => {
                ctx.out.array(2);
                reply_coordinate(ctx.out, lon);
                reply_coordinate(ctx.out, lat);
            }
            None => ctx.out.null_array(),
        }
    }
}

// ------------------------------------------------------------- searches

/// Which search command runs (Redis's `RADIUS_COORDS`, `RADIUS_MEMBER`,
/// `GEOSEARCH` and `GEOSEARCHSTORE` flags).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// GEORADIUS[_RO] key lon lat radius unit ...
    Coords,
    /// GEORADIUSBYMEMBER[_RO] key member radius unit ...
    Member,
    /// GEOSEARCH key ...
    Search,
    /// GEOSEARCHSTORE dest src ...
    SearchStore,
}

/// A search command: its form and whether STORE/STOREDIST are refused
/// (the `_RO` forms).
#[derive(Clone, Copy)]
struct Mode {
    form: Form,
    no_store: bool,
}

impl Mode {
    /// GEOSEARCH or GEOSEARCHSTORE.
    fn is_search(self) -> bool {
        matches!(self.form, Form::Search | Form::SearchStore)
    }
}

/// A parsed search request.
struct Request<'a> {
    /// Centre (None only when the source key is missing, where Redis never
    /// computes it).
    center: Option<(f64, f64)>,
    /// Shape and meters per unit (None likewise).
    kind: Option<(ShapeKind, f64)>,
    store: Option<&'a [u8]>,
    store_dist: bool,
    with_dist: bool,
    with_hash: bool,
    with_coord: bool,
    any: bool,
    sort: Sort,
    /// COUNT, 0 for none.
    count: usize,
}

fn georadius(ctx: &mut Ctx<'_>, args: Args<'_>) {
    search_generic(ctx, args, Form::Coords, false);
}

fn georadius_ro(ctx: &mut Ctx<'_>, args: Args<'_>) {
    search_generic(ctx, args, Form::Coords, true);
}

fn georadiusbymember(ctx: &mut Ctx<'_>, args: Args<'_>) {
    search_generic(ctx, args, Form::Member, false);
}

fn georadiusbymember_ro(ctx: &mut Ctx<'_>, args: Args<'_>) {
    search_generic(ctx, args, Form::Member, true);
}

fn geosearch(ctx: &mut Ctx<'_>, args: Args<'_>) {
    search_generic(ctx, args, Form::Search, false);
}

fn geosearchstore(ctx: &mut Ctx<'_>, args: Args<'_>) {
    search_generic(ctx, args, Form::SearchStore, false);
}

/// Redis's `georadiusGeneric`: looks the source up, parses the request
/// (replying the first error in Redis's order), searches, then replies the
/// points or stores them.
fn search_generic(ctx: &mut Ctx<'_>, args: Args<'_>, form: Form, no_store: bool) {
    let mode = Mode { form, no_store };
    let src = args.get(if form == Form::SearchStore { 2 } else { 1 });
    let z = match read_zset(&mut ctx.keys, ctx.db, src) {
        Ok(z) => z,
        Err(WrongType) => return ctx.out.error(errors::WRONGTYPE),
    };
    let Some(req) = parse_request(ctx.out, args, mode, z) else {
        return;
    };
    let points = match (z, req.center, req.kind) {
        (Some(z), Some((lon, lat)), Some((kind, to_meters))) => {
            let shape = Shape {
                lon,
                lat,
                kind,
                to_meters,
            };
            Some(run_search(z, &shape, &req))
        }
        _ => None,
    };
    let to_meters = req.kind.map_or(1.0, |(_, m)| m);
    match (req.store, points) {
        (Some(dst), points) => {
            let items = points
                .unwrap_or_default()
                .into_iter()
                .map(|p| {
                    let score = if req.store_dist {
                        p.dist / to_meters
                    } else {
                        p.score
                    };
                    (p.member, score)
                })
                .collect();
            let event = if form == Form::SearchStore {
                "geosearchstore"
            } else {
                "georadiusstore"
            };
            store_zset_result(ctx, dst, items, event);
        }
        (None, points) => reply_points(ctx.out, &points.unwrap_or_default(), &req, to_meters),
    }
}

/// Finds, orders and truncates the points of a search.
fn run_search(z: &ZSet, shape: &Shape, req: &Request<'_>) -> Vec<Point> {
    // COUNT without ASC/DESC (and without ANY) sorts nearest first, to
    // return the closest ones.
    let sort = if req.count != 0 && req.sort == Sort::Unsorted && !req.any {
        Sort::Asc
    } else {
        req.sort
    };
    let limit = if req.any { req.count } else { 0 };
    let mut points = geo::search(z, shape, limit);
    geo::sort_points(&mut points, sort, req.count);
    points
}

/// Replies found points: bare members, or with WITHDIST, WITHHASH or
/// WITHCOORD each as `[member, dist?, hash?, [lon, lat]?]`.
fn reply_points(out: &mut ReplyBuf, points: &[Point], req: &Request<'_>, to_meters: f64) {
    let extras = [req.with_dist, req.with_hash, req.with_coord]
        .iter()
        .filter(|&&on| on)
        .count();
    out.array(points.len());
    for p in points {
        if extras > 0 {
            out.array(extras + 1);
        }
        out.bulk(&p.member);
        if req.with_dist {
            reply_distance(out, p.dist / to_meters);
        }
        if req.with_hash {
            // C's (long long) of the score: geohashes are below 2^52.
            out.int(p.score as i64);
        }
        if req.with_coord {
            out.array(2);
            reply_coordinate(out, p.lon);
            reply_coordinate(out, p.lat);
        }
    }
}

/// Parses a search's arguments as `georadiusGeneric` does, replying the
/// first error; `z` is the source set (positions of members come from it,
/// and nothing about the centre or shape is checked for GEORADIUSBYMEMBER
/// on a missing key, as in Redis).
fn parse_request<'a>(
    out: &mut ReplyBuf,
    args: Args<'a>,
    mode: Mode,
    z: Option<&ZSet>,
) -> Option<Request<'a>> {
    let mut req = Request {
        center: None,
        kind: None,
        store: None,
        store_dist: false,
        with_dist: false,
        with_hash: false,
        with_coord: false,
        any: false,
        sort: Sort::Unsorted,
        count: 0,
    };
    let base = match mode.form {
        Form::Coords => {
            req.center = Some(lon_lat_arg(out, args.get(2), args.get(3))?);
            req.kind = Some(radius_kind(out, args.get(4), args.get(5))?);
            6
        }
        Form::Member => {
            if let Some(z) = z {
                let Some(center) = member_position(z, args.get(2)) else {
                    out.error(NO_MEMBER);
                    return None;
                };
                req.center = Some(center);
                req.kind = Some(radius_kind(out, args.get(3), args.get(4))?);
            }
            5
        }
        Form::Search => 2,
        Form::SearchStore => {
            req.store = Some(args.get(1));
            3
        }
    };
    let (from_member, from_lonlat, by_radius, by_box) =
        parse_options(out, args, base, mode, z, &mut req)?;
    check_request(
        out,
        args,
        mode,
        &req,
        [from_member || from_lonlat, by_radius || by_box],
    )?;
    Some(req)
}

/// The reply when the centre member is not in the set.
const NO_MEMBER: &str = "ERR could not decode requested zset member";

/// `radius unit` as a circle shape.
fn radius_kind(out: &mut ReplyBuf, radius: &[u8], unit: &[u8]) -> Option<(ShapeKind, f64)> {
    let (r, to_meters) = radius_arg(out, radius, unit)?;
    Some((ShapeKind::Radius(r), to_meters))
}

/// Parses the optional arguments from `base` on into `req`; returns which
/// of FROMMEMBER, FROMLONLAT, BYRADIUS and BYBOX were given.
fn parse_options<'a>(
    out: &mut ReplyBuf,
    args: Args<'a>,
    base: usize,
    mode: Mode,
    z: Option<&ZSet>,
    req: &mut Request<'a>,
) -> Option<(bool, bool, bool, bool)> {
    let (mut from_member, mut from_lonlat, mut by_radius, mut by_box) =
        (false, false, false, false);
    let search = mode.is_search();
    let store_ok = !mode.no_store && !search;
    let mut i = base;
    while i < args.len() {
        let arg = args.get(i);
        // Arguments left after this one.
        let left = args.len() - i - 1;
        if is(arg, "withdist") {
            req.with_dist = true;
        } else if is(arg, "withhash") {
            req.with_hash = true;
        } else if is(arg, "withcoord") {
            req.with_coord = true;
        } else if is(arg, "any") {
            req.any = true;
        } else if is(arg, "asc") {
            req.sort = Sort::Asc;
        } else if is(arg, "desc") {
            req.sort = Sort::Desc;
        } else if is(arg, "count") && left >= 1 {
            let Some(count) = parse_i64(args.get(i + 1)) else {
                out.error(errors::NOT_INT);
                return None;
            };
            if count <= 0 {
                out.error("ERR COUNT must be > 0");
                return None;
            }
            req.count = usize::try_from(count).unwrap_or(usize::MAX);
            i += 1;
        } else if (is(arg, "store") || is(arg, "storedist")) && left >= 1 && store_ok {
            req.store = Some(args.get(i + 1));
            req.store_dist = is(arg, "storedist");
            i += 1;
        } else if is(arg, "storedist") && mode.form == Form::SearchStore {
            req.store_dist = true;
        } else if is(arg, "frommember") && left >= 1 && search && !from_lonlat {
            // With no source key the member is not looked up: the missing
            // key's reply comes once the arguments are parsed.
            if let Some(z) = z {
                let Some(center) = member_position(z, args.get(i + 1)) else {
                    out.error(NO_MEMBER);
                    return None;
                };
                req.center = Some(center);
            }
            from_member = true;
            i += 1;
        } else if is(arg, "fromlonlat") && left >= 2 && search && !from_member {
            req.center = Some(lon_lat_arg(out, args.get(i + 1), args.get(i + 2))?);
            from_lonlat = true;
            i += 2;
        } else if is(arg, "byradius") && left >= 2 && search && !by_box {
            req.kind = Some(radius_kind(out, args.get(i + 1), args.get(i + 2))?);
            by_radius = true;
            i += 2;
        } else if is(arg, "bybox") && left >= 3 && search && !by_radius {
            req.kind = Some(box_arg(
                out,
                [args.get(i + 1), args.get(i + 2), args.get(i + 3)],
            )?);
            by_box = true;
            i += 3;
        } else {
            out.error(errors::SYNTAX);
            return None;
        }
        i += 1;
    }
    Some((from_member, from_lonlat, by_radius, by_box))
}

/// The checks Redis makes once the options are parsed, in its order.
/// `given` says whether a centre and a shape were given (GEOSEARCH only).
fn check_request(
    out: &mut ReplyBuf,
    args: Args<'_>,
    mode: Mode,
    req: &Request<'_>,
    given: [bool; 2],
) -> Option<()> {
    if req.store.is_some() && (req.with_dist || req.with_hash || req.with_coord) {
        let what = if mode.form == Form::SearchStore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        out.error(&format!(
            "ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        ));
        return None;
    }
    let name = text(args.get(0));
    if mode.is_search() && !given[0] {
        out.error(&format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        ));
        return None;
    }
    if mode.is_search() && !given[1] {
        out.error(&format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        ));
        return None;
    }
    if req.any && req.count == 0 {
        out.error("ERR the ANY argument requires COUNT argument");
        return None;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args_of(line: &str) -> OwnedArgs {
        OwnedArgs::from_slices(line.split(' '))
    }

    #[test]
    fn radius_keys_include_every_store_target() {
        let a = args_of("georadius k 1 2 3 m store d1 storedist d2");
        assert_eq!(radius_keys(a.as_args()), [1, 7, 9]);
        // A trailing STORE with no key names nothing.
        let a = args_of("georadiusbymember k m 3 km store");
        assert_eq!(radius_keys(a.as_args()), [1]);
    }

    #[test]
    fn request_errors_come_in_redis_order() {
        let parse = |line: &str, form: Form| {
            let a = args_of(line);
            let mut out = ReplyBuf::new(Protocol::Resp2);
            let mode = Mode {
                form,
                no_store: false,
            };
            let ok = parse_request(&mut out, a.as_args(), mode, None).is_some();
            (ok, String::from_utf8_lossy(out.as_bytes()).into_owned())
        };
        let (ok, reply) = parse("geosearch k bybox 1 2 m withdist", Form::Search);
        assert!(!ok);
        assert!(reply.contains("FROMMEMBER or FROMLONLAT"), "{reply}");
        let (_, reply) = parse("geosearch k fromlonlat 1 2 byradius -1 m", Form::Search);
        assert!(reply.contains("radius cannot be negative"), "{reply}");
        let (_, reply) = parse("georadius k 1 2 3 m any", Form::Coords);
        assert!(reply.contains("ANY argument requires COUNT"), "{reply}");
        let (_, reply) = parse("georadius k 1 2 3 m store d withhash", Form::Coords);
        assert!(reply.contains("STORE option in GEORADIUS"), "{reply}");
        // Missing key: GEORADIUSBYMEMBER checks neither radius nor unit.
        let (ok, _) = parse("georadiusbymember k m -5 parsecs", Form::Member);
        assert!(ok);
    }
}
