//! `redis.call` and `redis.pcall` as raw Lua C functions (Redis's
//! `luaRedisGenericCommand`).
//!
//! They are what a script's time goes to, so they skip mlua's callback
//! machinery, which costs a reference-stack slot per argument and result,
//! `FromLuaMulti` conversions and a protected call per table: the
//! arguments go from the Lua stack straight into the run state's argument
//! buffer, and the host's RESP reply straight onto the Lua stack (as
//! Redis's `redisProtocolToLuaType` does), read by the same tokenizer as
//! [`crate::Reply::parse`].
//!
//! **Replies as Lua values**, Redis 7.0's rules: nil bulk/array → `false`,
//! status → `{ok=}`, error → `{err=, ignore_error_stats_update=true}`,
//! integer → number, bulk → string, array → table, RESP3 map →
//! `{map={k=v}}`, set → `{set={e=true}}`, double → `{double=}`, null →
//! `nil`, boolean → boolean, big number → `{big_number=}`, verbatim →
//! `{verbatim_string={format=,string=}}`.
//!
//! **Errors.** A Lua error unwinds with `longjmp`, which must never cross
//! a Rust frame that still owns something. So the entry ([`entry`]) only
//! calls the body ([`body`]), which may own what it likes but never raises:
//! it leaves its outcome on top of the stack — the value to return, or the
//! error table to raise — and says which. The entry raises only after the
//! body returned, holding nothing to drop. Allocations cannot raise inside
//! the body either: the Lua heap limit is lifted while it runs
//! (`mlua::set_memory_limit_enforced`, as mlua's own callback entry does),
//! and without a limit mlua's allocator aborts rather than failing, so the
//! next allocation of the script's Lua code is the one that fails.
//! Panics are caught in the entry and raised as an error table.
//!
//! **Stack.** Lua guarantees `LUA_MINSTACK` (20) free slots to a C
//! function; scalars need at most four, and every aggregate asks for more
//! room (`lua_checkstack`) before it nests, bounded by the tokenizer's
//! depth limit.

use crate::host::{ArgBuf, HostPtr, RunState, SharedRun};
use crate::luaerr::error_table_text;
use crate::reply::{Cursor, ReplyParseError, Token};
use mlua::{ffi, Function, Lua, WeakLua};
use std::cell::RefCell;
use std::ffi::CStr;
use std::os::raw::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use vireo_resp::Protocol;

/// The error of a `redis.call` outside a script run.
const OUTSIDE_RUN: &[u8] = b"redis.call/pcall can only be called inside a script invocation";
/// The error of a `redis.call` without arguments.
const NO_ARGUMENTS: &[u8] = b"Please specify at least one argument for this redis lib call";
/// The error of an argument that is neither a string nor a number.
const BAD_ARGUMENT: &[u8] = b"Lua redis lib command arguments must be strings or integers";
/// The error when the host's reply is not one well-formed RESP reply.
const UNREADABLE_REPLY: &[u8] = b"ERR the command's reply could not be read";
/// The error raised when the call panicked (a bug, caught at the entry).
const PANICKED: &[u8] = b"ERR redis.call failed unexpectedly";

/// Slots an aggregate asks for before it nests: a map holds its outer
/// table, its inner table and a pending key while its value is pushed.
const AGGREGATE_SLOTS: c_int = 4;

/// What the body left on top of the stack.
enum Outcome {
    /// A value to return (one result).
    Return,
    /// An error value to raise.
    Raise,
}

/// Creates `redis.call` (`raise`) or `redis.pcall` for the VM whose run
/// state is `run`. The function holds a pointer to the run state: `run`
/// must be the one kept in the VM's app data, which lives as long as the
/// VM does.
pub(crate) fn create(lua: &Lua, run: &SharedRun, raise: bool) -> mlua::Result<Function> {
    let ptr = Rc::as_ptr(run).cast_mut().cast::<c_void>();
    let entry: ffi::lua_CFunction = if raise { entry::<true> } else { entry::<false> };
    // SAFETY: `exec_raw` runs the closure under `lua_pcall` with at least
    // three free slots; it pushes two values and leaves the closure, the
    // result. It owns nothing needing drop, so the allocation failure
    // `lua_pushcclosure` may raise unwinds over no pending destructor.
    unsafe {
        lua.exec_raw((), |state| {
            ffi::lua_pushlightuserdata(state, ptr);
            ffi::lua_pushcclosure(state, entry, 1);
        })
    }
}

/// The C function: runs [`body`] with the heap limit lifted, then returns
/// or raises what it left on the stack.
///
/// # Safety
/// Called by Lua only, as a closure made by [`create`].
unsafe extern "C-unwind" fn entry<const RAISE: bool>(state: *mut ffi::lua_State) -> c_int {
    let enforced = mlua::set_memory_limit_enforced(state, false);
    let outcome = catch_unwind(AssertUnwindSafe(|| body(state, RAISE))).unwrap_or_else(|_| {
        push_error_table(state, PANICKED, false);
        Outcome::Raise
    });
    mlua::set_memory_limit_enforced(state, enforced);
    match outcome {
        Outcome::Return => 1,
        // Nothing with a destructor is alive in this frame: the body and
        // the panic payload are gone.
        Outcome::Raise => ffi::lua_error(state),
    }
}

/// `redis.call`/`redis.pcall`: checks and packs the arguments, runs the
/// command through the host and pushes its reply (or the error).
///
/// # Safety
/// `state` is inside a call of a closure made by [`create`], with the heap
/// limit lifted.
unsafe fn body(state: *mut ffi::lua_State, raise: bool) -> Outcome {
    // SAFETY: the upvalue is the pointer `create` stored, to the run state
    // the VM's app data keeps alive for the VM's whole life.
    let run = &*ffi::lua_touserdata(state, ffi::lua_upvalueindex(1)).cast::<RefCell<RunState>>();
    // The argument buffers are taken out of the run state, so that no
    // borrow of it is held while the host runs the command.
    let (host, resp, mut args, debugger) = match run.try_borrow_mut() {
        Ok(mut s) => match s.host() {
            Some(host) => (
                host,
                s.resp,
                std::mem::take(&mut s.args),
                s.debugger.clone(),
            ),
            None => return error_outcome(state, true, OUTSIDE_RUN),
        },
        Err(_) => return error_outcome(state, true, OUTSIDE_RUN),
    };
    let outcome = call_command(state, raise, host, resp, &mut args, debugger.as_ref());
    if let Ok(mut s) = run.try_borrow_mut() {
        s.args = args;
    }
    outcome
}

/// The command call proper (see [`body`]).
///
/// # Safety
/// As [`body`].
unsafe fn call_command(
    state: *mut ffi::lua_State,
    raise: bool,
    host: HostPtr,
    resp: Protocol,
    args: &mut ArgBuf,
    debugger: Option<&WeakLua>,
) -> Outcome {
    let nargs = ffi::lua_gettop(state);
    if nargs == 0 {
        return error_outcome(state, raise, NO_ARGUMENTS);
    }
    if !pack_args(state, nargs, args) {
        return error_outcome(state, raise, BAD_ARGUMENT);
    }
    let args = args.args();
    let lua = debugger.and_then(WeakLua::try_upgrade);
    if let Some(lua) = &lua {
        crate::ldb::log_call(lua, args);
    }
    host.with(|h| match &lua {
        None => push_reply(state, h.call(args, resp), raise),
        Some(lua) => {
            // The debugger logs the reply and whether it was a refusal,
            // which the host tells once the reply's borrow ended.
            let reply = h.call(args, resp).to_vec();
            log_reply(lua, &reply, h.last_call_refused());
            push_reply(state, &reply, raise)
        }
    })
}

/// The debugger's log of a reply (parsed again: debugging is slow anyway).
fn log_reply(lua: &Lua, reply: &[u8], refused: bool) {
    let reply = crate::Reply::parse(reply).map_or_else(
        |_| crate::Reply::Error(UNREADABLE_REPLY.to_vec()),
        |(r, _)| r,
    );
    let refused = refused && matches!(reply, crate::Reply::Error(_));
    crate::ldb::log_reply(lua, &reply, refused);
}

/// Packs arguments `1..=nargs` into `buf`: strings as they are, numbers
/// as `%.17g`; false when one is of another type.
///
/// # Safety
/// `state` is a Lua state with `nargs` values on its stack.
unsafe fn pack_args(state: *mut ffi::lua_State, nargs: c_int, buf: &mut ArgBuf) -> bool {
    buf.clear();
    for i in 1..=nargs {
        match ffi::lua_type(state, i) {
            ffi::LUA_TNUMBER => buf.push_number(ffi::lua_tonumber(state, i)),
            // A string converts to nothing: `lua_tolstring` neither allocates
            // nor raises for it.
            ffi::LUA_TSTRING => buf.push_bytes(lua_bytes(state, i)),
            _ => return false,
        }
    }
    true
}

/// The bytes of the string at `idx`.
///
/// # Safety
/// The value at `idx` is a string; the slice lives while it stays on the
/// stack.
unsafe fn lua_bytes<'a>(state: *mut ffi::lua_State, idx: c_int) -> &'a [u8] {
    let mut len = 0;
    let ptr = ffi::lua_tolstring(state, idx, &mut len);
    std::slice::from_raw_parts(ptr.cast::<u8>(), len)
}

/// Pushes the command's reply; an error reply is raised by `redis.call`.
///
/// # Safety
/// As [`body`].
unsafe fn push_reply(state: *mut ffi::lua_State, reply: &[u8], raise: bool) -> Outcome {
    let base = ffi::lua_gettop(state);
    let mut cursor = Cursor::new(reply);
    let is_error = match cursor.token(0) {
        Ok(Token::Error(text)) => {
            push_command_error(state, text);
            true
        }
        Ok(token) => match push_token(state, &mut cursor, token, 0) {
            Ok(()) => false,
            Err(_) => {
                ffi::lua_settop(state, base);
                push_error_table(state, UNREADABLE_REPLY, true);
                true
            }
        },
        Err(_) => {
            push_error_table(state, UNREADABLE_REPLY, true);
            true
        }
    };
    if is_error && raise {
        Outcome::Raise
    } else {
        Outcome::Return
    }
}

/// Pushes Redis's error table for `text` (raised by `redis.call`,
/// returned by `redis.pcall`), not counted again in error stats.
///
/// # Safety
/// `state` has two free slots; the heap limit is lifted.
unsafe fn push_command_error(state: *mut ffi::lua_State, text: &[u8]) {
    let mut line = Vec::with_capacity(text.len() + 1);
    line.push(b'-');
    line.extend_from_slice(text);
    push_error_table(state, &error_table_text(&line), true);
}

/// Pushes the error table for `message` (Redis's error-code rules apply)
/// and says whether to raise it: always outside a run, else as `raise`.
///
/// # Safety
/// As [`push_command_error`].
unsafe fn error_outcome(state: *mut ffi::lua_State, raise: bool, message: &[u8]) -> Outcome {
    push_error_table(state, &error_table_text(message), false);
    if raise {
        Outcome::Raise
    } else {
        Outcome::Return
    }
}

/// Pushes `{err=err}`, plus `ignore_error_stats_update=true` when asked.
///
/// # Safety
/// As [`push_command_error`].
unsafe fn push_error_table(state: *mut ffi::lua_State, err: &[u8], ignore_stats: bool) {
    ffi::lua_createtable(state, 0, 2);
    push_bytes(state, err);
    ffi::lua_setfield(state, -2, c"err".as_ptr());
    if ignore_stats {
        ffi::lua_pushboolean(state, 1);
        ffi::lua_setfield(state, -2, c"ignore_error_stats_update".as_ptr());
    }
}

/// Pushes a Lua string of `bytes`.
///
/// # Safety
/// `state` has a free slot; the heap limit is lifted.
unsafe fn push_bytes(state: *mut ffi::lua_State, bytes: &[u8]) {
    ffi::lua_pushlstring(state, bytes.as_ptr().cast(), bytes.len());
}

/// Pushes the value whose first token is next in `cursor`.
///
/// # Safety
/// As [`push_token`].
unsafe fn push_value(
    state: *mut ffi::lua_State,
    cursor: &mut Cursor<'_>,
    depth: usize,
) -> Result<(), ReplyParseError> {
    let token = cursor.token(depth)?;
    push_token(state, cursor, token, depth)
}

/// Pushes the Lua value Redis gives scripts for a reply starting with
/// `token` (its elements read from `cursor`; the rules are in the module
/// comment). On error the stack holds whatever was pushed so far.
///
/// # Safety
/// `state` has four free slots; the heap limit is lifted.
unsafe fn push_token(
    state: *mut ffi::lua_State,
    cursor: &mut Cursor<'_>,
    token: Token<'_>,
    depth: usize,
) -> Result<(), ReplyParseError> {
    match token {
        Token::Status(text) => push_field_table(state, c"ok", |s| push_bytes(s, text)),
        Token::Error(text) => push_command_error(state, text),
        Token::Int(i) => ffi::lua_pushnumber(state, i as f64),
        Token::Bulk(bytes) => push_bytes(state, bytes),
        Token::NullBulk | Token::NullArray => ffi::lua_pushboolean(state, 0),
        Token::Null => ffi::lua_pushnil(state),
        Token::Bool(b) => ffi::lua_pushboolean(state, c_int::from(b)),
        Token::Double(d) => push_field_table(state, c"double", |s| ffi::lua_pushnumber(s, d)),
        Token::BigNumber(digits) => {
            push_field_table(state, c"big_number", |s| push_bytes(s, digits))
        }
        Token::Verbatim { format, text } => push_field_table(state, c"verbatim_string", |s| {
            ffi::lua_createtable(s, 0, 2);
            push_bytes(s, text);
            ffi::lua_setfield(s, -2, c"string".as_ptr());
            push_bytes(s, format);
            ffi::lua_setfield(s, -2, c"format".as_ptr());
        }),
        Token::Array(n) => {
            make_room(state)?;
            // Grown element by element, as Redis builds it, so `#` of an
            // array with holes (RESP3 nulls) is what it is in Redis.
            ffi::lua_createtable(state, 0, 0);
            for i in 1..=n {
                push_value(state, cursor, depth + 1)?;
                ffi::lua_rawseti_(state, -2, c_int::try_from(i).unwrap_or(c_int::MAX));
            }
        }
        Token::Map(n) => {
            make_room(state)?;
            push_keyed_table(state, c"map", n, |s| {
                push_value(s, cursor, depth + 1)?;
                push_value(s, cursor, depth + 1)
            })?;
        }
        Token::Set(n) => {
            make_room(state)?;
            push_keyed_table(state, c"set", n, |s| {
                push_value(s, cursor, depth + 1)?;
                ffi::lua_pushboolean(s, 1);
                Ok(())
            })?;
        }
    }
    Ok(())
}

/// Asks for the slots an aggregate needs before nesting.
///
/// # Safety
/// `state` is a Lua state (`lua_checkstack` only fails, never raises,
/// past Lua's stack limit).
unsafe fn make_room(state: *mut ffi::lua_State) -> Result<(), ReplyParseError> {
    if ffi::lua_checkstack(state, AGGREGATE_SLOTS) == 0 {
        return Err(ReplyParseError::Invalid);
    }
    Ok(())
}

/// Pushes `{name=v}` where `push` pushes `v`.
///
/// # Safety
/// As [`push_token`].
unsafe fn push_field_table(
    state: *mut ffi::lua_State,
    name: &CStr,
    push: impl FnOnce(*mut ffi::lua_State),
) {
    ffi::lua_createtable(state, 0, 1);
    push(state);
    ffi::lua_setfield(state, -2, name.as_ptr());
}

/// Pushes `{name={k=v, ...}}` with `n` pairs, each pushed by `pair` (key,
/// then value). Keys Lua cannot index by (nil, NaN) are left out.
///
/// # Safety
/// As [`push_token`], with [`AGGREGATE_SLOTS`] free slots.
unsafe fn push_keyed_table(
    state: *mut ffi::lua_State,
    name: &CStr,
    n: usize,
    mut pair: impl FnMut(*mut ffi::lua_State) -> Result<(), ReplyParseError>,
) -> Result<(), ReplyParseError> {
    ffi::lua_createtable(state, 0, 1);
    ffi::lua_createtable(state, 0, 0);
    for _ in 0..n {
        pair(state)?;
        if valid_key(state, -2) {
            ffi::lua_rawset(state, -3);
        } else {
            ffi::lua_pop(state, 2);
        }
    }
    ffi::lua_setfield(state, -2, name.as_ptr());
    Ok(())
}

/// Whether the value at `idx` can be a table key (`lua_rawset` raises
/// for nil and NaN).
///
/// # Safety
/// `idx` is a valid stack index.
unsafe fn valid_key(state: *mut ffi::lua_State, idx: c_int) -> bool {
    match ffi::lua_type(state, idx) {
        ffi::LUA_TNIL => false,
        ffi::LUA_TNUMBER => !ffi::lua_tonumber(state, idx).is_nan(),
        _ => true,
    }
}
