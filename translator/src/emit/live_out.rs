//! Registers that a loop writes and code outside the loop reads, kept in
//! memory for drivers that lose such values
//! ([`crate::Options::loop_live_outs_in_memory`], for llvmpipe).
//!
//! # The driver bug
//! llvmpipe (lavapipe, measured on Mesa 22.3) runs an 8-lane vector through
//! a loop until every lane has left it, with the lanes that left masked off.
//! Registers of its NIR (phi webs after leaving SSA) are written under that
//! mask, but a plain SSA value is recomputed for every lane in every vector
//! iteration, and a use after the loop takes the value of the vector's last
//! iteration. NIR promotes our `Function` variables to SSA and drops the
//! trivial loop-exit phis, so a value computed inside a loop and read after
//! it is, for a lane that left in an earlier iteration, recomputed from that
//! lane's stale inputs. Measured (issue 16): `r = k; if (k >= n) break;
//! k += 1; if (c) continue; break;` stored `k + 1` after the loop for every
//! lane that left through the last `break`, since `k`'s phi web (a register,
//! updated before the `break`) fed the recomputation of `r`. A numba
//! grid-stride escape-time kernel lost 3.5% of its stores that way.
//!
//! # The workaround
//! A register written anywhere inside a loop region and mentioned anywhere
//! outside it lives in a two-element `Function` array indexed by an opaque
//! zero (`LocalInvocationIndex >> 31`, as in `zero.rs`): NIR cannot resolve
//! the index, so the variable stays memory, whose stores the driver masks.
//! Every access goes through one access chain made at the top of the
//! function, so the rest of the emitter is unchanged. Registers read only
//! inside the loop that writes them stay promotable. The set is an
//! over-approximation of what the bug needs (a write whose value reaches a
//! loop exit); its cost is a load or store per access of those registers.
//!
//! The condition of a branch inside a loop whose both targets leave it is
//! kept in memory too (the exit taken must not be recomputed).
//!
//! Not covered: `.local` arrays kept in `Function` variables, the carry
//! flag, and the translator's own dispatch variables (`brk`, the uniform
//! state, the exited flag), which only ever hold constants. `brk` in memory
//! was measured to be worse: NIR then keeps the one-pass loops of block
//! regions, each of whose passes llvmpipe's loop limiter counts, and loops
//! were cut short below the budget `loop_limit.rs` counts.

use crate::ast::Instruction;
use crate::cfg::{Cfg, Terminator};
use crate::fxhash::{FxHashMap, FxHashSet};
use crate::structurize::Region;

/// The registers of `cfg` (those `is_register` accepts) that some loop of
/// `regions` writes and that are mentioned outside that loop. `outside`
/// are registers read where no block is (a `.func`'s return registers,
/// read at every `ret`).
pub(crate) fn registers<'a>(
    cfg: &Cfg<'a>,
    regions: &[Region],
    is_register: &dyn Fn(&str) -> bool,
    outside: &[&str],
) -> FxHashSet<String> {
    let n = cfg.blocks.len();
    let mut writes: Vec<Vec<&str>> = vec![Vec::new(); n];
    let mut mentions: Vec<Vec<&str>> = vec![Vec::new(); n];
    for (b, blk) in cfg.blocks.iter().enumerate() {
        let (w, m) = (&mut writes[b], &mut mentions[b]);
        if let Some((reg, _)) = &blk.assign {
            w.push(reg);
            m.push(reg);
        }
        for inst in &blk.insts {
            instruction(inst, w, m);
        }
        match &blk.term {
            Terminator::CondBranch { pred, .. } => m.push(pred),
            Terminator::Dispatch { reg, .. } => m.push(reg),
            Terminator::Branch(_) | Terminator::Return => {}
        }
        w.retain(|r| is_register(r));
        m.retain(|r| is_register(r));
        m.sort_unstable();
        m.dedup();
    }
    // In how many blocks each register is mentioned (and once more for
    // each outside use).
    let mut total: FxHashMap<&str, usize> = FxHashMap::default();
    for m in &mentions {
        for r in m {
            *total.entry(r).or_default() += 1;
        }
    }
    for r in outside {
        *total.entry(r).or_default() += 1;
    }
    let mut out = FxHashSet::default();
    let mut loops = Vec::new();
    collect_loops(regions, &mut loops);
    for body in loops {
        let mut inside = Vec::new();
        blocks_in(body, &mut inside);
        inside.sort_unstable();
        inside.dedup();
        let mut here: FxHashMap<&str, usize> = FxHashMap::default();
        for &b in &inside {
            for r in &mentions[b] {
                *here.entry(r).or_default() += 1;
            }
        }
        for &b in &inside {
            for r in &writes[b] {
                if total.get(r) > here.get(r) {
                    out.insert(r.to_string());
                }
            }
            // A branch whose both targets leave the loop: the lanes that
            // left must not see its condition recomputed.
            let leaves = |t: usize| inside.binary_search(&t).is_err();
            let exit_condition = match &cfg.blocks[b].term {
                Terminator::CondBranch { pred, taken, fallthrough, .. } => Some((*pred, *taken, *fallthrough)),
                Terminator::Dispatch { reg, taken, fallthrough, .. } => Some((&**reg, *taken, *fallthrough)),
                Terminator::Branch(_) | Terminator::Return => None,
            };
            if let Some((c, t, f)) = exit_condition {
                if leaves(t) && leaves(f) && is_register(c) {
                    out.insert(c.to_string());
                }
            }
        }
    }
    out
}

/// The names an instruction writes (its destinations) and every name it
/// mentions (its guard too).
fn instruction<'a>(inst: &'a Instruction, writes: &mut Vec<&'a str>, mentions: &mut Vec<&'a str>) {
    if let Some(g) = &inst.guard {
        mentions.push(&g.name);
    }
    let outs = inst.destinations();
    for (k, o) in inst.operands.iter().enumerate() {
        o.for_each_name(&mut |name| {
            if k < outs {
                writes.push(name);
            }
            mentions.push(name);
        });
    }
}

/// The bodies of every loop region, nested ones too.
fn collect_loops<'r>(regions: &'r [Region], out: &mut Vec<&'r [Region]>) {
    for r in regions {
        match r {
            Region::Loop { body, .. } => {
                out.push(body);
                collect_loops(body, out);
            }
            Region::Block { body, .. } => collect_loops(body, out),
            Region::If { then_body, else_body, .. } => {
                collect_loops(then_body, out);
                collect_loops(else_body, out);
            }
            Region::Code(_) | Region::Br(_) | Region::Return => {}
        }
    }
}

/// The blocks whose code or branch is in `regions`.
fn blocks_in(regions: &[Region], out: &mut Vec<usize>) {
    for r in regions {
        match r {
            Region::Code(b) => out.push(*b),
            Region::If { block, then_body, else_body } => {
                out.push(*block);
                blocks_in(then_body, out);
                blocks_in(else_body, out);
            }
            Region::Loop { body, .. } | Region::Block { body, .. } => blocks_in(body, out),
            Region::Br(_) | Region::Return => {}
        }
    }
}
