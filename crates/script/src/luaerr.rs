//! Raising Lua errors from Rust the way Redis's C code raises them.
//!
//! Redis's C functions raise two kinds of error values: strings from
//! `luaL_error` (prefixed with the caller's `source:line:`) and tables
//! `{err="CODE msg"}` from `luaPushError` + `lua_error`. An `mlua` callback
//! can only fail with an `mlua::Error`, which reaches Lua as an opaque
//! userdata; so callbacks fail with a [`Raise`] inside that error, and every
//! place Lua code can observe an error value (the sandbox's `pcall`,
//! `xpcall`, `coroutine.resume` and the top-level handler) turns it back
//! into the string or table Redis would have raised ([`normalize`]).
//!
//! The argument helpers mirror `luaL_check*`: Lua 5.1's coercions and its
//! `bad argument #n to 'name' (...)` messages.

use mlua::{Error, Lua, Result, Value};
use std::fmt;
use std::sync::Arc;

/// Chunk name of the engine's own Lua helpers. Frames running them are
/// skipped when locating an error, as if they were C functions, so
/// positions name the user's script as in Redis.
pub(crate) const INTERNAL_CHUNK: &str = "=vireo";

/// An error value a Rust callback raises into Lua.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Raise {
    /// A plain string error (`luaL_error`), position prefix included.
    Message(Vec<u8>),
    /// A Redis error table `{err=text}`; `ignore_stats` adds
    /// `ignore_error_stats_update=true` (errors of commands the host ran).
    Table {
        /// The `err` field, `"CODE message"`.
        err: Vec<u8>,
        /// Whether the table carries `ignore_error_stats_update`.
        ignore_stats: bool,
    },
}

impl fmt::Display for Raise {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Raise::Message(m) => f.write_str(&String::from_utf8_lossy(m)),
            Raise::Table { err, .. } => f.write_str(&String::from_utf8_lossy(err)),
        }
    }
}

impl std::error::Error for Raise {}

impl Raise {
    /// Wraps the raise as an `mlua` error for a callback to return.
    pub(crate) fn into_error(self) -> Error {
        Error::ExternalError(Arc::new(self))
    }
}

/// A Redis error table raised from Rust (`luaPushError` + `lua_error`):
/// `text` in Redis's error-code form (see [`error_table_text`]).
pub(crate) fn raise_table(text: &[u8]) -> Error {
    Raise::Table {
        err: error_table_text(text),
        ignore_stats: false,
    }
    .into_error()
}

/// Redis's `luaPushErrorBuff` text rules: `-CODE msg` keeps its code (a
/// message without a space gets `ERR`), a message without `-` gets `ERR `;
/// CR/LF at both ends are trimmed.
pub(crate) fn error_table_text(text: &[u8]) -> Vec<u8> {
    let (code, msg): (&[u8], &[u8]) = match text.strip_prefix(b"-") {
        Some(rest) => match rest.iter().position(|&c| c == b' ') {
            Some(space) => (&rest[..space], &rest[space + 1..]),
            None => (b"ERR", rest),
        },
        None => (b"ERR", text),
    };
    let msg = trim_crlf(msg);
    let mut out = Vec::with_capacity(code.len() + 1 + msg.len());
    out.extend_from_slice(code);
    out.push(b' ');
    out.extend_from_slice(msg);
    out
}

/// `msg` without leading and trailing `\r`/`\n` bytes (`sdstrim`).
fn trim_crlf(msg: &[u8]) -> &[u8] {
    let is_crlf = |c: &u8| *c == b'\r' || *c == b'\n';
    let start = msg.iter().position(|c| !is_crlf(c)).unwrap_or(msg.len());
    let end = msg
        .iter()
        .rposition(|c| !is_crlf(c))
        .map_or(start, |e| e + 1);
    &msg[start..end]
}

/// True when the stack frame is one of the engine's own Lua helpers, or
/// the pseudo-frame Lua 5.1 leaves where one of them made a tail call.
fn is_internal(debug: &mlua::Debug) -> bool {
    let src = debug.source();
    src.source.as_deref() == Some(INTERNAL_CHUNK) || src.what == "tail"
}

/// Frames above the running callback, skipping the engine's helpers:
/// `(is_c, source, current_line)` for each, innermost first.
pub(crate) fn user_frames(lua: &Lua, from_level: usize) -> impl Iterator<Item = Frame> + '_ {
    (from_level..)
        .map_while(move |level| lua.inspect_stack(level))
        .filter(|d| !is_internal(d))
        .map(|d| {
            let src = d.source();
            Frame {
                is_c: src.what == "C",
                source: src.source.map(|s| s.into_owned()).unwrap_or_default(),
                line: d.curr_line(),
            }
        })
}

/// One stack frame, as `lua_getinfo(.., "Sl")` describes it.
pub(crate) struct Frame {
    /// A C (or Rust) function.
    pub(crate) is_c: bool,
    /// `ar.source` (`@user_script`).
    pub(crate) source: String,
    /// `ar.currentline` (-1 when unknown).
    pub(crate) line: i32,
}

/// `luaL_where(L, 1)`: `"short_src:line: "` of the callback's caller when it
/// is Lua code with a known line, else empty.
fn where_prefix(lua: &Lua) -> String {
    match lua.inspect_stack(1) {
        Some(d) if !is_internal(&d) => {
            let line = d.curr_line();
            let src = d.source();
            if src.what != "C" && line > 0 {
                format!("{}:{}: ", src.short_src.unwrap_or_default(), line)
            } else {
                String::new()
            }
        }
        _ => String::new(),
    }
}

/// `luaL_error`: a string error with the caller's position in front.
pub(crate) fn lua_error(lua: &Lua, msg: impl AsRef<[u8]>) -> Error {
    let mut text = where_prefix(lua).into_bytes();
    text.extend_from_slice(msg.as_ref());
    Raise::Message(text).into_error()
}

/// `luaL_argerror`: `bad argument #n to 'name' (extra)`, the name taken
/// from how the running function was called.
pub(crate) fn arg_error(lua: &Lua, narg: usize, extra: &str) -> Error {
    let (name, is_method) = match lua.inspect_stack(0) {
        Some(d) => {
            let names = d.names();
            (
                names.name.map(|n| n.into_owned()),
                names.name_what == Some("method"),
            )
        }
        None => return lua_error(lua, format!("bad argument #{narg} ({extra})")),
    };
    let name = name.unwrap_or_else(|| "?".to_owned());
    if is_method {
        if narg == 1 {
            return lua_error(lua, format!("calling '{name}' on bad self ({extra})"));
        }
        return lua_error(
            lua,
            format!("bad argument #{} to '{name}' ({extra})", narg - 1),
        );
    }
    lua_error(lua, format!("bad argument #{narg} to '{name}' ({extra})"))
}

/// `luaL_typerror`: `<expected> expected, got <type>`.
pub(crate) fn type_error(lua: &Lua, narg: usize, expected: &str, got: Option<&Value>) -> Error {
    arg_error(
        lua,
        narg,
        &format!("{expected} expected, got {}", type_name(got)),
    )
}

/// `luaL_typename`: the Lua type name of an argument (`no value` when
/// absent).
pub(crate) fn type_name(v: Option<&Value>) -> &'static str {
    match v {
        None => "no value",
        Some(Value::Nil) => "nil",
        Some(Value::Boolean(_)) => "boolean",
        Some(Value::LightUserData(_)) | Some(Value::UserData(_)) | Some(Value::Error(_)) => {
            "userdata"
        }
        Some(Value::Integer(_)) | Some(Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Table(_)) => "table",
        Some(Value::Function(_)) => "function",
        Some(Value::Thread(_)) => "thread",
        Some(_) => "userdata",
    }
}

/// `lua_tonumber`: numbers, and strings Lua converts to numbers.
pub(crate) fn to_number(lua: &Lua, v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => Some(*n),
        Value::Integer(i) => Some(*i as f64),
        Value::String(_) => lua.coerce_number(v?.clone()).ok().flatten(),
        _ => None,
    }
}

/// `luaL_checknumber`.
pub(crate) fn check_number(lua: &Lua, args: &[Value], narg: usize) -> Result<f64> {
    let v = args.get(narg - 1);
    to_number(lua, v).ok_or_else(|| type_error(lua, narg, "number", v))
}

/// C's `(long long)d` on x86-64: out-of-range and NaN give `i64::MIN`.
pub(crate) fn c_double_to_i64(d: f64) -> i64 {
    if !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&d) {
        i64::MIN
    } else {
        d as i64
    }
}

/// `luaL_checkinteger` (`lua_Integer` is 64-bit here).
pub(crate) fn check_integer(lua: &Lua, args: &[Value], narg: usize) -> Result<i64> {
    check_number(lua, args, narg).map(c_double_to_i64)
}

/// `luaL_optinteger`: `default` when the argument is absent or nil.
pub(crate) fn opt_integer(lua: &Lua, args: &[Value], narg: usize, default: i64) -> Result<i64> {
    match args.get(narg - 1) {
        None | Some(Value::Nil) => Ok(default),
        Some(_) => check_integer(lua, args, narg),
    }
}

/// `luaL_checkint`: the integer truncated to C `int`.
pub(crate) fn check_int(lua: &Lua, args: &[Value], narg: usize) -> Result<i32> {
    check_integer(lua, args, narg).map(|i| i as i32)
}

/// `lua_tolstring` without conversion side effects: strings as they are,
/// numbers formatted as Lua does (`%.14g`), anything else `None`.
pub(crate) fn to_bytes(v: Option<&Value>) -> Option<Vec<u8>> {
    match v? {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Number(n) => Some(crate::numfmt::format_g(*n, 14).into_bytes()),
        Value::Integer(i) => Some(crate::numfmt::format_g(*i as f64, 14).into_bytes()),
        _ => None,
    }
}

/// `luaL_checklstring`.
pub(crate) fn check_bytes(lua: &Lua, args: &[Value], narg: usize) -> Result<Vec<u8>> {
    let v = args.get(narg - 1);
    to_bytes(v).ok_or_else(|| type_error(lua, narg, "string", v))
}

/// The error value Lua code should see for a caught error: an engine
/// [`Raise`] becomes its string or table, other `mlua` errors their text;
/// values Lua code raised itself pass unchanged.
pub(crate) fn normalize(lua: &Lua, v: Value) -> Result<Value> {
    let Value::Error(err) = v else {
        return Ok(v);
    };
    match find_raise(&err) {
        Some(Raise::Message(m)) => Ok(Value::String(lua.create_string(m)?)),
        Some(Raise::Table { err, ignore_stats }) => {
            let t = lua.create_table()?;
            t.raw_set("err", lua.create_string(err)?)?;
            if *ignore_stats {
                t.raw_set("ignore_error_stats_update", true)?;
            }
            Ok(Value::Table(t))
        }
        None => Ok(Value::String(lua.create_string(plain_message(&err))?)),
    }
}

/// The [`Raise`] inside an `mlua` error, looking through callback wrappers.
pub(crate) fn find_raise(err: &Error) -> Option<&Raise> {
    match err {
        Error::ExternalError(e) => e.downcast_ref::<Raise>(),
        Error::CallbackError { cause, .. } => find_raise(cause),
        Error::WithContext { cause, .. } => find_raise(cause),
        _ => None,
    }
}

/// The message of an `mlua` error that is not a [`Raise`], without the
/// decorations `mlua` adds.
pub(crate) fn plain_message(err: &Error) -> String {
    match err {
        Error::RuntimeError(m) | Error::MemoryError(m) => m.clone(),
        Error::SyntaxError { message, .. } => message.clone(),
        Error::CallbackError { cause, .. } => plain_message(cause),
        Error::WithContext { cause, .. } => plain_message(cause),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `luaPushErrorBuff`'s code extraction and trimming.
    #[test]
    fn error_text_rules() {
        assert_eq!(error_table_text(b"-WRONGTYPE bad"), b"WRONGTYPE bad");
        assert_eq!(error_table_text(b"-NOSPACE"), b"ERR NOSPACE");
        assert_eq!(error_table_text(b"plain message"), b"ERR plain message");
        assert_eq!(error_table_text(b"-ERR x\r\n"), b"ERR x");
        assert_eq!(error_table_text(b"\r\n"), b"ERR ");
    }

    /// C's double-to-integer conversion on x86-64.
    #[test]
    fn c_conversion() {
        assert_eq!(c_double_to_i64(3.9), 3);
        assert_eq!(c_double_to_i64(-3.9), -3);
        assert_eq!(c_double_to_i64(f64::NAN), i64::MIN);
        assert_eq!(c_double_to_i64(1e300), i64::MIN);
    }
}
