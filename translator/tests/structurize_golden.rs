//! Golden tests of the structurizer on the nvcc fixtures.
//!
//! Regenerate with `UPDATE_GOLDEN=1 cargo test -p ptxvk-translator --test structurize_golden`.

mod common;

use std::path::Path;

fn fixtures() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/fixtures exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ptx"))
        .collect();
    v.sort();
    v
}

#[test]
fn structure_matches_golden() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let golden_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut checked = 0;
    for path in fixtures() {
        let src = std::fs::read_to_string(&path).expect("read fixture");
        let name = path.file_stem().and_then(|s| s.to_str()).expect("name").to_string();
        let dump = ptxvk_translator::structure_dump(&src, &name).unwrap_or_else(|d| panic!("{d}"));
        let golden = golden_dir.join(format!("{name}.regions"));
        if update {
            std::fs::write(&golden, &dump).expect("write golden");
        } else {
            let want = std::fs::read_to_string(&golden)
                .unwrap_or_else(|_| panic!("missing {}; run with UPDATE_GOLDEN=1", golden.display()));
            assert_eq!(dump, want, "structure of {name} changed; rerun with UPDATE_GOLDEN=1 if intended");
        }
        checked += 1;
    }
    assert!(checked >= 5, "expected the nvcc fixtures, found {checked}");
}

#[test]
fn translation_is_deterministic() {
    for path in fixtures() {
        let src = std::fs::read_to_string(&path).expect("read fixture");
        let opts = ptxvk_translator::Options::default();
        let a = ptxvk_translator::translate(&src, "a.ptx", &opts);
        let b = ptxvk_translator::translate(&src, "a.ptx", &opts);
        match (a, b) {
            (Ok(a), Ok(b)) => assert_eq!(a.spirv, b.spirv, "{} is not deterministic", path.display()),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            _ => panic!("translation of {} differs between runs", path.display()),
        }
    }
}

/// A block region whose breaks all end the arms of its `if` (the
/// structurizer's wrapper of every `if (i < n) { ... }` diamond) is
/// emitted as a selection, not as a one-pass loop construct, which
/// llvmpipe would run as a real loop. These fixtures have no loop, and
/// their regions have such blocks (see their golden dumps).
#[test]
fn diamonds_are_selections_not_loops() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    for name in ["contraction", "vector_add", "numba_saxpy", "numba_signed_zero"] {
        let src = std::fs::read_to_string(dir.join(format!("{name}.ptx"))).expect("read fixture");
        let dump = ptxvk_translator::structure_dump(&src, name).unwrap_or_else(|d| panic!("{d}"));
        assert!(dump.contains("block ->") && !dump.contains("loop "), "{name}: {dump}");
        for opts in [ptxvk_translator::Options::default(), ptxvk_translator::Options::llvmpipe()] {
            let t = ptxvk_translator::translate(&src, "a.ptx", &opts).unwrap_or_else(|d| panic!("{d}"));
            assert_eq!(
                common::count_op(&t.spirv, rspirv::spirv::Op::LoopMerge),
                0,
                "{name}: a loop construct in a kernel without loops"
            );
        }
    }
}
