//! `repl-diskless-load swapdb` on a replica: the master's RDB loads into a
//! staging keyspace while the old data stays in place, and the two are
//! swapped only once the whole transfer loaded (Redis's temporary
//! databases, `disklessLoadInitTempDb` and `swapMainDbWithTempDb`). A
//! failed or cut transfer leaves the old data as it was.
//!
//! When the master continues the history this replica already holds
//! (same replication id, a full sync only because the backlog lacked the
//! offset), clients keep being served the old data during the load
//! (`async_loading`); otherwise they get -LOADING as with any load.

use std::io::Read;

use super::replica::{attach_to_new_master, free_all, load_flagged, read_to_mark, PayloadReader};
use crate::persist::rdb::{load_stream_staged, Staging};
use crate::server::Server;

/// Loads the payload aside and swaps it in. `same_history`: the old data
/// is a point of the same history, served meanwhile. Err(None): the
/// failure is logged and the old data kept.
pub(super) fn load_aside<R: Read>(
    server: &Server,
    payload: &mut PayloadReader<R>,
    same_history: bool,
) -> Result<(), Option<String>> {
    let main = &server.keyspace;
    let staging_keys = vireo_store::Keyspace::new(main.databases(), main.shard_count());
    staging_keys.set_lfu_tuning(main.lfu_tuning());
    let mut staging = Staging {
        keyspace: &staging_keys,
        functions: Vec::new(),
    };
    let flag = if same_history {
        &server.rdb.async_loading
    } else {
        &server.rdb.loading
    };
    tracing::info!("MASTER <-> REPLICA sync: Loading DB in memory");
    let loaded = load_flagged(server, flag, || {
        load_stream_staged(server, &mut *payload, &mut staging)
    })
    .and_then(|()| read_to_mark(payload))
    .and_then(|()| install_functions(server, staging.functions));
    if let Err(e) = loaded {
        tracing::warn!("Failed trying to load the MASTER synchronization DB from socket: {e}");
        free_all(server, &staging_keys);
        tracing::info!("MASTER <-> REPLICA sync: Discarding temporary DB in background");
        return Err(None);
    }
    attach_to_new_master(server);
    tracing::info!("MASTER <-> REPLICA sync: Swapping active DB with loaded DB");
    {
        let mut live = main.lock_all();
        let mut loaded = staging_keys.lock_all();
        live.swap_all_with(&mut loaded);
    }
    free_all(server, &staging_keys);
    tracing::info!("MASTER <-> REPLICA sync: Discarding old DB in background");
    Ok(())
}

/// The loaded libraries replace the old ones, all at once.
fn install_functions(server: &Server, codes: Vec<Vec<u8>>) -> Result<(), String> {
    crate::exec::script::function_restore(
        server,
        usize::MAX,
        codes,
        crate::exec::script::RestorePolicy::Flush,
    )
    .map_err(|e| format!("Failed loading library: {e}"))
}
