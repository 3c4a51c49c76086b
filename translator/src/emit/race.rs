//! Racecheck: every non-atomic `.shared` access of a user kernel tracked in
//! a shadow of the block's shared memory ([`crate::Options::race_checks`];
//! the layout and the rules are in "Racecheck" of [`crate::abi::fault`]).
//!
//! A thread carries two epochs in `Private` variables: its block epoch
//! (the `bar`/`barrier` instructions it has executed) and its warp epoch
//! (its `bar.warp.sync`s since the last block barrier). Each access of a
//! shared word compares the word's last write and last read(s) with the
//! thread's own key and updates them, without a branch; the thread keeps
//! its first hazard and [`flush`] records it when the thread ends, behind a
//! subgroup vote (as the fault checks do), without failing the launch.

use super::fault::{fault_log, load_uniform_u64, offset, ptr, record_call, when_mine, Site};
use super::func::{internal1, Fx};
use super::values::K;
use super::Emitter;
use crate::abi::fault;
use crate::diag::Diagnostic;
use rspirv::dr::Operand as SOp;
use rspirv::spirv::{self, MemoryAccess, StorageClass, Word};

/// The `Private` variables and the function of the racecheck.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Race {
    /// u32: the block epoch.
    epoch: Word,
    /// u32: the warp epoch.
    warp_epoch: Word,
    /// u64: the device address of the block's shadow slot.
    slot: Word,
    /// u32: the block's generation in its slot (`%ctaid` linear / slots).
    generation: Word,
    /// u32: the first hazard: `kind << 28 | site + 1` (0: none).
    code: Word,
    /// u64: the first hazard's packed address (see the abi).
    info: Word,
    /// The function each tracked word calls (emitted once used).
    word_fn: Option<Word>,
}

impl Race {
    /// The variables every entry lists in its interface.
    pub(crate) fn interface(&self) -> [Word; 6] {
        [self.epoch, self.warp_epoch, self.slot, self.generation, self.code, self.info]
    }
}

/// Creates the racecheck state (before the first entry).
pub(crate) fn declare_state(e: &mut Emitter) {
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let p32 = e.t_ptr(StorageClass::Private, u32t);
    let p64 = e.t_ptr(StorageClass::Private, u64t);
    let z32 = e.c_u32(0);
    let z64 = e.c_int(64, 0);
    let mut v32 = || e.b.variable(p32, None, StorageClass::Private, Some(z32));
    let (epoch, warp_epoch, generation, code) = (v32(), v32(), v32(), v32());
    let slot = e.b.variable(p64, None, StorageClass::Private, Some(z64));
    let info = e.b.variable(p64, None, StorageClass::Private, Some(z64));
    e.race = Some(Race { epoch, warp_epoch, slot, generation, code, info, word_fn: None });
}

/// At the start of an entry: the block's slot and generation.
pub(crate) fn init(e: &mut Emitter, fx: &Fx) -> Result<(), Diagnostic> {
    let Some(r) = e.race else { return Ok(()) };
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    // The linear %ctaid in a grid of header words 3-5.
    let c = super::block_order::ctaid(e, fx)?;
    let gx = e.push_word(fx, 3)?;
    let gy = e.push_word(fx, 4)?;
    let zy = e.b.i_mul(u32t, None, c[2], gy).map_err(internal1)?;
    let zy = e.b.i_add(u32t, None, zy, c[1]).map_err(internal1)?;
    let lin = e.b.i_mul(u32t, None, zy, gx).map_err(internal1)?;
    let lin = e.b.i_add(u32t, None, lin, c[0]).map_err(internal1)?;
    let log = fault_log(e)?;
    let shadow = load_uniform_u64(e, log, fault::RACE_SHADOW)?;
    let slots_at = offset(e, log, fault::RACE_SLOTS)?;
    let p = ptr(e, K::Int(32), slots_at)?;
    let slots = e.b.load(u32t, None, p, Some(MemoryAccess::ALIGNED), [SOp::LiteralBit32(4)]).map_err(internal1)?;
    let one = e.c_u32(1);
    let bt = e.t_bool();
    let none = e.b.u_less_than(bt, None, slots, one).map_err(internal1)?;
    let slots = e.b.select(u32t, None, none, one, slots).map_err(internal1)?;
    let slot = e.b.u_mod(u32t, None, lin, slots).map_err(internal1)?;
    let generation = e.b.u_div(u32t, None, lin, slots).map_err(internal1)?;
    // Bytes of a slot: RACE_ENTRY_BYTES per word of the shared bytes.
    let bytes = super::fault::shared_limit(e, fx)?;
    let bytes = e.b.u_convert(u64t, None, bytes).map_err(internal1)?;
    let per = e.c_int(64, fault::RACE_ENTRY_BYTES / 4);
    let slot_bytes = e.b.i_mul(u64t, None, bytes, per).map_err(internal1)?;
    let slot = e.b.u_convert(u64t, None, slot).map_err(internal1)?;
    let rel = e.b.i_mul(u64t, None, slot, slot_bytes).map_err(internal1)?;
    let at = e.b.i_add(u64t, None, shadow, rel).map_err(internal1)?;
    e.b.store(r.slot, at, None, []).map_err(internal1)?;
    e.b.store(r.generation, generation, None, []).map_err(internal1)?;
    Ok(())
}

/// A block barrier (`bar`, `barrier`) the thread executes when `active`
/// (in workgroup-uniform code every invocation passes each barrier, also
/// where the PTX thread does not reach it): the next block epoch.
pub(crate) fn block_barrier(e: &mut Emitter, active: Word) -> Result<(), Diagnostic> {
    let Some(r) = e.race else { return Ok(()) };
    let u32t = e.t_int(32);
    let v = e.b.load(u32t, None, r.epoch, None, []).map_err(internal1)?;
    let (one, zero) = (e.c_u32(1), e.c_u32(0));
    let step = e.b.select(u32t, None, active, one, zero).map_err(internal1)?;
    let next = e.b.i_add(u32t, None, v, step).map_err(internal1)?;
    e.b.store(r.epoch, next, None, []).map_err(internal1)?;
    let w = e.b.load(u32t, None, r.warp_epoch, None, []).map_err(internal1)?;
    let w = e.b.select(u32t, None, active, zero, w).map_err(internal1)?;
    e.b.store(r.warp_epoch, w, None, []).map_err(internal1)
}

/// `bar.warp.sync`, executed when `active`: the next warp epoch.
pub(crate) fn warp_barrier(e: &mut Emitter, active: Word) -> Result<(), Diagnostic> {
    let Some(r) = e.race else { return Ok(()) };
    let u32t = e.t_int(32);
    let v = e.b.load(u32t, None, r.warp_epoch, None, []).map_err(internal1)?;
    let (one, zero) = (e.c_u32(1), e.c_u32(0));
    let step = e.b.select(u32t, None, active, one, zero).map_err(internal1)?;
    let v = e.b.i_add(u32t, None, v, step).map_err(internal1)?;
    e.b.store(r.warp_epoch, v, None, []).map_err(internal1)
}

/// Tracks an access that passed the fault checks: `site.bytes` bytes at
/// shared byte offset `off` (aligned to its size).
pub(crate) fn access(e: &mut Emitter, fx: &Fx, off: Word, site: Site, id: u32) -> Result<(), Diagnostic> {
    let Some(r) = e.race else { return Ok(()) };
    let write = match site.access {
        fault::Access::Read => false,
        fault::Access::Write => true,
        fault::Access::Atomic => return Ok(()),
    };
    let f = match r.word_fn {
        Some(f) => f,
        None => {
            let f = e.b.id();
            if let Some(r) = e.race.as_mut() {
                r.word_fn = Some(f);
            }
            f
        }
    };
    let u32t = e.t_int(32);
    let void = e.ty(super::TyKey::Void);
    let two = e.c_u32(2);
    let first = e.b.shift_right_logical(u32t, None, off, two).map_err(internal1)?;
    let w = e.c_u32(write as u32);
    let s = e.c_u32(id);
    if site.bytes < 4 {
        // A byte or two of one word: its mask, shifted to the offset.
        let three = e.c_u32(3);
        let low = e.b.bitwise_and(u32t, None, off, three).map_err(internal1)?;
        let m = e.c_u32((1 << site.bytes) - 1);
        let mask = e.b.shift_left_logical(u32t, None, m, low).map_err(internal1)?;
        e.b.function_call(void, None, f, [first, mask, w, s, fx.linear]).map_err(internal1)?;
        return Ok(());
    }
    let full = e.c_u32(0xf);
    // Accesses wider than 16 bytes are tracked by their first 16.
    for k in 0..(site.bytes / 4).min(4) {
        let kc = e.c_u32(k);
        let word = e.b.i_add(u32t, None, first, kc).map_err(internal1)?;
        e.b.function_call(void, None, f, [word, full, w, s, fx.linear]).map_err(internal1)?;
    }
    Ok(())
}

/// Emits the word function (when an access called it):
/// `void race_word(u32 word, u32 mask, u32 write, u32 site, u32 tid)`.
pub(crate) fn emit_word_fn(e: &mut Emitter) -> Result<(), Diagnostic> {
    let Some(r) = e.race else { return Ok(()) };
    let Some(id) = r.word_fn else { return Ok(()) };
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let bt = e.t_bool();
    let void = e.ty(super::TyKey::Void);
    let fnty = e.ty(super::TyKey::Func(void, vec![u32t, u32t, u32t, u32t, u32t]));
    e.b.begin_function(void, Some(id), spirv::FunctionControl::NONE, fnty).map_err(internal1)?;
    let word = e.b.function_parameter(u32t).map_err(internal1)?;
    let mask = e.b.function_parameter(u32t).map_err(internal1)?;
    let write = e.b.function_parameter(u32t).map_err(internal1)?;
    let site = e.b.function_parameter(u32t).map_err(internal1)?;
    let tid = e.b.function_parameter(u32t).map_err(internal1)?;
    e.b.begin_block(None).map_err(internal1)?;
    let zero = e.c_u32(0);
    let write = e.b.i_not_equal(bt, None, write, zero).map_err(internal1)?;

    // The entry's address and the four fields.
    let slot = e.b.load(u64t, None, r.slot, None, []).map_err(internal1)?;
    let w64 = e.b.u_convert(u64t, None, word).map_err(internal1)?;
    let eb = e.c_int(64, fault::RACE_ENTRY_BYTES);
    let rel = e.b.i_mul(u64t, None, w64, eb).map_err(internal1)?;
    let at = e.b.i_add(u64t, None, slot, rel).map_err(internal1)?;
    let pw = field(e, at, 0, 64)?;
    let pr = field(e, at, 8, 64)?;
    let pws = field(e, at, 16, 32)?;
    let prs = field(e, at, 20, 32)?;
    let last_w = load(e, pw, 64)?;
    let last_r = load(e, pr, 64)?;
    let site_w = load(e, pws, 32)?;
    let site_r = load(e, prs, 32)?;

    // The thread's key: generation and block epoch (bits 27-63), warp
    // epoch, accessor, bytes.
    let generation = e.b.load(u32t, None, r.generation, None, []).map_err(internal1)?;
    let epoch = e.b.load(u32t, None, r.epoch, None, []).map_err(internal1)?;
    let wep = e.b.load(u32t, None, r.warp_epoch, None, []).map_err(internal1)?;
    let epoch = and_c(e, epoch, 0xffff)?;
    let wep = and_c(e, wep, 0x7ff)?;
    let one = e.c_u32(1);
    let me_acc = e.b.i_add(u32t, None, tid, one).map_err(internal1)?;
    let g64 = e.b.u_convert(u64t, None, generation).map_err(internal1)?;
    let g64 = shl64(e, g64, 43)?;
    let ep64 = e.b.u_convert(u64t, None, epoch).map_err(internal1)?;
    let ep64 = shl64(e, ep64, 27)?;
    let key = e.b.bitwise_or(u64t, None, g64, ep64).map_err(internal1)?;
    let low = pack_low(e, wep, me_acc, mask)?;
    let me = e.b.bitwise_or(u64t, None, key, low).map_err(internal1)?;
    let warp = shr(e, 32, tid, 5)?;

    let hit_w = conflict(e, last_w, key, mask, me_acc, warp, wep)?;
    let hit_r = conflict(e, last_r, key, mask, me_acc, warp, wep)?;

    // The new last read(s) (used when this access reads).
    let r_lo = e.b.u_convert(u32t, None, last_r).map_err(internal1)?;
    let r_key = shr(e, 64, last_r, 27)?;
    let k27 = shr(e, 64, key, 27)?;
    let same_key = e.b.i_equal(bt, None, r_key, k27).map_err(internal1)?;
    let r_acc = shr(e, 32, r_lo, 4)?;
    let r_acc = and_c(e, r_acc, 0xfff)?;
    let r_wep = shr(e, 32, r_lo, 16)?;
    let r_wep = and_c(e, r_wep, 0x7ff)?;
    let r_mask = and_c(e, r_lo, 0xf)?;
    let empty = e.b.i_equal(bt, None, r_acc, zero).map_err(internal1)?;
    let fresh = e.b.logical_not(bt, None, same_key).map_err(internal1)?;
    let fresh = e.b.logical_or(bt, None, fresh, empty).map_err(internal1)?;
    let same_thread = e.b.i_equal(bt, None, r_acc, me_acc).map_err(internal1)?;
    let r_warp = accessor_warp(e, r_acc)?;
    let many = e.c_u32(fault::RACE_MANY_READERS);
    let cross = e.b.i_equal(bt, None, r_acc, many).map_err(internal1)?;
    let same_warp = e.b.i_equal(bt, None, r_warp, warp).map_err(internal1)?;
    let not_cross = e.b.logical_not(bt, None, cross).map_err(internal1)?;
    let same_warp = e.b.logical_and(bt, None, same_warp, not_cross).map_err(internal1)?;
    let same_wep = e.b.i_equal(bt, None, r_wep, wep).map_err(internal1)?;
    let union = e.b.bitwise_or(u32t, None, r_mask, mask).map_err(internal1)?;
    // Readers of one warp in one warp epoch: the warp's marker; an older
    // warp epoch of the same warp is ordered before this read: this read alone.
    let warp_marker = e.c_u32(fault::RACE_WARP_READERS);
    let warp_acc = e.b.bitwise_or(u32t, None, warp_marker, warp).map_err(internal1)?;
    let joined_warp = pack_low(e, wep, warp_acc, union)?;
    let joined_many = pack_low(e, wep, many, union)?;
    let mine_union = pack_low(e, wep, me_acc, union)?;
    let mine = pack_low(e, wep, me_acc, mask)?;
    let with_key = |e: &mut Emitter, low: Word| e.b.bitwise_or(u64t, None, key, low).map_err(internal1);
    let joined_warp = with_key(e, joined_warp)?;
    let joined_many = with_key(e, joined_many)?;
    let mine_union = with_key(e, mine_union)?;
    let mine = with_key(e, mine)?;
    let in_warp = e.b.select(u64t, None, same_wep, joined_warp, mine).map_err(internal1)?;
    let other = e.b.select(u64t, None, same_warp, in_warp, joined_many).map_err(internal1)?;
    let other = e.b.select(u64t, None, same_thread, mine_union, other).map_err(internal1)?;
    let new_r = e.b.select(u64t, None, fresh, me, other).map_err(internal1)?;

    // Store: a write replaces the last write, a read the last read(s).
    let w_val = e.b.select(u64t, None, write, me, last_w).map_err(internal1)?;
    let r_val = e.b.select(u64t, None, write, last_r, new_r).map_err(internal1)?;
    let ws_val = e.b.select(u32t, None, write, site, site_w).map_err(internal1)?;
    let rs_val = e.b.select(u32t, None, write, site_r, site).map_err(internal1)?;
    store(e, pw, w_val, 64)?;
    store(e, pr, r_val, 64)?;
    store(e, pws, ws_val, 32)?;
    store(e, prs, rs_val, 32)?;

    // The hazard: a read after another thread's write; a write after
    // another thread's read, or write.
    let w_or_r = e.b.logical_or(bt, None, hit_w, hit_r).map_err(internal1)?;
    let hazard = e.b.select(bt, None, write, w_or_r, hit_w).map_err(internal1)?;
    let raw = e.c_u32(fault::KIND_RACE_RAW);
    let war = e.c_u32(fault::KIND_RACE_WAR);
    let waw = e.c_u32(fault::KIND_RACE_WAW);
    let wk = e.b.select(u32t, None, hit_w, waw, war).map_err(internal1)?;
    let kind = e.b.select(u32t, None, write, wk, raw).map_err(internal1)?;
    let from_read = e.b.i_equal(bt, None, kind, war).map_err(internal1)?;
    let prior = e.b.select(u64t, None, from_read, last_r, last_w).map_err(internal1)?;
    let prior_site = e.b.select(u32t, None, from_read, site_r, site_w).map_err(internal1)?;
    let prior_lo = e.b.u_convert(u32t, None, prior).map_err(internal1)?;
    let prior_acc = shr(e, 32, prior_lo, 4)?;
    let prior_acc = and_c(e, prior_acc, 0xfff)?;
    // Packed: byte offset (bits 0-19), earlier accessor (20-31), earlier site (32-63).
    let (c2, c20, c28) = (e.c_u32(2), e.c_u32(20), e.c_u32(28));
    let byte = e.b.shift_left_logical(u32t, None, word, c2).map_err(internal1)?;
    let byte = and_c(e, byte, 0xf_ffff)?;
    let acc_hi = e.b.shift_left_logical(u32t, None, prior_acc, c20).map_err(internal1)?;
    let lo = e.b.bitwise_or(u32t, None, byte, acc_hi).map_err(internal1)?;
    let info = e.make_u64(lo, prior_site)?;
    // Keep the first hazard.
    let old = e.b.load(u32t, None, r.code, None, []).map_err(internal1)?;
    let clean = e.b.i_equal(bt, None, old, zero).map_err(internal1)?;
    let first = e.b.logical_and(bt, None, clean, hazard).map_err(internal1)?;
    let k28 = e.b.shift_left_logical(u32t, None, kind, c28).map_err(internal1)?;
    let s1 = e.b.i_add(u32t, None, site, one).map_err(internal1)?;
    let code = e.b.bitwise_or(u32t, None, k28, s1).map_err(internal1)?;
    let code = e.b.select(u32t, None, first, code, old).map_err(internal1)?;
    e.b.store(r.code, code, None, []).map_err(internal1)?;
    let old_info = e.b.load(u64t, None, r.info, None, []).map_err(internal1)?;
    let info = e.b.select(u64t, None, first, info, old_info).map_err(internal1)?;
    e.b.store(r.info, info, None, []).map_err(internal1)?;
    e.b.ret().map_err(internal1)?;
    e.b.end_function().map_err(internal1)
}

/// Whether shadow entry `x` conflicts with this thread's access: the same
/// generation and block epoch (`key`), overlapping bytes, another accessor,
/// and not ordered by a warp barrier (same warp, other warp epoch).
fn conflict(
    e: &mut Emitter,
    x: Word,
    key: Word,
    mask: Word,
    me: Word,
    warp: Word,
    wep: Word,
) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let xk = shr(e, 64, x, 27)?;
    let k = shr(e, 64, key, 27)?;
    let same_key = e.b.i_equal(bt, None, xk, k).map_err(internal1)?;
    let lo = e.b.u_convert(u32t, None, x).map_err(internal1)?;
    let xm = and_c(e, lo, 0xf)?;
    let both = e.b.bitwise_and(u32t, None, xm, mask).map_err(internal1)?;
    let zero = e.c_u32(0);
    let overlap = e.b.i_not_equal(bt, None, both, zero).map_err(internal1)?;
    let acc = shr(e, 32, lo, 4)?;
    let acc = and_c(e, acc, 0xfff)?;
    let used = e.b.i_not_equal(bt, None, acc, zero).map_err(internal1)?;
    let other = e.b.i_not_equal(bt, None, acc, me).map_err(internal1)?;
    let many = e.c_u32(fault::RACE_MANY_READERS);
    let cross = e.b.i_equal(bt, None, acc, many).map_err(internal1)?;
    let xw = accessor_warp(e, acc)?;
    let same_warp = e.b.i_equal(bt, None, xw, warp).map_err(internal1)?;
    let xwep = shr(e, 32, lo, 16)?;
    let xwep = and_c(e, xwep, 0x7ff)?;
    let other_wep = e.b.i_not_equal(bt, None, xwep, wep).map_err(internal1)?;
    let ordered = e.b.logical_and(bt, None, same_warp, other_wep).map_err(internal1)?;
    let not_cross = e.b.logical_not(bt, None, cross).map_err(internal1)?;
    let ordered = e.b.logical_and(bt, None, ordered, not_cross).map_err(internal1)?;
    let unordered = e.b.logical_not(bt, None, ordered).map_err(internal1)?;
    let mut hit = e.b.logical_and(bt, None, same_key, overlap).map_err(internal1)?;
    for c in [used, other, unordered] {
        hit = e.b.logical_and(bt, None, hit, c).map_err(internal1)?;
    }
    Ok(hit)
}

/// The warp of an accessor field: `(tid + 1 - 1) / 32` for one thread, the
/// low bits of a warp's marker.
fn accessor_warp(e: &mut Emitter, acc: Word) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let marker = e.c_u32(fault::RACE_WARP_READERS);
    let is_marker = e.b.u_greater_than_equal(bt, None, acc, marker).map_err(internal1)?;
    let one = e.c_u32(1);
    let t = e.b.i_sub(u32t, None, acc, one).map_err(internal1)?;
    let single = shr(e, 32, t, 5)?;
    let group = and_c(e, acc, 0x7ff)?;
    e.b.select(u32t, None, is_marker, group, single).map_err(internal1)
}

/// The low 27 bits of an entry: warp epoch, accessor, bytes (as u64).
fn pack_low(e: &mut Emitter, wep: Word, acc: Word, mask: Word) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let (c16, c4) = (e.c_u32(16), e.c_u32(4));
    let w = e.b.shift_left_logical(u32t, None, wep, c16).map_err(internal1)?;
    let a = e.b.shift_left_logical(u32t, None, acc, c4).map_err(internal1)?;
    let v = e.b.bitwise_or(u32t, None, w, a).map_err(internal1)?;
    let v = e.b.bitwise_or(u32t, None, v, mask).map_err(internal1)?;
    e.b.u_convert(u64t, None, v).map_err(internal1)
}

/// At an entry's return: record the thread's first hazard, if any.
pub(crate) fn flush(e: &mut Emitter, fx: &Fx) -> Result<(), Diagnostic> {
    let Some(r) = e.race else { return Ok(()) };
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let bt = e.t_bool();
    let code = e.b.load(u32t, None, r.code, None, []).map_err(internal1)?;
    let zero = e.c_u32(0);
    let mine = e.b.i_not_equal(bt, None, code, zero).map_err(internal1)?;
    when_mine(e, mine, &mut |e| {
        let info = e.b.load(u64t, None, r.info, None, []).map_err(internal1)?;
        let kind = shr(e, 32, code, 28)?;
        let site = and_c(e, code, 0x0fff_ffff)?;
        let one = e.c_u32(1);
        let site = e.b.i_sub(u32t, None, site, one).map_err(internal1)?;
        record_call(e, fx, kind, info, site)
    })
}

fn field(e: &mut Emitter, at: Word, off: u64, bits: u32) -> Result<Word, Diagnostic> {
    let a = offset(e, at, off)?;
    ptr(e, K::Int(bits), a)
}

fn load(e: &mut Emitter, p: Word, bits: u32) -> Result<Word, Diagnostic> {
    let t = e.t_int(bits);
    e.b.load(t, None, p, Some(MemoryAccess::ALIGNED), [SOp::LiteralBit32(bits / 8)]).map_err(internal1)
}

fn store(e: &mut Emitter, p: Word, v: Word, bits: u32) -> Result<(), Diagnostic> {
    e.b.store(p, v, Some(MemoryAccess::ALIGNED), [SOp::LiteralBit32(bits / 8)]).map_err(internal1)
}

fn and_c(e: &mut Emitter, v: Word, m: u32) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    let c = e.c_u32(m);
    e.b.bitwise_and(u32t, None, v, c).map_err(internal1)
}

/// `v >> n` (logical) on a `bits`-wide integer.
fn shr(e: &mut Emitter, bits: u32, v: Word, n: u32) -> Result<Word, Diagnostic> {
    let t = e.t_int(bits);
    let c = e.c_u32(n);
    e.b.shift_right_logical(t, None, v, c).map_err(internal1)
}

/// `v << n` on a u64.
fn shl64(e: &mut Emitter, v: Word, n: u32) -> Result<Word, Diagnostic> {
    let u64t = e.t_int(64);
    let c = e.c_u32(n);
    e.b.shift_left_logical(u64t, None, v, c).map_err(internal1)
}
