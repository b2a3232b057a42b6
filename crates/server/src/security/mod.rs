//! Redis 7.0's security model: ACL users and their rules (`acl.rs`), the
//! user registry with the ACL file (`users.rs`), the ACL log
//! (`acl_log.rs`), and here the glue the rest of the server calls:
//! authentication, the permission check before a command runs (top level,
//! inside EXEC, from scripts), NOPERM replies and log entries, and the
//! disconnection of clients whose user changed or went away. TLS
//! configuration (`tls.rs`: certificates, trust, protocol versions, cipher
//! suites) lives here too; a connection's TLS record layer is `net/tls.rs`.
//!
//! The check's cost for a user allowed everything (the default user as
//! shipped) is one atomic load: [`command_denied`] tests
//! [`users::UserHandle::unrestricted`] before anything else.

pub mod acl;
pub mod acl_log;
pub mod cert_v1;
pub mod tls;
pub mod users;

use std::sync::Arc;

use vireo_resp::Args;
use vireo_store::clock::now_ms;

use crate::cmd::CmdRef;
use crate::net::session::Session;
use crate::server::Server;
use acl::Denied;
use acl_log::{AclLog, Context, Entry, Reason};
use users::{UserHandle, Users};

/// The server's ACL state.
#[derive(Default)]
pub struct Security {
    /// The users.
    pub users: Users,
    /// ACL LOG.
    pub log: AclLog,
}

/// Sets up the users at start-up (Redis's `ACLLoadUsersAtStartup`):
/// `requirepass` first, then the `user` directives or the ACL file, which
/// exclude each other. Err is the reason to refuse to start.
pub fn load_at_startup(server: &Server) -> Result<(), String> {
    let users = &server.security.users;
    let config = &server.config;
    users.set_default_password(config.requirepass().as_deref());
    let aclfile = config.aclfile();
    if !aclfile.is_empty() && !config.user_lines.is_empty() {
        return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
    }
    users
        .load_config_lines(&config.user_lines, config.acl_pubsub_all())
        .map_err(|e| format!("{e}\nCritical error while loading ACLs. Exiting."))?;
    if !aclfile.is_empty() {
        users
            .load_file(&aclfile, config.acl_pubsub_all())
            .map_err(|e| format!("Aborting Redis startup because of ACL errors: {e}"))?;
    }
    Ok(())
}

/// What a non-local client gets in protected mode (Redis's words).
pub const PROTECTED_MODE_DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// `protected-mode yes` with a default user needing no password: only
/// loopback and Unix-socket clients are accepted (Redis 7.0 no longer
/// looks at `bind` for this).
pub fn protected_mode_refuses(server: &Server, addr: &str, unix: bool) -> bool {
    !unix
        && !is_loopback(addr)
        && server.config.flag("protected-mode")
        && server.security.users.default_user().rules().nopass()
}

/// A Unix-socket or loopback client (Redis's `islocalClient`).
pub fn is_local(client: &crate::net::client::ClientShared) -> bool {
    use std::sync::atomic::Ordering;
    client.flags.load(Ordering::Relaxed) & crate::net::client::cflags::UNIX != 0
        || is_loopback(&client.addr)
}

/// Whether a peer address `ip:port` (IPv6 possibly in brackets) is the
/// loopback interface, as Redis's `islocalClient` decides.
pub fn is_loopback(addr: &str) -> bool {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "127.0.0.1" || host == "::1" || host == "::ffff:127.0.0.1"
}

/// The `user` lines CONFIG REWRITE writes: every user, unless an ACL file
/// holds them (Redis's `rewriteConfigUserOption`).
pub fn config_user_lines(server: &Server) -> Vec<String> {
    if !server.config.aclfile().is_empty() {
        return Vec::new();
    }
    server
        .security
        .users
        .describe_all()
        .iter()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect()
}

/// The user a session runs as (`None` in the session is the default user).
pub fn session_user(server: &Server, session: &Session) -> Arc<UserHandle> {
    session
        .user
        .clone()
        .unwrap_or_else(|| server.security.users.default_user())
}

/// Whether the session's user may run anything: the hot path's only test.
#[inline]
fn unrestricted(server: &Server, session: &Session) -> bool {
    match &session.user {
        None => server.security.users.default_unrestricted(),
        Some(u) => u.unrestricted(),
    }
}

/// The NOPERM reply for a command refused at the top level (Redis's
/// `processCommand`).
fn toplevel_message(denied: Denied, cmd: CmdRef) -> String {
    match denied {
        Denied::Command => format!(
            "NOPERM this user has no permissions to run the '{}' command",
            cmd.spec.name
        ),
        Denied::Key(_) => {
            "NOPERM this user has no permissions to access one of the keys used as arguments".into()
        }
        Denied::Channel(_) => {
            "NOPERM this user has no permissions to access one of the channels used as arguments"
                .into()
        }
    }
}

/// Checks a command before it runs or is queued; Some is the NOPERM reply
/// (the denial is logged). AOF replay runs as no user at all. Inline in
/// the command path: a restricted user's common cases (the command
/// allowed outright, or one key matched against short prefixes) run
/// without a call; anything else, and every denial, is out of line.
#[inline]
pub fn command_denied(
    server: &Server,
    session: &mut Session,
    cmd: CmdRef,
    args: Args<'_>,
) -> Option<String> {
    if unrestricted(server, session) || session.replaying {
        return None;
    }
    let user = session
        .user
        .as_deref()
        .unwrap_or_else(|| server.security.users.default_ref());
    let denied = session.acl_view.current(user).check(cmd, args).err()?;
    Some(toplevel_refusal(server, session, cmd, args, denied))
}

/// A top-level denial logged (in the MULTI context while queuing) and
/// its NOPERM reply.
#[cold]
#[inline(never)]
fn toplevel_refusal(
    server: &Server,
    session: &Session,
    cmd: CmdRef,
    args: Args<'_>,
    denied: Denied,
) -> String {
    let context = if session.in_multi() {
        Context::Multi
    } else {
        Context::Toplevel
    };
    log_denial(server, session, cmd, args, context, denied);
    toplevel_message(denied, cmd)
}

/// A client's command checked (and a denial logged) in `context`; AOF
/// replay runs as no user at all.
#[inline]
fn client_denial(
    server: &Server,
    session: &Session,
    cmd: CmdRef,
    args: Args<'_>,
    context: Context,
) -> Option<Denied> {
    if unrestricted(server, session) || session.replaying {
        return None;
    }
    check_and_log(server, session, cmd, args, context)
}

/// EXEC's check of each queued command (rules may have changed since it
/// was queued); Err is Redis's reply for it.
pub fn queued_command_denied(
    server: &Server,
    session: &Session,
    cmd: CmdRef,
    args: Args<'_>,
) -> Option<String> {
    let denied = client_denial(server, session, cmd, args, Context::Multi)?;
    let reason = match denied {
        Denied::Command => "no permission to execute the command or subcommand",
        Denied::Key(_) => "no permission to touch the specified keys",
        Denied::Channel(_) => "no permission to access one of the channels used as arguments",
    };
    Some(format!(
        "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}"
    ))
}

/// A script's check of a command it calls; Err is the error the script
/// gets (Redis's `scriptVerifyACL`).
pub fn script_command_denied(
    server: &Server,
    session: &Session,
    cmd: CmdRef,
    args: Args<'_>,
) -> Option<String> {
    if unrestricted(server, session) {
        return None;
    }
    let denied = check_and_log(server, session, cmd, args, Context::Lua)?;
    let what = match denied {
        Denied::Command => "can't run this command or subcommand",
        Denied::Key(_) => {
            "can't access at least one of the keys mentioned in the command arguments"
        }
        Denied::Channel(_) => "can't publish to the channel mentioned in the command",
    };
    Some(format!("ERR The user executing the script {what}"))
}

/// `redis.acl_check_cmd`: whether the session's user may run the line.
pub fn allowed(server: &Server, session: &Session, cmd: CmdRef, args: Args<'_>) -> bool {
    unrestricted(server, session)
        || with_rules(server, session, |rules| rules.check(cmd, args).is_ok())
}

/// SORT's BY and GET patterns need read access to every key.
pub fn may_read_all_keys(server: &Server, session: &Session, cmd: CmdRef, args: Args<'_>) -> bool {
    unrestricted(server, session)
        || with_rules(server, session, |rules| {
            rules.check_with_unrestricted_keys(cmd, args, acl::perm::READ)
        })
}

/// The session's user (borrowed, no reference count touched).
fn user_ref<'a>(server: &'a Server, session: &'a Session) -> &'a UserHandle {
    session
        .user
        .as_deref()
        .unwrap_or_else(|| server.security.users.default_ref())
}

/// Runs `f` on the session's user's current rules, read through the
/// session's view of them (no lock on the command path).
#[inline]
fn with_rules<R>(server: &Server, session: &Session, f: impl FnOnce(&acl::Compiled) -> R) -> R {
    session.acl_view.with(user_ref(server, session), f)
}

#[inline]
fn check_and_log(
    server: &Server,
    session: &Session,
    cmd: CmdRef,
    args: Args<'_>,
    context: Context,
) -> Option<Denied> {
    let denied = with_rules(server, session, |rules| rules.check(cmd, args)).err()?;
    log_denial(server, session, cmd, args, context, denied);
    Some(denied)
}

/// Logs a denial (ACL LOG); out of the check's way.
#[cold]
#[inline(never)]
fn log_denial(
    server: &Server,
    session: &Session,
    cmd: CmdRef,
    args: Args<'_>,
    context: Context,
    denied: Denied,
) {
    let user = user_ref(server, session);
    let (reason, object) = match denied {
        Denied::Command => (Reason::Command, cmd.spec.name.as_bytes().to_vec()),
        Denied::Key(p) => (Reason::Key, args.get(p).to_vec()),
        Denied::Channel(p) => (Reason::Channel, args.get(p).to_vec()),
    };
    log_event(server, session, reason, context, object, user.name.to_vec());
}

fn log_event(
    server: &Server,
    session: &Session,
    reason: Reason,
    context: Context,
    object: Vec<u8>,
    username: Vec<u8>,
) {
    let entry = Entry {
        count: 1,
        reason,
        context,
        object,
        username,
        ctime_ms: now_ms(),
        client_info: session.shared.info_line(),
    };
    server
        .security
        .log
        .add(entry, server.config.acllog_max_len());
}

/// AUTH / HELLO AUTH: switches the session to `name` when the password
/// matches; a failure is logged (object: the command's name as sent).
pub fn authenticate(
    server: &Server,
    session: &mut Session,
    name: &[u8],
    password: &[u8],
    command: &[u8],
) -> bool {
    match server.security.users.authenticate(name, password) {
        Some(user) => {
            let default = Arc::ptr_eq(&user, &server.security.users.default_user());
            let user = (!default).then_some(user);
            *session.shared.user.lock() = user.clone();
            session.user = user;
            session.authenticated = true;
            true
        }
        None => {
            let context = if session.in_multi() {
                Context::Multi
            } else {
                Context::Toplevel
            };
            log_event(
                server,
                session,
                Reason::Auth,
                context,
                command.to_vec(),
                name.to_vec(),
            );
            false
        }
    }
}

/// Puts the session back on the default user (RESET), authenticated only
/// if the default user needs no password.
pub fn reset_user(server: &Server, session: &mut Session) {
    session.user = None;
    *session.shared.user.lock() = None;
    session.authenticated = server.security.users.default_needs_no_auth();
}

/// Closes every client authenticated as one of `gone` (deleted, or
/// replaced by ACL LOAD); the calling client gets its reply first.
pub fn disconnect_users(server: &Server, session: &mut Session, gone: &[Arc<UserHandle>]) {
    if gone.is_empty() {
        return;
    }
    let uses = |c: &crate::net::client::ClientShared| {
        c.user
            .lock()
            .as_ref()
            .is_some_and(|u| gone.iter().any(|g| Arc::ptr_eq(g, u)))
    };
    for c in server.clients.snapshot() {
        if uses(&c) {
            close_client(server, session, &c);
        }
    }
}

/// Closes a client: the caller once its reply is written, any other at
/// once through its worker.
fn close_client(server: &Server, session: &mut Session, c: &crate::net::client::ClientShared) {
    use crate::net::client::cflags;
    use std::sync::atomic::Ordering;
    if c.id == session.id {
        session.close_after_reply = true;
        session.shared.set_flag(cflags::CLOSE_AFTER_REPLY, true);
    } else if !c.killed.swap(true, Ordering::Relaxed) {
        server.notify(c.worker, crate::net::worker::Msg::Kill(c.id));
    }
}

/// After ACL SETUSER: subscribers of the user whose channels or patterns
/// are no longer allowed are disconnected (Redis's
/// `ACLKillPubsubClientsIfNeeded`).
pub fn kill_revoked_subscribers(
    server: &Server,
    session: &mut Session,
    user: &Arc<UserHandle>,
    previous: &acl::User,
) {
    let now = user.rules().clone();
    if now.channels_superset_of(previous) {
        return;
    }
    let allowed = now.channel_patterns();
    let ours = |c: &crate::net::client::ClientShared| {
        c.user.lock().as_ref().is_some_and(|u| Arc::ptr_eq(u, user))
    };
    let candidates: Vec<_> = server
        .clients
        .snapshot()
        .into_iter()
        .filter(|c| ours(c))
        .collect();
    if candidates.is_empty() {
        return;
    }
    let ids: Vec<u64> = candidates.iter().map(|c| c.id).collect();
    let subs = server.pubsub.subscriptions_of(&ids);
    for c in &candidates {
        let violates = subs
            .iter()
            .filter(|(id, _, _)| *id == c.id)
            .any(|(_, name, is_pattern)| !acl::channel_in_list(&allowed, name, *is_pattern));
        if violates {
            close_client(server, session, c);
        }
    }
}
