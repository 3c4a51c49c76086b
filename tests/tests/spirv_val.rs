//! Every PTX fixture translates to SPIR-V that `spirv-val` accepts for the
//! Vulkan environment it targets.
//!
//! Each fixture is translated for Vulkan 1.2 and 1.3, with and without fma
//! emulation, and with the smallest push-constant budget Vulkan guarantees
//! (128 bytes; large parameter blocks go to a parameter buffer) and a larger
//! one (256 bytes; everything in push constants), so every emission path the
//! runtime can pick is validated; and once with the options the runtime
//! picks for llvmpipe (loop-limit counting among them). Needs `spirv-val` (package `spirv-tools`).

use std::path::{Path, PathBuf};
use std::process::Command;

use ptxvk_tests::fixture_ptx_files;
use ptxvk_translator::{translate, Options, TargetEnv};

/// The `--target-env` name of `env`.
fn env_name(env: TargetEnv) -> &'static str {
    match env {
        TargetEnv::Vulkan1_2 => "vulkan1.2",
        TargetEnv::Vulkan1_3 => "vulkan1.3",
    }
}

/// Translates `path` with every option combination and validates each
/// result; returns one line per failure.
fn translate_and_validate(path: &Path) -> Vec<String> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let source = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut failures = Vec::new();
    for target_env in [TargetEnv::Vulkan1_2, TargetEnv::Vulkan1_3] {
        for emulate_fma in [true, false] {
            for max_push_constant_bytes in [128, 256] {
                let options = Options { target_env, emulate_fma, max_push_constant_bytes, ..Options::default() };
                let what = format!(
                    "{name} ({}, emulate_fma={emulate_fma}, push={max_push_constant_bytes})",
                    env_name(target_env)
                );
                match translate(&source, &name, &options) {
                    Ok(t) => {
                        if let Err(e) = spirv_val(&t.spirv, target_env, &what) {
                            failures.push(format!("{what}: spirv-val: {e}"));
                        }
                    }
                    Err(d) => failures.push(format!("{what}: translation failed:\n{d}")),
                }
            }
        }
    }
    // What the runtime picks for llvmpipe (lavapipe): loop-limit counting,
    // resume rounds, uniform parameters, fault checks.
    let options = Options::llvmpipe();
    let what = format!("{name} (llvmpipe options)");
    match translate(&source, &name, &options) {
        Ok(t) => {
            if let Err(e) = spirv_val(&t.spirv, options.target_env, &what) {
                failures.push(format!("{what}: spirv-val: {e}"));
            }
        }
        Err(d) => failures.push(format!("{what}: translation failed:\n{d}")),
    }
    failures
}

/// Writes `words` to a temporary file and runs `spirv-val --target-env` on it.
fn spirv_val(words: &[u32], env: TargetEnv, what: &str) -> Result<(), String> {
    let file = temp_path(what);
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    std::fs::write(&file, bytes).unwrap_or_else(|e| panic!("cannot write {}: {e}", file.display()));
    let out = Command::new("spirv-val").arg("--target-env").arg(env_name(env)).arg(&file).output();
    let _ = std::fs::remove_file(&file);
    let out = match out {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            panic!("spirv-val not found: install spirv-tools (e.g. `apt-get install spirv-tools`); CI has it")
        }
        Err(e) => panic!("cannot run spirv-val: {e}"),
    };
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }
}

/// A file name in the temporary folder unique to this process and `what`.
fn temp_path(what: &str) -> PathBuf {
    let clean: String = what.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    std::env::temp_dir().join(format!("ptxvk-tests-{}-{clean}.spv", std::process::id()))
}

/// All fixtures except the known-unsupported ones translate and validate.
#[test]
fn fixtures_translate_and_validate() {
    let files = fixture_ptx_files().unwrap_or_else(|e| panic!("{e}"));
    assert!(files.len() >= 8, "expected the PTX fixtures in tests/fixtures, found {files:?}");
    let mut failures = Vec::new();
    for path in &files {
        failures.extend(translate_and_validate(path));
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
