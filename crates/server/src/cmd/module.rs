//! MODULE (Redis's `moduleCommand` in `module.c`) and the `loadmodule`
//! directive, for a server that loads no modules.
//!
//! Vireo implements none of Redis's module API, so no shared library can
//! be loaded into it: MODULE LIST is always empty, every LOAD and LOADEX
//! fails with Redis's reply and a log line in Redis's words saying why
//! (no such file, no execute permission, or no module support), UNLOAD
//! finds no module, and a `loadmodule` line in the configuration stops
//! start-up as Redis stops when a module does not load. Nothing is ever
//! `dlopen`ed: a library's initialisers would run arbitrary code in the
//! server for nothing. Argument checks (LOADEX's CONFIG and ARGS) and the
//! `enable-module-command` gate behave as in Redis 7.0.

use vireo_resp::Args;

use super::shared::{protected_allowed, reply_help};
use super::{container, flags::*, is, spec, text, CommandSpec, Ctx, KeySpec};

/// The flags of the subcommands that change the loaded modules.
const CHANGES: u32 = NO_ASYNC_LOADING | ADMIN | NOSCRIPT | PROTECTED;

/// MODULE's subcommands, as Redis 7.0's command table has them.
const SUBS: &[CommandSpec] = &[
    spec("module|help", 2, LOADING | STALE, KeySpec::None, help),
    spec("module|list", 2, ADMIN | NOSCRIPT, KeySpec::None, list),
    spec("module|load", -3, CHANGES, KeySpec::None, load),
    spec("module|loadex", -3, CHANGES, KeySpec::None, loadex),
    spec("module|unload", 3, CHANGES, KeySpec::None, unload),
];

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[container("module", -2, 0, SUBS)];

/// Redis's refusal when `enable-module-command` does not allow the client.
const NOT_ALLOWED: &str = "ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

/// Redis's reply to a LOAD or LOADEX that did not load (the reason is in
/// the log).
const LOAD_FAILED: &str = "ERR Error loading the extension. Please check the server logs.";

/// Redis's reply to UNLOAD of a name no loaded module has.
const NO_SUCH_MODULE: &str = "ERR Error unloading module: no such module with that name";

/// MODULE HELP.
fn help(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    reply_help(
        ctx,
        "MODULE",
        &[
            "LIST",
            "    Return a list of loaded modules.",
            "LOAD <path> [<arg> ...]",
            "    Load a module library from <path>, passing to it any optional arguments.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    Load a module library from <path>, while passing it module configurations and optional arguments.",
            "UNLOAD <name>",
            "    Unload a module.",
        ],
    );
}

/// MODULE LIST: the loaded modules, of which there are none.
fn list(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    ctx.out.array(0);
}

/// Replies Redis's refusal and returns false when `enable-module-command`
/// does not let this client change modules.
fn gate(ctx: &mut Ctx<'_>) -> bool {
    let allowed = protected_allowed(ctx, &ctx.server.config.enable_module_command());
    if !allowed {
        ctx.out.error(NOT_ALLOWED);
    }
    allowed
}

/// MODULE LOAD path [arg ...].
fn load(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if gate(ctx) {
        log_load_failure(&text(args.get(2)));
        ctx.out.error(LOAD_FAILED);
    }
}

/// MODULE LOADEX path [CONFIG name value ...] [ARGS arg ...]: the options
/// are checked (a bad one is logged) before the library would be loaded.
fn loadex(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if !gate(ctx) {
        return;
    }
    let options: Vec<&[u8]> = args.iter().skip(3).collect();
    match check_loadex_options(&options) {
        Ok(()) => log_load_failure(&text(args.get(2))),
        Err(problem) => tracing::info!("{problem}"),
    }
    ctx.out.error(LOAD_FAILED);
}

/// Checks LOADEX's options as Redis parses them: `CONFIG name value`
/// pairs until `ARGS`, after which everything is the module's. Err is the
/// line Redis logs for the first bad option.
fn check_loadex_options(options: &[&[u8]]) -> Result<(), String> {
    let mut i = 0;
    while i < options.len() {
        if is(options[i], "config") {
            if i + 2 >= options.len() {
                return Err("CONFIG specified without name value pair".into());
            }
            i += 3;
        } else if is(options[i], "args") {
            return Ok(());
        } else {
            return Err(format!(
                "Syntax Error from arguments to loadex around {}.",
                text(options[i])
            ));
        }
    }
    Ok(())
}

/// MODULE UNLOAD name: no module is loaded, so no name matches.
fn unload(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    if gate(ctx) {
        ctx.out.error(NO_SUCH_MODULE);
    }
}

/// Logs why the module at `path` was not loaded, in the words Redis
/// logs the same failure with.
fn log_load_failure(path: &str) {
    tracing::warn!("Module {path} failed to load: {}", load_failure(path));
}

/// Why the library at `path` cannot be loaded: Redis's own check of the
/// execute bits first, then what the dynamic loader would say of a file it
/// cannot open, and otherwise that this server has no module support.
fn load_failure(path: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    // Redis checks the execute bits relative to its working directory.
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.permissions().mode() & 0o111 == 0 {
            return "It does not have execute permissions.".into();
        }
    }
    // The dynamic loader searches library directories for a bare name and
    // opens anything else as a path.
    let opened = if path.contains('/') {
        std::fs::File::open(path).map(drop)
    } else {
        Err(std::io::ErrorKind::NotFound.into())
    };
    match opened {
        Ok(()) if std::path::Path::new(path).is_dir() => {
            format!("{path}: cannot read file data: Is a directory")
        }
        Err(e) => format!(
            "{path}: cannot open shared object file: {}",
            crate::config::io_reason(&e)
        ),
        Ok(()) => format!("{path}: Vireo does not implement Redis's module API"),
    }
}

/// What start-up does with `loadmodule` lines and module configuration
/// (`name.option value`) lines: Err is the fatal line Redis logs before it
/// exits, after the load failure itself was logged.
pub fn load_at_startup(modules: &[Vec<String>], module_configs: usize) -> Result<(), String> {
    if let Some(path) = modules.first().and_then(|words| words.first()) {
        log_load_failure(path);
        return Err(format!("Can't load module from {path}: server aborting"));
    }
    if module_configs > 0 {
        return Err(
            "Module Configuration detected without loadmodule directive or no ApplyConfig call: aborting"
                .into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    fn check(words: &[&str]) -> Result<(), String> {
        let owned = opts(words);
        let refs: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
        check_loadex_options(&refs)
    }

    #[test]
    fn loadex_options_are_checked_as_redis_parses_them() {
        assert_eq!(check(&[]), Ok(()));
        assert_eq!(check(&["CONFIG", "a", "b", "config", "c", "d"]), Ok(()));
        assert_eq!(check(&["ARGS"]), Ok(()));
        // After ARGS everything belongs to the module.
        assert_eq!(check(&["args", "CONFIG", "bogus"]), Ok(()));
        assert_eq!(
            check(&["CONFIG", "a"]),
            Err("CONFIG specified without name value pair".into())
        );
        assert_eq!(
            check(&["CONFIG", "a", "b", "nope"]),
            Err("Syntax Error from arguments to loadex around nope.".into())
        );
    }

    #[test]
    fn load_failures_are_worded_as_redis_logs_them() {
        assert_eq!(
            load_failure("/nonexistent/x.so"),
            "/nonexistent/x.so: cannot open shared object file: No such file or directory"
        );
        assert_eq!(
            load_failure("bare-name.so"),
            "bare-name.so: cannot open shared object file: No such file or directory"
        );
        let dir = std::env::temp_dir().join(format!("vireo-module-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lib = dir.join("m.so");
        std::fs::write(&lib, b"not a library").unwrap();
        let path = lib.to_str().unwrap();
        assert_eq!(load_failure(path), "It does not have execute permissions.");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(load_failure(path).ends_with("Vireo does not implement Redis's module API"));
        let dir_path = dir.to_str().unwrap().to_string();
        assert!(load_failure(&dir_path).ends_with(": cannot read file data: Is a directory"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn startup_stops_on_the_first_module_or_a_module_config() {
        assert_eq!(load_at_startup(&[], 0), Ok(()));
        let modules = vec![vec!["/no/such.so".to_string(), "arg".to_string()]];
        assert_eq!(
            load_at_startup(&modules, 1),
            Err("Can't load module from /no/such.so: server aborting".into())
        );
        assert!(load_at_startup(&[], 2)
            .unwrap_err()
            .starts_with("Module Configuration detected"));
    }

    #[test]
    fn only_help_and_list_escape_the_gate() {
        let gated: Vec<&str> = SUBS
            .iter()
            .filter(|s| s.has(PROTECTED))
            .map(|s| s.name)
            .collect();
        assert_eq!(gated, ["module|load", "module|loadex", "module|unload"]);
    }
}
