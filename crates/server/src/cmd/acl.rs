//! The ACL command family: SETUSER, GETUSER, DELUSER, USERS, LIST,
//! WHOAMI, CAT, GENPASS, LOG, DRYRUN, LOAD, SAVE, HELP. The model and the
//! checks live in [`crate::security`]; this file parses arguments and
//! shapes replies as Redis's `aclCommand` does.

use std::io::Read;
use std::sync::Arc;

use vireo_resp::number::parse_i64;
use vireo_resp::Args;

use super::docs::acl as categories;
use super::shared::{reply_help, subcommand_syntax_error};
use super::{container, errors, flags::*, is, spec, table, text, CommandSpec, Ctx, KeySpec};
use crate::security::acl::Denied;
use crate::security::acl_log::{fields, FieldValue};
use crate::security::{self as sec, users::UserHandle};

const ADMIN_ACL: u32 = ADMIN | NOSCRIPT | LOADING | STALE | SENTINEL;
const PLAIN_ACL: u32 = NOSCRIPT | LOADING | STALE | SENTINEL;

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[container(
    "acl",
    -2,
    SENTINEL,
    &[
        spec("acl|cat", -2, PLAIN_ACL, KeySpec::None, cat),
        spec("acl|deluser", -3, ADMIN_ACL, KeySpec::None, deluser),
        spec("acl|dryrun", -4, ADMIN_ACL, KeySpec::None, dryrun),
        spec("acl|genpass", -2, PLAIN_ACL, KeySpec::None, genpass),
        spec("acl|getuser", 3, ADMIN_ACL, KeySpec::None, getuser),
        spec(
            "acl|help",
            2,
            LOADING | STALE | SENTINEL,
            KeySpec::None,
            help,
        ),
        spec("acl|list", 2, ADMIN_ACL, KeySpec::None, list),
        spec("acl|load", 2, ADMIN_ACL, KeySpec::None, load),
        spec("acl|log", -2, ADMIN_ACL, KeySpec::None, log),
        spec("acl|save", 2, ADMIN_ACL, KeySpec::None, save),
        spec("acl|setuser", -3, ADMIN_ACL, KeySpec::None, setuser),
        spec("acl|users", 2, ADMIN_ACL, KeySpec::None, users),
        spec("acl|whoami", 2, PLAIN_ACL, KeySpec::None, whoami),
    ],
)];

/// ACL SETUSER name [rule ...]: all rules apply or none; subscribers that
/// lost their channels are disconnected.
fn setuser(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let rules: Vec<&[u8]> = args.iter().skip(3).collect();
    let all_channels = ctx.server.config.acl_pubsub_all();
    match ctx
        .server
        .security
        .users
        .set_user(args.get(2), &rules, all_channels)
    {
        Ok(done) => {
            if let Some(previous) = &done.previous {
                sec::kill_revoked_subscribers(ctx.server, ctx.session, &done.handle, previous);
            }
            ctx.out.ok();
        }
        Err(e) => ctx.out.error(&e),
    }
}

/// ACL DELUSER name [name ...]: the number deleted; their clients are
/// disconnected (this one after its reply).
fn deluser(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if args.iter().skip(2).any(|n| n == b"default") {
        return ctx.out.error("ERR The 'default' user cannot be removed");
    }
    let users = &ctx.server.security.users;
    let gone: Vec<Arc<UserHandle>> = args
        .iter()
        .skip(2)
        .filter_map(|n| users.delete(n))
        .collect();
    sec::disconnect_users(ctx.server, ctx.session, &gone);
    ctx.out.int(gone.len() as i64);
}

/// ACL GETUSER name: flags, passwords, the root selector's commands, keys
/// and channels, and the other selectors; null for no such user.
fn getuser(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(user) = ctx.server.security.users.get(args.get(2)) else {
        return ctx.out.null();
    };
    let rules = user.rules();
    let out = &mut *ctx.out;
    out.map(6);
    out.bulk(b"flags");
    let flags = rules.flag_names();
    out.set(flags.len());
    for f in flags {
        out.bulk(f.as_bytes());
    }
    out.bulk(b"passwords");
    out.array(rules.password_hashes().len());
    for p in rules.password_hashes() {
        out.bulk(p.as_bytes());
    }
    let selectors = rules.selector_fields();
    let write_selector =
        |out: &mut vireo_resp::ReplyBuf, (cmds, keys, chans): &(String, Vec<u8>, Vec<u8>)| {
            out.bulk(b"commands");
            out.bulk(cmds.as_bytes());
            out.bulk(b"keys");
            out.bulk(keys);
            out.bulk(b"channels");
            out.bulk(chans);
        };
    write_selector(out, &selectors[0]);
    out.bulk(b"selectors");
    out.array(selectors.len() - 1);
    for s in &selectors[1..] {
        out.map(3);
        write_selector(out, s);
    }
}

/// ACL USERS: the user names, sorted.
fn users(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let all = ctx.server.security.users.all();
    ctx.out.array(all.len());
    for u in all {
        ctx.out.bulk(&u.name);
    }
}

/// ACL LIST: every user in ACL file form.
fn list(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let lines = ctx.server.security.users.describe_all();
    ctx.out.array(lines.len());
    for l in lines {
        ctx.out.bulk(&l);
    }
}

/// ACL WHOAMI: this connection's user.
fn whoami(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let user = sec::session_user(ctx.server, ctx.session);
    ctx.out.bulk(&user.name);
}

/// Redis's reply to ACL LOAD / SAVE without `aclfile`.
const NO_ACLFILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

/// ACL LOAD: replaces every user with the file's, or changes nothing and
/// lists the file's errors. Clients of replaced users are disconnected.
fn load(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let path = ctx.server.config.aclfile();
    if path.is_empty() {
        return ctx.out.error(NO_ACLFILE);
    }
    let all_channels = ctx.server.config.acl_pubsub_all();
    match ctx.server.security.users.load_file(&path, all_channels) {
        Ok(replaced) => {
            sec::disconnect_users(ctx.server, ctx.session, &replaced);
            ctx.out.ok();
        }
        Err(e) => ctx.out.error(&format!("ERR {e}")),
    }
}

/// ACL SAVE: writes every user to the ACL file.
fn save(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let path = ctx.server.config.aclfile();
    if path.is_empty() {
        return ctx.out.error(NO_ACLFILE);
    }
    match ctx.server.security.users.save_file(&path) {
        Ok(()) => ctx.out.ok(),
        Err(e) => {
            tracing::warn!("Writing ACL file for ACL SAVE: {e}");
            ctx.out.error("ERR There was an error trying to save the ACLs. Please check the server logs for more information");
        }
    }
}

/// ACL CAT [category]: the categories, or the commands and subcommands in
/// one.
fn cat(ctx: &mut Ctx<'_>, args: Args<'_>) {
    match args.len() {
        2 => {
            ctx.out.array(categories::NAMES.len());
            for name in categories::NAMES {
                ctx.out.bulk(name.as_bytes());
            }
        }
        3 => {
            let name = text(args.get(2));
            let Some(bit) = categories::by_name(&name) else {
                let shown: String = name.chars().take(128).collect();
                return ctx.out.error(&format!("ERR Unknown category '{shown}'"));
            };
            let names: Vec<&str> = table()
                .all
                .iter()
                .filter(|s| super::command::categories(s) & bit != 0)
                .map(|s| s.name)
                .collect();
            ctx.out.array(names.len());
            for n in names {
                ctx.out.bulk(n.as_bytes());
            }
        }
        _ => subcommand_syntax_error(ctx, args),
    }
}

/// Longest password GENPASS makes, in bits.
const GENPASS_MAX_BITS: i64 = 4096;

/// ACL GENPASS [bits]: random hex, 256 bits unless told otherwise.
fn genpass(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if args.len() > 3 {
        return subcommand_syntax_error(ctx, args);
    }
    let bits = match args.try_get(2) {
        None => 256,
        Some(a) => match parse_i64(a) {
            Some(b) => b,
            None => return ctx.out.error(errors::NOT_INT),
        },
    };
    if bits <= 0 || bits > GENPASS_MAX_BITS {
        return ctx.out.error(&format!(
            "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to {GENPASS_MAX_BITS}"
        ));
    }
    let chars = ((bits + 3) / 4) as usize;
    match random_hex(chars) {
        Ok(pass) => ctx.out.bulk(pass.as_bytes()),
        Err(e) => ctx.out.error(&format!("ERR cannot read random bytes: {e}")),
    }
}

/// `n` hex digits from the kernel's random source.
fn random_hex(n: usize) -> std::io::Result<String> {
    let mut bytes = vec![0u8; n.div_ceil(2)];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    let mut s: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    s.truncate(n);
    Ok(s)
}

/// ACL LOG [count | RESET]: the newest entries (10 by default), or clears
/// the log.
fn log(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if args.len() > 3 {
        return subcommand_syntax_error(ctx, args);
    }
    let mut count = 10;
    if let Some(a) = args.try_get(2) {
        if is(a, "reset") {
            ctx.server.security.log.reset();
            return ctx.out.ok();
        }
        match parse_i64(a) {
            Some(n) => count = n.max(0) as usize,
            None => return ctx.out.error(errors::NOT_INT),
        }
    }
    let entries = ctx.server.security.log.newest(count);
    let now = vireo_store::clock::now_ms();
    ctx.out.array(entries.len());
    for e in &entries {
        let f = fields(e, now);
        ctx.out.map(f.len());
        for (name, value) in f {
            ctx.out.bulk(name.as_bytes());
            match value {
                FieldValue::Int(i) => ctx.out.int(i),
                FieldValue::Text(t) => ctx.out.bulk(t),
                FieldValue::Double(d) => ctx.out.double(d),
            }
        }
    }
}

/// ACL DRYRUN user command [arg ...]: OK, or why the user could not run
/// the command (as a plain string, not an error).
fn dryrun(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let Some(user) = ctx.server.security.users.get(args.get(2)) else {
        return ctx
            .out
            .error(&format!("ERR User '{}' not found", text(args.get(2))));
    };
    let owned = vireo_resp::OwnedArgs::from_slices(args.iter().skip(3));
    let line = owned.as_args();
    let t = table();
    let cmd = t.lookup(line.get(0)).and_then(|base| {
        if base.spec.subcommands.is_empty() || line.len() < 2 {
            Some(base)
        } else {
            t.lookup_sub(base.spec, line.get(1))
        }
    });
    let Some(cmd) = cmd else {
        return ctx
            .out
            .error(&format!("ERR Command '{}' not found", text(line.get(0))));
    };
    if !cmd.spec.arity_ok(line.len()) {
        return ctx.out.error(&format!(
            "ERR wrong number of arguments for '{}' command",
            cmd.spec.name
        ));
    }
    let verdict = user.rules().check(cmd, line);
    match verdict {
        Ok(()) => ctx.out.ok(),
        Err(Denied::Command) => ctx.out.bulk(
            format!(
                "This user has no permissions to run the '{}' command",
                cmd.spec.name
            )
            .as_bytes(),
        ),
        Err(Denied::Key(p)) => ctx.out.bulk(
            format!(
                "This user has no permissions to access the '{}' key",
                text(line.get(p))
            )
            .as_bytes(),
        ),
        Err(Denied::Channel(p)) => ctx.out.bulk(
            format!(
                "This user has no permissions to access the '{}' channel",
                text(line.get(p))
            )
            .as_bytes(),
        ),
    }
}

/// ACL HELP.
fn help(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    reply_help(
        ctx,
        "ACL",
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    );
}
