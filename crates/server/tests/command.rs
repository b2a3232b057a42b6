//! COMMAND and its subcommands against the real server: COUNT, INFO, DOCS,
//! LIST, GETKEYS, GETKEYSANDFLAGS, HELP.

mod common;

use common::q;
use redis::Value;

fn ok(con: &mut redis::Connection, args: &[&str]) -> Value {
    q(con, args).unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

/// Runs a command that must fail; returns the full error line.
fn err(con: &mut redis::Connection, args: &[&str]) -> String {
    match q(con, args) {
        Ok(v) => panic!("{args:?} succeeded with {v:?}"),
        Err(e) => format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
    }
}

fn b(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn st(s: &str) -> Value {
    Value::SimpleString(s.into())
}

fn int(n: i64) -> Value {
    Value::Int(n)
}

fn arr(v: Vec<Value>) -> Value {
    Value::Array(v)
}

fn statuses(names: &[&str]) -> Value {
    arr(names.iter().map(|n| st(n)).collect())
}

/// A RESP2 map: a flat array of bulk names and values.
fn map(pairs: Vec<(&str, Value)>) -> Value {
    arr(pairs.into_iter().flat_map(|(k, v)| [b(k), v]).collect())
}

/// A key spec starting at an index with a range, as COMMAND INFO shows it.
fn range_spec(flags: &[&str], index: i64, lastkey: i64, step: i64) -> Value {
    map(vec![
        ("flags", statuses(flags)),
        (
            "begin_search",
            map(vec![
                ("type", b("index")),
                ("spec", map(vec![("index", int(index))])),
            ]),
        ),
        (
            "find_keys",
            map(vec![
                ("type", b("range")),
                (
                    "spec",
                    map(vec![
                        ("lastkey", int(lastkey)),
                        ("keystep", int(step)),
                        ("limit", int(0)),
                    ]),
                ),
            ]),
        ),
    ])
}

#[allow(clippy::too_many_arguments)]
fn info(
    name: &str,
    arity: i64,
    flags: &[&str],
    triple: [i64; 3],
    cats: &[&str],
    tips: &[&str],
    specs: Vec<Value>,
) -> Value {
    arr(vec![
        b(name),
        int(arity),
        statuses(flags),
        int(triple[0]),
        int(triple[1]),
        int(triple[2]),
        statuses(cats),
        arr(tips.iter().map(|t| b(t)).collect()),
        arr(specs),
        arr(vec![]),
    ])
}

fn names(v: Value) -> Vec<String> {
    match v {
        Value::Array(items) => items
            .into_iter()
            .map(|i| match i {
                Value::BulkString(s) => String::from_utf8(s).unwrap(),
                other => panic!("not a name: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

/// Looks a field up in a RESP2 map reply.
fn field<'a>(m: &'a Value, key: &str) -> Option<&'a Value> {
    let Value::Array(items) = m else {
        panic!("not a map: {m:?}")
    };
    items.chunks(2).find(|kv| kv[0] == b(key)).map(|kv| &kv[1])
}

#[test]
fn count_matches_the_table_and_the_full_listing() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    let top = vireo_server::cmd::table().top_level().count() as i64;
    assert_eq!(ok(&mut con, &["COMMAND", "COUNT"]), int(top));
    match ok(&mut con, &["COMMAND"]) {
        Value::Array(all) => assert_eq!(all.len() as i64, top),
        v => panic!("{v:?}"),
    }
    match ok(&mut con, &["COMMAND", "INFO"]) {
        Value::Array(all) => assert_eq!(all.len() as i64, top),
        v => panic!("{v:?}"),
    }
    let listed = names(ok(&mut con, &["COMMAND", "LIST"]));
    assert_eq!(listed.len(), vireo_server::cmd::table().all.len());
    assert_eq!(
        listed.iter().filter(|n| !n.contains('|')).count() as i64,
        top
    );
    assert!(listed.iter().any(|n| n == "command|getkeys"));
}

#[test]
fn info_has_redis_layout() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    let got = ok(
        &mut con,
        &[
            "COMMAND",
            "INFO",
            "get",
            "SET",
            "mset",
            "config|get",
            "nosuch",
        ],
    );
    let want = arr(vec![
        info(
            "get",
            2,
            &["readonly", "fast"],
            [1, 1, 1],
            &["@read", "@string", "@fast"],
            &[],
            vec![range_spec(&["RO", "access"], 1, 0, 1)],
        ),
        info(
            "set",
            -3,
            &["write", "denyoom"],
            [1, 1, 1],
            &["@write", "@string", "@slow"],
            &[],
            vec![range_spec(
                &["RW", "access", "update", "variable_flags"],
                1,
                0,
                1,
            )],
        ),
        info(
            "mset",
            -3,
            &["write", "denyoom"],
            [1, -1, 2],
            &["@write", "@string", "@slow"],
            &[
                "request_policy:multi_shard",
                "response_policy:all_succeeded",
            ],
            vec![range_spec(&["OW", "update"], 1, -1, 2)],
        ),
        info(
            "config|get",
            -3,
            &["admin", "noscript", "loading", "stale"],
            [0, 0, 0],
            &["@admin", "@slow", "@dangerous"],
            &[],
            vec![],
        ),
        Value::Nil,
    ]);
    assert_eq!(got, want);
}

#[test]
fn info_of_a_container_lists_its_subcommands() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    let Value::Array(outer) = ok(&mut con, &["COMMAND", "INFO", "command"]) else {
        panic!()
    };
    let Value::Array(fields) = &outer[0] else {
        panic!()
    };
    assert_eq!(fields[0], b("command"));
    assert_eq!(fields[1], int(-1));
    assert_eq!(fields[2], statuses(&["loading", "stale"]));
    assert_eq!(fields[6], statuses(&["@slow", "@connection"]));
    assert_eq!(fields[7], arr(vec![b("nondeterministic_output_order")]));
    let Value::Array(subs) = &fields[9] else {
        panic!()
    };
    let mut sub_names: Vec<Value> = subs
        .iter()
        .map(|s| match s {
            Value::Array(f) => f[0].clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    sub_names.sort_by_key(|v| format!("{v:?}"));
    let want: Vec<Value> = [
        "count",
        "docs",
        "getkeys",
        "getkeysandflags",
        "help",
        "info",
        "list",
    ]
    .iter()
    .map(|s| b(&format!("command|{s}")))
    .collect();
    assert_eq!(sub_names, want);
}

#[test]
fn only_commands_with_movable_keys_say_so() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    let movable = [
        "sort",
        "sort_ro",
        "zunionstore",
        "zinterstore",
        "zdiffstore",
        "zunion",
        "zinter",
        "zdiff",
        "zintercard",
        "sintercard",
        "lmpop",
        "blmpop",
        "zmpop",
        "bzmpop",
        "georadius",
        "georadiusbymember",
        "xread",
        "xreadgroup",
        "migrate",
        "eval",
        "eval_ro",
        "evalsha",
        "evalsha_ro",
        "fcall",
        "fcall_ro",
    ];
    let Value::Array(all) = ok(&mut con, &["COMMAND"]) else {
        panic!()
    };
    for cmd in all {
        let Value::Array(f) = cmd else { panic!() };
        let name = names(arr(vec![f[0].clone()])).remove(0);
        let Value::Array(flags) = &f[2] else { panic!() };
        assert_eq!(
            flags.contains(&st("movablekeys")),
            movable.contains(&name.as_str()),
            "{name}"
        );
    }
}

#[test]
fn docs_describe_arguments() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    let got = ok(&mut con, &["COMMAND", "DOCS", "set", "nosuch"]);
    let Value::Array(pairs) = &got else {
        panic!("{got:?}")
    };
    assert_eq!(pairs.len(), 2, "unknown names are left out");
    assert_eq!(pairs[0], b("set"));
    let set = &pairs[1];
    assert_eq!(field(set, "group"), Some(&b("string")));
    assert_eq!(field(set, "since"), Some(&b("1.0.0")));
    assert!(field(set, "summary").is_some());
    let Some(Value::Array(args)) = field(set, "arguments") else {
        panic!("{set:?}")
    };
    let arg_names: Vec<&Value> = args.iter().map(|a| field(a, "name").unwrap()).collect();
    assert_eq!(
        arg_names,
        [
            &b("key"),
            &b("value"),
            &b("condition"),
            &b("get"),
            &b("expiration")
        ]
    );
    assert_eq!(
        args[0],
        map(vec![
            ("name", b("key")),
            ("type", b("key")),
            ("key_spec_index", int(0))
        ])
    );
    assert_eq!(
        args[2],
        map(vec![
            ("name", b("condition")),
            ("type", b("oneof")),
            ("since", b("2.6.12")),
            ("flags", statuses(&["optional"])),
            (
                "arguments",
                arr(vec![
                    map(vec![
                        ("name", b("nx")),
                        ("type", b("pure-token")),
                        ("token", b("NX"))
                    ]),
                    map(vec![
                        ("name", b("xx")),
                        ("type", b("pure-token")),
                        ("token", b("XX"))
                    ]),
                ])
            ),
        ])
    );
    let Some(Value::Array(exp)) = field(&args[4], "arguments") else {
        panic!()
    };
    assert_eq!(field(&exp[0], "token"), Some(&b("EX")));
    assert_eq!(field(&exp[0], "type"), Some(&b("integer")));
    assert_eq!(field(&exp[2], "type"), Some(&b("unix-time")));
}

#[test]
fn docs_of_containers_nest_subcommands_and_deprecations_show() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    let got = ok(&mut con, &["COMMAND", "DOCS", "config", "getset"]);
    let config = field(&got, "config").unwrap();
    assert_eq!(field(config, "group"), Some(&b("server")));
    let subs = field(config, "subcommands").unwrap();
    let get = field(subs, "config|get").unwrap();
    let Some(Value::Array(args)) = field(get, "arguments") else {
        panic!("{get:?}")
    };
    assert_eq!(field(&args[0], "flags"), Some(&statuses(&["multiple"])));
    let getset = field(&got, "getset").unwrap();
    assert_eq!(field(getset, "doc_flags"), Some(&statuses(&["deprecated"])));
    assert_eq!(field(getset, "deprecated_since"), Some(&b("6.2.0")));
    assert!(field(getset, "replaced_by").is_some());
    // Without names, every top-level command is documented.
    let Value::Array(all) = ok(&mut con, &["COMMAND", "DOCS"]) else {
        panic!()
    };
    assert_eq!(
        all.len() / 2,
        vireo_server::cmd::table().top_level().count()
    );
}

#[test]
fn getkeys_finds_keys_and_reports_errors() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    assert_eq!(
        ok(
            &mut con,
            &["COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"]
        ),
        arr(vec![b("a"), b("b")])
    );
    assert_eq!(
        ok(
            &mut con,
            &["COMMAND", "GETKEYS", "set", "k", "v", "EX", "10"]
        ),
        arr(vec![b("k")])
    );
    assert_eq!(
        ok(&mut con, &["COMMAND", "GETKEYS", "watch", "x", "y"]),
        arr(vec![b("x"), b("y")])
    );
    assert_eq!(
        err(&mut con, &["COMMAND", "GETKEYS", "nosuch", "k"]),
        "ERR Invalid command specified"
    );
    assert_eq!(
        err(&mut con, &["COMMAND", "GETKEYS", "config|get", "x"]),
        "ERR Invalid command specified"
    );
    assert_eq!(
        err(&mut con, &["COMMAND", "GETKEYS", "config", "nosuch"]),
        "ERR Invalid command specified"
    );
    assert_eq!(
        err(&mut con, &["COMMAND", "GETKEYS", "set", "k"]),
        "ERR Invalid number of arguments specified for command"
    );
    assert_eq!(
        err(&mut con, &["COMMAND", "GETKEYS", "ping", "x"]),
        "ERR The command has no key arguments"
    );
    assert_eq!(
        err(&mut con, &["COMMAND", "GETKEYS", "config", "get", "x"]),
        "ERR The command has no key arguments"
    );
    assert_eq!(
        err(&mut con, &["COMMAND", "GETKEYS", "get"]),
        "ERR wrong number of arguments for 'command|getkeys' command"
    );
}

#[test]
fn getkeysandflags_reports_key_flags() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    let pair = |k: &str, f: &[&str]| arr(vec![b(k), statuses(f)]);
    assert_eq!(
        ok(&mut con, &["COMMAND", "GETKEYSANDFLAGS", "set", "k", "v"]),
        arr(vec![pair("k", &["OW", "update"])])
    );
    assert_eq!(
        ok(
            &mut con,
            &["COMMAND", "GETKEYSANDFLAGS", "set", "k", "v", "get"]
        ),
        arr(vec![pair("k", &["RW", "access", "update"])])
    );
    assert_eq!(
        ok(
            &mut con,
            &["COMMAND", "GETKEYSANDFLAGS", "rename", "a", "b"]
        ),
        arr(vec![
            pair("a", &["RW", "access", "delete"]),
            pair("b", &["OW", "update"])
        ])
    );
    assert_eq!(
        ok(
            &mut con,
            &["COMMAND", "GETKEYSANDFLAGS", "object", "encoding", "k"]
        ),
        arr(vec![pair("k", &["RO"])])
    );
    assert_eq!(
        ok(&mut con, &["COMMAND", "GETKEYSANDFLAGS", "get", "k"]),
        arr(vec![pair("k", &["RO", "access"])])
    );
}

#[test]
fn list_filters() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    let mut got = names(ok(
        &mut con,
        &["COMMAND", "LIST", "FILTERBY", "PATTERN", "COMMAND*"],
    ));
    got.sort();
    let want: Vec<String> = [
        "",
        "|count",
        "|docs",
        "|getkeys",
        "|getkeysandflags",
        "|help",
        "|info",
        "|list",
    ]
    .iter()
    .map(|s| format!("command{s}"))
    .collect();
    assert_eq!(got, want);
    let tx = names(ok(
        &mut con,
        &["COMMAND", "LIST", "FILTERBY", "aclcat", "TRANSACTION"],
    ));
    let mut tx = tx;
    tx.sort();
    assert_eq!(tx, ["discard", "exec", "multi", "unwatch", "watch"]);
    assert_eq!(
        ok(
            &mut con,
            &["COMMAND", "LIST", "FILTERBY", "aclcat", "nosuch"]
        ),
        arr(vec![])
    );
    assert_eq!(
        ok(&mut con, &["COMMAND", "LIST", "FILTERBY", "module", "m"]),
        arr(vec![])
    );
    assert_eq!(
        err(&mut con, &["COMMAND", "LIST", "FILTERBY", "color", "x"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut con, &["COMMAND", "LIST", "FILTERBY"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut con, &["COMMAND", "LIST", "x", "y", "z"]),
        "ERR syntax error"
    );
}

#[test]
fn help_and_unknown_subcommand() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    let Value::Array(lines) = ok(&mut con, &["COMMAND", "HELP"]) else {
        panic!()
    };
    assert_eq!(
        lines[0],
        st("COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
    );
    assert_eq!(lines.last(), Some(&st("    Prints this help.")));
    assert_eq!(
        err(&mut con, &["COMMAND", "nosuch"]),
        "ERR unknown subcommand 'nosuch'. Try COMMAND HELP."
    );
    assert_eq!(
        err(&mut con, &["COMMAND", "COUNT", "x"]),
        "ERR wrong number of arguments for 'command|count' command"
    );
    // A subcommand's own name is not a command (Redis issue #10070).
    assert_eq!(
        err(&mut con, &["CONFIG|GET", "maxmemory"]),
        "ERR unknown command 'CONFIG|GET', with args beginning with: 'maxmemory' "
    );
    assert_eq!(
        err(&mut con, &["GET|"]),
        "ERR unknown command 'GET|', with args beginning with: "
    );
}

#[test]
fn client_list_shows_the_running_command_in_the_query_buffer() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    let line: String = redis::cmd("CLIENT").arg("INFO").query(&mut con).unwrap();
    // `*2\r\n$6\r\nCLIENT\r\n$4\r\nINFO\r\n`, as Redis shows it.
    assert!(line.contains(" qbuf=26 "), "{line}");
}

#[test]
fn resp3_uses_sets_and_maps() {
    let srv = common::Server::start(&[]);
    let reply = common::raw_exchange(
        srv.port,
        b"HELLO 3\r\nCOMMAND INFO get\r\nCOMMAND DOCS echo\r\nQUIT\r\n",
        std::time::Duration::from_secs(5),
    );
    let text = String::from_utf8(reply).unwrap();
    let after_hello = &text[text.find("*1\r\n*10\r\n").expect(&text)..];
    assert!(after_hello.starts_with(
        "*1\r\n*10\r\n$3\r\nget\r\n:2\r\n~2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n~3\r\n+@read\r\n+@string\r\n+@fast\r\n~0\r\n~1\r\n%3\r\n$5\r\nflags\r\n~2\r\n+RO\r\n+access\r\n"
    ));
    assert!(
        after_hello.contains("~0\r\n%1\r\n$4\r\necho\r\n%5\r\n$7\r\nsummary\r\n"),
        "{after_hello}"
    );
    assert!(after_hello.contains("$9\r\narguments\r\n*1\r\n%2\r\n$4\r\nname\r\n$7\r\nmessage\r\n$4\r\ntype\r\n$6\r\nstring\r\n"));
}
