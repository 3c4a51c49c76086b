//! The forward-progress pass (`progress.rs`) on nvcc's
//! `tests/fixtures/forward_progress.cu`, without a device: it rewrites the
//! kernels whose lanes spin on each other (locks, a flag) and leaves
//! lock-free compare-and-swap loops and code without spin loops as they
//! are; whatever it rewrites (every loop of every fixture, with
//! `interleave_every_loop`) passes `spirv-val` on every warp path. Running
//! the kernels is `runtime/tests/forward_progress.rs`.

use ptxvk_translator::{translate, Options, WarpPath};
use std::path::Path;

const PTX: &str = include_str!("../../tests/fixtures/forward_progress.ptx");

fn words(src: &str, entry: &str, forward_progress: bool) -> Vec<u32> {
    let opts = Options { entry: Some(entry.into()), forward_progress, ..Options::default() };
    translate(src, "forward_progress.ptx", &opts).unwrap_or_else(|d| panic!("{d}")).spirv
}

#[test]
fn spin_loops_are_interleaved_and_lock_free_loops_are_not() {
    for entry in [
        "locked_append",
        "shared_locked_histogram",
        "activate_cells",
        "activate_cells_with_calls",
        "flag_handoff",
        "two_handoffs",
        "tickets_from_a_callee",
        "bounded_wait",
    ] {
        assert_ne!(words(PTX, entry, true), words(PTX, entry, false), "{entry} should be rewritten");
    }
    for entry in ["cas_float_max", "cas_double_add"] {
        assert_eq!(words(PTX, entry, true), words(PTX, entry, false), "{entry} should be left alone");
    }
}

/// `spirv-val` on the words, or `None` when it is not installed.
fn spirv_val(words: &[u32]) -> Option<Result<(), String>> {
    let file = std::env::temp_dir().join(format!("ptxvk-progress-{}.spv", std::process::id()));
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    std::fs::write(&file, bytes).ok()?;
    let out = std::process::Command::new("spirv-val").arg("--target-env").arg("vulkan1.2").arg(&file).output().ok()?;
    let _ = std::fs::remove_file(&file);
    Some(if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) })
}

#[test]
fn every_loop_interleaved_still_validates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/fixtures")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ptx"))
        .collect();
    files.sort();
    let mut checked = 0;
    for file in files {
        let src = std::fs::read_to_string(&file).expect("read fixture");
        for warp_path in [WarpPath::Emulated, WarpPath::Native] {
            let opts = Options { interleave_every_loop: true, warp_path, ..Options::default() };
            // Fixtures that do not translate on their own (diagnostic
            // tests) are someone else's business.
            let Ok(t) = translate(&src, "fixture.ptx", &opts) else { continue };
            match spirv_val(&t.spirv) {
                Some(Ok(())) => checked += 1,
                Some(Err(e)) => panic!("{} ({warp_path:?}): spirv-val: {e}", file.display()),
                None => {
                    eprintln!("skipping SPIR-V validation: spirv-val is not installed");
                    return;
                }
            }
        }
    }
    assert!(checked >= 40, "expected the fixtures, validated {checked} modules");
}
