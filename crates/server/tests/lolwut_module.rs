//! LOLWUT and MODULE against the real binary: replies compared byte for
//! byte with redis-server where they are deterministic (the plain edition,
//! Schotter's first two rows, every MODULE reply and refusal), the shape
//! of the random art otherwise, the log line of a failed MODULE LOAD, and
//! start-up stopped by `loadmodule` as Redis stops. Differential parts
//! skip with a note when redis-server is not installed.

mod common;

use common::wait_for_log;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::diff::{redis_server_available, start_redis_with, Raw};
use common::{fresh_dir, Server};

/// Arguments as byte vectors for a raw connection.
fn cmd(args: &[&str]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.as_bytes().to_vec()).collect()
}

/// Sends the same commands to Vireo and Redis and asserts identical bytes.
fn same_replies(vireo: u16, redis: u16, commands: &[&[&str]]) {
    let (mut v, mut r) = (Raw::connect(vireo), Raw::connect(redis));
    for c in commands {
        let (a, b) = (v.send(&cmd(c)), r.send(&cmd(c)));
        if c[0] == "HELLO" {
            // Switches the protocol; its reply holds the client id.
            continue;
        }
        assert_eq!(
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b),
            "{c:?}"
        );
    }
}

/// The text of a bulk or verbatim reply (RESP2 `$`), header stripped.
fn bulk_text(reply: &[u8]) -> String {
    let s = String::from_utf8(reply.to_vec()).expect("utf-8 art");
    let (_, body) = s.split_once("\r\n").expect("bulk header");
    body.strip_suffix("\r\n").expect("bulk end").to_string()
}

#[test]
fn lolwut_deterministic_output_is_redis_s() {
    if !redis_server_available() {
        return;
    }
    let vireo = Server::start(&[]);
    let redis = start_redis_with(&[]);
    same_replies(
        vireo.port,
        redis.port,
        &[
            &["LOLWUT"],
            &["lolwut", "version", "7"],
            &["LOLWUT", "VERSION", "4"],
            &["LOLWUT", "VERSION", "-1"],
            &["LOLWUT", "VERSION"],
            &["LOLWUT", "10", "20"],
            &["LOLWUT", "VERSION", "x"],
            &["LOLWUT", "VERSION", "5", "abc"],
            &["LOLWUT", "VERSION", "5", "10", "2", "x"],
            &["LOLWUT", "VERSION", "6", "1", "y"],
            // Schotter's first two rows are not random.
            &["LOLWUT", "VERSION", "5", "40", "5", "2"],
            &["LOLWUT", "VERSION", "5", "66", "8", "1"],
            &["LOLWUT", "VERSION", "5", "-3", "0", "-1"],
            &["LOLWUT", "VERSION", "5", "2", "3", "2"],
            &["LOLWUT", "VERSION", "5", "5000", "200", "2", "ignored"],
            &["LOLWUT", "VERSION", "4294967301", "31", "3", "2"],
            &["HELLO", "3"],
            &["LOLWUT"],
            &["LOLWUT", "VERSION", "5", "40", "5", "2"],
        ],
    );
}

/// Rows of an art reply and their widths (braille characters, or cells
/// painted with colour escapes), caption apart.
fn art_shape(text: &str, caption_lines: usize) -> (Vec<usize>, Vec<String>) {
    let lines: Vec<&str> = text.lines().collect();
    let (art, caption) = lines.split_at(lines.len() - caption_lines);
    let width = |l: &str| match l.matches("\x1b[0m").count() {
        0 => l.chars().count(),
        cells => cells,
    };
    let widths = art.iter().map(|l| width(l)).collect();
    (widths, caption.iter().map(|l| l.to_string()).collect())
}

#[test]
fn lolwut_random_editions_have_redis_s_shape() {
    if !redis_server_available() {
        return;
    }
    let vireo = Server::start(&[]);
    let redis = start_redis_with(&[]);
    let (mut v, mut r) = (Raw::connect(vireo.port), Raw::connect(redis.port));
    let cases: [(&[&str], usize); 4] = [
        (&["LOLWUT", "VERSION", "5"], 1),
        (&["LOLWUT", "VERSION", "5", "30", "4", "7"], 1),
        (&["LOLWUT", "VERSION", "6"], 2),
        (&["LOLWUT", "VERSION", "6", "33", "9"], 2),
    ];
    for (c, caption_lines) in cases {
        let ours = bulk_text(&v.send(&cmd(c)));
        let theirs = bulk_text(&r.send(&cmd(c)));
        assert_eq!(
            art_shape(&ours, caption_lines),
            art_shape(&theirs, caption_lines),
            "{c:?}"
        );
    }
}

#[test]
fn module_replies_are_redis_s() {
    if !redis_server_available() {
        return;
    }
    let missing = "/nonexistent-vireo-dir/module.so";
    let commands: &[&[&str]] = &[
        &["MODULE", "HELP"],
        &["MODULE", "LIST"],
        &["MODULE", "LIST", "extra"],
        &["MODULE", "LOAD", missing],
        &["MODULE", "LOAD", missing, "a", "b"],
        &["MODULE", "LOADEX", missing],
        &["MODULE", "LOADEX", missing, "CONFIG", "a"],
        &["MODULE", "LOADEX", missing, "bogus"],
        &["MODULE", "LOADEX", missing, "CONFIG", "a", "b", "ARGS", "x"],
        &["MODULE", "UNLOAD", "nosuchmodule"],
        &["MODULE", "UNLOAD"],
        &["MODULE", "NOPE"],
        &["MODULE"],
        &[
            // (MODULE itself lists its subcommands in Redis's hash order.)
            "COMMAND",
            "INFO",
            "module|load",
            "module|loadex",
            "module|list",
        ],
        &[
            "COMMAND",
            "INFO",
            "module|help",
            "module|unload",
            "lolwut",
            "debug",
        ],
    ];
    // Refused by the default `enable-module-command no`, then allowed.
    for extra in [&[][..], &["--enable-module-command", "yes"][..]] {
        let vireo = Server::start(extra);
        let redis = start_redis_with(extra);
        same_replies(vireo.port, redis.port, commands);
    }
}

#[test]
fn a_failed_load_logs_why_in_redis_s_words() {
    let dir = fresh_dir();
    let log = dir.join("vireo.log");
    let vireo = Server::start_in(
        dir.clone(),
        &[
            "--enable-module-command",
            "yes",
            "--logfile",
            log.to_str().unwrap(),
        ],
    );
    let mut c = vireo.conn();
    let missing = "/nonexistent-vireo-dir/m.so";
    let e = common::err(&mut c, &["MODULE", "LOAD", missing]);
    assert_eq!(
        e,
        "ERR Error loading the extension. Please check the server logs."
    );
    let line = format!(
        "# Module {missing} failed to load: {missing}: cannot open shared object file: No such file or directory"
    );
    assert!(wait_for_log(&log, &line).contains(&line));
    // A file without execute permission.
    let lib = dir.join("plain.so");
    std::fs::write(&lib, b"not a library").unwrap();
    common::err(&mut c, &["MODULE", "LOAD", lib.to_str().unwrap()]);
    let line = format!(
        "Module {} failed to load: It does not have execute permissions.",
        lib.display()
    );
    assert!(wait_for_log(&log, &line).contains(&line));
    // LOADEX's option errors are logged at notice level.
    common::err(
        &mut c,
        &["MODULE", "LOADEX", missing, "CONFIG", "only-name"],
    );
    let line = "* CONFIG specified without name value pair";
    assert!(wait_for_log(&log, line).contains(line));
}

/// Runs a server binary with `args` (a config file's worth of options)
/// until it exits; returns its status code and standard output.
fn run_to_exit(bin: &str, args: &[&str]) -> (Option<i32>, String) {
    let dir = fresh_dir();
    let mut child = Command::new(bin)
        .args([
            "--port",
            &common::free_port().to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .arg("--dir")
        .arg(&dir)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let out = child.wait_with_output().expect("output");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn loadmodule_and_module_options_stop_start_up_as_redis() {
    let vireo = env!("CARGO_BIN_EXE_vireo");
    let cases: [(&[&str], &str); 2] = [
        (
            &["--loadmodule", "/nonexistent-vireo-dir/m.so", "arg1"],
            "Can't load module from /nonexistent-vireo-dir/m.so: server aborting",
        ),
        (
            &["--mymodule.option", "1"],
            "Module Configuration detected without loadmodule directive or no ApplyConfig call: aborting",
        ),
    ];
    let with_redis = redis_server_available();
    for (args, fatal) in cases {
        let (code, out) = run_to_exit(vireo, args);
        assert_eq!(code, Some(1), "{out}");
        assert!(out.contains(fatal), "{out}");
        if with_redis {
            let (code, out) = run_to_exit("redis-server", args);
            assert_eq!(code, Some(1), "{out}");
            assert!(out.contains(fatal), "{out}");
        }
    }
    // Without its path, `loadmodule` is a bad directive.
    let (code, _) = run_to_exit(vireo, &["--loadmodule"]);
    assert_eq!(code, Some(1));
}
