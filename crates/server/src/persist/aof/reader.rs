//! Reading an AOF command stream (`*<argc>\r\n$<len>\r\n<bytes>\r\n…`) one
//! command at a time, with the byte offset of every command boundary, for
//! loading at start-up and for `vireo check-aof`.
//!
//! The input is untrusted: declared lengths never size an allocation up
//! front (buffers grow with the bytes actually read), and every failure is
//! told apart as a torn tail (the file ends mid-command: recoverable by
//! truncation) or a format error (garbage in the middle).

use std::io::{BufRead, Read};

/// Longest header line (`*<argc>` or `$<len>`), Redis's annotation limit.
const MAX_LINE: usize = 1024;
/// Argument slots reserved ahead of the data, whatever argc claims.
const MAX_PREALLOC_ARGS: usize = 1024;
/// Largest argument accepted (Redis's `proto-max-bulk-len` ceiling).
const MAX_BULK: u64 = 512 * 1024 * 1024;

/// Why reading stopped before the end of the file.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadError {
    /// The file ends inside a command: everything from the returned
    /// offset on is an incomplete command.
    Truncated,
    /// Bytes that are not an AOF command (what, for the message).
    Format(String),
    /// The operating system failed to read.
    Io(String),
}

/// A command read from the stream.
pub type Command = Vec<Vec<u8>>;

/// Reads commands from a buffered byte stream, counting offsets.
pub struct CommandReader<R> {
    inner: R,
    /// Offset just after the last complete command (or annotation).
    offset: u64,
}

impl<R: BufRead> CommandReader<R> {
    /// Starts reading at `offset` (the stream's current position, for
    /// example after an RDB preamble).
    pub fn new(inner: R, offset: u64) -> Self {
        CommandReader { inner, offset }
    }

    /// Offset of the end of the last complete command: where a truncation
    /// keeps every well-formed command.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next command; Ok(None) at a clean end of file. `#` annotation
    /// lines between commands are skipped, as Redis does.
    pub fn next_command(&mut self) -> Result<Option<Command>, ReadError> {
        loop {
            let mut consumed = 0u64;
            let Some(line) = self.line(&mut consumed)? else {
                return if consumed == 0 {
                    Ok(None)
                } else {
                    Err(ReadError::Truncated)
                };
            };
            if line.first() == Some(&b'#') {
                self.offset += consumed;
                continue;
            }
            if line.first() != Some(&b'*') {
                return Err(ReadError::Format(format!(
                    "expected '*', got '{}'",
                    String::from_utf8_lossy(&line[..line.len().min(32)])
                )));
            }
            let argc = number(&line[1..])
                .filter(|&n| n >= 1)
                .ok_or_else(|| ReadError::Format("invalid argument count".into()))?;
            let mut args = Vec::with_capacity((argc as usize).min(MAX_PREALLOC_ARGS));
            for _ in 0..argc {
                let Some(line) = self.line(&mut consumed)? else {
                    return Err(ReadError::Truncated);
                };
                if line.first() != Some(&b'$') {
                    return Err(ReadError::Format(format!(
                        "expected '$', got '{}'",
                        String::from_utf8_lossy(&line[..line.len().min(32)])
                    )));
                }
                let len = number(&line[1..])
                    .filter(|&n| n <= MAX_BULK)
                    .ok_or_else(|| ReadError::Format("invalid bulk length".into()))?;
                let mut arg = Vec::new();
                (&mut self.inner)
                    .take(len)
                    .read_to_end(&mut arg)
                    .map_err(|e| ReadError::Io(e.to_string()))?;
                if (arg.len() as u64) < len {
                    return Err(ReadError::Truncated);
                }
                let mut crlf = Vec::with_capacity(2);
                (&mut self.inner)
                    .take(2)
                    .read_to_end(&mut crlf)
                    .map_err(|e| ReadError::Io(e.to_string()))?;
                if crlf.len() < 2 {
                    return Err(ReadError::Truncated);
                }
                if crlf != b"\r\n" {
                    return Err(ReadError::Format("expected CRLF after an argument".into()));
                }
                consumed += len + 2;
                args.push(arg);
            }
            self.offset += consumed;
            return Ok(Some(args));
        }
    }

    /// One header line without its CRLF; None at end of input (with
    /// `consumed` telling whether a partial line was read). A line without
    /// its newline at the end of the file is a torn tail.
    fn line(&mut self, consumed: &mut u64) -> Result<Option<Vec<u8>>, ReadError> {
        let mut line = Vec::new();
        let n = (&mut self.inner)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut line)
            .map_err(|e| ReadError::Io(e.to_string()))?;
        *consumed += n as u64;
        if n == 0 {
            return Ok(None);
        }
        if line.last() != Some(&b'\n') {
            if n >= MAX_LINE {
                return Err(ReadError::Format("line too long".into()));
            }
            return Ok(None);
        }
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        Ok(Some(line))
    }
}

/// A non-negative decimal number.
fn number(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 19 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// Appends `args` as a RESP multibulk command.
pub fn encode<A: AsRef<[u8]>>(out: &mut Vec<u8>, args: &[A]) {
    let mut num = itoa::Buffer::new();
    out.push(b'*');
    out.extend_from_slice(num.format(args.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        let a = a.as_ref();
        out.push(b'$');
        out.extend_from_slice(num.format(a.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(data: &[u8]) -> (Vec<Command>, Result<(), ReadError>, u64) {
        let mut r = CommandReader::new(data, 0);
        let mut cmds = Vec::new();
        loop {
            match r.next_command() {
                Ok(Some(c)) => cmds.push(c),
                Ok(None) => return (cmds, Ok(()), r.offset()),
                Err(e) => return (cmds, Err(e), r.offset()),
            }
        }
    }

    #[test]
    fn encodes_and_reads_back_with_offsets() {
        let mut buf = Vec::new();
        encode(&mut buf, &["SET", "k", "v"]);
        let first = buf.len() as u64;
        buf.extend_from_slice(b"#TS:123\r\n");
        encode(&mut buf, &[&b"RPUSH"[..], b"l", b"a\r\nb", b""]);
        assert_eq!(
            &buf[..first as usize],
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"
        );
        let (cmds, res, off) = read_all(&buf);
        assert_eq!(res, Ok(()));
        assert_eq!(off, buf.len() as u64);
        assert_eq!(
            cmds[1],
            vec![b"RPUSH".to_vec(), b"l".to_vec(), b"a\r\nb".to_vec(), vec![]]
        );
    }

    #[test]
    fn every_torn_tail_is_truncated_at_the_last_command() {
        let mut buf = Vec::new();
        encode(&mut buf, &["SET", "k", "v"]);
        let good = buf.len();
        encode(&mut buf, &["SET", "key2", "value2"]);
        for cut in good + 1..buf.len() {
            let (cmds, res, off) = read_all(&buf[..cut]);
            assert_eq!(cmds.len(), 1, "cut at {cut}");
            assert_eq!(res, Err(ReadError::Truncated), "cut at {cut}");
            assert_eq!(off, good as u64);
        }
    }

    proptest::proptest! {
        /// Any bytes: no panic, offsets stay within the input and end on
        /// command boundaries that re-read to the same commands.
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            let (cmds, _, off) = read_all(&data);
            proptest::prop_assert!(off <= data.len() as u64);
            let (again, res, off2) = read_all(&data[..off as usize]);
            proptest::prop_assert_eq!(res, Ok(()));
            proptest::prop_assert_eq!(off2, off);
            proptest::prop_assert_eq!(again, cmds);
        }

        /// Encoded commands read back exactly, whatever their bytes.
        #[test]
        fn encoded_commands_round_trip(cmds in proptest::collection::vec(
            proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..20), 1..5), 0..8)) {
            let mut buf = Vec::new();
            for c in &cmds {
                encode(&mut buf, c);
            }
            let (got, res, off) = read_all(&buf);
            proptest::prop_assert_eq!(res, Ok(()));
            proptest::prop_assert_eq!(off, buf.len() as u64);
            proptest::prop_assert_eq!(got, cmds);
        }
    }

    #[test]
    fn garbage_is_a_format_error_and_lengths_do_not_allocate() {
        let (_, res, off) = read_all(b"*1\r\n$4\r\nPING\r\nxyz\r\n");
        assert!(matches!(res, Err(ReadError::Format(_))));
        assert_eq!(off, 14);
        assert!(matches!(read_all(b"*0\r\n").1, Err(ReadError::Format(_))));
        assert!(matches!(
            read_all(b"*1\r\n$-1\r\n").1,
            Err(ReadError::Format(_))
        ));
        assert!(matches!(
            read_all(b"*1\r\n$3\r\nabcde").1,
            Err(ReadError::Format(_))
        ));
        // Huge declared sizes with no data behind them: a torn tail, not an
        // allocation.
        assert_eq!(
            read_all(b"*99999999999\r\n$536870912\r\nab").1,
            Err(ReadError::Truncated)
        );
        let long = vec![b'*'; 5000];
        assert!(matches!(read_all(&long).1, Err(ReadError::Format(_))));
    }
}
