//! Helpers more than one command family uses: the HELP reply of container
//! commands, the subcommand syntax error, float arguments as Redis parses
//! them, the size limit of unbounded replies, the SCAN family's options,
//! client names (HELLO SETNAME, CLIENT SETNAME), the propagated form of
//! pops (LMPOP, ZMPOP and the blocking pops), and storing a computed sorted
//! set (ZRANGESTORE, ZUNIONSTORE and the like, GEORADIUS ... STORE), and
//! the gate of protected commands (DEBUG, MODULE). Families import each
//! other only through here and the command table.

use std::sync::atomic::Ordering;

use vireo_resp::Args;
use vireo_store::glob::glob_match;
use vireo_store::list::End;
use vireo_store::zset::ZSet;
use vireo_store::Value;

use super::{errors, is, text, Ctx};
use crate::exec::notify::class as ev;
use crate::net::client::cflags;
use crate::net::session::Session;

/// Replies a container's HELP text: the usage line, `lines`, then the HELP
/// entry every container has, each as a status reply (Redis's
/// `addReplyHelp`).
pub fn reply_help(ctx: &mut Ctx<'_>, name: &str, lines: &[&str]) {
    ctx.out.array(lines.len() + 3);
    ctx.out.simple(&format!(
        "{name} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for l in lines {
        ctx.out.simple(l);
    }
    ctx.out.simple("HELP");
    ctx.out.simple("    Prints this help.");
}

/// Replies Redis's error for a known subcommand called with arguments it
/// does not accept (`addReplySubcommandSyntaxError`).
pub fn subcommand_syntax_error(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let sub: String = text(args.get(1)).chars().take(128).collect();
    let msg = format!(
        "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try {} HELP.",
        text(args.get(0)).to_ascii_uppercase()
    );
    ctx.out.error(&msg);
}

/// How large a reply may grow before a command producing an unbounded
/// number of elements (SRANDMEMBER with a negative count, up to 2^63
/// members) gives up: the hard output-buffer limit of normal clients, or
/// `proto-max-bulk-len` when there is none. Redis would keep writing; past
/// this size Vireo cuts the reply and closes the connection, as Redis does
/// once a client goes over its output limit.
pub fn reply_budget(ctx: &Ctx<'_>) -> usize {
    let hot = &ctx.server.config.hot;
    let hard = hot.client_output_buffer_limits[0]
        .hard
        .load(Ordering::Relaxed);
    let cap = hot.proto_max_bulk_len.load(Ordering::Relaxed);
    let budget = if hard > 0 { hard.min(cap) } else { cap };
    usize::try_from(budget).unwrap_or(usize::MAX)
}

/// Stores a computed sorted set at `dst` (deleting `dst` when it is empty)
/// and replies its size, as ZRANGESTORE, the ZUNIONSTORE family and the
/// GEO commands' STORE options do; `event` is the command's keyspace event
/// (`del` when the result is empty). The members must be distinct.
pub fn store_zset_result(ctx: &mut Ctx<'_>, dst: &[u8], items: Vec<(Vec<u8>, f64)>, event: &str) {
    let n = items.len();
    if n == 0 {
        if ctx.keys.delete(ctx.db, dst) {
            ctx.modified(dst);
            ctx.notify(ev::GENERIC, "del", dst);
        }
        return ctx.out.int(0);
    }
    let z = ZSet::from_entries(items, ctx.server.config.hot.zset_limits());
    ctx.keys.set(ctx.db, dst, Value::ZSet(z));
    ctx.modified(dst);
    ctx.notify(ev::ZSET, event, dst);
    ctx.signal_ready(dst);
    ctx.out.int(n as i64);
}

/// Parses a SCAN-family cursor as Redis's `strtoul`-based parser does: an
/// optional sign and decimal digits, nothing else (not even whitespace);
/// the empty string is 0, a minus sign negates modulo 2^64, and values
/// past `u64::MAX` are rejected.
pub fn parse_cursor(arg: &[u8]) -> Option<u64> {
    if arg.is_empty() {
        return Some(0);
    }
    let (negative, digits) = match arg.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, arg),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if negative { v.wrapping_neg() } else { v })
}

/// The options of a SCAN-family command.
pub struct ScanArgs<'a> {
    /// Where to resume.
    pub cursor: u64,
    /// MATCH pattern; None when absent or `*` (which matches everything).
    pub pattern: Option<&'a [u8]>,
    /// COUNT: roughly how many elements to visit (default 10).
    pub count: usize,
    /// TYPE filter (keyspace SCAN only).
    pub type_name: Option<&'a [u8]>,
}

impl ScanArgs<'_> {
    /// True if an element named `name` passes the MATCH filter.
    pub fn matches(&self, name: &[u8]) -> bool {
        self.pattern.is_none_or(|p| glob_match(p, name, false))
    }
}

/// Parses `cursor [MATCH pattern] [COUNT count] [TYPE type]` starting at
/// argument `at` (the cursor), as Redis's `scanGenericCommand`; TYPE only
/// when `allow_type`. Replies the error and returns None on bad input.
pub fn parse_scan_args<'a>(
    ctx: &mut Ctx<'_>,
    args: Args<'a>,
    at: usize,
    allow_type: bool,
) -> Option<ScanArgs<'a>> {
    let Some(cursor) = parse_cursor(args.get(at)) else {
        ctx.out.error("ERR invalid cursor");
        return None;
    };
    let mut parsed = ScanArgs {
        cursor,
        pattern: None,
        count: 10,
        type_name: None,
    };
    let mut i = at + 1;
    while i < args.len() {
        let opt = args.get(i);
        let Some(value) = args.try_get(i + 1) else {
            ctx.out.error(errors::SYNTAX);
            return None;
        };
        if is(opt, "count") {
            let count = ctx.int_arg(value)?;
            if count < 1 {
                ctx.out.error(errors::SYNTAX);
                return None;
            }
            parsed.count = usize::try_from(count).unwrap_or(usize::MAX);
        } else if is(opt, "match") {
            parsed.pattern = (value != b"*").then_some(value);
        } else if is(opt, "type") && allow_type {
            parsed.type_name = Some(value);
        } else {
            ctx.out.error(errors::SYNTAX);
            return None;
        }
        i += 2;
    }
    Some(parsed)
}

/// True if a client name is acceptable: printable ASCII without spaces.
pub fn valid_client_name(name: &[u8]) -> bool {
    name.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

/// Sets (or with an empty name clears) the client name; Err is the reply.
pub fn set_client_name(session: &Session, name: &[u8]) -> Result<(), &'static str> {
    if !valid_client_name(name) {
        return Err("ERR Client names cannot contain spaces, newlines or special characters.");
    }
    *session.shared.name.lock() = (!name.is_empty()).then(|| name.to_vec());
    Ok(())
}

/// A pop from the head or tail of one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pop {
    /// From a list. `count` None: one element, replied `[key, element]`
    /// (BLPOP/BRPOP); Some: up to that many, `[key, [elements]]` (BLMPOP).
    List { end: End, count: Option<usize> },
    /// From a sorted set, lowest scores first unless `max`. `count` None:
    /// `[key, member, score]` (BZPOPMIN/BZPOPMAX); Some:
    /// `[key, [[member, score], ...]]` (BZMPOP).
    ZSet { max: bool, count: Option<usize> },
}

/// The non-blocking command a pop of `n` elements from `key` propagates
/// as (Redis 7.0 rewrites BLPOP to LPOP, BLMPOP and LMPOP to LPOP with a
/// count, BZPOPMIN to ZPOPMIN, …).
pub fn pop_effect(pop: Pop, key: &[u8], n: usize) -> Vec<Vec<u8>> {
    let (name, count): (&[u8], _) = match pop {
        Pop::List {
            end: End::Left,
            count,
        } => (b"LPOP", count),
        Pop::List {
            end: End::Right,
            count,
        } => (b"RPOP", count),
        Pop::ZSet { max: false, count } => (b"ZPOPMIN", count),
        Pop::ZSet { max: true, count } => (b"ZPOPMAX", count),
    };
    let mut cmd = vec![name.to_vec(), key.to_vec()];
    if count.is_some() {
        cmd.push(itoa::Buffer::new().format(n).as_bytes().to_vec());
    }
    cmd
}

/// Whether a protected command (DEBUG, MODULE LOAD …) may run for this
/// client under its `enable-*-command` setting: `yes`, `local` (loopback
/// and Unix-socket clients only) or `no` (Redis's `allowProtectedAction`).
pub fn protected_allowed(ctx: &Ctx<'_>, setting: &str) -> bool {
    match setting {
        "yes" => true,
        "local" => is_local_client(ctx),
        _ => false,
    }
}

/// A Unix-socket client, or one connected from a loopback address (Redis's
/// `islocalClient`).
pub fn is_local_client(ctx: &Ctx<'_>) -> bool {
    let shared = &ctx.session.shared;
    if shared.flags.load(Ordering::Relaxed) & cflags::UNIX != 0 {
        return true;
    }
    let host = shared
        .addr
        .rsplit_once(':')
        .map_or(&shared.addr[..], |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "127.0.0.1" || host == "::1" || host.starts_with("::ffff:127.0.0.1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_parsing_follows_strtoul() {
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"+5"), Some(5));
        assert_eq!(parse_cursor(b"-0"), Some(0));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"-18446744073709551615"), Some(1));
        assert_eq!(parse_cursor(b"18446744073709551616"), None);
        assert_eq!(parse_cursor(b"-"), None);
        assert_eq!(parse_cursor(b"+"), None);
        assert_eq!(parse_cursor(b" 1"), None);
        assert_eq!(parse_cursor(b"1 "), None);
        assert_eq!(parse_cursor(b"1x"), None);
        assert_eq!(parse_cursor(b"0x10"), None);
    }
}
