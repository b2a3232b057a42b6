//! HyperLogLog values in Redis 7.0's exact byte format, so a value written
//! by PFADD in Vireo reads back in Redis (GET/SET, DUMP/RESTORE, RDB) and
//! the other way round.
//!
//! # Format
//!
//! An HLL is an ordinary string: a 16-byte header (`HYLL`, one encoding
//! byte, three zero bytes, then the cached cardinality as a little-endian
//! u64 whose top bit set means "stale"), followed by the registers:
//!
//! * dense: 16384 registers of 6 bits packed least significant bit first
//!   (12288 bytes, so a dense value is exactly [`DENSE_LEN`] bytes);
//! * sparse: a run-length code of one-byte `ZERO` (`00xxxxxx`, 1..64 zero
//!   registers), two-byte `XZERO` (`01xxxxxx xxxxxxxx`, 1..16384 zero
//!   registers) and one-byte `VAL` (`1vvvvvxx`, 1..4 registers of value
//!   1..32) opcodes. A new HLL is sparse; it turns dense when a register
//!   needs a value above 32 or the string would grow past
//!   `hll-sparse-max-bytes`.
//!
//! Elements are hashed with MurmurHash64A (Redis's endian-neutral variant,
//! seed `0xadc83b19`): the low 14 bits pick the register, and the run of
//! zeros above them (plus one) is the value the register keeps the maximum
//! of. The cardinality is Ertl's improved estimator ("New cardinality
//! estimation algorithms for HyperLogLog sketches"), which Redis 7.0 uses,
//! computed from the histogram of register values.
//!
//! # Untrusted input
//!
//! Users can SET any bytes and then use them as an HLL, so every reader
//! walks sparse opcodes with bounds checks. Redis reads one byte past a
//! truncated `XZERO` opcode (its strings end in a zero byte); the readers
//! here see a zero there too, so Redis's answers, corruption errors
//! included, are reproduced without reading out of bounds. Walks stop at
//! the first run that passes register 16383 (the result is corrupt
//! whatever follows), which bounds the work for hostile values.
//!
//! # Use from commands
//!
//! Every entry point validates its input like Redis's `isHLLObjectOrReply`
//! and reports [`HllError`], whose [`HllError::message`] is the exact
//! error reply. Mutating operations edit the stored bytes in place, as
//! Redis does; when one fails half-way the bytes may already be changed
//! and Redis keeps them so, which callers reproduce by keeping the value.

use std::fmt;

use smallvec::{smallvec, SmallVec};

/// The opcodes replacing one when a register changes (at most five bytes:
/// XZERO, VAL, XZERO).
type OpSeq = SmallVec<[u8; 5]>;

/// Length of the header before the registers.
pub const HEADER_LEN: usize = 16;
/// Number of registers (2^14).
pub const REGISTERS: usize = 1 << P;
/// Length of a dense HLL string: header plus 16384 six-bit registers.
pub const DENSE_LEN: usize = HEADER_LEN + (REGISTERS * REGISTER_BITS).div_ceil(8);
/// The default of `hll-sparse-max-bytes`.
pub const DEFAULT_SPARSE_MAX_BYTES: usize = 3000;

/// Bits of the hash that select the register.
const P: u32 = 14;
/// Bits of the hash left for the run of zeros.
const Q: u32 = 64 - P;
/// Width of a dense register.
const REGISTER_BITS: usize = 6;
/// Largest value a dense register holds.
const REGISTER_MAX: u8 = (1 << REGISTER_BITS) - 1;
/// The value of `hllhdr.magic`.
const MAGIC: &[u8; 4] = b"HYLL";
/// Encoding byte of a dense HLL.
const ENCODING_DENSE: u8 = 0;
/// Encoding byte of a sparse HLL.
const ENCODING_SPARSE: u8 = 1;
/// The seed Redis hashes elements with.
const HASH_SEED: u64 = 0xadc8_3b19;
/// Offset of the cached cardinality in the header.
const CARD_OFFSET: usize = 8;
/// Bit of the last cardinality byte that marks the cache stale.
const CARD_STALE_BIT: u8 = 0x80;

/// Largest value a sparse `VAL` opcode holds.
const SPARSE_VAL_MAX_VALUE: u8 = 32;
/// Longest run a sparse `VAL` opcode covers.
const SPARSE_VAL_MAX_LEN: usize = 4;
/// Longest run a sparse `ZERO` opcode covers.
const SPARSE_ZERO_MAX_LEN: usize = 64;
/// `alpha_inf` of the estimator, 0.5 / ln(2).
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// The two encodings a stored HLL can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// 16384 packed six-bit registers.
    Dense,
    /// Run-length coded registers (small cardinalities).
    Sparse,
}

impl Encoding {
    /// The name PFDEBUG ENCODING replies with (a status reply).
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Dense => "dense",
            Encoding::Sparse => "sparse",
        }
    }
}

/// Why an HLL operation was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HllError {
    /// The string is not an HLL (too short, wrong magic, unknown encoding,
    /// dense of the wrong length): Redis's `isHLLObjectOrReply` check.
    NotHll,
    /// The sparse registers do not cover exactly 16384 registers.
    Corrupt,
    /// PFDEBUG DECODE of a dense HLL.
    NotSparse,
}

impl HllError {
    /// The error reply, as Redis words it (without the leading `-`).
    pub fn message(&self) -> &'static str {
        match self {
            HllError::NotHll => "WRONGTYPE Key is not a valid HyperLogLog string value.",
            HllError::Corrupt => "INVALIDOBJ Corrupted HLL object detected",
            HllError::NotSparse => "ERR HLL encoding is not sparse",
        }
    }
}

impl fmt::Display for HllError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for HllError {}

/// MurmurHash2, 64-bit version A, reading the input as little-endian
/// words whatever the machine (Redis's endian-neutral variant).
pub fn murmur_hash64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let mut k = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element updates and the value it offers (the length of
/// the `0...01` pattern above the index bits, 1..=51).
pub fn register_and_value(element: &[u8]) -> (usize, u8) {
    let hash = murmur_hash64a(element, HASH_SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    // The sentinel bit keeps the count at most Q + 1.
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Checks that `value` is an HLL as Redis's `isHLLObjectOrReply` does and
/// returns its encoding (the sparse opcodes are checked only when used).
pub fn validate(value: &[u8]) -> Result<Encoding, HllError> {
    if value.len() < HEADER_LEN || &value[..4] != MAGIC {
        return Err(HllError::NotHll);
    }
    match value[4] {
        ENCODING_DENSE if value.len() == DENSE_LEN => Ok(Encoding::Dense),
        ENCODING_SPARSE => Ok(Encoding::Sparse),
        _ => Err(HllError::NotHll),
    }
}

/// A new, empty HLL, as PFADD and PFMERGE create it for a missing key:
/// sparse, one `XZERO` covering every register, cached cardinality 0.
pub fn new_hll() -> Vec<u8> {
    let mut v = Vec::with_capacity(HEADER_LEN + 2);
    v.extend_from_slice(MAGIC);
    v.push(ENCODING_SPARSE);
    v.resize(HEADER_LEN, 0);
    push_xzero(&mut v, REGISTERS);
    v
}

/// PFADD on an existing string value: adds `elements` and reports whether
/// any register changed (PFADD's reply 1, which also marks the cached
/// cardinality stale). Sparse values turn dense when they would exceed
/// `sparse_max_bytes` (`hll-sparse-max-bytes`).
///
/// On [`HllError::Corrupt`] the elements before the failing one stay added
/// and the cache is left as it was, as in Redis.
pub fn pfadd<'a>(
    hll: &mut Vec<u8>,
    elements: impl IntoIterator<Item = &'a [u8]>,
    sparse_max_bytes: usize,
) -> Result<bool, HllError> {
    validate(hll)?;
    let changed = add_elements(hll, elements, sparse_max_bytes)?;
    if changed {
        mark_cache_stale(hll);
    }
    Ok(changed)
}

/// PFADD on a missing key: the new value to store (PFADD replies 1). Its
/// cached cardinality is marked stale, as Redis leaves it.
pub fn pfadd_new<'a>(
    elements: impl IntoIterator<Item = &'a [u8]>,
    sparse_max_bytes: usize,
) -> Vec<u8> {
    let mut hll = new_hll();
    // A fresh HLL is well formed, so no element can fail to add; should one
    // ever, the elements added so far are kept, as for an existing key.
    let _ = add_elements(&mut hll, elements, sparse_max_bytes);
    mark_cache_stale(&mut hll);
    hll
}

/// Adds elements to a validated HLL; true when a register changed.
fn add_elements<'a>(
    hll: &mut Vec<u8>,
    elements: impl IntoIterator<Item = &'a [u8]>,
    sparse_max_bytes: usize,
) -> Result<bool, HllError> {
    let mut changed = false;
    for e in elements {
        let (index, value) = register_and_value(e);
        changed |= set_register(hll, index, value, sparse_max_bytes)?;
    }
    Ok(changed)
}

/// Raises register `index` to `value` in either encoding; true if it grew.
fn set_register(
    hll: &mut Vec<u8>,
    index: usize,
    value: u8,
    sparse_max_bytes: usize,
) -> Result<bool, HllError> {
    if hll[4] == ENCODING_DENSE {
        Ok(dense_raise(&mut hll[HEADER_LEN..], index, value))
    } else {
        sparse_raise(hll, index, value, sparse_max_bytes)
    }
}

/// What PFCOUNT of one key computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Count {
    /// The estimated cardinality (PFCOUNT's reply).
    pub cardinality: u64,
    /// True when the cached cardinality was stale and has been rewritten:
    /// the value changed, so the server signals the key as modified and
    /// counts a dirty change (Redis propagates it).
    pub cache_updated: bool,
}

/// PFCOUNT of one key: the cached cardinality if it is current, otherwise
/// the estimate, which is then cached in the header.
pub fn count(hll: &mut [u8]) -> Result<Count, HllError> {
    validate(hll)?;
    if hll[HEADER_LEN - 1] & CARD_STALE_BIT == 0 {
        let card = u64::from_le_bytes(cached_card_bytes(hll));
        return Ok(Count {
            cardinality: card,
            cache_updated: false,
        });
    }
    let cardinality = estimate(&histogram(hll)?);
    hll[CARD_OFFSET..HEADER_LEN].copy_from_slice(&cardinality.to_le_bytes());
    Ok(Count {
        cardinality,
        cache_updated: true,
    })
}

/// The eight cached-cardinality bytes of a header.
fn cached_card_bytes(hll: &[u8]) -> [u8; 8] {
    let mut b = [0u8; 8];
    b.copy_from_slice(&hll[CARD_OFFSET..HEADER_LEN]);
    b
}

/// Marks the cached cardinality stale (Redis's `HLL_INVALIDATE_CACHE`).
fn mark_cache_stale(hll: &mut [u8]) {
    hll[HEADER_LEN - 1] |= CARD_STALE_BIT;
}

/// The estimate of an HLL computed from its registers, ignoring the cache
/// (what PFCOUNT would compute; used by tests and PFSELFTEST).
pub fn estimate_cardinality(hll: &[u8]) -> Result<u64, HllError> {
    validate(hll)?;
    Ok(estimate(&histogram(hll)?))
}

/// Counts of registers per value (values reach 63 in dense HLLs).
type Histogram = [u32; 64];

/// The register histogram of a validated HLL.
fn histogram(hll: &[u8]) -> Result<Histogram, HllError> {
    let mut h = [0u32; 64];
    let regs = &hll[HEADER_LEN..];
    if hll[4] == ENCODING_DENSE {
        dense_histogram(regs, &mut h);
    } else {
        walk_sparse(regs, |_, len, value| h[usize::from(value)] += len as u32)?;
    }
    Ok(h)
}

/// The four six-bit registers packed in three bytes (least significant
/// bits first): dense registers come in such groups, which whole-HLL
/// walks decode at once rather than register by register.
fn dense_group(c: &[u8]) -> [u8; 4] {
    let (b0, b1, b2) = (c[0], c[1], c[2]);
    [
        b0 & 63,
        (b0 >> 6 | b1 << 2) & 63,
        (b1 >> 4 | b2 << 4) & 63,
        b2 >> 2,
    ]
}

/// Histogram of packed registers, four registers per three bytes.
fn dense_histogram(regs: &[u8], h: &mut Histogram) {
    for c in regs.chunks_exact(3) {
        for r in dense_group(c) {
            h[usize::from(r)] += 1;
        }
    }
}

/// Ertl's estimator over a register histogram, as Redis 7.0's `hllCount`
/// computes it, operation for operation (the result is rounded, so the
/// floating-point order matters near halves).
fn estimate(h: &Histogram) -> u64 {
    let m = REGISTERS as f64;
    let q = Q as usize;
    let mut z = m * tau((m - f64::from(h[q + 1])) / m);
    for j in (1..=q).rev() {
        z += f64::from(h[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(h[0]) / m);
    // llroundl: halves round away from zero; the cast saturates.
    (ALPHA_INF * m * m / z).round() as u64
}

/// Ertl's sigma function, iterated until it stops changing.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

/// Ertl's tau function, iterated until it stops changing.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        let d = 1.0 - x;
        // Redis writes pow(1 - x, 2), which compilers turn into d * d.
        z -= d * d * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

/// The union of several HLLs, register by register (the maximum of each):
/// PFCOUNT of several keys estimates its cardinality, PFMERGE stores it.
#[derive(Clone)]
pub struct Union {
    /// One byte per register (Redis's internal `HLL_RAW` encoding).
    max: Box<[u8; REGISTERS]>,
    /// Whether a dense HLL was merged: PFMERGE then stores densely.
    any_dense: bool,
}

impl Default for Union {
    fn default() -> Self {
        Self::new()
    }
}

impl Union {
    /// An empty union (what missing keys contribute).
    pub fn new() -> Self {
        Union {
            max: Box::new([0; REGISTERS]),
            any_dense: false,
        }
    }

    /// Adds an HLL's registers to the union (validating it first).
    pub fn merge(&mut self, hll: &[u8]) -> Result<(), HllError> {
        let regs = &hll[HEADER_LEN.min(hll.len())..];
        match validate(hll)? {
            Encoding::Dense => {
                self.any_dense = true;
                for (c, m) in regs.chunks_exact(3).zip(self.max.chunks_exact_mut(4)) {
                    for (m, r) in m.iter_mut().zip(dense_group(c)) {
                        *m = (*m).max(r);
                    }
                }
            }
            Encoding::Sparse => walk_sparse(regs, |first, len, value| {
                for m in &mut self.max[first..first + len] {
                    *m = (*m).max(value);
                }
            })?,
        }
        Ok(())
    }

    /// The estimated cardinality of the union (multi-key PFCOUNT's reply).
    pub fn cardinality(&self) -> u64 {
        let mut h = [0u32; 64];
        for &r in self.max.iter() {
            h[usize::from(r & REGISTER_MAX)] += 1;
        }
        estimate(&h)
    }

    /// PFMERGE's write: raises `dest`'s registers to the union's and marks
    /// its cache stale. `dest` is the destination's current value (which
    /// PFMERGE also merged as its first source) or [`new_hll`] for a missing
    /// key; it turns dense if any merged HLL was dense, or if the sparse
    /// form outgrows `sparse_max_bytes`.
    pub fn store_into(&self, dest: &mut Vec<u8>, sparse_max_bytes: usize) -> Result<(), HllError> {
        validate(dest)?;
        if self.any_dense {
            to_dense(dest)?;
        }
        for (index, &value) in self.max.iter().enumerate() {
            if value != 0 {
                set_register(dest, index, value, sparse_max_bytes)?;
            }
        }
        mark_cache_stale(dest);
        Ok(())
    }
}

/// Converts a sparse HLL to dense in place (PFDEBUG TODENSE, and GETREG
/// before reading): true if it was sparse. The header, cached cardinality
/// included, is kept.
pub fn to_dense(hll: &mut Vec<u8>) -> Result<bool, HllError> {
    if validate(hll)? == Encoding::Dense {
        return Ok(false);
    }
    let mut dense = vec![0u8; DENSE_LEN];
    dense[..HEADER_LEN].copy_from_slice(&hll[..HEADER_LEN]);
    dense[4] = ENCODING_DENSE;
    walk_sparse(&hll[HEADER_LEN..], |first, len, value| {
        for i in first..first + len {
            dense_set(&mut dense[HEADER_LEN..], i, value);
        }
    })?;
    *hll = dense;
    Ok(true)
}

/// The 16384 register values (PFDEBUG GETREG's reply, after [`to_dense`]).
pub fn register_values(hll: &[u8]) -> Result<Vec<u8>, HllError> {
    let regs = &hll[HEADER_LEN.min(hll.len())..];
    match validate(hll)? {
        Encoding::Dense => Ok((0..REGISTERS).map(|i| dense_get(regs, i)).collect()),
        Encoding::Sparse => {
            let mut out = vec![0u8; REGISTERS];
            walk_sparse(regs, |first, len, value| {
                out[first..first + len].fill(value)
            })?;
            Ok(out)
        }
    }
}

/// PFDEBUG DECODE: the sparse opcodes as text (`Z:` XZERO, `z:` ZERO and
/// `v:value,len` VAL, space separated), without checking that they cover
/// 16384 registers, as Redis prints them.
pub fn decode_sparse(hll: &[u8]) -> Result<String, HllError> {
    if validate(hll)? != Encoding::Sparse {
        return Err(HllError::NotSparse);
    }
    let mut out = String::new();
    for (_, op) in SparseOps::new(&hll[HEADER_LEN..]) {
        let piece = match op {
            Op::Zero { len, wide: false } => format!("z:{len} "),
            Op::Zero { len, wide: true } => format!("Z:{len} "),
            Op::Val { value, len } => format!("v:{value},{len} "),
        };
        out.push_str(&piece);
    }
    out.truncate(out.trim_end_matches(' ').len());
    Ok(out)
}

/// PFSELFTEST: checks dense register access with random values, then adds
/// 10 million distinct elements to a dense and a sparse HLL, checking at
/// each power of ten that both estimate the same, that the sparse one is
/// still sparse while small (under `sparse_max_bytes / 2` elements) and
/// that the error stays within six standard errors. `Err` holds Redis's
/// `ERR TESTFAILED ...` reply.
pub fn selftest(sparse_max_bytes: usize, seed: u64) -> Result<(), String> {
    const CYCLES: usize = 1000;
    const ELEMENTS: u64 = 10_000_000;
    selftest_sized(sparse_max_bytes, seed, CYCLES, ELEMENTS)
}

/// [`selftest`] with the number of register cycles and elements given.
fn selftest_sized(
    sparse_max_bytes: usize,
    seed: u64,
    cycles: usize,
    elements: u64,
) -> Result<(), String> {
    let mut rng = fastrand::Rng::with_seed(seed);
    selftest_registers(&mut rng, cycles)?;
    selftest_estimates(sparse_max_bytes, rng.u64(..), elements)
}

/// PFSELFTEST's first part: random register values read back unchanged.
fn selftest_registers(rng: &mut fastrand::Rng, cycles: usize) -> Result<(), String> {
    let mut regs = vec![0u8; DENSE_LEN - HEADER_LEN];
    let mut expected = vec![0u8; REGISTERS];
    for _ in 0..cycles {
        for (i, e) in expected.iter_mut().enumerate() {
            *e = rng.u8(..=REGISTER_MAX);
            dense_set(&mut regs, i, *e);
        }
        for (i, &e) in expected.iter().enumerate() {
            let got = dense_get(&regs, i);
            if got != e {
                return Err(format!(
                    "ERR TESTFAILED Register {i} should be {e} but is {got}"
                ));
            }
        }
    }
    Ok(())
}

/// PFSELFTEST's second part: dense and sparse estimates of `elements`
/// distinct 8-byte elements, checked at 1, 10, 100, ...
fn selftest_estimates(sparse_max_bytes: usize, seed: u64, elements: u64) -> Result<(), String> {
    let mut dense = new_hll();
    to_dense(&mut dense).map_err(|e| e.message().to_owned())?;
    let mut sparse = new_hll();
    let fail = |what: &str| Err(format!("ERR TESTFAILED {what}"));
    let mut checkpoint = 1u64;
    for j in 1..=elements {
        let ele = (j ^ seed).to_le_bytes();
        add_elements(&mut dense, [&ele[..]], sparse_max_bytes)
            .map_err(|e| e.message().to_owned())?;
        add_elements(&mut sparse, [&ele[..]], sparse_max_bytes)
            .map_err(|e| e.message().to_owned())?;
        if j != checkpoint {
            continue;
        }
        if j < (sparse_max_bytes / 2) as u64 && sparse[4] != ENCODING_SPARSE {
            return fail("sparse encoding not used");
        }
        let estimate = |h: &[u8]| estimate_cardinality(h).map_err(|e| e.message().to_owned());
        let card = estimate(&dense)?;
        if card != estimate(&sparse)? {
            return fail("dense/sparse disagree");
        }
        let abserr = checkpoint.abs_diff(card);
        let relerr = 1.04 / (REGISTERS as f64).sqrt();
        // Cardinality 10 may collide enough to exceed the bound by chance.
        let maxerr = if j == 10 {
            1
        } else {
            (relerr * 6.0 * checkpoint as f64).ceil() as u64
        };
        if abserr > maxerr {
            return fail(&format!("Too big error. card:{checkpoint} abserr:{abserr}"));
        }
        checkpoint *= 10;
    }
    Ok(())
}

// ------------------------------------------------------------------------
// Dense registers.

/// Byte offset and bit shift of dense register `i`.
fn dense_pos(i: usize) -> (usize, u32) {
    let bit = i * REGISTER_BITS;
    (bit / 8, (bit % 8) as u32)
}

/// Reads dense register `i` (the byte past the last one reads as zero, as
/// Redis's string terminator does; it never contributes bits).
fn dense_get(regs: &[u8], i: usize) -> u8 {
    let (byte, shift) = dense_pos(i);
    let b0 = u16::from(regs[byte]);
    let b1 = u16::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((b0 | b1 << 8) >> shift) as u8) & REGISTER_MAX
}

/// Writes dense register `i`.
fn dense_set(regs: &mut [u8], i: usize, value: u8) {
    let (byte, shift) = dense_pos(i);
    let mask = u16::from(REGISTER_MAX) << shift;
    let bits = u16::from(value) << shift;
    regs[byte] = (regs[byte] & !(mask as u8)) | bits as u8;
    if let Some(next) = regs.get_mut(byte + 1) {
        *next = (*next & !((mask >> 8) as u8)) | (bits >> 8) as u8;
    }
}

/// Raises dense register `i` to `value`; true if it grew.
fn dense_raise(regs: &mut [u8], i: usize, value: u8) -> bool {
    if value > dense_get(regs, i) {
        dense_set(regs, i, value);
        true
    } else {
        false
    }
}

// ------------------------------------------------------------------------
// Sparse opcodes.

/// One decoded sparse opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// `len` zero registers; `wide` for the two-byte `XZERO` form.
    Zero { len: usize, wide: bool },
    /// `len` registers holding `value`.
    Val { value: u8, len: usize },
}

impl Op {
    /// Bytes the opcode takes.
    fn size(self) -> usize {
        match self {
            Op::Zero { wide: true, .. } => 2,
            _ => 1,
        }
    }

    /// Registers the opcode covers.
    fn span(self) -> usize {
        match self {
            Op::Zero { len, .. } | Op::Val { len, .. } => len,
        }
    }

    /// The register value the opcode stands for.
    fn value(self) -> u8 {
        match self {
            Op::Zero { .. } => 0,
            Op::Val { value, .. } => value,
        }
    }
}

/// Decodes the opcode at `pos`; a truncated `XZERO`'s missing second byte
/// reads as zero (Redis reads its string terminator there).
fn op_at(data: &[u8], pos: usize) -> Op {
    let b = data[pos];
    match b & 0xc0 {
        0x00 => Op::Zero {
            len: usize::from(b & 0x3f) + 1,
            wide: false,
        },
        0x40 => {
            let low = usize::from(data.get(pos + 1).copied().unwrap_or(0));
            Op::Zero {
                len: (usize::from(b & 0x3f) << 8 | low) + 1,
                wide: true,
            }
        }
        _ => Op::Val {
            value: ((b >> 2) & 0x1f) + 1,
            len: usize::from(b & 0x3) + 1,
        },
    }
}

/// Iterates the opcodes of sparse register data with their byte offsets.
struct SparseOps<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> SparseOps<'a> {
    fn new(data: &'a [u8]) -> Self {
        SparseOps { data, pos: 0 }
    }
}

impl Iterator for SparseOps<'_> {
    type Item = (usize, Op);

    fn next(&mut self) -> Option<(usize, Op)> {
        if self.pos >= self.data.len() {
            return None;
        }
        let at = self.pos;
        let op = op_at(self.data, at);
        self.pos += op.size();
        Some((at, op))
    }
}

/// Calls `f(first_register, len, value)` for each run of sparse register
/// data, and fails unless the runs cover exactly the 16384 registers.
/// Stops at the first run past the end (the data is corrupt whatever
/// follows, since coverage only grows).
fn walk_sparse(data: &[u8], mut f: impl FnMut(usize, usize, u8)) -> Result<(), HllError> {
    let mut first = 0;
    for (_, op) in SparseOps::new(data) {
        let len = op.span();
        if first + len > REGISTERS {
            return Err(HllError::Corrupt);
        }
        f(first, len, op.value());
        first += len;
    }
    if first == REGISTERS {
        Ok(())
    } else {
        Err(HllError::Corrupt)
    }
}

/// Appends a `ZERO` or `XZERO` opcode for `len` zero registers (1..=16384).
fn push_zero_run(out: &mut impl Extend<u8>, len: usize) {
    if len > SPARSE_ZERO_MAX_LEN {
        push_xzero(out, len);
    } else {
        out.extend([(len - 1) as u8]);
    }
}

/// Appends an `XZERO` opcode for `len` zero registers (1..=16384).
fn push_xzero(out: &mut impl Extend<u8>, len: usize) {
    let l = len - 1;
    out.extend([0x40 | (l >> 8) as u8, l as u8]);
}

/// A `VAL` opcode for `len` (1..=4) registers of `value` (1..=32).
fn val_op(value: u8, len: usize) -> u8 {
    0x80 | (value - 1) << 2 | (len - 1) as u8
}

/// The opcode covering register `index`: its offset in `data`, the
/// previous opcode's offset, the first register it covers and the opcode.
/// `None` when no opcode covers it (corrupt data).
fn find_op(data: &[u8], index: usize) -> Option<(usize, Option<usize>, usize, Op)> {
    let mut first = 0;
    let mut prev = None;
    for (at, op) in SparseOps::new(data) {
        if index < first + op.span() {
            return Some((at, prev, first, op));
        }
        prev = Some(at);
        first += op.span();
    }
    None
}

/// Raises register `index` of a sparse HLL to `value` (Redis's
/// `hllSparseSet`): true if it grew. Promotes to dense when the value does
/// not fit a `VAL` opcode or the string would outgrow `sparse_max_bytes`.
fn sparse_raise(
    hll: &mut Vec<u8>,
    index: usize,
    value: u8,
    sparse_max_bytes: usize,
) -> Result<bool, HllError> {
    if value > SPARSE_VAL_MAX_VALUE {
        return promote_and_raise(hll, index, value);
    }
    let data = &hll[HEADER_LEN..];
    let (at, prev, first, op) = find_op(data, index).ok_or(HllError::Corrupt)?;
    let seq = match op {
        Op::Val { value: old, .. } if old >= value => return Ok(false),
        Op::Val { len: 1, .. }
        | Op::Zero {
            len: 1,
            wide: false,
        } => smallvec![val_op(value, 1)],
        _ => split_run(op, index - first, value),
    };
    let old_size = op.size();
    let new_len = hll.len() + seq.len() - old_size;
    if seq.len() > old_size && new_len > sparse_max_bytes {
        return promote_and_raise(hll, index, value);
    }
    let start = HEADER_LEN + at;
    let old_end = (start + old_size).min(hll.len());
    hll.splice(start..old_end, seq);
    // An XZERO cut short by the end loses its last new byte, as in Redis.
    hll.truncate(new_len);
    merge_adjacent_vals(hll, HEADER_LEN + prev.unwrap_or(0));
    mark_cache_stale(hll);
    Ok(true)
}

/// The opcodes replacing `op` when register `offset` of its run takes
/// `value`: the run before, a one-register `VAL`, the run after.
fn split_run(op: Op, offset: usize, value: u8) -> OpSeq {
    let after = op.span() - offset - 1;
    let mut seq = OpSeq::new();
    let push_run = |seq: &mut OpSeq, len: usize| match op {
        Op::Zero { .. } => push_zero_run(seq, len),
        Op::Val { value: v, .. } => seq.push(val_op(v, len)),
    };
    if offset > 0 {
        push_run(&mut seq, offset);
    }
    seq.push(val_op(value, 1));
    if after > 0 {
        push_run(&mut seq, after);
    }
    seq
}

/// Joins neighbouring `VAL` opcodes of equal value whose lengths fit one
/// opcode, looking at up to five opcodes from `start` (Redis's step 4).
fn merge_adjacent_vals(hll: &mut Vec<u8>, start: usize) {
    let mut p = start;
    let mut scans = 5;
    while p < hll.len() && scans > 0 {
        scans -= 1;
        let op = op_at(hll, p);
        let Op::Val { value, len } = op else {
            p += op.size();
            continue;
        };
        if let Some(Op::Val { value: v2, len: l2 }) = (p + 1 < hll.len()).then(|| op_at(hll, p + 1))
        {
            if v2 == value && len + l2 <= SPARSE_VAL_MAX_LEN {
                hll[p + 1] = val_op(value, len + l2);
                hll.remove(p);
                continue;
            }
        }
        p += 1;
    }
}

/// Converts to dense and raises the register there (the promotion path of
/// Redis's `hllSparseSet`, which always reports a change).
fn promote_and_raise(hll: &mut Vec<u8>, index: usize, value: u8) -> Result<bool, HllError> {
    to_dense(hll)?;
    dense_raise(&mut hll[HEADER_LEN..], index, value);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The registers of `hll` or a panic (tests only).
    fn regs(hll: &[u8]) -> Vec<u8> {
        register_values(hll).expect("valid HLL")
    }

    /// A sparse HLL with the given runs, encoded by `push_zero_run`/`val_op`.
    fn sparse_from(ops: &[u8]) -> Vec<u8> {
        let mut v = new_hll();
        v.truncate(HEADER_LEN);
        v.extend_from_slice(ops);
        v
    }

    #[test]
    fn new_hll_is_one_xzero_with_a_zero_current_cache() {
        let v = new_hll();
        assert_eq!(&v[..5], b"HYLL\x01");
        assert_eq!(&v[5..HEADER_LEN], &[0u8; 11]);
        assert_eq!(&v[HEADER_LEN..], &[0x7f, 0xff]);
        assert_eq!(decode_sparse(&v).unwrap(), "Z:16384");
        let mut v = v;
        assert_eq!(
            count(&mut v).unwrap(),
            Count {
                cardinality: 0,
                cache_updated: false
            }
        );
    }

    #[test]
    fn validate_applies_redis_rules() {
        assert_eq!(
            validate(b"HYLL\x01\0\0\0\0\0\0\0\0\0\0"),
            Err(HllError::NotHll)
        );
        assert_eq!(validate(&new_hll()), Ok(Encoding::Sparse));
        let mut bad_magic = new_hll();
        bad_magic[0] = b'h';
        assert_eq!(validate(&bad_magic), Err(HllError::NotHll));
        let mut bad_enc = new_hll();
        bad_enc[4] = 2;
        assert_eq!(validate(&bad_enc), Err(HllError::NotHll));
        let mut dense = new_hll();
        to_dense(&mut dense).unwrap();
        assert_eq!(validate(&dense), Ok(Encoding::Dense));
        dense.push(0);
        assert_eq!(validate(&dense), Err(HllError::NotHll));
        // A sparse header with no opcodes passes validation; use fails.
        let empty = sparse_from(&[]);
        assert_eq!(validate(&empty), Ok(Encoding::Sparse));
        assert_eq!(estimate_cardinality(&empty), Err(HllError::Corrupt));
    }

    #[test]
    fn murmur_mixes_length_tail_and_seed() {
        let hashes: Vec<u64> = (0..=17u8)
            .map(|n| murmur_hash64a(&(0..n).collect::<Vec<u8>>(), HASH_SEED))
            .collect();
        let mut distinct = hashes.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), hashes.len());
        assert_ne!(murmur_hash64a(b"a", 0), murmur_hash64a(b"a", 1));
        // The empty input hashes to the finalised seed (no words, no tail).
        let mut h = HASH_SEED;
        let m = 0xc6a4_a793_5bd1_e995u64;
        h ^= h >> 47;
        h = h.wrapping_mul(m);
        h ^= h >> 47;
        assert_eq!(murmur_hash64a(b"", HASH_SEED), h);
    }

    #[test]
    fn dense_registers_do_not_disturb_neighbours() {
        let mut r = vec![0u8; DENSE_LEN - HEADER_LEN];
        for i in 0..REGISTERS {
            dense_set(&mut r, i, (i % 64) as u8);
        }
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&r, i), (i % 64) as u8, "register {i}");
        }
        dense_set(&mut r, REGISTERS - 1, 0);
        dense_set(&mut r, 0, 63);
        assert_eq!(dense_get(&r, REGISTERS - 2), ((REGISTERS - 2) % 64) as u8);
        assert_eq!(dense_get(&r, REGISTERS - 1), 0);
        assert_eq!(dense_get(&r, 1), 1);
    }

    #[test]
    fn sparse_splits_and_merges_runs() {
        let mut v = new_hll();
        assert!(sparse_raise(&mut v, 0, 3, 3000).unwrap());
        assert_eq!(decode_sparse(&v).unwrap(), "v:3,1 Z:16383");
        assert!(sparse_raise(&mut v, 100, 2, 3000).unwrap());
        assert_eq!(decode_sparse(&v).unwrap(), "v:3,1 Z:99 v:2,1 Z:16283");
        assert!(sparse_raise(&mut v, 1, 3, 3000).unwrap());
        assert_eq!(decode_sparse(&v).unwrap(), "v:3,2 Z:98 v:2,1 Z:16283");
        assert!(!sparse_raise(&mut v, 1, 2, 3000).unwrap());
        assert!(sparse_raise(&mut v, 2, 4, 3000).unwrap());
        assert_eq!(decode_sparse(&v).unwrap(), "v:3,2 v:4,1 Z:97 v:2,1 Z:16283");
        assert_eq!(v[HEADER_LEN - 1] & CARD_STALE_BIT, CARD_STALE_BIT);
    }

    #[test]
    fn sparse_promotes_for_big_values_and_size() {
        let mut v = new_hll();
        assert!(sparse_raise(&mut v, 5, 33, 3000).unwrap());
        assert_eq!(validate(&v), Ok(Encoding::Dense));
        assert_eq!(regs(&v)[5], 33);

        let mut v = new_hll();
        let max = v.len() + 4;
        sparse_raise(&mut v, 1000, 1, max).unwrap(); // Z v Z: +3 bytes
        assert_eq!(validate(&v), Ok(Encoding::Sparse));
        sparse_raise(&mut v, 3000, 1, max).unwrap(); // would be +2 more
        assert_eq!(validate(&v), Ok(Encoding::Dense));
        let r = regs(&v);
        assert_eq!(
            (r[1000], r[3000], r.iter().filter(|&&x| x != 0).count()),
            (1, 1, 2)
        );
    }

    #[test]
    fn corrupt_sparse_data_is_detected() {
        let mut v = pfadd_new([&b"a"[..], b"b", b"c"], 3000);
        v.extend_from_slice(b"hello");
        assert_eq!(count(&mut v), Err(HllError::Corrupt));
        assert_eq!(Union::new().merge(&v), Err(HllError::Corrupt));
        assert_eq!(to_dense(&mut v.clone()), Err(HllError::Corrupt));
        // Too short: no opcode covers the last registers.
        let mut short = sparse_from(&[0x7f, 0x00]);
        assert_eq!(
            sparse_raise(&mut short, 16200, 1, 3000),
            Err(HllError::Corrupt)
        );
        assert_eq!(sparse_raise(&mut short, 16000, 1, 3000), Ok(true));
        // A truncated XZERO reads a zero second byte, as Redis does.
        let cut = sparse_from(&[0x7f]);
        assert_eq!(decode_sparse(&cut).unwrap(), "Z:16129");
        assert_eq!(estimate_cardinality(&cut), Err(HllError::Corrupt));
    }

    #[test]
    fn count_caches_and_pfadd_invalidates() {
        let mut v = pfadd_new([&b"a"[..], b"b", b"c"], 3000);
        assert_eq!(v[15], 0x80);
        assert_eq!(
            count(&mut v).unwrap(),
            Count {
                cardinality: 3,
                cache_updated: true
            }
        );
        assert_eq!(v[15], 0);
        assert_eq!(
            count(&mut v).unwrap(),
            Count {
                cardinality: 3,
                cache_updated: false
            }
        );
        assert!(!pfadd(&mut v, [&b"a"[..], b"b", b"c"], 3000).unwrap());
        assert_eq!(v[15], 0);
        assert!(pfadd(&mut v, [&b"1"[..], b"2", b"3"], 3000).unwrap());
        assert_eq!(v[15], 0x80);
        // A current cache is trusted without looking at the registers.
        let mut stale_regs = v.clone();
        stale_regs[8..16].copy_from_slice(&42u64.to_le_bytes());
        assert_eq!(count(&mut stale_regs).unwrap().cardinality, 42);
    }

    #[test]
    fn union_store_follows_dense_inputs() {
        let a = pfadd_new([&b"x"[..], b"y"], 3000);
        let mut b = pfadd_new([&b"y"[..], b"z"], 3000);
        to_dense(&mut b).unwrap();
        let mut u = Union::new();
        u.merge(&a).unwrap();
        let mut sparse_dest = new_hll();
        u.store_into(&mut sparse_dest, 3000).unwrap();
        assert_eq!(validate(&sparse_dest), Ok(Encoding::Sparse));
        assert_eq!(regs(&sparse_dest), regs(&a));
        u.merge(&b).unwrap();
        assert_eq!(u.cardinality(), 3);
        let mut dest = new_hll();
        u.store_into(&mut dest, 3000).unwrap();
        assert_eq!(validate(&dest), Ok(Encoding::Dense));
        assert_eq!(estimate_cardinality(&dest).unwrap(), 3);
        assert_eq!(dest[15] & CARD_STALE_BIT, CARD_STALE_BIT);
        assert_eq!(u.merge(b"not an hll at all"), Err(HllError::NotHll));
    }

    #[test]
    fn estimator_handles_extremes() {
        let mut h = [0u32; 64];
        h[0] = REGISTERS as u32;
        assert_eq!(estimate(&h), 0);
        let mut full = [0u32; 64];
        full[51] = REGISTERS as u32;
        assert_eq!(estimate(&full), u64::MAX, "z is 0: the estimate saturates");
        let mut high = [0u32; 64];
        high[63] = REGISTERS as u32; // values above 51 are ignored
        assert_eq!(estimate(&high), estimate(&full));
    }

    #[test]
    fn selftest_passes_small() {
        selftest_sized(3000, 7, 3, 100_000).unwrap();
        selftest_sized(0, 8, 1, 10_000).unwrap();
    }

    #[test]
    fn decode_refuses_dense() {
        let mut v = new_hll();
        to_dense(&mut v).unwrap();
        assert_eq!(decode_sparse(&v), Err(HllError::NotSparse));
        assert_eq!(to_dense(&mut v), Ok(false));
    }

    proptest! {
        /// Sparse updates keep the same registers as a plain array, and
        /// both encodings estimate the same.
        #[test]
        fn sparse_matches_a_register_model(
            sets in proptest::collection::vec((0..REGISTERS, 1u8..=40), 0..400),
            max in prop_oneof![Just(3000usize), 20usize..400],
        ) {
            let mut v = new_hll();
            let mut model = vec![0u8; REGISTERS];
            for (i, val) in sets {
                let grew = set_register(&mut v, i, val, max).unwrap();
                prop_assert_eq!(grew, val > model[i]);
                model[i] = model[i].max(val);
                if validate(&v) == Ok(Encoding::Sparse) {
                    prop_assert!(v.len() <= max.max(new_hll().len()));
                }
            }
            prop_assert_eq!(regs(&v), model.clone());
            let mut d = v.clone();
            to_dense(&mut d).unwrap();
            prop_assert_eq!(regs(&d), model);
            prop_assert_eq!(estimate_cardinality(&d), estimate_cardinality(&v));
        }

        /// Arbitrary bytes behind a valid header never panic, and no
        /// operation grows them beyond a dense HLL plus a few bytes.
        #[test]
        fn arbitrary_bytes_never_panic(
            enc in 0u8..3,
            body in proptest::collection::vec(any::<u8>(), 0..300),
            card in any::<[u8; 8]>(),
            elems in proptest::collection::vec(any::<u32>(), 0..40),
        ) {
            let mut v = b"HYLL".to_vec();
            v.push(enc);
            v.extend_from_slice(&[0, 0, 0]);
            v.extend_from_slice(&card);
            v.extend_from_slice(&body);
            exercise(&v, &elems);
        }
    }

    /// Runs every entry point on `v`, checking only that results are
    /// bounded (errors are expected).
    fn exercise(v: &[u8], elems: &[u32]) {
        let bytes: Vec<[u8; 4]> = elems.iter().map(|e| e.to_le_bytes()).collect();
        let bound = v.len().max(DENSE_LEN) + 3 * bytes.len() + 8;
        let mut a = v.to_vec();
        let _ = pfadd(&mut a, bytes.iter().map(|b| &b[..]), 3000);
        assert!(a.len() <= bound);
        let _ = count(&mut a.clone());
        let _ = estimate_cardinality(v);
        let mut u = Union::new();
        if u.merge(v).is_ok() {
            let mut dest = v.to_vec();
            let _ = u.store_into(&mut dest, 3000);
            assert!(dest.len() <= bound.max(3000 + 8));
            let _ = u.cardinality();
        }
        let _ = to_dense(&mut v.to_vec());
        let _ = register_values(v);
        if let Ok(text) = decode_sparse(v) {
            assert!(text.len() <= 12 * v.len());
        }
    }

    #[test]
    fn seeded_corruptions_of_real_hlls_never_panic() {
        let mut rng = fastrand::Rng::with_seed(26);
        for round in 0..300 {
            let n = rng.usize(..3000);
            let elems: Vec<Vec<u8>> = (0..n)
                .map(|i| format!("{round}:{i}").into_bytes())
                .collect();
            let mut v = pfadd_new(elems.iter().map(Vec::as_slice), 3000);
            for _ in 0..rng.usize(1..6) {
                let pos = rng.usize(..v.len());
                v[pos] = rng.u8(..);
            }
            exercise(&v, &[rng.u32(..), rng.u32(..), rng.u32(..)]);
        }
    }
}
