//! A script's result as a reply, as Redis 7.0's `script_lua.c` converts
//! it (the other way, replies to Lua values, is `call`'s).
//!
//! Lua to reply (a script's return value): string → bulk, number →
//! integer (truncated), boolean → `:1`/null (script in RESP2) or a RESP3
//! boolean, tables by their `err`/`ok`/`double`/`big_number`/
//! `verbatim_string`/`map`/`set` field, else an array that ends at the first
//! nil; anything else → null. The writer is iterative and stops nesting at
//! [`REPLY_DEPTH_LIMIT`] with Redis's `reached lua stack limit` error, so a
//! self-referencing table cannot overflow the stack.

use mlua::{Result, Table, Value};
use vireo_resp::{Protocol, ReplyBuf};

/// Nesting depth at which Redis's conversion runs out of Lua stack (it
/// writes 7995 nested arrays of a self-referencing table, then the error).
pub const REPLY_DEPTH_LIMIT: usize = 7995;

/// Writes a script's return value to `out`. `script_resp` is the script's
/// `redis.setresp` (it decides how booleans are sent).
pub(crate) fn write_lua_value(
    value: Value,
    script_resp: Protocol,
    out: &mut ReplyBuf,
) -> Result<()> {
    let mut work = vec![Work::Value(value, 0usize)];
    while let Some(item) = work.pop() {
        let (value, depth) = match item {
            Work::Value(v, depth) => (v, depth),
            Work::Array {
                table,
                next,
                len,
                depth,
            } => {
                let v: Value = table.raw_get(next)?;
                if next < len {
                    work.push(Work::Array {
                        table,
                        next: next + 1,
                        len,
                        depth,
                    });
                }
                (v, depth)
            }
        };
        if depth >= REPLY_DEPTH_LIMIT {
            out.raw(b"-ERR reached lua stack limit\r\n");
            continue;
        }
        match value {
            Value::String(s) => out.bulk(&s.as_bytes()),
            Value::Boolean(b) => match script_resp {
                Protocol::Resp2 if b => out.int(1),
                Protocol::Resp2 => out.null(),
                Protocol::Resp3 => out.boolean(b),
            },
            Value::Number(n) => out.int(crate::luaerr::c_double_to_i64(n)),
            Value::Integer(i) => out.int(i),
            Value::Table(t) => write_table(t, depth, out, &mut work)?,
            _ => out.null(),
        }
    }
    Ok(())
}

/// What is left to write: a value, or the rest of an array (its elements
/// are read one at a time: every value held from Lua takes a slot of
/// mlua's reference stack, so a big array is never collected).
enum Work {
    /// A value at a nesting depth.
    Value(Value, usize),
    /// Elements `next..=len` of an array whose elements are at `depth`.
    Array {
        table: Table,
        next: usize,
        len: usize,
        depth: usize,
    },
}

/// A table value: one of Redis's single-field reply tables, or an array.
/// Aggregates push their elements on `work` (reversed, so they pop in
/// order) after writing their header.
fn write_table(t: Table, depth: usize, out: &mut ReplyBuf, work: &mut Vec<Work>) -> Result<()> {
    if let Value::String(err) = t.raw_get::<Value>("err")? {
        write_line(out, b'-', until_nul(&err.as_bytes()));
        return Ok(());
    }
    if let Value::String(ok) = t.raw_get::<Value>("ok")? {
        write_line(out, b'+', until_nul(&ok.as_bytes()));
        return Ok(());
    }
    match t.raw_get::<Value>("double")? {
        Value::Number(d) => {
            out.double(d);
            return Ok(());
        }
        Value::Integer(i) => {
            out.double(i as f64);
            return Ok(());
        }
        _ => {}
    }
    if let Value::String(n) = t.raw_get::<Value>("big_number")? {
        write_big_number(out, &n.as_bytes());
        return Ok(());
    }
    if let Value::Table(v) = t.raw_get::<Value>("verbatim_string")? {
        if let (Value::String(format), Value::String(text)) =
            (v.raw_get::<Value>("format")?, v.raw_get::<Value>("string")?)
        {
            let format = String::from_utf8_lossy(&format.as_bytes()).into_owned();
            out.verbatim(&format, &text.as_bytes());
            return Ok(());
        }
    }
    if let Value::Table(map) = t.raw_get::<Value>("map")? {
        let pairs: Vec<(Value, Value)> = map.pairs::<Value, Value>().collect::<Result<_>>()?;
        out.map(pairs.len());
        for (k, v) in pairs.into_iter().rev() {
            work.push(Work::Value(v, depth + 1));
            work.push(Work::Value(k, depth + 1));
        }
        return Ok(());
    }
    if let Value::Table(set) = t.raw_get::<Value>("set")? {
        let keys: Vec<Value> = set
            .pairs::<Value, Value>()
            .map(|p| p.map(|(k, _)| k))
            .collect::<Result<_>>()?;
        out.set(keys.len());
        work.extend(keys.into_iter().rev().map(|k| Work::Value(k, depth + 1)));
        return Ok(());
    }
    // The array ends at the first nil.
    let mut len = 0;
    while !t.raw_get::<Value>(len + 1)?.is_nil() {
        len += 1;
    }
    out.array(len);
    if len > 0 {
        work.push(Work::Array {
            table: t,
            next: 1,
            len,
            depth: depth + 1,
        });
    }
    Ok(())
}

/// The bytes before the first NUL (Redis copies these fields with
/// `sdsnew`, a C string).
fn until_nul(b: &[u8]) -> &[u8] {
    b.iter().position(|&c| c == 0).map_or(b, |n| &b[..n])
}

/// `<prefix><text>\r\n` with CR/LF in `text` replaced by spaces.
fn write_line(out: &mut ReplyBuf, prefix: u8, text: &[u8]) {
    let mut line = Vec::with_capacity(text.len() + 3);
    line.push(prefix);
    line.extend(
        text.iter()
            .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }),
    );
    line.extend_from_slice(b"\r\n");
    out.raw(&line);
}

/// A big number (CR/LF mapped to spaces): RESP3 `(`, RESP2 a bulk string.
fn write_big_number(out: &mut ReplyBuf, digits: &[u8]) {
    let clean: Vec<u8> = digits
        .iter()
        .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c })
        .collect();
    match out.protocol() {
        Protocol::Resp3 => write_line(out, b'(', &clean),
        Protocol::Resp2 => out.bulk(&clean),
    }
}
