//! Decoding: an [`ast::Instruction`] (opcode word, modifier words,
//! operands) matched against the forms of the [table](mod@super::table) into a
//! [`Decoded`] instruction, or a diagnostic that names the offending
//! modifier or operand.
//!
//! Matching a form's modifiers does not depend on their order: each
//! modifier fills the first unfilled template element (in the manual's
//! order) that accepts it, so that repeated groups (`cvt.f32.f16`:
//! `.dtype` then `.atype`) keep the manual's order while compilers'
//! orderings of independent groups (`red.global.add` and `red.add.global`)
//! are both accepted. Multi-word alternatives (`.async.shared::cta`) are
//! tried longest first. Operands are matched by count and shape; types are
//! checked later, by [`crate::check`], which knows the declarations.

use super::raw::Shape;
use super::table::{table, Form, MAX_ELEMS};
use super::{Group, Mod, Opcode};
use crate::ast::{self, Operand, ScalarType};
use crate::diag::{Diagnostic, Span};

/// A decoded instruction: its form and the alternative chosen for each
/// element of the form's template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// The opcode.
    pub opcode: Opcode,
    /// Index of the form in the table.
    pub form: u16,
    /// For each template element, 1 + the index of the chosen alternative;
    /// 0 when an optional element is absent.
    picks: [u8; MAX_ELEMS],
}

impl Decoded {
    /// The form.
    pub fn form(&self) -> &'static Form {
        // `form` indexes the process-wide table it was decoded against.
        &table().forms[self.form as usize]
    }

    /// The manual's name of the instruction (`cp.async.bulk`).
    pub fn name(&self) -> &'static str {
        table().instructions.get(self.form().inst as usize).map_or("", |i| i.name)
    }

    /// The modifiers chosen for group `g`, if the form has it and it is present.
    pub fn get(&self, g: Group) -> Option<&'static [Mod]> {
        let form = self.form();
        form.elems
            .iter()
            .zip(self.picks.iter())
            .find_map(|(e, &p)| (e.group == Some(g) && p > 0).then(|| e.alts[p as usize - 1].as_slice()))
    }

    /// The single modifier chosen for group `g` (the first word of a
    /// multi-word alternative).
    pub fn first(&self, g: Group) -> Option<Mod> {
        self.get(g).and_then(|m| m.first().copied())
    }

    /// Whether modifier `m` is present.
    pub fn has(&self, m: Mod) -> bool {
        self.modifiers().any(|x| x == m)
    }

    /// The present modifiers, in the template's order.
    pub fn modifiers(&self) -> impl Iterator<Item = Mod> + '_ {
        let form = self.form();
        form.elems
            .iter()
            .zip(self.picks.iter())
            .filter(|(_, &p)| p > 0)
            .flat_map(|(e, &p)| e.alts[p as usize - 1].iter().copied())
    }

    /// The instruction's last type modifier (`f32` in `cvt.rn.f32.s32`).
    pub fn ty(&self) -> Option<ScalarType> {
        self.modifiers().filter_map(scalar_type).last()
    }

    /// The type chosen for group `g`.
    pub fn group_type(&self, g: Group) -> Option<ScalarType> {
        self.first(g).and_then(scalar_type)
    }
}

/// The fundamental type a modifier names, if any.
pub fn scalar_type(m: Mod) -> Option<ScalarType> {
    ScalarType::from_name(m.name())
}

/// What decoding needs to know about one modifier of the source.
struct Word<'a> {
    text: &'a str,
    m: Option<Mod>,
    span: Span,
}

/// Decode one instruction.
pub fn decode(inst: &ast::Instruction) -> Result<Decoded, Diagnostic> {
    let t = table();
    let Some(opcode) = Opcode::from_name(&inst.opcode) else {
        return Err(Diagnostic::error(inst.opcode_span, format!("unknown instruction '{}'", inst.mnemonic())));
    };
    // Spans of the modifiers: the opcode token is the mnemonic as written.
    let mut words = Vec::with_capacity(inst.modifiers.len());
    let mut pos = inst.opcode_span.start + inst.opcode.len() as u32;
    for m in &inst.modifiers {
        let start = pos + 1;
        let end = start + m.len() as u32;
        words.push(Word { text: m, m: Mod::from_name(m), span: Span { start: start - 1, end } });
        pos = end;
    }
    // A modifier no form of this opcode accepts.
    for w in &words {
        if !w.m.is_some_and(|m| t.accepts(opcode, m)) {
            return Err(Diagnostic::error(w.span, format!("'.{}' is not valid for '{}'", w.text, inst.opcode)));
        }
    }
    let mods: Vec<Mod> = words.iter().filter_map(|w| w.m).collect();
    let mut best_mod_fail: Option<(usize, ModFail, u16)> = None;
    let mut first_operand_fail: Option<Diagnostic> = None;
    let mut counts: Vec<(usize, usize)> = Vec::new();
    for &fid in t.forms_of(opcode) {
        let form = &t.forms[fid as usize];
        let picks = match match_modifiers(form, &mods) {
            Ok(p) => p,
            Err(fail) => {
                let score = fail.progress();
                if !matches!(&best_mod_fail, Some((s, _, _)) if score <= *s) {
                    best_mod_fail = Some((score, fail, fid));
                }
                continue;
            }
        };
        let decoded = Decoded { opcode, form: fid, picks };
        match match_operands(form, &decoded, inst) {
            Ok(()) => return Ok(decoded),
            Err(OperandFail::Count) => {
                let c = (form.required_operands as usize, form.max_operands());
                if !counts.contains(&c) {
                    counts.push(c);
                }
            }
            Err(OperandFail::Shape(d)) => {
                if first_operand_fail.is_none() {
                    first_operand_fail = Some(d);
                }
            }
        }
    }
    if let Some(d) = first_operand_fail {
        return Err(d);
    }
    if !counts.is_empty() {
        counts.sort();
        let expected: Vec<String> =
            counts.iter().map(|&(lo, hi)| if lo == hi { lo.to_string() } else { format!("{lo} to {hi}") }).collect();
        let expected = expected.join(" or ");
        let plural = if expected == "1" { "" } else { "s" };
        return Err(Diagnostic::error(
            inst.span,
            format!("'{}' expects {expected} operand{plural}, found {}", inst.mnemonic(), inst.operands.len()),
        ));
    }
    let Some((_, fail, fid)) = best_mod_fail else {
        return Err(Diagnostic::error(inst.opcode_span, format!("unknown instruction '{}'", inst.mnemonic())));
    };
    let form = &t.forms[fid as usize];
    Err(match fail {
        ModFail::Unmatched(i) => {
            let w = &words[i];
            let repeated = words[..i].iter().any(|x| x.text == w.text);
            if repeated {
                Diagnostic::error(w.span, format!("'.{}' is repeated in '{}'", w.text, inst.mnemonic()))
            } else {
                Diagnostic::error(
                    w.span,
                    format!(
                        "'.{}' cannot be used here in '{}' (closest form: {})",
                        w.text,
                        inst.mnemonic(),
                        form.syntax
                    ),
                )
            }
        }
        ModFail::Missing(e) => {
            let elem = &form.elems[e];
            let what = match elem.group {
                Some(g) => format!(".{}", g.name()),
                None => alt_text(&elem.alts[0]),
            };
            let choices: Vec<String> = elem.alts.iter().map(|a| alt_text(a)).collect();
            let choices =
                if choices.len() > 12 { format!("{}, ...", choices[..12].join(", ")) } else { choices.join(", ") };
            Diagnostic::error(
                inst.opcode_span,
                format!("'{}' lacks {what} (one of {choices}; form: {})", inst.mnemonic(), form.syntax),
            )
        }
    })
}

fn alt_text(alt: &[Mod]) -> String {
    alt.iter().map(|m| format!(".{}", m.name())).collect()
}

/// Why a form's template rejected the modifiers.
#[derive(Clone, Copy, Debug)]
enum ModFail {
    /// Modifier `i` fits no unfilled element.
    Unmatched(usize),
    /// Required element `e` is unfilled.
    Missing(usize),
}

impl ModFail {
    /// How far matching got (to pick the closest form for the message).
    fn progress(&self) -> usize {
        match self {
            ModFail::Unmatched(i) => 2 * i,
            ModFail::Missing(_) => usize::MAX / 2,
        }
    }
}

fn match_modifiers(form: &Form, mods: &[Mod]) -> Result<[u8; MAX_ELEMS], ModFail> {
    let mut picks = [0u8; MAX_ELEMS];
    let mut i = 0;
    'words: while i < mods.len() {
        for (k, e) in form.elems.iter().enumerate() {
            if picks[k] != 0 {
                continue;
            }
            for &a in e.order.iter() {
                let alt = &e.alts[a as usize];
                if mods[i..].starts_with(alt) {
                    picks[k] = a + 1;
                    i += alt.len();
                    continue 'words;
                }
            }
        }
        return Err(ModFail::Unmatched(i));
    }
    for (k, e) in form.elems.iter().enumerate() {
        if !e.optional && picks[k] == 0 {
            return Err(ModFail::Missing(k));
        }
    }
    Ok(picks)
}

enum OperandFail {
    Count,
    Shape(Diagnostic),
}

/// The operand specs that `n` operands fill: the required ones and the
/// first optional ones, in order; `None` when `n` does not fit the form.
pub fn assign(form: &Form, n: usize) -> Option<Vec<&super::table::OperandSpec>> {
    let required = form.required_operands as usize;
    if n < required || n > form.max_operands() {
        return None;
    }
    Some(assigned(form, n).collect())
}

/// [`assign`] as an iterator (empty when `n` does not fit the form).
pub fn assigned(form: &Form, n: usize) -> impl Iterator<Item = &super::table::OperandSpec> {
    let required = form.required_operands as usize;
    let fits = n >= required && n <= form.max_operands();
    let mut optional_left = if fits { n - required } else { 0 };
    form.operands.iter().filter(move |spec| {
        if !fits {
            return false;
        }
        if spec.optional {
            if optional_left == 0 {
                return false;
            }
            optional_left -= 1;
        }
        true
    })
}

fn match_operands(form: &Form, _d: &Decoded, inst: &ast::Instruction) -> Result<(), OperandFail> {
    let n = inst.operands.len();
    if n < form.required_operands as usize || n > form.max_operands() {
        return Err(OperandFail::Count);
    }
    for (k, (spec, op)) in assigned(form, n).zip(&inst.operands).enumerate() {
        if !shape_fits(spec, op) {
            let what = match spec.shape {
                Shape::Plain => "a register or a constant".to_string(),
                Shape::Memory => "a memory operand [a]".to_string(),
                Shape::Bracket { min, max } if min == max => format!("a list of {min} in brackets [a, b]"),
                Shape::Bracket { min, max } => format!("a list of {min} or {max} in brackets [a, b]"),
                Shape::Vector(n) => format!("a vector of {n} {{a, b, ...}}"),
                Shape::List => "a list in parentheses".to_string(),
                Shape::Sink => "'_'".to_string(),
                Shape::Literal(v) => format!("the constant {v}"),
            };
            return Err(OperandFail::Shape(Diagnostic::error(
                op.span(),
                format!("operand {} ('{}') of '{}' must be {what}", k + 1, spec.name, inst.mnemonic()),
            )));
        }
    }
    Ok(())
}

fn shape_fits(spec: &super::table::OperandSpec, op: &Operand) -> bool {
    let op = match op {
        Operand::Select { base, .. } if spec.selector.is_some() || spec.unified => base.as_ref(),
        other => other,
    };
    match spec.shape {
        Shape::Plain => match op {
            Operand::Name { .. } | Operand::Int(..) | Operand::Float(..) | Operand::Vector(..) | Operand::Sink(_) => {
                spec.pair != Some(true)
            }
            Operand::SymbolOffset(..) => spec.pair != Some(true),
            Operand::Not(..) | Operand::Neg(..) => spec.negatable,
            Operand::Pair(..) => spec.pair.is_some(),
            _ => false,
        },
        Shape::Memory => matches!(op, Operand::Address(..)),
        Shape::Bracket { min, max } => match op {
            Operand::Bracket(_, v) => (min as usize..=max as usize).contains(&v.len()),
            // `[a, {x, y}]`: an address and a vector of coordinates.
            Operand::TensorAddress(..) => (min..=max).contains(&2),
            _ => false,
        },
        Shape::Vector(n) => matches!(op, Operand::Vector(_, v) if v.len() == n as usize),
        Shape::List => matches!(op, Operand::List(..)),
        Shape::Sink => matches!(op, Operand::Sink(_)),
        Shape::Literal(v) => matches!(op, Operand::Int(_, x) if *x == v as i128),
    }
}
