//! Connection commands: PING, ECHO, SELECT, QUIT, RESET, HELLO, AUTH.

use std::sync::atomic::Ordering;

use vireo_resp::number::parse_i64;
use vireo_resp::{Args, Protocol};

use super::shared::set_client_name;
use super::{errors, flags::*, is, spec, CommandSpec, Ctx, KeySpec};
use crate::net::client::cflags;
use crate::net::session::ReplyMode;
use crate::server::REDIS_VERSION;

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    spec("ping", -1, FAST | SENTINEL, KeySpec::None, ping),
    spec("echo", 2, LOADING | STALE | FAST, KeySpec::None, echo),
    spec("select", 2, LOADING | STALE | FAST, KeySpec::None, select),
    spec(
        "quit",
        -1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY,
        KeySpec::None,
        quit,
    ),
    spec(
        "reset",
        1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY,
        KeySpec::Queued,
        reset,
    ),
    spec(
        "hello",
        -1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | SENTINEL | ALLOW_BUSY,
        KeySpec::None,
        hello,
    ),
    spec(
        "auth",
        -2,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | SENTINEL | ALLOW_BUSY,
        KeySpec::None,
        auth,
    ),
];

/// PING [message]: PONG, or the message as a bulk string; a RESP2 client
/// in subscribed mode gets `["pong", message]` (an empty message without
/// one), as Redis answers there.
fn ping(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if args.len() <= 2 && ctx.session.subs.active() && ctx.out.protocol() == Protocol::Resp2 {
        ctx.out.array(2);
        ctx.out.bulk(b"pong");
        return ctx.out.bulk(args.try_get(1).unwrap_or_default());
    }
    match args.len() {
        1 => ctx.out.simple("PONG"),
        2 => ctx.out.bulk(args.get(1)),
        _ => ctx
            .out
            .error("ERR wrong number of arguments for 'ping' command"),
    }
}

/// ECHO message.
fn echo(ctx: &mut Ctx<'_>, args: Args<'_>) {
    ctx.out.bulk(args.get(1));
}

/// SELECT index: changes the connection's database.
fn select(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(id) = ctx.int_arg(args.get(1)) else {
        return;
    };
    if id < 0 || id as usize >= ctx.server.keyspace.databases() {
        ctx.out.error(errors::DB_RANGE);
        return;
    }
    ctx.db = id as usize;
    ctx.session.db = id as usize;
    ctx.out.ok();
}

/// QUIT: replies OK and closes the connection once the reply is written.
fn quit(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    ctx.out.ok();
    ctx.session.close_after_reply = true;
    ctx.session.shared.set_flag(cflags::CLOSE_AFTER_REPLY, true);
}

/// RESET: returns the connection to its just-connected state.
fn reset(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    crate::exec::multi::reset(&mut ctx.keys, ctx.session);
    crate::exec::monitor::stop_monitor(ctx.server, ctx.session);
    crate::exec::pubsub::forget_client(ctx.server, ctx.session);
    crate::exec::tracking::disable(ctx.server, ctx.session);
    let s = &mut *ctx.session;
    s.db = 0;
    ctx.db = 0;
    s.reply_mode = ReplyMode::On;
    s.no_evict = false;
    s.no_touch = false;
    crate::security::reset_user(ctx.server, s);
    *s.shared.name.lock() = None;
    for f in [cflags::NO_EVICT, cflags::NO_TOUCH] {
        s.shared.set_flag(f, false);
    }
    set_protocol(ctx, Protocol::Resp2);
    ctx.out.simple("RESET");
}

fn set_protocol(ctx: &mut Ctx<'_>, p: Protocol) {
    ctx.out.set_protocol(p);
    let v = if p == Protocol::Resp3 { 3 } else { 2 };
    ctx.session.shared.resp.store(v, Ordering::Relaxed);
    crate::exec::tracking::protocol_changed(ctx.server, ctx.session, v == 3);
}

/// Redis's reply to a failed authentication.
const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// AUTH [username] password.
fn auth(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let (user, pass) = match args.len() {
        2 => (&b"default"[..], args.get(1)),
        3 => (args.get(1), args.get(2)),
        _ => return ctx.out.error(errors::SYNTAX),
    };
    if args.len() == 2 && ctx.server.security.users.default_user().rules().nopass() {
        ctx.out.error(
            "ERR AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        );
        return;
    }
    if crate::security::authenticate(ctx.server, ctx.session, user, pass, args.get(0)) {
        ctx.out.ok();
    } else {
        ctx.out.error(WRONGPASS);
    }
}

/// HELLO [protover [AUTH user pass] [SETNAME name]]: switches protocol,
/// optionally authenticates and names the client, and describes the server.
fn hello(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let mut proto = None;
    let mut i = 1;
    if args.len() >= 2 {
        match parse_i64(args.get(1)) {
            Some(v) if v == 2 || v == 3 => proto = Some(v),
            Some(_) => return ctx.out.error("NOPROTO unsupported protocol version"),
            None => {
                return ctx
                    .out
                    .error("ERR Protocol version is not an integer or out of range")
            }
        }
        i = 2;
    }
    let mut credentials = None;
    let mut name = None;
    while i < args.len() {
        let more = args.len() - i - 1;
        let opt = args.get(i);
        if is(opt, "auth") && more >= 2 {
            credentials = Some((args.get(i + 1), args.get(i + 2)));
            i += 3;
        } else if is(opt, "setname") && more >= 1 {
            name = Some(args.get(i + 1));
            i += 2;
        } else {
            let msg = format!("ERR Syntax error in HELLO option '{}'", super::text(opt));
            return ctx.out.error(&msg);
        }
    }
    if let Some((user, pass)) = credentials {
        if !crate::security::authenticate(ctx.server, ctx.session, user, pass, args.get(0)) {
            return ctx.out.error(WRONGPASS);
        }
    }
    if !ctx.session.authenticated {
        ctx.out.error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and \
             select the RESP protocol version at the same time",
        );
        return;
    }
    if let Some(n) = name {
        if let Err(e) = set_client_name(ctx.session, n) {
            return ctx.out.error(e);
        }
    }
    if let Some(v) = proto {
        set_protocol(
            ctx,
            if v == 3 {
                Protocol::Resp3
            } else {
                Protocol::Resp2
            },
        );
    }
    let out = &mut *ctx.out;
    let version = if out.protocol() == Protocol::Resp3 {
        3
    } else {
        2
    };
    out.map(7);
    out.bulk(b"server");
    out.bulk(b"redis");
    out.bulk(b"version");
    out.bulk(REDIS_VERSION.as_bytes());
    out.bulk(b"proto");
    out.int(version);
    out.bulk(b"id");
    out.int(ctx.session.id as i64);
    out.bulk(b"mode");
    out.bulk(b"standalone");
    out.bulk(b"role");
    out.bulk(b"master");
    out.bulk(b"modules");
    out.array(0);
}
