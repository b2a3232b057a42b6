//! `oom-score-adj` and `oom-score-adj-values`: how willing the kernel's
//! OOM killer should be to pick this process, as Redis sets it.
//!
//! With `oom-score-adj` `yes` or `relative`, `/proc/self/oom_score_adj`
//! becomes the value of the process's class (the first value for a
//! master, the second for a replica) plus the score the process had when
//! Vireo first took control of it; `absolute` writes the value alone. The
//! result is clamped to the kernel's -1000..=1000. Turning it `no` again
//! puts the original score back. The class changes with REPLICAOF.
//!
//! Redis's third class is its fork children (BGSAVE, AOF rewrite); Vireo
//! snapshots without forking, so there is no such process to adjust.

use parking_lot::Mutex;

use crate::config::Config;

const PROC_FILE: &str = "/proc/self/oom_score_adj";

/// The score read before Vireo first changed it, while it is in control.
static BASE: Mutex<Option<i64>> = Mutex::new(None);

/// Redis's reply when the score cannot be written (CONFIG SET rolls back).
pub const FAILED: &str = "Failed to set current oom_score_adj. Check server logs.";

/// Writes the score the configuration asks for, for a master or a
/// replica. Err (logged) when the file cannot be read or written.
pub fn apply(config: &Config, replica: bool) -> std::io::Result<()> {
    apply_to(PROC_FILE, config, replica)
}

/// [`apply`] against `path` (tests use a plain file).
fn apply_to(path: &str, config: &Config, replica: bool) -> std::io::Result<()> {
    let mode = config.get_one("oom-score-adj").unwrap_or_default();
    let values = config.get_one("oom-score-adj-values").unwrap_or_default();
    let class_value = values
        .split_whitespace()
        .nth(usize::from(replica))
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(0);
    let mut base = BASE.lock();
    let score = match (mode.as_str(), *base) {
        ("no", None) => return Ok(()),
        ("no", Some(original)) => {
            *base = None;
            original
        }
        (mode, known) => {
            let original = match known {
                Some(b) => b,
                None => {
                    let b = read_score(path)?;
                    *base = Some(b);
                    b
                }
            };
            let relative = if mode == "absolute" { 0 } else { original };
            (class_value + relative).clamp(-1000, 1000)
        }
    };
    std::fs::write(path, format!("{score}\n")).inspect_err(|e| {
        tracing::warn!("Unable to write oom_score_adj: {e}");
    })
}

/// The score in `path` now.
fn read_score(path: &str) -> std::io::Result<i64> {
    let text = std::fs::read_to_string(path).inspect_err(|e| {
        tracing::warn!("Unable to read oom_score_adj: {e}");
    })?;
    Ok(text.trim().parse().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test drives the whole cycle: the base is process-wide state.
    #[test]
    fn scores_follow_mode_class_and_base() {
        let dir = std::env::temp_dir().join(format!("vireo-oom-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("oom_score_adj");
        let path = path.to_str().unwrap();
        std::fs::write(path, "22\n").unwrap();
        let read = || std::fs::read_to_string(path).unwrap();
        let config = Config::default();
        let set =
            |name: &str, value: &str| config.set(&[(name.as_bytes(), value.as_bytes())]).unwrap();
        // Off and never on: the file is not touched.
        apply_to(path, &config, false).unwrap();
        assert_eq!(read(), "22\n");
        set("oom-score-adj-values", "9 100 800");
        set("oom-score-adj", "yes");
        apply_to(path, &config, false).unwrap();
        assert_eq!(read(), "31\n");
        apply_to(path, &config, true).unwrap();
        assert_eq!(read(), "122\n");
        set("oom-score-adj", "absolute");
        apply_to(path, &config, false).unwrap();
        assert_eq!(read(), "9\n");
        set("oom-score-adj-values", "2000 2000 2000");
        apply_to(path, &config, false).unwrap();
        assert_eq!(read(), "1000\n");
        set("oom-score-adj", "no");
        apply_to(path, &config, false).unwrap();
        assert_eq!(read(), "22\n");
        // A file that cannot be read fails when taking control.
        set("oom-score-adj", "yes");
        assert!(apply_to("/nonexistent/oom_score_adj", &config, false).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
