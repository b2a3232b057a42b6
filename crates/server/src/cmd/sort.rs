//! SORT and SORT_RO (Redis's `sort.c`): sort the elements of a list, set
//! or sorted set numerically or lexicographically, optionally by the values
//! of other keys (`BY weight_*`, `BY obj_*->field`), fetching other keys
//! for each element (`GET #`, `GET data_*`, `GET obj_*->field`), with
//! LIMIT, ASC/DESC, ALPHA and, for SORT, STORE into a list.
//!
//! The keys that BY and GET patterns read are only known while sorting, so
//! both commands are declared with [`KeySpec::All`]: every shard is locked.
//! (COMMAND INFO still reports Redis's key specs, from docs.txt.)
//!
//! Like Redis with glibc's merge-sort `qsort`, ties keep the collection's
//! order (the sort is stable); DESC reverses the comparison, not the
//! result.

use crate::exec::notify::class as ev;
use std::cmp::Ordering;
use std::sync::atomic::Ordering as AtomicOrdering;

use vireo_resp::number::parse_f64;
use vireo_resp::Args;
use vireo_store::list::{End, List};
use vireo_store::{Keys, Value, ValueRef};

use super::{errors, flags::*, is, spec, CommandSpec, Ctx, KeySpec};

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    spec("sort", -2, WRITE | DENYOOM, KeySpec::All, sort).with_getkeys(sort_keys),
    spec("sort_ro", -2, READONLY, KeySpec::All, sort_ro).with_getkeys(sort_ro_keys),
];

const NOT_DOUBLE: &str = "ERR One or more scores can't be converted into double";

/// SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC]
/// [ALPHA] [STORE destination]: replies the sorted elements (or what the
/// GET patterns fetch for them), or stores them as a list and replies its
/// length.
fn sort(ctx: &mut Ctx<'_>, args: Args<'_>) {
    sort_generic(ctx, args, false);
}

/// SORT_RO: SORT without the STORE option.
fn sort_ro(ctx: &mut Ctx<'_>, args: Args<'_>) {
    sort_generic(ctx, args, true);
}

/// SORT's keys as COMMAND GETKEYS reports them.
fn sort_keys(args: Args<'_>) -> Vec<usize> {
    key_positions(args, false)
}

/// SORT_RO's keys as COMMAND GETKEYS reports them: the sorted key.
fn sort_ro_keys(args: Args<'_>) -> Vec<usize> {
    key_positions(args, true)
}

/// The key positions COMMAND GETKEYS reports (Redis's `sortGetKeys` and
/// `sortROGetKeys`): the sorted key and, for SORT, the argument after the
/// last STORE, skipping the arguments of LIMIT, GET and BY.
fn key_positions(args: Args<'_>, readonly: bool) -> Vec<usize> {
    let mut keys = vec![1];
    if readonly {
        return keys;
    }
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        let opt = args.get(i);
        if is(opt, "limit") {
            i += 2;
        } else if is(opt, "get") || is(opt, "by") {
            i += 1;
        } else if is(opt, "store") && i + 1 < args.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    keys.extend(store);
    keys
}

/// A BY or GET pattern, pre-split at its first `*`.
#[derive(Clone, Copy)]
enum Pattern<'a> {
    /// `#`: the element itself.
    Itself,
    /// No `*`: refers to no key (GET replies null; BY means "don't sort").
    Constant,
    /// `prefix*suffix`, optionally `prefix*suffix->field` (a hash field).
    Key {
        prefix: &'a [u8],
        suffix: &'a [u8],
        field: Option<&'a [u8]>,
    },
}

impl<'a> Pattern<'a> {
    /// Splits a pattern as Redis does: the first `*` is substituted, and a
    /// `->` after it followed by at least one byte names a hash field.
    fn parse(p: &'a [u8]) -> Self {
        if p == b"#" {
            return Pattern::Itself;
        }
        let Some(star) = p.iter().position(|&c| c == b'*') else {
            return Pattern::Constant;
        };
        let rest = &p[star + 1..];
        let arrow = rest
            .windows(2)
            .position(|w| w == b"->")
            .filter(|&at| at + 2 < rest.len());
        let (suffix, field) = match arrow {
            Some(at) => (&rest[..at], Some(&rest[at + 2..])),
            None => (rest, None),
        };
        Pattern::Key {
            prefix: &p[..star],
            suffix,
            field,
        }
    }

    /// Looks the pattern up for `elem` (Redis's `lookupKeyByPattern`) and
    /// hands the result to `f`: the element itself, a string key's value, a
    /// hash field's value, or None (missing key or field, wrong type, or a
    /// constant pattern). `scratch` holds the substituted key name.
    fn lookup<R>(
        &self,
        keys: &mut Keys<'_>,
        db: usize,
        elem: &[u8],
        scratch: &mut Vec<u8>,
        f: impl FnOnce(Option<&[u8]>) -> R,
    ) -> R {
        let (prefix, suffix, field) = match *self {
            Pattern::Itself => return f(Some(elem)),
            Pattern::Constant => return f(None),
            Pattern::Key {
                prefix,
                suffix,
                field,
            } => (prefix, suffix, field),
        };
        scratch.clear();
        scratch.extend_from_slice(prefix);
        scratch.extend_from_slice(elem);
        scratch.extend_from_slice(suffix);
        let mut digits = itoa::Buffer::new();
        match (keys.get_read(db, scratch).map(|e| e.value()), field) {
            (Some(ValueRef::Str(s)), None) => f(Some(s.as_bytes(&mut digits))),
            (Some(ValueRef::Hash(h)), Some(field)) => f(h.get(field)),
            _ => f(None),
        }
    }
}

/// Parsed options.
struct Options<'a> {
    desc: bool,
    alpha: bool,
    /// LIMIT offset and count, as given.
    limit: (i64, i64),
    by: Option<Pattern<'a>>,
    /// BY named a constant pattern: keep the collection's order.
    dont_sort: bool,
    gets: Vec<Pattern<'a>>,
    store: Option<&'a [u8]>,
}

/// Whether the client's user may read every key, which BY and GET
/// patterns may reach (Redis checks this before reading any).
fn may_read_all_keys(ctx: &Ctx<'_>, args: Args<'_>) -> bool {
    super::table()
        .lookup(args.get(0))
        .is_none_or(|cmd| crate::security::may_read_all_keys(ctx.server, ctx.session, cmd, args))
}

/// Parses the options after the key, replying the error (and returning
/// None) for an unknown word, a missing argument, STORE in SORT_RO or a
/// LIMIT that is not two integers.
fn parse_options<'a>(ctx: &mut Ctx<'_>, args: Args<'a>, readonly: bool) -> Option<Options<'a>> {
    let mut o = Options {
        desc: false,
        alpha: false,
        limit: (0, -1),
        by: None,
        dont_sort: false,
        gets: Vec::new(),
        store: None,
    };
    let mut j = 2;
    while j < args.len() {
        let opt = args.get(j);
        let left = args.len() - j - 1;
        if is(opt, "asc") {
            o.desc = false;
        } else if is(opt, "desc") {
            o.desc = true;
        } else if is(opt, "alpha") {
            o.alpha = true;
        } else if is(opt, "limit") && left >= 2 {
            let start = ctx.int_arg(args.get(j + 1))?;
            let count = ctx.int_arg(args.get(j + 2))?;
            o.limit = (start, count);
            j += 2;
        } else if !readonly && is(opt, "store") && left >= 1 {
            o.store = Some(args.get(j + 1));
            j += 1;
        } else if is(opt, "by") && left >= 1 {
            let p = args.get(j + 1);
            o.dont_sort = !p.contains(&b'*');
            if !o.dont_sort && !may_read_all_keys(ctx, args) {
                ctx.out
                    .error("ERR BY option of SORT denied due to insufficient ACL permissions.");
                return None;
            }
            o.by = Some(Pattern::parse(p));
            j += 1;
        } else if is(opt, "get") && left >= 1 {
            if !may_read_all_keys(ctx, args) {
                ctx.out
                    .error("ERR GET option of SORT denied due to insufficient ACL permissions.");
                return None;
            }
            o.gets.push(Pattern::parse(args.get(j + 1)));
            j += 1;
        } else {
            ctx.out.error(errors::SYNTAX);
            return None;
        }
        j += 1;
    }
    Some(o)
}

/// The collection's elements, copied into one buffer (BY and GET lookups
/// need the keyspace while they are used).
#[derive(Default)]
struct Elems {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Elems {
    fn push(&mut self, e: &[u8]) {
        self.bytes.extend_from_slice(e);
        self.ends.push(self.bytes.len());
    }

    fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    fn len(&self) -> usize {
        self.ends.len()
    }
}

/// Redis's LIMIT clamping for a collection of `len` elements: the first
/// index and how many elements to return.
fn clamp_limit(len: usize, (offset, count): (i64, i64)) -> (usize, usize) {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let start = offset.clamp(0, len);
    let count = count.clamp(-1, len);
    let end = if count < 0 {
        len - 1
    } else {
        start + count - 1
    };
    if start >= len {
        return (0, 0);
    }
    let end = end.min(len - 1);
    let n = (end - start + 1).max(0);
    (start as usize, n as usize)
}

/// Loads the elements to sort. With `range` (a "don't sort" over a list or
/// sorted set) only those positions are loaded, in collection order or
/// reversed for DESC; otherwise everything, in collection order.
fn load(value: Option<ValueRef>, range: Option<(usize, usize, bool)>, out: &mut Elems) {
    if matches!(range, Some((_, 0, _))) {
        return;
    }
    let mut digits = itoa::Buffer::new();
    match value {
        Some(ValueRef::List(l)) => match range {
            Some((start, n, desc)) => {
                let from = if desc { l.len() - 1 - start } else { start };
                for e in l.iter_from(from, desc).take(n) {
                    out.push(elem_bytes(e, &mut digits));
                }
            }
            None => l.iter().for_each(|e| out.push(elem_bytes(e, &mut digits))),
        },
        Some(ValueRef::ZSet(z)) => match range {
            Some((start, n, desc)) => {
                let (lo, hi) = if desc {
                    (z.len() - start - n, z.len() - start)
                } else {
                    (start, start + n)
                };
                z.range(lo, hi, desc).for_each(|(m, _)| out.push(m));
            }
            None => z.iter().for_each(|(m, _)| out.push(m)),
        },
        Some(ValueRef::Set(s)) => s.iter().for_each(|m| out.push(m.as_bytes(&mut digits))),
        _ => {}
    }
}

/// A list element's bytes (integers formatted into `digits`).
fn elem_bytes<'a>(e: vireo_store::list::Elem<'a>, digits: &'a mut itoa::Buffer) -> &'a [u8] {
    match e {
        vireo_store::list::Elem::Int(n) => digits.format(n).as_bytes(),
        vireo_store::list::Elem::Bytes(b) => b,
    }
}

/// A sort weight read as Redis's SORT does with `strtod`: leading
/// whitespace allowed, the empty string is 0, the text ends at a NUL byte;
/// trailing garbage, NaN, overflow and underflow (including subnormal
/// results) are errors (None).
fn sort_score(b: &[u8]) -> Option<f64> {
    let b = b.split(|&c| c == 0).next().unwrap_or_default();
    if b.is_empty() {
        return Some(0.0);
    }
    let start = b.iter().position(|c| !b" \t\n\x0b\x0c\r".contains(c))?;
    let v = parse_f64(&b[start..])?;
    (v == 0.0 || v.is_infinite() || v.abs() >= f64::MIN_POSITIVE).then_some(v)
}

/// One element being sorted: its index in [`Elems`], its numeric weight and
/// (ALPHA BY) the index of its comparison string in the second buffer.
struct Item {
    elem: usize,
    score: f64,
    cmp: Option<usize>,
}

fn sort_generic(ctx: &mut Ctx<'_>, args: Args<'_>, readonly: bool) {
    let Some(mut o) = parse_options(ctx, args, readonly) else {
        return;
    };
    let db = ctx.db;
    let value = ctx.keys.get_read(db, args.get(1)).map(|e| e.value());
    let (len, is_set, ordered) = match value {
        None => (0, false, true),
        Some(ValueRef::List(l)) => (l.len(), false, true),
        Some(ValueRef::ZSet(z)) => (z.len(), false, true),
        Some(ValueRef::Set(s)) => (s.len(), true, false),
        Some(_) => return ctx.out.error(errors::WRONGTYPE),
    };
    // A set has no order of its own: stored results, and results a script
    // sees, are sorted instead (so replicas and the AOF agree).
    if o.dont_sort && is_set && (o.store.is_some() || ctx.session.in_script) {
        o.dont_sort = false;
        o.alpha = true;
        o.by = None;
    }
    let (start, n) = clamp_limit(len, o.limit);
    // Without sorting, a list or sorted set loads just the requested range
    // (in the requested direction); everything else loads it all.
    let ranged = o.dont_sort && ordered;
    let mut elems = Elems::default();
    load(value, ranged.then_some((start, n, o.desc)), &mut elems);
    let first = if ranged { 0 } else { start };

    let mut items: Vec<Item> = (0..elems.len())
        .map(|elem| Item {
            elem,
            score: 0.0,
            cmp: None,
        })
        .collect();
    let mut scratch = Vec::new();
    if !o.dont_sort {
        let mut cmp_strings = Elems::default();
        let mut bad_score = false;
        for item in &mut items {
            let elem = elems.get(item.elem);
            let score = match o.by {
                Some(by) => by.lookup(&mut ctx.keys, db, elem, &mut scratch, |w| match w {
                    None => None,
                    Some(w) if o.alpha => {
                        item.cmp = Some(cmp_strings.len());
                        cmp_strings.push(w);
                        None
                    }
                    Some(w) => Some(sort_score(w)),
                }),
                None if o.alpha => None,
                None => Some(sort_score(elem)),
            };
            match score {
                Some(Some(s)) => item.score = s,
                Some(None) => bad_score = true,
                None => {}
            }
        }
        if bad_score {
            return ctx.out.error(NOT_DOUBLE);
        }
        let by_pattern = o.by.is_some();
        items.sort_by(|a, b| {
            let ord = if !o.alpha {
                a.score
                    .partial_cmp(&b.score)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| elems.get(a.elem).cmp(elems.get(b.elem)))
            } else if by_pattern {
                match (a.cmp, b.cmp) {
                    (Some(x), Some(y)) => cmp_strings.get(x).cmp(cmp_strings.get(y)),
                    (x, y) => x.is_some().cmp(&y.is_some()),
                }
            } else {
                elems.get(a.elem).cmp(elems.get(b.elem))
            };
            if o.desc {
                ord.reverse()
            } else {
                ord
            }
        });
    }

    let chosen = items.get(first..first + n).unwrap_or_default();
    let out_len = n * o.gets.len().max(1);
    match o.store {
        None => {
            ctx.out.array(out_len);
            for item in chosen {
                let elem = elems.get(item.elem);
                if o.gets.is_empty() {
                    ctx.out.bulk(elem);
                }
                for get in &o.gets {
                    get.lookup(&mut ctx.keys, db, elem, &mut scratch, |v| match v {
                        Some(v) => ctx.out.bulk(v),
                        None => ctx.out.null(),
                    });
                }
            }
        }
        Some(dst) => {
            let fill = ctx
                .server
                .config
                .hot
                .list_max_listpack_size
                .load(AtomicOrdering::Relaxed);
            let mut list = List::new(fill);
            for item in chosen {
                let elem = elems.get(item.elem);
                if o.gets.is_empty() {
                    list.push(End::Right, elem);
                }
                for get in &o.gets {
                    get.lookup(&mut ctx.keys, db, elem, &mut scratch, |v| {
                        list.push(End::Right, v.unwrap_or_default())
                    });
                }
            }
            if out_len > 0 {
                ctx.keys.set(db, dst, Value::List(list));
                ctx.modified(dst);
                ctx.notify(ev::LIST, "sortstore", dst);
                ctx.dirty += out_len as u64 - 1;
                ctx.signal_ready(dst);
            } else if ctx.keys.delete(db, dst) {
                ctx.modified(dst);
                ctx.notify(ev::GENERIC, "del", dst);
            }
            ctx.out.int(out_len as i64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getkeys_finds_the_last_store() {
        let positions = |line: &str, ro: bool| {
            let owned = vireo_resp::OwnedArgs::from_slices(line.split(' '));
            key_positions(owned.as_args(), ro)
        };
        assert_eq!(positions("sort abc store def", false), [1, 3]);
        assert_eq!(
            positions("sort abc store a store b store def", false),
            [1, 7]
        );
        assert_eq!(
            positions("sort abc get store by store limit store 1", false),
            [1]
        );
        assert_eq!(positions("sort abc store", false), [1]);
        assert_eq!(positions("sort_ro abc store def", true), [1]);
    }

    #[test]
    fn limits_clamp_like_redis() {
        assert_eq!(clamp_limit(3, (0, -1)), (0, 3));
        assert_eq!(clamp_limit(3, (1, -5)), (1, 2));
        assert_eq!(clamp_limit(3, (-1, 1)), (0, 1));
        assert_eq!(clamp_limit(3, (1, 1)), (1, 1));
        assert_eq!(clamp_limit(3, (2, 10)), (2, 1));
        assert_eq!(clamp_limit(3, (3, 1)), (0, 0));
        assert_eq!(clamp_limit(3, (1, 0)), (1, 0));
        assert_eq!(clamp_limit(0, (0, -1)), (0, 0));
        assert_eq!(clamp_limit(3, (i64::MAX, i64::MAX)), (0, 0));
        assert_eq!(clamp_limit(3, (i64::MIN, i64::MAX)), (0, 3));
    }

    #[test]
    fn scores_follow_strtod_and_erange() {
        assert_eq!(sort_score(b""), Some(0.0));
        assert_eq!(sort_score(b" 2"), Some(2.0));
        assert_eq!(sort_score(b"2 "), None);
        assert_eq!(sort_score(b"  "), None);
        assert_eq!(sort_score(b"0x10"), Some(16.0));
        assert_eq!(sort_score(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(sort_score(b"nan"), None);
        assert_eq!(sort_score(b"1e400"), None);
        assert_eq!(sort_score(b"1e-400"), None);
        assert_eq!(sort_score(b"4e-320"), None);
        assert_eq!(sort_score(b"3\x00junk"), Some(3.0));
        assert_eq!(sort_score(b"abc"), None);
    }

    #[test]
    fn patterns_split_at_the_first_star_and_arrow() {
        let key = |p: &'static [u8]| match Pattern::parse(p) {
            Pattern::Key {
                prefix,
                suffix,
                field,
            } => (prefix, suffix, field),
            _ => panic!("not a key pattern"),
        };
        assert!(matches!(Pattern::parse(b"#"), Pattern::Itself));
        assert!(matches!(Pattern::parse(b"nosort"), Pattern::Constant));
        assert!(matches!(Pattern::parse(b"a->b"), Pattern::Constant));
        assert_eq!(key(b"w_*"), (&b"w_"[..], &b""[..], None));
        assert_eq!(key(b"o_*x->f"), (&b"o_"[..], &b"x"[..], Some(&b"f"[..])));
        assert_eq!(key(b"o_*->"), (&b"o_"[..], &b"->"[..], None));
        assert_eq!(key(b"a*b*c"), (&b"a"[..], &b"b*c"[..], None));
        assert_eq!(
            key(b"a->x*->f->g"),
            (&b"a->x"[..], &b""[..], Some(&b"f->g"[..]))
        );
    }
}
