//! Names the `cmdr` binary's entry point, `cmdr_entry` (src/entry.rs), on static x86-64
//! Linux builds: it fills the writable segments before the C library relocates them.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    // musl targets link statically unless told otherwise (and Cargo does not always list
    // `crt-static` among their features).
    let static_build = var("CARGO_CFG_TARGET_ENV") == "musl"
        || var("CARGO_CFG_TARGET_FEATURE")
            .split(',')
            .any(|feature| feature == "crt-static");
    if var("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && var("CARGO_CFG_TARGET_OS") == "linux"
        && static_build
    {
        println!("cargo:rustc-link-arg-bin=cmdr=-Wl,-e,cmdr_entry");
    }
}
