//! The server's ACL users: the registry every connection authenticates
//! against, the `default` user that `requirepass` sets a password on, and
//! loading and saving the ACL file and `user` config lines.
//!
//! Design: a connection holds an `Arc<UserHandle>`. The handle's rules
//! (compiled: each selector's verdict per command, `acl::Compiled`) sit
//! behind a read-write lock that ACL SETUSER replaces whole, so every
//! connection of a user sees a change at its next command, as in Redis
//! where clients point at the user itself. The handle also keeps one
//! atomic flag, "this user may run anything", which is all the command
//! path reads for the default user with its default rules: the full check
//! only runs for restricted users, and reads the rules through the
//! session's [`RulesView`], a copy refreshed when the handle's epoch (one
//! atomic load) says they changed, so no lock is taken per command.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use super::acl::{has_spaces, merge_selector_args, Compiled, RuleError, User};

/// The next rules epoch. Numbers are never reused, across users too, so
/// an epoch names one version of one user's rules.
static NEXT_EPOCH: AtomicU64 = AtomicU64::new(1);

/// A user as connections hold it.
#[derive(Debug)]
pub struct UserHandle {
    /// The user name.
    pub name: Box<[u8]>,
    rules: RwLock<Arc<Compiled>>,
    /// The epoch of the current rules, changed with them (under the lock).
    epoch: AtomicU64,
    unrestricted: AtomicBool,
}

impl UserHandle {
    fn new(name: &[u8], user: User) -> Arc<UserHandle> {
        let unrestricted = AtomicBool::new(user.unrestricted());
        Arc::new(UserHandle {
            name: name.into(),
            rules: RwLock::new(Arc::new(Compiled::new(user))),
            epoch: AtomicU64::new(NEXT_EPOCH.fetch_add(1, Ordering::Relaxed)),
            unrestricted,
        })
    }

    /// True when the user may run every command on every key and channel:
    /// the one test the command path makes for such users.
    #[inline]
    pub fn unrestricted(&self) -> bool {
        self.unrestricted.load(Ordering::Relaxed)
    }

    /// The user's current rules.
    pub fn rules(&self) -> Arc<Compiled> {
        self.rules.read().clone()
    }

    /// Replaces the rules.
    fn replace(&self, user: User) {
        let unrestricted = user.unrestricted();
        let compiled = Arc::new(Compiled::new(user));
        let mut rules = self.rules.write();
        *rules = compiled;
        self.epoch.store(
            NEXT_EPOCH.fetch_add(1, Ordering::Relaxed),
            Ordering::Release,
        );
        drop(rules);
        self.unrestricted.store(unrestricted, Ordering::Relaxed);
    }

    /// The name as text.
    pub fn name_lossy(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }
}

/// A session's copy of its user's rules, valid while the handle's epoch
/// is the one it was taken at: the command path's check reads the rules
/// without taking their lock or touching reference counts.
#[derive(Debug, Default)]
pub struct RulesView(RefCell<(u64, Option<Arc<Compiled>>)>);

impl RulesView {
    /// Runs `f` on `user`'s current rules. The view serves whichever user
    /// it is asked about: epochs are unique across users, so a copy of
    /// another user's rules never passes for this one's.
    #[inline]
    pub fn with<R>(&self, user: &UserHandle, f: impl FnOnce(&Compiled) -> R) -> R {
        f(Self::follow(&mut self.0.borrow_mut(), user))
    }

    /// `user`'s current rules, through a view the caller holds mutably
    /// (the top-level check: no `RefCell` borrow to take).
    #[inline]
    pub fn current(&mut self, user: &UserHandle) -> &Compiled {
        Self::follow(self.0.get_mut(), user)
    }

    /// The rules in `view`, copied again first when `user`'s epoch moved.
    #[inline(always)]
    fn follow<'v>(view: &'v mut (u64, Option<Arc<Compiled>>), user: &UserHandle) -> &'v Compiled {
        // An empty view has epoch 0, which no rules have.
        if view.0 != user.epoch.load(Ordering::Acquire) {
            Self::refresh(view, user);
        }
        view.1.as_deref().expect("filled with its epoch")
    }

    /// Copies `user`'s rules into `view` with the epoch they were
    /// installed with (read under the lock); out of the check's way.
    #[cold]
    #[inline(never)]
    fn refresh(view: &mut (u64, Option<Arc<Compiled>>), user: &UserHandle) {
        let rules = user.rules.read();
        *view = (user.epoch.load(Ordering::Acquire), Some(rules.clone()));
    }
}

/// What ACL SETUSER did.
#[derive(Debug)]
pub struct SetUser {
    /// The user's handle (new or existing).
    pub handle: Arc<UserHandle>,
    /// The rules before the change, for an existing user.
    pub previous: Option<User>,
}

/// The user registry.
pub struct Users {
    users: RwLock<BTreeMap<Box<[u8]>, Arc<UserHandle>>>,
    default: Arc<UserHandle>,
}

impl Default for Users {
    fn default() -> Self {
        let default = UserHandle::new(b"default", User::default_user());
        let mut users = BTreeMap::new();
        users.insert(default.name.clone(), default.clone());
        Users {
            users: RwLock::new(users),
            default,
        }
    }
}

/// Redis's error for a bad ACL SETUSER argument list.
fn setuser_error(op: &[u8], e: RuleError) -> String {
    format!(
        "ERR Error in ACL SETUSER modifier '{}': {}",
        String::from_utf8_lossy(op),
        e.message()
    )
}

/// Applies `rules` to a copy of `base`; Err is the reply.
fn apply_rules(base: User, rules: &[&[u8]], all_channels: bool) -> Result<User, String> {
    let merged = merge_selector_args(rules).map_err(|i| {
        format!(
            "ERR Unmatched parenthesis in acl selector starting at '{}'.",
            String::from_utf8_lossy(rules[i])
        )
    })?;
    let mut user = base;
    for op in &merged {
        user.apply(op, all_channels)
            .map_err(|e| setuser_error(op, e))?;
    }
    Ok(user)
}

impl Users {
    /// The `default` user.
    pub fn default_user(&self) -> Arc<UserHandle> {
        self.default.clone()
    }

    /// The default user, borrowed (the command path's check, without
    /// touching the handle's reference count).
    pub fn default_ref(&self) -> &UserHandle {
        &self.default
    }

    /// [`UserHandle::unrestricted`] of the default user.
    #[inline]
    pub fn default_unrestricted(&self) -> bool {
        self.default.unrestricted()
    }

    /// A user by name.
    pub fn get(&self, name: &[u8]) -> Option<Arc<UserHandle>> {
        self.users.read().get(name).cloned()
    }

    /// Every user, sorted by name.
    pub fn all(&self) -> Vec<Arc<UserHandle>> {
        self.users.read().values().cloned().collect()
    }

    /// The user `name` if `password` is one of its passwords and it is on.
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> Option<Arc<UserHandle>> {
        let user = self.get(name)?;
        let ok = user.rules().password_ok(password);
        ok.then_some(user)
    }

    /// Whether a new connection starts authenticated: the default user is
    /// on and needs no password.
    pub fn default_needs_no_auth(&self) -> bool {
        let d = self.default.rules();
        d.nopass() && d.enabled()
    }

    /// ACL SETUSER: creates or changes `name`; nothing changes unless every
    /// rule applies. Err is the error reply.
    pub fn set_user(
        &self,
        name: &[u8],
        rules: &[&[u8]],
        all_channels: bool,
    ) -> Result<SetUser, String> {
        if has_spaces(name) {
            return Err("ERR Usernames can't contain spaces or null characters".into());
        }
        let existing = self.get(name);
        let base = match &existing {
            Some(h) => User::clone(&h.rules()),
            None => User::new(all_channels),
        };
        let user = apply_rules(base, rules, all_channels)?;
        Ok(match existing {
            Some(handle) => {
                let previous = User::clone(&handle.rules());
                handle.replace(user);
                SetUser {
                    handle,
                    previous: Some(previous),
                }
            }
            None => {
                let handle = UserHandle::new(name, user);
                // Another SETUSER of the same name may have won the race:
                // its user stays, ours is applied over it.
                let mut users = self.users.write();
                let h = users.entry(name.into()).or_insert(handle).clone();
                SetUser {
                    handle: h,
                    previous: None,
                }
            }
        })
    }

    /// Removes a user (never `default`); returns it.
    pub fn delete(&self, name: &[u8]) -> Option<Arc<UserHandle>> {
        if name == b"default" {
            return None;
        }
        self.users.write().remove(name)
    }

    /// `requirepass`: the default user's only password, or nopass when
    /// empty (Redis's `ACLUpdateDefaultUserPassword`).
    pub fn set_default_password(&self, password: Option<&[u8]>) {
        let mut user = User::clone(&self.default.rules());
        let _ = user.apply(b"resetpass", false);
        match password {
            Some(p) => {
                let mut op = b">".to_vec();
                op.extend_from_slice(p);
                let _ = user.apply(&op, false);
            }
            None => {
                let _ = user.apply(b"nopass", false);
            }
        }
        self.default.replace(user);
    }

    /// Loads the `user` lines of the configuration at start-up (already
    /// validated); the default user is reset first when redefined.
    pub fn load_config_lines(
        &self,
        lines: &[Vec<Vec<u8>>],
        all_channels: bool,
    ) -> Result<(), String> {
        for line in lines {
            let Some((name, rules)) = line.split_first() else {
                continue;
            };
            let base = if name.as_slice() == b"default" {
                let mut d = User::clone(&self.default.rules());
                d.apply(b"reset", all_channels)
                    .map_err(|e| e.message().to_string())?;
                d
            } else {
                User::new(all_channels)
            };
            let refs: Vec<&[u8]> = rules.iter().map(Vec::as_slice).collect();
            let user = apply_rules(base, &refs, all_channels).map_err(|e| {
                format!(
                    "Error loading ACL rule for the user named '{}': {}",
                    String::from_utf8_lossy(name),
                    e.trim_start_matches("ERR ")
                )
            })?;
            self.install(name, user);
        }
        Ok(())
    }

    fn install(&self, name: &[u8], user: User) {
        if name == b"default" {
            self.default.replace(user);
            return;
        }
        let handle = UserHandle::new(name, user);
        self.users.write().insert(name.into(), handle);
    }

    /// ACL LOAD (and start-up with `aclfile`): replaces every user with the
    /// file's; on any error nothing changes and Err lists the problems as
    /// Redis words them. Ok holds the users that were replaced (their
    /// clients must be disconnected).
    pub fn load_file(
        &self,
        path: &str,
        all_channels: bool,
    ) -> Result<Vec<Arc<UserHandle>>, String> {
        let text = std::fs::read(path).map_err(|e| {
            format!(
                "Error loading ACLs, opening file '{path}': {}",
                crate::config::io_reason(&e)
            )
        })?;
        let parsed = parse_acl_file(path, &text, all_channels)?;
        let mut users = self.users.write();
        let old: Vec<Arc<UserHandle>> = users
            .values()
            .filter(|u| !Arc::ptr_eq(u, &self.default))
            .cloned()
            .collect();
        users.retain(|name, _| name.as_ref() == b"default");
        let mut new_default = User::default_user();
        for (name, user) in parsed {
            if name == b"default" {
                new_default = user;
            } else {
                users.insert(name.clone().into(), UserHandle::new(&name, user));
            }
        }
        drop(users);
        self.default.replace(new_default);
        Ok(old)
    }

    /// ACL SAVE: every user in ACL file form, written atomically.
    pub fn save_file(&self, path: &str) -> std::io::Result<()> {
        let mut text = Vec::new();
        for line in self.describe_all() {
            text.extend_from_slice(&line);
            text.push(b'\n');
        }
        let tmp = format!(
            "{path}.tmp-{}-{}",
            std::process::id(),
            vireo_store::clock::now_ms()
        );
        let result = std::fs::write(&tmp, &text).and_then(|_| std::fs::rename(&tmp, path));
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    /// `user <name> <rules>` for every user, sorted by name (ACL LIST).
    pub fn describe_all(&self) -> Vec<Vec<u8>> {
        self.all()
            .iter()
            .map(|u| {
                let mut line = b"user ".to_vec();
                line.extend_from_slice(&u.name);
                line.push(b' ');
                line.extend_from_slice(&u.rules().describe());
                line
            })
            .collect()
    }
}

/// Parses an ACL file into users; Err lists every bad line, as Redis's
/// `ACLLoadFromFile` does, ending with its warning.
fn parse_acl_file(
    path: &str,
    text: &[u8],
    all_channels: bool,
) -> Result<Vec<(Vec<u8>, User)>, String> {
    let mut errors = String::new();
    let mut users: Vec<(Vec<u8>, User)> = Vec::new();
    for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
        let n = i + 1;
        let line = trim(raw);
        if line.is_empty() {
            continue;
        }
        let words: Vec<&[u8]> = line
            .split(|&b| b == b' ')
            .filter(|w| !w.is_empty())
            .collect();
        if words.first() != Some(&b"user".as_slice()) || words.len() < 2 {
            errors.push_str(&format!(
                "{path}:{n} should start with user keyword followed by the username. "
            ));
            continue;
        }
        let name = words[1];
        if has_spaces(name) {
            errors.push_str(&format!(
                "'{path}:{n}: username '{}' contains invalid characters. ",
                String::from_utf8_lossy(name)
            ));
            continue;
        }
        if users.iter().any(|(u, _)| u.as_slice() == name) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{}' found on line {n}. ",
                String::from_utf8_lossy(name)
            ));
            continue;
        }
        match parse_file_rules(&words[2..], all_channels) {
            Ok(user) => users.push((name.to_vec(), user)),
            Err(e) => errors.push_str(&format!("{path}:{n}: {e}. ")),
        }
    }
    if errors.is_empty() {
        Ok(users)
    } else {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
        );
        Err(errors)
    }
}

/// One ACL file line's rules applied to a new user; Err is the part of
/// Redis's message after the file and line.
fn parse_file_rules(words: &[&[u8]], all_channels: bool) -> Result<User, String> {
    let merged = merge_selector_args(words)
        .map_err(|_| "Unmatched parenthesis in selector definition".to_string())?;
    let mut user = User::new(all_channels);
    for op in &merged {
        let op = trim(op);
        if let Err(e) = user.apply(op, all_channels) {
            return Err(match e {
                RuleError::UnknownCommand => format!(
                    "Error in applying operation '{}': {}",
                    String::from_utf8_lossy(op),
                    e.message()
                ),
                _ => e.message().to_string(),
            });
        }
    }
    Ok(user)
}

fn trim(s: &[u8]) -> &[u8] {
    let ws = |b: &u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    let start = s.iter().position(|b| !ws(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|b| !ws(b)).map_or(start, |e| e + 1);
    &s[start..end]
}

/// Checks one `user` line of the configuration (name then rules), as
/// Redis's `ACLAppendUserForLoading`: Err is Redis's start-up message.
/// Unknown commands are let through, as Redis defers them.
pub fn validate_config_line(
    words: &[String],
    seen: &[Vec<Vec<u8>>],
) -> Result<Vec<Vec<u8>>, String> {
    let bytes: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
    let Some((&name, rules)) = bytes.split_first() else {
        return Err("Error in user declaration 'user': Wrong format".into());
    };
    if seen
        .iter()
        .any(|l| l.first().map(Vec::as_slice) == Some(name))
    {
        return Err(format!(
            "Error in user declaration '{}': Duplicate user found. A user can only be defined once in config files",
            String::from_utf8_lossy(name)
        ));
    }
    let merged = merge_selector_args(rules).map_err(|i| {
        format!(
            "Error in user declaration '{}': Wrong format",
            String::from_utf8_lossy(rules[i])
        )
    })?;
    let mut fake = User::new(false);
    for op in &merged {
        match fake.apply(op, false) {
            Ok(()) | Err(RuleError::UnknownCommand) => {}
            Err(e) => {
                return Err(format!(
                    "Error in user declaration '{}': {}",
                    String::from_utf8_lossy(op),
                    e.message()
                ))
            }
        }
    }
    let mut line = vec![name.to_vec()];
    line.extend(merged);
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session's view follows ACL SETUSER at its next check, and one
    /// view asked about two users never serves one's rules for the other.
    #[test]
    fn rules_views_follow_changes_and_users() {
        let users = Users::default();
        let a = users
            .set_user(b"a", &[b"on", b"+get"], false)
            .unwrap()
            .handle;
        let b = users
            .set_user(b"b", &[b"on", b"+set"], false)
            .unwrap()
            .handle;
        let view = RulesView::default();
        let owned = vireo_resp::OwnedArgs::from_slices([b"get".as_slice(), b"k"]);
        let get = crate::exec::dispatch::lookup(owned.as_args()).ok().unwrap();
        let allowed = |h: &UserHandle| view.with(h, |r| r.check(get, owned.as_args()).is_ok());
        assert!(!allowed(&a), "no key patterns yet");
        users.set_user(b"a", &[b"~k"], false).unwrap();
        assert!(allowed(&a));
        assert!(!allowed(&b));
        assert!(allowed(&a));
        users.set_user(b"a", &[b"-get"], false).unwrap();
        assert!(!allowed(&a));
    }

    /// The mutable access of the top-level check follows changes as the
    /// shared one does.
    #[test]
    fn current_rules_follow_changes() {
        let users = Users::default();
        let a = users
            .set_user(b"a", &[b"on", b"+get"], false)
            .unwrap()
            .handle;
        let owned = vireo_resp::OwnedArgs::from_slices([b"get".as_slice(), b"k"]);
        let get = crate::exec::dispatch::lookup(owned.as_args()).ok().unwrap();
        let mut view = RulesView::default();
        let mut allowed = |h: &UserHandle| view.current(h).check(get, owned.as_args()).is_ok();
        assert!(!allowed(&a));
        users.set_user(b"a", &[b"~k*"], false).unwrap();
        assert!(allowed(&a));
        users
            .set_user(b"a", &[b"resetkeys", b"%W~k*"], false)
            .unwrap();
        assert!(!allowed(&a), "GET needs read access");
        assert!(allowed(&users.default_user()));
    }

    #[test]
    fn setuser_is_all_or_nothing() {
        let users = Users::default();
        users.set_user(b"u", &[b"on", b">p"], false).unwrap();
        let err = users
            .set_user(b"u", &[b"off", b"+nosuch"], false)
            .err()
            .unwrap();
        assert_eq!(
            err,
            "ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL"
        );
        assert!(users.authenticate(b"u", b"p").is_some());
        assert!(users.set_user(b"a b", &[], false).is_err());
        assert!(users
            .set_user(b"s", &[b"(+get"], false)
            .unwrap_err()
            .contains("Unmatched"));
        assert!(users.get(b"s").is_none());
    }

    #[test]
    fn requirepass_sets_the_default_password() {
        let users = Users::default();
        assert!(users.default_needs_no_auth());
        users.set_default_password(Some(b"foo"));
        assert!(!users.default_needs_no_auth());
        assert!(users.authenticate(b"default", b"foo").is_some());
        assert!(users.authenticate(b"default", b"bar").is_none());
        users.set_default_password(None);
        assert!(users.default_needs_no_auth());
    }

    #[test]
    fn acl_files_load_and_report_bad_lines() {
        let dir = std::env::temp_dir().join(format!("vireo-acl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("users.acl");
        let p = path.to_str().unwrap();
        std::fs::write(
            &path,
            "user alice on >a ~* +@all\n\nuser bob on (+get ~r*)\n",
        )
        .unwrap();
        let users = Users::default();
        users.load_file(p, false).unwrap();
        assert!(users.authenticate(b"alice", b"a").is_some());
        assert_eq!(users.all().len(), 3);
        std::fs::write(
            &path,
            "user alice on\nbogus\nuser alice off\nuser x +nosuch\n",
        )
        .unwrap();
        let err = users.load_file(p, false).unwrap_err();
        assert!(
            err.contains(&format!("{p}:2 should start with user keyword")),
            "{err}"
        );
        assert!(
            err.contains("Duplicate user 'alice' found on line 3"),
            "{err}"
        );
        assert!(
            err.contains("Error in applying operation '+nosuch'"),
            "{err}"
        );
        assert!(err.ends_with("no change to the previously active ACL rules was performed"));
        assert!(users.get(b"bob").is_some());
        users.save_file(p).unwrap();
        let saved = std::fs::read_to_string(&path).unwrap();
        assert!(saved.starts_with("user alice on #"), "{saved}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn config_lines_are_validated() {
        let w = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        let first = validate_config_line(&w("foo on +nosuchyet"), &[]).unwrap();
        let dup = validate_config_line(&w("foo off"), &[first]).unwrap_err();
        assert!(dup.contains("Duplicate user"), "{dup}");
        let bad = validate_config_line(&w("bar bogus"), &[]).unwrap_err();
        assert_eq!(bad, "Error in user declaration 'bogus': Syntax error");
    }
}
