//! The generated PTX corpus (`tests/corpus/ptx`, made by
//! `scripts/gen-corpus.sh` from `tests/corpus/src`: nvcc `-O3` and `-G` for
//! sm_75 to sm_90a, and numba) goes through the front end without an error,
//! and translates as far as the translator supports.
//!
//! * every file parses, decodes and checks with zero errors;
//! * every file is translated (default options); each SPIR-V module that
//!   comes out must pass `spirv-val`, and the files that do not translate
//!   must be exactly those listed in `tests/corpus/expected-failures.txt`
//!   (so a file that starts to translate, or stops, fails the test until
//!   the list is updated: `UPDATE_GOLDEN=1 cargo test -p ptxvk-translator
//!   --test ptx_corpus` rewrites it). The summary printed (`--nocapture`)
//!   counts the unsupported instructions and other reasons.
//!
//! Needs `spirv-val` (package `spirv-tools`), as `tests/tests/spirv_val.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod common;

use common::spirv_val;
use ptxvk_translator::{translate, Options};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus")
}

/// The corpus files, sorted by name.
fn corpus_files() -> Vec<PathBuf> {
    let dir = corpus_dir().join("ptx");
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "ptx"))
        .collect();
    files.sort();
    files
}

fn file_name(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

#[test]
fn corpus_parses_and_checks_with_zero_errors() {
    let files = corpus_files();
    assert!(files.len() >= 300, "expected at least 300 corpus files, found {}", files.len());
    let mut failures = String::new();
    let mut bytes = 0;
    for f in &files {
        let src = read(f);
        bytes += src.len();
        if let Err(d) = ptxvk_translator::check_syntax(&src, &file_name(f)) {
            failures.push_str(&d.to_string());
        }
    }
    println!("corpus: {} files, {bytes} bytes, all parse and check", files.len());
    assert!(failures.is_empty(), "{} files checked:\n{failures}", files.len());
}

/// The reason of one translation error, for the summary: the unsupported
/// instruction or feature, without its location.
fn reason(d: &ptxvk_translator::Diagnostic) -> String {
    let m = &d.message;
    if let Some(rest) = m.strip_prefix("unsupported instruction '") {
        // `unsupported instruction 'wmma.load.a.sync...'`: the opcode and
        // its first modifier are enough to group by.
        let mnemonic = rest.split('\'').next().unwrap_or(rest);
        let short: Vec<&str> = mnemonic.split('.').take(2).collect();
        return format!("unsupported instruction {}", short.join("."));
    }
    // Special registers and library functions: the name is the reason.
    if m.starts_with("unknown name") || m.starts_with("call to") {
        return m.clone();
    }
    // Other names differ between files: keep the message's shape.
    let mut out = String::new();
    for (i, part) in m.split('\'').enumerate() {
        out.push_str(if i % 2 == 1 { "'…'" } else { part });
    }
    out
}

/// The expected failures: one file name per line (after it, a tab and a
/// comment); `#` starts a comment line.
fn expected_failures() -> BTreeSet<String> {
    let path = corpus_dir().join("expected-failures.txt");
    read(&path)
        .lines()
        .map(|l| l.split('\t').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// Rewrites `expected-failures.txt`: its leading comment, then each failing
/// file with its first error.
fn write_expected_failures(failed: &BTreeMap<String, (String, String)>) {
    let path = corpus_dir().join("expected-failures.txt");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let mut text: String = old.lines().take_while(|l| l.starts_with('#')).map(|l| format!("{l}\n")).collect();
    for (name, (_, first)) in failed {
        text.push_str(&format!("{name}\t{first}\n"));
    }
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

#[test]
fn corpus_translates_except_expected_failures() {
    let files = corpus_files();
    let options = Options::default();
    let mut translated = 0usize;
    let mut failed = BTreeMap::new();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut invalid = String::new();
    for f in &files {
        let name = file_name(f);
        match translate(&read(f), &name, &options) {
            Ok(t) => {
                translated += 1;
                if let Err(e) = spirv_val(&t.spirv, &name) {
                    invalid.push_str(&format!("{name}: spirv-val:\n{e}\n"));
                }
            }
            Err(d) => {
                let distinct: BTreeSet<String> = d.items.iter().map(reason).collect();
                for r in distinct {
                    *reasons.entry(r).or_default() += 1;
                }
                let first = d.items.first().map_or(String::new(), |i| i.message.clone());
                failed.insert(name, (d.to_string(), first));
            }
        }
    }
    println!(
        "corpus: {translated} of {} files translate and validate; {} do not (files per error):",
        files.len(),
        failed.len()
    );
    for (r, n) in &reasons {
        println!("  {n:4}  {r}");
    }
    assert!(invalid.is_empty(), "translations that spirv-val rejects:\n{invalid}");

    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        write_expected_failures(&failed);
        return;
    }
    let expected = expected_failures();
    let got: BTreeSet<String> = failed.keys().cloned().collect();
    let new: Vec<&String> = got.difference(&expected).collect();
    let fixed: Vec<&String> = expected.difference(&got).collect();
    let mut msg = String::new();
    for n in &new {
        msg.push_str(&format!("newly failing (not in expected-failures.txt): {}\n", failed[n.as_str()].0));
    }
    for n in &fixed {
        msg.push_str(&format!("now translates, remove from expected-failures.txt: {n}\n"));
    }
    if !msg.is_empty() {
        msg.push_str("(UPDATE_GOLDEN=1 cargo test -p ptxvk-translator --test ptx_corpus rewrites the list)\n");
    }
    assert!(msg.is_empty(), "{msg}");
}
