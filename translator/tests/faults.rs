//! The fault checks (`emit/fault.rs`) without a device: with
//! `Options::fault_checks` every fixture (and the bench kernels) translates
//! into SPIR-V that `spirv-val` accepts on every warp path; the module
//! gets a fault log word and a site per checked access, each with its PTX
//! line and, from `.loc`, its CUDA line; without the option nothing
//! changes. With `Options::race_checks` as well (the racecheck's shadow
//! tracking) every fixture still validates, and a module with `mbarrier`
//! is not tracked. Running the checks is `runtime/tests/faults.rs` and
//! `runtime/tests/races.rs`.

use ptxvk_translator::abi::fault::{Access, SPACE_GLOBAL, SPACE_LOCAL, SPACE_SHARED};
use ptxvk_translator::{translate, Options, WarpPath};
use std::path::Path;

const PTX: &str = include_str!("../../tests/fixtures/faults.ptx");
const CU: &str = include_str!("../../tests/fixtures/faults.cu");

fn checked() -> Options {
    Options { fault_checks: true, ..Options::default() }
}

#[test]
fn sites_name_the_access_and_its_lines() {
    let t = translate(PTX, "faults.ptx", &checked()).unwrap_or_else(|d| panic!("{d}"));
    let info = &t.info;
    assert!(info.fault_offset.is_some(), "a fault log word");
    assert!(info.trap_offset.is_some(), "the trap word");
    assert_eq!(info.source_name, "faults.ptx");
    let site = |f: &str, access: Access, space: u32| {
        info.fault_sites
            .iter()
            .find(|s| s.function == f && s.access == access && s.space == space)
            .unwrap_or_else(|| panic!("no {access:?} site in space {space} of {f}: {:?}", info.fault_sites))
    };
    // The store of far_store: its PTX line and `out[far] = 7u` in the .cu.
    let s = site("far_store", Access::Write, SPACE_GLOBAL);
    let ptx_line = PTX.lines().nth(s.line as usize - 1).unwrap();
    assert!(ptx_line.contains("st.global.u32"), "line {}: {ptx_line}", s.line);
    assert_eq!(s.bytes, 4);
    let cu = CU.lines().position(|l| l.contains("out[far] = 7u")).unwrap() + 1;
    assert!(s.source.as_deref().is_some_and(|src| src.ends_with(&format!("faults.cu:{cu}"))), "{:?}", s.source);
    // The vector load is one site of 4-byte elements.
    let v = site("misaligned_v4", Access::Read, SPACE_GLOBAL);
    assert!(PTX.lines().nth(v.line as usize - 1).unwrap().contains(".v4."));
    site("shared_overrun", Access::Write, SPACE_SHARED);
    site("local_overrun", Access::Read, SPACE_LOCAL);
    site("histogram", Access::Atomic, SPACE_GLOBAL);
}

#[test]
fn without_checks_nothing_changes() {
    let plain = translate(PTX, "faults.ptx", &Options::default()).unwrap_or_else(|d| panic!("{d}"));
    assert!(plain.info.fault_offset.is_none() && plain.info.fault_sites.is_empty());
    let again = translate(PTX, "faults.ptx", &Options { fault_checks: false, ..Options::default() }).unwrap();
    assert_eq!(plain.spirv, again.spirv);
    let with = translate(PTX, "faults.ptx", &checked()).unwrap();
    assert_ne!(plain.spirv, with.spirv);
}

/// `spirv-val` on the words, or `None` when it is not installed.
fn spirv_val(words: &[u32]) -> Option<Result<(), String>> {
    let file = std::env::temp_dir().join(format!("ptxvk-faults-{}.spv", std::process::id()));
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    std::fs::write(&file, bytes).ok()?;
    let out = std::process::Command::new("spirv-val").arg("--target-env").arg("vulkan1.2").arg(&file).output().ok()?;
    let _ = std::fs::remove_file(&file);
    Some(if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) })
}

#[test]
fn every_fixture_checked_validates() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in ["tests/fixtures", "tests/fixtures/warp", "bench"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else { continue };
        files.extend(
            entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "ptx")),
        );
    }
    files.sort();
    let mut checked_files = 0;
    for file in files {
        let src = std::fs::read_to_string(&file).expect("read fixture");
        // With the racecheck too (its shadow tracking of shared accesses).
        for (warp_path, race_checks) in
            [(WarpPath::Emulated, false), (WarpPath::Native, false), (WarpPath::Emulated, true)]
        {
            let opts = Options { warp_path, race_checks, ..checked() };
            // Fixtures that do not translate on their own (diagnostic
            // tests) are someone else's business.
            let Ok(t) = translate(&src, "fixture.ptx", &opts) else { continue };
            match spirv_val(&t.spirv) {
                Some(Ok(())) => checked_files += 1,
                Some(Err(e)) => panic!("{} ({warp_path:?}, racecheck {race_checks}): spirv-val: {e}", file.display()),
                None => {
                    eprintln!("skipping SPIR-V validation: spirv-val is not installed");
                    return;
                }
            }
        }
    }
    assert!(checked_files > 50, "only {checked_files} translations validated");
}

#[test]
fn racecheck_tracks_shared_modules_but_not_mbarrier_ones() {
    let races = include_str!("../../tests/fixtures/races.ptx");
    let opts = Options { race_checks: true, ..checked() };
    let t = translate(races, "races.ptx", &opts).unwrap();
    assert!(t.info.race_checked);
    let plain = translate(races, "races.ptx", &checked()).unwrap();
    assert!(!plain.info.race_checked);
    assert!(t.spirv.len() > plain.spirv.len(), "the tracking is emitted");
    let tma = include_str!("../../runtime/tests/ptx/tma_mbarrier.ptx");
    let t = translate(tma, "tma_mbarrier.ptx", &Options { race_checks: true, ..checked() }).unwrap();
    assert!(!t.info.race_checked, "mbarrier waits order threads the epochs do not see");
}
