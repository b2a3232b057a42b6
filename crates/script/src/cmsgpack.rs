//! `cmsgpack`: lua-cmsgpack 0.4.0 as Redis bundles it.
//!
//! `pack(...)` encodes each argument and concatenates them: integers in the
//! smallest MessagePack integer type, other numbers as float32 when exact
//! else float64, strings as str8/16/32 (fixstr below 32 bytes), tables as
//! arrays when their keys are exactly 1..n, else maps; nesting deeper than
//! 16 tables encodes `nil`, so circular tables terminate. `unpack(s)`,
//! `unpack_one(s [, offset])` and `unpack_limit(s, limit [, offset])`
//! decode with the C library's conversions (uint64 above 2^63 wraps to a
//! negative number, as there) and its errors (`Missing bytes in input.`,
//! `Bad data format in input.`). Declared lengths are never trusted for
//! allocation: every element must be present in the input.

use crate::luaerr;
use mlua::{Lua, MultiValue, Result, Table, Value, Variadic};

/// Table nesting the encoder follows before writing `nil`.
const MAX_NESTING: usize = 16;
/// Values one unpack may produce before Lua's stack limit stops it.
const MAX_STACK: usize = 7990;
/// Nesting the decoder follows before Lua's stack limit stops it.
const MAX_DECODE_DEPTH: usize = 2600;

/// The `cmsgpack` table.
pub(crate) fn open(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, a: Variadic<Value>| pack(lua, &a))?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, a: Variadic<Value>| {
            let s = luaerr::check_bytes(lua, &a, 1)?;
            unpack_full(lua, &s, 0, 0)
        })?,
    )?;
    t.raw_set(
        "unpack_one",
        lua.create_function(|lua, a: Variadic<Value>| {
            let offset = luaerr::opt_integer(lua, &a, 2, 0)?;
            let s = luaerr::check_bytes(lua, &a, 1)?;
            unpack_full(lua, &s, 1, offset)
        })?,
    )?;
    t.raw_set(
        "unpack_limit",
        lua.create_function(|lua, a: Variadic<Value>| {
            let limit = luaerr::check_integer(lua, &a, 2)?;
            let offset = luaerr::opt_integer(lua, &a, 3, 0)?;
            let s = luaerr::check_bytes(lua, &a, 1)?;
            unpack_full(lua, &s, limit, offset)
        })?,
    )?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

/// `cmsgpack.pack(...)`.
fn pack(lua: &Lua, args: &[Value]) -> Result<mlua::String> {
    if args.is_empty() {
        return Err(luaerr::arg_error(lua, 0, "MessagePack pack needs input."));
    }
    let mut out = Vec::new();
    for arg in args {
        encode(&mut out, arg, 0)?;
    }
    lua.create_string(out)
}

/// Encodes one value at table nesting `level`.
fn encode(out: &mut Vec<u8>, v: &Value, level: usize) -> Result<()> {
    match v {
        Value::Table(t) if level < MAX_NESTING => encode_table(out, t, level)?,
        Value::String(s) => encode_bytes(out, &s.as_bytes()),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_int(out, *i),
        Value::Number(n) => encode_number(out, *n),
        _ => out.push(0xc0),
    }
    Ok(())
}

/// A number: an integer when it is one (and fits i64), else a float.
fn encode_number(out: &mut Vec<u8>, n: f64) {
    if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&n) && n.trunc() == n {
        encode_int(out, n as i64);
    } else if f64::from(n as f32) == n {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// The smallest MessagePack integer encoding of `n`.
fn encode_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        match n {
            0..=127 => out.push(n as u8),
            128..=0xff => out.extend_from_slice(&[0xcc, n as u8]),
            0x100..=0xffff => {
                out.push(0xcd);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                out.push(0xce);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            _ => {
                out.push(0xcf);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// A string header and bytes.
fn encode_bytes(out: &mut Vec<u8>, s: &[u8]) {
    let len = s.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

/// An array (`fix`/16/32) or map header.
fn encode_header(out: &mut Vec<u8>, n: usize, fix: u8, b16: u8, b32: u8) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(b16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// A table: an array when its keys are exactly 1..n, else a map.
///
/// The table is walked twice (once to count and classify its keys, once
/// to encode), never collected: every value held from Lua takes a slot of
/// mlua's reference stack, and a table of 100000 entries would exhaust it.
fn encode_table(out: &mut Vec<u8>, t: &Table, level: usize) -> Result<()> {
    let mut max: i64 = 0;
    let mut count = 0usize;
    let mut is_array = true;
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair?;
        count += 1;
        if is_array {
            match array_index(&k) {
                Some(n) => max = max.max(n),
                None => is_array = false,
            }
        }
    }
    if is_array && max == count as i64 {
        encode_header(out, count, 0x90, 0xdc, 0xdd);
        for i in 1..=count {
            let v: Value = t.get(i)?;
            encode(out, &v, level + 1)?;
        }
    } else {
        encode_header(out, count, 0x80, 0xde, 0xdf);
        for pair in t.clone().pairs::<Value, Value>() {
            let (k, v) = pair?;
            encode(out, &k, level + 1)?;
            encode(out, &v, level + 1)?;
        }
    }
    Ok(())
}

/// A key's position when it may be an array index (a positive integer
/// that fits an `int32`), as Redis's `table_is_an_array` accepts.
fn array_index(k: &Value) -> Option<i64> {
    let n = match k {
        Value::Integer(i) => *i as f64,
        Value::Number(n) => *n,
        _ => return None,
    };
    let fits_int = n.trunc() == n && n >= f64::from(i32::MIN) && n <= f64::from(i32::MAX);
    (n > 0.0 && fits_int).then_some(n as i64)
}

/// Why decoding stopped.
enum DecodeError {
    /// The input ends inside a value.
    Eof,
    /// An unknown type byte.
    BadFormat,
    /// A Lua error (out of memory, stack limit).
    Lua(mlua::Error),
}

impl From<mlua::Error> for DecodeError {
    fn from(e: mlua::Error) -> Self {
        DecodeError::Lua(e)
    }
}

/// A Lua runtime error raised from inside a C function (no position).
fn bare_error(msg: &str) -> mlua::Error {
    luaerr::Raise::Message(msg.as_bytes().to_vec()).into_error()
}

/// Decoding cursor.
struct Cursor<'a> {
    /// The VM.
    lua: &'a Lua,
    /// The rest of the input.
    data: &'a [u8],
}

impl<'a> Cursor<'a> {
    /// Takes `n` bytes.
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], DecodeError> {
        if self.data.len() < n {
            return Err(DecodeError::Eof);
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Ok(head)
    }

    /// Takes a big-endian unsigned integer of `N` bytes.
    fn uint<const N: usize>(&mut self) -> std::result::Result<u64, DecodeError> {
        Ok(self
            .take(N)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    /// A string of `len` bytes.
    fn string(&mut self, len: usize) -> std::result::Result<Value, DecodeError> {
        let bytes = self.take(len)?;
        Ok(Value::String(self.lua.create_string(bytes)?))
    }

    /// An array of `len` elements (the table grows with elements present).
    fn array(&mut self, len: u64, depth: usize) -> std::result::Result<Value, DecodeError> {
        let t = self.lua.create_table()?;
        for i in 1..=len {
            let v = self.value(depth + 1)?;
            t.raw_set(i, v)?;
        }
        Ok(Value::Table(t))
    }

    /// A map of `len` pairs (nil or NaN keys are a Lua error, as
    /// `lua_settable` makes them).
    fn map(&mut self, len: u64, depth: usize) -> std::result::Result<Value, DecodeError> {
        let t = self.lua.create_table()?;
        for _ in 0..len {
            let k = self.value(depth + 1)?;
            let v = self.value(depth + 1)?;
            match &k {
                Value::Nil => return Err(DecodeError::Lua(bare_error("table index is nil"))),
                Value::Number(n) if n.is_nan() => {
                    return Err(DecodeError::Lua(bare_error("table index is NaN")))
                }
                _ => t.raw_set(k, v)?,
            }
        }
        Ok(Value::Table(t))
    }

    /// One value.
    fn value(&mut self, depth: usize) -> std::result::Result<Value, DecodeError> {
        let first = self.take(1)?[0];
        if depth > MAX_DECODE_DEPTH {
            let msg = "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)";
            return Err(DecodeError::Lua(luaerr::lua_error(self.lua, msg)));
        }
        let num = |n: f64| Ok(Value::Number(n));
        match first {
            0xcc => num(self.uint::<1>()? as f64),
            0xd0 => num(f64::from(self.uint::<1>()? as u8 as i8)),
            0xcd => num(self.uint::<2>()? as f64),
            0xd1 => num(f64::from(self.uint::<2>()? as u16 as i16)),
            0xce => num(self.uint::<4>()? as f64),
            0xd2 => num(f64::from(self.uint::<4>()? as u32 as i32)),
            0xcf => num(self.uint::<8>()? as i64 as f64),
            0xd3 => num(self.uint::<8>()? as i64 as f64),
            0xc0 => Ok(Value::Nil),
            0xc3 => Ok(Value::Boolean(true)),
            0xc2 => Ok(Value::Boolean(false)),
            0xca => num(f64::from(f32::from_bits(self.uint::<4>()? as u32))),
            0xcb => num(f64::from_bits(self.uint::<8>()?)),
            0xd9 => {
                let len = self.uint::<1>()? as usize;
                self.string(len)
            }
            0xda => {
                let len = self.uint::<2>()? as usize;
                self.string(len)
            }
            0xdb => {
                let len = self.uint::<4>()? as usize;
                self.string(len)
            }
            0xdc => {
                let len = self.uint::<2>()?;
                self.array(len, depth)
            }
            0xdd => {
                let len = self.uint::<4>()?;
                self.array(len, depth)
            }
            0xde => {
                let len = self.uint::<2>()?;
                self.map(len, depth)
            }
            0xdf => {
                let len = self.uint::<4>()?;
                self.map(len, depth)
            }
            b if b & 0x80 == 0 => num(f64::from(b)),
            b if b & 0xe0 == 0xe0 => num(f64::from(b as i8)),
            b if b & 0xe0 == 0xa0 => self.string(usize::from(b & 0x1f)),
            b if b & 0xf0 == 0x90 => self.array(u64::from(b & 0xf), depth),
            b if b & 0xf0 == 0x80 => self.map(u64::from(b & 0xf), depth),
            _ => Err(DecodeError::BadFormat),
        }
    }
}

/// `mp_unpack_full`: decodes up to `limit` values from `offset` (both 0:
/// everything, without the offset result).
fn unpack_full(lua: &Lua, s: &[u8], limit: i64, offset: i64) -> Result<MultiValue> {
    let len = s.len() as i64;
    if offset < 0 || limit < 0 {
        let msg = format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32, len as i32
        );
        return Err(luaerr::lua_error(lua, msg));
    }
    if offset > len {
        return Err(luaerr::lua_error(
            lua,
            format!(
                "Start offset {} greater than input length {}.",
                offset as i32, len as i32
            ),
        ));
    }
    let decode_all = limit == 0 && offset == 0;
    let limit = if decode_all {
        i64::from(i32::MAX)
    } else {
        limit
    };
    let mut cursor = Cursor {
        lua,
        data: &s[offset as usize..],
    };
    let mut values = Vec::new();
    while !cursor.data.is_empty() && (values.len() as i64) < limit {
        if values.len() >= MAX_STACK {
            let msg = "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)";
            return Err(luaerr::lua_error(lua, msg));
        }
        match cursor.value(0) {
            Ok(v) => values.push(v),
            Err(DecodeError::Eof) => return Err(luaerr::lua_error(lua, "Missing bytes in input.")),
            Err(DecodeError::BadFormat) => {
                return Err(luaerr::lua_error(lua, "Bad data format in input."))
            }
            Err(DecodeError::Lua(e)) => return Err(e),
        }
    }
    if !decode_all {
        let left = cursor.data.len() as i64;
        let next = if left == 0 { -1 } else { len - left };
        values.insert(0, Value::Number(next as f64));
    }
    Ok(MultiValue::from_iter(values))
}
