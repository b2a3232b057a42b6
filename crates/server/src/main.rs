//! The `vireo` binary: `vireo [config] [--opt val …]` or `vireo server …`
//! runs the server; `vireo bench …` runs the load generator; `vireo
//! check-aof [--fix] <file>` checks an append-only file; `vireo check-rdb
//! FILE` checks an RDB file.

#[global_allocator]
static GLOBAL: vireo_server::memory::alloc::Counting = vireo_server::memory::alloc::Counting;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("bench") => vireo_bench::main_from_args(std::env::args_os().skip(1)),
        Some("check-aof") => vireo_server::persist::aof::check::main(&args[1..]),
        Some("check-rdb") => vireo_server::persist::check_rdb::main(&args[1..]),
        Some("server") => vireo_server::run(&args[1..]),
        _ => vireo_server::run(&args),
    };
    std::process::exit(code);
}
