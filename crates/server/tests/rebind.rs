//! CONFIG SET `port` and `bind` at run time (net/listener.rs): the server
//! moves its listeners, and a failed bind keeps the old ones with Redis's
//! error and the old values.

mod common;

use std::net::TcpListener;

use common::{answers_ping, err, free_port, ok, q, Server};

fn config_get(con: &mut redis::Connection, name: &str) -> String {
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query(con)
        .unwrap();
    v[1].clone()
}

#[test]
fn config_set_port_moves_the_listener() {
    let server = Server::start(&[]);
    let mut con = server.conn();
    let new_port = free_port();
    ok(&mut con, &["CONFIG", "SET", "port", &new_port.to_string()]);
    assert!(answers_ping(new_port));
    assert!(!answers_ping(server.port), "the old port still listens");
    // The connection made before the move carries on.
    ok(&mut con, &["PING"]);
    let info: String = redis::cmd("INFO").arg("server").query(&mut con).unwrap();
    assert!(info.contains(&format!("tcp_port:{new_port}\r\n")), "{info}");
}

#[test]
fn a_port_in_use_is_refused_and_the_old_one_kept() {
    let server = Server::start(&[]);
    let mut con = server.conn();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_port = taken.local_addr().unwrap().port().to_string();
    ok(
        &mut con,
        &["CONFIG", "SET", "oom-score-adj-values", "0 0 0"],
    );
    let e = err(
        &mut con,
        &[
            "CONFIG",
            "SET",
            "maxmemory",
            "10000001",
            "oom-score-adj",
            "yes",
            "port",
            &taken_port,
        ],
    );
    assert_eq!(
        e,
        "ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs."
    );
    assert_eq!(config_get(&mut con, "port"), server.port.to_string());
    assert_eq!(config_get(&mut con, "maxmemory"), "0");
    assert_eq!(config_get(&mut con, "oom-score-adj"), "no");
    assert!(answers_ping(server.port));
}

#[test]
fn bind_changes_and_bad_addresses_fail() {
    let server = Server::start(&[]);
    let mut con = server.conn();
    let e = err(&mut con, &["CONFIG", "SET", "bind", "999.999.999.999"]);
    assert_eq!(
        e,
        "ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses."
    );
    assert_eq!(config_get(&mut con, "bind"), "127.0.0.1");
    assert!(answers_ping(server.port));
    // No address: no TCP listener at all; then back.
    ok(&mut con, &["CONFIG", "SET", "bind", ""]);
    assert!(!answers_ping(server.port));
    ok(&mut con, &["CONFIG", "SET", "bind", "* -::*"]);
    assert!(answers_ping(server.port));
    // unixsocket stays immutable, as in Redis 7.0.
    let e = err(&mut con, &["CONFIG", "SET", "unixsocket", "/tmp/x.sock"]);
    assert!(e.contains("can't set immutable config"), "{e}");
    let _ = q(&mut con, &["PING"]);
}
