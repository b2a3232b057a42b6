//! Property tests for the request parser: chunked delivery must not change
//! what is parsed, arbitrary input must never panic, and large commands
//! arriving in small pieces must be parsed in linear time.

use proptest::prelude::*;
use std::time::{Duration, Instant};
use vireo_resp::{OwnedArgs, ParseLimits, Parser};

/// Everything a connection observes while parsing a byte stream.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    /// Completed commands, in order (zero-arg commands included).
    commands: Vec<OwnedArgs>,
    /// The protocol error that stopped parsing, if any.
    error: Option<String>,
    /// Bytes left unconsumed at the end (an incomplete command); 0 after an
    /// error.
    leftover: usize,
}

/// Simulates a connection: appends each chunk to a buffer, parses as many
/// commands as possible, drains consumed bytes.
fn run_chunked(chunks: &[&[u8]], limits: &ParseLimits) -> Outcome {
    let mut parser = Parser::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut commands = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match parser.parse(&buf, limits) {
                Ok(Some(n)) => {
                    assert!(n > 0 && n <= buf.len(), "consumed {n} of {}", buf.len());
                    commands.push(parser.args(&buf).to_owned());
                    buf.drain(..n);
                }
                Ok(None) => break,
                Err(e) => {
                    // The connection is closed; how much was buffered when
                    // the error was noticed depends on chunking.
                    return Outcome {
                        commands,
                        error: Some(e.message),
                        leftover: 0,
                    };
                }
            }
        }
    }
    Outcome {
        commands,
        error: None,
        leftover: buf.len(),
    }
}

/// Splits `data` at the given (unsorted, possibly out of range) cut points.
fn split_at_points<'a>(data: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|c| {
            if data.is_empty() {
                0
            } else {
                c % (data.len() + 1)
            }
        })
        .collect();
    points.push(0);
    points.push(data.len());
    points.sort_unstable();
    points.dedup();
    points.windows(2).map(|w| &data[w[0]..w[1]]).collect()
}

/// One command of a valid stream, with how it is put on the wire.
#[derive(Debug, Clone)]
enum Wire {
    /// `*n` multibulk encoding.
    Multibulk(Vec<Vec<u8>>),
    /// `*0` or `*-1`: zero arguments.
    EmptyMultibulk(bool),
    /// Inline, every argument double-quoted with escapes.
    InlineQuoted(Vec<Vec<u8>>, bool),
    /// Inline, plain tokens (single-quoted when `quote` is set).
    InlinePlain(Vec<Vec<u8>>, bool),
}

impl Wire {
    /// Arguments the parser must produce for this command.
    fn expected(&self) -> OwnedArgs {
        match self {
            Wire::Multibulk(a) | Wire::InlineQuoted(a, _) | Wire::InlinePlain(a, _) => {
                OwnedArgs::from_slices(a)
            }
            Wire::EmptyMultibulk(_) => OwnedArgs::new(),
        }
    }

    /// Appends the wire encoding.
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Wire::Multibulk(a) => OwnedArgs::from_slices(a).write_resp(out),
            Wire::EmptyMultibulk(neg) => {
                out.extend_from_slice(if *neg { b"*-1\r\n" } else { b"*0\r\n" })
            }
            Wire::InlineQuoted(a, crlf) => {
                for (i, arg) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(b' ');
                    }
                    out.push(b'"');
                    for &c in arg {
                        match c {
                            b'"' => out.extend_from_slice(b"\\\""),
                            b'\\' => out.extend_from_slice(b"\\\\"),
                            b'\n' => out.extend_from_slice(b"\\n"),
                            0x20..=0x7e => out.push(c),
                            _ => out.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
                        }
                    }
                    out.push(b'"');
                }
                out.extend_from_slice(if *crlf { b"\r\n" } else { b"\n" });
            }
            Wire::InlinePlain(a, quote) => {
                for (i, arg) in a.iter().enumerate() {
                    if i > 0 {
                        out.extend_from_slice(b" \t ");
                    }
                    if *quote {
                        out.push(b'\'');
                        out.extend_from_slice(arg);
                        out.push(b'\'');
                    } else {
                        out.extend_from_slice(arg);
                    }
                }
                out.extend_from_slice(b"\r\n");
            }
        }
    }
}

fn any_arg() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..24),
        proptest::collection::vec(
            prop_oneof![Just(b'\r'), Just(b'\n'), Just(b'$'), Just(b'*')],
            0..6
        ),
        "[a-zA-Z0-9]{1,12}".prop_map(String::into_bytes),
        proptest::collection::vec(any::<u8>(), 100..400),
    ]
}

fn plain_token() -> impl Strategy<Value = Vec<u8>> {
    "[a-zA-Z0-9:_.,-]{1,10}".prop_map(String::into_bytes)
}

fn wire_command() -> impl Strategy<Value = Wire> {
    prop_oneof![
        4 => proptest::collection::vec(any_arg(), 1..6).prop_map(Wire::Multibulk),
        1 => any::<bool>().prop_map(Wire::EmptyMultibulk),
        2 => (proptest::collection::vec(any_arg(), 1..5), any::<bool>())
            .prop_map(|(a, c)| Wire::InlineQuoted(a, c)),
        2 => (proptest::collection::vec(plain_token(), 0..5), any::<bool>())
            .prop_map(|(a, q)| Wire::InlinePlain(a, q)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn valid_streams_parse_identically_in_any_chunking(
        cmds in proptest::collection::vec(wire_command(), 0..12),
        cuts in proptest::collection::vec(any::<usize>(), 0..40),
    ) {
        let mut stream = Vec::new();
        for c in &cmds {
            c.encode(&mut stream);
        }
        let expected: Vec<OwnedArgs> = cmds.iter().map(Wire::expected).collect();
        let limits = ParseLimits::default();

        let whole = run_chunked(&[&stream], &limits);
        prop_assert_eq!(&whole.commands, &expected);
        prop_assert_eq!(&whole.error, &None);
        prop_assert_eq!(whole.leftover, 0);

        let chunks = split_at_points(&stream, &cuts);
        let chunked = run_chunked(&chunks, &limits);
        prop_assert_eq!(chunked, whole);

        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        prop_assert_eq!(run_chunked(&bytes, &limits).commands, expected);
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_chunking_is_invisible(
        data in proptest::collection::vec(any::<u8>(), 0..512),
        cuts in proptest::collection::vec(any::<usize>(), 0..20),
    ) {
        let limits = ParseLimits::default();
        let whole = run_chunked(&[&data], &limits);
        let chunks = split_at_points(&data, &cuts);
        prop_assert_eq!(run_chunked(&chunks, &limits), whole);
    }

    #[test]
    fn protocol_shaped_noise_never_panics_and_chunking_is_invisible(
        parts in proptest::collection::vec(prop_oneof![
            Just(&b"*"[..]), Just(&b"$"[..]), Just(&b"\r\n"[..]), Just(&b"\r"[..]),
            Just(&b"\n"[..]), Just(&b"1"[..]), Just(&b"3"[..]), Just(&b"0"[..]),
            Just(&b"-"[..]), Just(&b"\""[..]), Just(&b"'"[..]), Just(&b"\\"[..]),
            Just(&b" "[..]), Just(&b"x"[..]), Just(&b"\\x4"[..]), Just(&b"\0"[..]),
        ], 0..200),
        cuts in proptest::collection::vec(any::<usize>(), 0..20),
    ) {
        let data: Vec<u8> = parts.concat();
        let limits = ParseLimits::default();
        let whole = run_chunked(&[&data], &limits);
        let chunks = split_at_points(&data, &cuts);
        prop_assert_eq!(run_chunked(&chunks, &limits), whole);
    }

    #[test]
    fn tiny_limits_never_panic(
        data in proptest::collection::vec(any::<u8>(), 0..256),
        cuts in proptest::collection::vec(any::<usize>(), 0..20),
        max_bulk in 0usize..8,
        max_mb in 0usize..4,
        max_inline in 0usize..8,
    ) {
        let limits = ParseLimits {
            max_bulk_len: max_bulk,
            max_multibulk_len: max_mb,
            max_inline_len: max_inline,
        };
        let chunks = split_at_points(&data, &cuts);
        let _ = run_chunked(&chunks, &limits);
        let _ = run_chunked(&[&data], &limits);
    }

    #[test]
    fn bytes_wanted_is_exact_for_pending_bulks(len in 1usize..100_000, have in 0usize..100_000) {
        let have = have.min(len - 1);
        let mut buf = format!("*1\r\n${len}\r\n").into_bytes();
        let header = buf.len();
        buf.resize(header + have, b'a');
        let mut p = Parser::new();
        prop_assert_eq!(p.parse(&buf, &ParseLimits::default()), Ok(None));
        prop_assert_eq!(p.bytes_wanted(), len + 2 - have);
    }
}

#[test]
fn million_args_in_small_reads_is_linear() {
    const N: usize = 1024 * 1024;
    let mut stream = format!("*{N}\r\n").into_bytes();
    for _ in 0..N {
        stream.extend_from_slice(b"$1\r\na\r\n");
    }
    let limits = ParseLimits::default();
    let mut parser = Parser::new();
    let started = Instant::now();
    let mut calls = 0usize;
    let mut result = None;
    // 512-byte reads: ~14k calls; re-parsing from scratch each time would
    // touch ~50 GB and take minutes.
    for end in (512..stream.len()).step_by(512).chain([stream.len()]) {
        calls += 1;
        result = parser.parse(&stream[..end], &limits).unwrap();
        if result.is_some() {
            break;
        }
    }
    assert_eq!(result, Some(stream.len()));
    let args = parser.args(&stream);
    assert_eq!(args.len(), N);
    assert!(args.iter().all(|a| a == b"a"));
    assert!(calls > 10_000);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn long_inline_line_in_small_reads_is_linear() {
    let mut line = Vec::new();
    for _ in 0..10_000 {
        line.extend_from_slice(b"abcde ");
    }
    line.extend_from_slice(b"\r\n");
    let limits = ParseLimits::default();
    let mut parser = Parser::new();
    let mut result = None;
    for end in 1..=line.len() {
        result = parser.parse(&line[..end], &limits).unwrap();
        if result.is_some() {
            break;
        }
    }
    assert_eq!(result, Some(line.len()));
    assert_eq!(parser.args(&line).len(), 10_000);
}

#[test]
fn incomplete_parse_is_idempotent() {
    let limits = ParseLimits::default();
    let mut parser = Parser::new();
    let buf = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhel";
    for _ in 0..3 {
        assert_eq!(parser.parse(buf, &limits), Ok(None));
    }
    let full = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n";
    assert_eq!(parser.parse(full, &limits), Ok(Some(full.len())));
    let args: Vec<&[u8]> = parser.args(full).iter().collect();
    assert_eq!(args, vec![&b"SET"[..], b"k", b"hello"]);
}
