//! `vireo check-rdb`: exit status and report for intact, damaged and
//! missing files.

use std::path::PathBuf;
use std::process::Command;

use vireo_store::rdb::{self, EncodeOptions};
use vireo_store::{Entry, StrValue, Value};

/// Runs `vireo check-rdb ARGS`; returns the exit code and standard output.
fn check(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vireo"))
        .arg("check-rdb")
        .args(args)
        .output()
        .expect("run vireo");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// A small valid file: two keys in db 0 (one with a TTL in the past), one
/// in db 5.
fn sample() -> Vec<u8> {
    let mut out = Vec::new();
    rdb::write_header(&mut out);
    rdb::write_aux(&mut out, b"redis-ver", b"7.0.15");
    let opts = EncodeOptions::default();
    let v = |s: &[u8]| Value::Str(StrValue::from_bytes(s));
    rdb::write_select_db(&mut out, 0);
    rdb::write_resize_db(&mut out, 2, 1);
    rdb::write_entry(&mut out, b"foo", &Entry::new(v(b"bar")), 0, &opts);
    let old = Entry::new(v(b"x")).with_expire(Some(1000));
    rdb::write_entry(&mut out, b"gone", &old, 0, &opts);
    rdb::write_select_db(&mut out, 5);
    rdb::write_entry(&mut out, b"k5", &Entry::new(v(b"1")), 0, &opts);
    rdb::write_eof(&mut out);
    let crc = rdb::crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let p = std::env::temp_dir().join(format!("vireo-check-{}-{name}", std::process::id()));
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn intact_file_is_reported_and_exits_zero() {
    let p = write("ok.rdb", &sample());
    let (code, out) = check(&[p.to_str().unwrap()]);
    std::fs::remove_file(&p).unwrap();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("RDB version 10"), "{out}");
    assert!(out.contains("AUX FIELD redis-ver = '7.0.15'"), "{out}");
    assert!(
        out.contains("[info] db 0: 2 keys, 1 expires, 1 already expired"),
        "{out}"
    );
    assert!(out.contains("[info] db 5: 1 keys, 0 expires"), "{out}");
    assert!(out.contains("[info] 3 keys read"), "{out}");
    assert!(out.contains("Checksum OK"), "{out}");
    assert!(out.contains("RDB looks OK"), "{out}");
}

#[test]
fn damage_names_offset_key_and_cause() {
    let good = sample();
    // The type byte of "foo" becomes an unknown type.
    let pos = good.windows(4).position(|w| w == b"\x03foo").unwrap() - 1;
    let mut bad = good.clone();
    bad[pos] = 30;
    let p = write("type.rdb", &bad);
    let (code, out) = check(&[p.to_str().unwrap()]);
    std::fs::remove_file(&p).unwrap();
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("RDB ERROR DETECTED"), "{out}");
    assert!(
        out.contains(&format!("[offset {}] unknown RDB type 30", pos + 5)),
        "{out}"
    );
    assert!(out.contains("Reading key 'foo'"), "{out}");

    let p = write("trunc.rdb", &good[..good.len() - 20]);
    let (code, out) = check(&[p.to_str().unwrap()]);
    std::fs::remove_file(&p).unwrap();
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("unexpected end of file"), "{out}");

    let mut flipped = good.clone();
    let n = flipped.len();
    flipped[n - 10] ^= 0x40;
    let p = write("crc.rdb", &flipped);
    let (code, out) = check(&[p.to_str().unwrap()]);
    std::fs::remove_file(&p).unwrap();
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("checksum mismatch"), "{out}");
}

#[test]
fn missing_file_and_usage_exit_one() {
    let (code, out) = check(&["/nonexistent/vireo.rdb"]);
    assert_eq!(code, 1);
    assert!(out.contains("Cannot open RDB file"), "{out}");
    assert_eq!(check(&[]).0, 1);
}
