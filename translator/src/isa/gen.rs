//! Generator of `isa/names.rs`: the [`Opcode`](super::Opcode),
//! [`Mod`](super::Mod) and [`Group`](super::Group) enums, one variant per
//! opcode, modifier word and modifier group of `ptx.isa`.
//!
//! The generated file is checked in; the `isa_names` test regenerates it
//! and fails when it is stale (`UPDATE_GOLDEN=1` rewrites it). The
//! generator reads the table through [`super::raw`] only, so it works on a
//! table whose enums are not generated yet.

use super::raw::{self, RawElem};
use std::collections::BTreeSet;
use std::fmt::Write;

/// The words of the table: opcodes, modifiers and group names.
#[derive(Debug, Default)]
pub struct Words {
    /// Opcode words (`ld`, `cp`).
    pub opcodes: BTreeSet<String>,
    /// Modifier words without the dot (`global`, `shared::cta`, `u32`).
    pub mods: BTreeSet<String>,
    /// Group names without the dot (`type`, `level::cache_hint`).
    pub groups: BTreeSet<String>,
}

/// Collect the words of the table text.
pub fn words(text: &'static str) -> Result<Words, String> {
    let (insts, errors) = raw::parse(text);
    if let Some(e) = errors.first() {
        return Err(e.to_string());
    }
    let mut w = Words::default();
    // The scalar types are modifiers whatever the table says.
    for t in SCALAR_TYPES {
        w.mods.insert(t.to_string());
    }
    for inst in &insts {
        for block in &inst.blocks {
            for g in &block.groups {
                for n in &g.names {
                    w.groups.insert(n.to_string());
                }
                for alt in &g.alternatives {
                    for word in alt {
                        w.mods.insert(word.clone());
                    }
                }
            }
            for (line, no) in &block.syntax {
                let mnemonic = line.split_whitespace().next().unwrap_or("");
                let (opcode, elems) = raw::template(mnemonic).map_err(|e| format!("ptx.isa:{no}: {e}"))?;
                w.opcodes.insert(opcode);
                for (e, _) in elems {
                    match e {
                        RawElem::Fixed(word) => {
                            if !block.groups.iter().any(|g| g.names.contains(&word)) {
                                w.mods.extend(word.split('.').map(str::to_string));
                            }
                        }
                        RawElem::Inline(words) => {
                            w.mods.extend(words.iter().flat_map(|x| x.split('.')).map(str::to_string))
                        }
                        RawElem::Group(_) => {}
                    }
                }
            }
        }
    }
    Ok(w)
}

/// PTX's fundamental type names (as modifiers).
pub const SCALAR_TYPES: [&str; 20] = [
    "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "b8", "b16", "b32", "b64", "b128", "f16", "f16x2", "bf16",
    "bf16x2", "f32", "f64", "pred",
];

/// A Rust identifier for a PTX word: `shared::cta` → `SharedCta`,
/// `16x64b` → `X16x64b`.
pub fn ident(word: &str) -> String {
    let mut out = String::new();
    for part in word.split([':', '_']).filter(|p| !p.is_empty()) {
        let mut cs = part.chars();
        if let Some(c) = cs.next() {
            out.push(c.to_ascii_uppercase());
            out.extend(cs);
        }
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'X');
    }
    out
}

/// The text of `names.rs`.
pub fn names_rs(text: &'static str) -> Result<String, String> {
    let w = words(text)?;
    let mut out = String::new();
    out.push_str(
        "//! GENERATED from `ptx.isa` by `isa::gen`; do not edit.\n\
         //! Regenerate with `UPDATE_GOLDEN=1 cargo test -p ptxvk-translator --test isa_names`.\n\
         //!\n\
         //! One variant per opcode, modifier word and modifier group of the\n\
         //! instruction table, each documented with its PTX spelling.\n\n",
    );
    enum_block(
        &mut out,
        "Opcode",
        "A PTX opcode: the first word of an instruction (`ld` in `ld.global.u32`).",
        &w.opcodes,
    )?;
    enum_block(
        &mut out,
        "Mod",
        "A PTX instruction modifier: one dot-separated word after the opcode (`global` in `ld.global.u32`).",
        &w.mods,
    )?;
    enum_block(
        &mut out,
        "Group",
        "A modifier group of the manual's syntax blocks (`.type` in `ld{.ss}.type`).",
        &w.groups,
    )?;
    Ok(out)
}

fn enum_block(out: &mut String, name: &str, doc: &str, words: &BTreeSet<String>) -> Result<(), String> {
    let mut idents = BTreeSet::new();
    let mut rows: Vec<(String, &str)> = Vec::new();
    for word in words {
        let id = ident(word);
        if !idents.insert(id.clone()) {
            return Err(format!("two {name} words map to the identifier {id}"));
        }
        rows.push((id, word));
    }
    let _ = writeln!(out, "/// {doc}");
    let _ = writeln!(out, "#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]");
    let _ = writeln!(out, "#[allow(non_camel_case_types, clippy::upper_case_acronyms)]");
    let _ = writeln!(out, "#[repr(u16)]");
    let _ = writeln!(out, "pub enum {name} {{");
    for (id, word) in &rows {
        let _ = writeln!(out, "    /// `{word}`");
        let _ = writeln!(out, "    {id},");
    }
    let _ = writeln!(out, "}}\n");
    let _ = writeln!(out, "impl {name} {{");
    let _ = writeln!(out, "    /// Every variant, in declaration order.");
    let _ = writeln!(out, "    pub const ALL: [{name}; {}] = [", rows.len());
    for (id, _) in &rows {
        let _ = writeln!(out, "        {name}::{id},");
    }
    let _ = writeln!(out, "    ];\n");
    let _ = writeln!(out, "    /// The PTX spelling of each variant, in declaration order (sorted).");
    let _ = writeln!(out, "    const NAMES: [&'static str; {}] = [", rows.len());
    for (_, word) in &rows {
        let _ = writeln!(out, "        {word:?},");
    }
    let _ = writeln!(out, "    ];\n");
    let _ = writeln!(out, "    /// The PTX spelling (without the dot).");
    let _ = writeln!(out, "    pub fn name(self) -> &'static str {{");
    let _ = writeln!(out, "        Self::NAMES[self as usize]");
    let _ = writeln!(out, "    }}\n");
    let _ = writeln!(out, "    /// The variant spelled `s` (without the dot).");
    let _ = writeln!(out, "    pub fn from_name(s: &str) -> Option<Self> {{");
    let _ = writeln!(out, "        Self::NAMES.binary_search(&s).ok().map(|i| Self::ALL[i])");
    let _ = writeln!(out, "    }}");
    let _ = writeln!(out, "}}\n");
    Ok(())
}
