//! Builds `src/long_double.c`, INCRBYFLOAT's long double arithmetic.
fn main() {
    println!("cargo:rerun-if-changed=src/long_double.c");
    cc::Build::new()
        .file("src/long_double.c")
        .warnings(true)
        .compile("vireo_long_double");
}
