//! The ACL security log (ACL LOG): denied commands, keys and channels and
//! failed authentications, newest first, bounded by `acllog-max-len`.
//! A repeat of one of the ten newest entries within a minute bumps that
//! entry's count instead of adding one, as Redis groups them, so password
//! guessing in a loop costs one entry.

use std::collections::VecDeque;

use parking_lot::Mutex;

/// Why an entry was logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A command the user may not run.
    Command,
    /// A key the user may not touch.
    Key,
    /// A channel the user may not use.
    Channel,
    /// A failed AUTH or HELLO AUTH.
    Auth,
}

impl Reason {
    fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

/// Where the denied command ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    /// Sent by the client.
    Toplevel,
    /// Inside MULTI/EXEC.
    Multi,
    /// From a script.
    Lua,
}

impl Context {
    fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// One log entry.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Times this happened (grouped repeats).
    pub count: u64,
    /// Why.
    pub reason: Reason,
    /// Where.
    pub context: Context,
    /// The command, key, channel or (for auth) the command name.
    pub object: Vec<u8>,
    /// The user.
    pub username: Vec<u8>,
    /// Last occurrence, Unix ms.
    pub ctime_ms: u64,
    /// CLIENT INFO of the last client.
    pub client_info: String,
}

/// Repeats within this many ms of an entry are grouped into it.
const GROUPING_MS: u64 = 60_000;
/// How many of the newest entries a repeat is looked for among.
const GROUPING_SCAN: usize = 10;

/// The log.
#[derive(Default)]
pub struct AclLog {
    entries: Mutex<VecDeque<Entry>>,
}

impl AclLog {
    /// Adds an event, grouping it with a recent equal one; keeps at most
    /// `max_len` entries.
    pub fn add(&self, event: Entry, max_len: usize) {
        let mut log = self.entries.lock();
        let found = log.iter().take(GROUPING_SCAN).position(|e| {
            e.reason == event.reason
                && e.context == event.context
                && e.object == event.object
                && e.username == event.username
                && event.ctime_ms.saturating_sub(e.ctime_ms) <= GROUPING_MS
        });
        if let Some(i) = found {
            let mut e = log.remove(i).expect("found");
            e.count += 1;
            e.ctime_ms = event.ctime_ms;
            e.client_info = event.client_info;
            log.push_front(e);
            return;
        }
        log.push_front(event);
        log.truncate(max_len);
    }

    /// ACL LOG RESET.
    pub fn reset(&self) {
        self.entries.lock().clear();
    }

    /// The newest `count` entries.
    pub fn newest(&self, count: usize) -> Vec<Entry> {
        self.entries.lock().iter().take(count).cloned().collect()
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops entries past a lowered `acllog-max-len` (Redis trims on the
    /// next insertion; trimming at once keeps memory bounded the same).
    pub fn trim(&self, max_len: usize) {
        self.entries.lock().truncate(max_len);
    }
}

/// The (field, value) pairs ACL LOG prints for an entry; `now_ms` gives
/// its age.
pub fn fields(e: &Entry, now_ms: u64) -> [(&'static str, FieldValue<'_>); 7] {
    [
        ("count", FieldValue::Int(e.count as i64)),
        ("reason", FieldValue::Text(e.reason.name().as_bytes())),
        ("context", FieldValue::Text(e.context.name().as_bytes())),
        ("object", FieldValue::Text(&e.object)),
        ("username", FieldValue::Text(&e.username)),
        (
            "age-seconds",
            FieldValue::Double(now_ms.saturating_sub(e.ctime_ms) as f64 / 1000.0),
        ),
        ("client-info", FieldValue::Text(e.client_info.as_bytes())),
    ]
}

/// One value of an ACL LOG entry.
pub enum FieldValue<'a> {
    /// An integer.
    Int(i64),
    /// A bulk string.
    Text(&'a [u8]),
    /// A double.
    Double(f64),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(object: &str, at: u64) -> Entry {
        Entry {
            count: 1,
            reason: Reason::Auth,
            context: Context::Toplevel,
            object: object.as_bytes().to_vec(),
            username: b"u".to_vec(),
            ctime_ms: at,
            client_info: String::new(),
        }
    }

    #[test]
    fn repeats_group_and_the_log_stays_bounded() {
        let log = AclLog::default();
        for i in 0..10_000 {
            log.add(entry("AUTH", i), 5);
        }
        assert_eq!(log.len(), 1);
        assert_eq!(log.newest(10)[0].count, 10_000);
        for i in 0..20 {
            log.add(entry(&format!("k{i}"), 1), 5);
        }
        assert_eq!(log.len(), 5);
        assert_eq!(log.newest(1)[0].object, b"k19");
        log.add(entry("late", 1), 5);
        log.add(entry("late", 1 + GROUPING_MS + 1), 5);
        assert_eq!(
            log.newest(2).iter().filter(|e| e.object == b"late").count(),
            2
        );
        log.reset();
        assert!(log.is_empty());
    }
}
