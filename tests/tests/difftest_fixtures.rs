//! The differential tester's regression fixtures (`tests/difftest/fixtures/`):
//! each directory holds a generated CUDA kernel (`kernel.cu`, or `kernel.py`
//! for numba), the PTX `nvcc` or numba made of it (`kernel.ptx`, command in
//! `cmd.txt`) and `case.json` with the launch, the input and the output the
//! host reference computed (`"abi": "numba"`: the three buffers are passed
//! as numba arrays, seven parameters each). Every
//! fixture runs through the Rust runtime (validation layer on, `spirv-val`
//! on every module) and through the C ABI of `libcuda.so`, and must match
//! the reference word for word (the output buffer poisoned first).

use ptxvk_tests::{arg, from_bytes, on_driver, on_runtime, to_bytes, Gpu, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Word written over `out` before each launch (the tester's and the
/// reference's poison).
const POISON: u32 = 0xABAB_ABAB;

fn fixture_dirs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("difftest/fixtures");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("case.json").is_file())
        .collect();
    dirs.sort();
    dirs
}

fn words(v: &Value, key: &str) -> Vec<u32> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("case.json: {key} is not an array"))
        .iter()
        .map(|w| w.as_u64().and_then(|w| u32::try_from(w).ok()).unwrap_or_else(|| panic!("case.json: {key}: {w}")))
        .collect()
}

fn dim3(v: &Value, key: &str) -> [u32; 3] {
    let w = words(v, key);
    assert_eq!(w.len(), 3, "case.json: {key}");
    [w[0], w[1], w[2]]
}

/// Runs one fixture; returns a description of every mismatch.
fn run_fixture(gpu: &mut dyn Gpu, dir: &Path) -> Result<Vec<String>> {
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("?").to_string();
    let ptx = std::fs::read_to_string(dir.join("kernel.ptx")).map_err(|e| ptxvk_tests::Error(e.to_string()))?;
    let text = std::fs::read_to_string(dir.join("case.json")).map_err(|e| ptxvk_tests::Error(e.to_string()))?;
    let case: Value = serde_json::from_str(&text).map_err(|e| ptxvk_tests::Error(format!("{name}: {e}")))?;
    let kernel = case["kernel"].as_str().unwrap_or_else(|| panic!("{name}: kernel"));
    let k = gpu.load_kernel(&ptx, &format!("{name}/kernel.ptx"), kernel)?;
    let input = words(&case, "in_words");
    let atom_init = words(&case, "atom_init");
    let want_out = words(&case, "expected_out");
    let want_atom = words(&case, "expected_atom");
    let out_words = case["out_words"].as_u64().unwrap_or_else(|| panic!("{name}: out_words")) as usize;
    assert_eq!(out_words, want_out.len(), "{name}: expected_out has out_words words");
    let d_in = gpu.upload(&input)?;
    let d_out = gpu.alloc(out_words * 4)?;
    gpu.copy_htod(d_out, &to_bytes(&vec![POISON; out_words]))?;
    let d_atom = gpu.upload(&atom_init)?;
    let arrays = [(d_in, input.len()), (d_out, out_words), (d_atom, atom_init.len())];
    let args: Vec<Vec<u8>> = match case["abi"].as_str() {
        None | Some("cuda") => arrays.iter().map(|&(d, _)| arg(d)).collect(),
        // numba arrays: meminfo, parent, nitems, itemsize, data, shape[0], strides[0].
        Some("numba") => arrays
            .iter()
            .flat_map(|&(d, n)| [arg(0u64), arg(0u64), arg(n as i64), arg(4i64), arg(d), arg(n as i64), arg(4i64)])
            .collect(),
        Some(other) => panic!("{name}: unknown abi {other:?}"),
    };
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    gpu.launch(k, dim3(&case, "grid"), dim3(&case, "block"), 0, &args)?;
    gpu.synchronize()?;
    let got_out: Vec<u32> = from_bytes(&gpu.copy_dtoh(d_out, out_words * 4)?);
    let got_atom: Vec<u32> = from_bytes(&gpu.copy_dtoh(d_atom, atom_init.len() * 4)?);
    let mut bad = Vec::new();
    for (what, got, want) in [("out", &got_out, &want_out), ("atom", &got_atom, &want_atom)] {
        for (i, (g, w)) in got.iter().zip(want.iter()).enumerate() {
            if g != w {
                bad.push(format!("{name} ({} API): {what}[{i}] = {g:#010x}, reference {w:#010x}", gpu.api()));
            }
        }
    }
    Ok(bad)
}

fn run_all(gpu: &mut dyn Gpu) -> Result<()> {
    let dirs = fixture_dirs();
    assert!(!dirs.is_empty(), "no fixtures in tests/difftest/fixtures");
    let mut bad = Vec::new();
    for dir in &dirs {
        bad.extend(run_fixture(gpu, dir)?);
    }
    assert!(bad.is_empty(), "{} mismatches:\n{}", bad.len(), bad[..bad.len().min(40)].join("\n"));
    Ok(())
}

#[test]
fn fixtures_on_the_runtime() {
    on_runtime(run_all);
}

#[test]
fn fixtures_through_libcuda() {
    on_driver(run_all);
}
