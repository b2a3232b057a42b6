//! `vireo check-rdb FILE`: reads an RDB file through the same loader the
//! server uses and reports what it finds, like `redis-check-rdb`: the
//! version, auxiliary fields, keys per database and expiries, and on damage
//! the offset, the key being read and what failed.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;

use vireo_store::rdb::{Item, LoadOptions, Loader, RdbError};

/// Per-database counts.
#[derive(Default)]
struct DbStats {
    keys: u64,
    expires: u64,
    already_expired: u64,
}

/// Runs the check with the arguments after `check-rdb`; returns the exit
/// status (0 when the file is intact, 1 otherwise).
pub fn main(args: &[String]) -> i32 {
    let [path] = args else {
        eprintln!("Usage: vireo check-rdb <rdb-file-name>");
        return 1;
    };
    crate::init_sql();
    report(path)
}

/// Checks the RDB file at `path`, printing the report to standard output
/// (also what start-up prints when the dump it loads is damaged); returns
/// the exit status.
pub fn report(path: &str) -> i32 {
    println!("[offset 0] Checking RDB file {path}");
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) => {
            println!("--- RDB ERROR DETECTED ---");
            println!("[offset 0] Cannot open RDB file {path}: {e}");
            return 1;
        }
    };
    let mut stats: BTreeMap<usize, DbStats> = BTreeMap::new();
    let result = check(BufReader::new(file), &mut stats);
    let total = |f: fn(&DbStats) -> u64| stats.values().map(f).sum::<u64>();
    let code = match result {
        Ok(()) => 0,
        Err(e) => {
            println!("--- RDB ERROR DETECTED ---");
            println!("[offset {}] {}", e.offset, e.kind);
            if let Some(k) = &e.key {
                println!(
                    "[additional info] Reading key '{}'",
                    String::from_utf8_lossy(k)
                );
            }
            1
        }
    };
    for (db, s) in &stats {
        println!(
            "[info] db {db}: {} keys, {} expires, {} already expired",
            s.keys, s.expires, s.already_expired
        );
    }
    println!("[info] {} keys read", total(|s| s.keys));
    println!("[info] {} expires", total(|s| s.expires));
    println!("[info] {} already expired", total(|s| s.already_expired));
    code
}

/// Reads the whole file, printing progress and filling `stats`.
fn check(r: BufReader<File>, stats: &mut BTreeMap<usize, DbStats>) -> Result<(), RdbError> {
    let opts = LoadOptions {
        // A file may use more databases than the default config has.
        databases: usize::MAX,
        ..LoadOptions::default()
    };
    let mut loader = Loader::with_options(r, opts)?;
    println!(
        "[offset {}] RDB version {}",
        loader.offset(),
        loader.version()
    );
    let now = vireo_store::clock::now_ms();
    while let Some(item) = loader.next()? {
        let at = loader.offset();
        match item {
            Item::Aux { key, value } => println!(
                "[offset {at}] AUX FIELD {} = '{}'",
                String::from_utf8_lossy(&key),
                String::from_utf8_lossy(&value)
            ),
            Item::ResizeDb { db, keys, expires } => {
                println!("[offset {at}] Selected DB {db}: {keys} keys, {expires} expires (hint)")
            }
            Item::Entry { db, entry, .. } => {
                let s = stats.entry(db).or_default();
                s.keys += 1;
                if let Some(t) = entry.expire_at() {
                    s.expires += 1;
                    if t < now {
                        s.already_expired += 1;
                    }
                }
            }
            Item::Function { code } => {
                let first = code.split(|&b| b == b'\n').next().unwrap_or_default();
                println!(
                    "[offset {at}] FUNCTION library '{}'",
                    String::from_utf8_lossy(first)
                );
            }
            Item::ModuleAux { module } => {
                println!("[offset {at}] Module aux data of '{module}' skipped")
            }
        }
    }
    let at = loader.offset();
    if loader.empty_keys_skipped() > 0 {
        println!(
            "[offset {at}] {} empty keys skipped",
            loader.empty_keys_skipped()
        );
    }
    match loader.stored_checksum() {
        Some(0) => {
            println!("[offset {at}] RDB file was saved with checksum disabled: no check performed.")
        }
        Some(_) => println!("[offset {at}] Checksum OK"),
        None => {}
    }
    println!("[offset {at}] \\o/ RDB looks OK! \\o/");
    Ok(())
}
