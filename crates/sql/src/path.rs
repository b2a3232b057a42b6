//! Where file-backed databases may live.
//!
//! `REDISQL.CREATE_DB key path` opens a file; clients are not trusted with
//! the whole file system, so a path must resolve inside the server's `dir`
//! (the working directory: Vireo, like Redis, changes into `dir`) unless
//! the `sql-allow-any-path` parameter allows any. Relative paths are taken
//! from `dir`; symbolic links and `..` are resolved before the check. The
//! same rule applies when a payload (RDB, RESTORE) names a file.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::SqlError;

static ALLOW_ANY: AtomicBool = AtomicBool::new(false);

/// Sets whether paths outside `dir` are accepted (`sql-allow-any-path`).
pub fn set_allow_any_path(allow: bool) {
    ALLOW_ANY.store(allow, Ordering::Relaxed);
}

/// The file `path` names, made absolute with symbolic links resolved in
/// its directory; an error if it escapes `dir` (and that is not allowed),
/// names a directory, or its directory does not exist.
pub fn resolve(path: &[u8]) -> Result<PathBuf, SqlError> {
    let refuse = |why: &str| SqlError::Path(format!("invalid SQL database path: {why}"));
    if path.is_empty() || path.contains(&0) {
        return Err(refuse("empty or contains NUL"));
    }
    let base = std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .map_err(|e| refuse(&e.to_string()))?;
    let full = base.join(OsStr::from_bytes(path));
    let name = match full.components().next_back() {
        Some(Component::Normal(n)) => n.to_owned(),
        _ => return Err(refuse("not a file name")),
    };
    let parent = full
        .parent()
        .ok_or_else(|| refuse("no directory"))?
        .canonicalize()
        .map_err(|e| refuse(&e.to_string()))?;
    if !parent.starts_with(&base) && !ALLOW_ANY.load(Ordering::Relaxed) {
        return Err(refuse("outside dir (see sql-allow-any-path)"));
    }
    let resolved = parent.join(name);
    if resolved.is_dir() {
        return Err(refuse("is a directory"));
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_must_stay_under_the_working_directory() {
        // The test binary runs in the crate's directory.
        let here = std::env::current_dir().unwrap().canonicalize().unwrap();
        assert_eq!(resolve(b"x.db").unwrap(), here.join("x.db"));
        assert_eq!(resolve(b"src/../y.db").unwrap(), here.join("y.db"));
        assert!(resolve(b"../escape.db").is_err());
        assert!(resolve(b"/tmp/abs.db").is_err());
        assert!(resolve(b"").is_err());
        assert!(resolve(b"src").is_err());
        assert!(resolve(b"no/such/dir/z.db").is_err());
        assert!(resolve(b"..").is_err());
    }
}
