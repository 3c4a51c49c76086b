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
//! function, so the rest of the emitter is unchanged. Only registers that a
//! loop writes and that are live where it exits (by a liveness analysis of
//! the CFG: read on some path from an exit before being written again) are
//! kept in memory; the set is still an over-approximation of what the bug
//! needs (a write whose value reaches a loop exit), and each access of those
//! registers costs a load or store that llvmpipe runs lane by lane. A
//! grid-stride loop's index, written before the loop and in it but dead
//! after it, stays promotable (the twins' reduction: the index in memory
//! cost it a third of its time).
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

use crate::ast::{Instruction, Operand};
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
    let mut out = FxHashSet::default();
    let mut loops = Vec::new();
    collect_loops(regions, &mut loops);
    if loops.is_empty() {
        return out;
    }
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
    let live = Liveness::new(cfg, is_register, outside);
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
        // Where the loop is left: the blocks outside it that a block inside
        // branches to, and whether a block inside returns.
        let leaves = |t: usize| inside.binary_search(&t).is_err();
        let mut exits = Vec::new();
        let mut returns = false;
        for &b in &inside {
            exits.extend(cfg.successors(b).iter().copied().filter(|&t| leaves(t)));
            returns |= matches!(cfg.blocks[b].term, Terminator::Return);
        }
        for &b in &inside {
            for r in &writes[b] {
                // Mentioned outside the loop (the old, coarser test) and
                // live at one of its exits.
                let live_out = exits.iter().any(|&t| live.live_in(t, r)) || (returns && outside.contains(r));
                if total.get(r) > here.get(r) && live_out {
                    out.insert(r.to_string());
                }
            }
            // A branch whose both targets leave the loop: the lanes that
            // left must not see its condition recomputed.
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

/// Which registers are live on entry to each block: read on some path
/// from the block's start before being written. Conservative (a register
/// is live where in doubt): only an unguarded write of the whole register
/// ends its liveness, every other mention is a read, and `outside`
/// registers are read at every return.
struct Liveness<'c> {
    /// Register name to bit index.
    index: FxHashMap<&'c str, usize>,
    /// `u64` words per block.
    words: usize,
    /// Live-in bits, `words` per block.
    live_in: Vec<u64>,
}

impl<'c> Liveness<'c> {
    fn new(cfg: &'c Cfg<'_>, is_register: &dyn Fn(&str) -> bool, outside: &[&'c str]) -> Liveness<'c> {
        // Every register the function mentions, numbered.
        let mut index: FxHashMap<&'c str, usize> = FxHashMap::default();
        let mut number = |r: &'c str| {
            if is_register(r) {
                let n = index.len();
                index.entry(r).or_insert(n);
            }
        };
        for blk in &cfg.blocks {
            if let Some((reg, _)) = &blk.assign {
                number(reg);
            }
            for inst in &blk.insts {
                if let Some(g) = &inst.guard {
                    number(&g.name);
                }
                inst.operands.iter().for_each(|o| o.for_each_name(&mut number));
            }
            match &blk.term {
                Terminator::CondBranch { pred, .. } => number(pred),
                Terminator::Dispatch { reg, .. } => number(reg),
                Terminator::Branch(_) | Terminator::Return => {}
            }
        }
        outside.iter().for_each(|r| number(r));
        let words = index.len().div_ceil(64).max(1);
        let n = cfg.blocks.len();
        // Per block, `words` each: registers read before any write (the
        // uses, which start the live-in sets), and those written whole and
        // unconditionally (the kills).
        let mut live_in = vec![0u64; n * words];
        let mut kill_bits = vec![0u64; n * words];
        let bit = |r: &str| index.get(r).map(|&i| (i / 64, 1u64 << (i % 64)));
        let read = |r: &str, uses: &mut [u64], kills: &[u64]| {
            if let Some((w, m)) = bit(r) {
                if kills[w] & m == 0 {
                    uses[w] |= m;
                }
            }
        };
        let kill = |r: &str, kills: &mut [u64]| {
            if let Some((w, m)) = bit(r) {
                kills[w] |= m;
            }
        };
        for (b, blk) in cfg.blocks.iter().enumerate() {
            let uses = &mut live_in[b * words..(b + 1) * words];
            let kills = &mut kill_bits[b * words..(b + 1) * words];
            if let Some((reg, _)) = &blk.assign {
                kill(reg, kills);
            }
            for inst in &blk.insts {
                let outs = inst.destinations();
                if let Some(g) = &inst.guard {
                    read(&g.name, uses, kills);
                }
                for (j, o) in inst.operands.iter().enumerate() {
                    // A destination written in part (or through an address)
                    // is read too.
                    if j >= outs || !whole_registers(o) {
                        o.for_each_name(&mut |r| read(r, uses, kills));
                    }
                }
                if inst.guard.is_none() {
                    for o in inst.operands.iter().take(outs).filter(|o| whole_registers(o)) {
                        o.for_each_name(&mut |r| kill(r, kills));
                    }
                }
            }
            match &blk.term {
                Terminator::CondBranch { pred, .. } => read(pred, uses, kills),
                Terminator::Dispatch { reg, .. } => read(reg, uses, kills),
                Terminator::Return => outside.iter().for_each(|r| read(r, uses, kills)),
                Terminator::Branch(_) => {}
            }
        }
        // live_in(b) = uses(b) | (live_out(b) & !kills(b)), live_out(b) =
        // the union over successors; to a fixed point, blocks in reverse.
        let mut out_bits = vec![0u64; words];
        let mut changed = true;
        while changed {
            changed = false;
            for b in (0..n).rev() {
                out_bits.iter_mut().for_each(|w| *w = 0);
                for &t in &cfg.successors(b) {
                    for (w, &x) in out_bits.iter_mut().zip(&live_in[t * words..(t + 1) * words]) {
                        *w |= x;
                    }
                }
                for (w, (&o, &k)) in
                    live_in[b * words..(b + 1) * words].iter_mut().zip(out_bits.iter().zip(&kill_bits[b * words..]))
                {
                    let v = *w | (o & !k);
                    if v != *w {
                        *w = v;
                        changed = true;
                    }
                }
            }
        }
        Liveness { index, words, live_in }
    }

    /// Whether register `r` is live on entry to block `b`.
    fn live_in(&self, b: usize, r: &str) -> bool {
        self.index.get(r).is_some_and(|&i| self.live_in[b * self.words + i / 64] & (1 << (i % 64)) != 0)
    }
}

/// Whether destination operand `o` writes whole registers (plain names, or
/// vectors and pairs of them; `_` writes nothing).
fn whole_registers(o: &Operand) -> bool {
    match o {
        Operand::Name { component: None, .. } | Operand::Sink(_) => true,
        Operand::Vector(_, v) | Operand::List(_, v) => v.iter().all(whole_registers),
        Operand::Pair(_, a, b) => whole_registers(a) && whole_registers(b),
        _ => false,
    }
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
