//! Stand-alone `vireo bench` for development: `cargo run -p vireo-bench
//! --release --example bench -- --port 6379`. The `vireo` binary offers the
//! same as `vireo bench …`.

fn main() {
    // Skip the program path and name the command like the real subcommand.
    let args = std::iter::once("bench".into()).chain(std::env::args_os().skip(1));
    std::process::exit(vireo_bench::main_from_args(args));
}
