//! A [`Database`] as a keyspace value: the store's [`ModuleType`].
//!
//! RDB files carry a database as a module value under [`MODULE_ID`] (type
//! name `vireo-sql`, encoding version 1); redis-server, which has no such
//! module, refuses the file naming that type. [`register`] tells the
//! store's loader how to rebuild one.

use std::any::Any;
use std::sync::Arc;

use vireo_store::module::{self, ModuleType, ModuleValue};

use crate::payload::{self, Parts};
use crate::Database;

/// The type name TYPE reports (9 characters, as module ids need).
pub const TYPE_NAME: &str = "vireo-sql";

/// The RDB module id of SQL databases.
pub const MODULE_ID: u64 = match module::module_id(b"vireo-sql", 1) {
    Some(id) => id,
    None => panic!("invalid module type name"),
};

/// Lets RDB loading and RESTORE rebuild SQL databases.
pub fn register() {
    module::register(MODULE_ID, |bytes| {
        Database::restore(bytes)
            .map(wrap)
            .map_err(|e| e.to_string())
    });
}

/// The keyspace value holding `db`.
pub fn wrap(db: Arc<Database>) -> ModuleValue {
    ModuleValue::new(db)
}

/// The database a keyspace value holds, None for other module types.
pub fn database_of(v: &ModuleValue) -> Option<Arc<Database>> {
    v.shared().into_any_arc().downcast::<Database>().ok()
}

impl ModuleType for Database {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn module_id(&self) -> u64 {
        MODULE_ID
    }

    fn heap_bytes(&self) -> usize {
        self.memory_bytes()
    }

    fn serialize(&self) -> Vec<u8> {
        match Database::serialize(self) {
            Ok(bytes) => bytes,
            Err(e) => {
                // Only an allocation failure inside SQLite, or a file-backed
                // database whose file can no longer be read, gets here. The
                // payload then carries no image: a file-backed database
                // comes back with what its file holds.
                tracing::warn!("SQL database not serialized ({e}); saved without its content");
                let path = self.path().map(|p| p.as_os_str().as_encoded_bytes());
                let named = self.statements();
                let statements = named.iter().map(|(n, s)| (&n[..], &s[..])).collect();
                let mut out = Vec::new();
                payload::encode(
                    &mut out,
                    &Parts {
                        path,
                        statements,
                        image: &[],
                    },
                );
                out
            }
        }
    }

    fn duplicate(&self) -> Result<ModuleValue, String> {
        Database::duplicate(self)
            .map(wrap)
            .map_err(|e| e.to_string())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn into_any_arc(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vireo_store::rdb::{dump_payload, restore_payload, EncodeOptions, LoadOptions};
    use vireo_store::Value;

    #[test]
    fn a_database_round_trips_through_a_dump_payload() {
        register();
        let db = Database::open_memory().unwrap();
        let limits = crate::RunLimits {
            max_result_bytes: 1 << 20,
            time_limit: None,
            abandon: None,
        };
        db.exec(
            b"CREATE TABLE t(a); INSERT INTO t VALUES('x')",
            crate::Access::ReadWrite,
            &limits,
        )
        .result
        .unwrap();
        let v = Value::Module(wrap(db));
        assert_eq!(v.type_name(), "vireo-sql");
        let bytes = dump_payload(v.as_ref(), &EncodeOptions::default());
        let Value::Module(back) = restore_payload(&bytes, &LoadOptions::default()).unwrap() else {
            panic!("not a module value")
        };
        let back = database_of(&back).unwrap();
        let out = back
            .exec(b"SELECT a FROM t", crate::Access::ReadOnly, &limits)
            .result
            .unwrap();
        assert_eq!(
            out,
            crate::Output::Rows {
                columns: vec![b"a".to_vec()],
                rows: vec![vec![crate::Cell::Text(b"x".to_vec())]]
            }
        );
    }
}
