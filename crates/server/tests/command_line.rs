//! redis-server's command line: options become config lines after the
//! config file's, their values quoted, so errors name the line as Redis
//! prints it and unusual forms (name and value in one argument, values
//! starting with `--`, an empty `--save`, multi-word values) configure
//! the server as Redis does. The error cases are compared with a real
//! `redis-server` when one is installed.

mod common;

use std::process::{Command, Stdio};

use common::{diff, Server};

/// What the binary prints on stderr when it refuses `args` (it must exit
/// at once, with a failure status).
fn refusal(bin: &str, args: &[&str]) -> String {
    let out = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run the server");
    assert!(!out.status.success(), "{bin} {args:?} should be refused");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The command lines Redis's suite refuses, with the text its message
/// must hold.
const REFUSED: &[(&[&str], &str)] = &[
    (&["--port"], "'port'\nwrong number of arguments"),
    (
        &["--port", "6380", "--loglevel"],
        "'loglevel'\nwrong number of arguments",
    ),
    (
        &["--port", "6379", "6380"],
        "'port \"6379\" \"6380\"'\nwrong number of arguments",
    ),
    (
        &["--port", "--loglevel", "verbose"],
        "'port \"--loglevel\" \"verbose\"'\nwrong number",
    ),
    (
        &["--port", "--bla", "--loglevel", "verbose"],
        "'port \"--bla\"'\nargument couldn't be parsed into an integer",
    ),
    (
        &["--logfile", "--my--log--file", "--loglevel", "--bla"],
        "'loglevel \"--bla\"'\nargument(s) must be one of the following",
    ),
    (
        &["--shutdown-on-sigint"],
        "'shutdown-on-sigint'\nargument(s) must be one of the following",
    ),
    (
        &["--shutdown-on-sigint", "now force", "--shutdown-on-sigterm"],
        "'shutdown-on-sigterm'\nargument(s) must be",
    ),
    (
        &["--replicaof", "127.0.0.1", "abc"],
        "'replicaof \"127.0.0.1\" \"abc\"'\nInvalid master port",
    ),
    (
        &["--replicaof", "--127.0.0.1", "abc"],
        "'replicaof \"--127.0.0.1\" \"abc\"'\nInvalid master port",
    ),
    (
        &["--replicaof", "--127.0.0.1", "--abc"],
        "'replicaof \"--127.0.0.1\"'\nwrong number of arguments",
    ),
];

#[test]
fn bad_options_are_reported_as_config_lines() {
    for (args, expected) in REFUSED {
        let err = refusal(env!("CARGO_BIN_EXE_vireo"), args);
        assert!(err.contains(expected), "{args:?}: {err}");
    }
    // Options are lines after the (absent) file's text: from line 2.
    let err = refusal(env!("CARGO_BIN_EXE_vireo"), &["--port", "1", "--port"]);
    assert!(err.contains("at line 3\n>>> 'port'"), "{err}");
}

#[test]
fn refusals_match_redis_server_word_for_word() {
    if !diff::redis_server_available() {
        return;
    }
    for (args, _) in REFUSED {
        let ours = refusal(env!("CARGO_BIN_EXE_vireo"), args);
        let theirs = refusal("redis-server", args);
        assert_eq!(ours, theirs, "{args:?}");
    }
}

/// One parameter's value by CONFIG GET.
fn config_get(server: &Server, name: &str) -> String {
    let mut con = server.conn();
    let pair: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query(&mut con)
        .expect("CONFIG GET");
    pair[1].clone()
}

#[test]
fn name_and_value_may_share_one_argument() {
    let s = Server::start(&["--maxmemory 700mb", "--maxmemory-policy 'volatile-lru'"]);
    assert_eq!(config_get(&s, "maxmemory"), "734003200");
    assert_eq!(config_get(&s, "maxmemory-policy"), "volatile-lru");
}

#[test]
fn values_may_start_with_two_dashes() {
    let s = Server::start(&[
        "--proc-title-template",
        "--my--title--template",
        "--loglevel",
        "verbose",
    ]);
    assert_eq!(
        config_get(&s, "proc-title-template"),
        "--my--title--template"
    );
    assert_eq!(config_get(&s, "loglevel"), "verbose");
}

#[test]
fn an_empty_save_means_no_save_points() {
    for args in [
        &["--save", "--loglevel", "verbose"][..],
        &["--loglevel", "verbose", "--save"],
        &[
            "--proc-title-template",
            "--save",
            "--save",
            "",
            "--loglevel",
            "verbose",
        ],
    ] {
        let s = Server::start(args);
        assert_eq!(config_get(&s, "save"), "", "{args:?}");
        assert_eq!(config_get(&s, "loglevel"), "verbose", "{args:?}");
    }
    let s = Server::start(&["--proc-title-template", "--save", "--save", ""]);
    assert_eq!(config_get(&s, "proc-title-template"), "--save");
    assert_eq!(config_get(&s, "save"), "");
}

#[test]
fn multi_argument_values_in_one_argument_or_many() {
    let s = Server::start(&[
        "--shutdown-on-sigint",
        "nosave",
        "force",
        "now",
        "--shutdown-on-sigterm",
        "nosave force",
    ]);
    assert_eq!(config_get(&s, "shutdown-on-sigint"), "nosave now force");
    assert_eq!(config_get(&s, "shutdown-on-sigterm"), "nosave force");
}

#[test]
fn words_before_the_first_option_are_a_config_line() {
    // `vireo FILE loglevel verbose`: Redis reads "loglevel" "verbose" as
    // the first line after the file.
    let dir = common::fresh_dir();
    let conf = dir.join("x.conf");
    std::fs::write(&conf, "").unwrap();
    let port = common::free_port().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_vireo"))
        .arg(&conf)
        .args([
            "loglevel",
            "verbose",
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn");
    common::eventually("the server to start", || {
        common::answers_ping(port.parse().unwrap())
    });
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut con = client.get_connection().unwrap();
    let pair: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("loglevel")
        .query(&mut con)
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(pair[1], "verbose");
}
