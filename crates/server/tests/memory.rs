//! Memory does not creep: a million SET/DEL cycles leave `used_memory`
//! (the allocator's exact count) where it started. Transparent huge pages
//! are off by default (`disable-thp`).

mod common;

fn used_memory(con: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("memory").query(con).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory in INFO memory")
}

#[test]
fn a_million_set_del_cycles_leave_memory_where_it_started() {
    let srv = common::Server::start(&[]);
    let mut con = srv.conn();
    let value = "v".repeat(64);
    let cycle = |con: &mut redis::Connection, rounds: usize| {
        for r in 0..rounds {
            let mut p = redis::pipe();
            for i in 0..5_000 {
                let key = format!("key:{}", (r * 5_000 + i) % 100_000);
                p.cmd("SET").arg(&key).arg(&value).ignore();
                p.cmd("DEL").arg(&key).ignore();
            }
            p.query::<()>(con).unwrap();
        }
    };
    // Warm up so lazily built structures (tables, buffers) exist already.
    cycle(&mut con, 20);
    let before = used_memory(&mut con);
    cycle(&mut con, 200);
    let after = used_memory(&mut con);
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(dbsize, 0);
    assert!(
        (after - before).abs() < 512 * 1024,
        "used_memory went from {before} to {after} after 1M SET/DEL cycles"
    );
}

/// The `THP_enabled` line of a process's status: 0 once it disabled
/// transparent huge pages for itself.
fn thp_enabled(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("THP_enabled:"))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

#[test]
fn transparent_huge_pages_are_off_unless_disable_thp_is_no() {
    let srv = common::Server::start(&[]);
    srv.conn();
    let on_start = thp_enabled(std::process::id());
    if on_start.is_empty() {
        return; // a kernel that does not report it
    }
    assert_eq!(thp_enabled(srv.pid()), "0");
    let srv = common::Server::start(&["--disable-thp", "no"]);
    srv.conn();
    assert_eq!(thp_enabled(srv.pid()), on_start);
}
