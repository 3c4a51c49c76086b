//! Build script for `libcuda.so.1`.
//!
//! - Gives the cdylib the SONAME `libcuda.so.1`, the name programs linked
//!   against NVIDIA's driver ask the dynamic loader for.
//! - Turns `cuda-api.tsv` (every function `cuda.h` declares, with its
//!   versions; see `scripts/gen-cuda-api.py`) into `$OUT_DIR/cuda_api.rs`:
//!   the table `cuGetProcAddress` resolves names with, and the list of
//!   symbols `src/api.rs` does not implement, which are exported as stubs
//!   returning `CUDA_ERROR_NOT_SUPPORTED`.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os == "linux" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcuda.so.1");
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=cuda-api.tsv");
    println!("cargo:rerun-if-changed=src/api.rs");

    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let table = std::fs::read_to_string(manifest.join("cuda-api.tsv")).expect("read cuda-api.tsv");
    let api = std::fs::read_to_string(manifest.join("src/api.rs")).expect("read src/api.rs");
    let implemented = implemented_symbols(&api);

    let mut rows = Vec::new();
    for (n, line) in table.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        let [name, version, variant, symbol] = cols[..] else {
            panic!("cuda-api.tsv:{}: expected 4 tab-separated columns", n + 1);
        };
        let version: u32 = version.parse().unwrap_or_else(|_| panic!("cuda-api.tsv:{}: bad version", n + 1));
        let variant = match variant {
            "-" => "Variant::Plain",
            "ptds" => "Variant::Ptds",
            "ptsz" => "Variant::Ptsz",
            other => panic!("cuda-api.tsv:{}: bad variant {other}", n + 1),
        };
        rows.push((name.to_string(), version, variant, symbol.to_string()));
    }
    let listed: BTreeSet<&str> = rows.iter().map(|r| r.3.as_str()).collect();
    for sym in &implemented {
        if !listed.contains(sym.as_str()) {
            println!("cargo:warning=src/api.rs exports {sym}, which cuda-api.tsv does not list");
        }
    }

    let mut out = String::new();
    out.push_str("/// Every version of every driver API function (generated from `cuda-api.tsv`).\n");
    out.push_str("pub const API_TABLE: &[ApiEntry] = &[\n");
    for (name, version, variant, symbol) in &rows {
        let _ = writeln!(
            out,
            "    ApiEntry {{ name: {name:?}, version: {version}, variant: {variant}, symbol: {symbol:?} }},"
        );
    }
    out.push_str("];\n\n");
    out.push_str("unsupported! {\n");
    for sym in listed.iter().filter(|s| !implemented.contains(**s)) {
        let _ = writeln!(out, "    {sym},");
    }
    out.push_str("}\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("cuda_api.rs");
    std::fs::write(dest, out).expect("write cuda_api.rs");
}

/// Symbols the `exports!` list in `src/api.rs` defines: each entry is one
/// line `safe|raw fn NAME(...) [| ALIAS]* => path;`.
fn implemented_symbols(api: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in api.lines() {
        let t = line.trim_start();
        let Some(rest) = t.strip_prefix("safe fn ").or_else(|| t.strip_prefix("raw fn ")) else {
            continue;
        };
        let Some(open) = rest.find('(') else { continue };
        names.insert(rest[..open].trim().to_string());
        let Some(arrow) = rest.rfind("=>") else { continue };
        let before = &rest[..arrow];
        if let Some(close) = before.rfind(')') {
            for alias in before[close + 1..].split('|').map(str::trim).filter(|a| !a.is_empty()) {
                names.insert(alias.to_string());
            }
        }
    }
    names
}
