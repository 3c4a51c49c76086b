//! Gives the runtime a build id: a hash of the translator's and the
//! runtime's sources and of the PTX libraries the translator links in
//! (`shaders/`), part of the key of every entry of the persistent
//! translation cache (`src/disk_cache.rs`), so that a changed translator
//! never finds a translation of an earlier one.

use std::path::{Path, PathBuf};

fn main() {
    let here = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into()));
    let dirs = [
        here.join("src"),
        here.join("../translator/src"),
        here.join("../translator/Cargo.toml"),
        here.join("../shaders"),
    ];
    let mut files = Vec::new();
    for d in &dirs {
        println!("cargo:rerun-if-changed={}", d.display());
        collect(d, &mut files);
    }
    files.sort();
    // FNV-1a, 64 bits, over every file's path (relative to the crate) and bytes.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for f in &files {
        let rel = f.strip_prefix(&here).unwrap_or(f);
        eat(rel.to_string_lossy().as_bytes());
        eat(&std::fs::read(f).unwrap_or_default());
    }
    println!("cargo:rustc-env=PTXVK_BUILD_ID={}-{h:016x}", std::env::var("CARGO_PKG_VERSION").unwrap_or_default());
}

fn collect(p: &Path, out: &mut Vec<PathBuf>) {
    if p.is_file() {
        out.push(p.to_path_buf());
    } else if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            collect(&e.path(), out);
        }
    }
}
