//! Values whose type lives outside the store (Redis's module types).
//!
//! The store holds, persists and copies values of every type, but an
//! engine like SQLite belongs in its own crate (`vireo-sql`), which the
//! store must not depend on. Such a type implements [`ModuleType`]; the
//! keyspace holds it as a [`ModuleValue`] (an `Arc`, so a command can take
//! a reference and let go of the shard lock before long work), and RDB
//! files carry it as Redis's `RDB_TYPE_MODULE_2` record under the type's
//! 64-bit module id. Loading finds the decoder through [`register`],
//! which the server calls at start-up for each type it knows.

use std::any::Any;
use std::sync::{Arc, OnceLock};

use parking_lot::RwLock;

/// The characters a module type name is made of, in the order Redis packs
/// them into module ids (6 bits each).
const ID_CHARSET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// A value type implemented outside the store.
pub trait ModuleType: Send + Sync + std::fmt::Debug + 'static {
    /// The 9-character type name TYPE reports and the module id encodes.
    fn type_name(&self) -> &'static str;
    /// The RDB module id ([`module_id`] of the name and encoding version).
    fn module_id(&self) -> u64;
    /// Heap bytes the value holds, for MEMORY USAGE.
    fn heap_bytes(&self) -> usize;
    /// The value's payload for RDB, DUMP and the AOF rewrite.
    fn serialize(&self) -> Vec<u8>;
    /// A deep copy (COPY makes a new, independent value).
    fn duplicate(&self) -> Result<ModuleValue, String>;
    /// The concrete value, for the commands of its type.
    fn as_any(&self) -> &dyn Any;
    /// The shared value as `Any`, so a command can hold its concrete `Arc`
    /// (`Arc::downcast`) after letting go of the shard lock.
    fn into_any_arc(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

/// A module value as the keyspace holds it. Cloning copies the value deep
/// (as Redis's module `copy` callback): two keys never share one.
#[derive(Debug)]
pub struct ModuleValue(pub Arc<dyn ModuleType>);

impl ModuleValue {
    /// Wraps a value.
    pub fn new(v: Arc<dyn ModuleType>) -> Self {
        ModuleValue(v)
    }

    /// The shared value, for running work on it without the shard lock.
    pub fn shared(&self) -> Arc<dyn ModuleType> {
        Arc::clone(&self.0)
    }
}

impl Clone for ModuleValue {
    /// A deep copy; a copy that cannot be made (out of memory inside the
    /// engine) panics, which the server's dispatcher turns into an error
    /// reply. COPY uses [`ModuleType::duplicate`] to reply the error itself.
    fn clone(&self) -> Self {
        match self.0.duplicate() {
            Ok(v) => v,
            Err(e) => panic!("cannot copy a {} value: {e}", self.0.type_name()),
        }
    }
}

impl PartialEq for ModuleValue {
    /// The same value (identity: engines have no cheap equality).
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Redis's module id for a 9-character type name from [`ID_CHARSET`] and
/// an encoding version below 1024; None for an invalid name.
pub const fn module_id(name: &[u8; 9], encver: u64) -> Option<u64> {
    let mut id = 0u64;
    let mut i = 0;
    while i < 9 {
        let mut j = 0;
        while j < 64 && ID_CHARSET[j] != name[i] {
            j += 1;
        }
        if j == 64 || encver >= 1024 {
            return None;
        }
        id = (id << 6) | j as u64;
        i += 1;
    }
    Some((id << 10) | encver)
}

/// The type name a module id encodes (what Redis prints when it meets an
/// id it has no module for).
pub fn module_name(id: u64) -> String {
    let mut name = [0u8; 9];
    let mut bits = id >> 10;
    for c in name.iter_mut().rev() {
        *c = ID_CHARSET[(bits & 63) as usize];
        bits >>= 6;
    }
    String::from_utf8_lossy(&name).into_owned()
}

/// Rebuilds a value from its payload; an error says why it cannot.
pub type Decoder = fn(&[u8]) -> Result<ModuleValue, String>;

fn registry() -> &'static RwLock<Vec<(u64, Decoder)>> {
    static REGISTRY: OnceLock<RwLock<Vec<(u64, Decoder)>>> = OnceLock::new();
    REGISTRY.get_or_init(|| RwLock::new(Vec::new()))
}

/// Makes RDB loading and RESTORE accept values of module `id`, rebuilt by
/// `decode`. Registering an id again replaces its decoder.
pub fn register(id: u64, decode: Decoder) {
    let mut r = registry().write();
    r.retain(|(i, _)| *i != id);
    r.push((id, decode));
}

/// The decoder registered for `id`.
pub(crate) fn decoder(id: u64) -> Option<Decoder> {
    registry()
        .read()
        .iter()
        .find(|(i, _)| *i == id)
        .map(|(_, d)| *d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_pack_the_name_and_version_as_redis_does() {
        let id = module_id(b"vireo-sql", 1).unwrap();
        assert_eq!(id & 1023, 1);
        assert_eq!(module_name(id), "vireo-sql");
        assert_eq!(module_id(b"bad name!", 1), None);
        assert_eq!(module_id(b"abcdefghi", 1024), None);
    }
}
