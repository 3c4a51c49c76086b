//! Fault checks: every user memory access tested before it happens
//! ([`crate::Options::fault_checks`], see [`crate::abi::fault`]).
//!
//! `ld`, `st`, `atom`, `red`, `cp.async`, `ldmatrix`/`stmatrix` and the
//! `wmma`/`mma` loads and stores go through [`guard`]: a `.global` (or
//! generic global) address must lie with all its bytes inside one range of
//! the context's range table, a `.shared` offset inside the block's shared
//! memory, a `.local` offset inside the thread's local words, and every
//! address must be aligned to the access size. An access that fails does
//! not happen (a load yields 0): the thread sets the module's trap word
//! ([`crate::abi::printf::TRAP_ILLEGAL_ADDRESS`] or
//! [`crate::abi::printf::TRAP_MISALIGNED`]) and appends a record to the
//! fault log, and the runtime fails the launch as CUDA does.
//!
//! The range table is searched without a loop (llvmpipe counts every loop
//! iteration of an invocation against one limit): [`crate::abi::fault`]'s
//! depth is a specialization constant, so each step of the binary search
//! beyond it folds away when the pipeline is made.
//!
//! The translator's own accesses (the printf FIFO, the heap's headers,
//! spilled shared memory, scratch, and the resume pass's records, whose
//! addresses are `%__ptxvk_rs_` registers) are not checked: they are correct
//! by construction and their buffers are not in the table.

use super::func::{internal1, Fx};
use super::inst::{ext, glsl};
use super::mem::{dispatch, AccessFn, Addr};
use super::values::K;
use super::Emitter;
use crate::abi::{self, fault};
use crate::diag::{Diagnostic, Span};
use rspirv::dr::Operand as SOp;
use rspirv::spirv::{self, MemoryAccess, StorageClass, Word};

pub(crate) use crate::abi::fault::Access;

/// Functions of the translator's own PTX (the emulated copy engine of
/// `shaders/tma.ptx`): their accesses are not checked.
const ENGINE_PREFIX: &str = "__ptxvk_";

/// What one checked access is, for its fault record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Site {
    /// Where in the PTX.
    pub span: Span,
    /// Read, write or atomic.
    pub access: Access,
    /// Bytes of the access (of each element of a vector).
    pub bytes: u32,
    /// Alignment the address must have (a vector's whole size for its
    /// first element).
    pub align: u32,
}

/// Run `body` at `a` when the access passes the checks; otherwise record the
/// fault and yield zero of kind `result`. Without
/// [`crate::Options::fault_checks`], `body` alone.
pub(crate) fn guard(
    e: &mut Emitter,
    fx: &Fx,
    a: Addr,
    site: Site,
    result: Option<K>,
    body: &mut AccessFn,
) -> Result<Option<Word>, Diagnostic> {
    if !e.opts.fault_checks || e.fault_offset.is_none() || fx.name.starts_with(ENGINE_PREFIX) || e.internal_access {
        return body(e, fx, a);
    }
    match a {
        Addr::Param(_) => body(e, fx, a),
        Addr::Generic(g) => {
            let with_local = site.access != Access::Atomic;
            dispatch(e, fx, g, result, with_local, &mut |e, fx, a| guard(e, fx, a, site, result, body))
        }
        Addr::Global(addr) => {
            let id = site_id(e, fx, site, fault::SPACE_GLOBAL);
            let (ok, kind) = check_global(e, addr, site)?;
            note(e, ok, kind, addr, id)?;
            // Without a branch (llvmpipe runs both sides of one, masked): a
            // failing access goes to the log's scratch bytes instead.
            let u64t = e.t_int(64);
            let log = fault_log(e)?;
            let scratch = offset(e, log, fault::SCRATCH)?;
            let safe = e.b.select(u64t, None, ok, addr, scratch).map_err(internal1)?;
            let v = body(e, fx, Addr::Global(safe))?;
            zero_unless(e, ok, result, v)
        }
        Addr::Shared(off) => {
            let limit = shared_limit(e, fx)?;
            let id = site_id(e, fx, site, fault::SPACE_SHARED);
            let (ok, kind) = check_offset(e, off, limit, site)?;
            let u64t = e.t_int(64);
            let at = e.b.u_convert(u64t, None, off).map_err(internal1)?;
            note(e, ok, kind, at, id)?;
            guarded(e, ok, result, &mut |e| {
                super::race::access(e, fx, off, site, id)?;
                body(e, fx, a)
            })
        }
        Addr::Local(off) => {
            let limit = e.c_u32(fx.local_total);
            let id = site_id(e, fx, site, fault::SPACE_LOCAL);
            let (ok, kind) = check_offset(e, off, limit, site)?;
            let u64t = e.t_int(64);
            let at = e.b.u_convert(u64t, None, off).map_err(internal1)?;
            note(e, ok, kind, at, id)?;
            if fx.local_var.is_none() || site.bytes > LOCAL_JUNK_BYTES {
                return guarded(e, ok, result, &mut |e| body(e, fx, a));
            }
            // Without a branch, as above: a failing access goes to the
            // spare words after the thread's local words. A branch per
            // access gave lavapipe two blocks per `.local` access (LLVM's
            // coroutine frame and register allocation grow faster than
            // the block count: `docs/llvmpipe-compile-time.md`).
            let u32t = e.t_int(32);
            let junk = e.c_u32(fx.local_total);
            let safe = e.b.select(u32t, None, ok, off, junk).map_err(internal1)?;
            let v = body(e, fx, Addr::Local(safe))?;
            zero_unless(e, ok, result, v)
        }
    }
}

/// Bytes of spare `.local` words after the thread's own when fault checks
/// are on: where a failing `.local` access goes (each element of a vector
/// access is checked on its own, 8 bytes at most, but a locked 16-byte
/// vector access through a generic address is checked whole). A failing
/// load that returns its value yields zero; one that writes registers
/// itself (that 16-byte access) reads the spare bytes, as a failing
/// global one reads the fault log's scratch bytes: the launch fails.
pub(crate) const LOCAL_JUNK_BYTES: u32 = 16;

/// The value of a checked access: `v` when the check passed, zero when it
/// failed (the access went to spare bytes instead).
fn zero_unless(e: &mut Emitter, ok: Word, result: Option<K>, v: Option<Word>) -> Result<Option<Word>, Diagnostic> {
    match (result, v) {
        (Some(k), Some(v)) => {
            let t = e.kty(k);
            let z = e.zero(k);
            Ok(Some(e.b.select(t, None, ok, v, z).map_err(internal1)?))
        }
        (None, _) => Ok(None),
        _ => Err(Diagnostic::error(Span::default(), "internal error: checked access without a value")),
    }
}

/// The record of a site, registered once per (span, space) and function.
fn site_id(e: &mut Emitter, fx: &Fx, site: Site, space: u32) -> u32 {
    let function = fx.name.to_string();
    let s = abi::fault::FaultSite {
        start: site.span.start,
        end: site.span.end,
        access: site.access,
        bytes: site.bytes,
        space,
        function,
        line: 0,
        column: 0,
        source: None,
    };
    // One site per instruction and space, also when a `.func` is emitted
    // once per entry (a map: modules have thousands of sites).
    let key = (s.start, s.end, space, s.function.clone());
    if let Some(&i) = e.fault_site_index.get(&key) {
        return i;
    }
    let i = e.fault_sites.len() as u32;
    e.fault_sites.push(s);
    e.fault_site_index.insert(key, i);
    i
}

/// `(ok, kind)`: whether `addr` passes, and the fault kind when it does not
/// ([`fault::KIND_MISALIGNED`] or [`fault::KIND_RANGE`]).
fn check_global(e: &mut Emitter, addr: Word, site: Site) -> Result<(Word, Word), Diagnostic> {
    let u64t = e.t_int(64);
    let bt = e.t_bool();
    let search = match e.fault_search {
        Some(f) => f,
        None => {
            let f = e.b.id();
            e.fault_search = Some(f);
            f
        }
    };
    let size = e.c_int(64, site.bytes as u64);
    let inside = e.b.function_call(bt, None, search, [addr, size]).map_err(internal1)?;
    let mask = e.c_int(64, site.align.max(1) as u64 - 1);
    let low = e.b.bitwise_and(u64t, None, addr, mask).map_err(internal1)?;
    let zero = e.c_int(64, 0);
    finish(e, inside, low, zero)
}

/// Emit the function the checked global accesses call (when one did):
/// `bool in_ranges(u64 addr, u64 size)`, whether `size` bytes at `addr` lie
/// inside one range of the table.
///
/// The function has no branch: each form of the search is computed and the
/// specialization constants of the table's depth select one, so the others
/// fold away when the pipeline is made. Lavapipe inlines the function at
/// every checked access before it folds anything: with the forms in the
/// arms of selections (55 blocks), the 2,318 checked global accesses of a
/// kernel of NVIDIA Warp's `test_fsai.py` gave NIR 127,000 blocks to inline
/// and fold, and creating its pipeline took 53.1 s (16.6 s now; 6.6 s
/// without the checks).
pub(crate) fn emit_search(e: &mut Emitter) -> Result<(), Diagnostic> {
    let Some(id) = e.fault_search else { return Ok(()) };
    let u64t = e.t_int(64);
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let fnty = e.ty(super::TyKey::Func(bt, vec![u64t, u64t]));
    e.b.begin_function(bt, Some(id), spirv::FunctionControl::NONE, fnty).map_err(internal1)?;
    let addr = e.b.function_parameter(u64t).map_err(internal1)?;
    let size = e.b.function_parameter(u64t).map_err(internal1)?;
    e.b.begin_block(None).map_err(internal1)?;
    let depth = spec_depth(e);
    // Small tables (the default checks' few memory blocks): the ranges of
    // the `Private` cache at constant indices, so that the loads are the
    // same for every invocation (llvmpipe then loads once, not once per
    // lane). Larger ones (the memcheck's allocations): a binary search of
    // the table.
    let (linear, count) = linear_consts(e, depth);
    // Up to two ranges: each in turn.
    let mut few_inside = e.c_bool(false);
    for k in 0..2 {
        let (base, end) = cached_range(e, k)?;
        let hit = holds(e, base, end, addr, size)?;
        few_inside = e.b.logical_or(bt, None, few_inside, hit).map_err(internal1)?;
    }
    // More: a search over the cache's eight entries (padded), three
    // comparisons and selections instead of a test per range (the cost of
    // compiling the checks grows with the tests per access).
    let mut bases = Vec::new();
    let mut ends = Vec::new();
    for k in 0..1u32 << LINEAR_DEPTH {
        let (b, en) = cached_range(e, k)?;
        bases.push(b);
        ends.push(en);
    }
    // The last range whose base is at or below `addr`: index bits c4, c2, c1.
    let c4 = e.b.u_less_than_equal(bt, None, bases[4], addr).map_err(internal1)?;
    let m2 = e.b.select(u64t, None, c4, bases[6], bases[2]).map_err(internal1)?;
    let c2 = e.b.u_less_than_equal(bt, None, m2, addr).map_err(internal1)?;
    let hi = e.b.select(u64t, None, c2, bases[7], bases[5]).map_err(internal1)?;
    let lo = e.b.select(u64t, None, c2, bases[3], bases[1]).map_err(internal1)?;
    let m1 = e.b.select(u64t, None, c4, hi, lo).map_err(internal1)?;
    let c1 = e.b.u_less_than_equal(bt, None, m1, addr).map_err(internal1)?;
    let pick = |e: &mut Emitter, v: &[Word]| -> Result<Word, Diagnostic> {
        let mut level: Vec<Word> = v.to_vec();
        for c in [c1, c2, c4] {
            let mut next = Vec::new();
            for pair in level.chunks(2) {
                next.push(e.b.select(u64t, None, c, pair[1], pair[0]).map_err(internal1)?);
            }
            level = next;
        }
        Ok(level[0])
    };
    let base = pick(e, &bases)?;
    let end = pick(e, &ends)?;
    let eight_inside = holds(e, base, end, addr, size)?;
    let two = e.c_u32(2);
    let few = e.b.spec_constant_op(bt, spirv::Op::ULessThanEqual, &[count, two]);
    let scan_inside = e.b.select(bt, None, few, few_inside, eight_inside).map_err(internal1)?;
    // Binary search for the last range whose base is at or below `addr`:
    // step k (half = 2^k) counts only when k < depth. Each step's index is
    // clamped to the table's last range, so that the loads of the steps
    // that do not count (and of the whole search, for a small table) read
    // inside it until they fold away (the runtime's table has `1 << depth`
    // ranges, depth at most `fault::MAX_DEPTH`). The table's address and
    // ranges are read here only, and only this form uses them: for small
    // tables the loads fold away with the form (llvmpipe would run each
    // lane by lane).
    let log = fault_log(e)?;
    let table = load_uniform_u64(e, log, fault::RANGES)?;
    let one = e.c_u32(1);
    let last = e.b.spec_constant_op(u32t, spirv::Op::ISub, &[count, one]);
    let mut i = e.c_u32(0);
    for k in (0..fault::MAX_DEPTH).rev() {
        let on = step_on(e, k, depth);
        let half = e.c_u32(1 << k);
        let j = e.b.i_add(u32t, None, i, half).map_err(internal1)?;
        let j = ext(e, u32t, glsl::UMIN, &[j, last])?;
        let j64 = e.b.u_convert(u64t, None, j).map_err(internal1)?;
        let base = entry(e, table, j64, 0)?;
        let le = e.b.u_less_than_equal(bt, None, base, addr).map_err(internal1)?;
        let taken = e.b.logical_and(bt, None, on, le).map_err(internal1)?;
        i = e.b.select(u32t, None, taken, j, i).map_err(internal1)?;
    }
    let i64 = e.b.u_convert(u64t, None, i).map_err(internal1)?;
    let search_inside = range_holds(e, table, i64, addr, size)?;
    let inside = e.b.select(bt, None, linear, scan_inside, search_inside).map_err(internal1)?;
    e.b.ret_value(inside).map_err(internal1)?;
    e.b.end_function().map_err(internal1)
}

/// Range `k` of the `Private` cache: `(base, end)`.
fn cached_range(e: &mut Emitter, k: u32) -> Result<(Word, Word), Diagnostic> {
    let u64t = e.t_int(64);
    let pb = cache_word(e, 2 * k)?;
    let pe = cache_word(e, 2 * k + 1)?;
    let base = e.b.load(u64t, None, pb, None, []).map_err(internal1)?;
    let end = e.b.load(u64t, None, pe, None, []).map_err(internal1)?;
    Ok((base, end))
}

/// Whether range `i` of the table holds the `size` bytes at `addr`.
fn range_holds(e: &mut Emitter, table: Word, i: Word, addr: Word, size: Word) -> Result<Word, Diagnostic> {
    let base = entry(e, table, i, 0)?;
    let end = entry(e, table, i, 8)?;
    holds(e, base, end, addr, size)
}

/// Whether `[base, end)` holds the `size` bytes at `addr`.
fn holds(e: &mut Emitter, base: Word, end: Word, addr: Word, size: Word) -> Result<Word, Diagnostic> {
    let u64t = e.t_int(64);
    let bt = e.t_bool();
    let above = e.b.u_less_than_equal(bt, None, base, addr).map_err(internal1)?;
    let below = e.b.u_less_than(bt, None, addr, end).map_err(internal1)?;
    let room = e.b.i_sub(u64t, None, end, addr).map_err(internal1)?;
    let fits = e.b.u_less_than_equal(bt, None, size, room).map_err(internal1)?;
    let inside = e.b.logical_and(bt, None, above, below).map_err(internal1)?;
    e.b.logical_and(bt, None, inside, fits).map_err(internal1)
}

/// Tables of up to `2^LINEAR_DEPTH` ranges are scanned, larger ones searched.
const LINEAR_DEPTH: u32 = 3;

/// `(ok, kind)` for a byte offset in a space of `limit` bytes.
fn check_offset(e: &mut Emitter, off: Word, limit: Word, site: Site) -> Result<(Word, Word), Diagnostic> {
    let u32t = e.t_int(32);
    let bt = e.t_bool();
    let size = e.c_u32(site.bytes);
    let below = e.b.u_less_than(bt, None, off, limit).map_err(internal1)?;
    let room = e.b.i_sub(u32t, None, limit, off).map_err(internal1)?;
    let fits = e.b.u_less_than_equal(bt, None, size, room).map_err(internal1)?;
    let inside = e.b.logical_and(bt, None, below, fits).map_err(internal1)?;
    let mask = e.c_u32(site.align.max(1) - 1);
    let low = e.b.bitwise_and(u32t, None, off, mask).map_err(internal1)?;
    let zero = e.c_u32(0);
    finish(e, inside, low, zero)
}

/// Combine the range test and the alignment bits (`low`, 0 when aligned).
fn finish(e: &mut Emitter, inside: Word, low: Word, zero: Word) -> Result<(Word, Word), Diagnostic> {
    let bt = e.t_bool();
    let u32t = e.t_int(32);
    let aligned = e.b.i_equal(bt, None, low, zero).map_err(internal1)?;
    let ok = e.b.logical_and(bt, None, inside, aligned).map_err(internal1)?;
    let mis = e.c_u32(fault::KIND_MISALIGNED);
    let range = e.c_u32(fault::KIND_RANGE);
    // A misaligned address is reported as such (NVIDIA's order).
    let kind = e.b.select(u32t, None, aligned, range, mis).map_err(internal1)?;
    Ok((ok, kind))
}

/// Bytes of the block's shared memory: the Workgroup array, or with a
/// spill area its hot part and the workgroup's slot.
pub(crate) fn shared_limit(e: &mut Emitter, fx: &Fx) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    let words = if fx.shared_wide { e.spec_shared_wide_words } else { e.spec_shared_words };
    let per = e.c_u32(if fx.shared_wide { 8 } else { 4 });
    let array = e.b.i_mul(u32t, None, words, per).map_err(internal1)?;
    let Some(s) = e.spill.filter(|_| fx.shared_var.is_some()) else {
        return Ok(array);
    };
    let spilled = e.b.i_add(u32t, None, s.hot_bytes, s.stride).map_err(internal1)?;
    e.b.select(u32t, None, s.on, spilled, array).map_err(internal1)
}

/// `if (ok) body()`, the result of `body` or zero.
fn guarded(
    e: &mut Emitter,
    ok: Word,
    result: Option<K>,
    body: &mut dyn FnMut(&mut Emitter) -> Result<Option<Word>, Diagnostic>,
) -> Result<Option<Word>, Diagnostic> {
    let yes = e.b.id();
    let merge = e.b.id();
    let before = e.current_label()?;
    e.b.selection_merge(merge, spirv::SelectionControl::NONE).map_err(internal1)?;
    e.b.branch_conditional(ok, yes, merge, []).map_err(internal1)?;
    e.b.begin_block(Some(yes)).map_err(internal1)?;
    let v = body(e)?;
    let end = e.current_label()?;
    e.b.branch(merge).map_err(internal1)?;
    e.b.begin_block(Some(merge)).map_err(internal1)?;
    match (result, v) {
        (Some(k), Some(v)) => {
            let t = e.kty(k);
            let z = e.zero(k);
            Ok(Some(e.b.phi(t, None, [(v, end), (z, before)]).map_err(internal1)?))
        }
        (None, _) => Ok(None),
        _ => Err(Diagnostic::error(Span::default(), "internal error: checked access without a value")),
    }
}

/// Keeps the thread's first fault in its fault state (without a branch):
/// the site (plus one, and [`fault::KIND_MISALIGNED`] in bit 31) and the
/// address. [`flush`] reports it when the thread ends.
fn note(e: &mut Emitter, ok: Word, kind: Word, at: Word, site: u32) -> Result<(), Diagnostic> {
    let Some((site_var, at_var)) = e.fault_state else {
        return Err(Diagnostic::error(Span::default(), "internal error: no fault state"));
    };
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let bt = e.t_bool();
    let old = e.b.load(u32t, None, site_var, None, []).map_err(internal1)?;
    let zero = e.c_u32(0);
    let clean = e.b.i_equal(bt, None, old, zero).map_err(internal1)?;
    let bad = e.b.logical_not(bt, None, ok).map_err(internal1)?;
    let first = e.b.logical_and(bt, None, clean, bad).map_err(internal1)?;
    let mis = e.c_u32(fault::KIND_MISALIGNED);
    let is_mis = e.b.i_equal(bt, None, kind, mis).map_err(internal1)?;
    let code = e.c_u32(site + 1);
    let code_mis = e.c_u32((site + 1) | 1 << 31);
    let code = e.b.select(u32t, None, is_mis, code_mis, code).map_err(internal1)?;
    let new = e.b.select(u32t, None, first, code, old).map_err(internal1)?;
    e.b.store(site_var, new, None, []).map_err(internal1)?;
    let old_at = e.b.load(u64t, None, at_var, None, []).map_err(internal1)?;
    let new_at = e.b.select(u64t, None, first, at, old_at).map_err(internal1)?;
    e.b.store(at_var, new_at, None, []).map_err(internal1)
}

/// Creates the fault state variables (before the first entry: every
/// entry lists them in its interface).
pub(crate) fn declare_state(e: &mut Emitter) {
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let p32 = e.t_ptr(StorageClass::Private, u32t);
    let p64 = e.t_ptr(StorageClass::Private, u64t);
    let z32 = e.c_u32(0);
    let z64 = e.c_int(64, 0);
    let site = e.b.variable(p32, None, StorageClass::Private, Some(z32));
    let at = e.b.variable(p64, None, StorageClass::Private, Some(z64));
    e.fault_state = Some((site, at));
    e.fault_log_var = Some(e.b.variable(p64, None, StorageClass::Private, Some(z64)));
    let n = e.c_u32(2 << LINEAR_DEPTH);
    let arr = e.ty(super::TyKey::Array(u64t, n));
    let pa = e.t_ptr(StorageClass::Private, arr);
    // Padding ranges `[u64::MAX, 0)` (which hold nothing) beyond the
    // table's: the search over all entries then needs no bound.
    let max = e.c_int(64, u64::MAX);
    let pad: Vec<Word> = (0..2u32 << LINEAR_DEPTH).map(|i| if i % 2 == 0 { max } else { z64 }).collect();
    let init = e.b.constant_composite(arr, pad);
    e.fault_cache = Some(e.b.variable(pa, None, StorageClass::Private, Some(init)));
}

/// The `Private` copy of cached range word `w` (base of range k: 2k, end: 2k + 1).
fn cache_word(e: &mut Emitter, w: u32) -> Result<Word, Diagnostic> {
    let Some(cache) = e.fault_cache else {
        return Err(Diagnostic::error(Span::default(), "internal error: no fault range cache"));
    };
    let u64t = e.t_int(64);
    let p = e.t_ptr(StorageClass::Private, u64t);
    let i = e.c_u32(w);
    e.b.access_chain(p, None, cache, [i]).map_err(internal1)
}

/// At the start of an entry, where every invocation runs: copies a small
/// range table (see [`emit_search`]) into the thread's `Private` cache, so
/// that the accesses do not load it again (llvmpipe 22.3 loads a global
/// word lane by lane, also at an address the same for every lane; the
/// table's address goes through [`load_uniform_u64`], so that each lane's
/// load is a plain one).
///
/// It also keeps the fault log's address in a `Private` variable: every
/// checked global access needs it (a failing one goes to the log's scratch
/// bytes), and llvmpipe compiles a global load in divergent code as a loop
/// over the lanes, whose number makes a kernel's compile time grow with
/// their square.
pub(crate) fn load_cache(e: &mut Emitter) -> Result<(), Diagnostic> {
    if e.fault_cache.is_none() || e.fault_offset.is_none() {
        return Ok(());
    }
    if let Some(var) = e.fault_log_var {
        let log = load_fault_log(e)?;
        e.b.store(var, log, None, []).map_err(internal1)?;
    }
    let depth = spec_depth(e);
    let (linear, count) = linear_consts(e, depth);
    either_none(e, linear, &mut |e| {
        let log = fault_log(e)?;
        let table = load_uniform_u64(e, log, fault::RANGES)?;
        for k in 0..1u32 << LINEAR_DEPTH {
            let kc = e.c_u32(k);
            let bt = e.t_bool();
            let on = e.b.spec_constant_op(bt, spirv::Op::ULessThan, &[kc, count]);
            either_none(e, on, &mut |e| {
                let kk = e.c_int(64, k as u64);
                for f in 0..2u32 {
                    let v = entry(e, table, kk, 8 * f as u64)?;
                    let p = cache_word(e, 2 * k + f)?;
                    e.b.store(p, v, None, []).map_err(internal1)?;
                }
                Ok(())
            })?;
        }
        Ok(())
    })
}

/// Spec constant ops: whether the table is scanned (`depth <=
/// LINEAR_DEPTH`), and its ranges (`1 << depth`).
fn linear_consts(e: &mut Emitter, depth: Word) -> (Word, Word) {
    if let Some(c) = e.fault_linear {
        return c;
    }
    let bt = e.t_bool();
    let u32t = e.t_int(32);
    let linear_max = e.c_u32(LINEAR_DEPTH);
    let linear = e.b.spec_constant_op(bt, spirv::Op::ULessThanEqual, &[depth, linear_max]);
    let one = e.c_u32(1);
    let count = e.b.spec_constant_op(u32t, spirv::Op::ShiftLeftLogical, &[one, depth]);
    e.fault_linear = Some((linear, count));
    (linear, count)
}

/// `if (cond) arm()` through [`super::mem::either`].
fn either_none(
    e: &mut Emitter,
    cond: Word,
    arm: &mut dyn FnMut(&mut Emitter) -> Result<(), Diagnostic>,
) -> Result<(), Diagnostic> {
    super::mem::either(e, cond, None, "fault check", &mut |e, t| {
        if t {
            arm(e)?;
        }
        Ok(None)
    })?;
    Ok(())
}

/// At an entry's return: report the thread's first fault, if it had one.
pub(crate) fn flush(e: &mut Emitter, fx: &Fx) -> Result<(), Diagnostic> {
    let Some((site_var, at_var)) = e.fault_state else { return Ok(()) };
    if !e.opts.fault_checks || e.fault_offset.is_none() {
        return Ok(());
    }
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let bt = e.t_bool();
    let code = e.b.load(u32t, None, site_var, None, []).map_err(internal1)?;
    let zero = e.c_u32(0);
    let mine = e.b.i_not_equal(bt, None, code, zero).map_err(internal1)?;
    when_mine(e, mine, &mut |e| {
        let at = e.b.load(u64t, None, at_var, None, []).map_err(internal1)?;
        let top = e.c_u32(31);
        let mis = e.b.shift_right_logical(u32t, None, code, top).map_err(internal1)?;
        let one = e.c_u32(1);
        let kind = e.b.i_add(u32t, None, mis, one).map_err(internal1)?;
        let mask = e.c_u32(0x7fff_ffff);
        let site = e.b.bitwise_and(u32t, None, code, mask).map_err(internal1)?;
        let site = e.b.i_sub(u32t, None, site, one).map_err(internal1)?;
        record_call(e, fx, kind, at, site)
    })
}

/// `if (mine) body()`, behind a test the whole subgroup agrees on first
/// (`GroupNonUniformAny`), for compilers that branch over uniform
/// conditions and run divergent ones masked. (llvmpipe 22.3 runs both
/// masked: measured 2026-12-07 with unrolled loop copies behind such a
/// test, README "Benchmarks"; a masked store or atomic there is a loop over
/// the lanes that skips the inactive ones.)
pub(crate) fn when_mine(
    e: &mut Emitter,
    mine: Word,
    body: &mut dyn FnMut(&mut Emitter) -> Result<(), Diagnostic>,
) -> Result<(), Diagnostic> {
    let bt = e.t_bool();
    e.cap(rspirv::spirv::Capability::GroupNonUniformVote);
    let scope = e.c_u32(spirv::Scope::Subgroup as u32);
    let any = e.b.op(spirv::Op::GroupNonUniformAny, bt, None, &[scope, mine]).map_err(internal1)?;
    let outer = e.b.id();
    let outer_merge = e.b.id();
    e.b.selection_merge(outer_merge, spirv::SelectionControl::NONE).map_err(internal1)?;
    e.b.branch_conditional(any, outer, outer_merge, []).map_err(internal1)?;
    e.b.begin_block(Some(outer)).map_err(internal1)?;
    let yes = e.b.id();
    let merge = e.b.id();
    e.b.selection_merge(merge, spirv::SelectionControl::NONE).map_err(internal1)?;
    e.b.branch_conditional(mine, yes, merge, []).map_err(internal1)?;
    e.b.begin_block(Some(yes)).map_err(internal1)?;
    body(e)?;
    e.b.branch(merge).map_err(internal1)?;
    e.b.begin_block(Some(merge)).map_err(internal1)?;
    e.b.branch(outer_merge).map_err(internal1)?;
    e.b.begin_block(Some(outer_merge)).map_err(internal1)?;
    Ok(())
}

/// The fault path: a call of the record function (see [`emit_record`])
/// with what only the caller knows.
pub(crate) fn record_call(e: &mut Emitter, fx: &Fx, kind: Word, at: Word, site: Word) -> Result<(), Diagnostic> {
    let f = match e.fault_record {
        Some(f) => f,
        None => {
            let f = e.b.id();
            e.fault_record = Some(f);
            f
        }
    };
    let void = e.ty(super::TyKey::Void);
    let s = site;
    let [cx, cy, cz] = super::block_order::ctaid(e, fx)?;
    e.b.function_call(void, None, f, [kind, at, s, fx.linear, cx, cy, cz]).map_err(internal1)?;
    Ok(())
}

/// Emit the record function the fault paths call (when one did):
/// `void record(u32 kind, u64 at, u32 site, u32 linear, u32 ctaid.x,
/// .y, .z)`: sets the trap word and appends a record when it fits.
pub(crate) fn emit_record(e: &mut Emitter) -> Result<(), Diagnostic> {
    let Some(id) = e.fault_record else { return Ok(()) };
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let bt = e.t_bool();
    let void = e.ty(super::TyKey::Void);
    let fnty = e.ty(super::TyKey::Func(void, vec![u32t, u64t, u32t, u32t, u32t, u32t, u32t]));
    e.b.begin_function(void, Some(id), spirv::FunctionControl::NONE, fnty).map_err(internal1)?;
    let kind = e.b.function_parameter(u32t).map_err(internal1)?;
    let at = e.b.function_parameter(u64t).map_err(internal1)?;
    let site = e.b.function_parameter(u32t).map_err(internal1)?;
    let linear = e.b.function_parameter(u32t).map_err(internal1)?;
    let mut ctaid = [0; 3];
    for b in &mut ctaid {
        *b = e.b.function_parameter(u32t).map_err(internal1)?;
    }
    e.b.begin_block(None).map_err(internal1)?;
    let trap_bits = e.c_u32(abi::printf::TRAP_ILLEGAL_ADDRESS);
    let mis_bits = e.c_u32(abi::printf::TRAP_MISALIGNED);
    let mis = e.c_u32(fault::KIND_MISALIGNED);
    let is_mis = e.b.i_equal(bt, None, kind, mis).map_err(internal1)?;
    let bits = e.b.select(u32t, None, is_mis, mis_bits, trap_bits).map_err(internal1)?;
    // A hazard of the racecheck is reported without failing the launch.
    let race = e.c_u32(fault::KIND_RACE_RAW);
    let is_race = e.b.u_greater_than_equal(bt, None, kind, race).map_err(internal1)?;
    let none = e.c_u32(0);
    let bits = e.b.select(u32t, None, is_race, none, bits).map_err(internal1)?;
    super::func::or_trap_word(e, bits)?;
    let log = fault_log(e)?;
    let count_at = offset(e, log, fault::COUNT)?;
    let p = ptr(e, K::Int(32), count_at)?;
    let scope = e.c_u32(spirv::Scope::Device as u32);
    let sem = e.c_u32(0);
    let one = e.c_u32(1);
    let n = e.b.atomic_i_add(u32t, None, p, scope, sem, one).map_err(internal1)?;
    let cap_at = offset(e, log, fault::CAPACITY)?;
    let cp = ptr(e, K::Int(32), cap_at)?;
    let cap = e.b.load(u32t, None, cp, Some(MemoryAccess::ALIGNED), [SOp::LiteralBit32(4)]).map_err(internal1)?;
    let fits = e.b.u_less_than(bt, None, n, cap).map_err(internal1)?;
    let yes = e.b.id();
    let merge = e.b.id();
    e.b.selection_merge(merge, spirv::SelectionControl::NONE).map_err(internal1)?;
    e.b.branch_conditional(fits, yes, merge, []).map_err(internal1)?;
    e.b.begin_block(Some(yes)).map_err(internal1)?;
    let n64 = e.b.u_convert(u64t, None, n).map_err(internal1)?;
    let rb = e.c_int(64, fault::RECORD_BYTES);
    let rel = e.b.i_mul(u64t, None, n64, rb).map_err(internal1)?;
    let first = offset(e, log, fault::RECORDS)?;
    let rec = e.b.i_add(u64t, None, first, rel).map_err(internal1)?;
    let module =
        e.module_data_address()?.ok_or_else(|| Diagnostic::error(Span::default(), "internal error: no module data"))?;
    store_at(e, rec, fault::R_ADDRESS, at, K::Int(64))?;
    store_at(e, rec, fault::R_MODULE, module, K::Int(64))?;
    store_at(e, rec, fault::R_SITE, site, K::Int(32))?;
    store_at(e, rec, fault::R_KIND, kind, K::Int(32))?;
    let [nx, ny, _] = e.spec_ntid;
    let tx = e.b.u_mod(u32t, None, linear, nx).map_err(internal1)?;
    let q = e.b.u_div(u32t, None, linear, nx).map_err(internal1)?;
    let ty = e.b.u_mod(u32t, None, q, ny).map_err(internal1)?;
    let tz = e.b.u_div(u32t, None, q, ny).map_err(internal1)?;
    for (i, t) in [tx, ty, tz].into_iter().enumerate() {
        store_at(e, rec, fault::R_CTAID + 4 * i as u64, ctaid[i], K::Int(32))?;
        store_at(e, rec, fault::R_TID + 4 * i as u64, t, K::Int(32))?;
    }
    e.b.branch(merge).map_err(internal1)?;
    e.b.begin_block(Some(merge)).map_err(internal1)?;
    e.b.ret().map_err(internal1)?;
    e.b.end_function().map_err(internal1)
}

/// The fault log's device address, from its module data word.
pub(crate) fn fault_log(e: &mut Emitter) -> Result<Word, Diagnostic> {
    if let Some(var) = e.fault_log_var {
        let u64t = e.t_int(64);
        return e.b.load(u64t, None, var, None, []).map_err(internal1);
    }
    load_fault_log(e)
}

/// The fault log's address read from the module data (once per entry, see
/// [`load_cache`]).
fn load_fault_log(e: &mut Emitter) -> Result<Word, Diagnostic> {
    let (Some(base), Some(off)) = (e.module_data_address()?, e.fault_offset) else {
        return Err(Diagnostic::error(Span::default(), "internal error: fault log slot missing"));
    };
    load_uniform_u64(e, base, off)
}

fn spec_depth(e: &mut Emitter) -> Word {
    if let Some(d) = e.spec_fault_depth {
        return d;
    }
    let u32t = e.t_int(32);
    let d = e.b.spec_constant_bit32(u32t, 0);
    e.b.decorate(d, spirv::Decoration::SpecId, [SOp::LiteralBit32(abi::SPEC_FAULT_DEPTH)]);
    e.spec_fault_depth = Some(d);
    d
}

/// Spec constant op `k < depth`: whether step `k` of the search runs.
fn step_on(e: &mut Emitter, k: u32, depth: Word) -> Word {
    if let Some(&w) = e.fault_steps.get(k as usize) {
        return w;
    }
    let bt = e.t_bool();
    while e.fault_steps.len() <= k as usize {
        let kc = e.c_u32(e.fault_steps.len() as u32);
        let w = e.b.spec_constant_op(bt, spirv::Op::ULessThan, &[kc, depth]);
        e.fault_steps.push(w);
    }
    e.fault_steps[k as usize]
}

/// `base + off`.
pub(crate) fn offset(e: &mut Emitter, base: Word, off: u64) -> Result<Word, Diagnostic> {
    let u64t = e.t_int(64);
    let c = e.c_int(64, off);
    e.b.i_add(u64t, None, base, c).map_err(internal1)
}

pub(crate) fn ptr(e: &mut Emitter, k: K, addr: Word) -> Result<Word, Diagnostic> {
    let t = e.kty(k);
    let pt = e.t_ptr(StorageClass::PhysicalStorageBuffer, t);
    e.b.convert_u_to_ptr(pt, None, addr).map_err(internal1)
}

pub(crate) fn load_u64(e: &mut Emitter, base: Word, off: u64) -> Result<Word, Diagnostic> {
    load_at(e, base, off, K::Int(64))
}

/// [`load_u64`] of an address that is the same for every invocation (the
/// fault log's, its range table's, the printf FIFO's), through
/// [`Emitter::uniform_u64`]: llvmpipe loads it lane by lane, and where its
/// compiler does not see that the lanes' results are one value, every
/// load through the address takes the address apart lane by lane again
/// (measured: the checked saxpy of `ptxvk-bench twins`, 16M threads, 2.5x
/// faster with the hint on the log's and the table's addresses).
pub(crate) fn load_uniform_u64(e: &mut Emitter, base: Word, off: u64) -> Result<Word, Diagnostic> {
    let v = load_u64(e, base, off)?;
    e.uniform_u64(v)
}

/// A load of kind `k` (naturally aligned) from device address `base + off`
/// (the translator's own data: not checked).
pub(crate) fn load_at(e: &mut Emitter, base: Word, off: u64, k: K) -> Result<Word, Diagnostic> {
    let a = offset(e, base, off)?;
    let p = ptr(e, k, a)?;
    let t = e.kty(k);
    e.b.load(t, None, p, Some(MemoryAccess::ALIGNED), [SOp::LiteralBit32(k.bits() / 8)]).map_err(internal1)
}

fn store_at(e: &mut Emitter, base: Word, off: u64, v: Word, k: K) -> Result<(), Diagnostic> {
    let a = offset(e, base, off)?;
    let p = ptr(e, k, a)?;
    e.b.store(p, v, Some(MemoryAccess::ALIGNED), [SOp::LiteralBit32(k.bits() / 8)]).map_err(internal1)
}

/// Field at byte `field` of range `i` of the table at `table`.
fn entry(e: &mut Emitter, table: Word, i: Word, field: u64) -> Result<Word, Diagnostic> {
    let u64t = e.t_int(64);
    let sixteen = e.c_int(64, fault::RANGE_BYTES);
    let rel = e.b.i_mul(u64t, None, i, sixteen).map_err(internal1)?;
    let a = e.b.i_add(u64t, None, table, rel).map_err(internal1)?;
    load_u64(e, a, field)
}
