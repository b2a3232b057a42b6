//! `vireo check-aof [--fix] [--yes] <file.manifest|file.aof>`: checks an
//! AOF (a multi-part set through its manifest, or a single file) like
//! `redis-check-aof`, reporting the offset of the first bad command; with
//! `--fix` the last file is truncated there (after a confirmation on a
//! terminal, or at once with `--yes` or when stdin is not a terminal).

use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use vireo_store::rdb;

use super::manifest::Manifest;
use super::reader::{CommandReader, ReadError};

/// What checking one file found.
#[derive(Debug, PartialEq, Eq)]
pub struct FileReport {
    /// File size in bytes.
    pub size: u64,
    /// Offset up to which the file holds complete commands (outside an
    /// unfinished MULTI).
    pub ok_up_to: u64,
    /// What is wrong at `ok_up_to`, if anything.
    pub error: Option<String>,
    /// The file starts with an RDB preamble (checked, then the commands
    /// after it).
    pub rdb: bool,
}

/// Checks one AOF file: its RDB preamble if it has one (an error there is
/// returned as Err), then its command stream.
pub fn check_file(path: &Path) -> std::io::Result<FileReport> {
    let mut f = File::open(path)?;
    let size = f.metadata()?.len();
    let mut sig = [0u8; 5];
    let rdb = size >= 5 && f.read_exact(&mut sig).is_ok() && &sig == b"REDIS";
    let start = if rdb { rdb_end(path)? } else { 0 };
    let mut f = File::open(path)?;
    f.seek(SeekFrom::Start(start))?;
    let mut reader = CommandReader::new(BufReader::new(f), start);
    let mut ok_up_to = start;
    let mut in_multi = false;
    let error = loop {
        match reader.next_command() {
            Ok(None) if in_multi => break Some("Reached EOF before reading EXEC for MULTI".into()),
            Ok(None) => break None,
            Ok(Some(cmd)) => {
                let name = cmd[0].to_ascii_lowercase();
                if name == b"multi" {
                    if in_multi {
                        break Some("Unexpected MULTI".into());
                    }
                    in_multi = true;
                } else if name == b"exec" {
                    if !in_multi {
                        break Some("Unexpected EXEC".into());
                    }
                    in_multi = false;
                }
                if !in_multi {
                    ok_up_to = reader.offset();
                }
            }
            Err(ReadError::Truncated) => {
                break Some("Unexpected EOF reading the append only file".into())
            }
            Err(ReadError::Format(what)) => break Some(format!("Format error: {what}")),
            Err(ReadError::Io(e)) => return Err(std::io::Error::other(e)),
        }
    };
    Ok(FileReport {
        size,
        ok_up_to,
        error,
        rdb,
    })
}

/// Reads the RDB image at the start of `path` through to its checksum;
/// the offset after it.
fn rdb_end(path: &Path) -> std::io::Result<u64> {
    let opts = rdb::LoadOptions {
        databases: usize::MAX,
        ..rdb::LoadOptions::default()
    };
    let bad = |e: rdb::RdbError| std::io::Error::other(format!("RDB preamble: {e}"));
    let mut loader =
        rdb::Loader::with_options(BufReader::new(File::open(path)?), opts).map_err(bad)?;
    while loader.next().map_err(bad)?.is_some() {}
    Ok(loader.offset())
}

/// Line number (1-based) of byte `pos` in the file.
fn line_of(path: &Path, pos: u64) -> u64 {
    let Ok(f) = File::open(path) else {
        return 0;
    };
    let mut r = BufReader::new(f).take(pos);
    let mut lines = 1;
    let mut buf = Vec::new();
    while let Ok(n) = r.read_until(b'\n', &mut buf) {
        if n == 0 {
            break;
        }
        if buf.last() == Some(&b'\n') {
            lines += 1;
        }
        buf.clear();
    }
    lines
}

/// Options of one run.
struct Opts {
    fix: bool,
    yes: bool,
}

/// Checks (and with `fix` repairs) one file; Err ends the run with exit
/// status 1. Ok(true) when the file was truncated.
fn check_one(name: &str, path: &Path, last: bool, opts: &Opts) -> Result<bool, ()> {
    let report = match check_file(path) {
        Ok(r) => r,
        Err(e) => {
            println!("Cannot open file {}: {e}, aborting...", path.display());
            return Err(());
        }
    };
    if report.rdb {
        println!(
            "RDB preamble found; its contents are not checked by this build, assuming it is sane."
        );
        return Ok(false);
    }
    if let Some(e) = &report.error {
        println!("0x{:16x}: {e}", report.ok_up_to);
    }
    let diff = report.size - report.ok_up_to;
    println!(
        "AOF analyzed: filename={name}, size={}, ok_up_to={}, ok_up_to_line={}, diff={diff}",
        report.size,
        report.ok_up_to,
        line_of(path, report.ok_up_to)
    );
    if diff == 0 {
        return Ok(false);
    }
    if !opts.fix {
        println!("AOF {name} is not valid. Use the --fix option to try fixing it.");
        return Err(());
    }
    if !last {
        println!("Failed to truncate AOF {name} because it is not the last file");
        return Err(());
    }
    println!(
        "This will shrink the AOF {name} from {} bytes, with {diff} bytes, to {} bytes",
        report.size, report.ok_up_to
    );
    if !opts.yes && std::io::stdin().is_terminal() {
        print!("Continue? [y/N]: ");
        let _ = std::io::stdout().flush();
        let mut answer = String::new();
        let _ = std::io::stdin().read_line(&mut answer);
        if !answer.trim_start().to_ascii_lowercase().starts_with('y') {
            println!("Aborting...");
            return Err(());
        }
    }
    let truncated = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| f.set_len(report.ok_up_to));
    if truncated.is_err() {
        println!("Failed to truncate AOF {name}");
        return Err(());
    }
    Ok(true)
}

/// Prints a file's verdict in redis-check-aof's words.
fn verdict(kind: &str, name: &str, truncated: bool, empty: bool) {
    if truncated {
        println!("Successfully truncated AOF {name}");
    } else if empty {
        println!("{kind}AOF {name} is empty");
    } else {
        println!("{kind}AOF {name} is valid");
    }
}

fn is_empty(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.len() == 0)
}

/// Entry point of `vireo check-aof` (arguments after the subcommand).
/// Returns the exit status.
pub fn main(args: &[String]) -> i32 {
    let mut opts = Opts {
        fix: false,
        yes: false,
    };
    let mut file = None;
    for a in args {
        match a.as_str() {
            "--fix" => opts.fix = true,
            "--yes" => opts.yes = true,
            _ if file.is_none() && !a.starts_with("--") => file = Some(PathBuf::from(a)),
            _ => file = None,
        }
    }
    let Some(path) = file.filter(|_| args.len() <= 3) else {
        println!("Usage: vireo check-aof [--fix] [--yes] <file.manifest|file.aof>");
        return 1;
    };
    let run = if path.to_string_lossy().ends_with(".manifest") {
        check_multi_part(&path, &opts)
    } else {
        println!("Start checking Old-Style AOF");
        let name = path.display().to_string();
        check_one(&name, &path, true, &opts).map(|t| verdict("", &name, t, is_empty(&path)))
    };
    match run {
        Ok(()) => 0,
        Err(()) => 1,
    }
}

fn check_multi_part(manifest_path: &Path, opts: &Opts) -> Result<(), ()> {
    println!("Start checking Multi Part AOF");
    let text = std::fs::read(manifest_path).map_err(|e| {
        println!(
            "Fatal error: can't open the AOF manifest file {} for reading: {e}",
            manifest_path.display()
        );
    })?;
    let m = Manifest::parse(&text).map_err(|e| {
        println!("*** FATAL AOF MANIFEST FILE ERROR ***");
        println!("{e}");
    })?;
    let dir = manifest_path.parent().unwrap_or(Path::new("."));
    let total = m.load_order().count();
    for (i, f) in m.load_order().enumerate() {
        let path = dir.join(&f.name);
        let last = i + 1 == total;
        let is_base = i == 0 && m.base.is_some();
        if is_base {
            let rdb = check_file(&path).is_ok_and(|r| r.rdb);
            println!(
                "Start to check BASE AOF ({} format).",
                if rdb { "RDB" } else { "RESP" }
            );
        } else if i == usize::from(m.base.is_some()) {
            println!("Start to check INCR files.");
        }
        let truncated = check_one(&f.name, &path, last, opts)?;
        verdict(
            if is_base { "BASE " } else { "INCR " },
            &f.name,
            truncated,
            is_empty(&path),
        );
    }
    println!("All AOF files and manifest are valid");
    Ok(())
}
