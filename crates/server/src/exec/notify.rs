//! Keyspace notifications (Redis's `notify.c`): the event classes of
//! `notify-keyspace-events`, and the publishing of an event on
//! `__keyspace@<db>__:<key>` and `__keyevent@<db>__:<event>`.
//!
//! Commands report events through `Ctx::notify`, active expiry and eviction
//! through [`key_gone`]. Whether anything listens is one relaxed load of
//! the hook word, `HotConfig::hooks`: the classes switched on plus
//! [`hook::TRACKING`] while some client tracks keys. With notifications off
//! and no tracking client (the default) the word is zero, and a command's
//! hooks cost that load and a branch each, with no per-key work. While the
//! `n` (`m`) class is on, dispatch asks the keyspace view to record the
//! keys a command creates (its read lookups miss), and the `new`
//! (`keymiss`) events are published before the next event of the command
//! (Redis publishes them at creation or lookup, before the command's own
//! event); keys the command found expired are announced the same way.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::cmd::Ctx;
use crate::exec::pubsub::{self, Kind, Local};
use crate::server::Server;

/// Event class bits, Redis's values.
pub mod class {
    pub const KEYSPACE: u32 = 1;
    pub const KEYEVENT: u32 = 1 << 1;
    pub const GENERIC: u32 = 1 << 2;
    pub const STRING: u32 = 1 << 3;
    pub const LIST: u32 = 1 << 4;
    pub const SET: u32 = 1 << 5;
    pub const HASH: u32 = 1 << 6;
    pub const ZSET: u32 = 1 << 7;
    pub const EXPIRED: u32 = 1 << 8;
    pub const EVICTED: u32 = 1 << 9;
    pub const STREAM: u32 = 1 << 10;
    pub const KEY_MISS: u32 = 1 << 11;
    pub const MODULE: u32 = 1 << 13;
    pub const NEW: u32 = 1 << 14;
    /// `A`: every class but `m` and `n`.
    pub const ALL: u32 =
        GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;
}

/// Each class letter with its bit, in the order Redis prints them.
const LETTERS: &[(char, u32)] = &[
    ('g', class::GENERIC),
    ('$', class::STRING),
    ('l', class::LIST),
    ('s', class::SET),
    ('h', class::HASH),
    ('z', class::ZSET),
    ('x', class::EXPIRED),
    ('e', class::EVICTED),
    ('t', class::STREAM),
    ('d', class::MODULE),
    ('n', class::NEW),
    ('K', class::KEYSPACE),
    ('E', class::KEYEVENT),
    ('m', class::KEY_MISS),
];

/// Parses a `notify-keyspace-events` value; None for an unknown letter.
pub fn parse(classes: &str) -> Option<u32> {
    classes.chars().try_fold(0, |flags, c| {
        if c == 'A' {
            return Some(flags | class::ALL);
        }
        LETTERS
            .iter()
            .find(|(l, _)| *l == c)
            .map(|(_, bit)| flags | bit)
    })
}

/// Every bit of `flags` as its letter: a lossless form to store.
pub fn letters(flags: u32) -> String {
    LETTERS
        .iter()
        .filter(|(_, bit)| flags & bit != 0)
        .map(|(l, _)| *l)
        .collect()
}

/// `flags` as CONFIG GET prints them: Redis writes `A` for all the
/// classes it covers, and then (a quirk kept on purpose) nothing of `n`.
pub fn format(flags: u32) -> String {
    let mut out = String::new();
    let all = flags & class::ALL == class::ALL;
    if all {
        out.push('A');
    }
    for &(l, bit) in LETTERS {
        let in_all_part = !matches!(l, 'K' | 'E' | 'm');
        if flags & bit != 0 && !(all && in_all_part) {
            out.push(l);
        }
    }
    out
}

/// Bits of the hook word that are not notification classes.
pub mod hook {
    /// Some client has CLIENT TRACKING on.
    pub const TRACKING: u32 = 1 << 31;
}

/// The hook word: the classes switched on and the [`hook`] bits; zero
/// when no hook has anything to do.
#[inline]
pub fn hooks(server: &Server) -> u32 {
    server.config.hot.hooks.load(Ordering::Relaxed)
}

/// The classes switched on.
#[inline]
pub fn flags(server: &Server) -> u32 {
    hooks(server) & !hook::TRACKING
}

/// Stores the classes of `notify-keyspace-events` in the hook word `word`,
/// keeping its [`hook`] bits.
pub fn set_classes(word: &AtomicU32, classes: u32) {
    let _ = word.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
        Some(old & hook::TRACKING | classes)
    });
}

/// Sets or clears hook bit `bit` of the hook word.
pub fn set_hook(server: &Server, bit: u32, on: bool) {
    let word = &server.config.hot.hooks;
    if on {
        word.fetch_or(bit, Ordering::Relaxed);
    } else {
        word.fetch_and(!bit, Ordering::Relaxed);
    }
}

/// Publishes event `event` of class `class` for `key` of `db`, if that
/// class is on. `local` is the connection whose command caused it (it gets
/// its own copy first, as the publisher of a PUBLISH does).
pub fn publish_event(
    server: &Server,
    mut local: Option<&mut Local<'_>>,
    class: u32,
    event: &str,
    db: usize,
    key: &[u8],
) {
    let flags = flags(server);
    if flags & class == 0 {
        return;
    }
    let mut db_text = itoa::Buffer::new();
    let db_text = db_text.format(db).as_bytes();
    if flags & class::KEYSPACE != 0 {
        let channel = [b"__keyspace@", db_text, b"__:", key].concat();
        pubsub::publish(
            server,
            local.as_deref_mut(),
            Kind::Global,
            &channel,
            event.as_bytes(),
        );
    }
    if flags & class::KEYEVENT != 0 {
        let channel = [b"__keyevent@", db_text, b"__:", event.as_bytes()].concat();
        pubsub::publish(server, local, Kind::Global, &channel, key);
    }
}

/// A key deleted outside any command: `expired` by active expiry or
/// `evicted` by `maxmemory`. Called under the key's shard lock, so the
/// event is published in the order of the keyspace's changes; clients
/// tracking the key are told too.
pub fn key_gone(server: &Server, event: &str, db: usize, key: &[u8]) {
    crate::exec::tracking::invalidate_key(server, None, key);
    let class = if event == "evicted" {
        class::EVICTED
    } else {
        class::EXPIRED
    };
    publish_event(server, None, class, event, db, key);
}

/// Publishes the events a command's keyspace view has pending: `expired`
/// for keys it found expired (not yet announced), `keymiss` for keys its
/// read lookups missed, and `new` for the keys it created. Called before
/// each of the command's own events and when it ends, so they come in
/// Redis's order. Expired keys are also invalidated
/// for tracking clients.
pub fn flush_pending(ctx: &mut Ctx<'_>) {
    let server = ctx.server;
    let expired = ctx.keys.expired_since(ctx.expired_announced);
    if !expired.is_empty() {
        ctx.expired_announced += expired.len();
        for (db, key) in expired {
            let mut l = Local {
                session: ctx.session,
                out: ctx.out,
            };
            publish_event(server, Some(&mut l), class::EXPIRED, "expired", db, &key);
            crate::exec::tracking::invalidate_key(server, Some(&mut l), &key);
        }
    }
    for (db, key) in ctx.keys.take_misses() {
        let mut l = Local {
            session: ctx.session,
            out: ctx.out,
        };
        publish_event(server, Some(&mut l), class::KEY_MISS, "keymiss", db, &key);
    }
    for (db, key) in ctx.keys.take_created() {
        let mut l = Local {
            session: ctx.session,
            out: ctx.out,
        };
        publish_event(server, Some(&mut l), class::NEW, "new", db, &key);
    }
}

/// `Ctx::notify`'s slow half: the class is on.
pub fn command_event(ctx: &mut Ctx<'_>, class: u32, event: &str, db: usize, key: &[u8]) {
    flush_pending(ctx);
    let server = ctx.server;
    let mut l = Local {
        session: ctx.session,
        out: ctx.out,
    };
    publish_event(server, Some(&mut l), class, event, db, key);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_print_in_redis_canonical_form() {
        let f = |s: &str| format(parse(s).unwrap());
        assert_eq!(f("KEA"), "AKE");
        assert_eq!(f("E$lg"), "g$lE");
        assert_eq!(f("AnK"), "AK");
        assert_eq!(f("nE"), "nE");
        assert_eq!(f("mKExdtehzsl$g"), "AKEm");
        assert_eq!(f(""), "");
        assert!(parse("KEq").is_none());
    }

    #[test]
    fn classes_and_hook_bits_share_the_word_without_clobbering() {
        let word = AtomicU32::new(0);
        set_classes(&word, parse("KEA").unwrap());
        word.fetch_or(hook::TRACKING, Ordering::Relaxed);
        set_classes(&word, parse("Kx").unwrap());
        let w = word.load(Ordering::Relaxed);
        assert_eq!(w & hook::TRACKING, hook::TRACKING);
        assert_eq!(w & !hook::TRACKING, parse("Kx").unwrap());
        assert_eq!(format(w), "xK");
        set_classes(&word, 0);
        assert_eq!(word.load(Ordering::Relaxed), hook::TRACKING);
        // No class letter uses the hook bits.
        assert_eq!(parse("AKEmn").unwrap() & hook::TRACKING, 0);
    }

    #[test]
    fn stored_letters_keep_every_class() {
        let all = parse("AnKEm").unwrap();
        assert_eq!(parse(&letters(all)), Some(all));
        assert_eq!(letters(parse("Kg").unwrap()), "gK");
    }
}
