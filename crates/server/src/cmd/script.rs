//! EVAL, EVALSHA, their `_RO` forms, and SCRIPT (Redis's `eval.c`
//! commands). The run itself is `exec::script` (a SCRIPT DEBUG session's
//! plumbing `exec::script_debug`); this file parses arguments and words
//! replies.

use vireo_resp::Args;

use super::shared::reply_help;
use super::{container, flags::*, is, spec, CommandSpec, Ctx, KeySpec};
use crate::exec::script::{self as run, Kind};
use crate::exec::script_debug::DebugMode;
use crate::server::Server;

/// Flags of EVAL, EVALSHA and FCALL (Redis 7.0's table), plus ours.
pub const SCRIPT_FLAGS: u32 = NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | NO_MANDATORY_KEYS | STALE;
/// Flags of their `_RO` forms.
pub const SCRIPT_RO_FLAGS: u32 = NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE | READONLY;

/// Keys of a script command: `numkeys` at argument 2, keys after it.
pub const SCRIPT_KEYS: KeySpec = KeySpec::Custom {
    first: 0,
    last: 0,
    step: 0,
    find: script_keys,
};

/// The declared keys' argument indices (none when `numkeys` is invalid).
pub fn script_keys(args: Args<'_>) -> Vec<usize> {
    run::declared_keys(args)
        .map(Iterator::collect)
        .unwrap_or_default()
}

/// A script command's table entry.
const fn script_spec(
    name: &'static str,
    flags: u32,
    handler: super::Handler,
    flags_fn: super::FlagsFn,
) -> CommandSpec {
    spec(name, -3, flags | SCRIPT, SCRIPT_KEYS, handler).with_flags_fn(flags_fn)
}

const SUBS: &[CommandSpec] = &[
    spec("script|debug", 3, NOSCRIPT, KeySpec::None, debug),
    spec("script|exists", -3, NOSCRIPT, KeySpec::None, exists),
    spec("script|flush", -2, NOSCRIPT, KeySpec::None, flush),
    spec("script|help", 2, LOADING | STALE, KeySpec::None, help),
    spec("script|kill", 2, NOSCRIPT | ALLOW_BUSY, KeySpec::None, kill),
    spec("script|load", 3, NOSCRIPT | STALE, KeySpec::None, load),
];

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    script_spec("eval", SCRIPT_FLAGS, eval, eval_flags),
    script_spec("eval_ro", SCRIPT_RO_FLAGS, eval_ro, eval_flags),
    script_spec("evalsha", SCRIPT_FLAGS, evalsha, evalsha_flags),
    script_spec("evalsha_ro", SCRIPT_RO_FLAGS, evalsha_ro, evalsha_flags),
    container("script", -2, 0, SUBS),
];

fn eval_flags(server: &Server, worker: usize, args: Args<'_>, base: u32) -> u32 {
    run::command_flags(server, worker, Kind::Eval, args, base)
}

fn evalsha_flags(server: &Server, worker: usize, args: Args<'_>, base: u32) -> u32 {
    run::command_flags(server, worker, Kind::EvalSha, args, base)
}

/// EVAL script numkeys [key ...] [arg ...]
fn eval(ctx: &mut Ctx<'_>, args: Args<'_>) {
    run::run_command(ctx, args, Kind::Eval, false);
}

/// EVAL_RO: EVAL that refuses writes.
fn eval_ro(ctx: &mut Ctx<'_>, args: Args<'_>) {
    run::run_command(ctx, args, Kind::Eval, true);
}

/// EVALSHA sha1 numkeys [key ...] [arg ...]
fn evalsha(ctx: &mut Ctx<'_>, args: Args<'_>) {
    run::run_command(ctx, args, Kind::EvalSha, false);
}

/// EVALSHA_RO: EVALSHA that refuses writes.
fn evalsha_ro(ctx: &mut Ctx<'_>, args: Args<'_>) {
    run::run_command(ctx, args, Kind::EvalSha, true);
}

/// SCRIPT DEBUG YES|SYNC|NO: the debug mode of this client's next EVAL
/// (see `exec::script_debug`).
fn debug(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if !ctx.out.is_empty() {
        return ctx
            .out
            .error("ERR SCRIPT DEBUG must be called outside a pipeline");
    }
    let mode = args.get(2);
    let mode = if is(mode, "no") {
        None
    } else if is(mode, "yes") {
        Some(DebugMode::Forked)
    } else if is(mode, "sync") {
        Some(DebugMode::Sync)
    } else {
        return ctx.out.error("ERR Use SCRIPT DEBUG YES/SYNC/NO");
    };
    if mode.is_some() && ctx.session.tls {
        return ctx
            .out
            .error("ERR SCRIPT DEBUG is not supported on TLS connections");
    }
    ctx.session.script_debug = mode;
    ctx.out.ok();
}

/// SCRIPT EXISTS sha1 [sha1 ...]
fn exists(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let found = run::script_exists(ctx.server, args.iter().skip(2).map(<[u8]>::to_vec));
    ctx.out.array(found.len());
    for f in found {
        ctx.out.int(i64::from(f));
    }
}

/// SCRIPT FLUSH [ASYNC|SYNC]
fn flush(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let valid = args.len() == 2
        || (args.len() == 3 && (is(args.get(2), "async") || is(args.get(2), "sync")));
    if !valid {
        return ctx
            .out
            .error("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
    }
    run::script_flush(ctx.server);
    ctx.out.ok();
}

/// SCRIPT KILL: stops the timed-out script if it has not written.
fn kill(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    match ctx.server.scripts.kill(true) {
        Ok(()) => ctx.out.ok(),
        Err(e) => ctx.out.error(e),
    }
}

/// SCRIPT LOAD script: caches it, replies its SHA1.
fn load(ctx: &mut Ctx<'_>, args: Args<'_>) {
    match run::script_load(ctx, args.get(2)) {
        Ok(sha) => ctx.out.bulk(sha.as_bytes()),
        Err(e) => ctx.out.error(&e),
    }
}

/// SCRIPT HELP.
fn help(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    reply_help(
        ctx,
        "SCRIPT",
        &[
            "DEBUG (YES|SYNC|NO)",
            "    Run the next EVAL under the Lua debugger (SYNC keeps its writes, YES undoes them).",
            "EXISTS <sha1> [<sha1> ...]",
            "    Tell, for each SHA1, whether a script with it is in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Empty the script cache.",
            "KILL",
            "    Stop the script that is running too long, if it has not written yet.",
            "LOAD <script>",
            "    Add a script to the script cache without running it; reply its SHA1.",
        ],
    );
}
