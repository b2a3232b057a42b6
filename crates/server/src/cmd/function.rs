//! FUNCTION and FCALL (Redis's `functions.c` commands). Libraries live in
//! the shared registry of `exec::script`, which every worker's engine
//! follows; this file parses arguments and words replies.

use vireo_resp::Args;
use vireo_store::glob::glob_match;

use super::script::{SCRIPT_FLAGS, SCRIPT_KEYS, SCRIPT_RO_FLAGS};
use super::shared::reply_help;
use super::{container, flags::*, is, spec, CommandSpec, Ctx, KeySpec};
use crate::exec::script::{self as run, Kind, RestorePolicy};
use crate::server::Server;

const SUBS: &[CommandSpec] = &[
    spec(
        "function|delete",
        3,
        NOSCRIPT | WRITE,
        KeySpec::None,
        delete,
    ),
    spec("function|dump", 2, NOSCRIPT, KeySpec::None, dump),
    spec("function|flush", -2, NOSCRIPT | WRITE, KeySpec::None, flush),
    spec("function|help", 2, LOADING | STALE, KeySpec::None, help),
    spec(
        "function|kill",
        2,
        NOSCRIPT | ALLOW_BUSY,
        KeySpec::None,
        kill,
    ),
    spec("function|list", -2, NOSCRIPT, KeySpec::None, list),
    spec(
        "function|load",
        -3,
        NOSCRIPT | WRITE | DENYOOM,
        KeySpec::None,
        load,
    ),
    spec(
        "function|restore",
        -3,
        NOSCRIPT | WRITE | DENYOOM,
        KeySpec::None,
        restore,
    ),
    spec(
        "function|stats",
        2,
        NOSCRIPT | ALLOW_BUSY,
        KeySpec::None,
        stats,
    ),
];

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    container("function", -2, 0, SUBS),
    spec("fcall", -3, SCRIPT_FLAGS | SCRIPT, SCRIPT_KEYS, fcall).with_flags_fn(fcall_flags),
    spec(
        "fcall_ro",
        -3,
        SCRIPT_RO_FLAGS | SCRIPT,
        SCRIPT_KEYS,
        fcall_ro,
    )
    .with_flags_fn(fcall_flags),
];

fn fcall_flags(server: &Server, worker: usize, args: Args<'_>, base: u32) -> u32 {
    run::command_flags(server, worker, Kind::Fcall, args, base)
}

/// FCALL function numkeys [key ...] [arg ...]
fn fcall(ctx: &mut Ctx<'_>, args: Args<'_>) {
    run::run_command(ctx, args, Kind::Fcall, false);
}

/// FCALL_RO: FCALL that refuses writes.
fn fcall_ro(ctx: &mut Ctx<'_>, args: Args<'_>) {
    run::run_command(ctx, args, Kind::Fcall, true);
}

/// Records a change of the libraries (they are part of the dataset for
/// persistence and replication).
fn changed(ctx: &mut Ctx<'_>) {
    ctx.dirty += 1;
}

/// FUNCTION LOAD [REPLACE] code
fn load(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let mut replace = false;
    let mut i = 2;
    while i < args.len() - 1 {
        if is(args.get(i), "replace") {
            replace = true;
            i += 1;
        } else {
            return ctx.out.error(&format!(
                "ERR Unknown option given: {}",
                super::text(args.get(i))
            ));
        }
    }
    if i != args.len() - 1 {
        return ctx.out.error("ERR Function code was not given");
    }
    match run::function_load(ctx.server, ctx.session.shared.worker, args.get(i), replace) {
        Ok(name) => {
            changed(ctx);
            ctx.out.bulk(name.as_bytes());
        }
        Err(e) => ctx.out.error(&e),
    }
}

/// FUNCTION DELETE library
fn delete(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let name = String::from_utf8_lossy(args.get(2)).into_owned();
    match run::function_delete(ctx.server, ctx.session.shared.worker, &name) {
        Ok(true) => {
            changed(ctx);
            ctx.out.ok();
        }
        Ok(false) => ctx.out.error("ERR Library not found"),
        Err(e) => ctx.out.error(&e),
    }
}

/// FUNCTION FLUSH [ASYNC|SYNC]: deletes every library.
fn flush(ctx: &mut Ctx<'_>, args: Args<'_>) {
    match args.len() {
        2 => {}
        3 if is(args.get(2), "async") || is(args.get(2), "sync") => {}
        3 => {
            return ctx
                .out
                .error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
        }
        _ => return ctx.out.error(&subcommand_syntax(args)),
    }
    run::function_flush(ctx.server, ctx.session.shared.worker);
    changed(ctx);
    ctx.out.ok();
}

/// FUNCTION KILL: stops the timed-out function if it has not written.
fn kill(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    match ctx.server.scripts.kill(false) {
        Ok(()) => ctx.out.ok(),
        Err(e) => ctx.out.error(e),
    }
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]
fn list(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let mut with_code = false;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 2;
    while i < args.len() {
        let a = args.get(i);
        if !with_code && is(a, "withcode") {
            with_code = true;
        } else if pattern.is_none() && is(a, "libraryname") {
            if i + 1 >= args.len() {
                return ctx.out.error("ERR library name argument was not given");
            }
            i += 1;
            pattern = Some(args.get(i));
        } else {
            return ctx
                .out
                .error(&format!("ERR Unknown argument {}", super::text(a)));
        }
        i += 1;
    }
    let libs = match run::libraries(ctx.server, ctx.session.shared.worker) {
        Ok(l) => l,
        Err(e) => return ctx.out.error(&e),
    };
    let shown: Vec<_> = libs
        .iter()
        .filter(|l| pattern.is_none_or(|p| glob_match(p, l.name.as_bytes(), true)))
        .collect();
    let out = &mut *ctx.out;
    out.array(shown.len());
    for lib in shown {
        out.map(if with_code { 4 } else { 3 });
        out.bulk(b"library_name");
        out.bulk(lib.name.as_bytes());
        out.bulk(b"engine");
        out.bulk(b"LUA");
        out.bulk(b"functions");
        out.array(lib.functions.len());
        for (name, description, flags) in &lib.functions {
            out.map(3);
            out.bulk(b"name");
            out.bulk(name.as_bytes());
            out.bulk(b"description");
            match description {
                Some(d) => out.bulk(d.as_bytes()),
                None => out.null(),
            }
            out.bulk(b"flags");
            let names = flags.names();
            out.set(names.len());
            for n in names {
                out.simple(n);
            }
        }
        if with_code {
            out.bulk(b"library_code");
            out.bulk(&lib.code);
        }
    }
}

/// FUNCTION STATS: the running function (while one is timed out) and the
/// engine's counts.
fn stats(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let scripts = &ctx.server.scripts;
    if scripts.busy_error() == Some(run::BUSY_EVAL) {
        return ctx.out.error(run::BUSY_EVAL);
    }
    let (libraries, functions, _, _) = scripts.function_stats();
    let running = scripts.running_function();
    let out = &mut *ctx.out;
    out.map(2);
    out.bulk(b"running_script");
    match running {
        None => out.null(),
        Some((name, command, duration_ms)) => {
            out.map(3);
            out.bulk(b"name");
            out.bulk(name.as_bytes());
            out.bulk(b"command");
            out.array(command.len());
            for a in &command {
                out.bulk(a);
            }
            out.bulk(b"duration_ms");
            out.int(duration_ms as i64);
        }
    }
    out.bulk(b"engines");
    out.map(1);
    out.bulk(b"LUA");
    out.map(2);
    out.bulk(b"libraries_count");
    out.int(libraries as i64);
    out.bulk(b"functions_count");
    out.int(functions as i64);
}

/// FUNCTION DUMP: every library in Redis's payload format.
fn dump(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let codes = ctx.server.scripts.library_codes();
    let opts = ctx.server.config.rdb_encode_options();
    let payload = vireo_store::rdb::dump_functions(codes.iter().map(|c| &c[..]), &opts);
    ctx.out.bulk(&payload);
}

/// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE]
fn restore(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if args.len() > 4 {
        return ctx.out.error(&subcommand_syntax(args));
    }
    let policy =
        match args.try_get(3) {
            None => RestorePolicy::Append,
            Some(p) if is(p, "append") => RestorePolicy::Append,
            Some(p) if is(p, "replace") => RestorePolicy::Replace,
            Some(p) if is(p, "flush") => RestorePolicy::Flush,
            Some(_) => return ctx.out.error(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ),
        };
    use vireo_store::rdb::FunctionsPayloadError as E;
    let codes = match vireo_store::rdb::restore_functions(args.get(2)) {
        Ok(c) => c,
        Err(E::VersionOrChecksum) => {
            return ctx
                .out
                .error("ERR DUMP payload version or checksum are wrong")
        }
        Err(E::NotAFunction) => return ctx.out.error("ERR given type is not a function"),
        Err(E::BadData) => {
            return ctx
                .out
                .error("ERR failed loading the given functions payload")
        }
    };
    match run::function_restore(ctx.server, ctx.session.shared.worker, codes, policy) {
        Ok(()) => {
            changed(ctx);
            ctx.out.ok();
        }
        Err(e) => ctx.out.error(&e),
    }
}

/// Redis's `addReplySubcommandSyntaxError`.
fn subcommand_syntax(args: Args<'_>) -> String {
    format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
        super::text(args.get(1))
    )
}

/// FUNCTION HELP.
fn help(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    reply_help(
        ctx,
        "FUNCTION",
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library from the given code (starting with '#!<engine> name=<library>').",
            "    REPLACE replaces a library of the same name.",
            "DELETE <LIBRARY NAME>",
            "    Delete the library and its functions.",
            "KILL",
            "    Stop the function running too long, if it has not written yet.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete every library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    List the libraries (those matching PATTERN), their functions and, with WITHCODE, their code.",
            "STATS",
            "    Show the running function, if any, and how many libraries and functions exist.",
            "DUMP",
            "    Serialize every library into a payload for FUNCTION RESTORE.",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Load the libraries of a FUNCTION DUMP payload: APPEND (the default) fails on an",
            "    existing library, REPLACE replaces it, FLUSH deletes every library first.",
        ],
    );
}
