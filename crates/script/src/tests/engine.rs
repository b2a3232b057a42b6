//! Sandbox, conversion, error and run-control tests with the fake host.

use super::{eval_bytes, run_eval, FakeHost};
use crate::{EvalEngine, FunctionEngine, Reply};
use std::time::Duration;
use vireo_resp::{Protocol, ReplyBuf};

/// Shorthand: RESP2 EVAL with no keys.
fn ev(body: &str) -> String {
    eval_bytes(body, &[], &[], Protocol::Resp2)
}

/// The error text a script fails with, minus the `script: ...` suffix.
fn err_of(body: &str) -> String {
    let out = ev(body);
    assert!(
        out.starts_with('-'),
        "{body}: expected an error, got {out:?}"
    );
    out.trim_end().to_owned()
}

/// Lua return values become replies as in Redis.
#[test]
fn lua_to_reply() {
    assert_eq!(ev("return 'hello'"), "$5\r\nhello\r\n");
    assert_eq!(ev("return 100.5"), ":100\r\n");
    assert_eq!(ev("return -3.9"), ":-3\r\n");
    assert_eq!(ev("return true"), ":1\r\n");
    assert_eq!(ev("return false"), "$-1\r\n");
    assert_eq!(ev("return nil"), "$-1\r\n");
    assert_eq!(
        ev("return {1,2,3,'x',nil,4}"),
        "*4\r\n:1\r\n:2\r\n:3\r\n$1\r\nx\r\n"
    );
    assert_eq!(ev("return {ok='fine'}"), "+fine\r\n");
    assert_eq!(ev("return {ok='a\\r\\nb'}"), "+a  b\r\n");
    assert_eq!(
        ev("return {1, {err='My Error'}}"),
        "*2\r\n:1\r\n-My Error\r\n"
    );
    assert_eq!(ev("return redis.status_reply('PONG')"), "+PONG\r\n");
    assert_eq!(ev("return {double=1.5}"), "$3\r\n1.5\r\n");
    assert_eq!(ev("return {big_number='123'}"), "$3\r\n123\r\n");
    assert_eq!(ev("return _G"), "*0\r\n");
    assert_eq!(ev("return function() end"), "$-1\r\n");
    assert_eq!(ev("return {{1},{}}"), "*2\r\n*1\r\n:1\r\n*0\r\n");
}

/// RESP3 scripts and callers: booleans, maps, sets, doubles, verbatim.
#[test]
fn lua_to_reply_resp3() {
    let r3 = |body: &str| eval_bytes(body, &[], &[], Protocol::Resp3);
    assert_eq!(r3("redis.setresp(3); return true"), "#t\r\n");
    assert_eq!(r3("redis.setresp(3); return false"), "#f\r\n");
    assert_eq!(r3("return false"), "_\r\n");
    assert_eq!(ev("redis.setresp(3); return false"), ":0\r\n");
    assert_eq!(r3("return {map={a=1}}"), "%1\r\n$1\r\na\r\n:1\r\n");
    assert_eq!(ev("return {map={a=1}}"), "*2\r\n$1\r\na\r\n:1\r\n");
    assert_eq!(r3("return {set={a=true}}"), "~1\r\n$1\r\na\r\n");
    assert_eq!(r3("return {double=0.5}"), ",0.5\r\n");
    assert_eq!(r3("return {big_number='1\\r2'}"), "(1 2\r\n");
    assert_eq!(
        r3("return {verbatim_string={format='txt', string='hi'}}"),
        "=6\r\ntxt:hi\r\n"
    );
}

/// A self-referencing table stops at the stack limit with Redis's error.
#[test]
fn recursive_table_is_bounded() {
    let out = ev("local a = {}; local b = {a}; a[1] = b; return a");
    assert_eq!(out.matches("*1\r\n").count(), crate::REPLY_DEPTH_LIMIT);
    assert!(out.ends_with("-ERR reached lua stack limit\r\n"));
}

/// Command replies become Lua values as in Redis (RESP2 and RESP3).
#[test]
fn reply_to_lua() {
    let mut engine = EvalEngine::new(0).unwrap();
    let mut host = FakeHost::default();
    let mut run = |body: &str, proto| run_eval(&mut engine, &mut host, body, &["k"], &[], proto);
    assert_eq!(
        run(
            "return redis.call('get', KEYS[1]) == false",
            Protocol::Resp2
        ),
        ":1\r\n"
    );
    assert_eq!(
        run("return redis.call('set', KEYS[1], 5).ok", Protocol::Resp2),
        "$2\r\nOK\r\n"
    );
    assert_eq!(
        run("return type(redis.call('incr', KEYS[1]))", Protocol::Resp2),
        "$6\r\nnumber\r\n"
    );
    assert_eq!(
        run("return redis.pcall('nosuch').err", Protocol::Resp2),
        "$44\r\nERR Unknown Redis command called from script\r\n"
    );
    run("redis.call('hset', 'h', 'f', 'v')", Protocol::Resp2);
    assert_eq!(
        run("return redis.call('hgetall', 'h')", Protocol::Resp2),
        "*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
    assert_eq!(
        run(
            "redis.setresp(3); return redis.call('hgetall', 'h').map.f",
            Protocol::Resp2
        ),
        "$1\r\nv\r\n"
    );
    assert_eq!(
        run(
            "redis.setresp(3); return redis.call('hgetall', 'h')",
            Protocol::Resp3
        ),
        "%1\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
}

/// Each reply type converts to the documented Lua shape.
#[test]
fn every_reply_type_to_lua() {
    let mut engine = EvalEngine::new(0).unwrap();
    let mut host = FakeHost::default();
    let mut check = |reply: Reply, expr: &str| {
        host.canned = Some(reply.clone());
        let body = format!("local v = redis.pcall('canned'); return {expr}");
        let out = run_eval(&mut engine, &mut host, &body, &[], &[], Protocol::Resp2);
        assert_eq!(out, ":1\r\n", "{reply:?}: {expr}");
    };
    check(Reply::Status(b"OK".to_vec()), "v.ok == 'OK'");
    check(
        Reply::Error(b"WRONGTYPE x".to_vec()),
        "v.err == 'WRONGTYPE x' and v.ignore_error_stats_update",
    );
    check(Reply::Int(7), "v == 7");
    check(Reply::Bulk(b"b".to_vec()), "v == 'b'");
    check(Reply::NullBulk, "v == false");
    check(Reply::NullArray, "v == false");
    check(Reply::Null, "v == nil");
    check(Reply::Bool(true), "v == true");
    check(Reply::Double(2.5), "v.double == 2.5");
    check(Reply::BigNumber(b"99".to_vec()), "v.big_number == '99'");
    check(
        Reply::Verbatim {
            format: b"txt".to_vec(),
            text: b"t".to_vec(),
        },
        "v.verbatim_string.format == 'txt' and v.verbatim_string.string == 't'",
    );
    check(
        Reply::Array(vec![Reply::Int(1), Reply::Null, Reply::Int(3)]),
        "v[1] == 1 and v[2] == nil and v[3] == 3",
    );
    check(
        Reply::Array(vec![
            Reply::Error(b"ERR inner".to_vec()),
            Reply::Status(b"s".to_vec()),
        ]),
        "v[1].err == 'ERR inner' and v[1].ignore_error_stats_update and v[2].ok == 's'",
    );
    check(
        Reply::Set(vec![Reply::Bulk(b"a".to_vec())]),
        "v.set.a == true",
    );
    check(
        Reply::Map(vec![
            (Reply::Bulk(b"k".to_vec()), Reply::Int(2)),
            (Reply::Null, Reply::Int(3)),
            (Reply::Int(5), Reply::Array(vec![Reply::Bool(false)])),
        ]),
        "v.map.k == 2 and v.map[5][1] == false",
    );
}

/// The sandbox: frozen globals and libraries, missing functions.
#[test]
fn sandbox() {
    assert!(err_of("a = 1").contains("user_script:1: Attempt to modify a readonly table script:"));
    assert!(err_of("return b")
        .contains("ERR user_script:1: Script attempted to access nonexistent global variable 'b'"));
    for body in [
        "redis.call = nil",
        "string.x = 1",
        "setmetatable(_G, {})",
        "local g = getmetatable(_G); g.__index = {}",
        "_G = {}",
        "cjson.encode = 1",
        "cmsgpack.pack = 1",
        "bit.lshift = 1",
        "rawset(_G, 'x', 1)",
        "table.insert(math, 1)",
        "getmetatable('').__index = {}",
    ] {
        assert!(
            err_of(body).contains("Attempt to modify a readonly table"),
            "{body}"
        );
    }
    for name in [
        "print", "dofile", "loadfile", "getfenv", "setfenv", "newproxy", "os", "io", "debug",
        "require", "module", "package",
    ] {
        let msg = err_of(&format!("return {name}"));
        assert!(
            msg.contains(&format!("nonexistent global variable '{name}'")),
            "{name}: {msg}"
        );
    }
    assert_eq!(ev("return loadstring('return 1')()"), ":1\r\n");
    assert!(
        err_of("return loadstring(string.dump(function() return 1 end))()")
            .contains("attempt to call a nil value")
    );
    assert_eq!(ev("local t = {}; t.x = 1; return t.x"), ":1\r\n");
    assert_eq!(ev("return type(coroutine.create)"), "$8\r\nfunction\r\n");
    assert_eq!(ev("return _VERSION"), "$7\r\nLua 5.1\r\n");
}

/// Error texts of failing scripts, with the script's position and SHA.
#[test]
fn error_messages() {
    let sha = crate::sha1_hex(b"error('x')");
    assert_eq!(
        err_of("error('x')"),
        format!("-ERR user_script:1: x script: {sha}, on @user_script:1.")
    );
    let sha = crate::sha1_hex(b"error({err='My Error'})");
    assert_eq!(
        err_of("error({err='My Error'})"),
        format!("-My Error script: {sha}, on @user_script:1.")
    );
    let body = "return redis.call('nosuch')";
    let sha = crate::sha1_hex(body.as_bytes());
    assert_eq!(
        err_of(body),
        format!("-ERR Unknown Redis command called from script script: {sha}, on @user_script:1.")
    );
    assert!(err_of("\n\nlocal t = nil; return t.x")
        .contains("user_script:3: attempt to index local 't' (a nil value)"));
    assert!(err_of("return string.rep(nil)")
        .contains("bad argument #1 to 'rep' (string expected, got nil)"));
    assert_eq!(err_of("return redis.error_reply('My Error')"), "-My Error");
    assert_eq!(
        err_of("return redis.error_reply('NoSpace')"),
        "-ERR NoSpace"
    );
    assert!(err_of("return (")
        .starts_with("-ERR Error compiling script (new function): user_script:1:"));
    assert!(err_of("redis.call()")
        .contains("Please specify at least one argument for this redis lib call"));
    assert!(err_of("redis.call('get', {})")
        .contains("Lua redis lib command arguments must be strings or integers"));
    assert!(err_of("redis.setresp(4)").contains("RESP version must be 2 or 3."));
    assert!(err_of("redis.set_repl(8)").contains("Invalid replication flags."));
    assert!(err_of("redis.log(9, 'x')").contains("Invalid debug level."));
    assert!(err_of("redis.log(1)").contains("redis.log() requires two arguments or more."));
    assert!(err_of("redis.sha1hex()").contains("wrong number of arguments"));
}

/// pcall returns a redis.call error's text; error values pass through.
#[test]
fn pcall_semantics() {
    assert_eq!(
        ev("local ok, e = pcall(redis.call, 'nosuch'); return {tostring(ok), e}"),
        "*2\r\n$5\r\nfalse\r\n$44\r\nERR Unknown Redis command called from script\r\n"
    );
    assert_eq!(
        ev("local ok, e = pcall(error, {err='x'}); return e"),
        "$1\r\nx\r\n"
    );
    assert_eq!(
        ev("local ok, e = pcall(error, {1}); return e"),
        "*1\r\n:1\r\n"
    );
    assert_eq!(
        ev("local ok, e = pcall(cjson.decode, '{'); return e"),
        "$57\r\nExpected object key string but found T_END at character 2\r\n"
    );
    assert_eq!(
        ev("return {xpcall(function() error({err='y'}) end, function(e) return e.err end)}"),
        "*2\r\n$-1\r\n$1\r\ny\r\n"
    );
    assert_eq!(ev("local co = coroutine.create(function() redis.call('nosuch') end); local ok, e = coroutine.resume(co); return e.err"),
        "$44\r\nERR Unknown Redis command called from script\r\n");
}

/// The redis table's helpers.
#[test]
fn redis_api() {
    assert_eq!(
        ev("return redis.sha1hex('')"),
        "$40\r\nda39a3ee5e6b4b0d3255bfef95601890afd80709\r\n"
    );
    assert_eq!(
        ev("return redis.sha1hex('Pizza & Mandolino')"),
        "$40\r\n74822d82031af7493c20eefa13bd07ec4fada82f\r\n"
    );
    assert_eq!(ev("return redis.REDIS_VERSION"), "$6\r\n7.0.15\r\n");
    assert_eq!(ev("return redis.REDIS_VERSION_NUM"), ":458767\r\n");
    assert_eq!(ev("return redis.replicate_commands()"), ":1\r\n");
    assert_eq!(ev("return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL}"),
        "*5\r\n:0\r\n:1\r\n:2\r\n:2\r\n:3\r\n");
    assert_eq!(ev("return redis.breakpoint()"), "$-1\r\n");
    assert_eq!(ev("return redis.debug('x')"), "$-1\r\n");
    assert_eq!(
        ev("return {redis.acl_check_cmd('get', 'x'), redis.acl_check_cmd('set', 'x', 'y')}"),
        "*2\r\n:1\r\n$-1\r\n"
    );
    assert!(err_of("redis.acl_check_cmd('nosuch')")
        .contains("Invalid command passed to redis.acl_check_cmd()"));
    let mut engine = EvalEngine::new(0).unwrap();
    let mut host = FakeHost::default();
    run_eval(
        &mut engine,
        &mut host,
        "redis.log(redis.LOG_WARNING, 'a', 1, {}, 'b'); redis.set_repl(redis.REPL_AOF)",
        &[],
        &[],
        Protocol::Resp2,
    );
    assert_eq!(
        host.logs,
        vec![(crate::LogLevel::Warning, b"a 1 b".to_vec())]
    );
    assert_eq!(
        host.repl,
        Some(crate::ReplFlags {
            aof: true,
            replicas: false
        })
    );
}

/// Numbers passed to redis.call are formatted with %.17g.
#[test]
fn call_argument_formatting() {
    let mut engine = EvalEngine::new(0).unwrap();
    let mut host = FakeHost::default();
    run_eval(
        &mut engine,
        &mut host,
        "redis.call('echo', 0.1); redis.call('echo', 3); redis.call('echo', -1e20)",
        &[],
        &[],
        Protocol::Resp2,
    );
    let echoed: Vec<&[u8]> = host.calls.iter().map(|c| c[1].as_slice()).collect();
    assert_eq!(echoed, vec![&b"0.10000000000000001"[..], b"3", b"-1e+20"]);
}

/// math.random is Redis's PRNG (seeded, it gives `redisSrand48`'s
/// sequence), and the state runs on from one script to the next.
#[test]
fn math_random_sequence() {
    let body = "return {math.random(100), math.random(1, 10), math.random(1000000)}";
    assert_eq!(
        ev(&format!("math.randomseed(0) {body}")),
        "*3\r\n:18\r\n:8\r\n:96372\r\n"
    );
    let mut engine = EvalEngine::new(0).unwrap();
    let mut host = FakeHost::default();
    let first = run_eval(&mut engine, &mut host, body, &[], &[], Protocol::Resp2);
    assert_ne!(
        first,
        run_eval(&mut engine, &mut host, body, &[], &[], Protocol::Resp2)
    );
    assert_eq!(ev("math.randomseed(5); local a = math.random(1000); math.randomseed(5); return a == math.random(1000)"), ":1\r\n");
    assert!(
        err_of("return math.random(0)").contains("bad argument #1 to 'random' (interval is empty)")
    );
}

/// KEYS and ARGV, and the script cache.
#[test]
fn keys_argv_and_cache() {
    let mut engine = EvalEngine::new(0).unwrap();
    let mut host = FakeHost::default();
    let body = "return {KEYS[1], ARGV[1], #KEYS, #ARGV}";
    assert_eq!(
        run_eval(
            &mut engine,
            &mut host,
            body,
            &["k"],
            &["a", "b"],
            Protocol::Resp2
        ),
        "*4\r\n$1\r\nk\r\n$1\r\na\r\n:1\r\n:2\r\n"
    );
    let sha = crate::sha1_hex(body.as_bytes());
    assert!(engine.exists(sha.to_uppercase().as_bytes()));
    assert_eq!(engine.script_count(), 1);
    let mut out = ReplyBuf::new(Protocol::Resp2);
    engine
        .evalsha(sha.as_bytes(), &[b"x"], &[], &mut host, &mut out)
        .unwrap();
    assert_eq!(out.as_bytes(), b"*1\r\n$1\r\nx\r\n");
    let err = engine
        .evalsha(
            b"ffffffffffffffffffffffffffffffffffffffff",
            &[],
            &[],
            &mut host,
            &mut out,
        )
        .unwrap_err();
    assert_eq!(err.message, "NOSCRIPT No matching script. Please use EVAL.");
    engine.flush().unwrap();
    assert!(!engine.exists(sha.as_bytes()));
    assert_eq!(
        engine
            .load(b"#!lua flags=no-writes\nreturn 1")
            .map(|s| s.len()),
        Ok(40)
    );
    assert_eq!(
        engine.load(b"#!lua flags=x\nreturn 1"),
        Err("ERR Unexpected flag in script shebang: x".to_owned())
    );
}

/// SCRIPT KILL: the host's interrupt kills a busy script, even under pcall.
#[test]
fn kill_busy_script() {
    let mut engine = EvalEngine::new(0).unwrap();
    let mut host = FakeHost {
        kill_after: Some(3),
        ..Default::default()
    };
    let body = "while true do pcall(function() while true do end end) end";
    let out = run_eval(&mut engine, &mut host, body, &[], &[], Protocol::Resp2);
    let sha = crate::sha1_hex(body.as_bytes());
    assert_eq!(
        out,
        format!(
            "-ERR Script killed by user with SCRIPT KILL... script: {sha}, on @user_script:1.\r\n"
        )
    );
    assert_eq!(host.interrupts, 3);
    assert_eq!(
        run_eval(
            &mut engine,
            &mut host,
            "return 1",
            &[],
            &[],
            Protocol::Resp2
        ),
        ":1\r\n"
    );
}

/// A script allocating without bound fails with an error, not an abort,
/// and the VM stays usable.
#[test]
fn memory_limit_is_a_script_error() {
    let mut engine = EvalEngine::new(8 << 20).unwrap();
    let mut host = FakeHost::default();
    let out = run_eval(
        &mut engine,
        &mut host,
        "local t = {} for i = 1, 1e9 do t[i] = string.rep('x', 100) .. i end",
        &[],
        &[],
        Protocol::Resp2,
    );
    assert!(
        out.starts_with('-') && out.contains("not enough memory"),
        "{out}"
    );
    assert_eq!(
        run_eval(
            &mut engine,
            &mut host,
            "return 2",
            &[],
            &[],
            Protocol::Resp2
        ),
        ":2\r\n"
    );
    assert!(engine.vm_memory() > 0);
}

/// Rust callbacks allocate with the limit relaxed (vendor/mlua's VIREO.md):
/// a script filling the heap with strings made by `redis.call` and
/// `cjson` still fails with Redis's error at the next allocation its Lua
/// code makes, also under `pcall`, and never aborts.
#[test]
fn memory_limit_holds_across_callbacks() {
    let mut engine = EvalEngine::new(8 << 20).unwrap();
    let mut host = FakeHost::default();
    let fill = "local t = {} for i = 1, 1e9 do \
                redis.call('SET', 'k', i .. string.rep('v', 4000)) \
                t[i] = redis.call('GET', 'k') t[-i] = cjson.encode({i, t[i]}) end";
    for script in [
        fill.to_owned(),
        format!("return {{pcall(function() {fill} end)}}"),
    ] {
        let out = run_eval(&mut engine, &mut host, &script, &[], &[], Protocol::Resp2);
        assert!(out.contains("not enough memory"), "{out}");
    }
    let out = run_eval(
        &mut engine,
        &mut host,
        "return #redis.call('GET', 'k')",
        &[],
        &[],
        Protocol::Resp2,
    );
    assert!(out.starts_with(":400"), "{out}");
}

/// Errors of `redis.call`, raised from the raw C function: Redis's error
/// tables, located at the calling line of `@user_script`; `redis.pcall`
/// returns the same tables; Lua's `pcall` catches the text.
#[test]
fn call_errors_are_redis_error_tables() {
    let located = |body: &str, text: &str, line: u32| {
        let out = err_of(body);
        assert!(
            out.starts_with(&format!("-{text} script: ")),
            "{body}: {out}"
        );
        assert!(
            out.ends_with(&format!(", on @user_script:{line}.")),
            "{body}: {out}"
        );
    };
    located(
        "redis.call('nosuch')",
        "ERR Unknown Redis command called from script",
        1,
    );
    located(
        "local a = 1\n\nredis.call('nosuch')",
        "ERR Unknown Redis command called from script",
        3,
    );
    located(
        "redis.call()",
        "ERR Please specify at least one argument for this redis lib call",
        1,
    );
    located(
        "redis.call('get', {})",
        "ERR Lua redis lib command arguments must be strings or integers",
        1,
    );
    located(
        "redis.call('get', nil)",
        "ERR Lua redis lib command arguments must be strings or integers",
        1,
    );
    located(
        "redis.call('incr', 'k')\nredis.call('set', 'k', 'x')\nredis.call('incr', 'k')",
        "ERR value is not an integer or out of range",
        3,
    );
    assert_eq!(
        ev("return redis.pcall().err"),
        "$64\r\nERR Please specify at least one argument for this redis lib call\r\n"
    );
    assert_eq!(
        ev("return redis.pcall('get', true)"),
        "-ERR Lua redis lib command arguments must be strings or integers\r\n"
    );
    assert_eq!(
        ev("local t = redis.pcall('nosuch') return {t.err, tostring(t.ignore_error_stats_update)}"),
        "*2\r\n$44\r\nERR Unknown Redis command called from script\r\n$4\r\ntrue\r\n"
    );
    assert_eq!(
        ev("local ok, e = pcall(redis.call, 'nosuch') return {tostring(ok), e}"),
        "*2\r\n$5\r\nfalse\r\n$44\r\nERR Unknown Redis command called from script\r\n"
    );
    assert_eq!(
        ev("local ok, e = pcall(redis.call) return e"),
        "$64\r\nERR Please specify at least one argument for this redis lib call\r\n"
    );
    // A command's error is not counted again; the engine's own errors are.
    let mut engine = EvalEngine::new(0).unwrap();
    let mut out = ReplyBuf::new(Protocol::Resp2);
    let e = engine
        .eval(
            b"redis.call('nosuch')",
            &[],
            &[],
            &mut FakeHost::default(),
            &mut out,
        )
        .unwrap_err();
    assert!(e.ignore_stats);
    let e = engine
        .eval(
            b"redis.call()",
            &[],
            &[],
            &mut FakeHost::default(),
            &mut out,
        )
        .unwrap_err();
    assert!(!e.ignore_stats);
}

/// `redis.call` with thousands of arguments (as many as `unpack` can
/// spread) hands them all over; numbers are Redis's `%.17g` (big
/// integers in exponent form, as Redis writes them).
#[test]
fn call_with_huge_argument_counts() {
    let mut engine = EvalEngine::new(0).unwrap();
    let mut host = FakeHost::default();
    let body =
        "local t = {} for i = 1, 7000 do t[i] = i end return redis.call('canned', unpack(t))";
    host.canned = Some(Reply::Int(3));
    assert_eq!(
        run_eval(&mut engine, &mut host, body, &[], &[], Protocol::Resp2),
        ":3\r\n"
    );
    let call = host.calls.last().unwrap();
    assert_eq!(call.len(), 7001);
    assert_eq!(call[7000], b"7000");
    run_eval(
        &mut engine,
        &mut host,
        "redis.call('echo', 2^60) redis.call('echo', -0.0) redis.call('echo', 1e16 + 1)",
        &[],
        &[],
        Protocol::Resp2,
    );
    let echoed: Vec<&[u8]> = host.calls[host.calls.len() - 3..]
        .iter()
        .map(|c| c[1].as_slice())
        .collect();
    assert_eq!(
        echoed,
        vec![&b"1.152921504606847e+18"[..], b"-0", b"10000000000000000"]
    );
}

/// Replies are read straight onto the Lua stack: big ones fit, and bytes
/// that are not one well-formed reply (truncated, unknown type, nested
/// past the parser's depth) are an error, never a crash.
#[test]
fn call_replies_big_and_malformed() {
    let mut engine = EvalEngine::new(0).unwrap();
    let mut host = FakeHost::default();
    let mut run = |host: &mut FakeHost, raw: Vec<u8>, body: &str| {
        host.raw = raw;
        run_eval(&mut engine, host, body, &[], &[], Protocol::Resp2)
    };
    let mut big = b"*100000\r\n".to_vec();
    for i in 0..100_000 {
        big.extend_from_slice(format!("*2\r\n:{i}\r\n$1\r\nx\r\n").as_bytes());
    }
    assert_eq!(
        run(
            &mut host,
            big,
            "local r = redis.call('raw') return {#r, r[100000][1]}"
        ),
        "*2\r\n:100000\r\n:99999\r\n"
    );
    let deep = [b"*1\r\n".repeat(crate::MAX_PARSE_DEPTH), b":7\r\n".to_vec()].concat();
    assert_eq!(
        run(
            &mut host,
            deep,
            "local r = redis.call('raw') for i = 1, 128 do r = r[1] end return r"
        ),
        ":7\r\n"
    );
    let unreadable = "-ERR the command's reply could not be read\r\n";
    for bad in [
        &b"$5\r\nab"[..],
        b"?\r\n",
        b"",
        b"*2\r\n:1\r\n",
        &b"*1\r\n".repeat(200),
    ] {
        assert_eq!(
            run(&mut host, bad.to_vec(), "return redis.pcall('raw')"),
            unreadable,
            "{bad:?}"
        );
        let out = run(&mut host, bad.to_vec(), "redis.call('raw')");
        assert!(
            out.starts_with(&unreadable[..unreadable.len() - 2]),
            "{out}"
        );
    }
    // After all that, the stack is as it should be.
    assert_eq!(
        run(
            &mut host,
            b":1\r\n".to_vec(),
            "return redis.call('raw') + redis.call('raw')"
        ),
        ":2\r\n"
    );
}

/// A reply bigger than the Lua heap limit is built (the limit is lifted
/// while `redis.call` runs), and the script's next allocation fails with
/// `not enough memory`; the VM works on.
#[test]
fn memory_limit_hit_after_a_big_reply() {
    let mut engine = EvalEngine::new(4 << 20).unwrap();
    let mut host = FakeHost::default();
    let element = "x".repeat(1000);
    let mut big = b"*8000\r\n".to_vec();
    for i in 0..8000 {
        big.extend_from_slice(format!("$1005\r\n{element}{i:05}\r\n").as_bytes());
    }
    host.raw = big;
    let out = run_eval(&mut engine, &mut host, "local r = redis.call('raw') local t = {} for i = 1, 1e6 do t[i] = r[i % 8000 + 1] .. i end", &[], &[], Protocol::Resp2);
    assert!(
        out.starts_with('-') && out.contains("not enough memory"),
        "{out}"
    );
    let out = run_eval(
        &mut engine,
        &mut host,
        "return #redis.call('raw')",
        &[],
        &[],
        Protocol::Resp2,
    );
    assert_eq!(out, ":8000\r\n");
}

/// FUNCTION LOAD, FCALL and the registry's errors.
#[test]
fn functions() {
    let mut fe = FunctionEngine::new(0).unwrap();
    let mut host = FakeHost::default();
    let t = Duration::from_millis(500);
    let code = b"#!lua name=mylib\nredis.register_function('f1', function(keys, args) return {keys[1], args[1]} end)\nredis.register_function{function_name='F2', callback=function() return redis.call('ping') end, flags={'no-writes'}, description='d'}";
    assert_eq!(fe.load(code, false, t, &mut host), Ok("mylib".to_owned()));
    assert_eq!(
        fe.load(code, false, t, &mut host),
        Err("ERR Library 'mylib' already exists".to_owned())
    );
    assert_eq!(fe.load(code, true, t, &mut host), Ok("mylib".to_owned()));
    assert_eq!((fe.library_count(), fe.function_count()), (1, 2));
    let (_, info) = fe.function(b"f2").unwrap();
    assert!(info.flags.no_writes && info.description.as_deref() == Some("d"));
    let mut out = ReplyBuf::new(Protocol::Resp2);
    fe.call(b"F1", &[b"k"], &[b"a"], &mut host, &mut out)
        .unwrap();
    fe.call(b"f2", &[], &[], &mut host, &mut out).unwrap();
    assert_eq!(out.as_bytes(), b"*2\r\n$1\r\nk\r\n$1\r\na\r\n+PONG\r\n");
    assert_eq!(
        fe.call(b"nope", &[], &[], &mut host, &mut out)
            .unwrap_err()
            .message,
        "ERR Function not found"
    );
    let other = b"#!lua name=other\nredis.register_function('f1', function() end)";
    assert_eq!(
        fe.load(other, false, t, &mut host),
        Err("ERR Function f1 already exists".to_owned())
    );
    let cases: &[(&[u8], &str)] = &[
        (b"redis.register_function('x', function() end)", "ERR Missing library metadata"),
        (b"#!lua name=bad-name\nredis.register_function('x', function() end)", "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"),
        (b"#!js name=l\n", "ERR Engine 'js' not found"),
        (b"#!lua name=l\nlocal a = 1", "ERR No functions registered"),
        (b"#!lua name=l\nreturn math.random()", "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'math'"),
        (b"#!lua name=l\nredis.call('ping')", "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'call'"),
        (b"#!lua name=l\nredis.register_function('a', function() end)\nredis.register_function('a', function() end)", "ERR Error registering functions: ERR Function already exists in the library"),
        (b"#!lua name=l\nredis.register_function('a-b', function() end)", "ERR Error registering functions: ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"),
        (b"#!lua name=l\nredis.register_function{function_name='a', callback=function() end, flags={'bad'}}", "ERR Error registering functions: ERR unknown flag given"),
        (b"#!lua name=l\nredis.register_function('a')", "ERR Error registering functions: ERR calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments)."),
        (b"#!lua name=l\nredis.register_function('a', 1)", "ERR Error registering functions: ERR second argument to redis.register_function must be a function"),
        (b"#!lua name=l\nx = 1", "ERR Error registering functions: ERR user_function:2: Attempt to modify a readonly table"),
        (b"#!lua name=l\n(", "ERR Error compiling function: user_function:2: unexpected symbol near '<eof>'"),
        (b"#!lua name=l\nwhile true do end", "ERR Error registering functions: ERR FUNCTION LOAD timeout"),
    ];
    for (code, want) in cases {
        assert_eq!(
            fe.load(code, false, Duration::from_millis(50), &mut host)
                .unwrap_err(),
            *want,
            "{}",
            String::from_utf8_lossy(code)
        );
    }
    let body = b"#!lua name=l2\nredis.register_function('g', function() return redis.register_function end)";
    fe.load(body, false, t, &mut host).unwrap();
    let mut out = ReplyBuf::new(Protocol::Resp2);
    fe.call(b"g", &[], &[], &mut host, &mut out).unwrap();
    assert_eq!(out.as_bytes(), b"$-1\r\n");
    assert!(fe.delete("mylib"));
    assert!(fe.function(b"f1").is_none());
    fe.flush().unwrap();
    assert_eq!(fe.library_count(), 0);
}
