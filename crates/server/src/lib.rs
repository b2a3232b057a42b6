//! The Vireo server: configuration, networking (one event loop per worker
//! thread), the command table with one file per command family, and the
//! background jobs. See `shared/DESIGN.md` for the architecture.

pub mod cmd;
pub mod config;
pub mod exec;
pub mod memory;
pub mod net;
pub mod ops;
pub mod persist;
pub mod repl;
pub mod security;
pub mod server;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;

use config::Config;
use net::{listener, worker};
use ops::cron;
use persist::{aof, rdb};
use server::{Server, REDIS_VERSION, VIREO_VERSION};

/// Runs the server with redis-server style arguments (`[file.conf]
/// [--name value ...]`, program name excluded). Returns the exit status.
pub fn run(args: &[String]) -> i32 {
    let config = match Config::from_args(args) {
        Ok(c) => c,
        Err(msg) => {
            eprintln!("{msg}");
            return 1;
        }
    };
    ops::log::init(&config.logfile(), &config.loglevel());
    tracing::info!("oO0OoO0OoO0Oo Vireo is starting oO0OoO0OoO0Oo");
    tracing::info!(
        "Vireo version={VIREO_VERSION}, Redis version={REDIS_VERSION}, bits=64, pid={}, just started",
        std::process::id()
    );
    tracing::info!("Configuration loaded");
    if config.flag("disable-thp") {
        disable_transparent_huge_pages();
    }
    // Measuring the counter takes 20 ms; commands use clock_gettime until
    // it is done rather than delay start-up.
    let _ = thread::Builder::new()
        .name("vireo-tsc".into())
        .spawn(vireo_store::clock::calibrate_tsc);
    let threads = match config.io_threads() {
        0 => thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        n => n,
    };
    let server = Server::new(config, threads).into_arc();
    match cmd::rename_table(&server.config.renames) {
        Ok(renames) => cmd::install_renames(renames),
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    }
    if let Err(e) = security::load_at_startup(&server) {
        tracing::error!("{e}");
        eprintln!("{e}");
        return 1;
    }
    match start(server) {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("{e}");
            1
        }
    }
}

/// Readies SQL databases (`REDISQL.*`) before anything loads: SQLite
/// allocates through the counting allocator (so used_memory and maxmemory
/// include it), and RDB loading and RESTORE know the type.
pub fn init_sql() {
    if let Err(e) = vireo_sql::memory::route_to_global_allocator() {
        tracing::warn!("SQLite's memory is not counted in used_memory: {e}");
    }
    vireo_sql::register();
}

/// `disable-thp yes` (the default), as Redis does: with transparent huge
/// pages a command that touches fresh memory (a growing set's table, say)
/// waits while the kernel zeroes a whole 2 MB page per fault. Under
/// redis-benchmark's SADD, LPUSH and ZADD at `-P 16`, single commands took
/// 5-9 ms, with `clear_page_erms` under huge page faults 14% of all
/// samples. Must run before the dataset is allocated: pages already huge
/// stay so.
fn disable_transparent_huge_pages() {
    // SAFETY: PR_SET_THP_DISABLE takes integers only and touches no memory
    // of ours.
    let done = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if done != 0 {
        tracing::warn!(
            "could not disable transparent huge pages: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Binds, starts the workers, the acceptor and the background jobs, and
/// waits until a signal or SHUTDOWN stops them.
pub fn start(server: Arc<Server>) -> std::io::Result<()> {
    init_sql();
    let s = server.clone();
    let aof_writer = thread::Builder::new()
        .name("vireo-aof".into())
        .spawn(move || aof::run_writer(s))?;
    let s = server.clone();
    let aof_bg = thread::Builder::new()
        .name("vireo-aof-bg".into())
        .spawn(move || aof::run_background(s))?;
    // As Redis, a TLS configuration that does not load stops start-up.
    if security::tls::wanted(&server.config) {
        server.tls.configure(&server.config).map_err(|_| {
            std::io::Error::other("Failed to configure TLS. Check logs for more info.")
        })?;
    }
    ops::crash::install(crash_reporter(&server));
    ops::watchdog::init(server.worker_stats.len());
    // A failure is logged; Redis starts anyway too.
    let _ = ops::oom::apply(&server.config, server.repl.is_replica());
    let listeners = listener::Listeners::bind(&server)?;
    if server.config.appendonly() || rdb::dump_wanted_at_startup(&server) {
        server.rdb.loading.store(true, Ordering::Release);
    }
    let (accept_poll, accept_waker) = listener::create_poll()?;
    let nworkers = server.worker_stats.len();
    let mut polls = Vec::new();
    let mut handles = Vec::new();
    for _ in 0..nworkers {
        let (poll, handle) = worker::create()?;
        polls.push(poll);
        handles.push(handle);
    }
    if server.workers.set(handles).is_err() {
        unreachable!("workers are set once");
    }
    let mut joins = Vec::new();
    for (i, poll) in polls.into_iter().enumerate() {
        let s = server.clone();
        joins.push(
            thread::Builder::new()
                .name(format!("vireo-worker-{i}"))
                .spawn(move || worker::run(i, s, poll))?,
        );
    }
    let s = server.clone();
    joins.push(
        thread::Builder::new()
            .name("vireo-accept".into())
            .spawn(move || listener::run(s, listeners, accept_poll))?,
    );
    let s = server.clone();
    let cron = thread::Builder::new()
        .name("vireo-cron".into())
        .spawn(move || cron::run(s))?;
    watch_signals(server.clone(), accept_waker.clone())?;
    tracing::info!(
        "{}",
        ops::log::banner(
            server.config.flag("always-show-logo"),
            server.bound_port.load(Ordering::Relaxed) as u16,
            nworkers
        )
    );
    tracing::info!("Server initialized");
    // As Redis, a module that does not load stops the server here.
    let config = &server.config;
    if let Err(fatal) = cmd::module::load_at_startup(&config.load_modules, config.module_configs) {
        tracing::warn!("{fatal}");
        std::process::exit(1);
    }
    // Clients may connect while the data loads; they get -LOADING.
    let loaded = load_dataset(&server);
    if loaded.is_err() {
        // `run` logs the reason once, after the workers stop.
        server.shutting_down.store(true, Ordering::Release);
    } else {
        tracing::info!("Ready to accept connections");
        repl::replica::follow_configured(&server);
    }
    // Stopping: the signal thread or SHUTDOWN sets the flag and wakes us all.
    while !server.shutting_down.load(Ordering::Acquire) {
        thread::park_timeout(std::time::Duration::from_millis(100));
    }
    accept_waker.wake()?;
    server.wake_all();
    if server.scripts.busy_error().is_some() {
        exit_past_busy_script(&server, aof_writer);
    }
    for j in joins {
        let _ = j.join();
    }
    let _ = cron.join();
    let _ = aof_bg.join();
    aof::stop_writer(&server);
    let _ = aof_writer.join();
    if let Some(path) = server.config.unixsocket() {
        let _ = std::fs::remove_file(path);
    }
    tracing::info!("Vireo is now ready to exit, bye bye...");
    loaded.map_err(std::io::Error::other)
}

/// SHUTDOWN NOSAVE while a script runs past `busy-reply-threshold`: its
/// worker, and any thread waiting for a shard it holds, will not stop, so
/// the process exits right away as Redis's does, once the AOF writer wrote
/// what it was given (the script's own effects never reached it).
fn exit_past_busy_script(server: &Server, aof_writer: thread::JoinHandle<()>) -> ! {
    aof::stop_writer(server);
    let _ = aof_writer.join();
    if let Some(path) = server.config.unixsocket() {
        let _ = std::fs::remove_file(path);
    }
    tracing::info!("Vireo is now ready to exit, bye bye...");
    std::process::exit(0)
}

/// What the crash report shows: INFO, and Redis's names for the
/// commands' handlers (frames in them are labelled `debugCommand` …).
fn crash_reporter(server: &Arc<Server>) -> ops::crash::Reporter {
    let handlers = cmd::table()
        .all
        .iter()
        .filter(|spec| spec.subcommands.is_empty())
        .map(|spec| {
            let name = ops::crash::redis_function_name(spec.name);
            (spec.handler as usize, name)
        })
        .collect();
    ops::crash::Reporter {
        server: server.clone(),
        info: cmd::info::report_all,
        handlers,
    }
}

/// Loads the dataset at start-up: the AOF when `appendonly` is on (it
/// takes precedence over a dump, as in Redis), else the dump if there is
/// one. Err is the fatal message.
fn load_dataset(server: &Server) -> Result<(), String> {
    if !server.config.appendonly() {
        return rdb::load_at_startup(server);
    }
    let result = aof::load::load_at_start(server).and_then(|m| aof::open_at_start(server, m));
    server.rdb.loading.store(false, Ordering::Release);
    result
}

/// SIGTERM and SIGINT start a clean shutdown, with the flags of
/// `shutdown-on-sigterm` / `shutdown-on-sigint`; it may wait for lagging
/// replicas (`ops::shutdown`). A second SIGINT meanwhile exits at once,
/// as Redis's does.
fn watch_signals(server: Arc<Server>, accept_waker: Arc<mio::Waker>) -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])?;
    thread::Builder::new()
        .name("vireo-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                let (name, config) = if sig == SIGINT {
                    ("SIGINT", "shutdown-on-sigint")
                } else {
                    ("SIGTERM", "shutdown-on-sigterm")
                };
                if sig == SIGINT && server.shutdown.is_pending() {
                    tracing::warn!("You insist... exiting now.");
                    std::process::exit(1);
                }
                tracing::warn!("Received {name} scheduling shutdown...");
                let words = server.config.get_one(config).unwrap_or_default();
                let flags = ops::shutdown::Flags::from_config(&words);
                if ops::shutdown::request(&server, flags, || None)
                    == ops::shutdown::Outcome::Stopping
                {
                    let _ = accept_waker.wake();
                    break;
                }
            }
        })?;
    Ok(())
}
