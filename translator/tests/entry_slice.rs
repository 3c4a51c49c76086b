//! `entry_slice`: each entry point of a module with several, cut out with
//! the functions it calls, is a valid module (`spirv-val`) with that one
//! entry point and no function it does not reach. Fixtures from nvcc with
//! device functions, function pointers, `printf`, recursion and
//! `malloc`, under the default options and lavapipe's (fault checks, loop
//! limits, resume rounds, unrolling). The runtime builds every pipeline of
//! a module with several entries from such a slice, so its tests run them.

mod common;

use common::spirv_val;
use ptxvk_translator::entry_slice::entry_slice;
use ptxvk_translator::{translate, Options};

const FIXTURES: &[&str] = &[
    "split_module.ptx",
    "funcptr_dtor.ptx",
    "device_malloc.ptx",
    "printf_formats.ptx",
    "recursion_run.ptx",
    "forward_progress.ptx",
    "long_loops.ptx",
    "shared_spill.ptx",
    "textures.ptx",
];

/// The names of the module's entry points.
fn entry_points(words: &[u32]) -> Vec<String> {
    common::instructions(words)
        .into_iter()
        .filter(|(op, _)| *op == 15)
        .map(|(_, w)| {
            let bytes: Vec<u8> = w[3..].iter().flat_map(|x| x.to_le_bytes()).take_while(|&b| b != 0).collect();
            String::from_utf8(bytes).expect("UTF-8 entry name")
        })
        .collect()
}

#[test]
fn every_entry_slices_into_a_valid_module_of_its_own() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let mut sliced = 0;
    let mut smaller = 0;
    for name in FIXTURES {
        let ptx = std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (label, options) in [("default", Options::default()), ("lavapipe", Options::llvmpipe())] {
            let whole = translate(&ptx, name, &options).unwrap_or_else(|d| panic!("{name} ({label}): {d}"));
            let entries = entry_points(&whole.spirv);
            assert!(entries.len() > 1, "{name}: a fixture with several entries");
            let functions = |w: &[u32]| common::instructions(w).iter().filter(|(op, _)| *op == 54).count();
            let all = functions(&whole.spirv);
            for entry in &entries {
                let slice = entry_slice(&whole.spirv, entry).unwrap_or_else(|| panic!("{name}: no slice for {entry}"));
                assert_eq!(
                    entry_points(&slice),
                    std::slice::from_ref(entry),
                    "{name} ({label}): the slice's entry points"
                );
                assert_eq!(slice[..5], whole.spirv[..5], "{name}: the header (and id bound) stays");
                let kept = functions(&slice);
                assert!(kept >= 1 && kept < all, "{name} ({label}) {entry}: {kept} of {all} functions kept");
                if let Err(e) = spirv_val(&slice, &format!("{name}-{label}-{entry}")) {
                    panic!("{name} ({label}): the slice of {entry} fails spirv-val:\n{e}");
                }
                // Translating the entry alone keeps the functions it calls:
                // the slice keeps as many.
                let alone = translate(&ptx, name, &Options { entry: Some(entry.clone()), ..options.clone() })
                    .unwrap_or_else(|d| panic!("{name} ({label}) {entry} alone: {d}"));
                assert_eq!(
                    kept,
                    functions(&alone.spirv),
                    "{name} ({label}) {entry}: functions against the entry alone"
                );
                sliced += 1;
                smaller += usize::from(slice.len() < whole.spirv.len());
            }
        }
    }
    assert_eq!(smaller, sliced, "every slice is smaller than its module");
}

#[test]
fn no_slice_for_an_unknown_entry_or_malformed_words() {
    let ptx = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/split_module.ptx"),
    )
    .expect("fixture");
    let whole = translate(&ptx, "split_module.ptx", &Options::default()).expect("translates");
    assert!(entry_slice(&whole.spirv, "no_such_kernel").is_none());
    assert!(entry_slice(&whole.spirv[..whole.spirv.len() - 1], "first").is_none(), "truncated module");
    assert!(entry_slice(&[0u32; 3], "first").is_none());
    let mut bad = whole.spirv.clone();
    bad[5] &= 0xffff; // a word count of 0
    assert!(entry_slice(&bad, "first").is_none());
}
