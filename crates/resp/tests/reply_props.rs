//! Property tests for the reply encoder: every reply tree encodes to
//! well-formed RESP2/RESP3 that decodes back to the expected value, and
//! partial consumption never corrupts the byte stream.

use proptest::prelude::*;
use vireo_resp::{format_double, Protocol, ReplyBuf};

/// A reply as a command implementation would produce it.
#[derive(Debug, Clone)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    BulkInt(i64),
    Null,
    NullArray,
    Array(Vec<Reply>),
    Map(Vec<(Reply, Reply)>),
    Set(Vec<Reply>),
    Push(Vec<Reply>),
    Double(f64),
    Bool(bool),
    Verbatim(Vec<u8>),
    Big(String),
}

/// A value as decoded from the wire.
#[derive(Debug, Clone, PartialEq)]
enum Wire {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Wire>>),
    Map(Vec<(Wire, Wire)>),
    Set(Vec<Wire>),
    Push(Vec<Wire>),
    Null,
    Double(Vec<u8>),
    Bool(bool),
    Verbatim(Vec<u8>, Vec<u8>),
    Big(Vec<u8>),
}

fn sanitize(s: &str) -> Vec<u8> {
    s.bytes()
        .map(|c| if c == b'\r' || c == b'\n' { b' ' } else { c })
        .collect()
}

/// What `r` must decode to in protocol `p`.
fn expected(r: &Reply, p: Protocol) -> Wire {
    let v3 = p == Protocol::Resp3;
    let all = |v: &[Reply]| v.iter().map(|x| expected(x, p)).collect::<Vec<_>>();
    match r {
        Reply::Simple(s) => Wire::Simple(sanitize(s)),
        Reply::Error(s) => Wire::Error(sanitize(s)),
        Reply::Int(i) => Wire::Int(*i),
        Reply::Bulk(b) => Wire::Bulk(Some(b.clone())),
        Reply::BulkInt(i) => Wire::Bulk(Some(i.to_string().into_bytes())),
        Reply::Null if v3 => Wire::Null,
        Reply::Null => Wire::Bulk(None),
        Reply::NullArray if v3 => Wire::Null,
        Reply::NullArray => Wire::Array(None),
        Reply::Array(v) => Wire::Array(Some(all(v))),
        Reply::Map(kv) if v3 => Wire::Map(
            kv.iter()
                .map(|(k, v)| (expected(k, p), expected(v, p)))
                .collect(),
        ),
        Reply::Map(kv) => Wire::Array(Some(
            kv.iter()
                .flat_map(|(k, v)| [expected(k, p), expected(v, p)])
                .collect(),
        )),
        Reply::Set(v) if v3 => Wire::Set(all(v)),
        Reply::Push(v) if v3 => Wire::Push(all(v)),
        Reply::Set(v) | Reply::Push(v) => Wire::Array(Some(all(v))),
        Reply::Double(d) if v3 => Wire::Double(format_double(*d).into_bytes()),
        Reply::Double(d) => Wire::Bulk(Some(format_double(*d).into_bytes())),
        Reply::Bool(b) if v3 => Wire::Bool(*b),
        Reply::Bool(b) => Wire::Int(i64::from(*b)),
        Reply::Verbatim(t) if v3 => Wire::Verbatim(b"txt".to_vec(), t.clone()),
        Reply::Verbatim(t) => Wire::Bulk(Some(t.clone())),
        Reply::Big(d) if v3 => Wire::Big(d.clone().into_bytes()),
        Reply::Big(d) => Wire::Bulk(Some(d.clone().into_bytes())),
    }
}

fn encode(r: &Reply, out: &mut ReplyBuf) {
    match r {
        Reply::Simple(s) => out.simple(s),
        Reply::Error(s) => out.error(s),
        Reply::Int(i) => out.int(*i),
        Reply::Bulk(b) => out.bulk(b),
        Reply::BulkInt(i) => out.bulk_int(*i),
        Reply::Null => out.null(),
        Reply::NullArray => out.null_array(),
        Reply::Array(v) => {
            out.array(v.len());
            v.iter().for_each(|x| encode(x, out));
        }
        Reply::Map(kv) => {
            out.map(kv.len());
            for (k, v) in kv {
                encode(k, out);
                encode(v, out);
            }
        }
        Reply::Set(v) => {
            out.set(v.len());
            v.iter().for_each(|x| encode(x, out));
        }
        Reply::Push(v) => {
            out.push(v.len());
            v.iter().for_each(|x| encode(x, out));
        }
        Reply::Double(d) => out.double(*d),
        Reply::Bool(b) => out.boolean(*b),
        Reply::Verbatim(t) => out.verbatim("txt", t),
        Reply::Big(d) => out.big_number(d),
    }
}

/// Minimal strict RESP3 decoder; returns the value and bytes used.
fn decode(b: &[u8]) -> Result<(Wire, usize), String> {
    let nl = b.windows(2).position(|w| w == b"\r\n").ok_or("no CRLF")?;
    let line = &b[1..nl];
    let rest = nl + 2;
    let num = |l: &[u8]| -> Result<i64, String> {
        std::str::from_utf8(l)
            .map_err(|e| e.to_string())?
            .parse::<i64>()
            .map_err(|e| format!("{e}: {:?}", String::from_utf8_lossy(l)))
    };
    let aggregate = |n: i64, mut pos: usize| -> Result<(Vec<Wire>, usize), String> {
        let mut v = Vec::new();
        for _ in 0..n {
            let (x, used) = decode(&b[pos..])?;
            v.push(x);
            pos += used;
        }
        Ok((v, pos))
    };
    let blob = |n: i64| -> Result<(Vec<u8>, usize), String> {
        let n = usize::try_from(n).map_err(|e| e.to_string())?;
        let end = rest + n;
        if b.get(end..end + 2) != Some(&b"\r\n"[..]) {
            return Err("bad blob terminator".into());
        }
        Ok((b[rest..end].to_vec(), end + 2))
    };
    Ok(match b.first().ok_or("empty")? {
        b'+' => (Wire::Simple(line.to_vec()), rest),
        b'-' => (Wire::Error(line.to_vec()), rest),
        b':' => (Wire::Int(num(line)?), rest),
        b'_' if line.is_empty() => (Wire::Null, rest),
        b',' => (Wire::Double(line.to_vec()), rest),
        b'(' => (Wire::Big(line.to_vec()), rest),
        b'#' if line == b"t" || line == b"f" => (Wire::Bool(line == b"t"), rest),
        b'$' if line == b"-1" => (Wire::Bulk(None), rest),
        b'*' if line == b"-1" => (Wire::Array(None), rest),
        b'$' => {
            let (d, used) = blob(num(line)?)?;
            (Wire::Bulk(Some(d)), used)
        }
        b'=' => {
            let (d, used) = blob(num(line)?)?;
            if d.len() < 4 || d[3] != b':' {
                return Err("bad verbatim".into());
            }
            (Wire::Verbatim(d[..3].to_vec(), d[4..].to_vec()), used)
        }
        b'*' => {
            let (v, used) = aggregate(num(line)?, rest)?;
            (Wire::Array(Some(v)), used)
        }
        b'~' => {
            let (v, used) = aggregate(num(line)?, rest)?;
            (Wire::Set(v), used)
        }
        b'>' => {
            let (v, used) = aggregate(num(line)?, rest)?;
            (Wire::Push(v), used)
        }
        b'%' => {
            let (v, used) = aggregate(num(line)?.checked_mul(2).ok_or("overflow")?, rest)?;
            let mut it = v.into_iter();
            let mut kv = Vec::new();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                kv.push((k, v));
            }
            (Wire::Map(kv), used)
        }
        other => return Err(format!("unknown type byte {other}")),
    })
}

fn leaf() -> impl Strategy<Value = Reply> {
    prop_oneof![
        "[ -~\r\n]{0,20}".prop_map(Reply::Simple),
        "(ERR|WRONGTYPE) [ -~\r\n]{0,20}".prop_map(Reply::Error),
        any::<i64>().prop_map(Reply::Int),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Reply::Bulk),
        any::<i64>().prop_map(Reply::BulkInt),
        Just(Reply::Null),
        Just(Reply::NullArray),
        any::<f64>().prop_map(Reply::Double),
        any::<bool>().prop_map(Reply::Bool),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Reply::Verbatim),
        "-?[1-9][0-9]{0,40}".prop_map(Reply::Big),
    ]
}

fn reply_tree() -> impl Strategy<Value = Reply> {
    leaf().prop_recursive(4, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Reply::Array),
            proptest::collection::vec((inner.clone(), inner.clone()), 0..4).prop_map(Reply::Map),
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Reply::Set),
            proptest::collection::vec(inner, 0..6).prop_map(Reply::Push),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn replies_decode_to_expected_values(
        replies in proptest::collection::vec(reply_tree(), 1..6),
        resp3 in any::<bool>(),
    ) {
        let proto = if resp3 { Protocol::Resp3 } else { Protocol::Resp2 };
        let mut out = ReplyBuf::new(proto);
        for r in &replies {
            encode(r, &mut out);
        }
        let bytes = out.as_bytes();
        let mut pos = 0;
        for r in &replies {
            let (w, used) = decode(&bytes[pos..]).map_err(TestCaseError::fail)?;
            prop_assert_eq!(w, expected(r, proto));
            pos += used;
        }
        prop_assert_eq!(pos, bytes.len());
    }

    #[test]
    fn partial_consumption_preserves_stream(
        replies in proptest::collection::vec(reply_tree(), 1..20),
        steps in proptest::collection::vec(0usize..64, 1..64),
    ) {
        // Reference: everything encoded into one buffer.
        let mut reference = ReplyBuf::new(Protocol::Resp3);
        for r in &replies {
            encode(r, &mut reference);
        }
        // Interleave encoding with partial "socket writes".
        let mut out = ReplyBuf::new(Protocol::Resp3);
        let mut sent = Vec::new();
        let mut step = steps.iter().cycle();
        for r in &replies {
            encode(r, &mut out);
            let n = (*step.next().unwrap_or(&1)).min(out.len());
            sent.extend_from_slice(&out.as_bytes()[..n]);
            out.consume(n);
        }
        sent.extend_from_slice(out.as_bytes());
        out.consume(out.len());
        prop_assert!(out.is_empty());
        prop_assert_eq!(sent, reference.as_bytes().to_vec());
    }

    #[test]
    fn truncate_to_mark_undoes_exactly(
        before in proptest::collection::vec(reply_tree(), 0..4),
        after in proptest::collection::vec(reply_tree(), 0..4),
        consumed in 0usize..32,
    ) {
        let mut out = ReplyBuf::new(Protocol::Resp2);
        for r in &before {
            encode(r, &mut out);
        }
        let snapshot = out.as_bytes().to_vec();
        let m = out.mark();
        for r in &after {
            encode(r, &mut out);
        }
        let c = consumed.min(snapshot.len());
        out.consume(c);
        out.truncate(m);
        prop_assert_eq!(out.as_bytes(), &snapshot[c..]);
    }
}
