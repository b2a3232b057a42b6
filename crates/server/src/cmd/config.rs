//! The CONFIG command family (Redis's config.c commands): reading and
//! changing parameters at run time, resetting INFO statistics, and
//! rewriting the configuration file. The parameters themselves live in
//! [`crate::config`].

use std::sync::atomic::Ordering;

use vireo_resp::Args;

use super::shared::reply_help;
use super::{container, errors, flags::*, is, spec, CommandSpec, Ctx, KeySpec};

const ADMIN_NS: u32 = ADMIN | NOSCRIPT | LOADING | STALE;

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[container(
    "config",
    -2,
    0,
    &[
        spec("config|get", -3, ADMIN_NS, KeySpec::None, get),
        spec("config|set", -4, ADMIN_NS, KeySpec::None, set),
        spec("config|resetstat", 2, ADMIN_NS, KeySpec::None, resetstat),
        spec("config|rewrite", 2, ADMIN_NS, KeySpec::None, rewrite),
        spec("config|help", 2, LOADING | STALE, KeySpec::None, help),
    ],
)];

/// CONFIG GET pattern [pattern ...]: every parameter matching any of the
/// glob patterns, each once, as a name → value map.
fn get(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let patterns: Vec<&[u8]> = args.iter().skip(2).collect();
    let found = ctx.server.config.get(&patterns);
    ctx.out.map(found.len());
    for (name, value) in found {
        ctx.out.bulk(name.as_bytes());
        ctx.out.bulk(value.as_bytes());
    }
}

/// CONFIG SET name value [name value ...]: changes the parameters all at
/// once, or none of them if any name or value is refused.
fn set(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let rest: Vec<&[u8]> = args.iter().skip(2).collect();
    let chunks = rest.chunks_exact(2);
    if !chunks.remainder().is_empty() {
        return ctx.out.error(errors::SYNTAX);
    }
    let pairs: Vec<(&[u8], &[u8])> = chunks.map(|p| (p[0], p[1])).collect();
    if let Some(&(name, _)) = pairs.iter().find(|(n, _)| is_protected(n)) {
        if !protected_allowed(ctx) {
            return ctx.out.error(&format!(
                "ERR CONFIG SET failed (possibly related to argument '{}') - can't set protected config",
                super::text(name)
            ));
        }
    }
    if loading(ctx) && pairs.iter().any(|(n, _)| denied_while_loading(n)) {
        return ctx
            .out
            .error("LOADING Redis is loading the dataset in memory");
    }
    let tls_before = tls_values(ctx, &pairs);
    let all_before = values_of(ctx, &pairs, |_| true);
    match ctx.server.config.set(&pairs) {
        Ok(()) => {
            if let Err(e) = apply_tls(ctx, &pairs, tls_before) {
                return ctx.out.error(&e);
            }
            if let Err(e) = apply_or_roll_back(ctx, &pairs, &all_before) {
                return ctx.out.error(&e);
            }
            ctx.server.apply_keyspace_config();
            let changed = |param: &str| pairs.iter().any(|(n, _)| is(n, param));
            if changed("maxmemory-policy") {
                ctx.server.evictor.clear_pool();
            }
            if changed("maxmemory-clients") || changed("maxmemory") {
                // A lower limit takes effect at once, as in Redis.
                ctx.server.client_eviction.changed();
                crate::memory::client_evict::evict_clients(ctx.server);
            }
            if changed("maxmemory") {
                crate::memory::evict::limit_changed(ctx.server);
            }
            if changed("appendonly") || changed("appendfsync") {
                crate::persist::aof::config_changed(ctx.server, ctx.in_exec);
            }
            if changed("requirepass") {
                let password = ctx.server.config.requirepass();
                ctx.server
                    .security
                    .users
                    .set_default_password(password.as_deref());
            }
            if changed("acllog-max-len") {
                let max = ctx.server.config.acllog_max_len();
                ctx.server.security.log.trim(max);
            }
            ctx.out.ok()
        }
        Err(e) => ctx.out.error(&e),
    }
}

/// Parameters `enable-protected-configs` guards (they choose where files
/// are written).
fn is_protected(name: &[u8]) -> bool {
    is(name, "dir") || is(name, "dbfilename")
}

/// Parameters that cannot change while the dataset loads (Redis's
/// `DENY_LOADING_CONFIG`).
fn denied_while_loading(name: &[u8]) -> bool {
    ["appendonly", "repl-diskless-load", "dir"]
        .iter()
        .any(|p| is(name, p))
}

/// The dataset is loading, in the foreground or aside (a replica's
/// swapdb load).
fn loading(ctx: &Ctx<'_>) -> bool {
    let rdb = &ctx.server.rdb;
    rdb.loading.load(Ordering::Acquire) || rdb.async_loading.load(Ordering::Acquire)
}

/// Whether `enable-protected-configs` lets this client change them.
fn protected_allowed(ctx: &Ctx<'_>) -> bool {
    match ctx
        .server
        .config
        .get_one("enable-protected-configs")
        .as_deref()
    {
        Some("yes") => true,
        Some("local") => crate::security::is_local(&ctx.session.shared),
        _ => false,
    }
}

/// The current values of the TLS parameters among `pairs`, to restore if
/// the new ones do not load.
fn tls_values(ctx: &Ctx<'_>, pairs: &[(&[u8], &[u8])]) -> Vec<(String, String)> {
    values_of(ctx, pairs, crate::security::tls::applied_by_configure)
}

/// The current values of the parameters among `pairs` that `wanted`
/// selects (by lower-case name), to restore if applying new ones fails.
fn values_of(
    ctx: &Ctx<'_>,
    pairs: &[(&[u8], &[u8])],
    wanted: impl Fn(&str) -> bool,
) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, _)| String::from_utf8_lossy(n).to_ascii_lowercase())
        .filter(|n| wanted(n))
        .filter_map(|n| ctx.server.config.get_one(&n).map(|v| (n, v)))
        .collect()
}

/// Rebuilds the TLS configuration after a change to its parameters; when
/// it does not load, the old values come back and the reply is Redis's.
fn apply_tls(
    ctx: &mut Ctx<'_>,
    pairs: &[(&[u8], &[u8])],
    before: Vec<(String, String)>,
) -> Result<(), String> {
    let Some((first, _)) = before.first() else {
        return Ok(());
    };
    let names: Vec<&[u8]> = pairs.iter().map(|(n, _)| *n).collect();
    let applied = ctx
        .server
        .tls
        .apply_config_set(&ctx.server.config, &names)
        .map_err(|e| e.to_string())
        .and_then(|()| move_tls_port(ctx, &before));
    let Err(reason) = applied else {
        return Ok(());
    };
    tracing::warn!(
        "Failed applying new configuration. Possibly related to new {first} setting. Restoring previous settings."
    );
    let old: Vec<(&[u8], &[u8])> = before
        .iter()
        .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
        .collect();
    if let Err(e) = ctx.server.config.set(&old) {
        tracing::warn!("restoring the TLS settings failed: {e}");
    }
    Err(format!(
        "ERR CONFIG SET failed (possibly related to argument '{first}') - {reason}"
    ))
}

/// Listens on the new `tls-port` when CONFIG SET changed it (`before`
/// holds the old values), as Redis's `applyTLSPort`; Err is the reason
/// CONFIG SET gives when the port cannot be bound, after listening on the
/// old port again.
fn move_tls_port(ctx: &Ctx<'_>, before: &[(String, String)]) -> Result<(), String> {
    use crate::net::listener::{rebind, Rebind};
    let Some((_, old)) = before.iter().find(|(n, _)| n == "tls-port") else {
        return Ok(());
    };
    if ctx.server.config.get_one("tls-port").as_deref() == Some(old.as_str()) {
        return Ok(());
    }
    let Err(reason) = rebind(Rebind::TlsPort) else {
        return Ok(());
    };
    if let Err(e) = ctx.server.config.set(&[(&b"tls-port"[..], old.as_bytes())]) {
        tracing::warn!("restoring tls-port failed: {e}");
    }
    if let Err(e) = rebind(Rebind::TlsPort) {
        tracing::warn!("listening on the previous tls-port again failed: {e}");
    }
    Err(reason)
}

/// The parameters whose new values act on the process at once (Redis's
/// apply functions): the OOM score and the listeners. Err names the
/// parameter that failed and Redis's reason.
fn apply_process(
    ctx: &Ctx<'_>,
    changed: &dyn Fn(&str) -> bool,
) -> Result<(), (&'static str, String)> {
    use crate::net::listener::{rebind, Rebind};
    if changed("oom-score-adj") || changed("oom-score-adj-values") {
        let replica = ctx.server.repl.is_replica();
        if crate::ops::oom::apply(&ctx.server.config, replica).is_err() {
            return Err(("oom-score-adj", crate::ops::oom::FAILED.to_string()));
        }
    }
    if changed("bind") {
        rebind(Rebind::Bind).map_err(|e| ("bind", e))?;
    } else if changed("port") {
        rebind(Rebind::Port).map_err(|e| ("port", e))?;
    }
    Ok(())
}

/// Applies the new values of `pairs` to the process; when one fails, every
/// parameter of the call gets its old value back (and is applied again)
/// and the reply is Redis's.
fn apply_or_roll_back(
    ctx: &Ctx<'_>,
    pairs: &[(&[u8], &[u8])],
    before: &[(String, String)],
) -> Result<(), String> {
    let changed = |param: &str| pairs.iter().any(|(n, _)| is(n, param));
    let Err((name, reason)) = apply_process(ctx, &changed) else {
        return Ok(());
    };
    let old: Vec<(&[u8], &[u8])> = before
        .iter()
        .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
        .collect();
    if let Err(e) = ctx.server.config.set(&old) {
        tracing::warn!("restoring the previous settings failed: {e}");
    }
    if let Err((_, e)) = apply_process(ctx, &changed) {
        tracing::warn!("applying the previous settings again failed: {e}");
    }
    Err(format!(
        "ERR CONFIG SET failed (possibly related to argument '{name}') - {reason}"
    ))
}

/// CONFIG RESETSTAT: zeroes the statistics INFO reports (command, error,
/// keyspace and network counters, latency histograms).
fn resetstat(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    ctx.server.reset_stats();
    ctx.out.ok();
}

/// CONFIG REWRITE: writes the running configuration back to the file the
/// server was started with.
fn rewrite(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let users = crate::security::config_user_lines(ctx.server);
    match ctx.server.config.rewrite_with_users(&users, false) {
        Ok(()) => ctx.out.ok(),
        Err(e) => ctx.out.error(&e),
    }
}

/// CONFIG HELP.
fn help(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    reply_help(
        ctx,
        "CONFIG",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    );
}
