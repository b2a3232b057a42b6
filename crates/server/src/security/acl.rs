//! One ACL user as Redis 7.0 models it: flags, password hashes and
//! selectors, the rules that change them (ACL SETUSER's modifiers), the
//! text that describes them back (ACL LIST, GETUSER, the ACL file), and
//! the check of a command line against them.
//!
//! Design:
//! - A [`Selector`] holds a bitmap of allowed commands indexed by the
//!   command table's dense ids (containers and subcommands each have one),
//!   plus one extra bit set only by `+@all`, which is what tells "+@all
//!   minus some" apart from "-@all plus some" when the rules are described
//!   back. Key patterns carry read/write permissions; channel patterns are
//!   plain globs.
//! - A [`User`] is a root selector plus any number of extra `(...)`
//!   selectors; a command is allowed when one selector allows it whole
//!   (command, keys and channels), and the denial reported is chosen as
//!   Redis chooses it.
//! - Rules are applied to a copy and committed only when all of them
//!   parsed, so a bad rule changes nothing; errors name the rule with
//!   Redis's wording.
//! - The check before every command is the hot path of a restricted
//!   user: a [`Compiled`] user holds each selector's verdict per command
//!   id (allowed outright, denied, first argument to test, keys and/or
//!   channels to match), decided when the rules are installed; keys are
//!   found by a plan per command (one fixed index for most, index ranges,
//!   or the general key finder), and `prefix*` patterns of up to eight
//!   bytes are matched by one masked word comparison.

use sha2::{Digest, Sha256};
use std::sync::OnceLock;
use vireo_resp::Args;
use vireo_store::glob::glob_match;

use crate::cmd::command::VariableFlags;
use crate::cmd::docs::{acl as categories, keyflags};
use crate::cmd::{flags, table, CmdRef};

/// Key pattern permissions (`%R~`, `%W~`, `~` is both).
pub mod perm {
    /// The key's value may be read.
    pub const READ: u8 = 1;
    /// The key may be written.
    pub const WRITE: u8 = 2;
    /// Both.
    pub const ALL: u8 = READ | WRITE;
}

/// What a selector's check of a command must do, as bits (none: the
/// command is allowed with any arguments).
mod verdict {
    /// The command is denied whatever its arguments.
    pub const DENIED: u8 = 1;
    /// Denied unless its first argument is one `+cmd|arg` allows.
    pub const FIRST_ARGS: u8 = 2;
    /// Its keys must match the selector's patterns.
    pub const KEYS: u8 = 4;
    /// Its channels must match the selector's channel patterns.
    pub const CHANNELS: u8 = 8;
}

/// A key pattern and what it allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    /// The glob.
    pub pattern: Vec<u8>,
    /// Bits of [`perm`].
    pub perms: u8,
    /// How the glob is matched, decided once when the rule is added.
    shape: Shape,
}

/// The shape of a key glob: most ACL patterns are a literal name or a
/// literal prefix followed by stars (`~key:*`), which a comparison decides
/// exactly as the general matcher would at a fraction of its cost (the
/// check runs before every command of a restricted user).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// No special character: the key must equal the pattern.
    Literal,
    /// A literal prefix of this length, then only stars: any key starting
    /// with the prefix, except the empty key (the matcher's quirk: an empty
    /// subject matches only the empty pattern).
    Prefix(usize),
    /// A prefix of 1 to 8 bytes (`key:*`, the common case), held as a
    /// word: one masked comparison instead of a call to `memcmp`.
    ShortPrefix(WordPrefix),
    /// Anything else: [`glob_match`].
    Glob,
}

impl Shape {
    fn of(pattern: &[u8]) -> Shape {
        let special = |b: &u8| matches!(b, b'*' | b'?' | b'[' | b'\\');
        match pattern.iter().position(special) {
            None => Shape::Literal,
            Some(at) if pattern[at..].iter().all(|&b| b == b'*') => Shape::prefix(&pattern[..at]),
            Some(_) => Shape::Glob,
        }
    }

    fn prefix(prefix: &[u8]) -> Shape {
        let len = prefix.len();
        if len == 0 || len > 8 {
            return Shape::Prefix(len);
        }
        Shape::ShortPrefix(WordPrefix {
            len,
            head: first_word(prefix),
            mask: u64::MAX >> (8 * (8 - len)),
        })
    }
}

/// A literal prefix of 1 to 8 bytes as a little-endian word (`head`) and
/// the mask of its bytes: a key starts with it when the key is at least
/// `len` long and its own first word agrees under the mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct WordPrefix {
    len: usize,
    head: u64,
    mask: u64,
}

impl WordPrefix {
    /// Whether a key of `key_len` bytes whose [`first_word`] is `word`
    /// starts with the prefix (never the empty key: `len` is at least 1).
    #[inline(always)]
    fn matches_word(&self, word: u64, key_len: usize) -> bool {
        word & self.mask == self.head && key_len >= self.len
    }
}

/// The first eight bytes of `key` as a little-endian word, zeros past its
/// end (which a [`WordPrefix`] never compares: it checks the length).
#[inline(always)]
fn first_word(key: &[u8]) -> u64 {
    match key.first_chunk::<8>() {
        Some(first) => u64::from_le_bytes(*first),
        None => {
            let mut word = [0u8; 8];
            word[..key.len()].copy_from_slice(key);
            u64::from_le_bytes(word)
        }
    }
}

impl KeyPattern {
    /// A pattern with permissions `perms`.
    fn new(pattern: &[u8], perms: u8) -> KeyPattern {
        KeyPattern {
            pattern: pattern.to_vec(),
            perms,
            shape: Shape::of(pattern),
        }
    }

    /// Whether `key` matches, as `glob_match(pattern, key)` decides.
    #[inline]
    fn matches(&self, key: &[u8]) -> bool {
        match self.shape {
            Shape::Literal => key == self.pattern.as_slice(),
            Shape::Prefix(len) => !key.is_empty() && key.starts_with(&self.pattern[..len]),
            Shape::ShortPrefix(prefix) => prefix.matches_word(first_word(key), key.len()),
            Shape::Glob => glob_match(&self.pattern, key, false),
        }
    }

    /// `~pat`, `%R~pat` or `%W~pat`, as Redis prints it.
    fn describe(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(match self.perms {
            perm::READ => b"%R~".as_slice(),
            perm::WRITE => b"%W~",
            _ => b"~",
        });
        out.extend_from_slice(&self.pattern);
    }
}

/// Command table facts the ACL needs, indexed by command id.
struct CommandFacts {
    /// Each command's categories (declared plus implied by its flags).
    categories: Vec<u32>,
    /// Each container's subcommand ids (empty for plain commands).
    children: Vec<Vec<usize>>,
    /// The ids of top-level commands, in table order.
    top: Vec<usize>,
    /// Each command's documentation (its key specs), by id.
    docs: Vec<Option<&'static crate::cmd::docs::CommandDoc>>,
    /// How each command's keys are found, by id.
    key_plans: Vec<KeyPlan>,
    /// Whether each command names channels that need permission (the
    /// Pub/Sub commands of [`channel_args`]), so others skip that test.
    names_channels: Vec<bool>,
}

/// One index-and-range key spec: (first index, last key, step, limit,
/// key-spec flags), as `docs.txt` gives it.
type RangeSpec = (i32, i32, i32, i32, u32);

/// How a command's keys are found for the check, decided once per
/// command: most commands' key specs are plain index-and-range ones, which
/// are followed here over the arguments without allocating; the rest go
/// through [`crate::cmd::command::find_keys`].
enum KeyPlan {
    /// No keys.
    NoKeys,
    /// One key at a fixed argument (GET, SET, INCR, …: most commands),
    /// when the line reaches it; `variable` when its flags depend on the
    /// arguments (SET … GET).
    Single {
        index: usize,
        flags: u32,
        variable: Option<VariableFlags>,
    },
    /// Index-and-range specs only.
    Ranges {
        specs: Vec<RangeSpec>,
        variable: Option<VariableFlags>,
    },
    /// Keyword searches, key counts, incomplete specs, no documentation.
    General,
}

impl KeyPlan {
    fn of(name: &str, doc: Option<&crate::cmd::docs::CommandDoc>) -> KeyPlan {
        use crate::cmd::docs::{BeginSearch, FindKeys};
        let Some(doc) = doc else {
            return KeyPlan::General;
        };
        let mut specs = Vec::new();
        let mut variable = false;
        for ks in &doc.key_specs {
            if ks.flags & keyflags::NOT_KEY != 0 {
                continue;
            }
            if ks.flags & keyflags::INCOMPLETE != 0 {
                return KeyPlan::General;
            }
            variable |= ks.flags & keyflags::VARIABLE_FLAGS != 0;
            match (ks.begin, ks.find) {
                (
                    BeginSearch::Index(first),
                    FindKeys::Range {
                        lastkey,
                        step,
                        limit,
                    },
                ) => specs.push((first, lastkey, step, limit, ks.flags)),
                _ => return KeyPlan::General,
            }
        }
        let variable = if variable {
            VariableFlags::of(name)
        } else {
            None
        };
        match specs.as_slice() {
            [] => KeyPlan::NoKeys,
            // spec_bounds of such a spec: the key at `first` when the line
            // reaches it.
            &[(first, 0, step, _, flags)] if first >= 0 && step > 0 => KeyPlan::Single {
                index: first as usize,
                flags,
                variable,
            },
            _ => KeyPlan::Ranges { specs, variable },
        }
    }
}

/// The argument range (first, last key) one index-and-range spec gives
/// over `argc` arguments, as `find_keys` computes it; None when the
/// arguments do not fit it.
fn spec_bounds(spec: &RangeSpec, argc: i64) -> Option<(i64, i64)> {
    let &(first, lastkey, step, limit, _) = spec;
    let first = i64::from(first);
    let last = if lastkey >= 0 {
        first + i64::from(lastkey)
    } else if limit == 0 {
        argc + i64::from(lastkey)
    } else {
        first + (argc - first) / i64::from(limit) + i64::from(lastkey)
    };
    let fits = last < argc && last >= first && first < argc && step > 0;
    fits.then_some((first, last))
}

/// Visits the keys index-and-range specs give over `argc` arguments, as
/// `find_keys` finds them, with their flags (`flags` replacing the specs'
/// own when given), without collecting them: any spec the arguments do
/// not fit means no keys, so every bound is checked before the first
/// visit. Stops at the first key `visit` refuses and returns false.
fn visit_range_keys(
    specs: &[RangeSpec],
    argc: usize,
    flags: Option<u32>,
    mut visit: impl FnMut(usize, u32) -> bool,
) -> bool {
    let argc = argc as i64;
    if specs.iter().any(|s| spec_bounds(s, argc).is_none()) {
        return true;
    }
    for spec in specs {
        let Some((first, last)) = spec_bounds(spec, argc) else {
            return true;
        };
        let kflags = flags.unwrap_or(spec.4);
        let mut i = first;
        while i <= last {
            if !visit(i as usize, kflags) {
                return false;
            }
            i += i64::from(spec.2);
        }
    }
    true
}

/// Key positions with their flags.
type Keys = smallvec::SmallVec<[(usize, u32); 4]>;

fn facts() -> &'static CommandFacts {
    static FACTS: OnceLock<CommandFacts> = OnceLock::new();
    FACTS.get_or_init(|| {
        let t = table();
        let categories = t
            .all
            .iter()
            .map(|s| crate::cmd::command::categories(s))
            .collect();
        let id_of = |name: &str| t.lookup_full(name.as_bytes()).map(|c| c.id);
        let children = t
            .all
            .iter()
            .map(|s| {
                s.subcommands
                    .iter()
                    .filter_map(|sub| id_of(sub.name))
                    .collect()
            })
            .collect();
        let top = t
            .all
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.name.contains('|'))
            .map(|(i, _)| i)
            .collect();
        let docs: Vec<_> = t
            .all
            .iter()
            .map(|s| crate::cmd::docs::doc(s.name))
            .collect();
        let key_plans = t
            .all
            .iter()
            .zip(&docs)
            .map(|(s, d)| KeyPlan::of(s.name, *d))
            .collect();
        let names_channels = t
            .all
            .iter()
            .map(|s| CHANNEL_COMMANDS.contains(&s.name))
            .collect();
        CommandFacts {
            categories,
            children,
            top,
            docs,
            key_plans,
            names_channels,
        }
    })
}

/// Bits in a command bitmap: one per command plus the "future commands"
/// bit that only `+@all` sets.
fn bitmap_bits() -> usize {
    table().all.len() + 1
}

/// The bit `+@all` sets on top of every command's.
fn future_bit() -> usize {
    table().all.len()
}

/// Why a rule was refused (Redis's `ACLSetUserStringError`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleError {
    /// ENOENT.
    UnknownCommand,
    /// EINVAL.
    Syntax,
    /// EEXIST.
    KeyAfterAll,
    /// EISDIR.
    ChannelAfterAll,
    /// ENODEV.
    NoSuchPassword,
    /// EBADMSG.
    BadHash,
    /// ECHILD.
    FirstArgOfSubcommand,
}

impl RuleError {
    /// Redis's description.
    pub fn message(self) -> &'static str {
        match self {
            RuleError::UnknownCommand => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::KeyAfterAll => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelAfterAll => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::FirstArgOfSubcommand => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// A set of permissions: the user's root one or a `(...)` selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    all_keys: bool,
    all_channels: bool,
    all_commands: bool,
    commands: Vec<u64>,
    /// Allowed first arguments of otherwise denied commands (`+select|0`),
    /// by command id.
    first_args: Vec<(usize, Vec<Vec<u8>>)>,
    patterns: Vec<KeyPattern>,
    channels: Vec<Vec<u8>>,
}

impl Selector {
    /// A selector allowing nothing; `all_channels` per `acl-pubsub-default`.
    pub fn new(all_channels: bool) -> Self {
        Selector {
            all_keys: false,
            all_channels,
            all_commands: false,
            commands: vec![0; bitmap_bits().div_ceil(64)],
            first_args: Vec::new(),
            patterns: Vec::new(),
            channels: Vec::new(),
        }
    }

    fn bit(&self, id: usize) -> bool {
        self.commands
            .get(id / 64)
            .is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if let Some(w) = self.commands.get_mut(id / 64) {
            if on {
                *w |= 1 << (id % 64);
            } else {
                *w &= !(1 << (id % 64));
                self.all_commands = false;
            }
        }
    }

    /// Allows or denies a command and, for a container, its subcommands
    /// (Redis's `ACLChangeSelectorPerm`).
    fn change_perm(&mut self, id: usize, on: bool) {
        self.set_bit(id, on);
        self.first_args.retain(|(i, _)| *i != id);
        for &sub in &facts().children[id] {
            self.set_bit(sub, on);
        }
    }

    /// `+@cat` / `-@cat` over every command and subcommand in it.
    fn change_category(&mut self, bit: u32, on: bool) {
        let f = facts();
        for &id in &f.top {
            if f.categories[id] & bit != 0 {
                self.change_perm(id, on);
            }
            for &sub in &f.children[id] {
                if f.categories[sub] & bit != 0 {
                    self.change_perm(sub, on);
                }
            }
        }
    }

    fn set_all_commands(&mut self, on: bool) {
        let fill = if on { u64::MAX } else { 0 };
        self.commands.iter_mut().for_each(|w| *w = fill);
        self.all_commands = on;
        self.first_args.clear();
    }

    /// Applies one selector rule (Redis's `ACLSetSelector`).
    pub fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let Some(&first) = op.first() else {
            return Err(RuleError::Syntax);
        };
        let is = |word: &str| op.eq_ignore_ascii_case(word.as_bytes());
        if is("allkeys") || op == b"~*" {
            self.all_keys = true;
            self.patterns.clear();
        } else if is("resetkeys") {
            self.all_keys = false;
            self.patterns.clear();
        } else if is("allchannels") || op == b"&*" {
            self.all_channels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.all_channels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.set_all_commands(true);
        } else if is("nocommands") || is("-@all") {
            self.set_all_commands(false);
        } else if first == b'~' || first == b'%' {
            self.add_key_pattern(op)?;
        } else if first == b'&' {
            self.add_channel(&op[1..])?;
        } else if (first == b'+' || first == b'-') && op.get(1) == Some(&b'@') {
            let name = std::str::from_utf8(&op[2..]).map_err(|_| RuleError::UnknownCommand)?;
            let bit = categories::by_name(name).ok_or(RuleError::UnknownCommand)?;
            self.change_category(bit, first == b'+');
        } else if first == b'+' {
            self.allow_command(&op[1..])?;
        } else if first == b'-' {
            let cmd = lookup_rule_command(&op[1..]).ok_or(RuleError::UnknownCommand)?;
            self.change_perm(cmd.id, false);
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    fn add_key_pattern(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if self.all_keys {
            return Err(RuleError::KeyAfterAll);
        }
        let (perms, offset) = if op[0] == b'%' {
            parse_key_perms(op)?
        } else {
            (perm::ALL, 1)
        };
        let pattern = &op[offset..];
        if has_spaces(pattern) {
            return Err(RuleError::Syntax);
        }
        match self.patterns.iter_mut().find(|p| p.pattern == pattern) {
            Some(p) => p.perms |= perms,
            None => self.patterns.push(KeyPattern::new(pattern, perms)),
        }
        self.all_keys = false;
        Ok(())
    }

    fn add_channel(&mut self, pattern: &[u8]) -> Result<(), RuleError> {
        if self.all_channels {
            return Err(RuleError::ChannelAfterAll);
        }
        if has_spaces(pattern) {
            return Err(RuleError::Syntax);
        }
        if !self.channels.iter().any(|c| c == pattern) {
            self.channels.push(pattern.to_vec());
        }
        Ok(())
    }

    /// `+cmd`, `+container|sub` or `+cmd|first-arg`.
    fn allow_command(&mut self, name: &[u8]) -> Result<(), RuleError> {
        let Some(bar) = name.iter().rposition(|&b| b == b'|') else {
            let cmd = lookup_rule_command(name).ok_or(RuleError::UnknownCommand)?;
            self.change_perm(cmd.id, true);
            return Ok(());
        };
        let (base, sub) = (&name[..bar], &name[bar + 1..]);
        let cmd = lookup_rule_command(base).ok_or(RuleError::UnknownCommand)?;
        if cmd.spec.name.contains('|') {
            return Err(RuleError::FirstArgOfSubcommand);
        }
        if sub.is_empty() {
            return Err(RuleError::Syntax);
        }
        if !cmd.spec.subcommands.is_empty() {
            let full = lookup_rule_command(name).ok_or(RuleError::UnknownCommand)?;
            self.change_perm(full.id, true);
            return Ok(());
        }
        tracing::warn!(
            "Deprecation warning: Allowing a first arg of an otherwise blocked command is a misuse of ACL and may get disabled in the future (offender: +{})",
            String::from_utf8_lossy(name)
        );
        let lower = sub.to_ascii_lowercase();
        match self.first_args.iter_mut().find(|(i, _)| *i == cmd.id) {
            Some((_, list)) if list.contains(&lower) => {}
            Some((_, list)) => list.push(lower),
            None => self.first_args.push((cmd.id, vec![lower])),
        }
        Ok(())
    }

    /// True when this selector lets every command touch every key and
    /// channel: the check can be skipped.
    pub fn unrestricted(&self) -> bool {
        self.all_commands && self.all_keys && self.all_channels
    }

    /// What checking command `id` under this selector must look at (bits
    /// of [`verdict`]); depends on the rules only, so a user's
    /// [`Compiled`] form keeps it per command.
    fn verdict(&self, id: usize) -> u8 {
        let f = facts();
        let spec = table().all[id];
        let mut v = 0;
        if !self.all_commands && !spec.has(flags::NO_AUTH) && !self.bit(id) {
            v |= if self.first_args.iter().any(|(i, _)| *i == id) {
                verdict::FIRST_ARGS
            } else {
                verdict::DENIED
            };
        }
        if !self.all_keys && !matches!(f.key_plans[id], KeyPlan::NoKeys) {
            v |= verdict::KEYS;
        }
        if !self.all_channels && f.names_channels[id] {
            v |= verdict::CHANNELS;
        }
        v
    }

    /// Whether the selector may run `cmd` with `args`, Redis's
    /// `ACLSelectorCheckCmd`, given the selector's verdict for it; `keys`
    /// caches the command's keys across selectors.
    #[inline]
    fn check(
        &self,
        verdict: u8,
        cmd: CmdRef,
        args: Args<'_>,
        keys: &mut KeyCache,
    ) -> Result<(), Denied> {
        if verdict == 0 {
            return Ok(());
        }
        if verdict & verdict::DENIED != 0 {
            return Err(Denied::Command);
        }
        if verdict & verdict::FIRST_ARGS != 0 && !self.first_arg_allowed(cmd, args) {
            return Err(Denied::Command);
        }
        if verdict & verdict::KEYS != 0 {
            let mut refused = None;
            keys.for_each(cmd, args, |pos, kflags| {
                let allowed = self.key_allowed(args.get(pos), kflags);
                if !allowed {
                    refused = Some(pos);
                }
                allowed
            });
            if let Some(pos) = refused {
                return Err(Denied::Key(pos));
            }
        }
        if verdict & verdict::CHANNELS != 0 {
            for (pos, is_pattern) in channel_args(cmd, args) {
                if !channel_in_list(&self.channels, args.get(pos), is_pattern) {
                    return Err(Denied::Channel(pos));
                }
            }
        }
        Ok(())
    }

    /// `+cmd|first-arg`: whether the line's first argument is one the
    /// otherwise denied command is allowed with.
    fn first_arg_allowed(&self, cmd: CmdRef, args: Args<'_>) -> bool {
        let idx = if cmd.spec.name.contains('|') { 2 } else { 1 };
        self.first_args
            .iter()
            .find(|(i, _)| *i == cmd.id)
            .zip(args.try_get(idx))
            .is_some_and(|((_, list), arg)| {
                args.len() >= 2 && list.iter().any(|a| a.eq_ignore_ascii_case(arg))
            })
    }

    /// Whether `key` may be used with key-spec flags `kflags`.
    fn key_allowed(&self, key: &[u8], kflags: u32) -> bool {
        self.all_keys || self.patterns_allow(key, required_perms(kflags))
    }

    /// Whether a key pattern with permissions `needed` matches `key`.
    #[inline(always)]
    fn patterns_allow(&self, key: &[u8], needed: u8) -> bool {
        self.patterns
            .iter()
            .any(|p| p.perms & needed == needed && p.matches(key))
    }

    /// Whether every key may be used with `perms` (`~*`, `%R~*`, allkeys).
    fn unrestricted_keys(&self, perms: u8) -> bool {
        self.all_keys
            || self
                .patterns
                .iter()
                .any(|p| p.perms & perms == perms && p.pattern == b"*")
    }

    /// The key patterns, as GETUSER's `keys` field and the rules show them.
    fn describe_keys(&self, out: &mut Vec<u8>, sep_after: bool) {
        if self.all_keys {
            out.extend_from_slice(b"~*");
            if sep_after {
                out.push(b' ');
            }
            return;
        }
        for (i, p) in self.patterns.iter().enumerate() {
            if i > 0 && !sep_after {
                out.push(b' ');
            }
            p.describe(out);
            if sep_after {
                out.push(b' ');
            }
        }
    }

    /// The channel patterns as GETUSER's `channels` field.
    fn describe_channels_field(&self) -> Vec<u8> {
        if self.all_channels {
            return b"&*".to_vec();
        }
        let mut out = Vec::new();
        for (i, c) in self.channels.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.push(b'&');
            out.extend_from_slice(c);
        }
        out
    }

    /// The selector's rules: keys, channels, commands (Redis's
    /// `ACLDescribeSelector`).
    fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.describe_keys(&mut out, true);
        if self.all_channels {
            out.extend_from_slice(b"&* ");
        } else {
            out.extend_from_slice(b"resetchannels ");
            for c in &self.channels {
                out.push(b'&');
                out.extend_from_slice(c);
                out.push(b' ');
            }
        }
        out.extend_from_slice(self.describe_commands().as_bytes());
        out
    }

    /// Counts the commands of category `bit` this selector allows and
    /// denies.
    fn count_category(&self, bit: u32) -> (usize, usize) {
        let f = facts();
        let (mut on, mut off) = (0, 0);
        for &id in &f.top {
            for i in std::iter::once(id).chain(f.children[id].iter().copied()) {
                if f.categories[i] & bit != 0 {
                    if self.bit(i) {
                        on += 1;
                    } else {
                        off += 1;
                    }
                }
            }
        }
        (on, off)
    }

    /// The command rules that rebuild this selector's bitmap: `+@all` or
    /// `-@all`, the categories that fit best, then single commands (Redis's
    /// `ACLDescribeSelectorCommandRules`, same algorithm so the same text).
    pub fn describe_commands(&self) -> String {
        let additive = !self.bit(future_bit());
        let mut rules = String::from(if additive { "-@all " } else { "+@all " });
        let mut fake = Selector::new(false);
        fake.set_all_commands(!additive);
        let mut temp = self.clone();
        let mut applied = vec![false; categories::NAMES.len()];
        loop {
            let mut best = None;
            let (mut min_diff, mut max_same) = (usize::MAX, 0);
            for (j, _) in categories::NAMES.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (on, off) = temp.count_category(1 << j);
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < min_diff || (diff == min_diff && same > max_same)) {
                    best = Some(j);
                    min_diff = diff;
                    max_same = same;
                }
            }
            let Some(j) = best else { break };
            fake.change_category(1 << j, additive);
            temp.change_category(1 << j, !additive);
            rules.push_str(if additive { "+@" } else { "-@" });
            rules.push_str(categories::NAMES[j]);
            rules.push(' ');
            applied[j] = true;
        }
        let f = facts();
        for &id in &f.top {
            self.describe_single(&mut fake, id, &mut rules);
            for &sub in &f.children[id] {
                self.describe_single(&mut fake, sub, &mut rules);
            }
            if !self.bit(id) {
                if let Some((_, list)) = self.first_args.iter().find(|(i, _)| *i == id) {
                    for a in list {
                        rules.push('+');
                        rules.push_str(table().all[id].name);
                        rules.push('|');
                        rules.push_str(&String::from_utf8_lossy(a));
                        rules.push(' ');
                    }
                }
            }
        }
        rules.pop();
        rules
    }

    /// Emits `+cmd`/`-cmd` when the fake selector differs on `id`.
    fn describe_single(&self, fake: &mut Selector, id: usize, rules: &mut String) {
        let want = self.bit(id);
        if want != fake.bit(id) {
            rules.push(if want { '+' } else { '-' });
            rules.push_str(table().all[id].name);
            rules.push(' ');
            fake.change_perm(id, want);
        }
    }
}

/// Parses the `%RW~` prefix: (permissions, offset of the pattern).
fn parse_key_perms(op: &[u8]) -> Result<(u8, usize), RuleError> {
    let mut perms = 0;
    let mut offset = 1;
    while offset < op.len() {
        match op[offset].to_ascii_uppercase() {
            b'R' if perms & perm::READ == 0 => perms |= perm::READ,
            b'W' if perms & perm::WRITE == 0 => perms |= perm::WRITE,
            b'~' => {
                offset += 1;
                break;
            }
            _ => return Err(RuleError::Syntax),
        }
        offset += 1;
    }
    // Redis accepts a pattern without permissions and later cannot print
    // it; refusing it is the only safe reading.
    if perms == 0 {
        return Err(RuleError::Syntax);
    }
    Ok((perms, offset))
}

/// The permissions a key needs for key-spec flags (Redis reads ACCESS as
/// read, INSERT/DELETE/UPDATE as write; neither needs only a name match).
fn required_perms(kflags: u32) -> u8 {
    let mut p = 0;
    if kflags & keyflags::ACCESS != 0 {
        p |= perm::READ;
    }
    if kflags & (keyflags::INSERT | keyflags::DELETE | keyflags::UPDATE) != 0 {
        p |= perm::WRITE;
    }
    p
}

/// Redis's `ACLStringHasSpaces`: whitespace or NUL.
pub fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|&b| b == 0 || b == b' ' || (b'\t'..=b'\r').contains(&b))
}

/// A command named in a rule: `name` or `container|sub` (Redis's
/// `ACLLookupCommand`, blind to rename-command).
fn lookup_rule_command(name: &[u8]) -> Option<CmdRef> {
    let parts = name.iter().filter(|&&b| b == b'|').count();
    if parts > 1 {
        return None;
    }
    let cmd = table().lookup_full(name)?;
    if parts == 1 {
        // Only a real subcommand: `get|x` names nothing.
        return cmd.spec.name.contains('|').then_some(cmd);
    }
    Some(cmd)
}

/// The commands [`channel_args`] finds channels in.
const CHANNEL_COMMANDS: &[&str] = &[
    "publish",
    "spublish",
    "subscribe",
    "ssubscribe",
    "psubscribe",
];

/// The channels a Pub/Sub command names that need permission, as
/// (argument index, is a pattern); unsubscribing needs none.
fn channel_args(cmd: CmdRef, args: Args<'_>) -> Vec<(usize, bool)> {
    match cmd.spec.name {
        "publish" | "spublish" if args.len() > 1 => vec![(1, false)],
        "subscribe" | "ssubscribe" => (1..args.len()).map(|i| (i, false)).collect(),
        "psubscribe" => (1..args.len()).map(|i| (i, true)).collect(),
        _ => Vec::new(),
    }
}

/// Whether `channel` is allowed by `list`: plain channels are matched
/// against the patterns, a subscribed pattern only literally.
pub fn channel_in_list(list: &[Vec<u8>], channel: &[u8], is_pattern: bool) -> bool {
    list.iter().any(|p| {
        if is_pattern {
            p.as_slice() == channel
        } else {
            glob_match(p, channel, false)
        }
    })
}

/// The keys of one command line with their key-spec flags, for every
/// selector that checks them: plain index-and-range specs are followed
/// over the arguments each time (arithmetic only, nothing collected; the
/// check's hot path), other commands' keys are found once and kept.
#[derive(Default)]
struct KeyCache {
    /// The keys found the general way.
    general: Option<Keys>,
    /// The flags of a command with variable flags (SET … GET), once
    /// computed.
    variable: Option<u32>,
}

impl KeyCache {
    /// Visits each key position with its flags until `visit` refuses one;
    /// false then.
    fn for_each(
        &mut self,
        cmd: CmdRef,
        args: Args<'_>,
        mut visit: impl FnMut(usize, u32) -> bool,
    ) -> bool {
        let f = facts();
        match &f.key_plans[cmd.id] {
            KeyPlan::NoKeys => true,
            &KeyPlan::Single {
                index,
                flags,
                variable,
            } => {
                if index >= args.len() {
                    return true;
                }
                let flags = match variable {
                    Some(v) => self.variable_flags(v, args),
                    None => flags,
                };
                visit(index, flags)
            }
            KeyPlan::Ranges { specs, variable } => {
                let flags = variable.map(|v| self.variable_flags(v, args));
                visit_range_keys(specs, args.len(), flags, visit)
            }
            KeyPlan::General => self
                .general
                .get_or_insert_with(|| {
                    let line: smallvec::SmallVec<[&[u8]; 8]> = args.iter().collect();
                    let found = crate::cmd::command::find_keys(cmd.spec, f.docs[cmd.id], &line);
                    found.unwrap_or_default().into_iter().collect()
                })
                .iter()
                .all(|&(pos, kflags)| visit(pos, kflags)),
        }
    }

    /// The key flags of a command whose flags vary, computed once per line.
    fn variable_flags(&mut self, v: VariableFlags, args: Args<'_>) -> u32 {
        *self
            .variable
            .get_or_insert_with(|| v.key_flags(args.len(), |i| args.get(i)))
    }
}

/// Why a command was refused; the positions are argument indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    /// The command (or subcommand) is not allowed.
    Command,
    /// The key at this argument is not allowed.
    Key(usize),
    /// The channel at this argument is not allowed.
    Channel(usize),
}

impl Denied {
    /// Redis's ordering of reasons (ACL_DENIED_CMD < KEY < CHANNEL) and
    /// then position, for picking the one to report.
    fn rank(self) -> (u8, usize) {
        match self {
            Denied::Command => (1, 0),
            Denied::Key(p) => (2, p),
            Denied::Channel(p) => (4, p),
        }
    }
}

/// A user's flags, passwords and selectors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    enabled: bool,
    nopass: bool,
    /// `sanitize-payload` (Some(true)), `skip-sanitize-payload`
    /// (Some(false)) or neither.
    sanitize: Option<bool>,
    /// SHA-256 hashes in lower-case hex.
    passwords: Vec<String>,
    /// The root selector first, then the `(...)` ones.
    selectors: Vec<Selector>,
}

impl User {
    /// A new user: off, no passwords, no permissions.
    pub fn new(all_channels: bool) -> Self {
        User {
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            selectors: vec![Selector::new(all_channels)],
        }
    }

    /// Redis's default user: on, nopass, every command, key and channel.
    pub fn default_user() -> Self {
        let mut u = User::new(false);
        for rule in ["+@all", "~*", "&*", "on", "nopass"] {
            u.apply(rule.as_bytes(), false)
                .expect("the default user's rules are valid");
        }
        u
    }

    /// True when the user may log in.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// True when any password works.
    pub fn nopass(&self) -> bool {
        self.nopass
    }

    /// True when some selector allows everything.
    pub fn unrestricted(&self) -> bool {
        self.selectors.iter().any(Selector::unrestricted)
    }

    /// Applies one rule (Redis's `ACLSetUser`); `all_channels` is what
    /// `acl-pubsub-default` gives new selectors.
    pub fn apply(&mut self, op: &[u8], all_channels: bool) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let is = |word: &str| op.eq_ignore_ascii_case(word.as_bytes());
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.sanitize = Some(false);
        } else if is("sanitize-payload") {
            self.sanitize = Some(true);
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let hash = password_operand(op)?;
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let hash = password_operand(op)?;
            let at = self.passwords.iter().position(|p| *p == hash);
            self.passwords.remove(at.ok_or(RuleError::NoSuchPassword)?);
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let mut s = Selector::new(all_channels);
            let inner = &op[1..op.len() - 1];
            let words = crate::config::split_args(&String::from_utf8_lossy(inner))
                .ok_or(RuleError::Syntax)?;
            for w in words {
                s.apply(w.as_bytes())?;
            }
            self.selectors.push(s);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            self.reset(all_channels);
        } else {
            self.selectors[0].apply(op)?;
        }
        Ok(())
    }

    fn reset(&mut self, all_channels: bool) {
        self.nopass = false;
        self.passwords.clear();
        let root = &mut self.selectors[0];
        root.all_keys = false;
        root.patterns.clear();
        root.all_channels = all_channels;
        root.channels.clear();
        self.enabled = false;
        self.sanitize = Some(true);
        self.selectors.truncate(1);
        self.selectors[0].set_all_commands(false);
    }

    /// Whether `password` is one of the user's (any, with nopass); a
    /// disabled user matches nothing.
    pub fn password_ok(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let hashed = hash_password(password);
        // Every stored hash is compared in full, as Redis's
        // time-independent comparison.
        self.passwords.iter().fold(false, |ok, p| {
            ok | constant_time_eq(p.as_bytes(), hashed.as_bytes())
        })
    }

    /// Checks a command line against every selector (Redis's
    /// `ACLCheckAllUserCommandPerm`): Ok when one allows it, else the
    /// denial Redis reports (the command if no selector allows it, else
    /// the last key or channel none could match).
    pub fn check(&self, cmd: CmdRef, args: Args<'_>) -> Result<(), Denied> {
        self.check_with(cmd, args, |_, s| s.verdict(cmd.id))
    }

    /// [`User::check`] with each selector's verdict for `cmd` from
    /// `verdict(selector index, selector)`.
    #[inline]
    fn check_with(
        &self,
        cmd: CmdRef,
        args: Args<'_>,
        verdict: impl Fn(usize, &Selector) -> u8,
    ) -> Result<(), Denied> {
        let mut cache = KeyCache::default();
        // Most users have no `(...)` selector: its denial is the answer.
        if let [only] = self.selectors.as_slice() {
            return only.check(verdict(0, only), cmd, args, &mut cache);
        }
        let mut worst = Denied::Command;
        for (i, s) in self.selectors.iter().enumerate() {
            match s.check(verdict(i, s), cmd, args, &mut cache) {
                Ok(()) => return Ok(()),
                Err(d) if d.rank() > worst.rank() => worst = d,
                Err(_) => {}
            }
        }
        Err(worst)
    }

    /// Whether a selector allows the command and every key with `perms`
    /// (SORT's BY and GET need read access to all keys).
    pub fn check_with_unrestricted_keys(&self, cmd: CmdRef, args: Args<'_>, perms: u8) -> bool {
        let mut cache = KeyCache::default();
        self.selectors.iter().any(|s| {
            s.check(s.verdict(cmd.id), cmd, args, &mut cache).is_ok() && s.unrestricted_keys(perms)
        })
    }

    /// Whether some selector lets the user use `channel`.
    pub fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.selectors
            .iter()
            .any(|s| s.all_channels || channel_in_list(&s.channels, channel, is_pattern))
    }

    /// True when some selector allows every channel.
    pub fn all_channels(&self) -> bool {
        self.selectors.iter().any(|s| s.all_channels)
    }

    /// Whether every channel pattern `old` allowed is still listed here
    /// (Redis's test before killing subscribers after ACL SETUSER).
    pub fn channels_superset_of(&self, old: &User) -> bool {
        if self.all_channels() {
            return true;
        }
        if old.all_channels() {
            return false;
        }
        let mine: Vec<&Vec<u8>> = self.selectors.iter().flat_map(|s| &s.channels).collect();
        old.selectors
            .iter()
            .flat_map(|s| &s.channels)
            .all(|c| mine.contains(&c))
    }

    /// Every channel pattern of every selector.
    pub fn channel_patterns(&self) -> Vec<Vec<u8>> {
        self.selectors
            .iter()
            .flat_map(|s| s.channels.iter().cloned())
            .collect()
    }

    /// The user's rules in ACL LIST / ACL file form (Redis's
    /// `ACLDescribeUser`).
    pub fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for flag in self.flag_names() {
            out.extend_from_slice(flag.as_bytes());
            out.push(b' ');
        }
        for p in &self.passwords {
            out.push(b'#');
            out.extend_from_slice(p.as_bytes());
            out.push(b' ');
        }
        for (i, s) in self.selectors.iter().enumerate() {
            if i == 0 {
                out.extend_from_slice(&s.describe());
            } else {
                out.extend_from_slice(b" (");
                out.extend_from_slice(&s.describe());
                out.push(b')');
            }
        }
        out
    }

    /// The flags ACL GETUSER lists, in Redis's order.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        match self.sanitize {
            Some(false) => f.push("skip-sanitize-payload"),
            Some(true) => f.push("sanitize-payload"),
            None => {}
        }
        f
    }

    /// The password hashes.
    pub fn password_hashes(&self) -> &[String] {
        &self.passwords
    }

    /// (commands, keys, channels) of each selector, root first, as ACL
    /// GETUSER shows them.
    pub fn selector_fields(&self) -> Vec<(String, Vec<u8>, Vec<u8>)> {
        self.selectors
            .iter()
            .map(|s| {
                let mut keys = Vec::new();
                s.describe_keys(&mut keys, false);
                (s.describe_commands(), keys, s.describe_channels_field())
            })
            .collect()
    }
}

/// The hash a password rule names: `>pw`/`<pw` hash the text, `#h`/`!h`
/// give the hash, which must be 64 lower-case hex digits.
fn password_operand(op: &[u8]) -> Result<String, RuleError> {
    let rest = &op[1..];
    if op[0] == b'>' || op[0] == b'<' {
        return Ok(hash_password(rest));
    }
    let valid = rest.len() == 64 && rest.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !valid {
        return Err(RuleError::BadHash);
    }
    Ok(String::from_utf8_lossy(rest).into_owned())
}

/// SHA-256 of a password, in lower-case hex (how Redis stores them).
pub fn hash_password(password: &[u8]) -> String {
    let digest = Sha256::digest(password);
    let mut s = String::with_capacity(64);
    for b in digest {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A user's rules with each selector's verdict for every command,
/// computed once when the rules are installed: the command path then
/// reads one byte per selector before walking keys or channels.
#[derive(Debug)]
pub struct Compiled {
    user: User,
    /// The command table's size.
    commands: usize,
    /// `verdicts[selector * commands + id]`.
    verdicts: Box<[u8]>,
    /// How each command is decided, by id.
    fast: Box<[Fast]>,
    /// The `prefix*` patterns of up to eight bytes of the only selector,
    /// with their permissions, for [`Fast::OneKey`]'s first try.
    word_prefixes: Box<[(WordPrefix, u8)]>,
}

/// How a compiled user decides a command: outright when its verdicts
/// allow it, or the common restricted case (one selector, the command
/// allowed, one key at a fixed place) inline on the command path.
#[derive(Clone, Copy, Debug)]
enum Fast {
    /// Some selector allows it with any arguments.
    Allowed,
    /// Every selector denies it whatever the arguments.
    Denied,
    /// The only selector allows the command; its key at `index`, when the
    /// line reaches it, must match a pattern with `needed` permissions
    /// (from the line's flags when they vary).
    OneKey {
        index: usize,
        needed: u8,
        variable: Option<VariableFlags>,
    },
    /// The selectors' checks in full.
    General,
}

impl Fast {
    /// The decision for command `id` given each selector's verdict.
    fn of(id: usize, selectors: usize, verdicts: &[u8]) -> Fast {
        if verdicts.contains(&0) {
            return Fast::Allowed;
        }
        if verdicts.iter().all(|v| v & verdict::DENIED != 0) {
            return Fast::Denied;
        }
        match (selectors, verdicts, &facts().key_plans[id]) {
            (
                1,
                [verdict::KEYS],
                &KeyPlan::Single {
                    index,
                    flags,
                    variable,
                },
            ) => Fast::OneKey {
                index,
                needed: required_perms(flags),
                variable,
            },
            _ => Fast::General,
        }
    }
}

impl Compiled {
    /// Compiles `user`.
    pub fn new(user: User) -> Compiled {
        let commands = table().all.len();
        let selectors = user.selectors.len();
        let verdicts: Box<[u8]> = user
            .selectors
            .iter()
            .flat_map(|s| (0..commands).map(|id| s.verdict(id)))
            .collect();
        let fast = (0..commands)
            .map(|id| {
                let of_id: Vec<u8> = (0..selectors)
                    .map(|i| verdicts[i * commands + id])
                    .collect();
                Fast::of(id, selectors, &of_id)
            })
            .collect();
        let word_prefixes = match user.selectors.as_slice() {
            [only] => only
                .patterns
                .iter()
                .filter_map(|p| match p.shape {
                    Shape::ShortPrefix(prefix) => Some((prefix, p.perms)),
                    _ => None,
                })
                .collect(),
            _ => Box::default(),
        };
        Compiled {
            user,
            commands,
            verdicts,
            fast,
            word_prefixes,
        }
    }

    /// [`User::check`], from the compiled verdicts: inline for the common
    /// cases, the selectors' full checks otherwise.
    #[inline(always)]
    pub fn check(&self, cmd: CmdRef, args: Args<'_>) -> Result<(), Denied> {
        // The restricted user's common case first.
        match self.fast[cmd.id] {
            Fast::OneKey {
                index,
                needed,
                variable,
            } => {
                if index >= args.len() {
                    return Ok(());
                }
                let key = args.get(index);
                let needed = match variable {
                    Some(v) => required_perms(v.key_flags(args.len(), |i| args.get(i))),
                    None => needed,
                };
                if self.only_selector_allows(key, needed) {
                    Ok(())
                } else {
                    Err(Denied::Key(index))
                }
            }
            Fast::Allowed => Ok(()),
            Fast::Denied => Err(Denied::Command),
            Fast::General => self.check_general(cmd, args),
        }
    }

    /// Whether the only selector's patterns let `key` be used with
    /// `needed` permissions: its short prefixes first, in a plain loop
    /// over one word of the key, then all its patterns.
    #[inline(always)]
    fn only_selector_allows(&self, key: &[u8], needed: u8) -> bool {
        let word = first_word(key);
        for (prefix, perms) in self.word_prefixes.iter() {
            if prefix.matches_word(word, key.len()) && perms & needed == needed {
                return true;
            }
        }
        self.only_selector_patterns_allow(key, needed)
    }

    /// Every pattern of the only selector, when no short prefix allowed
    /// the key.
    #[inline(never)]
    fn only_selector_patterns_allow(&self, key: &[u8], needed: u8) -> bool {
        self.user.selectors[0].patterns_allow(key, needed)
    }

    #[inline(never)]
    fn check_general(&self, cmd: CmdRef, args: Args<'_>) -> Result<(), Denied> {
        self.user
            .check_with(cmd, args, |i, _| self.verdicts[i * self.commands + cmd.id])
    }
}

impl std::ops::Deref for Compiled {
    type Target = User;

    fn deref(&self) -> &User {
        &self.user
    }
}

/// Joins selector definitions spread over several arguments
/// (`(+get` `~key)` → `(+get ~key)`), as Redis's
/// `ACLMergeSelectorArguments`; Err is the index of an unclosed `(`.
pub fn merge_selector_args(args: &[&[u8]]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (i, &a) in args.iter().enumerate() {
        if let Some((_, sel)) = open.as_mut() {
            sel.push(b' ');
            sel.extend_from_slice(a);
            if a.last() == Some(&b')') {
                out.push(open.take().expect("open").1);
            }
            continue;
        }
        if a.first() == Some(&b'(') && a.last() != Some(&b')') {
            open = Some((i, a.to_vec()));
            continue;
        }
        out.push(a.to_vec());
    }
    match open {
        Some((i, _)) => Err(i),
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(rules: &[&str]) -> Result<User, (String, RuleError)> {
        let mut u = User::new(false);
        for r in rules {
            u.apply(r.as_bytes(), false)
                .map_err(|e| (r.to_string(), e))?;
        }
        Ok(u)
    }

    fn describe(rules: &[&str]) -> String {
        String::from_utf8(user(rules).unwrap().describe()).unwrap()
    }

    fn check(u: &User, line: &[&str]) -> Result<(), Denied> {
        let owned = vireo_resp::OwnedArgs::from_slices(line.iter().map(|s| s.as_bytes()));
        let args = owned.as_args();
        let cmd = crate::exec::dispatch::lookup(args)
            .ok()
            .expect("known command");
        u.check(cmd, args)
    }

    #[test]
    fn default_user_describes_like_redis() {
        let d = String::from_utf8(User::default_user().describe()).unwrap();
        assert_eq!(d, "on nopass ~* &* +@all");
        assert!(User::default_user().unrestricted());
    }

    #[test]
    fn rules_describe_back() {
        assert_eq!(
            describe(&["on", "nopass", "resetchannels", "&foo", "+@all"]),
            "on nopass resetchannels &foo +@all"
        );
        assert_eq!(
            describe(&["+@all", "-client|kill"]),
            "off resetchannels +@all -client|kill"
        );
        assert_eq!(
            describe(&["+memory|doctor"]),
            "off resetchannels -@all +memory|doctor"
        );
        assert_eq!(
            describe(&["+memory|doctor", "+memory"]),
            "off resetchannels -@all +memory"
        );
        assert_eq!(
            describe(&["%R~foo", "%W~foo", "%RW~bar"]),
            "off ~foo ~bar resetchannels -@all"
        );
        assert_eq!(
            describe(&["-@all", "+select|0"]),
            "off resetchannels -@all +select|0"
        );
    }

    #[test]
    fn single_categories_describe_as_themselves() {
        for cat in categories::NAMES {
            let minus = format!("-@{cat}");
            let u = user(&["reset", "+@all", &minus]).unwrap();
            assert_eq!(u.selectors[0].describe_commands(), format!("+@all {minus}"));
            let plus = format!("+@{cat}");
            let u = user(&["reset", "-@all", &plus]).unwrap();
            assert_eq!(u.selectors[0].describe_commands(), format!("-@all {plus}"));
        }
    }

    #[test]
    fn described_rules_rebuild_the_same_user() {
        let cases: &[&[&str]] = &[
            &[
                "on",
                ">pw",
                "+@all",
                "-@string",
                "+incr",
                "-debug",
                "+debug|digest",
                "~a*",
            ],
            &[
                "+@string",
                "-incr",
                "+acl",
                "+debug|digest",
                "%R~r*",
                "(+get ~x &y)",
            ],
            &[
                "allcommands",
                "-client",
                "+client|id",
                "allkeys",
                "allchannels",
            ],
        ];
        for rules in cases {
            let u = user(rules).unwrap();
            let text = String::from_utf8(u.describe()).unwrap();
            let words = crate::config::split_args(&text).unwrap();
            let refs: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
            let mut again = User::new(false);
            for w in merge_selector_args(&refs).unwrap() {
                again.apply(&w, false).unwrap();
            }
            assert_eq!(again.describe(), u.describe(), "{text}");
            assert_eq!(
                again.selectors[0].commands, u.selectors[0].commands,
                "{text}"
            );
        }
    }

    #[test]
    fn malformed_rules_are_refused_with_redis_reasons() {
        let err = |r: &str| user(&[r]).unwrap_err().1;
        assert_eq!(err("+nosuch"), RuleError::UnknownCommand);
        assert_eq!(err("+config|asdf"), RuleError::UnknownCommand);
        assert_eq!(err("-get|key1|key2"), RuleError::UnknownCommand);
        assert_eq!(err("+get|key1|key2"), RuleError::UnknownCommand);
        assert_eq!(
            err("+config|get|appendonly"),
            RuleError::FirstArgOfSubcommand
        );
        assert_eq!(err("+@nosuch"), RuleError::UnknownCommand);
        assert_eq!(err("bogus"), RuleError::Syntax);
        assert_eq!(err("#abc"), RuleError::BadHash);
        assert_eq!(err("<nopw"), RuleError::NoSuchPassword);
        assert_eq!(err("%X~a"), RuleError::Syntax);
        assert_eq!(err("(this-is-invalid)"), RuleError::Syntax);
        assert_eq!(user(&["~*", "~a"]).unwrap_err().1, RuleError::KeyAfterAll);
        assert_eq!(
            user(&["&*", "&a"]).unwrap_err().1,
            RuleError::ChannelAfterAll
        );
    }

    #[test]
    fn passwords_are_hashed_and_checked() {
        let u = user(&["on", ">passwd4"]).unwrap();
        assert_eq!(
            u.password_hashes(),
            ["34344e4d60c2b6d639b7bd22e18f2b0b91bc34bf0ac5f9952744435093cfb4e6"]
        );
        assert!(u.password_ok(b"passwd4"));
        assert!(!u.password_ok(b"passwd5"));
        let off = user(&[">passwd4"]).unwrap();
        assert!(!off.password_ok(b"passwd4"));
    }

    #[test]
    fn keys_are_checked_by_access() {
        let u = user(&["+@all", "%R~read*", "%W~write*", "%RW~rw*"]).unwrap();
        assert_eq!(check(&u, &["get", "read"]), Ok(()));
        assert_eq!(check(&u, &["get", "write"]), Err(Denied::Key(1)));
        assert_eq!(check(&u, &["lpush", "write", "x"]), Ok(()));
        assert_eq!(check(&u, &["lpush", "read", "x"]), Err(Denied::Key(1)));
        assert_eq!(check(&u, &["exists", "write"]), Ok(()));
        assert_eq!(check(&u, &["exists", "nothing"]), Err(Denied::Key(1)));
        assert_eq!(check(&u, &["copy", "read", "write"]), Ok(()));
        assert_eq!(check(&u, &["copy", "write", "read"]), Err(Denied::Key(1)));
        assert_eq!(check(&u, &["set", "write", "v"]), Ok(()));
        assert_eq!(
            check(&u, &["set", "write", "v", "get"]),
            Err(Denied::Key(1))
        );
    }

    #[test]
    fn commands_channels_and_selectors() {
        let u = user(&["-@all", "+select|0", "+publish", "resetchannels", "&foo:*"]).unwrap();
        assert_eq!(check(&u, &["select", "0"]), Ok(()));
        assert_eq!(check(&u, &["select", "1"]), Err(Denied::Command));
        assert_eq!(check(&u, &["publish", "foo:1", "m"]), Ok(()));
        assert_eq!(check(&u, &["publish", "bar", "m"]), Err(Denied::Channel(1)));
        let s = user(&["+mget", "~key", "(+mget ~key ~otherkey)"]).unwrap();
        assert_eq!(check(&s, &["get", "key"]), Err(Denied::Command));
        assert_eq!(check(&s, &["mget", "otherkey", "x"]), Err(Denied::Key(2)));
        assert_eq!(
            check(&s, &["mget", "key", "otherkey", "x"]),
            Err(Denied::Key(3))
        );
        assert_eq!(check(&s, &["mget", "key", "otherkey"]), Ok(()));
    }

    #[test]
    fn the_key_fast_path_finds_what_the_general_finder_does() {
        let words: &[&[u8]] = &[
            b"k", b"2", b"0", b"-1", b"GET", b"STORE", b"KEYS", b"x", b"",
        ];
        let mut rng = fastrand::Rng::with_seed(5);
        let t = table();
        for cmd in t
            .all
            .iter()
            .filter_map(|s| t.lookup_full(s.name.as_bytes()))
        {
            for _ in 0..40 {
                let mut line: Vec<&[u8]> = cmd.spec.name.split('|').map(str::as_bytes).collect();
                line.extend((0..rng.usize(..7)).map(|_| words[rng.usize(..words.len())]));
                let owned = vireo_resp::OwnedArgs::from_slices(line.iter());
                let mut got = Vec::new();
                KeyCache::default().for_each(cmd, owned.as_args(), |pos, kflags| {
                    got.push((pos, kflags));
                    true
                });
                let want = crate::cmd::command::find_keys(cmd.spec, facts().docs[cmd.id], &line)
                    .unwrap_or_default();
                assert_eq!(got, want, "{line:?}");
            }
        }
    }

    /// The shapes a key pattern is matched by decide exactly as the
    /// general matcher on random patterns and keys.
    #[test]
    fn key_pattern_shapes_match_as_the_glob_matcher() {
        assert!(matches!(
            Shape::of(b"key:*"),
            Shape::ShortPrefix(WordPrefix { len: 4, .. })
        ));
        assert_eq!(Shape::of(b"a-long-prefix:*"), Shape::Prefix(14));
        assert_eq!(Shape::of(b"**"), Shape::Prefix(0));
        assert_eq!(Shape::of(b"plain"), Shape::Literal);
        assert_eq!(Shape::of(b"a*b"), Shape::Glob);
        assert_eq!(Shape::of(b"a\\*"), Shape::Glob);
        // NUL among the literal bytes: the word of a short key is padded
        // with zeros, which must never pass for the key's own bytes.
        let (plain, any): (&[u8], &[u8]) = (b"ab:\0", b"ab:**?[]\\^-");
        let mut rng = fastrand::Rng::with_seed(27);
        let mut word = |alphabet: &[u8], max: usize| -> Vec<u8> {
            (0..rng.usize(..max))
                .map(|_| alphabet[rng.usize(..alphabet.len())])
                .collect()
        };
        for _ in 0..50_000 {
            // A literal start, then anything: every shape comes up often.
            // Keys of 8 bytes and more take the short prefixes' word path.
            // Half the keys start with the pattern's literal part.
            let mut pattern = word(plain, 11);
            let literal = pattern.clone();
            pattern.extend(word(any, 4));
            let mut key = word(any, 14);
            if key.len() % 2 == 0 {
                key.splice(0..0, literal);
            }
            let p = KeyPattern::new(&pattern, perm::ALL);
            assert_eq!(
                p.matches(&key),
                glob_match(&pattern, &key, false),
                "{pattern:?} {key:?}"
            );
        }
    }

    #[test]
    fn selector_arguments_merge() {
        let args: Vec<&[u8]> = vec![b"on", b"(+get", b"~a)", b"(~b)"];
        assert_eq!(
            merge_selector_args(&args).unwrap(),
            vec![b"on".to_vec(), b"(+get ~a)".to_vec(), b"(~b)".to_vec()]
        );
        assert_eq!(merge_selector_args(&[b"(".as_slice()]), Err(0));
    }

    #[test]
    fn random_rules_never_panic_and_describe_back() {
        let words: &[&[u8]] = &[
            b"on",
            b"off",
            b"nopass",
            b"resetpass",
            b">p",
            b"<p",
            b"#",
            b"!",
            b"~",
            b"%",
            b"%R",
            b"%RW~",
            b"%WR~x",
            b"&",
            b"&*",
            b"~*",
            b"+",
            b"-",
            b"+@",
            b"-@",
            b"+@all",
            b"-@all",
            b"+get",
            b"-get",
            b"+config|get",
            b"+select|",
            b"|",
            b"(",
            b")",
            b"()",
            b"( )",
            b"(~a",
            b"reset",
            b"clearselectors",
            b"allkeys",
            b"resetkeys",
            b"\0",
            b" ",
            b"+@read",
            b"-@write",
            b"+client|",
            b"+|",
            b"-|x",
            b"sanitize-payload",
        ];
        let mut rng = fastrand::Rng::with_seed(27);
        for _ in 0..3000 {
            let mut u = User::new(rng.bool());
            for _ in 0..rng.usize(1..8) {
                let mut op = words[rng.usize(..words.len())].to_vec();
                if rng.u8(..8) == 0 {
                    op.extend((0..rng.usize(..6)).map(|_| rng.u8(..)));
                }
                let before = u.clone();
                if u.apply(&op, false).is_err() {
                    // A refused root rule may have changed nothing but the
                    // copy the caller throws away; here we just go on.
                    u = before;
                }
            }
            let _ = u.describe();
            let _ = u.selector_fields();
        }
    }

    /// A compiled user decides every line as the rules do.
    #[test]
    fn compiled_users_decide_as_their_rules() {
        let pool: &[&str] = &[
            "+@all",
            "-@all",
            "+get",
            "-set",
            "+@read",
            "-@write",
            "~k*",
            "%R~k2",
            "%W~x",
            "~k1*",
            "%R~long-key*",
            "%W~long-key:*",
            "~l?ng*",
            "allkeys",
            "resetkeys",
            "&ch",
            "allchannels",
            "resetchannels",
            "+select|0",
            "+client|id",
            "(+set ~x)",
            "(+@all %R~*)",
        ];
        let lines: &[&[&str]] = &[
            &["GET", "k1"],
            &["GET", "long-key:1"],
            &["GET", "long"],
            &["SET", "long-key:2", "v"],
            &["SET", "long-key:2", "v", "GET"],
            &["SET", "k2", "v", "GET"],
            &["SET", "x", "v"],
            &["MSET", "k1", "a", "x", "b"],
            &["SELECT", "0"],
            &["SELECT", "1"],
            &["CLIENT", "ID"],
            &["PUBLISH", "ch", "m"],
            &["SUBSCRIBE", "other"],
            &["PING"],
            &["AUTH", "a", "b"],
            &["BITFIELD", "k1", "GET", "u8", "0"],
            &["SORT", "k1", "BY", "x"],
        ];
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..300 {
            let mut u = User::new(rng.bool());
            for _ in 0..rng.usize(1..6) {
                let _ = u.apply(pool[rng.usize(..pool.len())].as_bytes(), false);
            }
            let compiled = Compiled::new(u.clone());
            for line in lines {
                let owned = vireo_resp::OwnedArgs::from_slices(line.iter().map(|s| s.as_bytes()));
                let args = owned.as_args();
                let cmd = crate::exec::dispatch::lookup(args)
                    .ok()
                    .expect("known command");
                assert_eq!(
                    compiled.check(cmd, args),
                    u.check(cmd, args),
                    "{line:?} under {}",
                    String::from_utf8_lossy(&u.describe())
                );
            }
        }
    }
}
