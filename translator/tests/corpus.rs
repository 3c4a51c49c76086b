//! Every PTX file the project has (the fixtures and the shared conformance
//! cases) parses, decodes and type-checks without an error.

use std::path::{Path, PathBuf};

fn ptx_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            ptx_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "ptx") {
            out.push(p);
        }
    }
}

#[test]
fn every_known_ptx_file_checks_clean() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    ptx_files(&root.join("tests/fixtures"), &mut files);
    ptx_files(&root.join("bench"), &mut files);
    // The emulated copy engine the tma pass appends to modules.
    ptx_files(&root.join("shaders"), &mut files);
    // The conformance suite lives next to the repository when it is checked
    // out in the team's layout (`../shared/conformance`).
    for dir in [root.join("../shared/conformance/cases"), root.join("../../shared/conformance/cases")] {
        ptx_files(&dir, &mut files);
    }
    assert!(!files.is_empty());
    let mut failures = String::new();
    for f in &files {
        let src = std::fs::read_to_string(f).unwrap_or_default();
        if let Err(d) = ptxvk_translator::check_syntax(&src, &f.display().to_string()) {
            failures.push_str(&d.to_string());
        }
    }
    assert!(failures.is_empty(), "{} files checked:\n{failures}", files.len());
}
