//! `ptx-survey`: which kernels of NVIDIA's libraries ptxvk translates.
//!
//! ```text
//! ptx-survey [--sm N] [--out DIR] FILE...
//! ```
//!
//! Reads each FILE (a shared library such as `libcublasLt.so.13`, or a fat
//! binary), finds the fat-binary containers in it (the magic `0xBA55ED50`
//! at an 8-byte boundary, as in an ELF's `.nv_fatbin` section), and takes
//! every PTX image of each (decompressed; with `--sm N`, only images for
//! `compute_N` or below, the ones a device of that capability would be
//! offered). Each image is prepared once and every `.entry` is lowered on
//! its own, with the translator's default options, as the runtime does when
//! it loads a kernel lazily. Prints, as Markdown: per file the images, the
//! entries and the entries that do not translate; then the reasons, each
//! with its count and one kernel that has it (digits in a message become
//! `N`, so that one reason is one row). `--out DIR` also writes each image
//! as `DIR/<file>.<container>.<image>.sm_<N>.ptx`.
//!
//! `scripts/library-ptx-survey.sh` downloads the libraries' pip wheels and
//! runs this over them (`docs/library-ptx.md` holds its last table).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use cuda::fatbin;
use ptxvk_translator::{prepare, Options};

/// Counts for one file.
#[derive(Default)]
struct FileCounts {
    containers: usize,
    images: usize,
    bytes: usize,
    entries: usize,
    failed: usize,
}

/// One reason: how many entries have it, and the first seen.
struct Reason {
    count: usize,
    example: String,
}

fn main() -> ExitCode {
    let mut sm: Option<u32> = None;
    let mut out: Option<PathBuf> = None;
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--sm" => match args.next().and_then(|v| v.parse().ok()) {
                Some(v) => sm = Some(v),
                None => return usage("--sm takes a number, such as 80"),
            },
            "--out" => match args.next() {
                Some(d) => out = Some(PathBuf::from(d)),
                None => return usage("--out takes a folder"),
            },
            "-h" | "--help" => return usage(""),
            _ => files.push(PathBuf::from(a)),
        }
    }
    if files.is_empty() {
        return usage("no file given");
    }
    if let Some(d) = &out {
        if let Err(e) = std::fs::create_dir_all(d) {
            eprintln!("ptx-survey: {}: {e}", d.display());
            return ExitCode::FAILURE;
        }
    }
    let options = Options::default();
    let mut per_file: Vec<(String, FileCounts)> = Vec::new();
    let mut reasons: BTreeMap<String, Reason> = BTreeMap::new();
    for path in &files {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("ptx-survey: {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        };
        let mut counts = FileCounts::default();
        for (ci, container) in containers(&bytes).into_iter().enumerate() {
            counts.containers += 1;
            let entries = match fatbin::entries(container) {
                Ok(e) => e,
                Err(e) => {
                    eprintln!("ptx-survey: {name}: container {ci}: {e}");
                    continue;
                }
            };
            for (ii, image) in entries.iter().enumerate().filter(|(_, e)| e.is_ptx()) {
                if sm.is_some_and(|s| image.sm > s) {
                    continue;
                }
                let end = image.payload.iter().position(|&b| b == 0).unwrap_or(image.payload.len());
                let text = String::from_utf8_lossy(&image.payload[..end]).into_owned();
                counts.images += 1;
                counts.bytes += text.len();
                let label = format!("{name}.{ci}.{ii}.sm_{}.ptx", image.sm);
                if let Some(d) = &out {
                    if let Err(e) = std::fs::write(d.join(&label), &text) {
                        eprintln!("ptx-survey: {label}: {e}");
                    }
                }
                survey(&text, &label, &options, &mut counts, &mut reasons);
            }
        }
        eprintln!(
            "ptx-survey: {name}: {} containers, {} PTX images, {} entries, {} do not translate",
            counts.containers, counts.images, counts.entries, counts.failed
        );
        per_file.push((name, counts));
    }
    print_tables(&per_file, &reasons);
    ExitCode::SUCCESS
}

/// Prepares one PTX image and lowers each entry alone.
fn survey(text: &str, label: &str, options: &Options, counts: &mut FileCounts, reasons: &mut BTreeMap<String, Reason>) {
    let names = entry_names(text);
    let prepared = match prepare(text, label, options) {
        Ok(p) => p,
        Err(d) => {
            // The whole image fails before lowering: each entry with it.
            let why = d.items.first().map(|i| i.message.clone()).unwrap_or_default();
            counts.entries += names.len().max(1);
            counts.failed += names.len().max(1);
            let example = names.first().cloned().unwrap_or_else(|| label.to_string());
            note(reasons, &format!("(module) {why}"), names.len().max(1), &example);
            return;
        }
    };
    for entry in prepared.entry_names() {
        counts.entries += 1;
        let one = Options { entry: Some(entry.clone()), ..options.clone() };
        if let Err(d) = prepared.emit(&one) {
            counts.failed += 1;
            let why = d.items.first().map(|i| i.message.clone()).unwrap_or_default();
            note(reasons, &why, 1, &entry);
        }
    }
}

/// Counts `n` entries under `why` (digits folded to `N`).
fn note(reasons: &mut BTreeMap<String, Reason>, why: &str, n: usize, example: &str) {
    let mut key = String::with_capacity(why.len());
    let mut in_digits = false;
    for c in why.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                key.push('N');
            }
            in_digits = true;
        } else {
            key.push(c);
            in_digits = false;
        }
    }
    let key: String = key.chars().take(160).collect();
    reasons.entry(key).or_insert_with(|| Reason { count: 0, example: example.to_string() }).count += n;
}

/// The `.entry` names of a PTX text, by a plain scan (for counting when the
/// text does not parse).
fn entry_names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(rest) =
            line.trim_start().strip_prefix(".visible .entry ").or_else(|| line.trim_start().strip_prefix(".entry "))
        {
            let name: String = rest.chars().take_while(|&c| c != '(' && !c.is_whitespace()).collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

/// The fat-binary containers in `bytes`.
fn containers(bytes: &[u8]) -> Vec<&[u8]> {
    let magic = fatbin::FATBIN_MAGIC.to_le_bytes();
    let mut out = Vec::new();
    let mut at = 0usize;
    while at + 16 <= bytes.len() {
        if bytes[at..at + 4] == magic {
            if let Some(size) = fatbin::container_size(&bytes[at..]) {
                if let Some(c) = bytes.get(at..at + size) {
                    out.push(c);
                    at += size.max(8).next_multiple_of(8);
                    continue;
                }
            }
        }
        at += 8;
    }
    out
}

fn print_tables(per_file: &[(String, FileCounts)], reasons: &BTreeMap<String, Reason>) {
    println!("| file | containers | PTX images | PTX MB | entries | do not translate |");
    println!("|---|---|---|---|---|---|");
    let mut total = FileCounts::default();
    for (name, c) in per_file {
        println!(
            "| {name} | {} | {} | {:.1} | {} | {} |",
            c.containers,
            c.images,
            c.bytes as f64 / 1e6,
            c.entries,
            c.failed
        );
        total.containers += c.containers;
        total.images += c.images;
        total.bytes += c.bytes;
        total.entries += c.entries;
        total.failed += c.failed;
    }
    println!(
        "| all | {} | {} | {:.1} | {} | {} |",
        total.containers,
        total.images,
        total.bytes as f64 / 1e6,
        total.entries,
        total.failed
    );
    println!();
    println!("| entries | reason (the first error of each; digits as N) | one of them |");
    println!("|---|---|---|");
    let mut rows: Vec<(&String, &Reason)> = reasons.iter().collect();
    rows.sort_by(|a, b| b.1.count.cmp(&a.1.count).then(a.0.cmp(b.0)));
    for (why, r) in rows {
        let why = why.replace('|', "\\|");
        let example: String = r.example.chars().take(80).collect();
        println!("| {} | {why} | `{example}` |", r.count);
    }
}

fn usage(why: &str) -> ExitCode {
    if !why.is_empty() {
        eprintln!("ptx-survey: {why}");
    }
    eprintln!("usage: ptx-survey [--sm N] [--out DIR] FILE...");
    if why.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    }
}
