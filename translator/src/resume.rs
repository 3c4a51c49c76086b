//! Pass: loops of any length on llvmpipe, by resuming threads in later
//! dispatches ([`crate::Options::resume_loops`]).
//!
//! # Why
//! llvmpipe (lavapipe) ends every loop of an invocation once the loops of
//! that invocation have together run 65535 iterations (its loop limiter,
//! `emit/loop_limit.rs`). Unrolling ([`crate::unroll`]) multiplies what one
//! counted iteration does by up to 8; a thread that loops longer than that
//! (a grid-stride loop over many millions of elements with few threads, a
//! serial scan, Warp's `for _ in range(1 << 24)` that holds a stream busy)
//! still cannot finish within one invocation, whatever the code does: the
//! limiter's count starts at 65535 with the invocation and nothing resets it.
//! So such a thread stops before the limiter would end its loop, saves what
//! it needs to go on, and a later dispatch of the same pipeline, a *resume
//! round*, starts a fresh invocation (with a fresh count) that restores it
//! and goes on where it stopped.
//!
//! # What
//! An entry qualifies when its threads are independent of each other within
//! the launch, so that a thread can stop and go on later in another
//! invocation, with other neighbours: no barrier, no warp operation, no
//! `.local` memory (it would have to be saved too) except `printf`'s
//! argument buffers, no call (the translator's functions would have to be
//! entered half way) except `printf`'s, no other nested scopes than its call
//! sequences, no read of `.shared` memory reachable from a loop (a resumed
//! thread runs in another workgroup; stores are allowed, and reads before
//! the loops), and a loop. `printf` (`vprintf`) is code of the entry's own,
//! run in place, and nvcc stores its arguments in the frame's local depot
//! right before each call: an entry whose local memory the kernel never
//! reads and whose every local store is followed by a `printf` call before
//! any label or branch has nothing in local memory to save at a loop
//! header (the depot's generic address, a register like any other, is the
//! same in every invocation). NVIDIA Warp's checks (`wp.expect_eq`) compile
//! to such calls in loops that run past the limiter (its `fem` lookups). In
//! such an entry the pass rewrites the PTX:
//!
//! - every read of a special register that names the thread (`%tid`,
//!   `%ctaid`, `%clusterid`, `%laneid`, `%warpid`, `%lanemask_*`) reads a
//!   register the entry copies it to first, so that the thread's identity
//!   is saved and restored with its other registers;
//! - at the top of every loop header `H` (a target of a back-edge), the
//!   thread reads the vector's loop count (`%__ptxvk_loop_count`: what
//!   `emit/loop_limit.rs` counts, the subgroup's largest, so that the
//!   driver's compiler sees a uniform branch); past [`THRESHOLD`] it goes to
//!   `H`'s save block. The save block takes a record in the launch's resume
//!   area for the round (`atom.add` on the round's count), writes `H`'s
//!   number and the registers live at `H` (a liveness analysis on
//!   [`crate::cfg`]'s blocks) into it, raises the next round's workgroup
//!   count, and returns. Its instructions are predicated, not branched
//!   around: a block of a path that leaves a loop lies outside it, and
//!   llvmpipe loses values a loop writes and such blocks read (measured:
//!   a saving lane read the area's address as 0; `emit/live_out.rs` has
//!   the bug). When no round is left, or the area is full, the thread goes
//!   on instead: the limiter ends the loop and the launch fails loudly, as
//!   without the pass;
//! - a lane whose loop llvmpipe's limiter cut (a count that fell behind
//!   the driver's, or none: `emit/loop_limit.rs` counts only where a cut
//!   could land in a loop of the translator's own) arrives at the loop's
//!   merge with the registers it took the back-edge with, which are `H`'s:
//!   the emitter runs `H`'s save block there for it (`emit/func.rs`,
//!   `save_if_cut`; [`site_of_header`] finds the block), and only a lane
//!   that cannot save itself fails the launch;
//! - a new entry block reads `%__ptxvk_resume_round`: 0 in the launch's own
//!   dispatches, which go on to the copies of the special registers and the
//!   original body; `r >= 1` in resume round `r`, whose invocation `i`
//!   (`%__ptxvk_resume_index`) restores record `i` of round `r - 1`'s
//!   records (or returns, past the last record) and enters the loop nest.
//!
//! A restored thread enters the outermost loop around its header through
//! that loop's header, and each header on the way sends it on to the next
//! (`%__ptxvk_rs_target`): entering an inner loop directly would make the
//! outer loop irreducible, and [`crate::reducible`] would route every
//! iteration of the inner loop through a dispatch block, which llvmpipe
//! counted as a second iteration. The area's layout, and what the runtime
//! does between rounds, are in [`crate::abi::resume`]. The pass's own
//! accesses go through registers named `%__ptxvk_rs_*`, which fault checks
//! leave alone (the area is not the user's memory).
//!
//! # Cost and limits
//! Where the entry counts, every counted iteration of a loop reads the
//! count and compares it ([`crate::unroll`] keeps the check in the first
//! copy of an unrolled body only, and gives such loops
//! [`RESUME_UNROLL_FACTOR`] times the copies); elsewhere the check folds
//! away. The save and restore code runs once per round; llvmpipe runs the
//! save code at each loop's merge (masked) wherever a thread leaves the
//! loop: measured (`ptxvk-bench loops`, 131,072 threads, loops of 4
//! iterations) about 1.2x in an entry that counts, while not counting saves
//! about as much.
//! Measured on lavapipe: a one-warp loop of 400,000 additions takes 1.27x
//! the time, and a launch of such an entry about 26 us more for its 8 empty
//! rounds (an empty round is a barrier and an indirect dispatch of no
//! workgroups, about 3 us each). A thread that needs more rounds than the
//! runtime records, or more threads saved in one round than the area holds,
//! fails the launch loudly at the limiter, as before. Fault reports (and
//! `printf`, not allowed here: a call) of resumed threads
//! name the resume dispatch's workgroup, not the thread's block.

use crate::abi::resume as area;
use crate::ast::{FunctionKind, Instruction, Module, ModuleItem, Operand, ScalarType, StateSpace, Statement, VarDecl};
use crate::cfg;
use crate::diag::{Diagnostic, Span};
use crate::recursion::{live_in, Regs};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Write as _;

/// A thread saves itself at a loop header once its loop count (iterations
/// of all its loops so far) reaches this: 7/8 of llvmpipe's 65535. The
/// margin covers what llvmpipe counts and the translator's count does not
/// (measured: about 1 in 40 iterations for a loop of 300 inside another,
/// unrolled; the one-pass constructs llvmpipe's compiler keeps, see
/// `emit/loop_limit.rs`) and the rest of an iteration's body.
pub const THRESHOLD: u32 = crate::abi::printf::LOOP_LIMIT / 8 * 7;

/// Prefix of everything the pass names (registers, labels).
const P: &str = "%__ptxvk_rs_";
const L: &str = "$__ptxvk_rs_";
/// Prefix of the predicate of each loop header's check of the loop count
/// ([`crate::unroll`] keeps the check in the first copy of a body only).
pub const CHECK_PREFIX: &str = "%__ptxvk_rs_p_check";
/// The site a resumed thread is on its way to (0: none).
const TARGET: &str = "%__ptxvk_rs_target";

/// How many times the unrolling factor ([`crate::Options::unroll_loops`])
/// small loops of a resumable entry get (within the same budget of
/// instructions, the pass's save code not counted).
pub const RESUME_UNROLL_FACTOR: u32 = 4;

/// The resume site of the loop headed by block `header` of `g` (a rewritten
/// entry's CFG), and the block of its save code: the header's check ends
/// it with `@%__ptxvk_rs_p_check{k} bra $__ptxvk_rs_save{k}`, and the save
/// block holds its predicated stores and ends with `@ok ret` (see
/// [`rewrite`]). `None` for any other block.
pub fn site_of_header(g: &cfg::Cfg, header: usize) -> Option<(u32, usize)> {
    let cfg::Terminator::CondBranch { pred, negated: false, taken, .. } = &g.blocks.get(header)?.term else {
        return None;
    };
    let k: u32 = pred.strip_prefix(CHECK_PREFIX)?.parse().ok()?;
    let save = g.blocks.get(*taken)?;
    if save.label != Some(format!("{L}save{k}").as_str()) {
        return None;
    }
    let cfg::Terminator::CondBranch { taken: ret, .. } = &save.term else { return None };
    let ret = g.blocks.get(*ret)?;
    (matches!(ret.term, cfg::Terminator::Return) && ret.insts.is_empty()).then_some((k, *taken))
}

/// Whether an instruction is the pass's (names one of its registers).
pub fn is_pass_instruction(i: &Instruction) -> bool {
    let mut found = i.guard.as_ref().is_some_and(|g| g.name.starts_with(P));
    for o in &i.operands {
        o.for_each_name(&mut |n| found |= n.starts_with(P));
    }
    found
}

/// The internal registers the pass reads, with their types (the checker and
/// the emitter accept them; see the module docs).
pub fn internal_register(name: &str) -> Option<ScalarType> {
    match name {
        "%__ptxvk_resume_round" | "%__ptxvk_resume_index" | "%__ptxvk_loop_count" => Some(ScalarType::U32),
        "%__ptxvk_resume_slot" => Some(ScalarType::U64),
        _ => None,
    }
}

/// Whether an instruction is one of the pass's record accesses (its address
/// is one of the pass's `%__ptxvk_rs_` registers): fault checks leave those
/// alone. (The texture and copy-engine passes' registers, also
/// `%__ptxvk_`, address the user's memory and stay checked.)
pub fn is_internal_access(i: &Instruction) -> bool {
    i.operands.iter().any(|o| match o {
        Operand::Address(_, a) => a.base.as_ref().is_some_and(|(_, b)| b.starts_with(P)),
        _ => false,
    })
}

/// Whether `stmts` read the resume round (an entry the pass rewrote).
pub fn rewritten(stmts: &[Statement]) -> bool {
    stmts.iter().any(|s| match s {
        Statement::Inst(i) => {
            let mut found = false;
            for o in &i.operands {
                o.for_each_name(&mut |n| found |= n == "%__ptxvk_resume_round");
            }
            found
        }
        _ => false,
    })
}

/// Rewrite every qualifying entry of `module` (see the module docs) when
/// `on`. Returns the entries it rewrote (the caller checks them again, which
/// decodes the new instructions).
pub fn run(module: &mut Module, on: bool) -> Result<HashSet<String>, Diagnostic> {
    let mut done = HashSet::new();
    if !on {
        return Ok(done);
    }
    let shared_vars: HashSet<String> = module
        .items
        .iter()
        .filter_map(|i| match i {
            ModuleItem::Variable(d) if d.space == StateSpace::Shared => Some(d),
            _ => None,
        })
        .flat_map(|d| d.names.iter().map(|n| n.name.clone()))
        .collect();
    for item in &mut module.items {
        let ModuleItem::Function(f) = item else { continue };
        if f.kind != FunctionKind::Entry {
            continue;
        }
        let Some(body) = &f.body else { continue };
        if let Some(new) = rewrite(f.span, body, &shared_vars, &f.params)? {
            f.body = Some(new);
            done.insert(f.name.clone());
        }
    }
    Ok(done)
}

/// Opcodes that keep an entry as it is: threads that wait for or talk to
/// each other, calls, and what the pass could not save.
const DISQUALIFY: &[&str] = &[
    "bar",
    "barrier",
    "shfl",
    "vote",
    "match",
    "redux",
    "activemask",
    "elect",
    "mma",
    "wmma",
    "wgmma",
    "ldmatrix",
    "stmatrix",
    "mbarrier",
    "cp",
    "griddepcontrol",
    "setmaxnreg",
    "call",
    "alloca",
    "stacksave",
    "stackrestore",
    "brx",
    "tcgen05",
    "clusterlaunchcontrol",
];

/// Special registers that name the thread, and the pass's register for each.
fn thread_register(name: &str, component: Option<u8>) -> Option<String> {
    let base = name.strip_prefix('%')?;
    let comp = |c: Option<u8>| match c {
        Some(b'y') => "y",
        Some(b'z') => "z",
        _ => "x",
    };
    match base {
        "tid" | "ctaid" | "clusterid" => Some(format!("{P}{base}_{}", comp(component))),
        "laneid" | "warpid" | "lanemask_eq" | "lanemask_le" | "lanemask_lt" | "lanemask_ge" | "lanemask_gt" => {
            Some(format!("{P}{base}"))
        }
        _ => None,
    }
}

/// Replace the thread's special registers in `o`; record which.
fn replace_specials(o: &mut Operand, used: &mut BTreeMap<String, (String, Option<u8>)>) {
    match o {
        Operand::Name { span, name, component } => {
            if let Some(r) = thread_register(name, *component) {
                used.insert(r.clone(), (name.to_string(), *component));
                *o = Operand::Name { span: *span, name: r.as_str().into(), component: None };
            }
        }
        Operand::Not(_, x) | Operand::Neg(_, x) => replace_specials(x, used),
        Operand::Select { base, .. } => replace_specials(base, used),
        Operand::Pair(_, a, b) => {
            replace_specials(a, used);
            replace_specials(b, used);
        }
        Operand::Vector(_, v) | Operand::List(_, v) | Operand::Bracket(_, v) => {
            v.iter_mut().for_each(|x| replace_specials(x, used))
        }
        Operand::TensorAddress(_, _, v) => v.iter_mut().for_each(|x| replace_specials(x, used)),
        _ => {}
    }
}

/// Whether `block` is a call sequence of `printf` as nvcc writes it
/// (`{ .param ...; st.param ...; call.uni (retval0), vprintf, (...);
/// ld.param ...; }`): the translator runs `vprintf` in place (a record in
/// the printf FIFO), so a thread never stops inside it.
fn is_printf_call(block: &[Statement]) -> bool {
    let mut calls = 0;
    let ok = block.iter().all(|s| match s {
        Statement::Decl(d) => matches!(d.space, StateSpace::Reg | StateSpace::Param),
        Statement::Inst(i) => match i.opcode.as_str() {
            "call" => {
                calls += 1;
                i.direct_callee() == Some(crate::emit::printf::VPRINTF)
            }
            "st" | "ld" => i.has("param"),
            _ => false,
        },
        _ => false,
    });
    ok && calls == 1
}

/// Whether the entry's `.local` memory holds nothing but `printf`'s
/// argument buffers, so that a thread that stops at a loop header has
/// nothing in it to save: no load from local memory (an address derived
/// from a `.local` variable never reaches a load or an atomic, in any
/// state space), and every store to it is followed by a `printf` call
/// sequence (which reads it) before any label or branch (where a loop
/// header, and so a stop, could come between). nvcc's `printf` stores the
/// arguments to the frame's depot and passes its generic address.
fn local_is_printf_arguments(body: &[Statement]) -> bool {
    let locals: HashSet<&str> = body
        .iter()
        .filter_map(|s| match s {
            Statement::Decl(d) if d.space == StateSpace::Local => Some(d),
            _ => None,
        })
        .flat_map(|d| d.names.iter().map(|n| n.name.as_str()))
        .collect();
    // Registers that may hold a local address: copies, sums and `cvta`s of
    // a local variable's address, to a fixed point.
    let mut derived: HashSet<&str> = HashSet::new();
    loop {
        let before = derived.len();
        for s in body {
            let Statement::Inst(i) = s else { continue };
            if !matches!(i.opcode.as_str(), "mov" | "add" | "sub" | "cvta") {
                continue;
            }
            let Some((dst, srcs)) = i.operands.split_first() else { continue };
            let mut from_local = false;
            for o in srcs {
                o.for_each_name(&mut |n| from_local |= locals.contains(n) || derived.contains(n));
            }
            if from_local {
                dst.for_each_name(&mut |n| {
                    derived.insert(n);
                });
            }
        }
        if derived.len() == before {
            break;
        }
    }
    let mentions = |o: &Operand| {
        let mut m = false;
        o.for_each_name(&mut |n| m |= locals.contains(n) || derived.contains(n));
        m
    };
    let mut pending = false;
    for s in body {
        match s {
            Statement::Block(inner) if is_printf_call(inner) => pending = false,
            Statement::Label(..) if pending => return false,
            Statement::Inst(i) => {
                let address_is_local = i.operands.iter().any(|o| matches!(o, Operand::Address(..)) && mentions(o));
                match i.opcode.as_str() {
                    "mov" | "add" | "sub" | "cvta" => {}
                    "st" if address_is_local || i.has("local") => {
                        // The value stored must not be a local address either.
                        if i.operands.iter().skip(1).any(mentions) {
                            return false;
                        }
                        pending = true;
                    }
                    "bra" | "ret" | "exit" | "brx" if pending => return false,
                    _ => {
                        if i.has("local") || i.operands.iter().any(mentions) {
                            return false;
                        }
                    }
                }
            }
            _ => {}
        }
    }
    !pending
}

/// Whether the entry qualifies (see the module docs), before looking for loops.
fn qualifies(body: &[Statement], shared_vars: &HashSet<String>) -> bool {
    let printf_locals = local_is_printf_arguments(body);
    body.iter().all(|s| match s {
        Statement::Block(inner) => is_printf_call(inner),
        Statement::Prototype(..) | Statement::TargetList { .. } => false,
        Statement::Decl(d) => {
            matches!(d.space, StateSpace::Reg | StateSpace::Shared) || (d.space == StateSpace::Local && printf_locals)
        }
        Statement::Label(..) => true,
        Statement::Inst(i) => {
            // With `printf_locals`, its check has seen every local access.
            if DISQUALIFY.contains(&i.opcode.as_str()) || (i.has("local") && !printf_locals) {
                return false;
            }
            // A `.shared` address made generic could be used anywhere.
            if i.has("shared") && matches!(i.opcode.as_str(), "cvta" | "isspacep" | "mapa") {
                return false;
            }
            let mut ok = true;
            for o in &i.operands {
                o.for_each_name(&mut |n| {
                    ok &= !n.starts_with("%__ptxvk") && !n.starts_with("$__ptxvk");
                    ok &= !matches!(n, "%dynamic_smem_size" | "%total_smem_size" | "%aggr_smem_size");
                });
            }
            // A shared variable's address as a generic one.
            if i.opcode == "cvta" || (i.opcode == "mov" && (i.has("u64") || i.has("b64"))) {
                for o in &i.operands {
                    o.for_each_name(&mut |n| ok &= !shared_vars.contains(n));
                }
            }
            ok
        }
    })
}

/// Whether an instruction reads `.shared` memory (which a resumed thread,
/// in another workgroup, no longer has). A store after a loop is allowed:
/// with no read after it and no barrier, no thread can tell which
/// workgroup's memory it went to (Warp's kernels clear their tile storage
/// slot at the end).
fn reads_shared(i: &Instruction) -> bool {
    i.has("shared") && !matches!(i.opcode.as_str(), "mov" | "st") || i.opcode == "st" && i.has("async")
}

/// Takes out of `body` the definitions of the registers that hold the same
/// value in every thread of the launch and every round: registers written
/// once, by an unguarded `ld.param` of one of the entry's `params`, a
/// `mov` of an immediate, or a `mov`/`cvta.to.global` of such a register.
/// The rewritten entry runs these first, on both of its paths, and no
/// record saves them. A register a resumed thread loaded from its record
/// would be a different value per lane to the driver's compiler at the
/// loop header, where the two paths meet: llvmpipe then takes a pointer
/// parameter apart lane by lane at every access through it (measured: a
/// grid-stride sum in a resumable entry, 3.5 times the time of the same
/// loop without the pass), while one it sees as the same in every lane
/// stays in a scalar register (`crate::Options::uniform_params`).
fn invariant_definitions(
    body: &mut Vec<Statement>,
    regs: &Regs,
    params: &[VarDecl],
) -> (Vec<Instruction>, HashSet<String>) {
    let params: HashSet<&str> = params.iter().flat_map(|d| d.names.iter().map(|n| n.name.as_str())).collect();
    let mut writes: BTreeMap<String, usize> = BTreeMap::new();
    for s in body.iter() {
        if let Statement::Inst(i) = s {
            for o in &i.operands[..i.destinations().min(i.operands.len())] {
                o.for_each_name(&mut |n| {
                    if regs.get(n).is_some() {
                        *writes.entry(n.to_string()).or_default() += 1;
                    }
                });
            }
        }
    }
    let mut invariant: HashSet<String> = HashSet::new();
    let mut hoisted = Vec::new();
    body.retain(|s| {
        let Statement::Inst(i) = s else { return true };
        if i.guard.is_some() || i.destinations() != 1 {
            return true;
        }
        let [Operand::Name { name: dst, component: None, .. }, src] = i.operands.as_slice() else { return true };
        if writes.get(dst.as_str()) != Some(&1) {
            return true;
        }
        let from_invariant =
            |o: &Operand| matches!(o, Operand::Name { name, component: None, .. } if invariant.contains(name.as_str()));
        let qualifies = match &*i.opcode {
            "ld" => {
                i.has("param")
                    && matches!(src, Operand::Address(_, a) if a.base.as_ref().is_some_and(|(_, b)| params.contains(b.as_str())))
            }
            "mov" => matches!(src, Operand::Int(..)) || from_invariant(src),
            "cvta" => i.has("to") && i.has("global") && from_invariant(src),
            _ => false,
        };
        if !qualifies {
            return true;
        }
        invariant.insert(dst.to_string());
        hoisted.push(i.clone());
        false
    });
    (hoisted, invariant)
}

/// A register live at a loop header, and where its record keeps it.
struct Saved {
    name: String,
    ty: ScalarType,
    offset: u32,
}

/// The rewritten body of an entry, or `None` when it does not qualify or
/// has no loop.
fn rewrite(
    span: Span,
    body: &[Statement],
    shared_vars: &HashSet<String>,
    params: &[VarDecl],
) -> Result<Option<Vec<Statement>>, Diagnostic> {
    if !qualifies(body, shared_vars) {
        return Ok(None);
    }
    // The body with the thread's special registers replaced.
    let mut specials: BTreeMap<String, (String, Option<u8>)> = BTreeMap::new();
    let mut new_body: Vec<Statement> = body.to_vec();
    for s in &mut new_body {
        if let Statement::Inst(i) = s {
            for o in i.operands.iter_mut() {
                replace_specials(o, &mut specials);
            }
        }
    }
    let mut regs = Regs::default();
    for s in &new_body {
        if let Statement::Decl(d) = s {
            for n in &d.names {
                regs.add(d, n, n.name.clone());
            }
        }
    }
    let special_decl =
        VarDecl::registers(span, ScalarType::U32, &specials.keys().map(String::as_str).collect::<Vec<_>>());
    for n in &special_decl.names {
        regs.add(&special_decl, n, n.name.clone());
    }
    let (hoisted, invariant) = invariant_definitions(&mut new_body, &regs, params);

    // Loop headers (targets of back-edges of a depth-first search) and the
    // registers live at each.
    let (live_in, parent) = {
        let g = cfg::run(&new_body, false)?;
        let n = g.blocks.len();
        let mut headers = BTreeSet::new();
        let mut back_edges: Vec<(usize, usize)> = Vec::new();
        let mut state = vec![0u8; n]; // 0 new, 1 on the stack, 2 done
        let mut stack: Vec<(usize, Vec<usize>)> = vec![(0, g.successors(0).to_vec())];
        state[0] = 1;
        while let Some((b, succs)) = stack.last_mut() {
            match succs.pop() {
                Some(s) if s < n => match state[s] {
                    0 => {
                        state[s] = 1;
                        let next = g.successors(s).to_vec();
                        stack.push((s, next));
                    }
                    1 => {
                        headers.insert(s);
                        back_edges.push((*b, s));
                    }
                    _ => {}
                },
                Some(_) => {}
                None => {
                    state[*b] = 2;
                    stack.pop();
                }
            }
        }
        if headers.is_empty() {
            return Ok(None);
        }
        let live_in = live_in(&g, &regs, &[]);
        // The natural loop of each header (the blocks that reach one of
        // its back-edges without passing it), which must nest: otherwise
        // the CFG is irreducible and the entry stays as it is.
        let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
        for b in 0..n {
            for s in g.successors(b) {
                if s < n {
                    preds[s].push(b);
                }
            }
        }
        let mut body: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
        for &(u, h) in &back_edges {
            let set = body.entry(h).or_insert_with(|| BTreeSet::from([h]));
            let mut work = vec![u];
            while let Some(x) = work.pop() {
                if set.insert(x) {
                    work.extend(preds[x].iter().copied());
                }
            }
        }
        for (h, set) in &body {
            if set.contains(&0) && *h != 0 {
                return Ok(None);
            }
            for (h2, set2) in &body {
                let nested = !set.contains(h2) || set2.is_subset(set) || set.is_subset(set2);
                if h != h2 && !nested {
                    return Ok(None);
                }
            }
        }
        // `.shared` memory read only before the loops: no read reachable
        // from a loop header (a resumed thread runs in another workgroup).
        let mut seen = vec![false; n];
        let mut work: Vec<usize> = headers.iter().copied().collect();
        while let Some(b) = work.pop() {
            if std::mem::replace(&mut seen[b], true) {
                continue;
            }
            if g.blocks[b].insts.iter().any(|i| reads_shared(i)) {
                return Ok(None);
            }
            work.extend(g.successors(b).iter().copied().filter(|&s| s < n));
        }
        let index: BTreeMap<usize, usize> = headers.iter().enumerate().map(|(k, &h)| (h, k)).collect();
        // The innermost loop around each loop, by site number.
        let parent: Vec<Option<usize>> = headers
            .iter()
            .map(|&h| {
                body.iter()
                    .filter(|(a, set)| **a != h && set.contains(&h))
                    .min_by_key(|(_, set)| set.len())
                    .and_then(|(a, _)| index.get(a).copied())
            })
            .collect();
        let mut out = Vec::new();
        for &h in &headers {
            let Some(label) = g.blocks[h].label else {
                // A loop back to the unlabelled start: cannot happen (a
                // branch needs a label), but then the entry stays as it is.
                return Ok(None);
            };
            out.push((label.to_string(), live_in[h].iter().cloned().collect::<Vec<_>>()));
        }
        (out, parent)
    };
    // The loops from the outermost around site `k` down to it.
    let chain = |k: usize| {
        let mut c = vec![k];
        while let Some(p) = parent[*c.last().unwrap_or(&k)] {
            if c.contains(&p) {
                break;
            }
            c.push(p);
        }
        c.reverse();
        c
    };

    // Each header's record: the header's number (1-based) at 0, then the
    // live registers, each at an offset aligned to its size.
    let mut sites: Vec<(String, Vec<Saved>)> = Vec::new();
    let mut stride = area::RECORD_HEADER_BYTES;
    for (label, live) in live_in {
        let mut saved = Vec::new();
        let mut off = area::RECORD_HEADER_BYTES;
        for r in live {
            if invariant.contains(&r) {
                continue;
            }
            let Some((ty, vector)) = regs.get(&r) else { continue };
            let size = if ty == ScalarType::Pred { 4 } else { ty.size() };
            if vector.is_some() || !matches!(size, 2 | 4 | 8) {
                return Ok(None);
            }
            off = off.div_ceil(size) * size;
            saved.push(Saved { name: r, ty, offset: off });
            off += size;
        }
        stride = stride.max(off.div_ceil(16) * 16);
        sites.push((label, saved));
    }

    // The new code, as PTX text parsed below. Each path (the entry's test,
    // the restore path, each save block and each header's check) has
    // registers of its own: a register written in one loop and mentioned
    // outside it would be kept in memory (`emit/live_out.rs`).
    let mut pre = String::new(); // the new entry block and the copies
    let mut post = String::new(); // after the body: resume and save blocks
    let mut u32s: Vec<String> = Vec::new();
    let mut u64s: Vec<String> = Vec::new();
    let mut preds: Vec<String> = Vec::new();
    let w = |s: &mut String, line: &str| {
        s.push_str(line);
        s.push('\n');
    };
    /// The registers of one path.
    struct Regs_ {
        round: String,
        t: String,
        i: String,
        n: String,
        c: String,
        half: String,
        cap: String,
        site: String,
        slot: String,
        area: String,
        a: String,
        b: String,
        rec: String,
        p: String,
    }
    let mut path = |sfx: &str| {
        let r32 = |n: &str| format!("{P}{n}_{sfx}");
        let r = Regs_ {
            round: r32("round"),
            t: r32("t"),
            i: r32("i"),
            n: r32("n"),
            c: r32("c"),
            half: r32("half"),
            cap: r32("cap"),
            site: r32("site"),
            slot: r32("slot"),
            area: r32("area"),
            a: r32("a"),
            b: r32("b"),
            rec: r32("rec"),
            p: r32("p"),
        };
        u32s.extend([&r.round, &r.t, &r.i, &r.n, &r.c, &r.half, &r.cap, &r.site].map(String::clone));
        u64s.extend([&r.slot, &r.area, &r.a, &r.b, &r.rec].map(String::clone));
        preds.push(r.p.clone());
        r
    };

    // The entry: round 0 goes on to the copies and the body.
    let e = path("entry");
    w(&mut pre, &format!("mov.u32 {}, %__ptxvk_resume_round;", e.round));
    w(&mut pre, &format!("setp.ne.u32 {}, {}, 0;", e.p, e.round));
    w(&mut pre, &format!("@{} bra {L}resume;", e.p));
    w(&mut pre, &format!("mov.u32 {TARGET}, 0;"));
    for (reg, (name, comp)) in &specials {
        let c = match comp {
            Some(c) => format!(".{}", *c as char),
            None => String::new(),
        };
        w(&mut pre, &format!("mov.u32 {reg}, {name}{c};"));
    }

    // The area from the slot, and the record of round `r.t`'s parity and
    // index `r.i` in `r.rec`.
    let slot = |s: &mut String, r: &Regs_| {
        w(s, &format!("mov.u64 {}, %__ptxvk_resume_slot;", r.slot));
        w(s, &format!("ld.global.u64 {}, [{}+{}];", r.area, r.slot, area::SLOT_AREA));
        w(s, &format!("ld.global.u32 {}, [{}+{}];", r.half, r.slot, area::SLOT_HALF_BYTES));
        w(s, &format!("div.u32 {}, {}, {stride};", r.cap, r.half));
    };
    let record = |s: &mut String, r: &Regs_| {
        w(s, &format!("and.b32 {}, {}, 1;", r.t, r.t));
        w(s, &format!("mul.wide.u32 {}, {}, {};", r.a, r.t, r.half));
        w(s, &format!("add.u64 {}, {}, {};", r.a, r.a, r.area));
        w(s, &format!("mul.wide.u32 {}, {}, {stride};", r.b, r.i));
        w(s, &format!("add.u64 {}, {}, {};", r.rec, r.a, r.b));
        w(s, &format!("add.u64 {}, {}, {};", r.rec, r.rec, area::RECORDS));
    };

    // Resume round `r`: restore record `%__ptxvk_resume_index` of round `r - 1`.
    w(&mut post, "ret;");
    let r = path("resume");
    w(&mut post, &format!("{L}resume:"));
    w(&mut post, &format!("mov.u32 {}, %__ptxvk_resume_round;", r.round));
    slot(&mut post, &r);
    w(&mut post, &format!("sub.u32 {}, {}, 1;", r.t, r.round));
    w(&mut post, &format!("mul.wide.u32 {}, {}, 4;", r.a, r.t));
    w(&mut post, &format!("add.u64 {}, {}, {};", r.a, r.a, r.area));
    w(&mut post, &format!("ld.global.u32 {}, [{}+{}];", r.n, r.a, area::COUNTS));
    w(&mut post, &format!("min.u32 {}, {}, {};", r.n, r.n, r.cap));
    w(&mut post, &format!("mov.u32 {}, %__ptxvk_resume_index;", r.i));
    w(&mut post, &format!("setp.ge.u32 {}, {}, {};", r.p, r.i, r.n));
    w(&mut post, &format!("@{} bra {L}exit;", r.p));
    record(&mut post, &r);
    w(&mut post, &format!("ld.global.u32 {}, [{}];", r.site, r.rec));
    for (k, _) in sites.iter().enumerate() {
        w(&mut post, &format!("setp.eq.u32 {}, {}, {};", r.p, r.site, k + 1));
        w(&mut post, &format!("@{} bra {L}load{k};", r.p));
    }
    // Not a record this pass wrote: the launch fails.
    w(&mut post, "trap;");
    w(&mut post, &format!("{L}exit:"));
    w(&mut post, "ret;");
    for (k, (_, saved)) in sites.iter().enumerate() {
        w(&mut post, &format!("{L}load{k}:"));
        for s in saved {
            match s.ty {
                ScalarType::Pred => {
                    w(&mut post, &format!("ld.global.u32 {}, [{}+{}];", r.t, r.rec, s.offset));
                    w(&mut post, &format!("setp.ne.u32 {}, {}, 0;", s.name, r.t));
                }
                ty => {
                    w(&mut post, &format!("ld.global.b{} {}, [{}+{}];", ty.size() * 8, s.name, r.rec, s.offset));
                }
            }
        }
        // Into the outermost loop around the header (entering an inner loop
        // from outside its parents would make the CFG irreducible, and
        // `crate::reducible` would route every iteration of the inner loop
        // through a dispatch, which llvmpipe counts twice): each header on
        // the way sends `target` on to the next.
        let c = chain(k);
        let first = c[0];
        let target = if first == k { 0 } else { k + 1 };
        w(&mut post, &format!("mov.u32 {TARGET}, {target};"));
        w(&mut post, &format!("bra {};", sites[first].0));
        // The save block: back to the loop when it cannot save. Predicated,
        // not branched: every block of a path that leaves the loop lies
        // outside it, and llvmpipe loses values that a loop's blocks write
        // and blocks after its exit read (measured here: a saving lane read
        // the area's address as 0; `emit/live_out.rs` has the bug).
        let v = path(&format!("save{k}"));
        let ok = &v.p;
        w(&mut post, &format!("{L}save{k}:"));
        w(&mut post, &format!("mov.u32 {}, %__ptxvk_resume_round;", v.t));
        slot(&mut post, &v);
        w(&mut post, &format!("ld.global.u32 {}, [{}+{}];", v.n, v.slot, area::SLOT_ROUNDS));
        w(&mut post, &format!("setp.lt.u32 {ok}, {}, {};", v.t, v.n));
        w(&mut post, &format!("mul.wide.u32 {}, {}, 4;", v.a, v.t));
        w(&mut post, &format!("add.u64 {}, {}, {};", v.a, v.a, v.area));
        w(&mut post, &format!("@{ok} atom.global.add.u32 {}, [{}+{}], 1;", v.i, v.a, area::COUNTS));
        w(&mut post, &format!("@{ok} setp.lt.u32 {ok}, {}, {};", v.i, v.cap));
        // The next round's workgroups: at least this record's block + 1.
        w(&mut post, &format!("mov.u32 {}, %ntid.x;", v.n));
        w(&mut post, &format!("mov.u32 {}, %ntid.y;", v.c));
        w(&mut post, &format!("mul.lo.u32 {}, {}, {};", v.n, v.n, v.c));
        w(&mut post, &format!("mov.u32 {}, %ntid.z;", v.c));
        w(&mut post, &format!("mul.lo.u32 {}, {}, {};", v.n, v.n, v.c));
        w(&mut post, &format!("div.u32 {}, {}, {};", v.c, v.i, v.n));
        w(&mut post, &format!("add.u32 {}, {}, 1;", v.c, v.c));
        w(&mut post, &format!("mul.wide.u32 {}, {}, {};", v.b, v.t, area::INDIRECT_BYTES));
        w(&mut post, &format!("add.u64 {}, {}, {};", v.b, v.b, v.area));
        w(&mut post, &format!("@{ok} red.global.max.u32 [{}+{}], {};", v.b, area::INDIRECT, v.c));
        w(&mut post, &format!("@{ok} st.global.u32 [{}+{}], 1;", v.b, area::INDIRECT + 4));
        w(&mut post, &format!("@{ok} st.global.u32 [{}+{}], 1;", v.b, area::INDIRECT + 8));
        record(&mut post, &v);
        w(&mut post, &format!("@{ok} st.global.u32 [{}], {};", v.rec, k + 1));
        for s in saved {
            match s.ty {
                ScalarType::Pred => {
                    w(&mut post, &format!("selp.u32 {}, 1, 0, {};", v.c, s.name));
                    w(&mut post, &format!("@{ok} st.global.u32 [{}+{}], {};", v.rec, s.offset, v.c));
                }
                ty => {
                    w(&mut post, &format!("@{ok} st.global.b{} [{}+{}], {};", ty.size() * 8, v.rec, s.offset, s.name));
                }
            }
        }
        w(&mut post, &format!("@{ok} ret;"));
        w(&mut post, &format!("bra {L}go{k};"));
    }
    // Arriving at the header a resumed thread was on its way to.
    for (d, (label, _)) in sites.iter().enumerate() {
        if chain(d).len() > 1 {
            w(&mut post, &format!("{L}enter{d}:"));
            w(&mut post, &format!("mov.u32 {TARGET}, 0;"));
            w(&mut post, &format!("bra {label};"));
        }
    }
    // Each header's check.
    let mut checks = Vec::new();
    let mut descents: Vec<String> = Vec::new();
    for k in 0..sites.len() {
        let c = path(&format!("check{k}"));
        let mut text = String::new();
        w(&mut text, &format!("mov.u32 {}, %__ptxvk_loop_count;", c.c));
        w(&mut text, &format!("setp.ge.u32 {}, {}, {THRESHOLD};", c.p, c.c));
        w(&mut text, &format!("@{} bra {L}save{k};", c.p));
        w(&mut text, &format!("{L}go{k}:"));
        // A resumed thread on its way to a loop inside this one.
        let descent = format!("{P}descent{k}");
        descents.push(descent.clone());
        for d in 0..sites.len() {
            let cd = chain(d);
            if let Some(pos) = cd.iter().position(|&x| x == k).filter(|&pos| pos + 1 < cd.len()) {
                let next = cd[pos + 1];
                w(&mut text, &format!("setp.eq.u32 {}, {TARGET}, {};", descent, d + 1));
                if next == d {
                    w(&mut text, &format!("@{descent} bra {L}enter{d};"));
                } else {
                    w(&mut text, &format!("@{descent} bra {};", sites[next].0));
                }
            }
        }
        checks.push(text);
    }

    let mut out: Vec<Statement> = Vec::with_capacity(new_body.len() + 64);
    fn names(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    u32s.push(TARGET.to_string());
    preds.extend(descents);
    out.push(Statement::Decl(VarDecl::registers(span, ScalarType::U32, &names(&u32s))));
    out.push(Statement::Decl(VarDecl::registers(span, ScalarType::U64, &names(&u64s))));
    out.push(Statement::Decl(VarDecl::registers(span, ScalarType::Pred, &names(&preds))));
    if !special_decl.names.is_empty() {
        out.push(Statement::Decl(special_decl));
    }
    out.extend(hoisted.into_iter().map(Statement::Inst));
    out.extend(parse(&pre, span)?);
    let header_index: BTreeMap<&str, usize> = sites.iter().enumerate().map(|(k, (l, _))| (l.as_str(), k)).collect();
    for s in new_body {
        let check = match &s {
            Statement::Label(_, name) => header_index.get(name.as_str()).copied(),
            _ => None,
        };
        out.push(s);
        if let Some(k) = check {
            out.extend(parse(&checks[k], span)?);
        }
    }
    out.extend(parse(&post, span)?);
    Ok(Some(out))
}

/// The statements of `code` (PTX instructions and labels), with `span`.
fn parse(code: &str, span: Span) -> Result<Vec<Statement>, Diagnostic> {
    let mut text = String::from(".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry __ptxvk_resume()\n{\n");
    let _ = writeln!(text, "{code}}}");
    let m = crate::parse::run(&text).map_err(|d| {
        let first = d.into_iter().next().map(|d| d.message).unwrap_or_default();
        Diagnostic::error(span, format!("internal error in the resume pass: {first}"))
    })?;
    let body = m.items.into_iter().find_map(|i| match i {
        ModuleItem::Function(f) => f.body,
        _ => None,
    });
    let mut body = body.ok_or_else(|| Diagnostic::error(span, "internal error in the resume pass: no body"))?;
    for s in &mut body {
        respan(s, span);
    }
    Ok(body)
}

/// Give a statement made from the pass's text the entry's span.
fn respan(s: &mut Statement, span: Span) {
    match s {
        Statement::Label(sp, _) => *sp = span,
        Statement::Inst(i) => {
            i.span = span;
            i.opcode_span = span;
            if let Some(g) = &mut i.guard {
                g.span = span;
            }
            for o in i.operands.iter_mut() {
                respan_operand(o, span);
            }
        }
        _ => {}
    }
}

fn respan_operand(o: &mut Operand, span: Span) {
    match o {
        Operand::Name { span: sp, .. }
        | Operand::Int(sp, _)
        | Operand::Float(sp, _)
        | Operand::Sink(sp)
        | Operand::SymbolOffset(sp, ..)
        | Operand::ArrayElement(sp, ..) => *sp = span,
        Operand::Address(sp, a) => {
            *sp = span;
            if let Some((bs, _)) = &mut a.base {
                *bs = span;
            }
        }
        Operand::TensorAddress(sp, a, v) => {
            *sp = span;
            if let Some((bs, _)) = &mut a.base {
                *bs = span;
            }
            v.iter_mut().for_each(|x| respan_operand(x, span));
        }
        Operand::Not(sp, x) | Operand::Neg(sp, x) => {
            *sp = span;
            respan_operand(x, span);
        }
        Operand::Select { span: sp, base, .. } => {
            *sp = span;
            respan_operand(base, span);
        }
        Operand::Pair(sp, a, b) => {
            *sp = span;
            respan_operand(a, span);
            respan_operand(b, span);
        }
        Operand::Vector(sp, v) | Operand::List(sp, v) | Operand::Bracket(sp, v) => {
            *sp = span;
            v.iter_mut().for_each(|x| respan_operand(x, span));
        }
    }
}
