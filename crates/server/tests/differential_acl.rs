//! Differential test of ACL replies against a real redis-server (skipped
//! when none is installed): random ACL SETUSER rule lists (valid and not),
//! then the same ACL DRYRUN verdicts, ACL LIST lines, AUTH results and
//! ACL CAT members from both.
//!
//! ACL LIST is compared without its command rules: Redis orders single
//! command rules by its hash table, so only the permissions they produce
//! (checked through DRYRUN) are comparable.

mod common;

use common::diff::{redis_server_available, start_redis, Raw};

fn cmd(words: &[&str]) -> Vec<Vec<u8>> {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

/// Rules, valid and malformed.
const RULES: &[&str] = &[
    "on",
    "off",
    "nopass",
    "resetpass",
    ">pw",
    ">other",
    "<pw",
    "<never",
    "#34344e4d60c2b6d639b7bd22e18f2b0b91bc34bf0ac5f9952744435093cfb4e6",
    "!34344e4d60c2b6d639b7bd22e18f2b0b91bc34bf0ac5f9952744435093cfb4e6",
    "#nothex",
    "~k*",
    "%R~r*",
    "%W~w*",
    "%RW~x*",
    "%R~w*",
    "allkeys",
    "resetkeys",
    "~*",
    "&c*",
    "&c1",
    "allchannels",
    "resetchannels",
    "&*",
    "+get",
    "-get",
    "+set",
    "+@read",
    "-@write",
    "+@all",
    "-@all",
    "+@string",
    "-@dangerous",
    "+config|get",
    "-config|set",
    "+config",
    "+select|0",
    "+client|id",
    "-client",
    "+publish",
    "+@pubsub",
    "(+get ~a*)",
    "(~b* +set &c2)",
    "()",
    "clearselectors",
    "reset",
    "bogus",
    "+nosuch",
    "-@nosuch",
    "+get|x|y",
    "+config|get|maxmemory",
    "%X~k",
    "allcommands",
    "nocommands",
    "sanitize-payload",
    "skip-sanitize-payload",
];

/// Command lines DRYRUN judges.
const LINES: &[&[&str]] = &[
    &["GET", "k1"],
    &["GET", "r1"],
    &["GET", "w1"],
    &["GET", "a1"],
    &["SET", "w1", "v"],
    &["SET", "r1", "v"],
    &["SET", "x1", "v", "GET"],
    &["SET", "b1", "v"],
    &["CONFIG", "GET", "x"],
    &["CONFIG", "SET", "x", "y"],
    &["SELECT", "0"],
    &["SELECT", "1"],
    &["CLIENT", "ID"],
    &["CLIENT", "KILL", "ID", "1"],
    &["PUBLISH", "c1", "m"],
    &["PUBLISH", "c2", "m"],
    &["SUBSCRIBE", "c1", "d"],
    &["PSUBSCRIBE", "c*"],
    &["UNSUBSCRIBE", "zz"],
    &["MGET", "k1", "r1"],
    &["COPY", "r1", "w1"],
    &["COPY", "w1", "r1"],
    &["PING"],
    &["LPUSH", "w1", "x"],
    &["HELLO"],
    &["AUTH", "a", "b"],
    &["SORT", "r1", "STORE", "w1"],
    &["EXISTS", "x9"],
    &["EVAL", "", "1", "k2"],
    &["FLUSHALL"],
];

/// ACL LIST's lines without command rules.
fn without_command_rules(reply: &[u8]) -> String {
    String::from_utf8_lossy(reply)
        .split("\r\n")
        // Bulk lengths count the command rules too.
        .filter(|line| !line.starts_with('$'))
        .map(|line| {
            line.split(' ')
                .filter(|w| {
                    let w = w.trim_start_matches('(').trim_end_matches(')');
                    !(w.starts_with('+') || w.starts_with('-'))
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("|")
}

fn same(a: &mut Raw, b: &mut Raw, c: &[Vec<u8>], what: &str) -> (Vec<u8>, Vec<u8>) {
    let ra = a.send(c);
    let rb = b.send(c);
    let shown: Vec<String> = c
        .iter()
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    assert_eq!(
        String::from_utf8_lossy(&ra),
        String::from_utf8_lossy(&rb),
        "{what}: {shown:?}"
    );
    (ra, rb)
}

#[test]
fn random_rules_give_the_same_verdicts_as_redis() {
    if !redis_server_available() {
        eprintln!("redis-server not installed: differential ACL test skipped");
        return;
    }
    let redis = start_redis();
    let vireo = common::Server::start(&[]);
    let mut a = Raw::connect(vireo.port);
    let mut b = Raw::connect(redis.port);
    let mut rng = fastrand::Rng::with_seed(27);
    for round in 0..400 {
        let user = format!("u{}", rng.usize(..4));
        let mut c = cmd(&["ACL", "SETUSER", &user]);
        for _ in 0..rng.usize(1..6) {
            c.push(RULES[rng.usize(..RULES.len())].as_bytes().to_vec());
        }
        same(&mut a, &mut b, &c, &format!("round {round} SETUSER"));
        for _ in 0..4 {
            let line = LINES[rng.usize(..LINES.len())];
            let mut d = cmd(&["ACL", "DRYRUN", &user]);
            d.extend(cmd(line));
            same(&mut a, &mut b, &d, &format!("round {round} DRYRUN"));
        }
        for pw in ["pw", "other", "passwd4"] {
            let auth = cmd(&["AUTH", &user, pw]);
            same(&mut a, &mut b, &auth, &format!("round {round} AUTH"));
            same(
                &mut a,
                &mut b,
                &cmd(&["AUTH", "default", ""]),
                "back to default",
            );
        }
        let list = cmd(&["ACL", "LIST"]);
        let (ra, rb) = (a.send(&list), b.send(&list));
        assert_eq!(
            without_command_rules(&ra),
            without_command_rules(&rb),
            "round {round} ACL LIST"
        );
        if rng.u8(..10) == 0 {
            same(
                &mut a,
                &mut b,
                &cmd(&["ACL", "DELUSER", &user, "nosuch"]),
                "DELUSER",
            );
        }
    }
}

#[test]
fn categories_list_the_same_commands_as_redis() {
    if !redis_server_available() {
        eprintln!("redis-server not installed: differential ACL test skipped");
        return;
    }
    let redis = start_redis();
    let vireo = common::Server::start(&[]);
    let mut rc = redis::Client::open(format!("redis://127.0.0.1:{}/", redis.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let mut vc = vireo.conn();
    let cats: Vec<String> = redis::cmd("ACL").arg("CAT").query(&mut rc).unwrap();
    let vcats: Vec<String> = redis::cmd("ACL").arg("CAT").query(&mut vc).unwrap();
    assert_eq!(cats, vcats);
    for cat in cats {
        let mut theirs: Vec<String> = redis::cmd("ACL")
            .arg("CAT")
            .arg(&cat)
            .query(&mut rc)
            .unwrap();
        let mut ours: Vec<String> = redis::cmd("ACL")
            .arg("CAT")
            .arg(&cat)
            .query(&mut vc)
            .unwrap();
        // Commands Vireo lacks (cluster, modules, replica side) aside.
        theirs.retain(|name| {
            let docs: redis::Value = redis::cmd("COMMAND")
                .arg("INFO")
                .arg(name)
                .query(&mut vc)
                .unwrap();
            docs != redis::Value::Array(vec![redis::Value::Nil])
        });
        // Commands Redis 7.0 lacks: newer ones (CLIENT NO-TOUCH) and
        // Vireo's own (REDISQL.*).
        ours.retain(|name| name != "client|no-touch" && !name.starts_with("redisql."));
        theirs.sort();
        ours.sort();
        assert_eq!(ours, theirs, "@{cat}");
    }
}
