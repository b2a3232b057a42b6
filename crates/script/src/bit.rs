//! `bit`: LuaBitOp 1.0 (the library Redis bundles), 32-bit operations on
//! Lua numbers. Arguments are normalized as LuaBitOp does (adding 2^52+2^51
//! and taking the low 32 bits, so any number maps to its value modulo 2^32)
//! and results are signed 32-bit numbers.

use crate::luaerr;
use mlua::{Lua, Result, Table, Value, Variadic};

/// `barg`: argument `narg` as 32 bits; non-numbers raise `number expected`.
fn barg(lua: &Lua, args: &[Value], narg: usize) -> Result<u32> {
    let v = args.get(narg - 1);
    match luaerr::to_number(lua, v) {
        Some(n) => Ok((n + 6_755_399_441_055_744.0).to_bits() as u32),
        None => Err(luaerr::type_error(lua, narg, "number", v)),
    }
}

/// A result: the bits as a signed 32-bit number.
fn ret(b: u32) -> f64 {
    f64::from(b as i32)
}

/// Folds every argument with `op` (band, bor, bxor).
fn fold(lua: &Lua, args: &[Value], op: fn(u32, u32) -> u32) -> Result<f64> {
    let mut b = barg(lua, args, 1)?;
    for i in (2..=args.len()).rev() {
        b = op(b, barg(lua, args, i)?);
    }
    Ok(ret(b))
}

/// A shift or rotation: `op(bits, count & 31)`.
fn shift(lua: &Lua, args: &[Value], op: fn(u32, u32) -> u32) -> Result<f64> {
    let b = barg(lua, args, 1)?;
    let n = barg(lua, args, 2)? & 31;
    Ok(ret(op(b, n)))
}

/// `bit.tohex(x [, n])`: `n` hex digits (default 8, negative for upper case).
fn tohex(lua: &Lua, args: &[Value]) -> Result<Vec<u8>> {
    let mut b = barg(lua, args, 1)?;
    let mut n = if args.len() < 2 {
        8
    } else {
        barg(lua, args, 2)? as i32
    };
    let digits: &[u8] = if n < 0 {
        // i32::MIN has no positive counterpart; it means 8 upper-case digits.
        n = n.saturating_neg();
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let n = n.min(8) as usize;
    let mut out = vec![0u8; n];
    for slot in out.iter_mut().rev() {
        *slot = digits[(b & 15) as usize];
        b >>= 4;
    }
    Ok(out)
}

/// The `bit` table.
pub(crate) fn open(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    macro_rules! f {
        ($name:literal, $body:expr) => {
            t.raw_set($name, lua.create_function($body)?)?;
        };
    }
    f!("tobit", |lua, a: Variadic<Value>| Ok(ret(barg(
        lua, &a, 1
    )?)));
    f!("bnot", |lua, a: Variadic<Value>| Ok(ret(!barg(
        lua, &a, 1
    )?)));
    f!("band", |lua, a: Variadic<Value>| fold(lua, &a, |x, y| x
        & y));
    f!("bor", |lua, a: Variadic<Value>| fold(lua, &a, |x, y| x | y));
    f!("bxor", |lua, a: Variadic<Value>| fold(lua, &a, |x, y| x
        ^ y));
    f!("lshift", |lua, a: Variadic<Value>| shift(
        lua,
        &a,
        |b, n| b << n
    ));
    f!("rshift", |lua, a: Variadic<Value>| shift(
        lua,
        &a,
        |b, n| b >> n
    ));
    f!("arshift", |lua, a: Variadic<Value>| shift(
        lua,
        &a,
        |b, n| ((b as i32) >> n) as u32
    ));
    f!("rol", |lua, a: Variadic<Value>| shift(
        lua,
        &a,
        u32::rotate_left
    ));
    f!("ror", |lua, a: Variadic<Value>| shift(
        lua,
        &a,
        u32::rotate_right
    ));
    f!("bswap", |lua, a: Variadic<Value>| Ok(ret(barg(
        lua, &a, 1
    )?
    .swap_bytes())));
    f!("tohex", |lua, a: Variadic<Value>| lua
        .create_string(tohex(lua, &a)?));
    Ok(t)
}
