//! The instruction table, typed: every form of every instruction of
//! `ptx.isa` with its template of modifier elements (as [`Mod`] and
//! [`Group`] values) and its operand list.
//!
//! The table is built once per process from the text compiled into the
//! crate ([`table`]). A table that does not build is a bug in `ptx.isa`;
//! the errors are kept in [`Table::errors`] (a test asserts there are none)
//! rather than panicking.

use super::raw::{self, RawElem, RawOperand, Shape, TableError};
use super::{Group, Mod, Opcode};
use crate::ast::ScalarType;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// The table text.
pub const TEXT: &str = include_str!("ptx.isa");

/// Most template elements one form may have (a compile-time bound for
/// [`super::Decoded`]).
pub const MAX_ELEMS: usize = 16;

/// One instruction of the manual (`ld`, `cp.async.bulk.tensor`).
#[derive(Clone, Debug)]
pub struct InstInfo {
    /// The manual's name.
    pub name: &'static str,
    /// Least PTX ISA version, as written in the table (may be empty).
    pub ptx: &'static str,
    /// Least target, as written in the table (may be empty).
    pub sm: &'static str,
    /// One-line description.
    pub description: &'static str,
    /// Indices of its forms in [`Table::forms`].
    pub forms: Vec<u16>,
}

/// One element of a form's modifier template.
#[derive(Clone, Debug)]
pub struct Elem {
    /// The group it stands for (`None` for a literal modifier).
    pub group: Option<Group>,
    /// Whether it may be left out.
    pub optional: bool,
    /// The alternatives; each a sequence of modifiers (shared by the forms
    /// of a block).
    pub alts: Arc<[Vec<Mod>]>,
    /// Indices into `alts`, longest alternative first (the matching order).
    pub order: Arc<[u8]>,
}

/// The type rule of one operand (see the format notes in `ptx.isa`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeRule {
    /// Not checked.
    Any,
    /// The type chosen for a group; `relaxed`: wider registers allowed.
    Group {
        /// The group.
        group: Group,
        /// Operand size may exceed the type (ld, st, cvt).
        relaxed: bool,
    },
    /// The instruction's last type modifier.
    Inst,
    /// A fixed type.
    Fixed(ScalarType),
    /// An integer constant.
    Imm,
    /// A label.
    Label,
}

/// One operand of a form.
#[derive(Clone, Debug)]
pub struct OperandSpec {
    /// The manual's name for it.
    pub name: String,
    /// Its shape.
    pub shape: Shape,
    /// It may be left out.
    pub optional: bool,
    /// A predicate pair: `Some(true)` required (`p|q`), `Some(false)` allowed (`p{|q}`).
    pub pair: Option<bool>,
    /// `{!}c` / `{-}a`.
    pub negatable: bool,
    /// A selector: `Some(true)` required (`d.dsel`), `Some(false)` allowed (`a{.asel}`).
    pub selector: Option<bool>,
    /// `[a]{.unified}`.
    pub unified: bool,
    /// Its type rule.
    pub ty: TypeRule,
    /// A vector of as many elements as this group's `.vN` says.
    pub vector: Option<Group>,
    /// A destination.
    pub out: bool,
}

/// One form: a syntax line of the manual.
#[derive(Clone, Debug)]
pub struct Form {
    /// Opcode word.
    pub opcode: Opcode,
    /// Index of its instruction in [`Table::instructions`].
    pub inst: u16,
    /// The syntax line as the manual writes it (without `;`).
    pub syntax: &'static str,
    /// Line in `ptx.isa`.
    pub line: usize,
    /// Modifier template.
    pub elems: Vec<Elem>,
    /// Operands.
    pub operands: Vec<OperandSpec>,
    /// Operands that must be present.
    pub required_operands: u8,
}

impl Form {
    /// Most operands.
    pub fn max_operands(&self) -> usize {
        self.operands.len()
    }
}

/// The whole table.
#[derive(Debug, Default)]
pub struct Table {
    /// Instructions in table order.
    pub instructions: Vec<InstInfo>,
    /// Forms in table order.
    pub forms: Vec<Form>,
    /// Forms of each opcode (indexed by `Opcode as usize`).
    by_opcode: Vec<Vec<u16>>,
    /// Modifiers accepted by some form of each opcode: a bit set over
    /// `Mod` per opcode.
    mods_of: Vec<Vec<u64>>,
    /// Errors found while building (none in a correct table).
    pub errors: Vec<TableError>,
}

impl Table {
    /// The forms of an opcode, in table order.
    pub fn forms_of(&self, op: Opcode) -> &[u16] {
        self.by_opcode.get(op as usize).map_or(&[], Vec::as_slice)
    }

    /// Whether some form of `op` accepts modifier `m`.
    pub fn accepts(&self, op: Opcode, m: Mod) -> bool {
        let i = m as usize;
        self.mods_of.get(op as usize).and_then(|v| v.get(i / 64)).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// The form with this index.
    pub fn form(&self, id: u16) -> Option<&Form> {
        self.forms.get(id as usize)
    }
}

/// The table, built on first use.
pub fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| build(TEXT))
}

/// Build a table from text.
pub fn build(text: &'static str) -> Table {
    let (insts, mut errors) = raw::parse(text);
    let mut t = Table {
        by_opcode: vec![Vec::new(); Opcode::ALL.len()],
        mods_of: vec![vec![0u64; Mod::ALL.len().div_ceil(64)]; Opcode::ALL.len()],
        ..Default::default()
    };
    for inst in &insts {
        let inst_id = t.instructions.len() as u16;
        let mut info =
            InstInfo { name: inst.name, ptx: inst.ptx, sm: inst.sm, description: inst.description, forms: Vec::new() };
        for block in &inst.blocks {
            let mut used_names: Vec<String> = Vec::new();
            // Group elements are the same in every form of the block.
            let mut group_elems: HashMap<String, Elem> = HashMap::new();
            for &(line, line_no) in &block.syntax {
                let err = |m: String| TableError { line: line_no, message: m };
                let (mnemonic, ops_text) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
                let (opcode_word, raw_elems) = match raw::template(mnemonic) {
                    Ok(x) => x,
                    Err(e) => {
                        errors.push(err(e));
                        continue;
                    }
                };
                let Some(opcode) = Opcode::from_name(&opcode_word) else {
                    errors.push(err(format!("opcode '{opcode_word}' missing from names.rs (regenerate it)")));
                    continue;
                };
                let mut elems = Vec::new();
                for (e, optional) in raw_elems {
                    let key = match &e {
                        RawElem::Fixed(w) => Some(format!("{w}{optional}")),
                        _ => None,
                    };
                    if let Some(cached) = key.as_ref().and_then(|k| group_elems.get(k)) {
                        elems.push(cached.clone());
                        continue;
                    }
                    match elem(block, e, optional) {
                        Ok(e) => {
                            if let Some(k) = key {
                                group_elems.insert(k, e.clone());
                            }
                            elems.push(e)
                        }
                        Err(m) => errors.push(err(m)),
                    }
                }
                if elems.len() > MAX_ELEMS {
                    errors.push(err(format!("more than {MAX_ELEMS} template elements")));
                    continue;
                }
                let raw_ops = match raw::operands(ops_text) {
                    Ok(o) => o,
                    Err(e) => {
                        errors.push(err(e));
                        continue;
                    }
                };
                let mut operands = Vec::new();
                for o in raw_ops {
                    used_names.push(o.name.clone());
                    match operand_spec(block, &elems, o) {
                        Ok(s) => operands.push(s),
                        Err(m) => errors.push(err(m)),
                    }
                }
                let required_operands = operands.iter().filter(|o| !o.optional).count() as u8;
                let id = t.forms.len() as u16;
                let bits = &mut t.mods_of[opcode as usize];
                for e in &elems {
                    for m in e.alts.iter().flatten() {
                        let i = *m as usize;
                        bits[i / 64] |= 1 << (i % 64);
                    }
                }
                t.by_opcode[opcode as usize].push(id);
                info.forms.push(id);
                t.forms.push(Form {
                    opcode,
                    inst: inst_id,
                    syntax: line,
                    line: line_no,
                    elems,
                    operands,
                    required_operands,
                });
            }
            for (name, _) in &block.types {
                if !used_names.iter().any(|n| n == name) {
                    let line = block.syntax.first().map_or(inst.line, |s| s.1);
                    errors.push(TableError { line, message: format!("type rule for unknown operand '{name}'") });
                }
            }
        }
        t.instructions.push(info);
    }
    t.errors = errors;
    t
}

fn mods_of_words<S: AsRef<str>>(words: &[S]) -> Result<Vec<Mod>, String> {
    words
        .iter()
        .map(|w| {
            let w = w.as_ref();
            Mod::from_name(w).ok_or_else(|| format!("modifier '.{w}' missing from names.rs (regenerate it)"))
        })
        .collect()
}

fn elem(block: &raw::RawBlock, e: RawElem, optional: bool) -> Result<Elem, String> {
    let (group, alts) = match e {
        RawElem::Fixed(word) => match block.groups.iter().find(|g| g.names.contains(&word)) {
            Some(g) => {
                let group = Group::from_name(&word).ok_or_else(|| format!("group '.{word}' missing from names.rs"))?;
                let alts = g.alternatives.iter().map(|a| mods_of_words(a)).collect::<Result<Vec<_>, _>>()?;
                (Some(group), alts)
            }
            None => {
                let words: Vec<&str> = word.split('.').collect();
                (None, vec![mods_of_words(&words)?])
            }
        },
        RawElem::Inline(words) => {
            let alts = words
                .iter()
                .map(|w| mods_of_words(&w.split('.').collect::<Vec<_>>()))
                .collect::<Result<Vec<_>, _>>()?;
            (None, alts)
        }
        RawElem::Group(name) => {
            return Err(format!("unexpected group element '{name}'"));
        }
    };
    let mut order: Vec<u8> = (0..alts.len() as u8).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(alts[i as usize].len()));
    Ok(Elem { group, optional, alts: alts.into(), order: order.into() })
}

fn operand_spec(block: &raw::RawBlock, elems: &[Elem], o: RawOperand) -> Result<OperandSpec, String> {
    let mut spec = OperandSpec {
        name: o.name.clone(),
        shape: o.shape,
        optional: o.optional,
        pair: o.pair,
        negatable: o.negatable,
        selector: o.selector,
        unified: o.unified,
        ty: TypeRule::Any,
        vector: None,
        out: false,
    };
    let Some(&(_, rule)) = block.types.iter().find(|(n, _)| *n == o.name) else {
        return Ok(spec);
    };
    let group_in_form = |name: &str| -> Result<Group, String> {
        let g = Group::from_name(name).ok_or_else(|| format!("type rule names unknown group '.{name}'"))?;
        if elems.iter().any(|e| e.group == Some(g)) {
            Ok(g)
        } else {
            Err(format!("type rule names group '.{name}' which this form does not have"))
        }
    };
    for word in rule.split_whitespace() {
        if word == "out" {
            spec.out = true;
        } else if let Some(g) = word.strip_prefix("[.").and_then(|w| w.strip_suffix(']')) {
            // A vector group that a form of the block may lack (then the operand is scalar).
            spec.vector = Group::from_name(g).filter(|g| elems.iter().any(|e| e.group == Some(*g)));
        } else if let Some(g) = word.strip_prefix('.') {
            let (g, relaxed) = match g.strip_suffix('*') {
                Some(g) => (g, true),
                None => (g, false),
            };
            // A block's forms may differ in their groups: a rule naming a
            // group the form lacks leaves the operand unchecked.
            spec.ty = match group_in_form(g) {
                Ok(group) => TypeRule::Group { group, relaxed },
                Err(_) if Group::from_name(g).is_some() => TypeRule::Any,
                Err(e) => return Err(e),
            };
        } else {
            spec.ty = match word {
                "any" | "addr" => TypeRule::Any,
                "inst" => TypeRule::Inst,
                "imm" => TypeRule::Imm,
                "label" => TypeRule::Label,
                t => TypeRule::Fixed(ScalarType::from_name(t).ok_or_else(|| format!("unknown type '{t}' in rule"))?),
            };
        }
    }
    Ok(spec)
}
