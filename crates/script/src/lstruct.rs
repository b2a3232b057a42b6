//! `struct`: Roberto Ierusalimschy's struct library (the version Redis
//! bundles): `struct.pack(fmt, ...)`, `struct.unpack(fmt, data [, pos])`,
//! `struct.size(fmt)`, for a little-endian 64-bit host as Redis runs on.
//!
//! Formats: `>`/`<` endianness, `!n` alignment, `x` pad byte, `b/B h/H l/L
//! T i/In I/In` integers (`n` up to 32 bytes), `f`/`d` floats, `cn`/`c0`
//! fixed/preceding-size strings, `s` zero-terminated strings, spaces
//! ignored. The C library's integer quirks are kept: integers wider than 8
//! bytes keep only their last 8 bytes on unpack and are zero-filled on pack.

use crate::luaerr;
use mlua::{Lua, MultiValue, Result, Table, Value, Variadic};

/// Widest integer format (`i32`).
const MAX_INT_SIZE: i64 = 32;
/// Default `!` alignment (the host's maximum alignment).
const MAX_ALIGN: i64 = 8;
/// Results `unpack` may return before Lua's stack limit stops it.
const MAX_RESULTS: usize = 7990;

/// Endianness and alignment state while walking a format.
struct Header {
    /// Little-endian output/input.
    little: bool,
    /// Maximum alignment.
    align: i64,
}

impl Header {
    /// Native defaults: little-endian, no alignment.
    fn new() -> Header {
        Header {
            little: true,
            align: 1,
        }
    }
}

/// A format string being read (a C string: it ends at the first NUL).
struct Format<'a> {
    /// The format bytes.
    bytes: &'a [u8],
    /// Next unread byte.
    pos: usize,
}

impl Format<'_> {
    /// The next option byte, if any.
    fn next(&mut self) -> Option<u8> {
        let c = *self.bytes.get(self.pos).filter(|&&c| c != 0)?;
        self.pos += 1;
        Some(c)
    }

    /// `getnum`: a decimal count after an option, or `default`.
    fn number(&mut self, lua: &Lua, default: i64) -> Result<i64> {
        if !self.bytes.get(self.pos).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut a: i64 = 0;
        while let Some(d) = self.bytes.get(self.pos).filter(|c| c.is_ascii_digit()) {
            let d = i64::from(d - b'0');
            if a > i64::from(i32::MAX) / 10 || a * 10 > i64::from(i32::MAX) - d {
                return Err(luaerr::lua_error(lua, "integral size overflow"));
            }
            a = a * 10 + d;
            self.pos += 1;
        }
        Ok(a)
    }

    /// `optsize`: the size of option `opt` (reading its count).
    fn size(&mut self, lua: &Lua, opt: u8) -> Result<i64> {
        Ok(match opt {
            b'B' | b'b' | b'x' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'c' => self.number(lua, 1)?,
            b'i' | b'I' => {
                let sz = self.number(lua, 4)?;
                if sz > MAX_INT_SIZE {
                    return Err(luaerr::lua_error(
                        lua,
                        format!("integral size {sz} is larger than limit of {MAX_INT_SIZE}"),
                    ));
                }
                sz
            }
            _ => 0,
        })
    }

    /// `controloptions`: endianness, alignment and spaces; anything else
    /// is an invalid option.
    fn control(&mut self, lua: &Lua, opt: u8, h: &mut Header) -> Result<()> {
        match opt {
            b' ' => {}
            b'>' => h.little = false,
            b'<' => h.little = true,
            b'!' => {
                let a = self.number(lua, MAX_ALIGN)?;
                if a <= 0 || a & (a - 1) != 0 {
                    return Err(luaerr::lua_error(
                        lua,
                        format!("alignment {a} is not a power of 2"),
                    ));
                }
                h.align = a;
            }
            _ => {
                let msg = format!("invalid format option '{}'", opt as char);
                return Err(luaerr::arg_error(lua, 1, &msg));
            }
        }
        Ok(())
    }
}

/// `gettoalign`: padding before an item of `size` at offset `len`.
fn padding(len: u64, h: &Header, opt: u8, size: i64) -> u64 {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align) as u64;
    size.wrapping_sub(len & size.wrapping_sub(1)) & size.wrapping_sub(1)
}

/// `struct.pack(fmt, ...)`.
fn pack(lua: &Lua, args: &[Value]) -> Result<mlua::String> {
    let fmt_bytes = luaerr::check_bytes(lua, args, 1)?;
    let mut fmt = Format {
        bytes: &fmt_bytes,
        pos: 0,
    };
    let mut h = Header::new();
    let mut out: Vec<u8> = Vec::new();
    let mut arg = 2;
    while let Some(opt) = fmt.next() {
        let mut size = fmt.size(lua, opt)?;
        let pad = padding(out.len() as u64, &h, opt, size);
        out.resize(out.len() + pad as usize, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = luaerr::check_number(lua, args, arg)?;
                arg += 1;
                put_integer(&mut out, n, h.little, size as usize);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = luaerr::check_number(lua, args, arg)? as f32;
                arg += 1;
                put_bytes(&mut out, &f.to_le_bytes(), h.little);
            }
            b'd' => {
                let d = luaerr::check_number(lua, args, arg)?;
                arg += 1;
                put_bytes(&mut out, &d.to_le_bytes(), h.little);
            }
            b'c' | b's' => {
                let s = luaerr::check_bytes(lua, args, arg)?;
                arg += 1;
                if size == 0 {
                    size = s.len() as i64;
                }
                if (s.len() as i64) < size {
                    return Err(luaerr::arg_error(lua, arg, "string too short"));
                }
                out.extend_from_slice(&s[..size as usize]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => fmt.control(lua, opt, &mut h)?,
        }
    }
    lua.create_string(out)
}

/// Appends the low `size` bytes of `n` as C's `(unsigned long)` conversion.
fn put_integer(out: &mut Vec<u8>, n: f64, little: bool, size: usize) {
    let value: u64 = if n < 0.0 {
        luaerr::c_double_to_i64(n) as u64
    } else {
        n as u64
    };
    let bytes: Vec<u8> = (0..size)
        .map(|i| if i < 8 { (value >> (8 * i)) as u8 } else { 0 })
        .collect();
    if little {
        out.extend_from_slice(&bytes);
    } else {
        out.extend(bytes.iter().rev());
    }
}

/// Appends little-endian `bytes`, reversed for big-endian.
fn put_bytes(out: &mut Vec<u8>, bytes: &[u8], little: bool) {
    if little {
        out.extend_from_slice(bytes);
    } else {
        out.extend(bytes.iter().rev());
    }
}

/// `getinteger`: `size` bytes as an integer (only the last 8 bytes read
/// survive, as in the C code), sign-extended for signed formats.
fn get_integer(bytes: &[u8], little: bool, signed: bool) -> f64 {
    let mut l: u64 = 0;
    let mut push = |b: u8| l = (l << 8) | u64::from(b);
    if little {
        bytes.iter().rev().for_each(|&b| push(b));
    } else {
        bytes.iter().for_each(|&b| push(b));
    }
    if !signed {
        return l as f64;
    }
    let shift = ((bytes.len() as u32).wrapping_mul(8).wrapping_sub(1)) & 63;
    let mask = u64::MAX << shift;
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

/// `struct.unpack(fmt, data [, pos])`.
fn unpack(lua: &Lua, args: &[Value]) -> Result<MultiValue> {
    let fmt_bytes = luaerr::check_bytes(lua, args, 1)?;
    let data = luaerr::check_bytes(lua, args, 2)?;
    let start = luaerr::opt_integer(lua, args, 3, 1)? as u64;
    if start == 0 {
        return Err(luaerr::arg_error(lua, 3, "offset must be 1 or greater"));
    }
    let ld = data.len() as u64;
    let mut pos = start - 1;
    let mut fmt = Format {
        bytes: &fmt_bytes,
        pos: 0,
    };
    let mut h = Header::new();
    let mut results: Vec<Value> = Vec::new();
    let too_short = |lua: &Lua| luaerr::arg_error(lua, 2, "data string too short");
    while let Some(opt) = fmt.next() {
        let mut size = fmt.size(lua, opt)? as u64;
        pos = pos.wrapping_add(padding(pos, &h, opt, size as i64));
        if size > ld || pos > ld - size {
            return Err(too_short(lua));
        }
        if results.len() >= MAX_RESULTS {
            return Err(luaerr::lua_error(lua, "stack overflow (too many results)"));
        }
        let at = pos as usize;
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let bytes = &data[at..at + size as usize];
                results.push(Value::Number(get_integer(
                    bytes,
                    h.little,
                    opt.is_ascii_lowercase(),
                )));
            }
            b'x' => {}
            b'f' => {
                let mut b: [u8; 4] = data[at..at + 4].try_into().unwrap_or_default();
                if !h.little {
                    b.reverse();
                }
                results.push(Value::Number(f64::from(f32::from_le_bytes(b))));
            }
            b'd' => {
                let mut b: [u8; 8] = data[at..at + 8].try_into().unwrap_or_default();
                if !h.little {
                    b.reverse();
                }
                results.push(Value::Number(f64::from_le_bytes(b)));
            }
            b'c' => {
                if size == 0 {
                    let prev = results.pop().and_then(|v| luaerr::to_number(lua, Some(&v)));
                    let Some(prev) = prev else {
                        return Err(luaerr::lua_error(lua, "format 'c0' needs a previous size"));
                    };
                    size = if prev < 0.0 {
                        luaerr::c_double_to_i64(prev) as u64
                    } else {
                        prev as u64
                    };
                    if size > ld || pos > ld - size {
                        return Err(too_short(lua));
                    }
                }
                results.push(Value::String(
                    lua.create_string(&data[at..at + size as usize])?,
                ));
            }
            b's' => {
                let Some(len) = data[at..].iter().position(|&c| c == 0) else {
                    return Err(luaerr::lua_error(lua, "unfinished string in data"));
                };
                size = len as u64 + 1;
                results.push(Value::String(lua.create_string(&data[at..at + len])?));
            }
            _ => fmt.control(lua, opt, &mut h)?,
        }
        pos = pos.wrapping_add(size);
    }
    results.push(Value::Number(pos.wrapping_add(1) as i64 as f64));
    Ok(MultiValue::from_iter(results))
}

/// `struct.size(fmt)`.
fn size(lua: &Lua, args: &[Value]) -> Result<f64> {
    let fmt_bytes = luaerr::check_bytes(lua, args, 1)?;
    let mut fmt = Format {
        bytes: &fmt_bytes,
        pos: 0,
    };
    let mut h = Header::new();
    let mut pos: u64 = 0;
    while let Some(opt) = fmt.next() {
        let size = fmt.size(lua, opt)?;
        pos = pos.wrapping_add(padding(pos, &h, opt, size));
        if opt == b's' {
            return Err(luaerr::arg_error(lua, 1, "option 's' has no fixed size"));
        }
        if opt == b'c' && size == 0 {
            return Err(luaerr::arg_error(lua, 1, "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            fmt.control(lua, opt, &mut h)?;
        }
        pos = pos.wrapping_add(size as u64);
    }
    Ok(pos as i64 as f64)
}

/// The `struct` table.
pub(crate) fn open(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, a: Variadic<Value>| pack(lua, &a))?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, a: Variadic<Value>| unpack(lua, &a))?,
    )?;
    t.raw_set(
        "size",
        lua.create_function(|lua, a: Variadic<Value>| size(lua, &a))?,
    )?;
    Ok(t)
}
