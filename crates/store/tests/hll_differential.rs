//! Differential tests of `vireo_store::hll` against a real redis-server:
//! the same PFADD / PFCOUNT / PFMERGE / PFDEBUG steps applied to Redis and
//! to the module must give the same replies and byte-identical values
//! (read back from Redis with GET), corrupt values included. Each test
//! skips, with a note, when redis-server is not installed.

mod common;

use common::{Redis, Reply};
use vireo_store::hll::{self, HllError, Union};

/// The reply Redis gives for a module result.
fn as_reply<T>(r: Result<T, HllError>, ok: impl FnOnce(T) -> Reply) -> Reply {
    match r {
        Ok(v) => ok(v),
        Err(e) => Reply::Error(e.message().to_owned()),
    }
}

/// Random elements: short random bytes, the empty string now and then.
fn elements(rng: &mut fastrand::Rng, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| (0..rng.usize(..12)).map(|_| rng.u8(..)).collect())
        .collect()
}

/// PFADD to both sides (the module's value is `None` for a missing key);
/// the replies and the stored bytes must match.
fn pfadd_both(r: &mut Redis, key: &str, mine: &mut Option<Vec<u8>>, elems: &[Vec<u8>], max: usize) {
    let mut args: Vec<&[u8]> = vec![b"PFADD", key.as_bytes()];
    args.extend(elems.iter().map(Vec::as_slice));
    let theirs = r.cmd(&args);
    let ours = match mine {
        None => {
            *mine = Some(hll::pfadd_new(elems.iter().map(Vec::as_slice), max));
            Reply::Int(1)
        }
        Some(v) => as_reply(hll::pfadd(v, elems.iter().map(Vec::as_slice), max), |c| {
            Reply::Int(i64::from(c))
        }),
    };
    assert_eq!(ours, theirs, "PFADD reply, key {key}");
    assert_same_value(r, key, mine.as_deref());
}

/// The key's bytes in Redis equal `mine`.
fn assert_same_value(r: &mut Redis, key: &str, mine: Option<&[u8]>) {
    let theirs = r.cmd(&[b"GET", key.as_bytes()]);
    assert_eq!(
        Reply::Bulk(mine.map(<[u8]>::to_vec)),
        theirs,
        "value of {key}"
    );
}

/// PFCOUNT of one key on both sides; replies and cached bytes must match.
fn pfcount_both(r: &mut Redis, key: &str, mine: &mut [u8]) {
    let theirs = r.cmd(&[b"PFCOUNT", key.as_bytes()]);
    let ours = as_reply(hll::count(mine), |c| Reply::Int(c.cardinality as i64));
    assert_eq!(ours, theirs, "PFCOUNT {key}");
    assert_same_value(r, key, Some(mine));
}

#[test]
fn pfadd_and_pfcount_are_byte_identical() {
    let Some(mut r) = Redis::start("pfadd_and_pfcount_are_byte_identical") else {
        return;
    };
    let mut rng = fastrand::Rng::with_seed(0x26);
    for max in [3000usize, 0, 64, 500, 12000] {
        r.cmd(&["CONFIG", "SET", "hll-sparse-max-bytes", &max.to_string()]);
        for round in 0..6 {
            let key = format!("h{max}:{round}");
            let mut mine = None;
            let target = [5usize, 100, 600, 1500, 4000, 20_000][round];
            let mut added = 0;
            while added < target {
                let n = rng.usize(..=target.min(300));
                pfadd_both(&mut r, &key, &mut mine, &elements(&mut rng, n), max);
                added += n.max(1);
                if rng.bool() {
                    pfcount_both(&mut r, &key, mine.as_mut().expect("created"));
                }
            }
            pfcount_both(&mut r, &key, mine.as_mut().expect("created"));
        }
    }
}

/// Builds a key on both sides from `n` random elements, dense if asked.
fn build(r: &mut Redis, rng: &mut fastrand::Rng, key: &str, n: usize, dense: bool) -> Vec<u8> {
    let mut mine = None;
    pfadd_both(r, key, &mut mine, &elements(rng, n), 3000);
    let mut v = mine.expect("created");
    if dense {
        let converted = hll::to_dense(&mut v).expect("valid");
        assert_eq!(
            r.cmd(&[&b"PFDEBUG"[..], b"TODENSE", key.as_bytes()]),
            Reply::Int(i64::from(converted))
        );
        assert_same_value(r, key, Some(&v));
    }
    v
}

#[test]
fn pfmerge_and_union_count_match() {
    let Some(mut r) = Redis::start("pfmerge_and_union_count_match") else {
        return;
    };
    r.cmd(&["CONFIG", "SET", "hll-sparse-max-bytes", "3000"]);
    let mut rng = fastrand::Rng::with_seed(0x4d);
    for round in 0..60 {
        let names: Vec<String> = (0..3).map(|i| format!("m{round}:{i}")).collect();
        let values: Vec<Vec<u8>> = names
            .iter()
            .map(|k| {
                let n = [0, 3, 40, 400, 3000][rng.usize(..5)];
                let dense = rng.u8(..4) == 0;
                build(&mut r, &mut rng, k, n, dense)
            })
            .collect();
        let mut union = Union::new();
        for v in &values {
            union.merge(v).expect("valid");
        }
        let mut args = vec!["PFCOUNT"];
        args.extend(names.iter().map(String::as_str));
        args.push("missing-key");
        assert_eq!(r.cmd(&args), Reply::Int(union.cardinality() as i64));
        // PFMERGE into a missing key, then into the first source.
        let dest = format!("d{round}");
        let mut args = vec!["PFMERGE", dest.as_str()];
        args.extend(names.iter().map(String::as_str));
        assert_eq!(r.cmd(&args), Reply::Status("OK".into()));
        let mut d = hll::new_hll();
        union.store_into(&mut d, 3000).expect("store");
        assert_same_value(&mut r, &dest, Some(&d));
        let mut args = vec!["PFMERGE"];
        args.extend(names.iter().map(String::as_str));
        r.cmd(&args);
        let mut first = values[0].clone();
        union.store_into(&mut first, 3000).expect("store");
        assert_same_value(&mut r, &names[0], Some(&first));
    }
}

#[test]
fn pfdebug_building_blocks_match() {
    let Some(mut r) = Redis::start("pfdebug_building_blocks_match") else {
        return;
    };
    let mut rng = fastrand::Rng::with_seed(0xdb);
    for (i, n) in [0usize, 1, 10, 100, 1000, 5000].into_iter().enumerate() {
        let key = format!("g{i}");
        let mut v = build(&mut r, &mut rng, &key, n, false);
        let decoded = r.cmd(&[&b"PFDEBUG"[..], b"DECODE", key.as_bytes()]);
        assert_eq!(
            as_reply(hll::decode_sparse(&v), |t| Reply::Bulk(Some(
                t.into_bytes()
            ))),
            decoded
        );
        let theirs = r.cmd(&[&b"PFDEBUG"[..], b"GETREG", key.as_bytes()]);
        hll::to_dense(&mut v).expect("valid");
        let ours = hll::register_values(&v).expect("valid");
        let ours = Reply::Array(Some(
            ours.into_iter().map(|x| Reply::Int(i64::from(x))).collect(),
        ));
        assert_eq!(ours, theirs);
        assert_same_value(&mut r, &key, Some(&v));
        let enc = r.cmd(&[&b"PFDEBUG"[..], b"ENCODING", key.as_bytes()]);
        assert_eq!(
            Reply::Status(hll::validate(&v).expect("valid").name().into()),
            enc
        );
    }
}

/// Applies the same random damage to a real HLL on both sides.
fn corrupt(rng: &mut fastrand::Rng, v: &mut Vec<u8>) {
    match rng.u8(..6) {
        0 => v.extend((0..rng.usize(1..8)).map(|_| rng.u8(..))),
        1 => v.truncate(rng.usize(hll::HEADER_LEN..=v.len())),
        _ => {
            for _ in 0..rng.usize(1..5) {
                let pos = rng.usize(hll::HEADER_LEN - 2..v.len());
                v[pos] = rng.u8(..);
            }
        }
    }
}

#[test]
fn corrupt_values_give_the_same_answers() {
    let Some(mut r) = Redis::start("corrupt_values_give_the_same_answers") else {
        return;
    };
    let mut rng = fastrand::Rng::with_seed(0xbad);
    for round in 0..400 {
        let key = format!("c{round}");
        let n = [1usize, 20, 200, 1200][rng.usize(..4)];
        let dense = rng.u8(..5) == 0;
        let mut v = build(&mut r, &mut rng, &key, n, dense);
        corrupt(&mut rng, &mut v);
        r.cmd(&[b"SET", key.as_bytes(), &v]);
        let decoded = r.cmd(&[&b"PFDEBUG"[..], b"DECODE", key.as_bytes()]);
        assert_eq!(
            as_reply(hll::decode_sparse(&v), |t| Reply::Bulk(Some(
                t.into_bytes()
            ))),
            decoded
        );
        let mut u = Union::new();
        let theirs = r.cmd(&[b"PFCOUNT", key.as_bytes(), b"nokey"]);
        assert_eq!(
            as_reply(u.merge(&v), |()| Reply::Int(u.cardinality() as i64)),
            theirs
        );
        match rng.u8(..3) {
            0 => pfcount_both(&mut r, &key, &mut v),
            1 => {
                let mut mine = Some(v);
                pfadd_both(&mut r, &key, &mut mine, &elements(&mut rng, 30), 3000);
            }
            _ => {
                let theirs = r.cmd(&[&b"PFDEBUG"[..], b"TODENSE", key.as_bytes()]);
                assert_eq!(
                    as_reply(hll::to_dense(&mut v), |c| Reply::Int(i64::from(c))),
                    theirs
                );
                assert_same_value(&mut r, &key, Some(&v));
            }
        }
    }
}
