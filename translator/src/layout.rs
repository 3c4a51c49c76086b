//! Pass: memory layout of parameters and variables.
//!
//! Computes byte offsets for kernel parameters (CUDA's parameter-block
//! layout), module-scope `.global`/`.const` variables (the module data
//! buffer, with initializers evaluated to bytes and address relocations), and
//! each function's `.shared` and `.local` variables.

use crate::abi::{GlobalInfo, GlobalSpace, ParamInfo};
use crate::ast::{InitSign, InitTerm, Initializer, Linkage, ScalarType, StateSpace, VarDecl, VarName};
use crate::diag::{Diagnostic, Span};
use std::collections::HashMap;

/// Size in bytes of one declared name (element type × vector × dimensions).
pub fn var_size(d: &VarDecl, n: &VarName) -> Result<u64, Diagnostic> {
    let mut size = d.ty.size() as u64 * d.vector.unwrap_or(1) as u64;
    for dim in &n.dims {
        let k = dim.unwrap_or(0);
        size = size
            .checked_mul(k)
            .filter(|s| *s <= (1u64 << 40))
            .ok_or_else(|| Diagnostic::error(n.span, format!("'{}' is too large", n.name)))?;
    }
    Ok(size)
}

/// Alignment of one declared name.
pub fn var_align(d: &VarDecl) -> u32 {
    d.align.unwrap_or(d.ty.size() * d.vector.unwrap_or(1)).max(1)
}

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a.max(1)) * a.max(1)
}

/// Lay out a parameter list. Returns the parameters and the block size.
pub fn params(decls: &[VarDecl]) -> Result<(Vec<ParamInfo>, u32), Diagnostic> {
    let mut out = Vec::new();
    let mut off = 0u64;
    for d in decls {
        for n in &d.names {
            let size = var_size(d, n)?;
            let align = var_align(d) as u64;
            if !align.is_power_of_two() {
                return Err(Diagnostic::error(d.span, format!("alignment {align} is not a power of two")));
            }
            off = align_up(off, align);
            out.push(ParamInfo { name: n.name.clone(), offset: off as u32, size: size as u32, align: align as u32 });
            off += size;
            if off > 32764 + 8 {
                return Err(Diagnostic::error(d.span, "kernel parameters exceed CUDA's 32764-byte limit"));
            }
        }
    }
    Ok((out, off as u32))
}

/// A variable placed in a byte-addressed area.
#[derive(Clone, Debug)]
pub struct Placed {
    /// Byte offset in its area.
    pub offset: u64,
    /// Size in bytes (0 for dynamic `extern .shared` arrays).
    pub size: u64,
    /// Declared element type.
    pub ty: ScalarType,
}

/// Lay out variables of one state space in order; returns placements and the total size.
pub fn place(vars: &[(&VarDecl, &VarName)], start: u64) -> Result<(Vec<(String, Placed)>, u64), Diagnostic> {
    let mut off = start;
    let mut out = Vec::new();
    for (d, n) in vars {
        let size = var_size(d, n)?;
        off = align_up(off, var_align(d) as u64);
        out.push((n.name.clone(), Placed { offset: off, size, ty: d.ty }));
        off += size;
    }
    Ok((out, off))
}

/// Largest module data buffer (all `.global`/`.const` variables) accepted.
pub const MAX_MODULE_DATA: u64 = 1 << 30;

/// The module data buffer: every module-scope `.global` and `.const` variable.
pub fn module_data(vars: &[&VarDecl], funcs: &HashMap<String, u32>) -> Result<(Vec<GlobalInfo>, u64), Diagnostic> {
    let mut off = 0u64;
    let mut out: Vec<GlobalInfo> = Vec::new();
    let mut index: HashMap<String, u64> = HashMap::new();
    // First place everything (initializers may refer forward).
    for d in vars {
        let space = match d.space {
            StateSpace::Const => GlobalSpace::Const,
            _ => GlobalSpace::Global,
        };
        for n in &d.names {
            if d.linkage.contains(&Linkage::Extern) && n.dims.iter().any(|x| x.is_none()) {
                continue;
            }
            let size = var_size(d, n)?;
            off = align_up(off, var_align(d).max(1) as u64);
            if off + size > MAX_MODULE_DATA {
                return Err(Diagnostic::error(
                    n.span,
                    format!("module .global/.const variables exceed {} MiB", MAX_MODULE_DATA >> 20),
                ));
            }
            index.insert(n.name.clone(), off);
            out.push(GlobalInfo {
                name: n.name.clone(),
                space,
                offset: off,
                size,
                init: vec![0; size as usize],
                relocations: Vec::new(),
            });
            off += size;
        }
    }
    let mut k = 0;
    for d in vars {
        for n in &d.names {
            if d.linkage.contains(&Linkage::Extern) && n.dims.iter().any(|x| x.is_none()) {
                continue;
            }
            if let Some(init) = &d.init {
                let g = &mut out[k];
                let mut pos = 0u64;
                let elem = d.ty;
                fill(init, elem, &index, funcs, &mut g.init, &mut g.relocations, &mut pos)?;
            }
            k += 1;
        }
    }
    Ok((out, off))
}

fn fill(
    init: &Initializer,
    ty: ScalarType,
    index: &HashMap<String, u64>,
    funcs: &HashMap<String, u32>,
    bytes: &mut [u8],
    relocs: &mut Vec<u64>,
    pos: &mut u64,
) -> Result<(), Diagnostic> {
    match init {
        Initializer::List(_, items) => {
            for i in items {
                fill(i, ty, index, funcs, bytes, relocs, pos)?;
            }
            Ok(())
        }
        // Taken off texture and sampler references by the texture pass.
        Initializer::Fields(span, _) => {
            Err(Diagnostic::error(*span, "attribute initializers belong to .samplerref and .texref variables"))
        }
        Initializer::Expr(span, terms) => {
            let size = ty.size() as u64;
            let at = *pos as usize;
            if at + size as usize > bytes.len() {
                return Err(Diagnostic::error(*span, "too many initializers for the variable's size"));
            }
            let (value, reloc) = eval(*span, terms, ty, index, funcs)?;
            if reloc {
                if size != 8 {
                    return Err(Diagnostic::error(*span, "an address initializer needs a 64-bit element type"));
                }
                relocs.push(*pos);
            }
            bytes[at..at + size as usize].copy_from_slice(&value.to_le_bytes()[..size as usize]);
            *pos += size;
            Ok(())
        }
    }
}

fn eval(
    span: Span,
    terms: &[(InitSign, InitTerm)],
    ty: ScalarType,
    index: &HashMap<String, u64>,
    funcs: &HashMap<String, u32>,
) -> Result<(u64, bool), Diagnostic> {
    if let [(sign, InitTerm::Float(v, bits32))] = terms {
        let v = if *sign == InitSign::Minus { -*v } else { *v };
        let bits = match ty {
            ScalarType::F32 => match bits32 {
                Some(b) if *sign == InitSign::Plus => *b as u64,
                _ => (v as f32).to_bits() as u64,
            },
            ScalarType::F64 => v.to_bits(),
            _ => match bits32 {
                Some(b) => *b as u64,
                None => v.to_bits(),
            },
        };
        return Ok((bits, false));
    }
    let mut acc: i128 = 0;
    let mut reloc = false;
    for (sign, t) in terms {
        let v: i128 = match t {
            InitTerm::Int(i) => *i,
            InitTerm::Float(f, _) => *f as i128,
            InitTerm::Symbol(s) | InitTerm::Generic(s) if funcs.contains_key(s) => {
                (crate::abi::FUNCTION_WINDOW | funcs.get(s).copied().unwrap_or(0) as u64) as i128
            }
            InitTerm::Symbol(s) | InitTerm::Generic(s) => {
                let Some(off) = index.get(s) else {
                    return Err(Diagnostic::error(
                        span,
                        format!("initializer refers to '{s}', which is not a module .global/.const variable"),
                    ));
                };
                reloc = true;
                *off as i128
            }
            InitTerm::Mask(inner) => match inner.as_ref() {
                Initializer::Expr(s, t) => eval(*s, t, ScalarType::U64, index, funcs)?.0 as i128,
                Initializer::List(s, _) | Initializer::Fields(s, _) => {
                    return Err(Diagnostic::error(*s, "bad mask() operand"))
                }
            },
        };
        acc = if *sign == InitSign::Minus { acc.wrapping_sub(v) } else { acc.wrapping_add(v) };
    }
    let bits = acc as u64;
    let bits = match ty {
        ScalarType::F32 => (acc as f32).to_bits() as u64,
        ScalarType::F64 => (acc as f64).to_bits(),
        _ => bits,
    };
    Ok((bits, reloc))
}
