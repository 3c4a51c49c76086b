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
//! whose body reads memory that another thread writes: an `ld` marked
//! `.volatile`, `.relaxed` or `.acquire`, or an `atom`. It becomes
//!
//! ```text
//! L:  body; @!p bra L_spin_exit;  (unroll - 1 times)
//!     body; @p bra L;
//! L_spin_exit:
//! ```
//!
//! which runs the same instructions in the same order.

use crate::ast::{Function, Guard, Instruction, Module, ModuleItem, Operand, Statement};

/// Most instructions in the body of a loop that [`run`] unrolls.
const MAX_BODY: usize = 16;

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
            i += 1;
            continue;
        };
        let body: Vec<Statement> = stmts[i + 1..end].to_vec();
        let exit = format!("{label}_spin_exit{counter}");
        *counter += 1;
        let mut out: Vec<Statement> = Vec::new();
        for _ in 1..unroll {
            out.extend(body.iter().cloned());
            let mut leave = back.clone();
            leave.guard = Some(Guard { negated: !guard.negated, ..guard.clone() });
            leave.operands = vec![Operand::Name { span: back.span, name: exit.clone(), component: None }];
            out.push(Statement::Inst(leave));
        }
        out.extend(body);
        out.push(Statement::Inst(back.clone()));
        out.push(Statement::Label(back.span, exit));
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
            let to_label = matches!(inst.operands.as_slice(), [Operand::Name { name, .. }] if name == label);
            let guard = inst.guard.clone().filter(|_| to_label && reads_shared_memory)?;
            return Some((label.clone(), k, inst.clone(), guard));
        }
        if !plain(inst) {
            return None;
        }
        reads_shared_memory |= polls(inst);
    }
    None
}

/// An instruction that may be repeated inside a spin loop: no control
/// transfer, no collective, nothing that names labels.
fn plain(inst: &Instruction) -> bool {
    !matches!(
        inst.opcode.as_str(),
        "bra" | "brx" | "call" | "ret" | "exit" | "trap" | "bar" | "barrier" | "bar.warp" | "alloca"
    ) && !inst.operands.iter().any(|o| matches!(o, Operand::List(..)))
}

/// Whether `inst` reads memory another thread may be writing.
fn polls(inst: &Instruction) -> bool {
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

    fn body_of(src: &str, unroll: u32) -> Vec<String> {
        let mut m = crate::parse::run(src).expect("parses");
        run(&mut m, unroll);
        let ModuleItem::Function(Function { body: Some(b), .. }) = &m.items[0] else { panic!("no function") };
        b.iter()
            .filter(|s| !matches!(s, Statement::Decl(_)))
            .map(|s| match s {
                Statement::Label(_, l) => format!("{l}:"),
                Statement::Inst(i) => {
                    let g = i.guard.as_ref().map(|g| format!("@{}{} ", if g.negated { "!" } else { "" }, g.name));
                    format!("{}{}", g.unwrap_or_default(), i.mnemonic())
                }
                _ => "?".into(),
            })
            .collect()
    }

    const SPIN: &str = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 a)\n{\n\
        .reg .pred %p<2>; .reg .b32 %r<4>; .reg .b64 %rd<2>;\nld.param.u64 %rd1, [a];\n\
        L: ld.acquire.gpu.u32 %r1, [%rd1]; setp.eq.s32 %p1, %r1, 0; @%p1 bra L;\nret;\n}\n";

    #[test]
    fn unrolls_a_spin_loop_with_exit_tests() {
        let b = body_of(SPIN, 3);
        let want = [
            "ld.param.u64",
            "L:",
            "ld.acquire.gpu.u32",
            "setp.eq.s32",
            "@!%p1 bra",
            "ld.acquire.gpu.u32",
            "setp.eq.s32",
            "@!%p1 bra",
            "ld.acquire.gpu.u32",
            "setp.eq.s32",
            "@%p1 bra",
            "L_spin_exit0:",
            "ret",
        ];
        assert_eq!(b, want);
    }

    #[test]
    fn leaves_other_loops_alone() {
        let plain_load = SPIN.replace("ld.acquire.gpu.u32", "ld.global.u32");
        assert_eq!(body_of(&plain_load, 4).len(), 6);
        let with_barrier = SPIN.replace("setp.eq.s32 %p1", "bar.sync 0; setp.eq.s32 %p1");
        assert_eq!(body_of(&with_barrier, 4).len(), 7);
        assert_eq!(body_of(SPIN, 1).len(), 6);
    }
}
