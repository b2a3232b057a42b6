//! GEO commands through the real server: positions stored as 52-bit
//! geohash scores, Redis's printed distances and coordinates, the search
//! options, STORE/STOREDIST into keys of any shard, and the command table's
//! key reporting.

mod common;

use common::{err, ok, Server};
use redis::Value;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn sicily(con: &mut redis::Connection) {
    let added = ok(
        con,
        &[
            "GEOADD",
            "Sicily",
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania",
        ],
    );
    assert_eq!(added, Value::Int(2));
}

#[test]
fn positions_hashes_and_distances_print_as_redis() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    sicily(&mut con);
    assert_eq!(
        ok(&mut con, &["TYPE", "Sicily"]),
        Value::SimpleString("zset".into())
    );
    assert_eq!(
        ok(&mut con, &["ZSCORE", "Sicily", "Palermo"]),
        bulk("3479099956230698")
    );
    assert_eq!(
        ok(&mut con, &["GEODIST", "Sicily", "Palermo", "Catania"]),
        bulk("166274.1516")
    );
    assert_eq!(
        ok(&mut con, &["GEODIST", "Sicily", "Palermo", "Catania", "KM"]),
        bulk("166.2742")
    );
    assert_eq!(
        ok(&mut con, &["GEODIST", "Sicily", "Palermo", "nope"]),
        Value::Nil
    );
    assert_eq!(
        ok(&mut con, &["GEOHASH", "Sicily", "Palermo", "nope"]),
        Value::Array(vec![bulk("sqc8b49rny0"), Value::Nil])
    );
    assert_eq!(
        ok(&mut con, &["GEOPOS", "Sicily", "Palermo"]),
        Value::Array(vec![Value::Array(vec![
            bulk("13.36138933897018433"),
            bulk("38.11555639549629859")
        ])])
    );
    assert_eq!(
        err(&mut con, &["GEODIST", "Sicily", "a", "b", "parsec"]),
        "ERR unsupported unit provided. please use M, KM, FT, MI"
    );
}

#[test]
fn geoadd_options_and_errors() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    sicily(&mut con);
    let moved = [
        "GEOADD", "Sicily", "CH", "XX", "13.5", "38.1", "Palermo", "1", "1", "New",
    ];
    assert_eq!(ok(&mut con, &moved), Value::Int(1), "XX updates only");
    assert_eq!(ok(&mut con, &["ZCARD", "Sicily"]), Value::Int(2));
    let nx = [
        "GEOADD", "Sicily", "NX", "1", "1", "Palermo", "1", "1", "New",
    ];
    assert_eq!(ok(&mut con, &nx), Value::Int(1));
    assert_eq!(
        err(&mut con, &["GEOADD", "Sicily", "NX", "XX", "1", "1", "m"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut con, &["GEOADD", "Sicily", "1", "1", "m", "2"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut con, &["GEOADD", "Sicily", "181", "10", "m"]),
        "ERR invalid longitude,latitude pair 181.000000,10.000000"
    );
    assert_eq!(
        err(&mut con, &["GEOADD", "Sicily", "x", "10", "m"]),
        "ERR value is not a valid float"
    );
    ok(&mut con, &["SET", "str", "v"]);
    assert!(err(&mut con, &["GEOADD", "str", "1", "1", "m"]).starts_with("WRONGTYPE"));
}

#[test]
fn searches_sort_count_and_decorate() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    sicily(&mut con);
    let near = [
        "GEORADIUS",
        "Sicily",
        "15",
        "37",
        "200",
        "km",
        "WITHDIST",
        "ASC",
    ];
    assert_eq!(
        ok(&mut con, &near),
        Value::Array(vec![
            Value::Array(vec![bulk("Catania"), bulk("56.4413")]),
            Value::Array(vec![bulk("Palermo"), bulk("190.4424")]),
        ])
    );
    let far_first = [
        "GEOSEARCH",
        "Sicily",
        "FROMLONLAT",
        "15",
        "37",
        "BYBOX",
        "400",
        "400",
        "km",
        "DESC",
        "COUNT",
        "1",
    ];
    assert_eq!(
        ok(&mut con, &far_first),
        Value::Array(vec![bulk("Palermo")])
    );
    let hashed = [
        "GEORADIUSBYMEMBER_RO",
        "Sicily",
        "Palermo",
        "1",
        "m",
        "WITHHASH",
    ];
    assert_eq!(
        ok(&mut con, &hashed),
        Value::Array(vec![Value::Array(vec![
            bulk("Palermo"),
            Value::Int(3479099956230698)
        ])])
    );
    assert_eq!(
        err(
            &mut con,
            &[
                "GEOSEARCH",
                "Sicily",
                "BYRADIUS",
                "1",
                "km",
                "ASC",
                "WITHHASH"
            ]
        ),
        "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for GEOSEARCH"
    );
    assert_eq!(
        err(
            &mut con,
            &[
                "GEORADIUS_RO",
                "Sicily",
                "15",
                "37",
                "1",
                "km",
                "STORE",
                "x"
            ]
        ),
        "ERR syntax error"
    );
    assert_eq!(
        err(
            &mut con,
            &["GEORADIUS", "Sicily", "15", "37", "1", "km", "COUNT", "0"]
        ),
        "ERR COUNT must be > 0"
    );
    assert_eq!(
        ok(
            &mut con,
            &[
                "GEOSEARCH",
                "nokey",
                "FROMMEMBER",
                "x",
                "BYRADIUS",
                "1",
                "km"
            ]
        ),
        Value::Array(vec![])
    );
}

#[test]
fn stored_results_land_in_any_shard() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    sicily(&mut con);
    // Many destinations, so some live in other shards than the source: the
    // command must have locked them.
    for i in 0..40 {
        let dst = format!("dst:{i}");
        ok(&mut con, &["SET", &dst, "old", "EX", "100"]);
        let cmd = if i % 2 == 0 {
            vec![
                "GEORADIUS",
                "Sicily",
                "15",
                "37",
                "200",
                "km",
                "STOREDIST",
                &dst,
            ]
        } else {
            vec![
                "GEOSEARCHSTORE",
                &dst,
                "Sicily",
                "FROMMEMBER",
                "Catania",
                "BYRADIUS",
                "200",
                "km",
            ]
        };
        assert_eq!(ok(&mut con, &cmd), Value::Int(2), "{cmd:?}");
        assert_eq!(
            ok(&mut con, &["TYPE", &dst]),
            Value::SimpleString("zset".into())
        );
        assert_eq!(
            ok(&mut con, &["TTL", &dst]),
            Value::Int(-1),
            "a stored result has no TTL"
        );
    }
    assert_eq!(
        ok(&mut con, &["ZSCORE", "dst:0", "Catania"]),
        bulk("56.441257870158204")
    );
    assert_eq!(
        ok(&mut con, &["ZSCORE", "dst:1", "Catania"]),
        bulk("3479447370796909")
    );
    // Nothing found (or no source): the destination is deleted.
    let none = [
        "GEORADIUSBYMEMBER",
        "Sicily",
        "Palermo",
        "1",
        "m",
        "STORE",
        "dst:2",
    ];
    assert_eq!(
        ok(&mut con, &none),
        Value::Int(1),
        "Palermo itself is found"
    );
    let nothing = [
        "GEORADIUS",
        "nokey",
        "15",
        "37",
        "1",
        "km",
        "STORE",
        "dst:2",
    ];
    assert_eq!(ok(&mut con, &nothing), Value::Int(0));
    assert_eq!(ok(&mut con, &["EXISTS", "dst:2"]), Value::Int(0));
    assert_eq!(
        err(
            &mut con,
            &[
                "GEOSEARCHSTORE",
                "d",
                "Sicily",
                "FROMLONLAT",
                "15",
                "37",
                "BYRADIUS",
                "1",
                "km",
                "WITHDIST"
            ]
        ),
        "ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
    );
}

#[test]
fn command_reports_the_store_keys() {
    let srv = Server::start(&[]);
    let mut con = srv.conn();
    let keys = ok(
        &mut con,
        &[
            "COMMAND",
            "GETKEYS",
            "GEORADIUS",
            "src",
            "1",
            "2",
            "3",
            "km",
            "STORE",
            "dst",
        ],
    );
    assert_eq!(keys, Value::Array(vec![bulk("src"), bulk("dst")]));
    let keys = ok(
        &mut con,
        &[
            "COMMAND",
            "GETKEYS",
            "GEOSEARCHSTORE",
            "dst",
            "src",
            "FROMMEMBER",
            "m",
            "BYRADIUS",
            "1",
            "m",
        ],
    );
    assert_eq!(keys, Value::Array(vec![bulk("dst"), bulk("src")]));
}
