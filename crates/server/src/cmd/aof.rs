//! The AOF's commands (Redis's aof.c commands): BGREWRITEAOF. The AOF
//! itself lives in [`crate::persist::aof`].

use vireo_resp::Args;

use super::{flags::*, spec, CommandSpec, Ctx, KeySpec};

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[spec(
    "bgrewriteaof",
    1,
    ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
    KeySpec::None,
    bgrewriteaof,
)];

/// BGREWRITEAOF: compacts the AOF in the background (a new base file from
/// the data at a point in time, plus a new incremental file from then on),
/// without fork and without blocking writers.
fn bgrewriteaof(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    // Inside EXEC, Redis schedules the rewrite rather than start it.
    let busy = ctx.server.keyspace.snapshot_in_progress() || ctx.in_exec;
    if ctx.server.aof.request_rewrite(busy) {
        ctx.out.simple(if busy {
            "Background append only file rewriting scheduled"
        } else {
            "Background append only file rewriting started"
        });
    } else {
        ctx.out
            .error("ERR Background append only file rewriting already in progress");
    }
}
