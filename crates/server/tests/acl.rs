//! ACL integration tests: one per kind of rule (passwords, commands,
//! subcommands and first arguments, categories, key patterns with read and
//! write permissions, channels, selectors) and per enforcement point (top
//! level, MULTI queueing and EXEC, scripts, SORT's BY/GET, Pub/Sub),
//! plus the ACL log, disconnections, `requirepass`, config `user` lines,
//! the ACL file and start-up refusals.

mod common;

use common::{err, ok, q, Server};
use redis::Value;

fn text(v: Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        Value::SimpleString(s) => s,
        Value::Okay => "OK".into(),
        Value::Int(i) => i.to_string(),
        other => format!("{other:?}"),
    }
}

/// A connection authenticated as `user` with password `pass`.
fn login(s: &Server, user: &str, pass: &str) -> redis::Connection {
    let mut c = s.conn();
    ok(&mut c, &["AUTH", user, pass]);
    c
}

/// The newest ACL LOG entry as (field, value) text pairs.
fn last_log(c: &mut redis::Connection) -> Vec<(String, String)> {
    let Value::Array(entries) = ok(c, &["ACL", "LOG", "1"]) else {
        panic!("ACL LOG is an array")
    };
    let Some(Value::Array(fields)) = entries.into_iter().next() else {
        panic!("no ACL LOG entry")
    };
    fields
        .chunks(2)
        .map(|kv| (text(kv[0].clone()), text(kv[1].clone())))
        .collect()
}

fn log_field(entry: &[(String, String)], name: &str) -> String {
    entry
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .unwrap()
}

#[test]
fn passwords_and_user_states() {
    let s = Server::start(&[]);
    let mut admin = s.conn();
    assert_eq!(text(ok(&mut admin, &["ACL", "WHOAMI"])), "default");
    ok(&mut admin, &["ACL", "SETUSER", "u", ">p1", ">p2"]);
    let mut c = s.conn();
    assert!(
        err(&mut c, &["AUTH", "u", "p1"]).starts_with("WRONGPASS"),
        "off users cannot log in"
    );
    ok(
        &mut admin,
        &["ACL", "SETUSER", "u", "on", "<p1", "+acl|whoami"],
    );
    assert!(err(&mut c, &["AUTH", "u", "p1"]).starts_with("WRONGPASS"));
    ok(&mut c, &["AUTH", "u", "p2"]);
    assert_eq!(text(ok(&mut c, &["ACL", "WHOAMI"])), "u");
}

#[test]
fn hashed_passwords_nopass_and_resetpass() {
    let s = Server::start(&[]);
    let mut admin = s.conn();
    let hash = "34344e4d60c2b6d639b7bd22e18f2b0b91bc34bf0ac5f9952744435093cfb4e6";
    ok(
        &mut admin,
        &["ACL", "SETUSER", "h", "on", &format!("#{hash}"), "+@all"],
    );
    login(&s, "h", "passwd4");
    let e = err(&mut admin, &["ACL", "SETUSER", "h", "#abc"]);
    assert!(
        e.contains("The password hash must be exactly 64 characters"),
        "{e}"
    );
    ok(
        &mut admin,
        &["ACL", "SETUSER", "h", &format!("!{hash}"), "nopass"],
    );
    login(&s, "h", "anything");
    ok(&mut admin, &["ACL", "SETUSER", "h", "resetpass"]);
    assert!(err(&mut s.conn(), &["AUTH", "h", "anything"]).starts_with("WRONGPASS"));
}

#[test]
fn commands_subcommands_first_args_and_categories() {
    let s = Server::start(&[]);
    let mut admin = s.conn();
    ok(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "c",
            "on",
            "nopass",
            "~*",
            "-@all",
            "+get",
            "+client|id",
            "+select|0",
            "+@set",
        ],
    );
    let mut c = login(&s, "c", "x");
    ok(&mut c, &["GET", "k"]);
    ok(&mut c, &["SADD", "s", "a"]);
    ok(&mut c, &["CLIENT", "ID"]);
    ok(&mut c, &["SELECT", "0"]);
    assert_eq!(
        err(&mut c, &["SET", "k", "v"]),
        "NOPERM this user has no permissions to run the 'set' command"
    );
    assert_eq!(
        err(&mut c, &["CLIENT", "LIST"]),
        "NOPERM this user has no permissions to run the 'client|list' command"
    );
    assert!(err(&mut c, &["SELECT", "1"]).starts_with("NOPERM"));
    let Value::Array(fields) = ok(&mut admin, &["ACL", "GETUSER", "c"]) else {
        panic!("GETUSER is a flat map in RESP2")
    };
    let cmds = fields
        .chunks(2)
        .find(|kv| text(kv[0].clone()) == "commands")
        .map(|kv| text(kv[1].clone()))
        .unwrap();
    for part in ["-@all", "+@set", "+get", "+client|id", "+select|0"] {
        assert!(cmds.split(' ').any(|w| w == part), "{part} in {cmds}");
    }
}

#[test]
fn key_patterns_with_read_and_write_permissions() {
    let s = Server::start(&[]);
    let mut admin = s.conn();
    ok(
        &mut admin,
        &[
            "ACL", "SETUSER", "k", "on", "nopass", "+@all", "%R~r*", "%W~w*", "~rw*",
        ],
    );
    ok(&mut admin, &["SET", "r1", "v"]);
    let mut c = login(&s, "k", "x");
    assert_eq!(text(ok(&mut c, &["GET", "r1"])), "v");
    ok(&mut c, &["LPUSH", "w1", "x"]);
    ok(&mut c, &["COPY", "r1", "w2"]);
    ok(&mut c, &["SET", "rw1", "v", "GET"]);
    let denied = "NOPERM this user has no permissions to access one of the keys used as arguments";
    assert_eq!(err(&mut c, &["SET", "r1", "v"]), denied);
    assert_eq!(err(&mut c, &["GET", "w1"]), denied);
    assert_eq!(err(&mut c, &["SET", "w1", "v", "GET"]), denied);
    assert_eq!(err(&mut c, &["GET", "other"]), denied);
    let entry = last_log(&mut admin);
    assert_eq!(log_field(&entry, "reason"), "key");
    assert_eq!(log_field(&entry, "object"), "other");
    assert_eq!(log_field(&entry, "username"), "k");
}

#[test]
fn channels_and_subscribers_losing_them() {
    let s = Server::start(&[]);
    let mut admin = s.conn();
    ok(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "p",
            "on",
            "nopass",
            "+@all",
            "~*",
            "resetchannels",
            "&news:*",
        ],
    );
    let mut c = login(&s, "p", "x");
    ok(&mut c, &["PUBLISH", "news:1", "m"]);
    assert_eq!(
        err(&mut c, &["PUBLISH", "other", "m"]),
        "NOPERM this user has no permissions to access one of the channels used as arguments"
    );
    assert!(
        err(&mut c, &["PSUBSCRIBE", "news:1*"]).starts_with("NOPERM"),
        "patterns match literally"
    );
    let mut sub = login(&s, "p", "x");
    ok(&mut sub, &["SUBSCRIBE", "news:1"]);
    // Widening keeps the subscriber, revoking closes it.
    ok(&mut admin, &["ACL", "SETUSER", "p", "&more"]);
    assert!(text(ok(&mut admin, &["CLIENT", "LIST"])).contains("sub=1"));
    ok(&mut admin, &["ACL", "SETUSER", "p", "resetchannels"]);
    let list = text(ok(&mut admin, &["CLIENT", "LIST"]));
    assert!(!list.contains("sub=1"), "{list}");
}

#[test]
fn selectors_are_alternatives() {
    let s = Server::start(&[]);
    let mut admin = s.conn();
    ok(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "sel",
            "on",
            "nopass",
            "(+get ~read:*)",
            "(+set",
            "~write:*)",
        ],
    );
    let mut c = login(&s, "sel", "x");
    ok(&mut c, &["GET", "read:1"]);
    ok(&mut c, &["SET", "write:1", "v"]);
    assert!(err(&mut c, &["GET", "write:1"]).contains("keys"));
    assert!(err(&mut c, &["PING"]).contains("'ping' command"));
    let e = err(&mut admin, &["ACL", "SETUSER", "sel", "(+get"]);
    assert_eq!(
        e,
        "ERR Unmatched parenthesis in acl selector starting at '(+get'."
    );
    ok(&mut admin, &["ACL", "SETUSER", "sel", "clearselectors"]);
    assert!(err(&mut c, &["GET", "read:1"]).starts_with("NOPERM"));
}

#[test]
fn transactions_check_at_queue_time_and_at_exec() {
    let s = Server::start(&[]);
    let mut admin = s.conn();
    ok(
        &mut admin,
        &[
            "ACL", "SETUSER", "m", "on", "nopass", "~*", "+multi", "+exec", "+incr",
        ],
    );
    let mut c = login(&s, "m", "x");
    ok(&mut c, &["MULTI"]);
    assert!(err(&mut c, &["GET", "k"]).starts_with("NOPERM"));
    assert!(err(&mut c, &["EXEC"]).starts_with("EXECABORT"));
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["INCR", "k"]);
    ok(&mut admin, &["ACL", "SETUSER", "m", "-incr"]);
    // The client library reports EXEC's array by its first error.
    let e = err(&mut c, &["EXEC"]);
    assert!(
        e.starts_with("NOPERM ACLs rules changed between the moment"),
        "{e}"
    );
    assert_eq!(log_field(&last_log(&mut admin), "context"), "multi");
}

#[test]
fn scripts_run_as_their_caller() {
    let s = Server::start(&[]);
    let mut admin = s.conn();
    ok(
        &mut admin,
        &["ACL", "SETUSER", "l", "on", "nopass", "~*", "+eval", "+get"],
    );
    let mut c = login(&s, "l", "x");
    ok(
        &mut c,
        &["EVAL", "return redis.call('get', KEYS[1])", "1", "k"],
    );
    let e = err(&mut c, &["EVAL", "return redis.call('set', 'k', 'v')", "0"]);
    assert!(
        e.contains("The user executing the script can't run this command or subcommand"),
        "{e}"
    );
    let checked = ok(
        &mut c,
        &[
            "EVAL",
            "return {redis.acl_check_cmd('get','k'), redis.acl_check_cmd('set','k','v')}",
            "0",
        ],
    );
    assert_eq!(checked, Value::Array(vec![Value::Int(1), Value::Nil]));
    let entry = last_log(&mut admin);
    assert_eq!(log_field(&entry, "context"), "lua");
    assert_eq!(log_field(&entry, "object"), "set");
}

#[test]
fn sort_patterns_need_read_access_to_every_key() {
    let s = Server::start(&[]);
    let mut admin = s.conn();
    ok(&mut admin, &["RPUSH", "l", "2", "1"]);
    ok(
        &mut admin,
        &["ACL", "SETUSER", "s", "on", "nopass", "+sort", "~l", "~w*"],
    );
    let mut c = login(&s, "s", "x");
    ok(&mut c, &["SORT", "l"]);
    assert_eq!(
        err(&mut c, &["SORT", "l", "BY", "w*"]),
        "ERR BY option of SORT denied due to insufficient ACL permissions."
    );
    assert_eq!(
        err(&mut c, &["SORT", "l", "GET", "#"]),
        "ERR GET option of SORT denied due to insufficient ACL permissions."
    );
    ok(&mut admin, &["ACL", "SETUSER", "s", "%R~*"]);
    ok(&mut c, &["SORT", "l", "BY", "w*"]);
}

#[test]
fn acl_log_records_failed_auth_and_stays_bounded() {
    let s = Server::start(&[]);
    let mut admin = s.conn();
    ok(&mut admin, &["CONFIG", "SET", "acllog-max-len", "3"]);
    let mut c = s.conn();
    for i in 0..50 {
        let user = format!("guess{}", i % 7);
        assert!(err(&mut c, &["AUTH", &user, "nope"]).starts_with("WRONGPASS"));
    }
    let Value::Array(all) = ok(&mut admin, &["ACL", "LOG"]) else {
        panic!("array")
    };
    assert_eq!(all.len(), 3);
    let entry = last_log(&mut admin);
    assert_eq!(log_field(&entry, "reason"), "auth");
    assert_eq!(log_field(&entry, "object"), "AUTH");
    assert_eq!(log_field(&entry, "context"), "toplevel");
    assert!(log_field(&entry, "client-info").contains("cmd=auth"));
    ok(&mut admin, &["ACL", "LOG", "RESET"]);
    assert_eq!(ok(&mut admin, &["ACL", "LOG"]), Value::Array(vec![]));
}

#[test]
fn deleting_a_user_disconnects_its_clients() {
    let s = Server::start(&[]);
    let mut admin = s.conn();
    ok(
        &mut admin,
        &["ACL", "SETUSER", "d", "on", "nopass", "+@all"],
    );
    let mut other = login(&s, "d", "x");
    let mut me = login(&s, "d", "x");
    assert_eq!(
        err(&mut admin, &["ACL", "DELUSER", "default"]),
        "ERR The 'default' user cannot be removed"
    );
    assert_eq!(
        ok(&mut me, &["ACL", "DELUSER", "d", "nosuch"]),
        Value::Int(1)
    );
    assert!(
        q(&mut me, &["PING"]).is_err(),
        "the caller is closed after its reply"
    );
    assert!(q(&mut other, &["PING"]).is_err());
    assert_eq!(text(ok(&mut admin, &["PING"])), "PONG");
}

#[test]
fn requirepass_is_the_default_users_password() {
    let s = Server::start(&["--requirepass", "secret"]);
    let mut c = s.conn();
    assert!(err(&mut c, &["GET", "k"]).starts_with("NOAUTH"));
    assert!(err(&mut c, &["AUTH", "bad"]).starts_with("WRONGPASS"));
    ok(&mut c, &["AUTH", "secret"]);
    ok(&mut c, &["CONFIG", "SET", "requirepass", ""]);
    let mut fresh = s.conn();
    assert!(err(&mut fresh, &["AUTH", "x"]).contains("without any password configured"));
    let d = text(ok(&mut fresh, &["ACL", "LIST"]));
    assert!(d.contains("user default on nopass ~* &* +@all"), "{d}");
}

#[test]
fn hello_authenticates_users() {
    let s = Server::start(&[]);
    let mut admin = s.conn();
    ok(&mut admin, &["ACL", "SETUSER", "h", "on", ">pw", "+@all"]);
    ok(&mut admin, &["ACL", "SETUSER", "default", "-@all"]);
    let mut c = s.conn();
    ok(&mut c, &["HELLO", "2", "AUTH", "h", "pw"]);
    assert_eq!(text(ok(&mut c, &["ACL", "WHOAMI"])), "h");
    assert!(err(&mut c, &["HELLO", "2", "AUTH", "h", "bad"]).starts_with("WRONGPASS"));
    ok(&mut c, &["AUTH", "h", "pw"]);
    ok(&mut c, &["ACL", "SETUSER", "default", "+@all"]);
}

#[test]
fn dryrun_explains_without_running() {
    let s = Server::start(&[]);
    let mut admin = s.conn();
    ok(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "t",
            "+@all",
            "%R~read*",
            "resetchannels",
            "&chan",
        ],
    );
    assert_eq!(
        text(ok(&mut admin, &["ACL", "DRYRUN", "t", "GET", "read"])),
        "OK"
    );
    assert_eq!(
        text(ok(&mut admin, &["ACL", "DRYRUN", "t", "SET", "read", "v"])),
        "This user has no permissions to access the 'read' key"
    );
    assert_eq!(
        text(ok(&mut admin, &["ACL", "DRYRUN", "t", "PUBLISH", "x", "m"])),
        "This user has no permissions to access the 'x' channel"
    );
    assert_eq!(
        err(&mut admin, &["ACL", "DRYRUN", "nobody", "GET", "k"]),
        "ERR User 'nobody' not found"
    );
    assert_eq!(
        err(&mut admin, &["ACL", "DRYRUN", "t", "nosuch"]),
        "ERR Command 'nosuch' not found"
    );
    assert_eq!(
        err(&mut admin, &["ACL", "DRYRUN", "t", "GET"]),
        "ERR wrong number of arguments for 'get' command"
    );
}

#[test]
fn config_user_lines_and_their_errors() {
    let s = Server::start(&["--user", "cfg", "on", ">pw", "~*", "+get"]);
    let mut c = login(&s, "cfg", "pw");
    ok(&mut c, &["GET", "k"]);
    assert!(err(&mut c, &["SET", "k", "v"]).starts_with("NOPERM"));
    for (args, wanted) in [
        (
            vec!["--user", "x", "bogus"],
            "Error in user declaration 'bogus': Syntax error",
        ),
        (vec!["--user", "x", "--user", "x"], "Duplicate user found"),
        (
            vec!["--user", "x", "--aclfile", "/nonexistent"],
            "but not both",
        ),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_vireo"))
            .args(["--port", "0"])
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(wanted), "{args:?}: {stderr}");
    }
}

#[test]
fn acl_file_load_save_and_bad_lines() {
    let dir = common::fresh_dir();
    let file = dir.join("users.acl");
    std::fs::write(
        &file,
        "user alice on >a ~* &* +@all\nuser default on nopass ~* &* +@all\n",
    )
    .unwrap();
    let path = file.to_str().unwrap().to_string();
    let s = Server::start(&["--aclfile", &path]);
    let mut c = login(&s, "alice", "a");
    ok(&mut c, &["ACL", "SETUSER", "bob", "on", ">b", "+get", "~*"]);
    ok(&mut c, &["ACL", "SAVE"]);
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(saved.contains("user bob on #"), "{saved}");
    std::fs::write(&file, format!("{saved}garbage line\n")).unwrap();
    let e = err(&mut c, &["ACL", "LOAD"]);
    assert!(
        e.contains(&format!("{path}:4 should start with user keyword")),
        "{e}"
    );
    std::fs::write(&file, saved).unwrap();
    ok(&mut c, &["ACL", "LOAD"]);
    assert!(
        q(&mut c, &["PING"]).is_err(),
        "ACL LOAD disconnects the users it replaced"
    );
    login(&s, "bob", "b");
    // A bad file refuses start-up, naming file and line.
    std::fs::write(&file, "user ok on\nuser bad +nosuchcommand\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vireo"))
        .args(["--port", "0", "--aclfile", &path])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{path}:2: Error in applying operation '+nosuchcommand'"
        )),
        "{stderr}"
    );
}

#[test]
fn default_user_off_leaves_new_connections_unauthenticated() {
    let s = Server::start(&[]);
    let mut admin = s.conn();
    ok(&mut admin, &["ACL", "SETUSER", "default", "off"]);
    let mut c = s.conn();
    assert!(err(&mut c, &["PING"]).starts_with("NOAUTH"));
    ok(&mut admin, &["ACL", "SETUSER", "default", "on"]);
}

#[test]
fn malformed_rules_name_the_rule() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    for (rule, reason) in [
        ("+nosuch", "Unknown command or category name in ACL"),
        ("bogus", "Syntax error"),
        (
            "+config|get|x",
            "Allowing first-arg of a subcommand is not supported",
        ),
        (
            "<never",
            "The password you are trying to remove from the user does not exist",
        ),
    ] {
        assert_eq!(
            err(&mut c, &["ACL", "SETUSER", "bad", rule]),
            format!("ERR Error in ACL SETUSER modifier '{rule}': {reason}")
        );
    }
    assert_eq!(ok(&mut c, &["ACL", "GETUSER", "bad"]), Value::Nil);
    assert!(err(&mut c, &["ACL", "SETUSER", "a b"]).contains("Usernames can't contain spaces"));
    assert!(err(&mut c, &["ACL", "CAT", "nosuch"]).contains("Unknown category 'nosuch'"));
    assert!(err(&mut c, &["ACL", "GENPASS", "5000"]).contains("ACL GENPASS argument must be"));
    assert_eq!(text(ok(&mut c, &["ACL", "GENPASS", "5"])).len(), 2);
}

/// A non-loopback address of this machine, if it has one.
fn outside_address() -> Option<std::net::IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[test]
fn protected_mode_refuses_remote_clients_without_a_password() {
    let Some(ip) = outside_address() else {
        eprintln!("no non-loopback address: protected mode test skipped");
        return;
    };
    let ip = ip.to_string();
    let s = Server::start(&["--bind", "127.0.0.1", &ip]);
    let remote = |port: u16| {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect((ip.as_str(), port)).unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        c.write_all(b"PING\r\n").unwrap();
        let mut reply = Vec::new();
        let _ = c.read_to_end(&mut reply);
        String::from_utf8_lossy(&reply).into_owned()
    };
    let denied = remote(s.port);
    assert!(
        denied.starts_with("-DENIED Redis is running in protected mode"),
        "{denied}"
    );
    let mut local = s.conn();
    ok(&mut local, &["CONFIG", "SET", "requirepass", "pw"]);
    let accepted = remote(s.port);
    assert!(accepted.starts_with("-NOAUTH"), "{accepted}");
}

#[test]
fn rename_command_hides_and_renames() {
    let s = Server::start(&[
        "--rename-command",
        "set",
        "myset",
        "--rename-command",
        "flushall",
        "",
    ]);
    let mut c = s.conn();
    ok(&mut c, &["MYSET", "k", "v"]);
    assert!(err(&mut c, &["SET", "k", "v"]).contains("unknown command 'SET'"));
    assert!(err(&mut c, &["FLUSHALL"]).contains("unknown command"));
    for (args, wanted) in [
        (
            vec!["--rename-command", "nosuch", "x"],
            "No such command in rename-command",
        ),
        (
            vec!["--rename-command", "set", "get"],
            "Target command name already exists",
        ),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_vireo"))
            .args(["--port", "0"])
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(wanted),
            "{args:?}"
        );
    }
}

#[test]
fn protected_configs_need_enable_protected_configs() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let e = err(&mut c, &["CONFIG", "SET", "dir", "/tmp"]);
    assert_eq!(
        e,
        "ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config"
    );
    let s = Server::start(&["--enable-protected-configs", "local"]);
    ok(&mut s.conn(), &["CONFIG", "SET", "dbfilename", "x.rdb"]);
}

#[test]
fn client_kill_and_list_know_users() {
    let s = Server::start(&[]);
    let mut admin = s.conn();
    ok(
        &mut admin,
        &["ACL", "SETUSER", "k", "on", "nopass", "+@all"],
    );
    let mut victim = login(&s, "k", "x");
    assert!(text(ok(&mut admin, &["CLIENT", "LIST"])).contains("user=k "));
    assert_eq!(
        err(&mut admin, &["CLIENT", "KILL", "USER", "nosuch"]),
        "ERR No such user 'nosuch'"
    );
    assert_eq!(
        ok(&mut admin, &["CLIENT", "KILL", "USER", "k"]),
        Value::Int(1)
    );
    assert!(q(&mut victim, &["PING"]).is_err());
    assert!(!text(ok(&mut admin, &["CLIENT", "LIST"])).contains("user=k "));
}
