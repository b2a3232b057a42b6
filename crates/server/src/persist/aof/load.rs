//! Loading the AOF at start-up: the manifest, then the base and the
//! incremental files in order, each command replayed through the normal
//! command path by a fake client (Redis's `loadAppendOnlyFiles`).
//!
//! A torn tail of the last file is cut off when `aof-load-truncated` is
//! yes (and refused otherwise); a torn non-last file, a format error or an
//! unknown command stops start-up with Redis's messages, plus the offset.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use vireo_resp::{OwnedArgs, Protocol, ReplyBuf};

use super::manifest::Manifest;
use super::reader::{CommandReader, ReadError};
use super::{dir_path, short_read_advice};
use crate::exec::dispatch;
use crate::net::client::ClientShared;
use crate::net::session::Session;
use crate::server::Server;

/// How loading one file ended, when it did not fail.
#[derive(Debug, PartialEq, Eq)]
enum FileLoaded {
    /// Every command was replayed.
    Ok,
    /// The file is empty.
    Empty,
    /// A torn tail was cut off (allowed for the last file only).
    Truncated,
}

/// Reads the manifest (if the AOF directory has one) and replays every
/// file it lists. Ok(None) when there is no AOF to load; Ok(Some) is the
/// manifest loaded; Err is a fatal start-up error (the caller logs it).
pub fn load_at_start(server: &Server) -> Result<Option<Manifest>, String> {
    let dir = dir_path(server);
    let name = format!("{}.manifest", server.config.appendfilename());
    let path = dir.join(&name);
    let manifest = if path.exists() && !interrupted_upgrade(server, &path) {
        let text = std::fs::read(&path).map_err(|e| {
            format!(
                "Fatal error: can't open the AOF manifest file {} for reading: {e}",
                path.display()
            )
        })?;
        Manifest::parse(&text).map_err(|e| format!("*** FATAL AOF MANIFEST FILE ERROR *** {e}"))?
    } else {
        match upgrade_single_file(server)? {
            Some(m) => m,
            None => return Ok(None),
        }
    };
    let files: Vec<String> = manifest.load_order().map(|f| f.name.clone()).collect();
    for name in &files {
        if !dir.join(name).exists() {
            return Err(format!(
                "The append log file {name} doesn't exist: No such file or directory"
            ));
        }
    }
    let mut fake = fake_session();
    for (i, name) in files.iter().enumerate() {
        let last = i + 1 == files.len();
        let start = std::time::Instant::now();
        let res = load_file(server, &mut fake, &dir.join(name), name)?;
        if res == FileLoaded::Truncated && !last {
            return Err("Fatal error: the truncated file is not the last file".into());
        }
        let kind = if i == 0 && manifest.base.is_some() {
            "base"
        } else {
            "incr"
        };
        tracing::info!(
            "DB loaded from {kind} file {name}: {:.3} seconds",
            start.elapsed().as_secs_f64()
        );
    }
    Ok(Some(manifest))
}

/// Whether the manifest at `path` is what an upgrade interrupted before
/// its rename leaves (Redis's third `aofUpgradePrepare` case): the old
/// single file is still in `dir`, and the manifest lists only a base of
/// that name, which the AOF directory lacks. The upgrade then runs again.
fn interrupted_upgrade(server: &Server, path: &Path) -> bool {
    let name = server.config.appendfilename();
    if !Path::new(&name).is_file() || dir_path(server).join(&name).exists() {
        return false;
    }
    let Ok(Ok(manifest)) = std::fs::read(path).map(|t| Manifest::parse(&t)) else {
        return false;
    };
    manifest.incr.is_empty() && manifest.base.is_some_and(|b| b.name == name)
}

/// A Redis 6 style single AOF file (`appendfilename` in `dir`, no
/// manifest) becomes the base of a multi-part set: listed in a new
/// manifest, then moved into the AOF directory, as Redis 7.0's
/// `aofUpgradePrepare` does. None when there is no such file.
fn upgrade_single_file(server: &Server) -> Result<Option<Manifest>, String> {
    let name = server.config.appendfilename();
    let old = std::path::PathBuf::from(&name);
    if !old.is_file() {
        return Ok(None);
    }
    let dir = dir_path(server);
    std::fs::create_dir_all(&dir).map_err(|e| {
        format!(
            "Can't open or create append-only dir {}: {e}",
            dir.display()
        )
    })?;
    let manifest = Manifest {
        base: Some(super::manifest::AofFile {
            name: name.clone(),
            seq: 1,
            kind: super::manifest::Kind::Base,
        }),
        base_seq: 1,
        ..Manifest::default()
    };
    super::persist_manifest(server, &manifest)
        .map_err(|e| format!("Can't persist the AOF manifest: {e}"))?;
    std::fs::rename(&old, dir.join(&name))
        .map_err(|e| format!("Error trying to move the old AOF file {name}: {e}"))?;
    tracing::info!(
        "Successfully migrated an old-style AOF file ({name}) into the AOF directory ({}).",
        dir.display()
    );
    Ok(Some(manifest))
}

/// The client AOF commands run as: authenticated, database 0, not
/// registered anywhere (CLIENT LIST does not show it).
fn fake_session() -> Session {
    let shared = Arc::new(ClientShared::new(
        u64::MAX,
        String::new(),
        String::new(),
        -1,
        0,
        false,
    ));
    let mut session = Session::new(shared, true);
    session.replaying = true;
    session
}

/// Loads the RDB image at the start of `path` into the keyspace; returns
/// the offset just after it.
pub fn load_rdb(server: &Server, path: &Path) -> Result<u64, String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    crate::persist::rdb::load_stream(server, file).map(|(_, offset)| offset)
}

/// Replays one file.
fn load_file(
    server: &Server,
    session: &mut Session,
    path: &Path,
    name: &str,
) -> Result<FileLoaded, String> {
    let mut file = File::open(path).map_err(|e| {
        format!("Fatal error: can't open the append log file {name} for reading: {e}")
    })?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len == 0 {
        return Ok(FileLoaded::Empty);
    }
    let mut sig = [0u8; 5];
    let n = file.read(&mut sig).unwrap_or(0);
    drop(file);
    // An RDB base (or an old-style RDB preamble): its image, then any
    // commands after it.
    let start = if n == 5 && &sig == b"REDIS" {
        tracing::info!("Reading RDB base file on AOF loading...");
        load_rdb(server, path).map_err(|e| {
            format!("Error reading the RDB base file {name}, AOF loading aborted: {e}")
        })?
    } else {
        0
    };
    let mut file = File::open(path).map_err(|e| format!("{name}: {e}"))?;
    file.seek(SeekFrom::Start(start))
        .map_err(|e| format!("{name}: {e}"))?;
    let mut reader = CommandReader::new(BufReader::with_capacity(64 * 1024, file), start);
    let mut out = ReplyBuf::new(Protocol::Resp2);
    let mut before_multi = 0;
    session.db = 0;
    let outcome = loop {
        let at = reader.offset();
        match reader.next_command() {
            Ok(Some(cmd)) => {
                let name0 = &cmd[0];
                let Some(command) = dispatch::command_name(name0) else {
                    return Err(format!(
                        "Unknown command '{}' reading the append only file {name}",
                        String::from_utf8_lossy(name0)
                    ));
                };
                if command == "multi" {
                    before_multi = at;
                }
                let args = OwnedArgs::from_slices(&cmd);
                dispatch::run(server, session, &mut out, args.as_args(), None);
                out.clear();
            }
            Ok(None) => {
                if session.in_multi() {
                    tracing::warn!("Revert incomplete MULTI/EXEC transaction in AOF file {name}");
                    crate::exec::multi::discard_transaction(server, session);
                    break Some(before_multi);
                }
                break None;
            }
            Err(ReadError::Truncated) => {
                let valid = if session.in_multi() {
                    crate::exec::multi::discard_transaction(server, session);
                    before_multi
                } else {
                    reader.offset()
                };
                break Some(valid);
            }
            Err(ReadError::Format(what)) => {
                return Err(format!(
                    "Bad file format reading the append only file {name}: \
                     make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest> \
                     (at offset {}: {what})",
                    reader.offset()
                ));
            }
            Err(ReadError::Io(e)) => {
                return Err(format!(
                    "Unrecoverable error reading the append only file {name}: {e}"
                ));
            }
        }
    };
    let Some(valid) = outcome else {
        return Ok(FileLoaded::Ok);
    };
    if !server.config.aof_load_truncated() {
        return Err(short_read_advice(name));
    }
    tracing::warn!("!!! Warning: short read while loading the AOF file {name}!!!");
    tracing::warn!("!!! Truncating the AOF {name} at offset {valid} !!!");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| f.set_len(valid).map(|_| f));
    if let Err(e) = f {
        return Err(format!("Error truncating the AOF file {name}: {e}"));
    }
    tracing::warn!("AOF {name} loaded anyway because aof-load-truncated is enabled");
    Ok(FileLoaded::Truncated)
}
