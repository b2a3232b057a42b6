//! Differential test of scripts against a real redis-server: random Lua
//! scripts, each a short sequence of `redis.call`/`redis.pcall` over the
//! string, list, hash, set and sorted-set commands (on declared and
//! undeclared keys), returned as tables, status/error replies or values,
//! run by EVAL, EVALSHA, EVAL_RO, FCALL and FCALL_RO; plus the SCRIPT
//! and FUNCTION commands around them. Replies must be byte-for-byte equal.

mod common;

use common::diff::{self, b};

/// Draws one `redis.call(...)` expression.
fn call(rng: &mut fastrand::Rng) -> String {
    let key = |rng: &mut fastrand::Rng| match rng.u8(..4) {
        0 => "KEYS[1]".to_owned(),
        1 => "KEYS[2]".to_owned(),
        _ => format!("'u{}'", rng.u8(..4)),
    };
    let k = key(rng);
    let v = || format!("'{}'", fastrand::u8(..10));
    // Numbers as arguments go through Lua's own number-to-string rules,
    // tiny ones included (1e-20 once read as 0).
    let number = ["ARGV[1]", "1e-20", "0.1 + 0.2", "3", "-2.5e300", "1/3"][rng.usize(..6)];
    let args = match rng.u8(..18) {
        0 => format!("'set', {k}, {number}"),
        1 => format!("'get', {k}"),
        2 => format!("'incr', {k}"),
        3 => format!("'incrbyfloat', {k}, '1.5'"),
        4 => format!("'lpush', {k}, {}, {}", v(), v()),
        5 => format!("'lrange', {k}, 0, -1"),
        6 => format!("'hset', {k}, 'f', {}", v()),
        7 => format!("'hgetall', {k}"),
        8 => format!("'sadd', {k}, {}", v()),
        9 => format!("'scard', {k}"),
        10 => format!("'zadd', {k}, {}, 'm'", rng.u8(..5)),
        11 => format!("'zrange', {k}, 0, -1, 'withscores'"),
        12 => format!("'del', {k}"),
        13 => format!("'exists', {k}, {}", key(rng)),
        14 => format!("'type', {k}"),
        15 => "'ping'".to_owned(),
        16 => format!("'append', {k}, ARGV[2]"),
        _ => format!("'mget', {k}, {}", key(rng)),
    };
    let f = if rng.u8(..4) == 0 { "pcall" } else { "call" };
    format!("redis.{f}({args})")
}

/// A script body: a few calls, then a return of one of Redis's shapes.
fn body(rng: &mut fastrand::Rng) -> String {
    let n = rng.usize(1..5);
    let mut lines: Vec<String> = (0..n)
        .map(|i| format!("local r{i} = {}", call(rng)))
        .collect();
    let last = format!("r{}", n - 1);
    lines.push(match rng.u8(..8) {
        0 => format!("return {last}"),
        1 => format!("return {{r0, {last}, 'x', 7}}"),
        2 => "return redis.status_reply('FINE')".to_owned(),
        3 => "return redis.error_reply('MYERR custom')".to_owned(),
        4 => format!("return type({last})"),
        5 => "return {1, 2.9, false, true, 'a'}".to_owned(),
        6 => {
            "return {cjson.encode({1e-20, 0.1, 1/3, 2^53, -0.0}), cmsgpack.pack(1e-20, 0.5, 2^40)}"
                .to_owned()
        }
        _ => format!("return cjson.encode({{v = {last}}})"),
    });
    lines.join("\n")
}

/// One step: a script run, or a script-cache/library command.
fn step(rng: &mut fastrand::Rng) -> diff::Step {
    let script = body(rng);
    let keys = [b("2"), b("k1"), b("k2"), b("v"), b("tail")];
    let with_keys = |mut c: Vec<Vec<u8>>| {
        c.extend(keys.iter().cloned());
        c
    };
    let sha = sha1_hex(script.as_bytes());
    let library = format!(
        "#!lua name=lib\nredis.register_function('f', function(KEYS, ARGV)\n{script}\nend)\nredis.register_function{{function_name='g', callback=function(KEYS, ARGV)\n{script}\nend, flags={{'no-writes'}}}}"
    );
    match rng.u8(..10) {
        0 => vec![vec![b("SCRIPT"), b("LOAD"), b(&script)]],
        1 => vec![with_keys(vec![b("EVALSHA"), b(&sha)])],
        2 => vec![with_keys(vec![b("EVAL_RO"), b(&script)])],
        3 => vec![vec![b("SCRIPT"), b("EXISTS"), b(&sha), b("ffff")]],
        4 => vec![
            vec![b("FUNCTION"), b("LOAD"), b("REPLACE"), b(&library)],
            with_keys(vec![b("FCALL"), b(if rng.bool() { "f" } else { "g" })]),
        ],
        5 => vec![with_keys(vec![
            b("FCALL_RO"),
            b(if rng.bool() { "f" } else { "g" }),
        ])],
        _ => vec![with_keys(vec![b("EVAL"), b(&script)])],
    }
}

/// Lowercase hex SHA1 (as the server names scripts).
fn sha1_hex(bytes: &[u8]) -> String {
    vireo_script::sha1_hex(bytes)
}

#[test]
fn random_scripts_match_redis() {
    if std::process::Command::new("redis-server")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("redis-server not on PATH: differential scripting test skipped");
        return;
    }
    diff::run(step);
}
