//! Command argument views: a borrowed zero-copy [`Args`] for executing a
//! freshly parsed command, and an owned [`OwnedArgs`] for commands that must
//! outlive the input buffer (MULTI queues, AOF, replication).

use crate::number::{format_u64_into, write_u64};

/// Borrowed, zero-copy view of a command's arguments.
///
/// Multibulk arguments point straight into the connection's input buffer;
/// inline arguments (which may contain unescaped bytes) point into the
/// parser's scratch buffer; [`OwnedArgs::as_args`] points into the owned
/// copy. In every case it is a base slice plus `(start, end)` ranges, so it
/// is `Copy` and costs two words to pass around.
#[derive(Clone, Copy)]
pub struct Args<'a> {
    /// Bytes the ranges index into.
    base: &'a [u8],
    /// `(start, end)` byte ranges of each argument within `base`.
    ranges: &'a [(usize, usize)],
}

impl<'a> Args<'a> {
    /// Builds a view from a base buffer and argument ranges into it (a
    /// command [`peek_command`](crate::peek_command) found, say).
    pub fn new(base: &'a [u8], ranges: &'a [(usize, usize)]) -> Self {
        Args { base, ranges }
    }

    /// Number of arguments (including the command name).
    #[inline]
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// True when the command has no arguments at all (the caller skips it).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The `i`-th argument. Panics if `i >= len()`, like slice indexing.
    #[inline]
    pub fn get(&self, i: usize) -> &'a [u8] {
        let (start, end) = self.ranges[i];
        &self.base[start..end]
    }

    /// The `i`-th argument, or `None` if out of range (non-panicking
    /// counterpart of [`Args::get`]).
    #[inline]
    pub fn try_get(&self, i: usize) -> Option<&'a [u8]> {
        let &(start, end) = self.ranges.get(i)?;
        self.base.get(start..end)
    }

    /// Iterates over the arguments in order.
    pub fn iter(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let base = self.base;
        self.ranges
            .iter()
            .map(move |&(start, end)| &base[start..end])
    }

    /// Copies the arguments into a single owned allocation (plus ranges).
    #[allow(clippy::wrong_self_convention)]
    pub fn to_owned(&self) -> OwnedArgs {
        let total: usize = self.ranges.iter().map(|&(s, e)| e - s).sum();
        let mut owned = OwnedArgs {
            data: Vec::with_capacity(total),
            ranges: Vec::with_capacity(self.ranges.len()),
        };
        for arg in self.iter() {
            owned.push(arg);
        }
        owned
    }

    /// The command's canonical RESP multibulk encoding (`*<n>\r\n` then
    /// `$<len>\r\n<bytes>\r\n` per argument, lengths in plain decimal),
    /// when the bytes the arguments point into already hold exactly that
    /// from their first byte on: true of a command parsed from a client's
    /// multibulk request written the usual way, whose bytes can then be
    /// copied instead of encoded again (the AOF). None otherwise (inline
    /// commands, owned copies, lengths written with leading zeros, line
    /// ends other than CRLF that the parser tolerates).
    ///
    /// Every byte outside the arguments is compared with what the encoding
    /// would write there and every argument must start where it would put
    /// it, so a returned slice is the encoding whatever the view's origin.
    pub fn canonical_resp(&self) -> Option<&'a [u8]> {
        let base = self.base;
        let mut at = expect_header(base, 0, b'*', self.ranges.len())?;
        for &(start, end) in self.ranges {
            at = expect_header(base, at, b'$', end.wrapping_sub(start))?;
            // Word compares: byte-wise ones cost ~4x (callgrind).
            let crlf = base.get(end..end + 2)?;
            if start != at || u16::from_le_bytes([crlf[0], crlf[1]]) != CRLF16 {
                return None;
            }
            at = end + 2;
        }
        Some(&base[..at])
    }

    /// Appends the command encoded as a RESP multibulk array to `out`, the
    /// form used for AOF and replication streams.
    pub fn write_resp(&self, out: &mut Vec<u8>) {
        // One reservation for the whole command: growing the buffer
        // argument by argument cost more than the encoding (callgrind: 450
        // of 707 instructions per SET went to reallocation). Lengths below
        // 10^12 take at most 12 digits; `$`, digits and two CRLFs make 17.
        let payload: usize = self.iter().map(|a| a.len() + 17).sum();
        out.reserve(payload + 17);
        out.push(b'*');
        write_u64(out, self.len() as u64);
        out.extend_from_slice(b"\r\n");
        for arg in self.iter() {
            out.push(b'$');
            write_u64(out, arg.len() as u64);
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// `\r\n` read as a little-endian u16.
const CRLF16: u16 = u16::from_le_bytes(*b"\r\n");

/// Checks that `base[at..]` starts with `tag`, `n` in plain decimal and
/// CRLF; returns the position after them.
#[inline(always)]
fn expect_header(base: &[u8], at: usize, tag: u8, n: usize) -> Option<usize> {
    let word = |h: &[u8]| u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
    if n < 10 {
        let h = base.get(at..at + 4)?;
        (word(h) == u32::from_le_bytes([tag, b'0' + n as u8, b'\r', b'\n'])).then_some(at + 4)
    } else if n < 100 {
        let h = base.get(at..at + 5)?;
        let (tens, ones) = (b'0' + (n / 10) as u8, b'0' + (n % 10) as u8);
        (word(h) == u32::from_le_bytes([tag, tens, ones, b'\r']) && h[4] == b'\n').then_some(at + 5)
    } else {
        let mut buf = [0u8; 20];
        let from = format_u64_into(n as u64, &mut buf);
        let digits = &buf[from..];
        let end = at + 1 + digits.len();
        let h = base.get(at..end + 2)?;
        (h[0] == tag && &h[1..1 + digits.len()] == digits && h[h.len() - 2..] == *b"\r\n")
            .then_some(end + 2)
    }
}

impl std::fmt::Debug for Args<'_> {
    /// Shows arguments as (lossy) strings, which is what one wants in logs
    /// and test failures.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(String::from_utf8_lossy))
            .finish()
    }
}

impl<'a> IntoIterator for Args<'a> {
    type Item = &'a [u8];
    type IntoIter = ArgsIter<'a>;

    /// Iterates over the arguments by value (so `for a in args` works).
    fn into_iter(self) -> ArgsIter<'a> {
        ArgsIter {
            base: self.base,
            ranges: self.ranges.iter(),
        }
    }
}

/// Iterator returned by `Args::into_iter`.
#[derive(Clone, Debug)]
pub struct ArgsIter<'a> {
    /// Bytes the ranges index into.
    base: &'a [u8],
    /// Remaining ranges.
    ranges: std::slice::Iter<'a, (usize, usize)>,
}

impl<'a> Iterator for ArgsIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let &(start, end) = self.ranges.next()?;
        Some(&self.base[start..end])
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.ranges.size_hint()
    }
}

impl ExactSizeIterator for ArgsIter<'_> {}

/// An owned copy of a command: one contiguous byte vector plus argument
/// ranges, so queuing a command costs two allocations regardless of its
/// argument count.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnedArgs {
    /// All argument bytes, concatenated.
    data: Vec<u8>,
    /// `(start, end)` of each argument within `data`.
    ranges: Vec<(usize, usize)>,
}

impl OwnedArgs {
    /// An empty command.
    pub fn new() -> Self {
        OwnedArgs::default()
    }

    /// Appends one argument.
    pub fn push(&mut self, arg: &[u8]) {
        let start = self.data.len();
        self.data.extend_from_slice(arg);
        self.ranges.push((start, self.data.len()));
    }

    /// Builds a command from anything yielding byte-like arguments, e.g.
    /// `OwnedArgs::from_slices(["SET", "k", "v"])`.
    pub fn from_slices<I: IntoIterator<Item = impl AsRef<[u8]>>>(it: I) -> Self {
        let mut owned = OwnedArgs::new();
        for arg in it {
            owned.push(arg.as_ref());
        }
        owned
    }

    /// Borrowed view, to run the command through the same code path as a
    /// freshly parsed one.
    pub fn as_args(&self) -> Args<'_> {
        Args::new(&self.data, &self.ranges)
    }

    /// Number of arguments.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// True when there are no arguments.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The `i`-th argument; panics if out of range.
    pub fn get(&self, i: usize) -> &[u8] {
        self.as_args().get(i)
    }

    /// Replaces the `i`-th argument (used when rewriting commands for
    /// propagation, e.g. turning a relative expire into an absolute one).
    /// Panics if `i` is out of range. Costs O(total size).
    pub fn set(&mut self, i: usize, arg: &[u8]) {
        let (start, end) = self.ranges[i];
        let old_len = end - start;
        self.data.splice(start..end, arg.iter().copied());
        let new_end = start + arg.len();
        self.ranges[i] = (start, new_end);
        for r in &mut self.ranges[i + 1..] {
            r.0 = r.0 - old_len + arg.len();
            r.1 = r.1 - old_len + arg.len();
        }
    }

    /// Total bytes of argument payload (not counting framing); useful for
    /// memory accounting of queued commands.
    pub fn payload_len(&self) -> usize {
        self.data.len()
    }

    /// Appends the command encoded as a RESP multibulk array
    /// (`*<n>\r\n` then `$<len>\r\n<bytes>\r\n` per argument).
    pub fn write_resp(&self, out: &mut Vec<u8>) {
        self.as_args().write_resp(out);
    }
}

impl<'a> From<Args<'a>> for OwnedArgs {
    /// Same as [`Args::to_owned`].
    fn from(args: Args<'a>) -> Self {
        args.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_args_basics() {
        let mut o = OwnedArgs::new();
        assert!(o.is_empty());
        o.push(b"SET");
        o.push(b"");
        o.push(b"v\r\n");
        assert_eq!(o.len(), 3);
        assert!(!o.is_empty());
        let a = o.as_args();
        assert_eq!(a.len(), 3);
        assert_eq!(a.get(0), b"SET");
        assert_eq!(a.get(1), b"");
        assert_eq!(a.get(2), b"v\r\n");
        assert_eq!(a.try_get(3), None);
        assert_eq!(o.payload_len(), 6);
        assert_eq!(
            a.iter().collect::<Vec<_>>(),
            vec![&b"SET"[..], b"", b"v\r\n"]
        );
        assert_eq!(a.into_iter().len(), 3);
        assert_eq!(format!("{a:?}"), r#"["SET", "", "v\r\n"]"#);
    }

    #[test]
    fn from_slices_and_to_owned_agree() {
        let o = OwnedArgs::from_slices(["GET", "key"]);
        let o2 = OwnedArgs::from_slices(vec![b"GET".to_vec(), b"key".to_vec()]);
        assert_eq!(o, o2);
        assert_eq!(o.as_args().to_owned(), o);
        assert_eq!(OwnedArgs::from(o.as_args()), o);
        assert_ne!(o, OwnedArgs::from_slices(["GET", "ke", "y"]));
    }

    /// Builds a view the way the parser does: ranges into `base`.
    fn view<'a>(base: &'a [u8], ranges: &'a [(usize, usize)]) -> Args<'a> {
        Args::new(base, ranges)
    }

    #[test]
    fn canonical_resp_is_the_request_itself_when_it_is_canonical() {
        let long = "x".repeat(120);
        let wire = format!("*3\r\n$3\r\nSET\r\n$10\r\nkey:000001\r\n$120\r\n{long}\r\nNEXT");
        let ranges = [(8, 11), (18, 28), (36, 156)];
        let a = view(wire.as_bytes(), &ranges);
        let mut want = Vec::new();
        a.write_resp(&mut want);
        assert_eq!(a.canonical_resp(), Some(&want[..]));
        assert_eq!(want.len(), wire.len() - 4);
        // Zero arguments, and an empty argument.
        assert_eq!(view(b"*0\r\n", &[]).canonical_resp(), Some(&b"*0\r\n"[..]));
        let e = b"*1\r\n$0\r\n\r\n";
        assert_eq!(view(e, &[(8, 8)]).canonical_resp(), Some(&e[..]));
    }

    #[test]
    fn canonical_resp_refuses_anything_else() {
        // What the parser tolerates: a leading zero, a bare LF after the
        // length, something other than CRLF after the payload.
        let zero = b"*1\r\n$03\r\nSET\r\n";
        assert_eq!(view(zero, &[(9, 12)]).canonical_resp(), None);
        let lf = b"*1\r\n$3\rXSET\r\n";
        assert_eq!(view(lf, &[(8, 11)]).canonical_resp(), None);
        let tail = b"*1\r\n$3\r\nSETXY";
        assert_eq!(view(tail, &[(8, 11)]).canonical_resp(), None);
        let short = b"*1\r\n$3\r\nSET\r";
        assert_eq!(view(short, &[(8, 11)]).canonical_resp(), None);
        // An inline command's arguments sit side by side, an owned copy's
        // too.
        assert_eq!(
            view(b"SETkv", &[(0, 3), (3, 4), (4, 5)]).canonical_resp(),
            None
        );
        let o = OwnedArgs::from_slices(["SET", "k", "v"]);
        assert_eq!(o.as_args().canonical_resp(), None);
        // A count that does not match the arguments.
        let two = b"*2\r\n$3\r\nSET\r\n";
        assert_eq!(view(two, &[(8, 11)]).canonical_resp(), None);
    }

    #[test]
    fn write_resp_encodes_multibulk() {
        let o = OwnedArgs::from_slices(["SET", "k", "", "hello"]);
        let mut out = Vec::new();
        o.write_resp(&mut out);
        assert_eq!(
            out,
            b"*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n$5\r\nhello\r\n"
        );
        let mut empty = Vec::new();
        OwnedArgs::new().write_resp(&mut empty);
        assert_eq!(empty, b"*0\r\n");
    }

    #[test]
    fn set_replaces_argument() {
        let mut o = OwnedArgs::from_slices(["EXPIRE", "key", "10", "NX"]);
        o.set(2, b"1700000000000");
        assert_eq!(
            o,
            OwnedArgs::from_slices(["EXPIRE", "key", "1700000000000", "NX"])
        );
        o.set(0, b"");
        assert_eq!(
            o,
            OwnedArgs::from_slices(["", "key", "1700000000000", "NX"])
        );
    }

    #[test]
    #[should_panic]
    fn get_out_of_range_panics() {
        let o = OwnedArgs::from_slices(["a"]);
        let _ = o.as_args().get(1);
    }
}
