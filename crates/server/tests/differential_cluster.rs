//! The cluster commands against a real redis-server running with its
//! default `cluster-enabled no`: every CLUSTER subcommand, ASKING,
//! READONLY, READWRITE and RESTORE-ASKING, called directly, with wrong
//! arities, unknown subcommands, and from scripts, must answer
//! byte-for-byte as Redis does; COMMAND INFO must describe each the same
//! way, and COMMAND DOCS give the same groups, versions, flags and
//! arguments (summaries are our own words, history entries are not kept).

mod common;

use common::diff::{redis_server_available, start_redis, Raw};
use redis::Value;

/// Every CLUSTER subcommand with arguments that satisfy its arity.
const SUBCOMMANDS: &[&str] = &[
    "addslots 1 2",
    "addslotsrange 1 5",
    "bumpepoch",
    "count-failure-reports abc",
    "countkeysinslot 12",
    "delslots 3",
    "delslotsrange 1 2 5 6",
    "failover force",
    "flushslots",
    "forget abc",
    "getkeysinslot 12 10",
    "help",
    "info",
    "keyslot foo",
    "links",
    "meet 127.0.0.1 7000",
    "myid",
    "nodes",
    "replicas abc",
    "replicate abc",
    "reset hard",
    "saveconfig",
    "set-config-epoch 1",
    "setslot 1 stable",
    "shards",
    "slaves abc",
    "slots",
];

fn words(line: &str) -> Vec<Vec<u8>> {
    line.split(' ').map(|w| w.as_bytes().to_vec()).collect()
}

/// The same command line to both servers; the raw replies must match.
fn same(r: &mut Raw, v: &mut Raw, line: &str) -> Vec<u8> {
    let cmd = words(line);
    let theirs = r.send(&cmd);
    let ours = v.send(&cmd);
    assert_eq!(
        String::from_utf8_lossy(&ours),
        String::from_utf8_lossy(&theirs),
        "{line}"
    );
    ours
}

/// Runs the raw command `cmd` on both servers; the replies must match.
fn same_raw(r: &mut Raw, v: &mut Raw, cmd: &[Vec<u8>]) -> Vec<u8> {
    let theirs = r.send(cmd);
    let ours = v.send(cmd);
    assert_eq!(
        String::from_utf8_lossy(&ours),
        String::from_utf8_lossy(&theirs),
        "{:?}",
        String::from_utf8_lossy(&cmd[1])
    );
    ours
}

/// EVAL of `body` with no keys.
fn eval(body: &str) -> Vec<Vec<u8>> {
    vec![b"eval".to_vec(), body.as_bytes().to_vec(), b"0".to_vec()]
}

#[test]
fn cluster_commands_answer_as_redis_without_cluster_support() {
    if !redis_server_available() {
        return;
    }
    let redis = start_redis();
    let vireo = common::Server::start(&[]);
    let (mut r, mut v) = (Raw::connect(redis.port), Raw::connect(vireo.port));
    for sub in SUBCOMMANDS {
        let reply = same(&mut r, &mut v, &format!("cluster {sub}"));
        assert!(reply.starts_with(b"-ERR This instance has cluster support disabled"));
        // One argument too many for fixed arities, none for the rest.
        let name = sub.split(' ').next().unwrap();
        same(&mut r, &mut v, &format!("cluster {name} x y z w v u"));
        same(&mut r, &mut v, &format!("cluster {name}"));
    }
    for line in [
        "cluster",
        "cluster nosuch",
        "cluster HELP",
        "asking",
        "asking x",
        "readonly",
        "readwrite",
        "readwrite x",
        "restore-asking k 0 bad",
        "restore-asking k",
    ] {
        same(&mut r, &mut v, line);
    }
}

#[test]
fn scripts_may_call_every_cluster_command_but_reset() {
    if !redis_server_available() {
        return;
    }
    let redis = start_redis();
    let vireo = common::Server::start(&[]);
    let (mut r, mut v) = (Raw::connect(redis.port), Raw::connect(vireo.port));
    for call in [
        "'cluster','reset'",
        "'cluster','reset','hard'",
        "'cluster','info'",
        "'cluster','keyslot','foo'",
        "'cluster','nosuch'",
        "'cluster','myid','x'",
        "'asking'",
        "'readonly'",
    ] {
        same_raw(
            &mut r,
            &mut v,
            &eval(&format!("return redis.pcall({call})")),
        );
    }
    // redis.call raises the refusal, with the script's SHA and line.
    let reply = same_raw(
        &mut r,
        &mut v,
        &eval("return redis.call('cluster','reset')"),
    );
    assert!(reply.starts_with(b"-ERR This Redis command is not allowed from script"));
}

/// Drops the fields whose text is prose: summaries and complexities are
/// our own words, and Vireo's docs keep no history entries.
fn without_prose(v: Value) -> Value {
    match v {
        Value::Array(items) => {
            let mut out = Vec::new();
            let mut it = items.into_iter();
            while let Some(item) = it.next() {
                let prose = matches!(&item, Value::BulkString(b)
                    if b == b"summary" || b == b"complexity" || b == b"history");
                if prose {
                    it.next();
                } else {
                    out.push(without_prose(item));
                }
            }
            Value::Array(out)
        }
        other => other,
    }
}

#[test]
fn command_info_and_docs_describe_them_as_redis() {
    if !redis_server_available() {
        return;
    }
    let redis = start_redis();
    let vireo = common::Server::start(&[]);
    let (mut r, mut v) = (Raw::connect(redis.port), Raw::connect(vireo.port));
    let mut names: Vec<String> = SUBCOMMANDS
        .iter()
        .map(|s| format!("cluster|{}", s.split(' ').next().unwrap()))
        .collect();
    names.extend(["asking", "readonly", "readwrite", "restore-asking"].map(String::from));
    for name in &names {
        same(&mut r, &mut v, &format!("command info {name}"));
    }
    let mut rc = redis::Client::open(format!("redis://127.0.0.1:{}/", redis.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let mut vc = vireo.conn();
    for name in ["asking", "readonly", "readwrite", "restore-asking"] {
        let docs = |c: &mut redis::Connection| -> Value {
            without_prose(
                redis::cmd("COMMAND")
                    .arg("DOCS")
                    .arg(name)
                    .query(c)
                    .unwrap(),
            )
        };
        assert_eq!(docs(&mut vc), docs(&mut rc), "{name}");
    }
    // CLUSTER's subcommands come in hash order from Redis: compare each.
    let subs = |c: &mut redis::Connection| -> Vec<(String, Value)> {
        let docs: Value = redis::cmd("COMMAND")
            .arg("DOCS")
            .arg("cluster")
            .query(c)
            .unwrap();
        let Value::Array(top) = without_prose(docs) else {
            panic!("docs")
        };
        let Value::Array(fields) = &top[1] else {
            panic!("fields")
        };
        let pos = fields
            .iter()
            .position(|f| matches!(f, Value::BulkString(b) if b == b"subcommands"))
            .expect("subcommands");
        let Value::Array(list) = &fields[pos + 1] else {
            panic!("list")
        };
        let mut pairs: Vec<(String, Value)> = list
            .chunks(2)
            .map(|p| match &p[0] {
                Value::BulkString(n) => (String::from_utf8_lossy(n).into_owned(), p[1].clone()),
                other => panic!("{other:?}"),
            })
            .collect();
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        pairs
    };
    assert_eq!(subs(&mut vc), subs(&mut rc));
}
