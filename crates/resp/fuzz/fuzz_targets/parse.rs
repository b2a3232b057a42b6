//! Fuzz target for the request parser.
//!
//! The first input byte seeds the chunk sizes; the rest is fed to a
//! `Parser` the way a connection would receive it (append a chunk, parse as
//! many commands as possible, drain consumed bytes). Checks:
//!
//! * no panic, for default limits and for tiny limits;
//! * consumed sizes stay within the buffer;
//! * the sequence of commands and the final error are the same as when the
//!   whole input is parsed at once (with default limits and inputs below the
//!   inline limit, chunking must be invisible, as in Redis);
//! * wherever `peek_command` (the server's pipeline look-ahead, which runs
//!   commands without the parser) claims a command, the parser under the
//!   default limits finds that command there, with the same arguments.

#![no_main]

use libfuzzer_sys::fuzz_target;
use vireo_resp::{parse_f64, parse_i64, peek_command, Args, OwnedArgs, ParseLimits, Parser};

/// Commands parsed and the error that ended the stream, if any.
type Outcome = (Vec<OwnedArgs>, Option<String>);

/// Feeds `data` in chunks whose sizes come from `sizes` (cycled; 0 means
/// "everything at once").
fn run(data: &[u8], sizes: &[u8], limits: &ParseLimits) -> Outcome {
    let mut parser = Parser::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut commands = Vec::new();
    let mut pos = 0;
    let mut i = 0;
    while pos < data.len() {
        let size = match sizes.get(i % sizes.len().max(1)) {
            Some(&s) if s > 0 => usize::from(s),
            _ => data.len(),
        };
        i += 1;
        let end = (pos + size).min(data.len());
        buf.extend_from_slice(&data[pos..end]);
        pos = end;
        loop {
            let mut ranges = [(0, 0); 8];
            let peeked = peek_command(&buf, &mut ranges);
            let parsed = parser.parse(&buf, limits);
            if let (Some((len, argc)), true) = (peeked, *limits == ParseLimits::default()) {
                assert_eq!(parsed, Ok(Some(len)));
                let args = parser.args(&buf);
                assert_eq!(args.len(), argc);
                let shown = Args::new(&buf, &ranges[..argc.min(8)]);
                assert!(shown.iter().eq(args.iter().take(8)));
            }
            match parsed {
                Ok(Some(n)) => {
                    assert!(n > 0 && n <= buf.len());
                    let args = parser.args(&buf);
                    for a in args.iter() {
                        // Exercise the number parsers on realistic inputs.
                        let _ = parse_i64(a);
                        let _ = parse_f64(a);
                    }
                    commands.push(args.to_owned());
                    buf.drain(..n);
                }
                Ok(None) => {
                    let _ = parser.bytes_wanted();
                    break;
                }
                Err(e) => return (commands, Some(e.message)),
            }
        }
    }
    (commands, None)
}

fuzz_target!(|input: &[u8]| {
    let Some((&seed, data)) = input.split_first() else {
        return;
    };
    let sizes: Vec<u8> = (0..8u8)
        .map(|k| seed.rotate_left(u32::from(k)) % 17)
        .collect();
    let defaults = ParseLimits::default();
    let whole = run(data, &[0], &defaults);
    let chunked = run(data, &sizes, &defaults);
    if data.len() <= defaults.max_inline_len {
        assert_eq!(whole, chunked);
    }
    let tiny = ParseLimits {
        max_bulk_len: usize::from(seed % 9),
        max_multibulk_len: usize::from(seed % 5),
        max_inline_len: usize::from(seed % 13),
    };
    let _ = run(data, &sizes, &tiny);
});
