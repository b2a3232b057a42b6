//! A script running past `busy-reply-threshold` on one worker, seen from
//! connections on every worker: they answer `-BUSY` (with the KILL command
//! that applies: SCRIPT KILL for EVAL, FUNCTION KILL for functions), even
//! when they were waiting for a key the script holds, while the commands
//! Redis allows during a busy script (SCRIPT/FUNCTION KILL, HELLO, CLIENT
//! SETNAME, SHUTDOWN NOSAVE …) still run.

mod common;

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{q, Server};
use redis::Value;

/// Redis's BUSY reply while an EVAL script runs too long.
const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// Redis's BUSY reply while a function runs too long.
const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// Connections opened one after another: the acceptor deals them to the
/// workers in turn, so eight of them cover the four workers twice.
const CONNECTIONS: usize = 8;

/// A server with four workers, a 50 ms busy threshold and DEBUG.
fn busy_server() -> Server {
    Server::start(&[
        "--io-threads",
        "4",
        "--busy-reply-threshold",
        "50",
        "--enable-debug-command",
        "yes",
    ])
}

/// Runs `args` on a connection of its own in a thread; its result.
fn in_background(server: &Server, args: &[&str]) -> JoinHandle<redis::RedisResult<Value>> {
    let client = server.client();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    std::thread::spawn(move || {
        let mut con = client.get_connection().unwrap();
        con.set_read_timeout(Some(common::REPLY_TIMEOUT)).unwrap();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        q(&mut con, &args)
    })
}

/// The full text of an error reply (code and message).
fn error_text(e: &redis::RedisError) -> String {
    format!("{} {}", e.code().unwrap_or(""), e.detail().unwrap_or(""))
}

/// Waits until `con` answers PING with `busy`.
fn wait_for_busy(con: &mut redis::Connection, busy: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match q(con, &["PING"]) {
            Err(e) if error_text(&e) == busy => return,
            other if Instant::now() > deadline => panic!("never busy: {other:?}"),
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Every connection, whatever its worker, answers Redis's exact BUSY text
/// for an EVAL (and then for a function) until the KILL command that
/// applies; the other KILL is refused with the BUSY text naming the right
/// one, and then every connection works again.
#[test]
fn every_worker_answers_busy_with_the_kill_that_applies() {
    let server = busy_server();
    let mut cons: Vec<_> = (0..CONNECTIONS).map(|_| server.conn()).collect();
    let lib = "#!lua name=spin\nredis.register_function('spin', function() while true do end end)";
    q(&mut cons[0], &["FUNCTION", "LOAD", lib]).unwrap();
    for (busy, body, kill, wrong_kill) in [
        (
            BUSY_EVAL,
            &["EVAL", "while true do end", "0"][..],
            "SCRIPT",
            "FUNCTION",
        ),
        (
            BUSY_FUNCTION,
            &["FCALL", "spin", "0"][..],
            "FUNCTION",
            "SCRIPT",
        ),
    ] {
        let runner = in_background(&server, body);
        wait_for_busy(&mut cons[0], busy);
        for con in cons.iter_mut() {
            let err = q(con, &["GET", "k"]).unwrap_err();
            assert_eq!(error_text(&err), busy);
        }
        let err = q(&mut cons[1], &[wrong_kill, "KILL"]).unwrap_err();
        assert_eq!(error_text(&err), busy, "{wrong_kill} KILL");
        assert_eq!(q(&mut cons[2], &[kill, "KILL"]).unwrap(), Value::Okay);
        let err = runner.join().unwrap().unwrap_err();
        assert!(error_text(&err).contains("Script killed by user"), "{err}");
        for con in cons.iter_mut() {
            assert_eq!(
                q(con, &["PING"]).unwrap(),
                Value::SimpleString("PONG".into())
            );
        }
    }
}

/// A command that started waiting for a key a script holds, before the
/// script became busy, is answered BUSY once it is (its worker is not
/// stuck behind the lock, so its other connections are served too), and
/// runs normally after the script ended.
#[test]
fn command_waiting_for_a_held_key_answers_busy() {
    let server = busy_server();
    let mut con = server.conn();
    // Time enough for the waiters to queue up before the script is busy.
    q(&mut con, &["CONFIG", "SET", "busy-reply-threshold", "1000"]).unwrap();
    let mut started = server.client().get_connection().unwrap();
    started
        .set_read_timeout(Some(common::REPLY_TIMEOUT))
        .unwrap();
    let mut pubsub = started.as_pubsub();
    pubsub.subscribe("started").unwrap();
    // The script holds its key's shard (every shard, on its first run),
    // and says when it runs.
    let spin = "redis.call('publish', 'started', 1) redis.call('get', KEYS[1]) while true do end";
    let runner = in_background(&server, &["EVAL", spin, "1", "held"]);
    pubsub.get_message().unwrap();
    let waiters: Vec<_> = (0..CONNECTIONS)
        .map(|_| in_background(&server, &["SET", "held", "v"]))
        .collect();
    let mut others: Vec<_> = (0..CONNECTIONS).map(|_| server.conn()).collect();
    wait_for_busy(&mut others[0], BUSY_EVAL);
    for w in waiters {
        let err = w.join().unwrap().unwrap_err();
        assert_eq!(error_text(&err), BUSY_EVAL);
    }
    for con in others.iter_mut() {
        let err = q(con, &["PING"]).unwrap_err();
        assert_eq!(error_text(&err), BUSY_EVAL);
    }
    assert_eq!(q(&mut others[1], &["SCRIPT", "KILL"]).unwrap(), Value::Okay);
    assert!(runner.join().unwrap().is_err());
    for con in others.iter_mut() {
        assert_eq!(q(con, &["SET", "held", "v"]).unwrap(), Value::Okay);
    }
}

/// Redis's "Timedout scripts and unblocked command": a busy script that
/// polls CLIENT LIST (allowed by DEBUG SET-DISABLE-DENY-SCRIPTS) stops
/// when another connection names itself with HELLO … SETNAME (allowed
/// while busy, on whatever worker); a client blocked on the script's key
/// gets only what the whole script pushed.
#[test]
fn allowed_commands_reach_a_busy_script_from_other_workers() {
    let server = busy_server();
    let mut con = server.conn();
    assert_eq!(
        q(&mut con, &["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]).unwrap(),
        Value::Okay
    );
    let popper = in_background(&server, &["BLPOP", "x", "0"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !String::from_utf8_lossy(&info_clients(&mut con)).contains("blocked_clients:1") {
        assert!(Instant::now() < deadline, "BLPOP never blocked");
        std::thread::sleep(Duration::from_millis(10));
    }
    let script = "redis.call('lpush', KEYS[1], 'y')\n\
        local clients\n\
        while true do\n\
          clients = redis.call('client', 'list')\n\
          if string.find(clients, 'abortscript') ~= nil then break end\n\
        end\n\
        redis.call('lpush', KEYS[1], 'z')\n\
        return clients";
    let runner = in_background(&server, &["EVAL", script, "1", "x"]);
    let mut others: Vec<_> = (0..CONNECTIONS).map(|_| server.conn()).collect();
    wait_for_busy(&mut others[0], BUSY_EVAL);
    // Every connection but the last asks something refused while busy.
    let last = others.len() - 1;
    for con in &mut others[..last] {
        assert_eq!(error_text(&q(con, &["LLEN", "x"]).unwrap_err()), BUSY_EVAL);
    }
    q(&mut others[last], &["HELLO", "2", "SETNAME", "abortscript"]).unwrap();
    match runner.join().unwrap().unwrap() {
        Value::BulkString(list) => assert!(String::from_utf8_lossy(&list).contains("abortscript")),
        other => panic!("script reply {other:?}"),
    }
    let popped = popper.join().unwrap().unwrap();
    assert_eq!(
        popped,
        Value::Array(vec![
            Value::BulkString(b"x".to_vec()),
            Value::BulkString(b"z".to_vec())
        ])
    );
    q(&mut con, &["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0"]).unwrap();
    let err = q(
        &mut con,
        &["EVAL", "return redis.call('client', 'list')", "0"],
    )
    .unwrap_err();
    assert!(
        error_text(&err).contains("This Redis command is not allowed from script"),
        "{err}"
    );
}

/// INFO's clients section.
fn info_clients(con: &mut redis::Connection) -> Vec<u8> {
    match q(con, &["INFO", "clients"]).unwrap() {
        Value::BulkString(b) => b,
        Value::VerbatimString { text, .. } => text.into_bytes(),
        other => panic!("INFO reply {other:?}"),
    }
}

/// A script that wrote cannot be killed, whatever worker asks; SHUTDOWN
/// NOSAVE from another worker ends the server, refusing connections from
/// the moment its client sees the connection close.
#[test]
fn unkillable_script_yields_to_shutdown_nosave_from_another_worker() {
    let server = busy_server();
    let runner = in_background(
        &server,
        &[
            "EVAL",
            "redis.call('set', KEYS[1], 1) while true do end",
            "1",
            "w",
        ],
    );
    let mut others: Vec<_> = (0..CONNECTIONS).map(|_| server.conn()).collect();
    wait_for_busy(&mut others[0], BUSY_EVAL);
    for con in others.iter_mut() {
        let err = q(con, &["SCRIPT", "KILL"]).unwrap_err();
        assert_eq!(err.code(), Some("UNKILLABLE"));
    }
    let _ = q(&mut others[CONNECTIONS - 1], &["SHUTDOWN", "NOSAVE"]);
    // Once SHUTDOWN's connection is closed, the listeners are: a new
    // connection is refused, not accepted and then dropped.
    let refused = std::net::TcpStream::connect(("127.0.0.1", server.port))
        .expect_err("a connection after SHUTDOWN NOSAVE");
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    assert!(
        runner.join().unwrap().is_err(),
        "the script's client sees the server go"
    );
}
