//! `cjson`: Lua CJSON 2.1.0 as Redis bundles it.
//!
//! Encoding: empty tables become `{}`; a table whose keys are all positive
//! integers is an array (holes become `null`) unless it is excessively
//! sparse (`encode_sparse_array`, default: error past ratio 2 beyond index
//! 10); numbers use `%.14g` (`encode_number_precision`); NaN/Inf are errors
//! unless `encode_invalid_numbers`; nesting stops at `encode_max_depth`
//! (1000). Decoding follows CJSON's tokenizer, including what it accepts
//! beyond JSON (`strtod` numbers: hex, `inf`, `nan`, leading `+` and zeros,
//! a NUL byte ending the text), its error texts (`Expected value but found
//! invalid token at character 1`) and `decode_max_depth` (1000). `null`
//! decodes to `cjson.null`, a NULL light userdata.
//!
//! The configuration lives with each `cjson` table and persists across
//! scripts of the same VM, as in Redis.

use crate::luaerr;
use crate::numfmt::{format_g, strtod_prefix};
use mlua::{LightUserData, Lua, MultiValue, Result, Table, Value, Variadic};
use std::cell::RefCell;
use std::rc::Rc;

/// Nesting beyond which Lua's own stack would stop Redis's recursive
/// encoder and decoder whatever the configured depth.
const STACK_NESTING_LIMIT: i64 = 2600;

/// One `cjson` table's settings.
#[derive(Debug, Clone)]
struct Config {
    /// Encode excessively sparse arrays as objects instead of failing.
    sparse_convert: bool,
    /// Sparse ratio (0 = never sparse).
    sparse_ratio: i64,
    /// Arrays up to this index are never sparse.
    sparse_safe: i64,
    /// Maximum encoding nesting.
    encode_max_depth: i64,
    /// Maximum decoding nesting.
    decode_max_depth: i64,
    /// 0: NaN/Inf are errors, 1: written as `nan`/`inf`, 2: as `null`.
    encode_invalid_numbers: i64,
    /// Accept non-JSON numbers (hex, inf, nan) when decoding.
    decode_invalid_numbers: bool,
    /// Kept for API compatibility; no behaviour depends on it.
    encode_keep_buffer: bool,
    /// `%.{n}g` precision for numbers.
    number_precision: i64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sparse_convert: false,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_invalid_numbers: 0,
            decode_invalid_numbers: true,
            encode_keep_buffer: true,
            number_precision: 14,
        }
    }
}

/// Shared handle to a table's settings.
type Shared = Rc<RefCell<Config>>;

/// `cjson.null`.
fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// Builds a `cjson` table with fresh settings.
pub(crate) fn open(lua: &Lua) -> Result<Table> {
    let cfg: Shared = Rc::default();
    let t = lua.create_table()?;
    let c = cfg.clone();
    t.raw_set(
        "encode",
        lua.create_function(move |lua, a: Variadic<Value>| encode(lua, &a, &c.borrow()))?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode",
        lua.create_function(move |lua, a: Variadic<Value>| decode(lua, &a, &c.borrow()))?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_sparse_array",
        lua.create_function(move |lua, a: Variadic<Value>| {
            arg_init(lua, &a, 3)?;
            let mut cfg = c.borrow_mut();
            let convert = bool_option(lua, &a, 1, &mut cfg.sparse_convert)?;
            let ratio = int_option(lua, &a, 2, &mut cfg.sparse_ratio, 0, i64::from(i32::MAX))?;
            let safe = int_option(lua, &a, 3, &mut cfg.sparse_safe, 0, i64::from(i32::MAX))?;
            Ok((convert, ratio, safe))
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_max_depth",
        lua.create_function(move |lua, a: Variadic<Value>| {
            arg_init(lua, &a, 1)?;
            int_option(
                lua,
                &a,
                1,
                &mut c.borrow_mut().encode_max_depth,
                1,
                i64::from(i32::MAX),
            )
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode_max_depth",
        lua.create_function(move |lua, a: Variadic<Value>| {
            arg_init(lua, &a, 1)?;
            int_option(
                lua,
                &a,
                1,
                &mut c.borrow_mut().decode_max_depth,
                1,
                i64::from(i32::MAX),
            )
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_number_precision",
        lua.create_function(move |lua, a: Variadic<Value>| {
            arg_init(lua, &a, 1)?;
            int_option(lua, &a, 1, &mut c.borrow_mut().number_precision, 1, 14)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_keep_buffer",
        lua.create_function(move |lua, a: Variadic<Value>| {
            arg_init(lua, &a, 1)?;
            bool_option(lua, &a, 1, &mut c.borrow_mut().encode_keep_buffer)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_invalid_numbers",
        lua.create_function(move |lua, a: Variadic<Value>| {
            arg_init(lua, &a, 1)?;
            let mut cfg = c.borrow_mut();
            let setting = &mut cfg.encode_invalid_numbers;
            match a.first() {
                None | Some(Value::Nil) => {}
                Some(Value::Boolean(b)) => *setting = i64::from(*b),
                Some(_) => *setting = check_option(lua, &a, 1, &["off", "on", "null"])? as i64,
            }
            Ok(match *setting {
                0 => Value::Boolean(false),
                1 => Value::Boolean(true),
                _ => Value::String(lua.create_string("null")?),
            })
        })?,
    )?;
    let c = cfg;
    t.raw_set(
        "decode_invalid_numbers",
        lua.create_function(move |lua, a: Variadic<Value>| {
            arg_init(lua, &a, 1)?;
            bool_option(lua, &a, 1, &mut c.borrow_mut().decode_invalid_numbers)
        })?,
    )?;
    t.raw_set("new", lua.create_function(|lua, _: MultiValue| open(lua))?)?;
    t.raw_set("null", null())?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

/// `json_arg_init`: at most `n` arguments.
fn arg_init(lua: &Lua, args: &[Value], n: usize) -> Result<()> {
    if args.len() > n {
        return Err(luaerr::arg_error(lua, n + 1, "found too many arguments"));
    }
    Ok(())
}

/// `luaL_checkoption`: the index of the string argument in `options`.
fn check_option(lua: &Lua, args: &[Value], narg: usize, options: &[&str]) -> Result<usize> {
    let name = luaerr::check_bytes(lua, args, narg)?;
    options
        .iter()
        .position(|o| o.as_bytes() == name.as_slice())
        .ok_or_else(|| {
            luaerr::arg_error(
                lua,
                narg,
                &format!("invalid option '{}'", String::from_utf8_lossy(&name)),
            )
        })
}

/// An on/off option: a boolean or `"off"`/`"on"`; returns the setting.
fn bool_option(lua: &Lua, args: &[Value], narg: usize, setting: &mut bool) -> Result<bool> {
    match args.get(narg - 1) {
        None | Some(Value::Nil) => {}
        Some(Value::Boolean(b)) => *setting = *b,
        Some(_) => *setting = check_option(lua, args, narg, &["off", "on"])? == 1,
    }
    Ok(*setting)
}

/// An integer option within `min..=max`; returns the setting.
fn int_option(
    lua: &Lua,
    args: &[Value],
    narg: usize,
    setting: &mut i64,
    min: i64,
    max: i64,
) -> Result<i64> {
    if !matches!(args.get(narg - 1), None | Some(Value::Nil)) {
        let value = luaerr::check_integer(lua, args, narg)? as i32 as i64;
        if value < min || value > max {
            return Err(luaerr::arg_error(
                lua,
                1,
                &format!("expected integer between {min} and {max}"),
            ));
        }
        *setting = value;
    }
    Ok(*setting)
}

/// `cjson.encode(value)`.
fn encode(lua: &Lua, args: &[Value], cfg: &Config) -> Result<mlua::String> {
    if args.len() != 1 {
        return Err(luaerr::arg_error(lua, 1, "expected 1 argument"));
    }
    let mut enc = Encoder {
        lua,
        cfg,
        out: Vec::new(),
    };
    enc.value(&args[0], 0)?;
    lua.create_string(enc.out)
}

/// Encoding state.
struct Encoder<'a> {
    /// The VM (for errors and strings).
    lua: &'a Lua,
    /// Settings.
    cfg: &'a Config,
    /// JSON text so far.
    out: Vec<u8>,
}

impl Encoder<'_> {
    /// `json_encode_exception`: `Cannot serialise <type>: <reason>`.
    fn fail(&self, v: &Value, reason: &str) -> mlua::Error {
        let ty = luaerr::type_name(Some(v));
        luaerr::lua_error(self.lua, format!("Cannot serialise {ty}: {reason}"))
    }

    /// Appends one value at nesting `depth`.
    fn value(&mut self, v: &Value, depth: i64) -> Result<()> {
        match v {
            Value::String(s) => self.string(&s.as_bytes()),
            Value::Number(n) => self.number(v, *n)?,
            Value::Integer(i) => self.number(v, *i as f64)?,
            Value::Boolean(true) => self.out.extend_from_slice(b"true"),
            Value::Boolean(false) => self.out.extend_from_slice(b"false"),
            Value::Nil => self.out.extend_from_slice(b"null"),
            Value::LightUserData(p) if p.0.is_null() => self.out.extend_from_slice(b"null"),
            Value::Table(t) => self.table(t, depth + 1)?,
            other => return Err(self.fail(other, "type not supported")),
        }
        Ok(())
    }

    /// Appends a quoted, escaped string.
    fn string(&mut self, s: &[u8]) {
        self.out.reserve(s.len() + 2);
        self.out.push(b'"');
        for &c in s {
            match c {
                b'"' => self.out.extend_from_slice(b"\\\""),
                b'\\' => self.out.extend_from_slice(b"\\\\"),
                b'/' => self.out.extend_from_slice(b"\\/"),
                b'\x08' => self.out.extend_from_slice(b"\\b"),
                b'\t' => self.out.extend_from_slice(b"\\t"),
                b'\n' => self.out.extend_from_slice(b"\\n"),
                b'\x0c' => self.out.extend_from_slice(b"\\f"),
                b'\r' => self.out.extend_from_slice(b"\\r"),
                0..=0x1f | 0x7f => self.out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
                _ => self.out.push(c),
            }
        }
        self.out.push(b'"');
    }

    /// Appends a number (`v` is the Lua value, for error messages).
    fn number(&mut self, v: &Value, n: f64) -> Result<()> {
        if !n.is_finite() {
            match self.cfg.encode_invalid_numbers {
                0 => return Err(self.fail(v, "must not be NaN or Inf")),
                1 if n.is_nan() => {
                    self.out.extend_from_slice(b"nan");
                    return Ok(());
                }
                1 => {}
                _ => {
                    self.out.extend_from_slice(b"null");
                    return Ok(());
                }
            }
        }
        let text = format_g(n, self.cfg.number_precision as usize);
        self.out.extend_from_slice(text.as_bytes());
        Ok(())
    }

    /// Appends a table as an array or an object.
    fn table(&mut self, t: &Table, depth: i64) -> Result<()> {
        if depth > self.cfg.encode_max_depth.min(STACK_NESTING_LIMIT) {
            return Err(luaerr::lua_error(
                self.lua,
                format!("Cannot serialise, excessive nesting ({depth})"),
            ));
        }
        let pairs: Vec<(Value, Value)> =
            t.clone().pairs::<Value, Value>().collect::<Result<_>>()?;
        match self.array_length(&pairs, &Value::Table(t.clone()))? {
            Some(len) => {
                self.out.push(b'[');
                for i in 1..=len {
                    if i > 1 {
                        self.out.push(b',');
                    }
                    let item: Value = t.raw_get(i)?;
                    self.value(&item, depth)?;
                }
                self.out.push(b']');
            }
            None => {
                self.out.push(b'{');
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    match k {
                        Value::Number(_) | Value::Integer(_) => {
                            self.out.push(b'"');
                            let n = luaerr::to_number(self.lua, Some(k)).unwrap_or(0.0);
                            self.number(k, n)?;
                            self.out.extend_from_slice(b"\":");
                        }
                        Value::String(s) => {
                            self.string(&s.as_bytes());
                            self.out.push(b':');
                        }
                        other => {
                            return Err(self.fail(other, "table key must be a number or string"))
                        }
                    }
                    self.value(v, depth)?;
                }
                self.out.push(b'}');
            }
        }
        Ok(())
    }

    /// `lua_array_length`: `Some(max index)` when the table encodes as an
    /// array, `None` for an object (non-integer keys, empty, or sparse and
    /// converted).
    fn array_length(&self, pairs: &[(Value, Value)], table: &Value) -> Result<Option<usize>> {
        let mut max: i64 = 0;
        let mut items: i64 = 0;
        for (k, _) in pairs {
            let k = match k {
                Value::Number(n) => *n,
                Value::Integer(i) => *i as f64,
                _ => return Ok(None),
            };
            if k == 0.0 || k.floor() != k || k < 1.0 {
                return Ok(None);
            }
            max = max.max(luaerr::c_double_to_i64(k).clamp(0, i64::from(i32::MAX)));
            items += 1;
        }
        let cfg = self.cfg;
        if cfg.sparse_ratio > 0 && max > items * cfg.sparse_ratio && max > cfg.sparse_safe {
            if !cfg.sparse_convert {
                return Err(self.fail(table, "excessively sparse array"));
            }
            return Ok(None);
        }
        Ok((max > 0).then_some(max as usize))
    }
}

/// Token kinds, named as CJSON names them in errors.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// `{`
    ObjBegin,
    /// `}`
    ObjEnd,
    /// `[`
    ArrBegin,
    /// `]`
    ArrEnd,
    /// A string (value in the decoder's scratch buffer).
    Str,
    /// A number.
    Num(f64),
    /// `true`/`false`.
    Bool(bool),
    /// `null`.
    Null,
    /// `:`
    Colon,
    /// `,`
    Comma,
    /// End of input (or a NUL byte).
    End,
    /// A lexical error with its description.
    Error(&'static str),
}

impl Kind {
    /// CJSON's `json_token_type_name` (or the error description).
    fn name(self) -> &'static str {
        match self {
            Kind::ObjBegin => "T_OBJ_BEGIN",
            Kind::ObjEnd => "T_OBJ_END",
            Kind::ArrBegin => "T_ARR_BEGIN",
            Kind::ArrEnd => "T_ARR_END",
            Kind::Str => "T_STRING",
            Kind::Num(_) => "T_NUMBER",
            Kind::Bool(_) => "T_BOOLEAN",
            Kind::Null => "T_NULL",
            Kind::Colon => "T_COLON",
            Kind::Comma => "T_COMMA",
            Kind::End => "T_END",
            Kind::Error(e) => e,
        }
    }
}

/// A token and the offset it starts at (or where its error is).
#[derive(Debug, Clone, Copy)]
struct Token {
    /// What it is.
    kind: Kind,
    /// 0-based offset.
    index: usize,
}

/// `cjson.decode(text)`.
fn decode(lua: &Lua, args: &[Value], cfg: &Config) -> Result<Value> {
    if args.len() != 1 {
        return Err(luaerr::arg_error(lua, 1, "expected 1 argument"));
    }
    let data = luaerr::check_bytes(lua, args, 1)?;
    if data.len() >= 2 && (data[0] == 0 || data[1] == 0) {
        return Err(luaerr::lua_error(
            lua,
            "JSON parser does not support UTF-16 or UTF-32",
        ));
    }
    let mut d = Decoder {
        lua,
        cfg,
        data: &data,
        pos: 0,
        depth: 0,
        scratch: Vec::new(),
    };
    let token = d.next_token();
    let value = d.value(token)?;
    let token = d.next_token();
    if token.kind != Kind::End {
        return Err(d.parse_error("the end", token));
    }
    Ok(value)
}

/// Decoding state.
struct Decoder<'a> {
    /// The VM.
    lua: &'a Lua,
    /// Settings.
    cfg: &'a Config,
    /// The JSON text.
    data: &'a [u8],
    /// Next unread offset.
    pos: usize,
    /// Current nesting.
    depth: i64,
    /// The last string token's decoded bytes.
    scratch: Vec<u8>,
}

impl Decoder<'_> {
    /// The byte at `i`, NUL past the end (the C code reads a C string).
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    /// `json_throw_parse_error`.
    fn parse_error(&self, expected: &str, token: Token) -> mlua::Error {
        let msg = format!(
            "Expected {expected} but found {} at character {}",
            token.kind.name(),
            token.index + 1
        );
        luaerr::lua_error(self.lua, msg)
    }

    /// `json_next_token`.
    fn next_token(&mut self) -> Token {
        while matches!(self.at(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let index = self.pos;
        let c = self.at(self.pos);
        let single = match c {
            b'{' => Some(Kind::ObjBegin),
            b'}' => Some(Kind::ObjEnd),
            b'[' => Some(Kind::ArrBegin),
            b']' => Some(Kind::ArrEnd),
            b',' => Some(Kind::Comma),
            b':' => Some(Kind::Colon),
            _ => None,
        };
        if let Some(kind) = single {
            self.pos += 1;
            return Token { kind, index };
        }
        let kind = match c {
            0 => Kind::End,
            b'"' => return self.string_token(),
            b'-' | b'0'..=b'9' => {
                if !self.cfg.decode_invalid_numbers && self.is_invalid_number() {
                    Kind::Error("invalid number")
                } else {
                    return self.number_token();
                }
            }
            b't' if self.data[self.pos..].starts_with(b"true") => self.word(4, Kind::Bool(true)),
            b'f' if self.data[self.pos..].starts_with(b"false") => self.word(5, Kind::Bool(false)),
            b'n' if self.data[self.pos..].starts_with(b"null") => self.word(4, Kind::Null),
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'+'
                if self.cfg.decode_invalid_numbers && self.is_invalid_number() =>
            {
                return self.number_token();
            }
            _ => Kind::Error("invalid token"),
        };
        Token {
            kind,
            index: self.pos.max(index),
        }
    }

    /// Consumes a keyword of `len` bytes.
    fn word(&mut self, len: usize, kind: Kind) -> Kind {
        self.pos += len;
        kind
    }

    /// `json_is_invalid_number`: forms `strtod` accepts but JSON does not.
    fn is_invalid_number(&self) -> bool {
        let mut p = self.pos;
        match self.at(p) {
            b'+' => return true,
            b'-' => p += 1,
            _ => {}
        }
        let c = self.at(p);
        if c == b'0' {
            let c2 = self.at(p + 1);
            return (c2 | 0x20) == b'x' || c2.is_ascii_digit();
        }
        if c <= b'9' {
            return false;
        }
        let word: Vec<u8> = (0..3)
            .map(|i| self.at(p + i).to_ascii_lowercase())
            .collect();
        word == b"inf" || word == b"nan"
    }

    /// A number token via `strtod`.
    fn number_token(&mut self) -> Token {
        let index = self.pos;
        let end = self.data[self.pos..]
            .iter()
            .position(|&c| c == 0)
            .map_or(self.data.len(), |n| self.pos + n);
        match strtod_prefix(&self.data[self.pos..end]) {
            Some((n, len)) => {
                self.pos += len;
                Token {
                    kind: Kind::Num(n),
                    index,
                }
            }
            None => Token {
                kind: Kind::Error("invalid number"),
                index,
            },
        }
    }

    /// A string token into `scratch`.
    fn string_token(&mut self) -> Token {
        let index = self.pos;
        self.pos += 1;
        self.scratch.clear();
        loop {
            let c = self.at(self.pos);
            match c {
                b'"' => break,
                0 => return self.lex_error("unexpected end of string"),
                b'\\' => {
                    let e = self.at(self.pos + 1);
                    let plain = match e {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 8,
                        b't' => b'\t',
                        b'n' => b'\n',
                        b'f' => 12,
                        b'r' => b'\r',
                        b'u' => {
                            if self.unicode_escape().is_none() {
                                return self.lex_error("invalid unicode escape code");
                            }
                            continue;
                        }
                        _ => return self.lex_error("invalid escape code"),
                    };
                    self.scratch.push(plain);
                    self.pos += 2;
                }
                _ => {
                    self.scratch.push(c);
                    self.pos += 1;
                }
            }
        }
        self.pos += 1;
        Token {
            kind: Kind::Str,
            index,
        }
    }

    /// An error token at the current position.
    fn lex_error(&self, what: &'static str) -> Token {
        Token {
            kind: Kind::Error(what),
            index: self.pos,
        }
    }

    /// Four hex digits at `at`.
    fn hex4(&self, at: usize) -> Option<u32> {
        (0..4).try_fold(0u32, |acc, i| {
            Some(acc * 16 + (self.at(at + i) as char).to_digit(16)?)
        })
    }

    /// `\uXXXX` (with a following low surrogate for a high one) as UTF-8.
    fn unicode_escape(&mut self) -> Option<()> {
        let mut cp = self.hex4(self.pos + 2)?;
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 || self.at(self.pos + 6) != b'\\' || self.at(self.pos + 7) != b'u' {
                return None;
            }
            let low = self.hex4(self.pos + 8)?;
            if low & 0xFC00 != 0xDC00 {
                return None;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        push_utf8(&mut self.scratch, cp);
        self.pos += len;
        Some(())
    }

    /// `json_decode_descend`.
    fn descend(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth <= self.cfg.decode_max_depth.min(STACK_NESTING_LIMIT) {
            return Ok(());
        }
        let msg = format!(
            "Found too many nested data structures ({}) at character {}",
            self.depth, self.pos
        );
        Err(luaerr::lua_error(self.lua, msg))
    }

    /// `json_process_value`.
    fn value(&mut self, token: Token) -> Result<Value> {
        Ok(match token.kind {
            Kind::Str => Value::String(self.lua.create_string(&self.scratch)?),
            Kind::Num(n) => Value::Number(n),
            Kind::Bool(b) => Value::Boolean(b),
            Kind::Null => null(),
            Kind::ObjBegin => Value::Table(self.object()?),
            Kind::ArrBegin => Value::Table(self.array()?),
            _ => return Err(self.parse_error("value", token)),
        })
    }

    /// An object after `{`.
    fn object(&mut self) -> Result<Table> {
        self.descend()?;
        let t = self.lua.create_table()?;
        let mut token = self.next_token();
        if token.kind == Kind::ObjEnd {
            self.depth -= 1;
            return Ok(t);
        }
        loop {
            if token.kind != Kind::Str {
                return Err(self.parse_error("object key string", token));
            }
            let key = self.lua.create_string(&self.scratch)?;
            token = self.next_token();
            if token.kind != Kind::Colon {
                return Err(self.parse_error("colon", token));
            }
            token = self.next_token();
            let value = self.value(token)?;
            t.raw_set(key, value)?;
            token = self.next_token();
            match token.kind {
                Kind::ObjEnd => {
                    self.depth -= 1;
                    return Ok(t);
                }
                Kind::Comma => token = self.next_token(),
                _ => return Err(self.parse_error("comma or object end", token)),
            }
        }
    }

    /// An array after `[`.
    fn array(&mut self) -> Result<Table> {
        self.descend()?;
        let t = self.lua.create_table()?;
        let mut token = self.next_token();
        if token.kind == Kind::ArrEnd {
            self.depth -= 1;
            return Ok(t);
        }
        for i in 1.. {
            let value = self.value(token)?;
            t.raw_set(i, value)?;
            token = self.next_token();
            match token.kind {
                Kind::ArrEnd => break,
                Kind::Comma => token = self.next_token(),
                _ => return Err(self.parse_error("comma or array end", token)),
            }
        }
        self.depth -= 1;
        Ok(t)
    }
}

/// CJSON's `codepoint_to_utf8` (surrogate code points included).
fn push_utf8(out: &mut Vec<u8>, cp: u32) {
    if cp <= 0x7F {
        out.push(cp as u8);
    } else if cp <= 0x7FF {
        out.extend_from_slice(&[(cp >> 6) as u8 | 0xC0, (cp & 0x3F) as u8 | 0x80]);
    } else if cp <= 0xFFFF {
        out.extend_from_slice(&[
            (cp >> 12) as u8 | 0xE0,
            ((cp >> 6) & 0x3F) as u8 | 0x80,
            (cp & 0x3F) as u8 | 0x80,
        ]);
    } else {
        out.extend_from_slice(&[
            (cp >> 18) as u8 | 0xF0,
            ((cp >> 12) & 0x3F) as u8 | 0x80,
            ((cp >> 6) & 0x3F) as u8 | 0x80,
            (cp & 0x3F) as u8 | 0x80,
        ]);
    }
}
