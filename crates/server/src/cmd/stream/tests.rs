//! Unit tests of the stream family's helpers that need no server.

use super::*;

fn stream_of(ids: &[(u64, u64)]) -> Stream {
    let mut s = Stream::new();
    for &(ms, seq) in ids {
        let id = AddId::Exact(StreamId::new(ms, seq));
        s.add(id, [(&b"f"[..], &b"v"[..])], NodeLimits::default(), 0)
            .unwrap();
    }
    s
}

fn cmd(v: &[&str]) -> Vec<Vec<u8>> {
    v.iter().map(|s| s.as_bytes().to_vec()).collect()
}

#[test]
fn approximate_maxlen_propagates_as_the_exact_length() {
    let s = stream_of(&[(1, 0), (2, 0), (3, 0)]);
    let mut c = cmd(&["XTRIM", "s", "MAXLEN", "~", "1"]);
    let t = TrimArgs {
        trim: Trim {
            strategy: TrimStrategy::MaxLen(1),
            approx: true,
            limit: 0,
        },
        arg_idx: 4,
    };
    rewrite_trim(&mut c, &t, &s);
    assert_eq!(c, cmd(&["XTRIM", "s", "MAXLEN", "=", "3"]));
}

#[test]
fn approximate_minid_propagates_as_the_first_id_tombstones_included() {
    let mut s = stream_of(&[(1, 0), (2, 0), (3, 0)]);
    s.delete(&[StreamId::new(1, 0)]);
    let mut c = cmd(&["XADD", "s", "MINID", "~", "9", "*", "f", "v"]);
    let t = TrimArgs {
        trim: Trim {
            strategy: TrimStrategy::MinId(StreamId::new(9, 0)),
            approx: true,
            limit: 0,
        },
        arg_idx: 4,
    };
    rewrite_trim(&mut c, &t, &s);
    // The node still starts with the tombstone of 1-0, which a replayed
    // MINID = 1-0 keeps exactly as the original trim did.
    assert_eq!(c[3], b"=");
    assert_eq!(c[4], b"1-0");
}

#[test]
fn ids_are_written_as_ms_dash_seq() {
    assert_eq!(id_text(StreamId::new(5, 7)), b"5-7");
    assert_eq!(
        id_text(StreamId::MAX),
        b"18446744073709551615-18446744073709551615"
    );
}

#[test]
fn arity_errors_name_the_command() {
    assert_eq!(
        wrong_arity("xadd"),
        "ERR wrong number of arguments for 'xadd' command"
    );
}
