//! 16-byte vector accesses that order memory, seen whole by each other.
//!
//! PTX models a vector access as its elements' accesses in an unspecified
//! order, but NVIDIA's hardware performs an aligned 16-byte access as one
//! transaction, and real code depends on it: CUB's decoupled look-back scan
//! publishes each tile's `{status, value}` pair of 8-byte values with one
//! `st.relaxed.gpu.v2.u64` and polls it with `ld.relaxed.gpu.v2.u64`.
//! Ordering the elements is not enough: CUB rewrites a pair `{PARTIAL,
//! aggregate}` as `{INCLUSIVE, prefix}`, and a reader between the two
//! element stores saw `{PARTIAL, prefix}` (Warp's scans of `int64` vectors,
//! silently wrong). Vulkan has no 16-byte access, so every such access of a
//! module ([`needs_vector_lock`]: `.volatile`, `.relaxed`, `.acquire`,
//! `.release` or `.cv`, on a global or generic address) goes through one of
//! [`VECTOR_LOCKS`] slots in module data, chosen by the address:
//!
//! ```text
//! slot: u64 seq, u64 key, 16 bytes backup
//! seq:  bits 0-1 phase, bits 2-31 waiting readers, bits 32-63 writes
//! ```
//!
//! `seq` is a sequence lock. Phase 0: free; 1: a writer holds the slot and
//! copies the 16 bytes it is about to replace to `backup` (their address in
//! `key`); 2: the writer stores the new bytes; then phase 0 with one more
//! write. Every access of `seq` is a read-modify-write with acquire and
//! release semantics.
//!
//! A **store** takes the slot with a compare-and-swap from phase 0 with no
//! waiting reader, in a loop (writers wait for each other and for
//! readers). A **load** has no loop, so that a poll costs no iteration of
//! llvmpipe's loop budget (when it waited in a lock's loop, every poll of
//! CUB's 16-byte look-back was one of the invocation's 65,535 iterations,
//! and the wait for a block that a loaded machine's scheduler held back ran
//! out: Warp's `float64` scans failed at the loop limit in about half of the
//! runs beside one CPU-bound process). A *try* reads `seq`, the 16 bytes,
//! `key` and `backup`, and `seq` again, and holds when the writes seen
//! between the two reads leave a value that was in memory: none, or only
//! the start of a write (phase 0 to 1: the bytes are not touched before
//! phase 2), or only the end of a write (phase 2 to 0), or a writer staying
//! in phase 2; where a write of these bytes was in phase 2, the try yields
//! the backup (the bytes before that write), otherwise the bytes. A writer
//! that the operating system holds back in the middle of its store delays
//! no reader. A load whose first try fails counts itself as waiting in
//! `seq` (no new writer takes the slot then), tries at most
//! [`READ_TRIES`]` - 1` more times (the writer in progress, if any, makes at
//! most two more steps, of which only the step from phase 1 to 2 spoils a
//! try, so the third try holds), and stops waiting. Should every try fail
//! all the same, the load sets [`crate::abi::printf::TRAP_VECTOR_READ`] and
//! the launch fails rather than use a torn value.
//!
//! Other 16-byte vectors (`.weak`, `.cg`, shared memory) are element by
//! element, as PTX defines them.

use super::fault::{guard, Access, Site};
use super::func::{internal1, Fx};
use super::grid::if_then;
use super::mem::{advance, dispatch, load, store, Addr};
use super::values::K;
use super::Emitter;
use crate::ast::Instruction;
use crate::diag::{Diagnostic, Span};
use rspirv::spirv::{self, Scope, StorageClass, Word};

/// Slots of the table (a power of two).
pub(crate) const VECTOR_LOCKS: u64 = 1024;
/// Bytes of a slot: `seq`, `key`, `backup`.
pub(crate) const SLOT_BYTES: u64 = 32;
/// Byte offset of `key` in a slot.
const KEY: u32 = 8;
/// Byte offset of `backup` in a slot.
const BACKUP: u32 = 16;
/// Tries of a load before it gives up (see the module documentation).
pub(crate) const READ_TRIES: u32 = crate::abi::printf::VECTOR_READ_TRIES;

/// Whether `inst` is a 16-byte `ld`/`st` that orders memory on a global or
/// generic address (see the module documentation).
pub(crate) fn needs_vector_lock(inst: &Instruction) -> bool {
    let vector = inst.modifiers.iter().find_map(|m| match m.as_str() {
        "v2" => Some(2),
        "v4" => Some(4),
        "v8" => Some(8),
        _ => None,
    });
    let size = super::inst::last_type(inst).ok().map(|t| t.size());
    matches!(inst.opcode.as_str(), "ld" | "ldu" | "st")
        && matches!((vector, size), (Some(n), Some(s)) if n * s == 16)
        && super::mem::orders_memory(inst)
        && !inst.modifiers.iter().any(|m| matches!(m.as_str(), "shared" | "local" | "param" | "const"))
}

/// Whether `inst` waits in a loop of its own (a locked store; loads do not).
pub(crate) fn has_loop(inst: &Instruction) -> bool {
    inst.opcode == "st" && needs_vector_lock(inst)
}

/// One 16-byte access: its elements, and what each element does.
struct Vector<'v> {
    span: Span,
    /// The address the program gave (before a fault check redirects it):
    /// it picks the slot and is the `key` of a backup.
    key: Word,
    /// The device address of the slot.
    slot: Word,
    /// The kind of every element.
    k: K,
    /// Bytes of an element.
    size: u32,
    /// What the access does with its elements.
    dir: Dir<'v>,
}

/// A load (a function variable per element, `None` for a sink) or a store
/// (the value of each element).
#[derive(Clone, Copy)]
enum Dir<'v> {
    Load(&'v [Option<Word>]),
    Store(&'v [Word]),
}

/// The slot of the address `addr` (a u64 value).
fn slot_of(e: &mut Emitter, addr: Word, span: Span) -> Result<Word, Diagnostic> {
    let (Some(base), Some(table)) = (e.module_data_address()?, e.vector_lock_offset) else {
        return Err(Diagnostic::error(span, "internal error: no lock table for a 16-byte vector access"));
    };
    let u64t = e.t_int(64);
    let four = e.c_int(64, 4);
    let index = e.b.shift_right_logical(u64t, None, addr, four).map_err(internal1)?;
    let mask = e.c_int(64, VECTOR_LOCKS - 1);
    let index = e.b.bitwise_and(u64t, None, index, mask).map_err(internal1)?;
    let five = e.c_int(64, SLOT_BYTES.trailing_zeros().into());
    let off = e.b.shift_left_logical(u64t, None, index, five).map_err(internal1)?;
    let table = e.c_int(64, table);
    let table = e.b.i_add(u64t, None, base, table).map_err(internal1)?;
    e.b.i_add(u64t, None, table, off).map_err(internal1)
}

/// The phase bits of `seq`.
const PHASE: u64 = 3;
/// One waiting reader in `seq`.
const READER: u64 = 4;
/// The waiting readers' bits of `seq`.
const READERS: u64 = 0xffff_fffc;
/// One write in `seq`.
const WRITE: u64 = 1 << 32;

/// A pointer to the slot's `seq`.
fn seq_ptr(e: &mut Emitter, slot: Word) -> Result<Word, Diagnostic> {
    let u64t = e.t_int(64);
    let pt = e.t_ptr(StorageClass::PhysicalStorageBuffer, u64t);
    e.b.convert_u_to_ptr(pt, None, slot).map_err(internal1)
}

/// `seq + add` (wrapping), atomically, with acquire and release semantics;
/// the old value.
fn seq_add(e: &mut Emitter, seq: Word, add: u64) -> Result<Word, Diagnostic> {
    e.cap(spirv::Capability::Int64Atomics);
    let u64t = e.t_int(64);
    let scope = e.c_u32(Scope::Device as u32);
    let sem = e.device_semantics(spirv::MemorySemantics::ACQUIRE_RELEASE);
    let v = e.c_int(64, add);
    e.b.atomic_i_add(u64t, None, seq, scope, sem, v).map_err(internal1)
}

/// A 16-byte load of `inst` at `a`: its elements into `vars` (function
/// variables of kind `k`, `None` for a sink), seen whole against every
/// other access of the table's (see the module documentation).
pub(crate) fn load_whole(
    e: &mut Emitter,
    fx: &Fx,
    inst: &Instruction,
    a: Addr,
    k: K,
    size: u32,
    vars: &[Option<Word>],
) -> Result<(), Diagnostic> {
    access(e, fx, inst, a, k, size, Dir::Load(vars))
}

/// A 16-byte store of `values` (of kind `k`) by `inst` at `a` (see the
/// module documentation).
pub(crate) fn store_whole(
    e: &mut Emitter,
    fx: &Fx,
    inst: &Instruction,
    a: Addr,
    k: K,
    size: u32,
    values: &[Word],
) -> Result<(), Diagnostic> {
    access(e, fx, inst, a, k, size, Dir::Store(values))
}

fn access(e: &mut Emitter, fx: &Fx, inst: &Instruction, a: Addr, k: K, size: u32, dir: Dir) -> Result<(), Diagnostic> {
    let (Addr::Global(key) | Addr::Generic(key)) = a else {
        return Err(Diagnostic::error(inst.span, "internal error: a locked vector access outside global memory"));
    };
    let slot = slot_of(e, key, inst.span)?;
    let v = Vector { span: inst.span, key, slot, k, size, dir };
    let access = if matches!(dir, Dir::Load(_)) { Access::Read } else { Access::Write };
    // One check of all 16 bytes (the fault record names a 16-byte access).
    let site = Site { span: inst.span, access, bytes: 16, align: 16 };
    guard(e, fx, a, site, None, &mut |e, fx, a| body(e, fx, &v, a).map(|_| None))?;
    Ok(())
}

/// The access at `a`, once the checks (if any) have passed.
fn body(e: &mut Emitter, fx: &Fx, v: &Vector, a: Addr) -> Result<(), Diagnostic> {
    match a {
        Addr::Generic(g) => {
            dispatch(e, fx, g, None, true, &mut |e, fx, a| body(e, fx, v, a).map(|_| None))?;
            Ok(())
        }
        Addr::Global(p) => match v.dir {
            Dir::Load(vars) => read(e, fx, v, vars, p),
            Dir::Store(values) => write(e, fx, v, values, p),
        },
        // Shared or local memory: no other block sees it; element by element.
        a => {
            for i in 0..element_count(v) {
                let ai = advance(e, a, i * v.size)?;
                match v.dir {
                    Dir::Load(vars) => {
                        if let Some(var) = vars[i as usize] {
                            let x = load(e, fx, ai, v.k, true)?;
                            e.b.store(var, x, None, []).map_err(internal1)?;
                        }
                    }
                    Dir::Store(values) => store(e, fx, ai, values[i as usize], v.k, true, v.span)?,
                }
            }
            Ok(())
        }
    }
}

fn element_count(v: &Vector) -> u32 {
    16 / v.size
}

/// The load at the device address `p` (see the module documentation): a
/// try; where it fails, the reader waits in `seq`, tries again at most
/// [`READ_TRIES`]` - 1` times, and stops waiting.
fn read(e: &mut Emitter, fx: &Fx, v: &Vector, vars: &[Option<Word>], p: Word) -> Result<(), Diagnostic> {
    let bt = e.t_bool();
    let done = super::warp::func_var(e, bt)?;
    let seq = seq_ptr(e, v.slot)?;
    read_try(e, fx, v, vars, p, seq, done)?;
    let failed = not_done(e, done)?;
    if_then(e, failed, |e| {
        seq_add(e, seq, READER)?;
        for t in 1..READ_TRIES {
            if t == 1 {
                read_try(e, fx, v, vars, p, seq, done)?;
            } else {
                let failed = not_done(e, done)?;
                if_then(e, failed, |e| read_try(e, fx, v, vars, p, seq, done))?;
            }
        }
        seq_add(e, seq, READER.wrapping_neg())?;
        Ok(())
    })?;
    let failed = not_done(e, done)?;
    if_then(e, failed, |e| super::func::set_trap_word(e, crate::abi::printf::TRAP_VECTOR_READ))
}

/// `!*done`.
fn not_done(e: &mut Emitter, done: Word) -> Result<Word, Diagnostic> {
    let bt = e.t_bool();
    let d = e.b.load(bt, None, done, None, []).map_err(internal1)?;
    e.b.logical_not(bt, None, d).map_err(internal1)
}

/// One try of [`read`]: the elements into `vars`, and whether the try
/// holds into `done`.
fn read_try(
    e: &mut Emitter,
    fx: &Fx,
    v: &Vector,
    vars: &[Option<Word>],
    p: Word,
    seq: Word,
    done: Word,
) -> Result<(), Diagnostic> {
    let bt = e.t_bool();
    let u64t = e.t_int(64);
    let before = seq_add(e, seq, 0)?;
    let n = element_count(v);
    let mut data = Vec::new();
    let mut backup = Vec::new();
    for i in 0..n {
        data.push(load_at(e, fx, p, i * v.size, v.k)?);
    }
    let key = load_at(e, fx, v.slot, KEY, K::Int(64))?;
    for i in 0..n {
        backup.push(load_at(e, fx, v.slot, BACKUP + i * v.size, v.k)?);
    }
    let after = seq_add(e, seq, 0)?;
    // The two reads without the waiting readers, and the phase of the first.
    let keep = e.c_int(64, !READERS);
    let m1 = e.b.bitwise_and(u64t, None, before, keep).map_err(internal1)?;
    let m2 = e.b.bitwise_and(u64t, None, after, keep).map_err(internal1)?;
    let phase_mask = e.c_int(64, PHASE);
    let phase = e.b.bitwise_and(u64t, None, m1, phase_mask).map_err(internal1)?;
    let c0 = e.c_int(64, 0);
    let c2 = e.c_int(64, 2);
    let free = e.b.i_equal(bt, None, phase, c0).map_err(internal1)?;
    let storing = e.b.i_equal(bt, None, phase, c2).map_err(internal1)?;
    // Nothing moved; or phase 0 to 1; or phase 2 to the next write's 0.
    let same = e.b.i_equal(bt, None, m1, m2).map_err(internal1)?;
    let one = e.c_int(64, 1);
    let taken = e.b.i_add(u64t, None, m1, one).map_err(internal1)?;
    let began = e.b.i_equal(bt, None, m2, taken).map_err(internal1)?;
    let began = e.b.logical_and(bt, None, free, began).map_err(internal1)?;
    let step = e.c_int(64, WRITE.wrapping_sub(2));
    let next = e.b.i_add(u64t, None, m1, step).map_err(internal1)?;
    let ended = e.b.i_equal(bt, None, m2, next).map_err(internal1)?;
    let ended = e.b.logical_and(bt, None, storing, ended).map_err(internal1)?;
    let held = e.b.logical_or(bt, None, same, began).map_err(internal1)?;
    let held = e.b.logical_or(bt, None, held, ended).map_err(internal1)?;
    // A write of these bytes in phase 2: its backup.
    let here = e.b.i_equal(bt, None, key, v.key).map_err(internal1)?;
    let from_backup = e.b.logical_and(bt, None, storing, here).map_err(internal1)?;
    let t = e.kty(v.k);
    for i in 0..n as usize {
        if let Some(var) = vars[i] {
            let x = e.b.select(t, None, from_backup, backup[i], data[i]).map_err(internal1)?;
            e.b.store(var, x, None, []).map_err(internal1)?;
        }
    }
    e.b.store(done, held, None, []).map_err(internal1)
}

/// The store at the device address `p` (see the module documentation):
/// take the slot (phase 0, no waiting reader, to phase 1), keep the old
/// bytes in the backup, announce the store (phase 2), store, release (the
/// next write's phase 0).
fn write(e: &mut Emitter, fx: &Fx, v: &Vector, values: &[Word], p: Word) -> Result<(), Diagnostic> {
    use spirv::MemorySemantics as M;
    let bt = e.t_bool();
    let u64t = e.t_int(64);
    let seq = seq_ptr(e, v.slot)?;
    let scope = e.c_u32(Scope::Device as u32);
    let acquire = e.device_semantics(M::ACQUIRE);
    let relaxed = e.c_u32(0);
    let n = element_count(v);
    super::mem::retry_loop(e, |e| {
        let now = seq_add(e, seq, 0)?;
        let writes = e.c_int(64, !(PHASE | READERS));
        let free = e.b.bitwise_and(u64t, None, now, writes).map_err(internal1)?;
        let one = e.c_int(64, 1);
        let taken = e.b.i_add(u64t, None, free, one).map_err(internal1)?;
        let old =
            e.b.atomic_compare_exchange(u64t, None, seq, scope, acquire, relaxed, taken, free).map_err(internal1)?;
        let got = e.b.i_equal(bt, None, old, free).map_err(internal1)?;
        if_then(e, got, |e| {
            store_at(e, fx, v.slot, KEY, v.key, K::Int(64))?;
            for i in 0..n {
                let old = load_at(e, fx, p, i * v.size, v.k)?;
                store_at(e, fx, v.slot, BACKUP + i * v.size, old, v.k)?;
            }
            seq_add(e, seq, 1)?;
            for i in 0..n {
                store_at(e, fx, p, i * v.size, values[i as usize], v.k)?;
            }
            seq_add(e, seq, WRITE.wrapping_sub(2))?;
            Ok(())
        })?;
        Ok(got)
    })
}

/// A volatile load of kind `k` at device address `base + off`.
fn load_at(e: &mut Emitter, fx: &Fx, base: Word, off: u32, k: K) -> Result<Word, Diagnostic> {
    let a = advance(e, Addr::Global(base), off)?;
    load(e, fx, a, k, true)
}

/// A volatile store of `v` (kind `k`) at device address `base + off`.
fn store_at(e: &mut Emitter, fx: &Fx, base: Word, off: u32, v: Word, k: K) -> Result<(), Diagnostic> {
    let a = advance(e, Addr::Global(base), off)?;
    store(e, fx, a, v, k, true, Span::default())
}
