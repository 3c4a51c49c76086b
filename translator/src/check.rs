//! Pass 2: decode every instruction against the ISA table
//! ([`crate::isa`]) and check its operands against the declarations and
//! the type rules of the PTX ISA's chapter 6 ("Instruction Operands").
//!
//! The pass fills [`ast::Instruction::decoded`] and returns every error it
//! finds (up to [`MAX_DIAGNOSTICS`]); it never stops at the first.
//!
//! Type rules (6.1, and "operand size exceeding instruction-type size"):
//! - a bit-size type (`.b32`) accepts an operand of any type of its size,
//!   an integer type accepts integer and bit types of its size, a
//!   floating-point type accepts floating-point and bit types of its size;
//!   predicates match only predicates;
//! - `ld`, `st` and `cvt` (the rules marked relaxed in the table) also
//!   accept registers wider than a bit or integer instruction type;
//! - a vector operand (`.v4`) has exactly as many elements as the vector
//!   size, each checked as a scalar (a `_` sink is allowed);
//! - a destination is a register (or a vector of registers, or `_`), never
//!   a constant, a special register or a variable's address;
//! - a floating-point constant is not an integer operand.
//!
//! Where the table has no rule for an operand, only its shape (checked by
//! [`crate::isa::decode()`]) and that its names are declared are checked.

use crate::ast::{self, Module, ModuleItem, Operand, ScalarType, StateSpace, Statement, VarDecl};
use crate::diag::{Diagnostic, Span, MAX_DIAGNOSTICS};
use crate::fxhash::Fx;
use crate::isa::table::TypeRule;
use crate::isa::{self, Decoded, SpecialRegister};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Check a parsed module; fill in the decoded form of each instruction.
pub fn run(module: &mut Module) -> Vec<Diagnostic> {
    run_functions(module, |_| true)
}

/// [`run`] on the bodies of the functions `which` names only (against the
/// whole module's declarations), for a pass that rewrote them.
pub fn run_functions(module: &mut Module, which: impl Fn(&str) -> bool) -> Vec<Diagnostic> {
    let mut c = Checker {
        diags: Vec::new(),
        scopes: vec![Scope::default()],
        functions: HashMap::default(),
        decode_cache: HashMap::default(),
    };
    for (_, alias, _) in &module.aliases {
        c.functions.insert(alias.clone(), ());
    }
    for item in &module.items {
        match item {
            ModuleItem::Variable(v) => c.declare(v),
            ModuleItem::Function(f) => {
                c.functions.insert(f.name.clone(), ());
            }
        }
    }
    for item in &mut module.items {
        let ModuleItem::Function(f) = item else { continue };
        if !which(&f.name) {
            continue;
        }
        let Some(body) = &mut f.body else { continue };
        c.scopes.push(Scope::default());
        for p in f.params.iter().chain(&f.returns) {
            c.declare(p);
        }
        let mut labels = HashMap::default();
        collect_labels(body, &mut labels);
        let mut registers = 0u64;
        if let Some(span) = count_registers(body, &mut registers) {
            c.error(span, format!("more than {MAX_REGISTERS} registers in one function"));
            c.scopes.pop();
            continue;
        }
        c.block(body, &labels);
        c.scopes.pop();
        if c.diags.len() >= MAX_DIAGNOSTICS {
            break;
        }
    }
    c.diags.truncate(MAX_DIAGNOSTICS);
    c.diags
}

/// Most registers one function may declare (the translator gives each a
/// variable).
pub const MAX_REGISTERS: u64 = 1 << 22;

/// Count the registers a body declares; the span of the declaration that
/// goes past [`MAX_REGISTERS`], if one does.
fn count_registers(stmts: &[Statement], total: &mut u64) -> Option<Span> {
    for s in stmts {
        match s {
            Statement::Decl(d) if d.space == StateSpace::Reg => {
                for n in &d.names {
                    *total += n.count.map_or(1, u64::from);
                    if *total > MAX_REGISTERS {
                        return Some(n.span);
                    }
                }
            }
            Statement::Block(b) => {
                if let Some(s) = count_registers(b, total) {
                    return Some(s);
                }
            }
            _ => {}
        }
    }
    None
}

/// Decode one instruction without declarations (for tools and tests).
pub fn decode(inst: &ast::Instruction) -> Result<Decoded, Diagnostic> {
    isa::decode(inst)
}

type Map<V> = HashMap<String, V, BuildHasherDefault<Fx>>;

/// What a declared name is.
#[derive(Clone, Copy, Debug)]
struct Var {
    space: StateSpace,
    ty: ScalarType,
    vector: Option<u32>,
}

#[derive(Default)]
struct Scope {
    /// Plain names.
    names: Map<Var>,
    /// Parameterized registers `%r<N>`: prefix → (N, var).
    ranges: Map<(u32, Var)>,
    /// The lengths of the prefixes in `ranges` (bit `len.min(63)`): a split
    /// of a name whose prefix has none of them is not looked up.
    range_lens: u64,
    /// The same for the names in `names`.
    name_lens: u64,
}

/// The bit of [`Scope::range_lens`] for a prefix of `len` bytes.
fn len_bit(len: usize) -> u64 {
    1 << len.min(63)
}

struct Checker {
    diags: Vec<Diagnostic>,
    scopes: Vec<Scope>,
    functions: Map<()>,
    /// Decoded forms by hash of mnemonic and operand shapes.
    decode_cache: HashMap<u64, Vec<CacheEntry>, BuildHasherDefault<Fx>>,
}

/// A decoded form with the mnemonic and operand shapes it was decoded from.
type CacheEntry = (String, Vec<u16>, Decoded);

/// Whether `mnemonic` (`ld.global.u32`) is the instruction's opcode and modifiers.
fn mnemonic_is(mnemonic: &str, inst: &ast::Instruction) -> bool {
    // The opcode and each `.modifier` in turn (none of them contains a '.').
    let Some(mut rest) = mnemonic.strip_prefix(&*inst.opcode) else {
        return false;
    };
    for m in &inst.modifiers {
        match rest.strip_prefix('.').and_then(|r| r.strip_prefix(&**m)) {
            Some(r) => rest = r,
            None => return false,
        }
    }
    rest.is_empty()
}

/// What decoding sees of an operand: its kind and element count.
fn shape_code(op: &Operand) -> u16 {
    let (kind, n) = match op {
        Operand::Name { .. } => (0, 0),
        Operand::Not(..) => (1, 0),
        Operand::Int(..) => (2, 0),
        Operand::Float(..) => (3, 0),
        Operand::Address(..) => (4, 0),
        Operand::Vector(_, v) => (5, v.len()),
        Operand::List(_, v) => (6, v.len()),
        Operand::Pair(..) => (7, 0),
        Operand::Sink(_) => (8, 0),
        Operand::Bracket(_, v) => (9, v.len()),
        Operand::Select { base, .. } => (10 + u16::from(matches!(**base, Operand::Address(..))), 0),
        Operand::Neg(..) => (12, 0),
        Operand::SymbolOffset(..) => (13, 0),
        Operand::TensorAddress(_, _, v) => (14, v.len()),
        Operand::ArrayElement(..) => (15, 0),
    };
    (kind << 12) | (n.min(0xfff) as u16)
}

fn collect_labels(stmts: &[Statement], out: &mut Map<()>) {
    for s in stmts {
        match s {
            Statement::Label(_, n) => {
                out.insert(n.to_string(), ());
            }
            Statement::Prototype(_, n, _) => {
                out.insert(n.clone(), ());
            }
            Statement::TargetList { name, .. } => {
                out.insert(name.clone(), ());
            }
            Statement::Block(b) => collect_labels(b, out),
            _ => {}
        }
    }
}

/// The type of an operand as the checker sees it.
#[derive(Clone, Copy, Debug)]
enum Value {
    /// A register of this type (with a vector size for `.v4` registers).
    Reg(ScalarType, Option<u32>),
    /// A special register component of this type.
    Special(ScalarType),
    /// The address of a variable or function (an integer constant).
    Address,
    /// An integer constant.
    Int,
    /// A floating-point constant.
    Float,
    /// A label or call prototype.
    Label,
    /// `_`.
    Sink,
    /// Not a single value (lists, vectors, ...), or an error already reported.
    Other,
}

/// Broad classes of 6.1's compatibility rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Bit,
    Int,
    Float,
    Pred,
}

fn class(t: ScalarType) -> Class {
    use ScalarType::*;
    match t {
        B8 | B16 | B32 | B64 | B128 => Class::Bit,
        S8 | S16 | S32 | S64 | U8 | U16 | U32 | U64 => Class::Int,
        F16 | F16x2 | Bf16 | Bf16x2 | F32 | F32x2 | F64 => Class::Float,
        Pred => Class::Pred,
    }
}

fn type_name(t: ScalarType) -> String {
    format!(".{}", format!("{t:?}").to_ascii_lowercase())
}

/// Whether a register of type `have` may be an operand of type `want`.
fn compatible(want: ScalarType, have: ScalarType, relaxed: bool) -> bool {
    let (cw, ch) = (class(want), class(have));
    if cw == Class::Pred || ch == Class::Pred {
        return cw == ch;
    }
    let class_ok = match cw {
        Class::Bit => true,
        Class::Int => ch != Class::Float,
        Class::Float => ch != Class::Int,
        Class::Pred => false,
    };
    if !class_ok {
        return false;
    }
    match have.size().cmp(&want.size()) {
        std::cmp::Ordering::Equal => true,
        std::cmp::Ordering::Greater => relaxed && cw != Class::Float && ch != Class::Float,
        std::cmp::Ordering::Less => false,
    }
}

impl Checker {
    fn error(&mut self, span: Span, msg: impl Into<String>) {
        if self.diags.len() < MAX_DIAGNOSTICS {
            self.diags.push(Diagnostic::error(span, msg));
        }
    }

    fn declare(&mut self, d: &VarDecl) {
        let var = Var { space: d.space, ty: d.ty, vector: d.vector };
        let Some(scope) = self.scopes.last_mut() else { return };
        for n in &d.names {
            match n.count {
                Some(c) => {
                    scope.ranges.insert(n.name.clone(), (c, var));
                    scope.range_lens |= len_bit(n.name.len());
                }
                None => {
                    scope.names.insert(n.name.clone(), var);
                    scope.name_lens |= len_bit(n.name.len());
                }
            }
        }
    }

    fn lookup(&self, name: &str) -> Option<Var> {
        for s in self.scopes.iter().rev() {
            if s.name_lens & len_bit(name.len()) != 0 {
                if let Some(v) = s.names.get(name) {
                    return Some(*v);
                }
            }
            if s.ranges.is_empty() {
                continue;
            }
            // `%r12` in `%r<100>`: try every split before a trailing digit.
            let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
            for k in 1..=digits {
                let (prefix, index) = name.split_at(name.len() - k);
                if (index.len() > 1 && index.starts_with('0')) || s.range_lens & len_bit(prefix.len()) == 0 {
                    continue;
                }
                if let (Some((count, var)), Ok(i)) = (s.ranges.get(prefix), index.parse::<u64>()) {
                    if i < u64::from(*count) {
                        return Some(*var);
                    }
                }
            }
        }
        None
    }

    fn block(&mut self, stmts: &mut [Statement], labels: &Map<()>) {
        // Declarations are visible in the whole block.
        for s in stmts.iter() {
            if let Statement::Decl(d) = s {
                self.declare(d);
            }
        }
        for s in stmts.iter_mut() {
            if self.diags.len() >= MAX_DIAGNOSTICS {
                return;
            }
            match s {
                Statement::Inst(i) => self.instruction(i, labels),
                Statement::Block(b) => {
                    self.scopes.push(Scope::default());
                    self.block(b, labels);
                    self.scopes.pop();
                }
                _ => {}
            }
        }
    }

    fn instruction(&mut self, inst: &mut ast::Instruction, labels: &Map<()>) {
        if let Some(g) = &inst.guard {
            match self.lookup(&g.name) {
                Some(v) if v.space == StateSpace::Reg && v.ty == ScalarType::Pred => {}
                Some(_) => self.error(g.span, format!("guard '{}' is not a predicate register", g.name)),
                None => self.error(g.span, format!("unknown name '{}'", g.name)),
            }
        }
        if inst.operands.iter().any(|o| matches!(o, Operand::ArrayElement(..))) {
            self.resolve_array_elements(inst);
        }
        let d = match self.decode_cached(inst) {
            Ok(d) => d,
            Err(e) => {
                self.error(e.span, e.message);
                // Still report undeclared names.
                for op in &inst.operands {
                    self.value(op, labels);
                }
                return;
            }
        };
        inst.decoded = Some(d);
        let form = d.form();
        for (spec, op) in isa::decode::assigned(form, inst.operands.len()).zip(&inst.operands) {
            self.operand(inst, &d, spec, op, labels);
        }
    }

    /// Replace each `var[imm]` operand by the element's address: an
    /// [`Operand::Address`] `[var+imm*size]` where the instruction takes an
    /// address (it decodes that way), else an [`Operand::SymbolOffset`]
    /// (`mov`, `cvta`). `size` is the byte size of the array's scalar type.
    fn resolve_array_elements(&mut self, inst: &mut ast::Instruction) {
        let mut as_values = Vec::with_capacity(inst.operands.len());
        for op in &mut inst.operands {
            let Operand::ArrayElement(span, name, index) = op else {
                as_values.push(None);
                continue;
            };
            let (span, name) = (*span, std::mem::take(name));
            let offset = match self.lookup(&name) {
                Some(v) if v.space != StateSpace::Reg => index.wrapping_mul(i64::from(v.ty.size())),
                Some(_) => {
                    self.error(span, format!("register '{name}' cannot be indexed (only an array variable can)"));
                    0
                }
                // Reported as an unknown name by the operand checks.
                None => 0,
            };
            as_values.push(Some(Operand::SymbolOffset(span, name.clone(), offset)));
            *op = Operand::Address(span, ast::Address { base: Some((span, name)), offset });
        }
        if isa::decode(inst).is_err() {
            for (op, value) in inst.operands.iter_mut().zip(as_values) {
                if let Some(value) = value {
                    *op = value;
                }
            }
        }
    }

    /// Decode through a cache: a module repeats few distinct mnemonics with
    /// few operand shapes, and the decoded form depends on nothing else.
    fn decode_cached(&mut self, inst: &ast::Instruction) -> Result<Decoded, Diagnostic> {
        let mut h = Fx::default();
        h.write(inst.opcode.as_bytes());
        for m in &inst.modifiers {
            h.write_u8(b'.');
            h.write(m.as_bytes());
        }
        for op in &inst.operands {
            h.write_u16(shape_code(op));
        }
        let key = h.finish();
        if let Some(entries) = self.decode_cache.get(&key) {
            for (mnemonic, shapes, d) in entries {
                if mnemonic_is(mnemonic, inst)
                    && shapes.len() == inst.operands.len()
                    && shapes.iter().zip(&inst.operands).all(|(s, o)| *s == shape_code(o))
                {
                    return Ok(*d);
                }
            }
        }
        let d = isa::decode(inst)?;
        let shapes = inst.operands.iter().map(shape_code).collect();
        self.decode_cache.entry(key).or_default().push((inst.mnemonic(), shapes, d));
        Ok(d)
    }

    /// The value of an operand; reports undeclared names.
    fn value(&mut self, op: &Operand, labels: &Map<()>) -> Value {
        match op {
            Operand::Name { span, name, component } => self.name_value(*span, name, *component, labels),
            Operand::Int(..) => Value::Int,
            Operand::Float(..) => Value::Float,
            Operand::Sink(_) => Value::Sink,
            Operand::Address(_, a) => {
                if let Some((span, base)) = &a.base {
                    self.name_value(*span, base, None, labels);
                }
                Value::Other
            }
            Operand::TensorAddress(_, a, coords) => {
                if let Some((span, base)) = &a.base {
                    self.name_value(*span, base, None, labels);
                }
                for o in coords {
                    self.value(o, labels);
                }
                Value::Other
            }
            Operand::SymbolOffset(span, name, _) | Operand::ArrayElement(span, name, _) => {
                self.name_value(*span, name, None, labels);
                Value::Address
            }
            Operand::Not(_, inner) | Operand::Neg(_, inner) => self.value(inner, labels),
            Operand::Select { base, .. } => {
                self.value(base, labels);
                Value::Other
            }
            Operand::Vector(_, v) | Operand::List(_, v) | Operand::Bracket(_, v) => {
                for o in v {
                    self.value(o, labels);
                }
                Value::Other
            }
            Operand::Pair(_, a, b) => {
                self.value(a, labels);
                self.value(b, labels);
                Value::Other
            }
        }
    }

    fn name_value(&mut self, span: Span, name: &str, component: Option<u8>, labels: &Map<()>) -> Value {
        if let Some(v) = self.lookup(name) {
            return if v.space == StateSpace::Reg {
                Value::Reg(v.ty, if component.is_some() { None } else { v.vector })
            } else {
                Value::Address
            };
        }
        if let Some(s) = SpecialRegister::from_name(name) {
            return Value::Special(s.ty());
        }
        if let Some(t) = crate::resume::internal_register(name) {
            return Value::Special(t);
        }
        if labels.contains_key(name) {
            return Value::Label;
        }
        if self.functions.contains_key(name) {
            return Value::Address;
        }
        if name == "WARP_SZ" {
            return Value::Int;
        }
        self.error(span, format!("unknown name '{name}'"));
        Value::Other
    }

    fn operand(
        &mut self,
        inst: &ast::Instruction,
        d: &Decoded,
        spec: &isa::table::OperandSpec,
        op: &Operand,
        labels: &Map<()>,
    ) {
        if spec.ty == TypeRule::Label {
            if let Operand::Name { name, .. } = op {
                if !labels.contains_key(name.as_str()) {
                    self.error(inst.span, format!("branch to undefined label '{name}'"));
                }
                return;
            }
        }
        let value = self.value(op, labels);
        let mnemonic = || inst.mnemonic();
        if spec.out {
            let bad = match op {
                Operand::Int(..) | Operand::Float(..) => Some("a constant"),
                Operand::Name { .. } => match value {
                    Value::Special(_) => Some("a special register"),
                    Value::Address => Some("a variable's address"),
                    _ => None,
                },
                _ => None,
            };
            if let Some(what) = bad {
                self.error(op.span(), format!("the destination of '{}' must be a register, not {what}", mnemonic()));
                return;
            }
        }
        let want = match spec.ty {
            TypeRule::Any | TypeRule::Label => return,
            TypeRule::Imm => {
                if !matches!(op, Operand::Int(..)) && !matches!(value, Value::Int) {
                    self.error(op.span(), format!("operand '{}' of '{}' must be a constant", spec.name, mnemonic()));
                }
                return;
            }
            TypeRule::Inst => d.ty(),
            TypeRule::Fixed(t) => Some(t),
            TypeRule::Group { group, .. } => d.group_type(group),
        };
        let Some(want) = want else { return };
        if let Operand::Not(span, _) = op {
            if want != ScalarType::Pred {
                self.error(*span, format!("'!' negates only predicates (operand '{}' of '{}')", spec.name, mnemonic()));
                return;
            }
        }
        let relaxed = matches!(spec.ty, TypeRule::Group { relaxed: true, .. });
        // Vector operands.
        let lanes = spec.vector.and_then(|g| d.first(g)).and_then(|m| m.name().strip_prefix('v')?.parse::<u32>().ok());
        if spec.vector.is_some() || lanes.is_some() {
            match (op, lanes) {
                (Operand::Vector(s, elems), Some(n)) => {
                    if elems.len() as u32 != n {
                        self.error(
                            *s,
                            format!("'{}' needs a vector of {n} elements, found {}", mnemonic(), elems.len()),
                        );
                        return;
                    }
                    for e in elems {
                        let v = self.value_quiet(e);
                        self.scalar(inst, spec, e, v, want, relaxed);
                    }
                    return;
                }
                // A one-element vector is its element, as ptxas reads it
                // (Triton writes `ld.global.b32 { %r1 }, [%rd1]`).
                (Operand::Vector(_, elems), None) if elems.len() == 1 => {
                    let v = self.value_quiet(&elems[0]);
                    self.scalar(inst, spec, &elems[0], v, want, relaxed);
                    return;
                }
                (Operand::Vector(s, _), None) => {
                    self.error(*s, format!("'{}' takes a scalar here; a vector needs .v2, .v4 or .v8", mnemonic()));
                    return;
                }
                (_, Some(n)) => {
                    if let Value::Reg(_, Some(k)) = value {
                        if k != n {
                            self.error(op.span(), format!("'{}' needs a .v{n} register, found .v{k}", mnemonic()));
                        }
                        return;
                    }
                    self.error(op.span(), format!("'{}' needs a vector of {n} elements", mnemonic()));
                    return;
                }
                _ => {}
            }
        }
        if matches!(op, Operand::Vector(..)) {
            // Packing a vector into one value (`mov.b64 %rd, {%r1, %r2}`).
            return;
        }
        self.scalar(inst, spec, op, value, want, relaxed);
    }

    /// The value of a vector element (names were reported already).
    fn value_quiet(&mut self, op: &Operand) -> Value {
        match op {
            Operand::Name { name, component, .. } => match self.lookup(name) {
                Some(v) if v.space == StateSpace::Reg => {
                    Value::Reg(v.ty, if component.is_some() { None } else { v.vector })
                }
                Some(_) => Value::Address,
                None => match SpecialRegister::from_name(name) {
                    Some(s) => Value::Special(s.ty()),
                    None => crate::resume::internal_register(name).map_or(Value::Other, Value::Special),
                },
            },
            Operand::Int(..) => Value::Int,
            Operand::Float(..) => Value::Float,
            Operand::Sink(_) => Value::Sink,
            _ => Value::Other,
        }
    }

    fn scalar(
        &mut self,
        inst: &ast::Instruction,
        spec: &isa::table::OperandSpec,
        op: &Operand,
        value: Value,
        want: ScalarType,
        relaxed: bool,
    ) {
        match value {
            Value::Reg(have, None) | Value::Special(have) if !compatible(want, have, relaxed) => {
                let what = if matches!(value, Value::Special(_)) { "special register" } else { "register" };
                self.error(
                    op.span(),
                    format!(
                        "operand '{}' of '{}' has type {}, but a {} {what} is given",
                        spec.name,
                        inst.mnemonic(),
                        type_name(want),
                        type_name(have),
                    ),
                );
            }
            Value::Reg(have, Some(n)) => {
                self.error(
                    op.span(),
                    format!(
                        "operand '{}' of '{}' has type {}, but a .v{n} {} register is given",
                        spec.name,
                        inst.mnemonic(),
                        type_name(want),
                        type_name(have)
                    ),
                );
            }
            Value::Float if class(want) == Class::Int => {
                self.error(
                    op.span(),
                    format!(
                        "operand '{}' of '{}' is an integer ({}); a floating-point constant is given",
                        spec.name,
                        inst.mnemonic(),
                        type_name(want)
                    ),
                );
            }
            Value::Label if !matches!(inst.opcode.as_str(), "mov" | "bra" | "brx" | "call") => {
                self.error(op.span(), format!("a label cannot be an operand of '{}'", inst.mnemonic()));
            }
            _ => {}
        }
    }
}
