//! Multiply-add contraction as NVIDIA's `ptxas` does it.
//!
//! The PTX ISA lets the code generator fuse a `mul` and an `add`/`sub`
//! written without a rounding modifier into one fused multiply-add (one
//! rounding instead of two), and `ptxas` does, so every compiler that
//! writes such pairs (nvcc with its default `--fmad=true`, NVRTC, NVVM for
//! numba, LLVM for Triton) expects the fused result. This pass rewrites the
//! pairs `ptxas` fuses into `fma.rn`, which the emitter computes exactly
//! (with the emulated fused multiply-add on drivers that do not fuse).
//!
//! # The rule
//!
//! Inferred from `ptxas` 13.5 (`-O3`, sm_80 and sm_90) on probe kernels
//! whose SASS `nvdisasm` shows (`docs/contraction.md` lists them):
//!
//! - A *product* is an unguarded `mul` of `f32`, `f64`, `f16`, `f16x2`,
//!   `bf16` or `bf16x2` without a rounding modifier and without `.sat`
//!   (`.ftz` allowed). `mul.rn` is never fused.
//! - A *site* is an `add` or `sub` of the same type without a rounding
//!   modifier, with the same `.ftz` as the product (`.sat` allowed, guard
//!   allowed), in the same basic block as the product, one of whose two
//!   operands holds the product: directly, through `mov` copies, or through
//!   plain `neg` (a negated product). A product with an immediate
//!   multiplicand may have sites in any block: `ptxas` recomputes it where
//!   it is used (here when its register is written only by the `mul`,
//!   before any other mention).
//! - A product *escapes* when any use of its value is not a site: a store,
//!   another `mul`, an `add.rn`, both operands of one `add`, a guarded
//!   copy or a guarded write of a register holding it, a `neg.ftz` or
//!   `abs`, a use in another basic block (but for the products with an
//!   immediate above). `ptxas` never fuses it.
//! - Sites are visited in program order twice. First, a product whose only
//!   use is the site is fused there (the first operand when both are such
//!   products): its `FMUL` disappears. Then a product none of whose uses
//!   is the addend of a fused site is fused; when both operands qualify,
//!   the one with fewer uses in all, the first operand on a tie. A product that became the addend of a fused site is fused
//!   nowhere after that, but stays fused where it already was (its `FMUL`
//!   then stays too, and a fused site may repeat the multiply).
//! - Basic blocks are those of the PTX after `ptxas` merges straight-line
//!   code: a label no branch names does not end a block, nor does an
//!   unconditional `bra L` right before `L:` when it is the only branch to
//!   `L`; `bar.sync` and calls do not; every other branch, `ret` and `exit`
//!   does. (`ptxas` merges a block into its only predecessor wherever the
//!   two are in the PTX; this pass only where they are adjacent, so it
//!   fuses less than `ptxas` where a lone `bra` jumps elsewhere.)
//!
//! The pass works on the statements of each function before [`crate::cfg`]
//! is built: the site becomes `fma.rn{.ftz}{.sat}.T d, a, b, c` (with `neg`
//! of a multiplicand or of the addend into fresh registers for `sub` and
//! negated products, and copies of the multiplicands taken at the `mul`
//! when the block writes them before the site). The `mul` stays; it is dead
//! when every use was fused, and the driver removes it.
//!
//! Registers used in other blocks are treated as live there (no liveness
//! analysis): a register that some other block mentions, or that its own
//! block reads before writing, counts as a use that is not a site. For the
//! virtual registers compilers write this equals `ptxas`'s rule; for PTX
//! that reuses one register name for unrelated values in several blocks
//! it fuses less than `ptxas`.

use crate::ast::{FloatImm, Function, Guard, Instruction, Module, ModuleItem, Operand, ScalarType, Statement, VarDecl};
use crate::fxhash::Fx;
use crate::short_str::Str;
use std::collections::HashSet;
use std::hash::BuildHasherDefault;

type HashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<Fx>>;

/// What [`run`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// `add`/`sub` instructions that became a fused multiply-add.
    pub fused_sites: usize,
}

/// Contract the `mul` + `add`/`sub` pairs `ptxas` would fuse in every
/// function body. Returns the names of the functions where an instruction
/// it wrote did not decode (for [`crate::check`] to report; none is
/// expected) and the counts.
pub fn run(module: &mut Module) -> (HashSet<String>, Stats) {
    let prefix = fresh_prefix(module);
    let mut rewritten = HashSet::new();
    let mut stats = Stats::default();
    for item in &mut module.items {
        let ModuleItem::Function(f) = item else { continue };
        let n = contract_function(f, &prefix);
        stats.fused_sites += n;
        if n > 0 && !decoded(f.body.as_deref().unwrap_or(&[])) {
            rewritten.insert(f.name.clone());
        }
    }
    (rewritten, stats)
}

/// Whether every instruction of a body decoded.
fn decoded(body: &[Statement]) -> bool {
    body.iter().all(|s| match s {
        Statement::Inst(i) => i.decoded.is_some(),
        Statement::Block(b) => decoded(b),
        _ => true,
    })
}

/// A register-name prefix no declaration of the module starts with.
fn fresh_prefix(module: &Module) -> String {
    let mut names: Vec<&str> = Vec::new();
    fn walk<'a>(body: &'a [Statement], names: &mut Vec<&'a str>) {
        for s in body {
            match s {
                Statement::Decl(d) => names.extend(d.names.iter().map(|n| n.name.as_str())),
                Statement::Block(b) => walk(b, names),
                _ => {}
            }
        }
    }
    for item in &module.items {
        match item {
            ModuleItem::Function(f) => {
                names.extend(f.params.iter().chain(&f.returns).flat_map(|d| d.names.iter().map(|n| n.name.as_str())));
                if let Some(b) = &f.body {
                    walk(b, &mut names);
                }
            }
            ModuleItem::Variable(v) => names.extend(v.names.iter().map(|n| n.name.as_str())),
        }
    }
    let mut prefix = String::from("%__fma");
    while names.iter().any(|n| n.starts_with(prefix.as_str())) {
        prefix.push('_');
    }
    prefix
}

/// The float types whose `mul` + `add` pairs are fused.
fn float_type(t: ScalarType) -> bool {
    matches!(
        t,
        ScalarType::F32 | ScalarType::F64 | ScalarType::F16 | ScalarType::F16x2 | ScalarType::Bf16 | ScalarType::Bf16x2
    )
}

fn is_half(t: ScalarType) -> bool {
    matches!(t, ScalarType::F16 | ScalarType::F16x2 | ScalarType::Bf16 | ScalarType::Bf16x2)
}

/// The type and `.ftz` of a `mul`/`add`/`sub` with no modifiers but its
/// type, `.ftz` and (where `sat_ok`) `.sat`; `None` for any other form.
fn plain_arith(inst: &Instruction, sat_ok: bool) -> Option<(ScalarType, bool)> {
    let (ty, rest) = inst.modifiers.split_last()?;
    let ty = ScalarType::from_name(ty).filter(|t| float_type(*t))?;
    let mut ftz = false;
    for m in rest {
        match &**m {
            "ftz" => ftz = true,
            "sat" if sat_ok => {}
            _ => return None,
        }
    }
    Some((ty, ftz))
}

/// A plain register operand's name.
fn reg(op: &Operand) -> Option<&str> {
    match op {
        Operand::Name { name, component: None, .. } => Some(name),
        _ => None,
    }
}

/// A multiplicand or addend the rewrite can use: a register, or (for f32
/// and f64) a float immediate.
fn usable(op: &Operand, ty: ScalarType) -> bool {
    reg(op).is_some() || (!is_half(ty) && matches!(op, Operand::Float(..)))
}

/// Whether the instruction ends a basic block.
fn ends_block(inst: &Instruction) -> bool {
    matches!(&*inst.opcode, "bra" | "brx" | "ret" | "exit")
}

fn has_control(body: &[Statement]) -> bool {
    body.iter().any(|s| match s {
        Statement::Label(..) => true,
        Statement::Inst(i) => ends_block(i),
        Statement::Block(b) => has_control(b),
        _ => false,
    })
}

/// How many branches and `.branchtargets` lists name each label.
fn branch_targets(body: &[Statement], out: &mut HashMap<String, usize>) {
    for s in body {
        match s {
            Statement::Inst(i) if matches!(&*i.opcode, "bra" | "brx") => {
                for op in &i.operands {
                    op.for_each_name(&mut |n| *out.entry(n.to_string()).or_default() += 1);
                }
            }
            Statement::TargetList { targets, calls: false, .. } => {
                for t in targets {
                    *out.entry(t.to_string()).or_default() += 1;
                }
            }
            Statement::Block(b) => branch_targets(b, out),
            _ => {}
        }
    }
}

/// Whether statement `i` is an unguarded `bra L` right before `L:`, the
/// only branch to `L`: `ptxas` merges the two blocks.
fn jump_to_next(body: &[Statement], i: usize, targets: &HashMap<String, usize>) -> bool {
    let (Some(Statement::Inst(inst)), Some(Statement::Label(_, l))) = (body.get(i), body.get(i + 1)) else {
        return false;
    };
    inst.opcode == "bra"
        && inst.guard.is_none()
        && targets.get(&**l) == Some(&1)
        && matches!(inst.operands.as_slice(), [Operand::Name { name, .. }] if name == l)
}

/// The registers an instruction reads (its guard, its source operands) and
/// writes. An instruction that did not decode reads and writes every name.
/// Register names an instruction mentions (most mention few).
type Names<'a> = smallvec::SmallVec<[&'a str; 4]>;

fn reads_writes(inst: &Instruction) -> (Names<'_>, Names<'_>) {
    let mut reads = Names::new();
    let mut writes = Names::new();
    if let Some(g) = &inst.guard {
        reads.push(&*g.name);
    }
    if inst.decoded.is_none() && inst.opcode != "call" {
        for op in &inst.operands {
            op.for_each_name(&mut |n| {
                reads.push(n);
                writes.push(n);
            });
        }
        return (reads, writes);
    }
    let outs = inst.destinations();
    for (i, op) in inst.operands.iter().enumerate() {
        if i < outs {
            // A destination's address or vector holds only written names,
            // but a guarded write keeps the old value: count it as read.
            op.for_each_name(&mut |n| writes.push(n));
        } else {
            op.for_each_name(&mut |n| reads.push(n));
        }
    }
    (reads, writes)
}

fn names_in<'a>(body: &'a [Statement], out: &mut Vec<&'a str>) {
    for s in body {
        match s {
            Statement::Inst(i) => {
                if let Some(g) = &i.guard {
                    out.push(&g.name);
                }
                for op in &i.operands {
                    op.for_each_name(&mut |n| out.push(n));
                }
            }
            Statement::Block(b) => names_in(b, out),
            _ => {}
        }
    }
}

/// Where a register is mentioned: its first block, whether other blocks
/// mention it too, and whether its first mention in its block reads it.
struct Mention {
    block: usize,
    multi: bool,
    first_reads: bool,
    /// Statement index of the first mention.
    first_at: usize,
    /// How many statements write it.
    writes: usize,
}

/// A product: an unguarded `mul` whose value may be fused.
struct Product {
    /// Index of the `mul` in the body.
    at: usize,
    ty: ScalarType,
    ftz: bool,
    a: Operand,
    b: Operand,
    /// A use of the value is not a site.
    escaped: bool,
    /// The sites that read it: (site index, operand slot 0 or 1).
    uses: Vec<(usize, usize)>,
    /// Position in the block of the first write of a multiplicand register
    /// after the `mul` (the `mul` itself when it writes one of them).
    clobber: Option<usize>,
    /// Its basic block.
    block: usize,
}

/// An `add`/`sub` that reads a product.
struct Site {
    at: usize,
    block: usize,
    /// For each source operand: the product it holds and whether negated.
    slots: [Option<(usize, bool)>; 2],
}

/// What to do at a body index.
#[derive(Default)]
struct Edit {
    before: Vec<Statement>,
    replace: Option<Instruction>,
}

struct Fresh<'p> {
    prefix: &'p str,
    next: usize,
    decls: Vec<(ScalarType, String)>,
}

impl Fresh<'_> {
    fn reg(&mut self, ty: ScalarType) -> String {
        self.next += 1;
        let name = format!("{}{}", self.prefix, self.next);
        let decl_ty = match ty {
            ScalarType::F16 | ScalarType::Bf16 => ScalarType::B16,
            ScalarType::F16x2 | ScalarType::Bf16x2 => ScalarType::B32,
            t => t,
        };
        self.decls.push((decl_ty, name.clone()));
        name
    }
}

fn type_name(t: ScalarType) -> &'static str {
    match t {
        ScalarType::F16 => "f16",
        ScalarType::F16x2 => "f16x2",
        ScalarType::Bf16 => "bf16",
        ScalarType::Bf16x2 => "bf16x2",
        ScalarType::F64 => "f64",
        _ => "f32",
    }
}

fn mov_type(t: ScalarType) -> &'static str {
    match t {
        ScalarType::F16 | ScalarType::Bf16 => "b16",
        ScalarType::F16x2 | ScalarType::Bf16x2 => "b32",
        ScalarType::F64 => "f64",
        _ => "f32",
    }
}

/// A new instruction at `template`'s place, decoded (`decoded` stays
/// `None` if it does not decode, which [`crate::check`] then reports).
fn make(template: &Instruction, guard: Option<Guard>, opcode: &str, mods: &[&str], ops: Vec<Operand>) -> Instruction {
    let mut inst = Instruction {
        span: template.span,
        guard,
        opcode_span: template.opcode_span,
        opcode: Str::from(opcode),
        modifiers: mods.iter().map(|m| Str::from(*m)).collect(),
        operands: ops.into_iter().collect(),
        decoded: None,
    };
    inst.decoded = crate::check::decode(&inst).ok();
    inst
}

fn name_op(template: &Instruction, name: &str) -> Operand {
    Operand::Name { span: template.span, name: Str::from(name), component: None }
}

/// The negation of a float immediate.
fn negate_imm(op: &Operand) -> Option<Operand> {
    let Operand::Float(s, v) = op else { return None };
    let v = match *v {
        FloatImm::F32Bits(b) => FloatImm::F32Bits(b ^ 0x8000_0000),
        FloatImm::F64Bits(b) => FloatImm::F64Bits(b ^ (1 << 63)),
        FloatImm::Decimal(d) => FloatImm::Decimal(-d),
    };
    Some(Operand::Float(*s, v))
}

/// The basic block of each top-level statement, as `ptxas` sees blocks: a
/// label no branch names does not start one, nor does the label that an
/// unconditional `bra` right before it names as its only branch.
fn basic_blocks(body: &[Statement]) -> Vec<usize> {
    let mut targets = HashMap::default();
    branch_targets(body, &mut targets);
    let mut block_of = Vec::with_capacity(body.len());
    let mut block = 0usize;
    let mut end_after = false;
    let mut merged_label = false;
    for (i, s) in body.iter().enumerate() {
        let starts = match s {
            Statement::Label(_, l) => targets.contains_key(&**l) && !merged_label,
            Statement::Block(b) => has_control(b),
            _ => false,
        };
        if starts || end_after {
            block += 1;
        }
        block_of.push(block);
        merged_label = jump_to_next(body, i, &targets);
        end_after = match s {
            Statement::Inst(inst) => ends_block(inst) && !merged_label,
            Statement::Block(b) => has_control(b),
            _ => false,
        };
    }
    block_of
}

/// Contract one function; returns the number of fused sites.
fn contract_function(f: &mut Function, prefix: &str) -> usize {
    let Some(body) = f.body.as_mut() else { return 0 };
    let block_of = basic_blocks(body);

    // What each instruction reads and writes, and where each register is
    // mentioned.
    let rws: Vec<(Names, Names)> = body
        .iter()
        .map(|s| match s {
            Statement::Inst(inst) => reads_writes(inst),
            Statement::Block(inner) => {
                let mut v = Vec::new();
                names_in(inner, &mut v);
                (v.iter().copied().collect(), v.into_iter().collect())
            }
            _ => (Names::new(), Names::new()),
        })
        .collect();
    let mut mentions: HashMap<&str, Mention> = HashMap::default();
    for (i, s) in body.iter().enumerate() {
        let b = block_of[i];
        let (reads, writes) = &rws[i];
        // A guarded write keeps the old value where the guard fails: a read.
        let guarded = matches!(s, Statement::Inst(inst) if inst.guard.is_some());
        let reads = reads.iter().chain(writes.iter().filter(|_| guarded));
        for (n, is_read) in reads.map(|n| (*n, true)).chain(writes.iter().map(|n| (*n, false))) {
            let m = mentions.entry(n).or_insert(Mention {
                block: b,
                multi: false,
                first_reads: is_read,
                first_at: i,
                writes: 0,
            });
            if m.block != b {
                m.multi = true;
            }
            if !is_read {
                m.writes += 1;
            }
        }
    }
    let live_out = |n: &str| mentions.get(n).is_none_or(|m| m.multi || m.first_reads);

    // Scan each block for products and sites.
    let mut products: Vec<Product> = Vec::new();
    let mut sites: Vec<Site> = Vec::new();
    let mut alias: HashMap<&str, (usize, bool)> = HashMap::default();
    // Products with an immediate multiplicand whose register is written
    // only by the `mul`, before any other mention: `ptxas` recomputes them
    // where they are used, so sites in any block fuse them.
    let mut global: HashMap<&str, usize> = HashMap::default();
    let mut sources: HashMap<&str, Vec<usize>> = HashMap::default();
    let mut cur_block = usize::MAX;
    for (i, s) in body.iter().enumerate() {
        if block_of[i] != cur_block {
            for (n, (p, _)) in alias.drain() {
                if live_out(n) && global.get(n) != Some(&p) {
                    products[p].escaped = true;
                }
            }
            sources.clear();
            cur_block = block_of[i];
        }
        let inst = match s {
            Statement::Inst(inst) => inst,
            Statement::Block(inner) => {
                let mut v = Vec::new();
                names_in(inner, &mut v);
                for n in v {
                    if let Some((p, _)) = alias.remove(n) {
                        products[p].escaped = true;
                    }
                    clobber(&mut sources, &mut products, n, i);
                }
                continue;
            }
            _ => continue,
        };
        let (reads, writes) = &rws[i];
        let opcode = &*inst.opcode;
        let ops = inst.operands.as_slice();

        // Reads: a site, a copy, or an escape.
        let site_form = if matches!(opcode, "add" | "sub") && ops.len() == 3 { plain_arith(inst, true) } else { None };
        let mut copy: Option<(usize, bool)> = None;
        if let Some((ty, ftz)) = site_form {
            let holds: [Option<(usize, bool)>; 2] = [1, 2].map(|k| reg(&ops[k]).and_then(|n| held(&alias, &global, n)));
            let mut slots = [None, None];
            for k in 0..2 {
                let Some((p, neg)) = holds[k] else { continue };
                let other_ok = usable(&ops[2 - k], ty);
                let same_twice = holds[1 - k].is_some_and(|(q, _)| q == p);
                let fits = products[p].ty == ty && products[p].ftz == ftz;
                if fits && other_ok && !same_twice {
                    slots[k] = Some((p, neg));
                } else {
                    products[p].escaped = true;
                }
            }
            if slots.iter().any(Option::is_some) {
                let id = sites.len();
                for (k, slot) in slots.iter().enumerate() {
                    if let Some((p, _)) = slot {
                        products[*p].uses.push((id, k));
                    }
                }
                sites.push(Site { at: i, block: block_of[i], slots });
            }
            if let Some(g) = &inst.guard {
                if let Some((p, _)) = held(&alias, &global, &g.name) {
                    products[p].escaped = true;
                }
            }
        } else {
            let copy_form = match opcode {
                "mov" if inst.guard.is_none() && ops.len() == 2 && inst.modifiers.len() == 1 => Some(false),
                "neg" if inst.guard.is_none() && ops.len() == 2 && inst.modifiers.len() == 1 => Some(true),
                _ => None,
            };
            if let (Some(negates), Some(src)) = (copy_form, ops.get(1).and_then(reg)) {
                if let Some((p, neg)) = held(&alias, &global, src) {
                    let t = &*inst.modifiers[0];
                    let ok = if negates {
                        t == type_name(products[p].ty)
                    } else {
                        t == type_name(products[p].ty)
                            || t == mov_type(products[p].ty)
                            || (products[p].ty == ScalarType::F32 && t == "b32")
                            || (products[p].ty == ScalarType::F64 && t == "b64")
                    };
                    if ok && reg(&ops[0]).is_some() {
                        copy = Some((p, neg ^ negates));
                    } else {
                        products[p].escaped = true;
                    }
                }
                if let Some(g) = &inst.guard {
                    if let Some((p, _)) = held(&alias, &global, &g.name) {
                        products[p].escaped = true;
                    }
                }
            } else {
                for n in reads.iter() {
                    if let Some((p, _)) = held(&alias, &global, n) {
                        products[p].escaped = true;
                    }
                }
            }
        }

        // Writes. A guarded write keeps the old value where the guard fails:
        // a use of the product the register held.
        for n in writes.iter() {
            if let Some((p, _)) = alias.remove(n) {
                if inst.guard.is_some() {
                    products[p].escaped = true;
                }
            }
            clobber(&mut sources, &mut products, n, i);
        }

        // New values: a copy of a product, or a product.
        if let (Some(c), Some(d)) = (copy, ops.first().and_then(reg)) {
            alias.insert(d, c);
        } else if opcode == "mul" && inst.guard.is_none() && ops.len() == 3 {
            if let (Some((ty, ftz)), Some(d)) = (plain_arith(inst, false), reg(&ops[0])) {
                if usable(&ops[1], ty) && usable(&ops[2], ty) {
                    let p = products.len();
                    let mut clob = None;
                    for op in &ops[1..] {
                        if let Some(n) = reg(op) {
                            if n == d {
                                clob = Some(i);
                            }
                            sources.entry(n).or_default().push(p);
                        }
                    }
                    let imm = ops[1..].iter().any(|op| matches!(op, Operand::Float(..)));
                    let once = mentions.get(d).is_some_and(|m| m.writes == 1 && m.first_at == i);
                    products.push(Product {
                        at: i,
                        ty,
                        ftz,
                        a: ops[1].clone(),
                        b: ops[2].clone(),
                        escaped: false,
                        uses: Vec::new(),
                        clobber: clob,
                        block: block_of[i],
                    });
                    alias.insert(d, (p, false));
                    if imm && once {
                        global.insert(d, p);
                    }
                }
            }
        }
    }
    for (n, (p, _)) in alias.drain() {
        if live_out(n) && global.get(n) != Some(&p) {
            products[p].escaped = true;
        }
    }
    drop(global);
    drop(sources);
    drop(rws);
    drop(mentions);

    let choice = choose(&products, &sites);
    let mut fresh = Fresh { prefix, next: 0, decls: Vec::new() };
    let (edits, count) = rewrite(body, &products, &sites, &choice, &mut fresh);
    if count > 0 {
        apply(body, edits, fresh.decls, f.span);
    }
    count
}

/// The edits that turn each site `choice` fuses into a fused multiply-add
/// (with the `neg` and `mov` instructions it needs), and their number.
fn rewrite(
    body: &[Statement],
    products: &[Product],
    sites: &[Site],
    choice: &[Option<usize>],
    fresh: &mut Fresh,
) -> (HashMap<usize, Edit>, usize) {
    let chosen = |id: usize| -> Option<(usize, usize, bool)> {
        let k = choice[id]?;
        sites[id].slots[k].map(|(p, neg)| (k, p, neg))
    };

    let mut edits: HashMap<usize, Edit> = HashMap::default();
    // Per product: its multiplicands as the sites use them, and a negated
    // form of the first, made at the `mul` when needed.
    let mut operands: HashMap<usize, (Operand, Operand)> = HashMap::default();
    let mut negated: HashMap<usize, (Operand, Operand)> = HashMap::default();
    // The last site that fuses each product.
    // and whether one is in another block (then the block's writes are not
    // tracked: the multiplicands are copied at the `mul`).
    let mut last_site = vec![0; products.len()];
    let mut far = vec![false; products.len()];
    for (id, s) in sites.iter().enumerate() {
        if let Some((_, p, _)) = chosen(id) {
            last_site[p] = last_site[p].max(s.at);
            far[p] |= s.block != products[p].block;
        }
    }
    let mut count = 0;
    for (id, s) in sites.iter().enumerate() {
        let Some((k, p, neg)) = chosen(id) else { continue };
        let Statement::Inst(site) = &body[s.at] else { continue };
        let Statement::Inst(mul) = &body[products[p].at] else { continue };
        let pr = &products[p];
        let ty = pr.ty;
        let ops = site.operands.as_slice();
        let is_sub = site.opcode == "sub";
        // d = ±(a*b) + c with the signs of the site.
        let negate_product = neg ^ (is_sub && k == 1);
        let negate_addend = is_sub && k == 0;
        // Copies when the block writes a multiplicand before any site that
        // fuses the product (the copies serve every site).
        let needs_copy = pr.clobber.is_some_and(|c| c < last_site[p]) || far[p];
        let (a, b) = operands
            .entry(p)
            .or_insert_with(|| {
                if !needs_copy {
                    return (pr.a.clone(), pr.b.clone());
                }
                let mut copy_of = |op: &Operand, edits: &mut HashMap<usize, Edit>| -> Operand {
                    if reg(op).is_none() {
                        return op.clone();
                    }
                    let r = fresh.reg(ty);
                    let mv = make(mul, None, "mov", &[mov_type(ty)], vec![name_op(mul, &r), op.clone()]);
                    edits.entry(pr.at).or_default().before.push(Statement::Inst(mv));
                    name_op(mul, &r)
                };
                let a = copy_of(&pr.a, &mut edits);
                let b = copy_of(&pr.b, &mut edits);
                (a, b)
            })
            .clone();
        let (a, b) = if negate_product {
            negated
                .entry(p)
                .or_insert_with(|| {
                    if let Some(na) = negate_imm(&a) {
                        return (na, b.clone());
                    }
                    if let Some(nb) = negate_imm(&b) {
                        return (a.clone(), nb);
                    }
                    let r = fresh.reg(ty);
                    // Negate the value the `mul` read: before it.
                    let ng = make(mul, None, "neg", &[type_name(ty)], vec![name_op(mul, &r), pr.a.clone()]);
                    edits.entry(pr.at).or_default().before.push(Statement::Inst(ng));
                    (name_op(mul, &r), b.clone())
                })
                .clone()
        } else {
            (a, b)
        };
        let mut c = ops[2 - k].clone();
        if negate_addend {
            c = match negate_imm(&c) {
                Some(n) => n,
                None => {
                    let r = fresh.reg(ty);
                    let ng = make(site, None, "neg", &[type_name(ty)], vec![name_op(site, &r), c]);
                    edits.entry(s.at).or_default().before.push(Statement::Inst(ng));
                    name_op(site, &r)
                }
            };
        }
        let mut mods = vec!["rn"];
        if pr.ftz {
            mods.push("ftz");
        }
        if site.has("sat") {
            mods.push("sat");
        }
        mods.push(type_name(ty));
        let fma = make(site, site.guard.clone(), "fma", &mods, vec![ops[0].clone(), a, b, c]);
        edits.entry(s.at).or_default().replace = Some(fma);
        count += 1;
    }
    (edits, count)
}

/// Applies `edits` back to front and declares the fresh registers.
fn apply(
    body: &mut Vec<Statement>,
    mut edits: HashMap<usize, Edit>,
    decls: Vec<(ScalarType, String)>,
    span: crate::diag::Span,
) {
    // Apply, back to front.
    let mut keys: Vec<usize> = edits.keys().copied().collect();
    keys.sort_unstable_by(|x, y| y.cmp(x));
    for at in keys {
        let Some(edit) = edits.remove(&at) else { continue };
        if let Some(r) = edit.replace {
            body[at] = Statement::Inst(r);
        }
        body.splice(at..at, edit.before);
    }
    let mut by_type: Vec<(ScalarType, Vec<String>)> = Vec::new();
    for (t, n) in decls {
        match by_type.iter_mut().find(|(u, _)| *u == t) {
            Some((_, v)) => v.push(n),
            None => by_type.push((t, vec![n])),
        }
    }
    let decls: Vec<Statement> = by_type
        .into_iter()
        .map(|(t, names)| {
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            Statement::Decl(VarDecl::registers(span, t, &refs))
        })
        .collect();
    body.splice(0..0, decls);
}

/// The product register `n` holds here, and whether negated: a copy or
/// product of this block, or a product [`contract_function`] lets every
/// block fuse.
fn held(alias: &HashMap<&str, (usize, bool)>, global: &HashMap<&str, usize>, n: &str) -> Option<(usize, bool)> {
    alias.get(n).copied().or_else(|| global.get(n).map(|&p| (p, false)))
}

/// Record that register `n` is written at position `pos`: products that
/// read it as a multiplicand are clobbered there.
fn clobber(sources: &mut HashMap<&str, Vec<usize>>, products: &mut [Product], n: &str, pos: usize) {
    if let Some(ps) = sources.remove(n) {
        for p in ps {
            products[p].clobber.get_or_insert(pos);
        }
    }
}

/// The operand slot each site fuses, in two passes over the sites in
/// program order (the rule in the module docs):
///
/// 1. a product whose only use is the site is fused there (the first
///    operand when both are such products);
/// 2. then a product none of whose uses is the addend of a fused site
///    (all its uses are sites, fused with it or not yet fused) is fused;
///    when both operands qualify, the one with fewer uses in all, the first
///    operand on a tie.
fn choose(products: &[Product], sites: &[Site]) -> Vec<Option<usize>> {
    let mut choice: Vec<Option<usize>> = vec![None; sites.len()];
    // Uses as the addend of a fused site.
    let mut addend: Vec<usize> = vec![0; products.len()];
    let fuse = |id: usize, k: usize, choice: &mut [Option<usize>], addend: &mut [usize]| {
        choice[id] = Some(k);
        for (j, slot) in sites[id].slots.iter().enumerate() {
            if let (Some((p, _)), true) = (slot, j != k) {
                addend[*p] += 1;
            }
        }
    };
    for (id, s) in sites.iter().enumerate() {
        let single = |k: usize| s.slots[k].is_some_and(|(p, _)| !products[p].escaped && products[p].uses.len() == 1);
        if let Some(k) = (0..2).find(|&k| single(k)) {
            fuse(id, k, &mut choice, &mut addend);
        }
    }
    for (id, s) in sites.iter().enumerate() {
        if choice[id].is_some() {
            continue;
        }
        let eligible = |k: usize, addend: &[usize]| -> Option<usize> {
            let (p, _) = s.slots[k]?;
            (!products[p].escaped && addend[p] == 0).then_some(products[p].uses.len())
        };
        let pick = match (eligible(0, &addend), eligible(1, &addend)) {
            (Some(a), Some(b)) => Some(if b < a { 1 } else { 0 }),
            (Some(_), None) => Some(0),
            (None, Some(_)) => Some(1),
            (None, None) => None,
        };
        if let Some(k) = pick {
            fuse(id, k, &mut choice, &mut addend);
        }
    }
    choice
}
