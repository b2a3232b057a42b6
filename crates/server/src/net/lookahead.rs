//! The pipeline look-ahead: a batch of pipelined commands is parsed once,
//! before any of it runs, so that its keys can be prefetched and each
//! command then runs without being parsed or looked up again.
//!
//! A client that pipelines sends a batch of commands in one read. Before
//! running the first of them, the worker finds the next commands' keys
//! with [`vireo_resp::peek_command`] and the command table's key
//! positions, and starts loading the keyspace memory each will read (see
//! [`Keyspace::prefetch`]), so that the batch's cache misses overlap
//! instead of coming one after the other. Pinned single-worker SET, GET,
//! INCR and MSET at `-P 16` over 100K keys gained 23-62%
//! (docs/performance-log.md, issue 4, session 8).
//!
//! What that look found is kept: each command's extent, argument ranges
//! and table entry here ([`LookAhead::take`]), its keys' hashes in the
//! store's [`hash_memo`]. Running the command then skips the parser, the
//! name lookup and two of three key hashes (callgrind, pipelined GET:
//! 2,229 -> 1,911 instructions per request; docs/performance-log.md,
//! issue 4, session 11).
//!
//! [`Keyspace::prefetch`]: vireo_store::Keyspace::prefetch
//! [`hash_memo`]: vireo_store::hash_memo

use vireo_resp::Args;
use vireo_store::hash_memo;

use crate::cmd::{CmdRef, KeySpec};
use crate::server::Server;

/// Pipelined commands looked at per batch: a `redis-benchmark -P 16`
/// client's pipeline.
const PREFETCH_COMMANDS: usize = 16;

/// Keys prefetched per batch (an MSET of ten keys fills it in three
/// commands), and members of the keys' hashes and sets.
const PREFETCH_KEYS: usize = 32;

/// Keys longer than this are not prefetched: hashing them twice would cost
/// more than the misses saved.
const PREFETCH_MAX_KEY: usize = 128;

/// Argument ranges kept per batch: three ten-key MSETs. A command whose
/// arguments do not fit is parsed again when it runs.
const KEPT_ARGS: usize = 64;

/// A command the look-ahead parsed.
#[derive(Clone, Copy)]
struct Peeked {
    /// Where it starts in the buffer the look-ahead was given.
    at: usize,
    /// Its length in bytes.
    len: usize,
    /// Its table entry (`None`: not a known command).
    cmd: Option<CmdRef>,
    /// Its arguments: `ranges[first..first + count]`.
    first: usize,
    count: usize,
}

/// A command [`LookAhead::take`] hands back: what the parser would have
/// found, and the name's table entry.
pub(crate) struct Parsed<'a> {
    /// The command's length in bytes.
    pub len: usize,
    /// Its arguments, the name first.
    pub args: Args<'a>,
    /// `None` for a name the table does not know.
    pub cmd: Option<CmdRef>,
}

/// The commands of a connection's current batch that were parsed ahead.
/// Offsets are into the buffer of the current [`Conn::process_input`]
/// call; [`LookAhead::clear`] before each call.
///
/// [`Conn::process_input`]: crate::net::conn::Conn::process_input
pub(crate) struct LookAhead {
    peeked: [Peeked; PREFETCH_COMMANDS],
    /// Peeked commands are `peeked[next..len]`.
    next: usize,
    len: usize,
    /// Argument ranges, relative to each command's start.
    ranges: [(usize, usize); KEPT_ARGS],
}

impl LookAhead {
    /// An empty look-ahead.
    pub fn new() -> Self {
        LookAhead {
            peeked: [Peeked {
                at: 0,
                len: 0,
                cmd: None,
                first: 0,
                count: 0,
            }; PREFETCH_COMMANDS],
            next: 0,
            len: 0,
            ranges: [(0, 0); KEPT_ARGS],
        }
    }

    /// Forgets every command parsed ahead.
    pub fn clear(&mut self) {
        self.next = 0;
        self.len = 0;
    }

    /// The command parsed ahead that starts at offset `at` of the buffer,
    /// taken from the look-ahead; `None` (and the rest forgotten) if the
    /// next one parsed ahead does not start there.
    pub fn take<'a>(&'a mut self, data: &'a [u8], at: usize) -> Option<Parsed<'a>> {
        match self.peeked[..self.len].get(self.next).copied() {
            Some(p) if p.at == at => {
                self.next += 1;
                Some(Parsed {
                    len: p.len,
                    args: Args::new(
                        &data[at..at + p.len],
                        &self.ranges[p.first..p.first + p.count],
                    ),
                    cmd: p.cmd,
                })
            }
            _ => {
                self.clear();
                None
            }
        }
    }

    /// Parses ahead up to [`PREFETCH_COMMANDS`] commands of `data` from
    /// offset `from` and starts loading the keyspace memory of their keys
    /// (and of the members they name in their keys' hashes, sets and
    /// sorted sets: a 100K-field hash's field lookup missed the cache
    /// three times per HSET); returns the offset where those commands end.
    /// Keys are found by the command table's key positions, so commands
    /// with no keys cost a peek and a name lookup. A lone key is not worth
    /// prefetching: nothing would overlap.
    ///
    /// The commands are kept for [`LookAhead::take`] when `keep` is the
    /// parser's limit on bulk lengths (`None` for a client that is not
    /// authenticated, whose commands the parser checks against stricter
    /// limits); their keys' hashes go to `memo`. The keys
    /// are prefetched in database `db`, the session's before the batch: a
    /// SELECT inside the batch only makes the hint miss.
    pub fn look<'buf>(
        &mut self,
        server: &Server,
        db: usize,
        data: &'buf [u8],
        from: usize,
        memo: &hash_memo::Scope<'buf>,
        keep: Option<usize>,
    ) -> usize {
        self.clear();
        let mut args = [(0, 0); PREFETCH_KEYS + 1];
        let mut hashes = [0u64; PREFETCH_KEYS];
        let mut found = 0;
        let mut members = [(0u64, 0u64); PREFETCH_KEYS];
        let mut found_members = 0;
        let mut kept_args = 0;
        let mut keeping = keep.is_some();
        let max_bulk = keep.unwrap_or(0);
        let mut at = from;
        for _ in 0..PREFETCH_COMMANDS {
            let Some((len, argc)) = vireo_resp::peek_command(&data[at..], &mut args) else {
                break;
            };
            let command = &data[at..at + len];
            let args = &args[..argc.min(args.len())];
            // An empty `*0` command has no name at all.
            let cmd = args
                .first()
                .and_then(|&(s, e)| crate::cmd::table().lookup(&command[s..e]));
            let first_key = found;
            let fits = match cmd.map(|c| c.spec.keys) {
                Some(KeySpec::Range { first, last, step }) => remember_keys(
                    crate::cmd::key_range(argc, first, last, step),
                    command,
                    args,
                    memo,
                    &mut hashes,
                    &mut found,
                ),
                // EVAL, EVALSHA and FCALL (their keys follow a count), the
                // ZUNION family, XREAD …: only when every argument was seen.
                Some(KeySpec::Custom { find, .. }) if argc == args.len() => remember_keys(
                    find(Args::new(command, args)).into_iter(),
                    command,
                    args,
                    memo,
                    &mut hashes,
                    &mut found,
                ),
                _ => true,
            };
            if !fits {
                break; // the next batch starts with this command
            }
            // Members of the command's one key (HSET's fields, SADD's members).
            if let (Some((first, step)), true) =
                (cmd.and_then(|c| c.spec.members), found > first_key)
            {
                let key = hashes[first_key];
                let positions = (usize::from(first)..args.len()).step_by(usize::from(step));
                for i in positions.take(PREFETCH_KEYS - found_members) {
                    let (s, e) = args[i];
                    let member = &command[s..e];
                    if member.len() <= PREFETCH_MAX_KEY {
                        members[found_members] = (key, vireo_store::dict::hash_key(member));
                        found_members += 1;
                    }
                }
            }
            // Kept only while every command so far was: `take` hands them
            // out in order.
            keeping = keeping
                && argc == args.len()
                && kept_args + argc <= KEPT_ARGS
                && args.iter().all(|&(s, e)| e - s <= max_bulk);
            if keeping {
                self.ranges[kept_args..kept_args + argc].copy_from_slice(args);
                self.peeked[self.len] = Peeked {
                    at,
                    len,
                    cmd,
                    first: kept_args,
                    count: argc,
                };
                self.len += 1;
                kept_args += argc;
            }
            at += len;
        }
        if found > 1 || found_members > 1 {
            server.keyspace.prefetch(db, &hashes[..found]);
            server
                .keyspace
                .prefetch_members(db, &members[..found_members]);
        }
        at
    }
}

/// Hashes the keys at `indices` of one command into `hashes[found..]`
/// (and the memo) for prefetching; false, with nothing taken, when they
/// do not fit the batch's room and earlier commands already found keys.
fn remember_keys<'buf>(
    indices: impl Iterator<Item = usize> + Clone,
    command: &'buf [u8],
    args: &[(usize, usize)],
    memo: &hash_memo::Scope<'buf>,
    hashes: &mut [u64; PREFETCH_KEYS],
    found: &mut usize,
) -> bool {
    let indices = indices.take_while(|&i| i < args.len());
    let room = PREFETCH_KEYS - *found;
    if indices.clone().count() > room && *found > 0 {
        return false;
    }
    for i in indices.take(room) {
        let (s, e) = args[i];
        let key = &command[s..e];
        if key.len() <= PREFETCH_MAX_KEY {
            hashes[*found] = vireo_store::dict::hash_key(key);
            memo.remember(key, hashes[*found]);
            *found += 1;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// The look-ahead over `input` from its start, keeping what it
    /// parses; returns where the commands it looked at end.
    fn look(la: &mut LookAhead, server: &Server, db: usize, input: &[u8]) -> usize {
        let memo = hash_memo::Scope::open(input);
        la.look(server, db, input, 0, &memo, Some(usize::MAX))
    }

    fn set(key: &str) -> String {
        format!("*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$1\r\nv\r\n", key.len())
    }

    #[test]
    fn a_batch_covers_complete_commands() {
        let server = Server::new(Config::default(), 1);
        let mut la = LookAhead::new();
        let one = set("key:1").len();
        let many: String = (0..40).map(|i| set(&format!("key:{i:02}"))).collect();
        let each = set("key:00").len();
        assert_eq!(
            look(&mut la, &server, 0, many.as_bytes()),
            PREFETCH_COMMANDS * each
        );
        // Ten keys each: three commands fill the batch.
        let mset = format!(
            "*21\r\n$4\r\nMSET\r\n{}",
            "$1\r\nk\r\n$1\r\nv\r\n".repeat(10)
        );
        assert_eq!(
            look(&mut la, &server, 0, mset.repeat(5).as_bytes()),
            3 * mset.len()
        );
        // Keyless commands do not end the batch.
        let pings = "*1\r\n$4\r\nPING\r\n".repeat(20);
        assert_eq!(
            look(&mut la, &server, 0, pings.as_bytes()),
            PREFETCH_COMMANDS * 14
        );
        let partial = format!("{}{}*3\r\n$3\r\nSET", set("key:1"), set("key:2"));
        assert_eq!(look(&mut la, &server, 0, partial.as_bytes()), 2 * one);
        assert_eq!(look(&mut la, &server, 0, b"PING\r\n"), 0);
        assert_eq!(
            look(&mut la, &server, 9, set("a").as_bytes()),
            set("a").len()
        );
        // Members ride along with their keys and do not end a batch.
        let hsets: String = (0..20)
            .map(|i| format!("*4\r\n$4\r\nHSET\r\n$1\r\nh\r\n$3\r\nf{i:02}\r\n$1\r\nv\r\n"))
            .collect();
        assert_eq!(
            look(&mut la, &server, 0, hsets.as_bytes()),
            hsets.len() / 20 * PREFETCH_COMMANDS
        );
        // An empty command after a longer one: none of the longer one's
        // arguments is taken for its name.
        let empty_after = format!("{}*0\r\n{}", set("key:1"), set("key:2"));
        assert_eq!(
            look(&mut la, &server, 0, empty_after.as_bytes()),
            empty_after.len()
        );
    }

    #[test]
    fn script_keys_after_their_count_are_prefetched() {
        let server = Server::new(Config::default(), 1);
        let mut la = LookAhead::new();
        let evalsha = |keys: usize| {
            let mut c = format!("*{}\r\n$7\r\nEVALSHA\r\n$3\r\nsha\r\n", keys + 3);
            let count = keys.to_string();
            c += &format!("${}\r\n{count}\r\n", count.len());
            for i in 0..keys {
                c += &format!("$6\r\nkey:{i:02}\r\n");
            }
            c
        };
        // Twenty keys each: the second script's do not fit the batch's
        // room, so the batch ends after the first, as for MSET.
        let twenty = evalsha(20);
        assert_eq!(
            look(&mut la, &server, 0, twenty.repeat(3).as_bytes()),
            twenty.len()
        );
        // A count past the arguments or not a number finds no keys and
        // ends nothing.
        let wrong = "*4\r\n$7\r\nEVALSHA\r\n$3\r\nsha\r\n$3\r\n999\r\n$1\r\nk\r\n\
                     *4\r\n$4\r\nEVAL\r\n$1\r\nx\r\n$2\r\n-5\r\n$1\r\nk\r\n";
        assert_eq!(look(&mut la, &server, 0, wrong.as_bytes()), wrong.len());
    }

    /// Every command `take` hands out, as (offset, arguments, name).
    fn taken(la: &mut LookAhead, data: &[u8], mut at: usize) -> Vec<(usize, Vec<Vec<u8>>, String)> {
        let mut out = Vec::new();
        while let Some(p) = la.take(data, at) {
            let name = p.cmd.map_or("?", |c| c.spec.name).to_string();
            out.push((at, p.args.iter().map(<[u8]>::to_vec).collect(), name));
            at += p.len;
        }
        out
    }

    #[test]
    fn kept_commands_are_what_the_parser_finds() {
        let server = Server::new(Config::default(), 1);
        let mut la = LookAhead::new();
        let input = format!(
            "{}*0\r\n*2\r\n$4\r\nNOPE\r\n$1\r\nx\r\n*1\r\n$4\r\nping\r\n{}",
            set("k1"),
            set("k2")
        );
        let data = input.as_bytes();
        let memo = hash_memo::Scope::open(data);
        assert_eq!(la.look(&server, 0, data, 0, &memo, Some(512)), data.len());
        let got = taken(&mut la, data, 0);
        let mut parser = vireo_resp::Parser::new();
        let mut at = 0;
        let mut want = Vec::new();
        while let Ok(Some(n)) = parser.parse(&data[at..], &Default::default()) {
            let args: Vec<Vec<u8>> = parser
                .args(&data[at..])
                .iter()
                .map(<[u8]>::to_vec)
                .collect();
            want.push((at, args));
            at += n;
        }
        assert_eq!(at, data.len());
        let got_args: Vec<_> = got.iter().map(|(a, g, _)| (*a, g.clone())).collect();
        assert_eq!(got_args, want);
        let names: Vec<&str> = got.iter().map(|(_, _, n)| n.as_str()).collect();
        assert_eq!(names, ["set", "?", "?", "ping", "set"]);
        // The keys' hashes were recorded for the commands to find.
        let key = &data[17..19];
        assert_eq!(key, b"k1");
        assert_eq!(hash_memo::key_hash(key), vireo_store::dict::hash_key(b"k1"));
    }

    #[test]
    fn nothing_is_kept_past_a_limit_or_out_of_order() {
        let server = Server::new(Config::default(), 1);
        let mut la = LookAhead::new();
        let input = format!("{}{}{}", set("k1"), set("a-long-key"), set("k3"));
        let data = input.as_bytes();
        let memo = hash_memo::Scope::open(data);
        // A bulk over the limit: the parser will answer for it and what
        // follows.
        la.look(&server, 0, data, 0, &memo, Some(4));
        assert_eq!(taken(&mut la, data, 0).len(), 1);
        // An unauthenticated client's commands are not kept at all.
        la.look(&server, 0, data, 0, &memo, None);
        assert!(taken(&mut la, data, 0).is_empty());
        // Asked for another offset than the next kept command's: all
        // forgotten.
        la.look(&server, 0, data, 0, &memo, Some(usize::MAX));
        assert!(la.take(data, 1).is_none());
        assert!(la.take(data, 0).is_none());
        // A command with more arguments than are kept ends what is kept.
        let wide = format!("*40\r\n$4\r\nMGET\r\n{}", "$1\r\nk\r\n".repeat(39));
        let input = format!("{}{}", set("k1"), wide.repeat(2));
        let data = input.as_bytes();
        let memo = hash_memo::Scope::open(data);
        la.look(&server, 0, data, 0, &memo, Some(usize::MAX));
        assert_eq!(taken(&mut la, data, 0).len(), 1);
    }

    proptest::proptest! {
        /// Byte soup built from protocol fragments (commands with keys,
        /// unknown names, empty and partial commands, bad lengths), under a
        /// random bulk limit: whatever the look-ahead hands out is what the
        /// parser finds at the same offset, and it never hands out a
        /// command the parser would refuse.
        #[test]
        fn hands_out_only_what_the_parser_finds(
            picks in proptest::collection::vec(0..12usize, 1..40),
            max_bulk in 0..6usize,
        ) {
            let pieces: [&[u8]; 12] = [
                b"*2\r\n", b"*3\r\n", b"*0\r\n", b"$3\r\nGET\r\n", b"$3\r\nSET\r\n",
                b"$4\r\nMSET\r\n", b"$1\r\nk\r\n", b"$5\r\nkey:1\r\n", b"$0\r\n\r\n",
                b"$-1\r\n", b"$2\r\nx", b"PING\r\n",
            ];
            let data: Vec<u8> = picks.iter().flat_map(|&i| pieces[i].iter().copied()).collect();
            let server = Server::new(Config::default(), 1);
            let limits = vireo_resp::ParseLimits {
                max_bulk_len: max_bulk,
                ..Default::default()
            };
            let memo = hash_memo::Scope::open(&data);
            let mut la = LookAhead::new();
            let mut parser = vireo_resp::Parser::new();
            let mut at = 0;
            while at < data.len() {
                if at == 0 || at % 3 == 0 {
                    la.look(&server, 0, &data, at, &memo, Some(max_bulk));
                }
                let taken = la
                    .take(&data, at)
                    .map(|p| (p.len, p.args.iter().map(<[u8]>::to_vec).collect::<Vec<_>>()));
                let parsed = parser.parse(&data[at..], &limits);
                match (taken, parsed) {
                    (Some((len, args)), Ok(Some(n))) => {
                        proptest::prop_assert_eq!(len, n);
                        let want: Vec<Vec<u8>> =
                            parser.args(&data[at..]).iter().map(<[u8]>::to_vec).collect();
                        proptest::prop_assert_eq!(args, want);
                        at += n;
                    }
                    (Some(_), other) => {
                        proptest::prop_assert!(false, "kept a command the parser gives {:?}", other)
                    }
                    (None, Ok(Some(n))) => at += n,
                    (None, _) => break,
                }
            }
        }
    }
}
