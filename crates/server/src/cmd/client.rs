//! The CLIENT command family (Redis's `clientCommand` in networking.c):
//! naming, listing and killing connections, pausing clients, and the
//! per-connection reply and eviction switches.

use std::sync::atomic::Ordering;

use vireo_resp::number::parse_i64;
use vireo_resp::Args;
use vireo_store::clock::now_ms;

use super::shared::{reply_help, subcommand_syntax_error};
use super::{container, errors, flags::*, is, spec, text, CommandSpec, Ctx, KeySpec};
use crate::exec::tracking;
use crate::net::client::{cflags, ClientShared};
use crate::net::session::ReplyMode;
use crate::net::worker::Msg;

pub use crate::exec::monitor::stop_monitor;

const NS: u32 = NOSCRIPT | LOADING | STALE;
const ADMIN_NS: u32 = ADMIN | NOSCRIPT | LOADING | STALE;

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[container(
    "client",
    -2,
    0,
    &[
        spec("client|id", 2, NS, KeySpec::None, id),
        spec("client|setname", 3, NS, KeySpec::None, setname),
        spec("client|getname", 2, NS, KeySpec::None, getname),
        spec("client|info", 2, NS, KeySpec::None, info),
        spec("client|list", -2, ADMIN_NS, KeySpec::None, list),
        spec("client|kill", -3, ADMIN_NS, KeySpec::None, kill),
        spec("client|pause", -3, ADMIN_NS, KeySpec::None, pause),
        spec("client|unpause", 2, ADMIN_NS, KeySpec::None, unpause),
        spec("client|unblock", -3, ADMIN_NS, KeySpec::None, unblock),
        spec("client|reply", 3, NS, KeySpec::None, reply),
        spec("client|no-evict", 3, ADMIN_NS, KeySpec::None, no_evict),
        spec("client|no-touch", 3, NS, KeySpec::None, no_touch),
        spec(
            "client|tracking",
            -3,
            NS | SENTINEL,
            KeySpec::None,
            tracking,
        ),
        spec("client|caching", 3, NS | SENTINEL, KeySpec::None, caching),
        spec("client|getredir", 2, NS | SENTINEL, KeySpec::None, getredir),
        spec(
            "client|trackinginfo",
            2,
            NS | SENTINEL,
            KeySpec::None,
            trackinginfo,
        ),
        spec("client|help", 2, LOADING | STALE, KeySpec::None, help),
    ],
)];

/// CLIENT ID: the connection's unique id.
fn id(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    ctx.out.int(ctx.session.id as i64);
}

/// CLIENT SETNAME name: names the connection (an empty name clears it).
fn setname(ctx: &mut Ctx<'_>, args: Args<'_>) {
    match super::shared::set_client_name(ctx.session, args.get(2)) {
        Ok(()) => ctx.out.ok(),
        Err(e) => ctx.out.error(e),
    }
}

/// CLIENT GETNAME: the connection's name, or null when it has none.
fn getname(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let name = ctx.session.shared.name.lock().clone();
    match name {
        Some(n) => ctx.out.bulk(&n),
        None => ctx.out.null(),
    }
}

/// CLIENT INFO: this connection's CLIENT LIST line.
fn info(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let mut line = ctx.session.shared.info_line();
    line.push('\n');
    ctx.out.verbatim("txt", line.as_bytes());
}

/// Client classes for the TYPE filters of CLIENT LIST and CLIENT KILL.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ClientType {
    Normal,
    Replica,
    Master,
    PubSub,
}

impl ClientType {
    /// Parses a type name as Redis's `getClientTypeByName` does.
    fn parse(name: &[u8]) -> Option<ClientType> {
        [
            ("normal", ClientType::Normal),
            ("slave", ClientType::Replica),
            ("replica", ClientType::Replica),
            ("pubsub", ClientType::PubSub),
            ("master", ClientType::Master),
        ]
        .into_iter()
        .find(|(n, _)| is(name, n))
        .map(|(_, t)| t)
    }

    /// The class of a connected client (MONITOR clients count as normal,
    /// as in Redis).
    fn of(c: &ClientShared) -> ClientType {
        let flags = c.flags.load(Ordering::Relaxed);
        if flags & cflags::MASTER != 0 {
            ClientType::Master
        } else if flags & cflags::REPLICA != 0 {
            ClientType::Replica
        } else if flags & cflags::PUBSUB != 0 {
            ClientType::PubSub
        } else {
            ClientType::Normal
        }
    }
}

fn unknown_type_error(name: &[u8]) -> String {
    format!("ERR Unknown client type '{}'", text(name))
}

/// CLIENT LIST [TYPE type] [ID id ...]: one line per matching client.
fn list(ctx: &mut Ctx<'_>, args: Args<'_>) {
    // A client another one killed (CLIENT KILL, ACL changes) is gone for
    // Redis at once; here its worker closes it a moment later.
    let me = ctx.session.id;
    let clients: Vec<_> = ctx
        .server
        .clients
        .snapshot()
        .into_iter()
        .filter(|c| c.id == me || !c.killed.load(Ordering::Relaxed))
        .collect();
    let mut out = String::new();
    if args.len() == 4 && is(args.get(2), "type") {
        let Some(t) = ClientType::parse(args.get(3)) else {
            return ctx.out.error(&unknown_type_error(args.get(3)));
        };
        for c in clients.iter().filter(|c| ClientType::of(c) == t) {
            out.push_str(&c.info_line());
            out.push('\n');
        }
    } else if args.len() > 3 && is(args.get(2), "id") {
        let mut ids = Vec::with_capacity(args.len() - 3);
        for a in args.iter().skip(3) {
            match parse_i64(a) {
                Some(v) => ids.push(v),
                None => return ctx.out.error("ERR Invalid client ID"),
            }
        }
        // Every listed id gets its line, duplicates included, like Redis.
        for id in ids {
            if let Some(c) = u64::try_from(id)
                .ok()
                .and_then(|id| ctx.server.clients.get(id))
            {
                out.push_str(&c.info_line());
                out.push('\n');
            }
        }
    } else if args.len() != 2 {
        return ctx.out.error(errors::SYNTAX);
    } else {
        for c in &clients {
            out.push_str(&c.info_line());
            out.push('\n');
        }
    }
    ctx.out.verbatim("txt", out.as_bytes());
}

/// The filters of CLIENT KILL; unset ones match every client.
#[derive(Default)]
struct KillFilter<'a> {
    id: Option<u64>,
    addr: Option<&'a [u8]>,
    laddr: Option<&'a [u8]>,
    ctype: Option<ClientType>,
    user: Option<&'a [u8]>,
    skip_me: bool,
}

impl KillFilter<'_> {
    fn matches(&self, c: &ClientShared, me: u64) -> bool {
        self.id.iter().all(|&id| c.id == id)
            && self.addr.iter().all(|&a| a == c.addr.as_bytes())
            && self.laddr.iter().all(|&a| a == c.laddr.as_bytes())
            && self.user.iter().all(|&u| u == c.user_name().as_bytes())
            && self.ctype.iter().all(|&t| ClientType::of(c) == t)
            && !(self.skip_me && c.id == me)
    }
}

/// Parses the new-style `option value` pairs of CLIENT KILL; Err is the
/// error reply.
fn parse_kill_filter<'a>(
    args: Args<'a>,
    users: &crate::security::users::Users,
) -> Result<KillFilter<'a>, String> {
    let mut f = KillFilter {
        skip_me: true,
        ..KillFilter::default()
    };
    let mut i = 2;
    while i < args.len() {
        let opt = args.get(i);
        if i + 1 >= args.len() {
            return Err(errors::SYNTAX.into());
        }
        let val = args.get(i + 1);
        if is(opt, "id") {
            match parse_i64(val) {
                Some(v) if v >= 1 => f.id = Some(v as u64),
                _ => return Err("ERR client-id should be greater than 0".into()),
            }
        } else if is(opt, "type") {
            f.ctype = Some(ClientType::parse(val).ok_or_else(|| unknown_type_error(val))?);
        } else if is(opt, "addr") {
            f.addr = Some(val);
        } else if is(opt, "laddr") {
            f.laddr = Some(val);
        } else if is(opt, "user") {
            if users.get(val).is_none() {
                return Err(format!("ERR No such user '{}'", text(val)));
            }
            f.user = Some(val);
        } else if is(opt, "skipme") {
            f.skip_me = if is(val, "yes") {
                true
            } else if is(val, "no") {
                false
            } else {
                return Err(errors::SYNTAX.into());
            };
        } else {
            return Err(errors::SYNTAX.into());
        }
        i += 2;
    }
    Ok(f)
}

/// CLIENT KILL addr:port (old form: OK, or an error if no client has that
/// address) or CLIENT KILL [ID id] [ADDR addr] [LADDR addr] [TYPE type]
/// [USER user] [SKIPME yes|no] (the number of clients killed). Other
/// clients are closed by their own worker; the caller itself is closed
/// once its reply is written.
fn kill(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let old_form = args.len() == 3;
    let filter = if old_form {
        KillFilter {
            addr: Some(args.get(2)),
            ..KillFilter::default()
        }
    } else {
        match parse_kill_filter(args, &ctx.server.security.users) {
            Ok(f) => f,
            Err(e) => return ctx.out.error(&e),
        }
    };
    let me = ctx.session.id;
    let mut killed = 0i64;
    let mut kill_me = false;
    for c in ctx.server.clients.snapshot() {
        if c.killed.load(Ordering::Relaxed) || !filter.matches(&c, me) {
            continue;
        }
        killed += 1;
        if c.id == me {
            kill_me = true;
        } else {
            c.killed.store(true, Ordering::Relaxed);
            ctx.server.notify(c.worker, Msg::Kill(c.id));
            crate::repl::close_replica_link(ctx.server, c.id);
        }
    }
    if old_form {
        if killed == 0 {
            ctx.out.error("ERR No such client");
        } else {
            ctx.out.ok();
        }
    } else {
        ctx.out.int(killed);
    }
    if kill_me {
        ctx.session.close_after_reply = true;
        ctx.session.shared.set_flag(cflags::CLOSE_AFTER_REPLY, true);
    }
}

/// Pause mode values stored in [`crate::server::Pause::mode`].
const PAUSE_WRITE: u8 = 1;
const PAUSE_ALL: u8 = 2;

/// CLIENT PAUSE timeout [WRITE|ALL]: holds back commands from every
/// client (only those that may write, with WRITE) for `timeout` ms. A pause
/// already in force is only ever extended or made stricter.
fn pause(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if args.len() > 4 {
        return subcommand_syntax_error(ctx, args);
    }
    let mode = if args.len() == 4 {
        let m = args.get(3);
        if is(m, "write") {
            PAUSE_WRITE
        } else if is(m, "all") {
            PAUSE_ALL
        } else {
            return ctx.out.error("ERR CLIENT PAUSE mode must be WRITE or ALL");
        }
    } else {
        PAUSE_ALL
    };
    let Some(timeout) = parse_i64(args.get(2)) else {
        return ctx
            .out
            .error("ERR timeout is not an integer or out of range");
    };
    if timeout < 0 {
        return ctx.out.error("ERR timeout is negative");
    }
    // Redis adds the current time without an overflow check, so a huge
    // timeout wraps into the past and pauses nothing: end 0 does the same.
    let end = if timeout == 0 {
        0
    } else {
        (now_ms() as i64)
            .checked_add(timeout)
            .map_or(0, |e| e as u64)
    };
    let p = &ctx.server.pause;
    let (mode, end) = if p.active() != 0 {
        (
            mode.max(p.mode.load(Ordering::Acquire)),
            end.max(p.until_ms.load(Ordering::Acquire)),
        )
    } else {
        (mode, end)
    };
    p.until_ms.store(end, Ordering::Release);
    p.mode.store(mode, Ordering::Release);
    // As in Redis, a paused server expires nothing (in either mode).
    let expiry_end = ctx.server.pause.expiry_end(end);
    ctx.server.keyspace.pause_expiry_until(expiry_end);
    ctx.out.ok();
}

/// CLIENT UNPAUSE: lifts a CLIENT PAUSE and lets held-back clients run.
fn unpause(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let p = &ctx.server.pause;
    p.mode.store(0, Ordering::Release);
    p.until_ms.store(0, Ordering::Release);
    let expiry_end = ctx.server.pause.expiry_end(0);
    ctx.server.keyspace.pause_expiry_until(expiry_end);
    ctx.server.wake_all();
    ctx.out.ok();
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: ends another client's wait in a
/// blocking command, as a timeout (the default) or with an UNBLOCKED error;
/// replies 1 if that client was blocked, else 0.
fn unblock(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if args.len() > 4 {
        return subcommand_syntax_error(ctx, args);
    }
    let error = match args.try_get(3) {
        None => false,
        Some(r) if is(r, "timeout") => false,
        Some(r) if is(r, "error") => true,
        Some(_) => {
            return ctx
                .out
                .error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
        }
    };
    let Some(id) = ctx.int_arg(args.get(2)) else {
        return;
    };
    let done =
        u64::try_from(id).is_ok_and(|id| crate::exec::blocking::unblock(ctx.server, id, error));
    ctx.out.int(i64::from(done));
}

/// CLIENT REPLY ON|OFF|SKIP: turns replies to this connection on or off,
/// or drops the next command's reply. OFF and SKIP reply nothing.
fn reply(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let mode = args.get(2);
    let s = &mut *ctx.session;
    if is(mode, "on") {
        s.reply_mode = ReplyMode::On;
        ctx.out.ok();
    } else if is(mode, "off") {
        s.reply_mode = ReplyMode::Off;
    } else if is(mode, "skip") {
        if s.reply_mode != ReplyMode::Off {
            s.reply_mode = ReplyMode::SkipNext;
        }
    } else {
        ctx.out.error(errors::SYNTAX);
    }
}

/// Parses ON|OFF (any case) for the NO-EVICT / NO-TOUCH switches.
fn on_off(arg: &[u8]) -> Option<bool> {
    if is(arg, "on") {
        Some(true)
    } else if is(arg, "off") {
        Some(false)
    } else {
        None
    }
}

/// CLIENT NO-EVICT ON|OFF: exempts this connection from client eviction.
fn no_evict(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(on) = on_off(args.get(2)) else {
        return ctx.out.error(errors::SYNTAX);
    };
    ctx.session.no_evict = on;
    ctx.session.shared.set_flag(cflags::NO_EVICT, on);
    ctx.server.client_eviction.changed();
    ctx.out.ok();
}

/// CLIENT NO-TOUCH ON|OFF: this connection's reads leave keys' access
/// times alone (a Redis 7.2 addition, offered here as well).
fn no_touch(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(on) = on_off(args.get(2)) else {
        return ctx.out.error(errors::SYNTAX);
    };
    ctx.session.no_touch = on;
    ctx.session.shared.set_flag(cflags::NO_TOUCH, on);
    ctx.out.ok();
}

/// Parses CLIENT TRACKING's options (after ON|OFF); Err is the error.
fn tracking_options(ctx: &Ctx<'_>, args: Args<'_>) -> Result<tracking::Options, String> {
    let mut o = tracking::Options {
        redirect: 0,
        bcast: false,
        optin: false,
        optout: false,
        noloop: false,
        prefixes: Vec::new(),
    };
    let mut i = 3;
    while i < args.len() {
        let opt = args.get(i);
        let value = args.try_get(i + 1);
        match value {
            Some(v) if is(opt, "redirect") => {
                if o.redirect != 0 {
                    return Err("ERR A client can only redirect to a single other client".into());
                }
                let id = parse_i64(v).ok_or(errors::NOT_INT)?;
                let target = u64::try_from(id)
                    .ok()
                    .and_then(|id| ctx.server.clients.get(id));
                let Some(target) = target else {
                    return Err("ERR The client ID you want redirect to does not exist".into());
                };
                o.redirect = target.id;
                i += 1;
            }
            Some(v) if is(opt, "prefix") => {
                o.prefixes.push(v.into());
                i += 1;
            }
            _ if is(opt, "bcast") => o.bcast = true,
            _ if is(opt, "optin") => o.optin = true,
            _ if is(opt, "optout") => o.optout = true,
            _ if is(opt, "noloop") => o.noloop = true,
            _ => return Err(errors::SYNTAX.into()),
        }
        i += 1;
    }
    Ok(o)
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX p ...] [OPTIN]
/// [OPTOUT] [NOLOOP]: server-assisted client-side caching.
fn tracking(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let o = match tracking_options(ctx, args) {
        Ok(o) => o,
        Err(e) => return ctx.out.error(&e),
    };
    let mode = args.get(2);
    if is(mode, "on") {
        if let Err(e) = tracking::check_options(ctx.session, &o) {
            return ctx.out.error(&e);
        }
        tracking::enable(ctx.server, ctx.session, o);
    } else if is(mode, "off") {
        tracking::disable(ctx.server, ctx.session);
    } else {
        return ctx.out.error(errors::SYNTAX);
    }
    ctx.out.ok();
}

/// CLIENT CACHING YES|NO: whether the next command's keys are tracked, in
/// OPTIN and OPTOUT modes.
fn caching(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let opt = args.get(2);
    let yes = if is(opt, "yes") {
        true
    } else if is(opt, "no") {
        false
    } else {
        return ctx.out.error(errors::SYNTAX);
    };
    match tracking::set_caching(ctx.session, yes) {
        Ok(()) => ctx.out.ok(),
        Err(e) => ctx.out.error(e),
    }
}

/// CLIENT GETREDIR: the tracking redirect target, 0 for none, -1 when
/// tracking is off.
fn getredir(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    ctx.out.int(tracking::redirect_of(ctx.session));
}

/// CLIENT TRACKINGINFO: flags, redirect and prefixes of this connection's
/// tracking.
fn trackinginfo(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let (flag_names, prefixes) = tracking::info(ctx.session);
    let out = &mut *ctx.out;
    out.map(3);
    out.bulk(b"flags");
    out.set(flag_names.len());
    for f in flag_names {
        out.bulk(f.as_bytes());
    }
    out.bulk(b"redirect");
    out.int(tracking::redirect_of(ctx.session));
    out.bulk(b"prefixes");
    out.array(prefixes.len());
    for p in &prefixes {
        out.bulk(p);
    }
}

/// CLIENT HELP: the subcommand summary.
fn help(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    reply_help(
        ctx,
        "CLIENT",
        &[
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made from the specified address",
            "    * LADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
            "UNPAUSE",
            "    Stop the current client pause, resuming traffic.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
            "NO-TOUCH (ON|OFF)",
            "    Will not touch LRU/LFU stats when this mode is on.",
        ],
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_type_names() {
        assert_eq!(ClientType::parse(b"NORMAL"), Some(ClientType::Normal));
        assert_eq!(ClientType::parse(b"slave"), Some(ClientType::Replica));
        assert_eq!(ClientType::parse(b"Replica"), Some(ClientType::Replica));
        assert_eq!(ClientType::parse(b"pubsub"), Some(ClientType::PubSub));
        assert_eq!(ClientType::parse(b"master"), Some(ClientType::Master));
        assert_eq!(ClientType::parse(b"nope"), None);
    }

    #[test]
    fn kill_filters_match_like_redis() {
        let c = ClientShared::new(7, "1.2.3.4:5".into(), "127.0.0.1:6379".into(), 9, 0, false);
        let f = KillFilter {
            skip_me: true,
            ..KillFilter::default()
        };
        assert!(f.matches(&c, 1));
        assert!(!f.matches(&c, 7));
        let f = KillFilter {
            id: Some(7),
            addr: Some(b"1.2.3.4:5"),
            laddr: Some(b"127.0.0.1:6379"),
            ctype: Some(ClientType::Normal),
            user: Some(b"default"),
            skip_me: false,
        };
        assert!(f.matches(&c, 7));
        let f = KillFilter {
            ctype: Some(ClientType::PubSub),
            ..KillFilter::default()
        };
        assert!(!f.matches(&c, 1));
        let f = KillFilter {
            addr: Some(b"1.2.3.4:6"),
            ..KillFilter::default()
        };
        assert!(!f.matches(&c, 1));
    }

    #[test]
    fn on_off_parsing() {
        assert_eq!(on_off(b"ON"), Some(true));
        assert_eq!(on_off(b"off"), Some(false));
        assert_eq!(on_off(b"yes"), None);
    }
}
