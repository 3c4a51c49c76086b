//! Gives the cdylib the SONAME `libcuda.so.1`, the name programs linked
//! against NVIDIA's driver ask the dynamic loader for.

fn main() {
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os == "linux" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcuda.so.1");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
