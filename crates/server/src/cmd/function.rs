//! FUNCTION: the part that is meaningful before Vireo has a scripting
//! engine. No library can be loaded yet, so FLUSH has nothing to delete but
//! is still a valid (and, for Redis's test suite, essential) command; the
//! other subcommands answer "unknown subcommand" until scripting lands.

use vireo_resp::Args;

use super::shared::reply_help;
use super::{flags::*, is, CommandSpec, Ctx, KeySpec};

const SUBS: &[CommandSpec] = &[
    super::spec("function|flush", -2, NOSCRIPT | WRITE, KeySpec::None, flush),
    super::spec("function|help", 2, LOADING | STALE, KeySpec::None, help),
];

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[super::container("function", -2, 0, SUBS)];

/// FUNCTION FLUSH [ASYNC|SYNC]: deletes every function library.
fn flush(ctx: &mut Ctx<'_>, args: Args<'_>) {
    match args.len() {
        2 => ctx.out.ok(),
        3 if is(args.get(2), "async") || is(args.get(2), "sync") => ctx.out.ok(),
        _ => ctx
            .out
            .error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option"),
    }
}

/// FUNCTION HELP.
fn help(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    reply_help(
        ctx,
        "FUNCTION",
        &[
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries. (Vireo has no scripting engine yet, so none can exist.)",
        ],
    );
}
