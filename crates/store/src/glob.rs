//! Glob-style pattern matching with the semantics of Redis' `stringmatchlen`.
//!
//! Redis uses one matcher for `KEYS`, `SCAN … MATCH`, `PSUBSCRIBE`,
//! `CONFIG GET`, ACL key/channel patterns and more, so clients depend on its
//! exact (and occasionally surprising) behaviour. This module reproduces that
//! behaviour byte for byte:
//!
//! * `*` matches any run of bytes (consecutive stars act as one),
//! * `?` matches exactly one byte,
//! * `[abc]`, `[^abc]` and `[a-z]` match one byte from (or not from) a set;
//!   ranges may be written backwards (`[z-a]`), `\x` inside a class matches the
//!   byte `x` literally, and a class left open at the end of the pattern
//!   (`[abc`) simply extends to the end of the pattern,
//! * `\x` outside a class matches `x` literally (a trailing lone `\` matches a
//!   backslash),
//! * with `nocase`, ASCII letters compare case-insensitively.
//!
//! Two quirks are kept on purpose because clients and Redis' own test-suite
//! observe them:
//!
//! * an empty subject only matches an empty pattern — even `*` does not match
//!   the empty string (Redis' `KEYS *` and `SCAN` short-circuit the `*`
//!   pattern before calling the matcher; callers that need that behaviour
//!   must do the same);
//! * a match that has to go through more than [`MAX_STAR_NESTING`]
//!   (non-trailing) star groups fails, mirroring the recursion limit Redis
//!   7.0 added as a protection against abusive patterns.
//!
//! Unlike Redis' recursive implementation, the matcher here is iterative and
//! only ever backtracks to the most recent star, so its running time is
//! bounded by `O(pattern.len() * string.len())` even for hostile patterns such
//! as `*a*a*a*a*a*a*b` against long strings, and it never uses more than a
//! constant amount of stack.

/// Number of star groups a match may pass through before it is abandoned.
///
/// Redis 7.0 stops (and reports "no match") when its recursive matcher nests
/// deeper than this; patterns such as `"*?" x 50000` are therefore rejected
/// even though they would technically match a long enough string. Keeping the
/// same limit keeps results identical to Redis.
pub const MAX_STAR_NESTING: usize = 1000;

/// Matches `string` against the glob `pattern` exactly like Redis'
/// `stringmatchlen`, optionally ignoring ASCII case.
///
/// Returns `true` when the whole of `string` is matched by the whole of
/// `pattern`. See the module documentation for the supported syntax and the
/// deliberate Redis quirks (empty subject, star nesting limit).
pub fn glob_match(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    if string.is_empty() {
        // Redis never enters its matching loop for an empty subject.
        return pattern.is_empty();
    }
    let plen = pattern.len();
    let slen = string.len();
    let mut p = 0usize;
    let mut s = 0usize;
    // Backtracking point: pattern index just after the most recent star
    // group, the subject index the rest is currently tried at, and how many
    // star groups precede (and include) that star.
    let mut backtrack: Option<(usize, usize, usize)> = None;
    let mut stars = 0usize;

    loop {
        // Invariant: s < slen.
        let mut mismatch = p >= plen;
        if !mismatch {
            if pattern[p] == b'*' {
                while p + 1 < plen && pattern[p + 1] == b'*' {
                    p += 1;
                }
                if p + 1 == plen {
                    // A trailing star swallows whatever is left.
                    return true;
                }
                stars += 1;
                if stars > MAX_STAR_NESTING {
                    return false;
                }
                p += 1;
                backtrack = Some((p, s, stars));
                continue;
            }
            match match_one(pattern, p, string[s], nocase) {
                Some(next) => {
                    p = next;
                    s += 1;
                    if s == slen {
                        // Subject exhausted: only trailing stars may remain.
                        while p < plen && pattern[p] == b'*' {
                            p += 1;
                        }
                        if p == plen {
                            return true;
                        }
                        mismatch = true;
                    }
                }
                None => mismatch = true,
            }
        }
        if mismatch {
            // Retry the text after the latest star one byte further on. If
            // that star has run out of subject, no earlier star can help
            // either (it would only start the same suffix later), which is
            // exactly Redis' "skip longer matches" short cut.
            match backtrack {
                Some((bp, bs, depth)) if bs + 1 < slen => {
                    backtrack = Some((bp, bs + 1, depth));
                    p = bp;
                    s = bs + 1;
                    stars = depth;
                }
                _ => return false,
            }
        }
    }
}

/// Tries to match the single-byte pattern element starting at `pattern[p]`
/// (anything but `*`) against `c`. Returns the index just past the element on
/// success.
fn match_one(pattern: &[u8], p: usize, c: u8, nocase: bool) -> Option<usize> {
    let plen = pattern.len();
    match pattern[p] {
        b'?' => Some(p + 1),
        b'[' => {
            let (matched, next) = match_class(pattern, p + 1, c, nocase);
            matched.then_some(next)
        }
        b'\\' if p + 1 < plen => eq(pattern[p + 1], c, nocase).then_some(p + 2),
        lit => eq(lit, c, nocase).then_some(p + 1),
    }
}

/// Matches `c` against the character class whose body starts at `pattern[i]`
/// (just after the `[`). Returns whether it matched and the index just past
/// the class; an unterminated class extends to the end of the pattern.
fn match_class(pattern: &[u8], mut i: usize, c: u8, nocase: bool) -> (bool, usize) {
    let plen = pattern.len();
    let negate = i < plen && pattern[i] == b'^';
    if negate {
        i += 1;
    }
    let mut matched = false;
    let next = loop {
        if i >= plen {
            break plen;
        }
        let b = pattern[i];
        if b == b'\\' && i + 1 < plen {
            // Escaped member: compared byte for byte, like Redis does.
            i += 1;
            if pattern[i] == c {
                matched = true;
            }
        } else if b == b']' {
            break i + 1;
        } else if i + 2 < plen && pattern[i + 1] == b'-' {
            let (mut lo, mut hi) = (b, pattern[i + 2]);
            if lo > hi {
                std::mem::swap(&mut lo, &mut hi);
            }
            let mut x = c;
            if nocase {
                lo = lo.to_ascii_lowercase();
                hi = hi.to_ascii_lowercase();
                x = x.to_ascii_lowercase();
            }
            if lo <= x && x <= hi {
                matched = true;
            }
            i += 2;
        } else if eq(b, c, nocase) {
            matched = true;
        }
        i += 1;
    };
    (matched != negate, next)
}

/// Byte equality, ASCII case-insensitive when `nocase` is set.
#[inline]
fn eq(a: u8, b: u8, nocase: bool) -> bool {
    if nocase {
        a.eq_ignore_ascii_case(&b)
    } else {
        a == b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn m(p: &str, s: &str) -> bool {
        glob_match(p.as_bytes(), s.as_bytes(), false)
    }

    fn mi(p: &str, s: &str) -> bool {
        glob_match(p.as_bytes(), s.as_bytes(), true)
    }

    /// A direct transcription of the recursive algorithm's *semantics*
    /// (exhaustive backtracking over every star, nesting limit, "skip longer
    /// matches" flag), used as an oracle for the iterative matcher.
    fn oracle(p: &[u8], s: &[u8], nocase: bool) -> bool {
        fn rec(p: &[u8], s: &[u8], nocase: bool, skip: &mut bool, nesting: usize) -> bool {
            if nesting > MAX_STAR_NESTING {
                return false;
            }
            let (mut pi, mut si) = (0, 0);
            while pi < p.len() && si < s.len() {
                if p[pi] == b'*' {
                    while pi + 1 < p.len() && p[pi + 1] == b'*' {
                        pi += 1;
                    }
                    if pi + 1 == p.len() {
                        return true;
                    }
                    for start in si..s.len() {
                        if rec(&p[pi + 1..], &s[start..], nocase, skip, nesting + 1) {
                            return true;
                        }
                        if *skip {
                            return false;
                        }
                    }
                    *skip = true;
                    return false;
                }
                match match_one(p, pi, s[si], nocase) {
                    Some(n) => pi = n,
                    None => return false,
                }
                si += 1;
                if si == s.len() {
                    while pi < p.len() && p[pi] == b'*' {
                        pi += 1;
                    }
                    break;
                }
            }
            pi == p.len() && si == s.len()
        }
        let mut skip = false;
        rec(p, s, nocase, &mut skip, 0)
    }

    #[test]
    fn literals_and_question_marks() {
        assert!(m("hello", "hello"));
        assert!(!m("hello", "hell"));
        assert!(!m("hell", "hello"));
        assert!(m("h?llo", "hallo"));
        assert!(!m("h?llo", "hllo"));
        assert!(m("???", "abc"));
        assert!(!m("???", "ab"));
        assert!(m("", ""));
        assert!(!m("", "a"));
    }

    #[test]
    fn stars() {
        assert!(m("*", "anything"));
        assert!(m("h*o", "hello"));
        assert!(m("h*o", "ho"));
        assert!(m("h***o", "hello"));
        assert!(m("*llo", "hello"));
        assert!(m("he*", "he"));
        assert!(m("he**", "he"));
        assert!(!m("h*x", "hello"));
        assert!(m("*a*b*c*", "xxaxxbxxcxx"));
        assert!(!m("*a*b*c*", "xxaxxcxxbxx"));
        assert!(m("a*a", "aa"));
        assert!(!m("a*a", "a"));
        assert!(m("*?", "a"));
        assert!(!m("*??", "a"));
    }

    #[test]
    fn empty_subject_quirk() {
        // Redis' matcher never matches an empty subject against a non-empty
        // pattern, not even "*".
        assert!(!m("*", ""));
        assert!(!m("**", ""));
        assert!(m("", ""));
    }

    #[test]
    fn classes() {
        assert!(m("h[ae]llo", "hello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(!m("h[a-b]llo", "hcllo"));
        assert!(m("[z-a]", "m"), "reversed ranges are accepted");
        assert!(!m("[z-a]", "A"));
        assert!(m("[0-9]*", "7up"));
        assert!(m("[^]", "x"), "negated empty class matches anything");
        assert!(!m("[]", "x"), "empty class matches nothing");
        assert!(!m("[]a]", "a"), "']' right after '[' closes the class");
        assert!(!m("[]a]", "a]"), "the first element can never match");
        assert!(!m("[]", "[]"));
    }

    #[test]
    fn escapes() {
        assert!(m("h\\*llo", "h*llo"));
        assert!(!m("h\\*llo", "hello"));
        assert!(m("\\?", "?"));
        assert!(!m("\\?", "a"));
        assert!(m("a\\", "a\\"), "trailing backslash is literal");
        assert!(m("[\\]]", "]"));
        assert!(m("[a\\-z]", "-"));
        assert!(!m("[a\\-z]", "m"));
        assert!(m("[\\^a]", "^"));
        assert!(m("\\[a]", "[a]"));
    }

    #[test]
    fn unterminated_classes() {
        assert!(m("[abc", "a"));
        assert!(m("[abc", "c"));
        assert!(!m("[abc", "d"));
        assert!(!m("[abc", "ab"));
        assert!(!m("[", "["));
        assert!(!m("[", "a"));
        assert!(m("[^", "x"));
        assert!(m("x[^", "xy"));
        assert!(m("[\\", "\\"));
        assert!(m("[a\\]", "]"), "escaped ']' leaves the class open");
        // "a-]" is a (reversed) range from ']' to 'a'; the class then has no
        // closing bracket.
        assert!(m("[a-]", "_"));
        assert!(!m("[a-]", "-"));
    }

    #[test]
    fn nocase() {
        assert!(mi("HeLLo", "hello"));
        assert!(mi("h*O", "HELLO"));
        assert!(mi("[A-Z]", "q"));
        assert!(mi("[abc]", "B"));
        assert!(mi("[^abc]", "D"));
        assert!(!mi("[^abc]", "C"));
        assert!(!m("HeLLo", "hello"));
        // Escaped class members compare exactly even with nocase (Redis).
        assert!(!mi("[\\a]", "A"));
        assert!(mi("\\A", "a"), "escapes outside classes honour nocase");
        // Range bounds are lowered after swapping: [Z-a] becomes z..a.
        assert!(!mi("[Z-a]", "_"));
        assert!(m("[Z-a]", "_"));
    }

    #[test]
    fn hostile_patterns_finish_fast() {
        let start = Instant::now();
        let long_a = vec![b'a'; 100_000];
        let mut p = Vec::new();
        for _ in 0..40 {
            p.extend_from_slice(b"*a");
        }
        p.extend_from_slice(b"*b");
        assert!(!glob_match(&p, &long_a, false));
        assert!(!glob_match(
            b"a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b",
            &long_a,
            true
        ));
        let mut almost = long_a.clone();
        almost.push(b'b');
        assert!(glob_match(&p, &almost, false));
        // Redis' regression test: "*?" repeated 50000 times against 50000
        // bytes is rejected by the nesting limit, and quickly.
        let stars = b"*?".repeat(50_000);
        assert!(!glob_match(&stars, &vec![b'a'; 50_000], false));
        // Many classes between stars.
        let mut q = Vec::new();
        for _ in 0..200 {
            q.extend_from_slice(b"*[a-c]");
        }
        q.extend_from_slice(b"*d");
        assert!(!glob_match(&q, &long_a[..20_000], false));
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "took {:?}",
            start.elapsed()
        );
    }

    #[test]
    fn nesting_limit() {
        let s = vec![b'a'; 3000];
        let ok = b"*a".repeat(MAX_STAR_NESTING);
        assert!(glob_match(&ok, &s, false));
        let too_deep = b"*a".repeat(MAX_STAR_NESTING + 1);
        assert!(!glob_match(&too_deep, &s, false));
        // A final star does not count: it matches without nesting.
        let mut trailing = ok.clone();
        trailing.push(b'*');
        assert!(glob_match(&trailing, &s, false));
    }

    #[test]
    fn agrees_with_oracle_on_small_inputs() {
        let alphabet: &[u8] = b"ab*?[]^-\\A";
        let subjects: &[&[u8]] = &[
            b"a", b"b", b"ab", b"ba", b"aab", b"abab", b"A", b"-", b"]", b"[", b"\\", b"^", b"aB",
            b"bbbba", b"*", b"?a",
        ];
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..20_000 {
            let len = rng.usize(0..7);
            let pat: Vec<u8> = (0..len)
                .map(|_| alphabet[rng.usize(..alphabet.len())])
                .collect();
            for s in subjects {
                for nocase in [false, true] {
                    assert_eq!(
                        glob_match(&pat, s, nocase),
                        oracle(&pat, s, nocase),
                        "pattern {:?} subject {:?} nocase {}",
                        String::from_utf8_lossy(&pat),
                        String::from_utf8_lossy(s),
                        nocase
                    );
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn prop_agrees_with_oracle(
            pat in proptest::collection::vec(proptest::sample::select(b"ab*?[]^-\\".to_vec()), 0..10),
            s in proptest::collection::vec(proptest::sample::select(b"ab-]\\".to_vec()), 0..10),
            nocase in proptest::bool::ANY,
        ) {
            proptest::prop_assert_eq!(glob_match(&pat, &s, nocase), oracle(&pat, &s, nocase));
        }

        #[test]
        fn prop_literal_pattern_matches_itself(s in proptest::collection::vec(b'c'..=b'z', 1..30)) {
            proptest::prop_assert!(glob_match(&s, &s, false));
            let mut star = s.clone();
            star.insert(s.len() / 2, b'*');
            proptest::prop_assert!(glob_match(&star, &s, false));
        }
    }
}
