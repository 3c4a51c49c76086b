//! Unrolling of spin-wait loops, for drivers that bound loops.
//!
//! llvmpipe (lavapipe) ends every loop of an invocation once the loops of
//! that invocation have together run 65535 iterations (its "loop limiter",
//! one counter per invocation for the whole kernel; measured in
//! `docs/cooperative.md`). A thread that waits for another one by polling
//! memory (nvcc's inline `grid.sync()`, an mbarrier wait) then gets 65535
//! polls in all, a fraction of a millisecond, before it goes on too early.
//!
//! [`run`] copies the body of each *spin loop* `unroll` times inside one
//! iteration, each copy followed by the loop's exit test, so a wait lasts
//! `unroll` times longer before the limiter ends it. A spin loop here is a
//! single basic block that branches back to its own label,
//!
//! ```text
//! L:  body (no labels, branches or collectives)
//!     @p bra L;
//! ```
//!
//! whose body reads global (or generic) memory that another thread writes:
//! an `ld` marked `.volatile`, `.relaxed` or `.acquire`, an `atom`, an
//! mbarrier test. When
//! the body only reads memory (see `reads_only`) it becomes
//!
//! ```text
//! L:  body; body; ... body;  (unroll times)
//!     @p bra L;
//! ```
//!
//! (the thread may read once more after the condition held, as a slower
//! thread would) when a copy also computes nothing from what an earlier
//! copy computed (`repeatable`: `while (*flag == 0 && k < n) k++;` counts
//! in a register the body reads and writes, and copies without exit tests
//! went past `n`); otherwise, at most `MAX_COPIES_WITH_EXITS` copies,
//!
//! ```text
//! L:  body; @!p bra L_spin_exit;  (copies - 1 times)
//!     body; @p bra L;
//! L_spin_exit:
//! ```
//!
//! which runs the same instructions in the same order.
//!
//! A wait whose exit test is a warp vote spans several blocks and holds a
//! collective, which the form above excludes: CUB's look-back wait. Such a
//! *collective spin region* ([`collective_spin_region`]) is copied as a
//! whole, its branches back going to the next copy ([`unroll_region`]).

use crate::ast::{Function, Guard, Instruction, Module, ModuleItem, Operand, Statement};

/// Most instructions in the body of a loop that [`run`] unrolls.
const MAX_BODY: usize = 16;

/// Most copies of a body that writes memory, such as a compare-and-swap
/// retry loop or a spin lock (each copy is followed by an exit test, and
/// long chains of those are slow for llvmpipe to compile: about 1 s for 64).
const MAX_COPIES_WITH_EXITS: usize = 16;

/// Most instructions of an unrolled loop: bodies are copied fewer times
/// than asked where they would exceed it.
const MAX_UNROLLED: usize = 4096;

/// Unrolls the spin loops of every function `unroll` times (nothing when
/// `unroll` is below 2).
pub fn run(module: &mut Module, unroll: u32) {
    if unroll < 2 {
        return;
    }
    for item in &mut module.items {
        if let ModuleItem::Function(Function { body: Some(body), .. }) = item {
            rewrite(body, unroll, &mut 0);
        }
    }
}

fn rewrite(stmts: &mut Vec<Statement>, unroll: u32, counter: &mut u32) {
    for s in stmts.iter_mut() {
        if let Statement::Block(b) = s {
            rewrite(b, unroll, counter);
        }
    }
    let mut i = 0;
    while i < stmts.len() {
        let Some((label, end, back, guard)) = spin_loop(stmts, i) else {
            if let Some(end) = collective_spin_region(stmts, i) {
                let len = end - i;
                let copies = (unroll as usize).min(MAX_COPIES_WITH_EXITS).min(MAX_UNROLLED / (len + 1)).max(2);
                let n = unroll_region(stmts, i, end, copies, counter);
                i += n;
                continue;
            }
            i += 1;
            continue;
        };
        let body: Vec<Statement> = stmts[i + 1..end].to_vec();
        let copies = (unroll as usize).min(MAX_UNROLLED / (body.len() + 1)).max(2);
        let exit = format!("{label}_spin_exit{counter}");
        *counter += 1;
        let mut out: Vec<Statement> = Vec::new();
        if body.iter().all(reads_only) && repeatable(&body) {
            // Only reads: the copies need no exit tests of their own. The
            // polls become atomic adds of 0, which a driver's compiler cannot
            // merge into one load as it may merge the copies of a volatile
            // `ld` (llvmpipe does).
            let polled: Vec<Statement> = body.iter().map(as_atomic_poll).collect();
            for _ in 0..copies {
                out.extend(polled.iter().cloned());
            }
            out.push(Statement::Inst(back.clone()));
            let n = out.len();
            stmts.splice(i + 1..=end, out);
            i += 1 + n;
            continue;
        }
        let copies = copies.min(MAX_COPIES_WITH_EXITS);
        for _ in 1..copies {
            out.extend(body.iter().cloned());
            let mut leave = back.clone();
            leave.guard = Some(Guard { negated: !guard.negated, ..guard.clone() });
            retarget(&mut leave, &exit);
            out.push(Statement::Inst(leave));
        }
        out.extend(body);
        out.push(Statement::Inst(back.clone()));
        out.push(Statement::Label(back.span, exit.into()));
        let n = out.len();
        stmts.splice(i + 1..=end, out);
        i += 1 + n;
    }
}

/// If a spin loop starts with the label at `stmts[i]`: its label, the index
/// of its back branch, the branch and its guard.
fn spin_loop(stmts: &[Statement], i: usize) -> Option<(String, usize, Instruction, Guard)> {
    let Statement::Label(_, label) = &stmts[i] else { return None };
    let mut reads_shared_memory = false;
    for (k, s) in stmts.iter().enumerate().skip(i + 1).take(MAX_BODY + 1) {
        let Statement::Inst(inst) = s else { return None };
        if inst.opcode == "bra" {
            let to_label = branch_target(inst) == Some(label.as_ref());
            let guard = inst.guard.clone().filter(|_| to_label && reads_shared_memory)?;
            return Some((label.to_string(), k, inst.clone(), guard));
        }
        if !plain(inst) {
            return None;
        }
        reads_shared_memory |= polls(inst);
    }
    None
}

/// Most instructions in a [`collective_spin_region`].
const MAX_REGION: usize = 32;

/// If the label at `stmts[i]` starts a spin region that waits through a
/// warp collective: the index of its last statement.
///
/// Such a region is the statements from the label to the last branch back
/// to it, within [`MAX_REGION`] instructions, with labels and branches
/// inside, that polls memory another thread writes ([`polls`]) and holds a
/// warp collective (`vote`, `shfl`, `match`, `redux`, `activemask`). That is
/// how CUB waits for an earlier block's tile status in its decoupled
/// look-back (`while (__any_sync(~0, status == INVALID)) { __nanosleep(..);
/// status = ld.relaxed(..); }`, several basic blocks). The collective keeps
/// it out of [`spin_loop`]'s single blocks and out of `progress.rs`'s spin
/// loops, so without this each poll cost one of llvmpipe's 65535 loop
/// iterations: about 0.1 s of waiting for a warp on lavapipe, which a
/// worker thread descheduled on a loaded machine outlasts (Warp's CUB scans
/// then failed at the loop limit in about one run in five, and in four of
/// six beside one CPU-bound process).
///
/// No barriers, calls, returns or indirect branches: the region is copied
/// as it is, and those are left to the passes that follow.
fn collective_spin_region(stmts: &[Statement], i: usize) -> Option<usize> {
    let Statement::Label(_, head) = &stmts[i] else { return None };
    let (mut polls_memory, mut collective, mut count, mut end) = (false, false, 0, None);
    for (k, s) in stmts.iter().enumerate().skip(i + 1) {
        let inst = match s {
            Statement::Label(..) => continue,
            Statement::Inst(inst) => inst,
            _ => break,
        };
        count += 1;
        if count > MAX_REGION || !in_region(inst) {
            break;
        }
        polls_memory |= polls(inst);
        collective |= is_warp_collective(inst);
        if branch_target(inst) == Some(head.as_ref()) && polls_memory && collective {
            end = Some(k);
        }
    }
    end
}

/// An instruction a [`collective_spin_region`] may hold: what [`plain`]
/// allows, plus direct branches and warp collectives.
fn in_region(inst: &Instruction) -> bool {
    if inst.opcode == "bra" {
        branch_target(inst).is_some()
    } else if is_warp_collective(inst) {
        !inst.operands.iter().any(|o| matches!(o, Operand::List(..)))
    } else {
        plain(inst)
    }
}

/// A warp vote, shuffle, match, reduction or `activemask`.
fn is_warp_collective(inst: &Instruction) -> bool {
    matches!(inst.opcode.as_str(), "vote" | "shfl" | "match" | "redux" | "activemask")
}

/// Makes the branch `b` go to `label`.
fn retarget(b: &mut Instruction, label: &str) {
    b.operands = [Operand::Name { span: b.span, name: label.into(), component: None }].into_iter().collect();
}

/// The label a direct `bra` goes to.
fn branch_target(inst: &Instruction) -> Option<&str> {
    match (inst.opcode.as_str(), inst.operands.as_slice()) {
        ("bra", [Operand::Name { name, component: None, .. }]) => Some(name),
        _ => None,
    }
}

/// Replaces the region `stmts[i..=end]` by `copies` copies of itself laid
/// out one after the other, and returns the number of statements that
/// replaced it. Copy 0 keeps the labels (branches from outside still enter
/// it); copy `j > 0` renames each label `L` to `L_spin{n}_{j}`. In copy `j`
/// a branch to a label further down the region goes to that label of copy
/// `j`; a branch back (to the head, or any label at or above the branch)
/// goes to that label of copy `j + 1`, and from the last copy to copy 0.
/// Every label of every copy is followed by the same statements as the
/// original, so each path runs the same instructions in the same order;
/// only the loop's back-edges, and so llvmpipe's count of iterations,
/// become `copies` times fewer. Where the region's last branch is
/// conditional, the fall-through that left the loop would now enter the
/// next copy: in every copy but the last the branch back to the head
/// becomes a branch out when its condition fails (`@!p bra L_spin{n}_exit`).
fn unroll_region(stmts: &mut Vec<Statement>, i: usize, end: usize, copies: usize, counter: &mut u32) -> usize {
    let region: Vec<Statement> = stmts[i..=end].to_vec();
    let n = *counter;
    *counter += 1;
    let position: std::collections::HashMap<String, usize> = region
        .iter()
        .enumerate()
        .filter_map(|(p, s)| if let Statement::Label(_, l) = s { Some((l.to_string(), p)) } else { None })
        .collect();
    let Statement::Label(head_span, head) = &region[0] else { return 1 };
    let (head_span, head) = (*head_span, head.to_string());
    let name = |label: &str, j: usize| if j == 0 { label.to_string() } else { format!("{label}_spin{n}_{j}") };
    let exit = format!("{head}_spin{n}_exit");
    let falls_through = matches!(region.last(), Some(Statement::Inst(b)) if b.guard.is_some());
    let mut out = Vec::with_capacity(region.len() * copies + 1);
    for j in 0..copies {
        let last = j + 1 == copies;
        for (p, s) in region.iter().enumerate() {
            match s {
                Statement::Label(span, l) => out.push(Statement::Label(*span, name(l, j).into())),
                Statement::Inst(inst) => {
                    let Some((target, q)) = branch_target(inst).and_then(|t| Some((t, *position.get(t)?))) else {
                        out.push(s.clone());
                        continue;
                    };
                    let mut b = inst.clone();
                    let to = if q > p {
                        name(target, j)
                    } else if p + 1 == region.len() && falls_through && !last && target == head {
                        // The next copy follows: leave the loop instead when the
                        // branch back is not taken.
                        b.guard = b.guard.map(|g| Guard { negated: !g.negated, ..g });
                        exit.clone()
                    } else {
                        name(target, (j + 1) % copies)
                    };
                    retarget(&mut b, &to);
                    out.push(Statement::Inst(b));
                    if p + 1 == region.len() && falls_through && !last && target != head {
                        let mut leave = inst.clone();
                        leave.guard = None;
                        leave.modifiers.retain(|m| m == "uni");
                        retarget(&mut leave, &exit);
                        out.push(Statement::Inst(leave));
                    }
                }
                _ => out.push(s.clone()),
            }
        }
    }
    if falls_through {
        out.push(Statement::Label(head_span, exit.into()));
    }
    let len = out.len();
    stmts.splice(i..=end, out);
    len
}

/// An instruction that may be repeated inside a spin loop: no control
/// transfer, no collective or warp operation, nothing that names labels.
fn plain(inst: &Instruction) -> bool {
    !matches!(
        inst.opcode.as_str(),
        "bra"
            | "brx"
            | "call"
            | "ret"
            | "exit"
            | "trap"
            | "bar"
            | "barrier"
            | "alloca"
            | "vote"
            | "shfl"
            | "match"
            | "redux"
            | "activemask"
            | "elect"
            | "wgmma"
            | "mma"
            | "ldmatrix"
            | "stmatrix"
            | "movmatrix"
            | "wmma"
            | "setmaxnreg"
    ) && !inst.operands.iter().any(|o| matches!(o, Operand::List(..)))
}

/// A polling `ld` (`.volatile`, `.relaxed` or `.acquire`, of one 32- or
/// 64-bit integer) as the equivalent `atom` that adds 0 (`or` 0 for bit
/// types); other statements as they are.
fn as_atomic_poll(s: &Statement) -> Statement {
    let Statement::Inst(inst) = s else { return s.clone() };
    if inst.opcode != "ld" || !polls(inst) || inst.operands.len() != 2 {
        return s.clone();
    }
    let mut modifiers = crate::ast::Modifiers::new();
    let mut op = None;
    for m in &inst.modifiers {
        match m.as_str() {
            "volatile" => {}
            "relaxed" | "acquire" | "gpu" | "sys" | "cta" | "global" => modifiers.push(m.clone()),
            "u32" | "s32" | "u64" => op = Some(("add", m.as_str())),
            "b32" | "b64" => op = Some(("or", m.as_str())),
            _ => return s.clone(),
        }
    }
    let Some((op, ty)) = op else { return s.clone() };
    // `atom` takes `.relaxed`/`.acquire` only with a scope.
    if !modifiers.iter().any(|m| matches!(m.as_str(), "gpu" | "sys" | "cta")) {
        modifiers.retain(|m| !matches!(m.as_str(), "relaxed" | "acquire"));
    }
    modifiers.push(op.into());
    modifiers.push(ty.into());
    let mut atom = inst.clone();
    atom.opcode = "atom".into();
    atom.modifiers = modifiers;
    atom.operands.push(Operand::Int(inst.span, 0));
    atom.decoded = None;
    Statement::Inst(atom)
}

/// Whether a body statement has no effect besides its destination
/// registers: then running it again after the exit condition held only
/// reads memory once more, as a slower thread would, and the copies need
/// no exit tests of their own. Memory is only read (`ld`, an mbarrier
/// test); no `st`, `atom`, `red`, copies, fences or arrivals.
fn reads_only(s: &Statement) -> bool {
    let Statement::Inst(inst) = s else { return false };
    match inst.opcode.as_str() {
        "mbarrier" => inst.has("test_wait") || inst.has("try_wait"),
        "st"
        | "atom"
        | "red"
        | "cp"
        | "membar"
        | "fence"
        | "prefetch"
        | "prefetchu"
        | "discard"
        | "applypriority"
        | "stmatrix"
        | "tensormap"
        | "sust"
        | "sured"
        | "nanosleep"
        | "pmevent"
        | "multimem"
        | "griddepcontrol"
        | "tcgen05"
        | "clusterlaunchcontrol"
        | "brkpt" => false,
        _ => true,
    }
}

/// Whether running `body` again right after it ran leaves the same
/// registers: no instruction reads a register that the body writes, unless
/// the same pass wrote it before (a loop-carried value, such as a count of
/// polls, would advance with every copy). A guarded write keeps the old
/// value when its guard fails, so it reads its destination too; the carry
/// flag is a register the body may carry from one pass to the next.
fn repeatable(body: &[Statement]) -> bool {
    let insts: Vec<&Instruction> =
        body.iter().filter_map(|s| if let Statement::Inst(i) = s { Some(i) } else { None }).collect();
    let mut writes = std::collections::BTreeSet::new();
    for i in &insts {
        for o in &i.operands[..i.destinations()] {
            o.for_each_name(&mut |n| {
                writes.insert(n);
            });
        }
    }
    let mut written = std::collections::BTreeSet::new();
    for i in &insts {
        if i.has("cc") || matches!(i.opcode.as_str(), "addc" | "subc" | "madc") {
            return false;
        }
        let outs = i.destinations();
        let mut carried = false;
        let mut read = |n: &str| carried |= writes.contains(n) && !written.contains(n);
        if let Some(g) = &i.guard {
            read(&g.name);
        }
        let from = if i.guard.is_some() { 0 } else { outs };
        for o in &i.operands[from..] {
            o.for_each_name(&mut |n| read(n));
        }
        if carried {
            return false;
        }
        for o in &i.operands[..outs] {
            o.for_each_name(&mut |n| {
                written.insert(n);
            });
        }
    }
    true
}

/// Whether `inst` reads memory another thread may be writing. Not
/// `.shared` memory: the threads that write it are of the same workgroup,
/// which on llvmpipe run after the spinning one (up to its next barrier),
/// so unrolling would only make such a hopeless wait longer.
fn polls(inst: &Instruction) -> bool {
    if inst.has("shared") {
        return false;
    }
    match inst.opcode.as_str() {
        "ld" => inst.has("volatile") || inst.has("relaxed") || inst.has("acquire"),
        "atom" => true,
        "mbarrier" => inst.has("test_wait") || inst.has("try_wait"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The statements (not declarations) of the first function of `src`
    /// after [`run`], each as `line` gives it.
    fn rewritten(src: &str, unroll: u32, line: impl Fn(&Statement) -> String) -> Vec<String> {
        let mut m = crate::front_end(src, "spin.ptx").unwrap_or_else(|d| panic!("{d}"));
        run(&mut m, unroll);
        let ModuleItem::Function(Function { body: Some(b), .. }) = &m.items[0] else { panic!("no function") };
        b.iter().filter(|s| !matches!(s, Statement::Decl(_))).map(line).collect()
    }

    fn body_of(src: &str, unroll: u32) -> Vec<String> {
        rewritten(src, unroll, |s| match s {
            Statement::Label(_, l) => format!("{l}:"),
            Statement::Inst(i) => {
                let g = i.guard.as_ref().map(|g| format!("@{}{} ", if g.negated { "!" } else { "" }, g.name));
                format!("{}{}", g.unwrap_or_default(), i.mnemonic())
            }
            _ => "?".into(),
        })
    }

    /// The label each statement of `body_of` branches to ("" for others).
    fn targets_of(src: &str, unroll: u32) -> Vec<String> {
        rewritten(src, unroll, |s| match s {
            Statement::Inst(i) => branch_target(i).unwrap_or_default().to_string(),
            _ => String::new(),
        })
    }

    const SPIN: &str = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 a)\n{\n\
        .reg .pred %p<2>; .reg .b32 %r<4>; .reg .b64 %rd<2>;\nld.param.u64 %rd1, [a];\n\
        L: ld.acquire.gpu.u32 %r1, [%rd1]; setp.eq.s32 %p1, %r1, 0; @%p1 bra L;\nret;\n}\n";

    #[test]
    fn unrolls_a_reading_spin_loop() {
        let b = body_of(SPIN, 3);
        let want = [
            "ld.param.u64",
            "L:",
            "atom.acquire.gpu.add.u32",
            "setp.eq.s32",
            "atom.acquire.gpu.add.u32",
            "setp.eq.s32",
            "atom.acquire.gpu.add.u32",
            "setp.eq.s32",
            "@%p1 bra",
            "ret",
        ];
        assert_eq!(b, want);
    }

    #[test]
    fn unrolls_an_atomic_spin_loop_with_exit_tests() {
        let cas = SPIN.replace("ld.acquire.gpu.u32 %r1, [%rd1]", "atom.global.cas.b32 %r1, [%rd1], 0, 1");
        let b = body_of(&cas, 3);
        let want = [
            "ld.param.u64",
            "L:",
            "atom.global.cas.b32",
            "setp.eq.s32",
            "@!%p1 bra",
            "atom.global.cas.b32",
            "setp.eq.s32",
            "@!%p1 bra",
            "atom.global.cas.b32",
            "setp.eq.s32",
            "@%p1 bra",
            "L_spin_exit0:",
            "ret",
        ];
        assert_eq!(b, want);
    }

    /// A spin loop that also counts its polls (`while (*flag == 0 && k < n)
    /// k++;`, as nvcc writes it) reads the count it writes: its copies need
    /// exit tests, or the count runs past `n`.
    #[test]
    fn a_counting_spin_loop_gets_exit_tests() {
        let counting = SPIN.replace(
            "L: ld.acquire.gpu.u32 %r1, [%rd1]; setp.eq.s32 %p1, %r1, 0;",
            "mov.u32 %r3, 0;\nL: mov.u32 %r2, %r3; ld.acquire.gpu.u32 %r1, [%rd1]; setp.eq.s32 %p1, %r1, 0; \
             setp.lt.s32 %p0, %r2, 100; and.pred %p1, %p1, %p0; add.s32 %r3, %r2, 1;",
        );
        let b = body_of(&counting, 2);
        let want = [
            "ld.param.u64",
            "mov.u32",
            "L:",
            "mov.u32",
            "ld.acquire.gpu.u32",
            "setp.eq.s32",
            "setp.lt.s32",
            "and.pred",
            "add.s32",
            "@!%p1 bra",
            "mov.u32",
            "ld.acquire.gpu.u32",
            "setp.eq.s32",
            "setp.lt.s32",
            "and.pred",
            "add.s32",
            "@%p1 bra",
            "L_spin_exit0:",
            "ret",
        ];
        assert_eq!(b, want);
        // A temporary written before it is read in the same pass repeats.
        let temporary = SPIN.replace("setp.eq.s32 %p1, %r1, 0;", "add.s32 %r2, %r1, 1; setp.eq.s32 %p1, %r2, 1;");
        let b = body_of(&temporary, 2);
        assert_eq!(b.iter().filter(|l| l.starts_with("atom.acquire")).count(), 2, "{b:?}");
        assert!(!b.iter().any(|l| l == "L_spin_exit0:"), "{b:?}");
        // A guarded write keeps the old value when its guard fails.
        let guarded = SPIN.replace("setp.eq.s32 %p1, %r1, 0;", "setp.eq.s32 %p1, %r1, 0; @%p1 add.s32 %r2, %r2, 1;");
        assert!(body_of(&guarded, 2).iter().any(|l| l == "L_spin_exit0:"));
    }

    /// CUB's look-back wait as NVRTC lays it out (Warp 1.19's scan): entered
    /// in the middle, two arms that meet again at the head, the exit test
    /// on a `vote.any`.
    const CUB_WAIT: &str = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 a)\n{\n\
        .reg .pred %p<4>; .reg .b32 %r<4>; .reg .b64 %rd<2>;\nld.param.u64 %rd1, [a];\nmov.u32 %r3, -1;\n\
        setp.eq.s32 %p3, %r3, 0;\nld.relaxed.gpu.u32 %r1, [%rd1];\nbra.uni H;\n\
        L: ld.relaxed.gpu.u32 %r1, [%rd1];\nH: setp.eq.s32 %p1, %r1, 0;\nvote.sync.any.pred %p2, %p1, %r3;\n\
        @%p2 bra W;\nbra.uni X;\nW: @%p3 bra M;\nbra.uni N;\nM: membar.cta;\nbra.uni L;\n\
        N: nanosleep.u32 350;\nbra.uni L;\nX: ret;\n}\n";

    #[test]
    fn unrolls_a_spin_region_with_a_warp_vote() {
        let b = body_of(CUB_WAIT, 3);
        let region = |j: usize| -> Vec<String> {
            let (s, next) = (if j == 0 { String::new() } else { format!("_spin0_{j}") }, format!("_spin0_{}", j + 1));
            let next = if j == 2 { String::new() } else { next };
            [
                format!("L{s}:"),
                "ld.relaxed.gpu.u32".into(),
                format!("H{s}:"),
                "setp.eq.s32".into(),
                "vote.sync.any.pred".into(),
                "@%p2 bra".into(),
                "bra.uni".into(),
                format!("W{s}:"),
                "@%p3 bra".into(),
                "bra.uni".into(),
                format!("M{s}:"),
                "membar.cta".into(),
                format!("bra.uni -> L{next}"),
                format!("N{s}:"),
                "nanosleep.u32".into(),
                format!("bra.uni -> L{next}"),
            ]
            .into()
        };
        let mut want: Vec<String> =
            ["ld.param.u64", "mov.u32", "setp.eq.s32", "ld.relaxed.gpu.u32", "bra.uni"].map(String::from).into();
        for j in 0..3 {
            want.extend(region(j));
        }
        want.push("X:".into());
        want.push("ret".into());
        let got: Vec<String> = b
            .iter()
            .zip(targets_of(CUB_WAIT, 3))
            .map(|(l, t)| if l == "bra.uni" && t.starts_with('L') { format!("{l} -> {t}") } else { l.clone() })
            .collect();
        assert_eq!(got, want);
        // The forward branches stay in their copy; the entry is copy 0's H.
        let t = targets_of(CUB_WAIT, 3);
        let forward: Vec<&str> =
            t.iter().filter(|t| !t.is_empty() && !t.starts_with('L')).map(|t| t.as_str()).collect();
        assert_eq!(
            forward,
            [
                "H",
                "W",
                "X",
                "M",
                "N",
                "W_spin0_1",
                "X",
                "M_spin0_1",
                "N_spin0_1",
                "W_spin0_2",
                "X",
                "M_spin0_2",
                "N_spin0_2"
            ]
        );
    }

    /// A single block that ends in a conditional branch back: every copy but
    /// the last leaves when the condition fails, the last goes round.
    #[test]
    fn a_spin_region_that_falls_through_leaves_from_each_copy() {
        let src = SPIN.replace(
            "setp.eq.s32 %p1, %r1, 0; @%p1 bra L;",
            "setp.eq.s32 %p0, %r1, 0; mov.u32 %r2, -1; vote.sync.any.pred %p1, %p0, %r2; @%p1 bra L;",
        );
        let b = body_of(&src, 2);
        let want = [
            "ld.param.u64",
            "L:",
            "ld.acquire.gpu.u32",
            "setp.eq.s32",
            "mov.u32",
            "vote.sync.any.pred",
            "@!%p1 bra",
            "L_spin0_1:",
            "ld.acquire.gpu.u32",
            "setp.eq.s32",
            "mov.u32",
            "vote.sync.any.pred",
            "@%p1 bra",
            "L_spin0_exit:",
            "ret",
        ];
        assert_eq!(b, want);
        assert_eq!(
            targets_of(&src, 2).into_iter().filter(|t| !t.is_empty()).collect::<Vec<_>>(),
            ["L_spin0_exit", "L"]
        );
        // Without a poll, or with a barrier, the loop stays.
        let plain = src.replace("ld.acquire.gpu.u32", "ld.global.u32");
        assert_eq!(body_of(&plain, 4).len(), 8);
        let barrier = src.replace("mov.u32 %r2, -1;", "mov.u32 %r2, -1; bar.sync 0;");
        assert_eq!(body_of(&barrier, 4).len(), 9);
    }

    #[test]
    fn leaves_other_loops_alone() {
        let plain_load = SPIN.replace("ld.acquire.gpu.u32", "ld.global.u32");
        assert_eq!(body_of(&plain_load, 4).len(), 6);
        let with_barrier = SPIN.replace("setp.eq.s32 %p1", "bar.sync 0; setp.eq.s32 %p1");
        assert_eq!(body_of(&with_barrier, 4).len(), 7);
        let shared = SPIN.replace("ld.acquire.gpu.u32", "ld.volatile.shared.u32");
        assert_eq!(body_of(&shared, 4).len(), 6);
        assert_eq!(body_of(SPIN, 1).len(), 6);
    }
}
