//! `vprintf` and `__assertfail`: calls of these undefined functions (what
//! nvcc and NVVM make of `printf` and `assert`) append a record to the printf
//! FIFO; see [`crate::abi::printf`] for the layout.

use super::func::{internal1, trap_now, Fx};
use super::mem::{load, load_local_word, store, Addr};
use super::printf_sites::Args;
use super::values::K;
use super::Emitter;
use crate::abi::printf as pf;
use crate::ast::{Instruction, Operand};
use crate::diag::{Diagnostic, Span};
use rspirv::dr::Operand as SOp;
use rspirv::spirv::{self, MemoryAccess, Word};

/// The name nvcc gives the printf system call.
pub(crate) const VPRINTF: &str = "vprintf";
/// The name nvcc gives the assert system call.
pub(crate) const ASSERTFAIL: &str = "__assertfail";

/// A `.param` argument of `size` bytes (1 or 2 words) as an integer.
fn param_arg(e: &mut Emitter, fx: &Fx, args: &[Operand], i: usize, span: Span) -> Result<(Word, u32), Diagnostic> {
    let Some(arg) = args.get(i) else {
        return Err(Diagnostic::error(span, format!("system call: argument {} missing", i + 1)));
    };
    let base = super::call::param_var_offset(fx, arg)? / 4;
    let size = match arg {
        Operand::Name { name, .. } => fx.local.get(name.as_str()).map(|p| p.size).unwrap_or(8),
        _ => 8,
    };
    let lo = load_local_word(e, fx, base)?;
    if size <= 4 {
        return Ok((lo, 32));
    }
    let hi = load_local_word(e, fx, base + 1)?;
    Ok((e.make_u64(lo, hi)?, 64))
}

fn as_u64(e: &mut Emitter, (v, bits): (Word, u32)) -> Result<Word, Diagnostic> {
    if bits == 64 {
        return Ok(v);
    }
    let u64t = e.t_int(64);
    e.b.u_convert(u64t, None, v).map_err(internal1)
}

fn as_u32(e: &mut Emitter, (v, bits): (Word, u32)) -> Result<Word, Diagnostic> {
    if bits == 32 {
        return Ok(v);
    }
    let u32t = e.t_int(32);
    e.b.u_convert(u32t, None, v).map_err(internal1)
}

/// `a + c` on u64 values.
pub(crate) fn add64(e: &mut Emitter, a: Word, c: u64) -> Result<Word, Diagnostic> {
    let u64t = e.t_int(64);
    let k = e.c_int(64, c);
    e.b.i_add(u64t, None, a, k).map_err(internal1)
}

/// Creates the `Private` copies of the FIFO's address and capacity (before
/// the first entry: every entry lists them in its interface).
pub(crate) fn declare_fifo(e: &mut Emitter) {
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let p32 = e.t_ptr(spirv::StorageClass::Private, u32t);
    let p64 = e.t_ptr(spirv::StorageClass::Private, u64t);
    let z32 = e.c_u32(0);
    let z64 = e.c_int(64, 0);
    let fifo = e.b.variable(p64, None, spirv::StorageClass::Private, Some(z64));
    let cap = e.b.variable(p32, None, spirv::StorageClass::Private, Some(z32));
    e.printf_fifo_vars = Some((fifo, cap));
}

/// At the start of an entry, where every invocation runs: reads the FIFO's
/// address from its module data slot and its capacity from its header (the
/// runtime sets both before a launch and changes neither during one), so
/// that a `printf` does not load them (llvmpipe compiles a load in
/// divergent code as a loop over the lanes, and its compile time grows
/// with the square of their number). Without a FIFO (a zero slot) the
/// module data's own header of capacity 0 stands in for it.
pub(crate) fn load_fifo(e: &mut Emitter) -> Result<(), Diagnostic> {
    let Some((fifo_var, cap_var)) = e.printf_fifo_vars else {
        return Ok(());
    };
    let (Some(base), Some(slot)) = (e.module_data_address()?, e.printf_offset) else {
        return Err(Diagnostic::error(Span::default(), "internal error: printf FIFO slot missing"));
    };
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let bt = e.t_bool();
    let fifo = super::fault::load_uniform_u64(e, base, slot)?;
    let zero64 = e.c_int(64, 0);
    let have = e.b.i_not_equal(bt, None, fifo, zero64).map_err(internal1)?;
    let own = add64(e, base, slot + 8)?;
    let fifo = e.b.select(u64t, None, have, fifo, own).map_err(internal1)?;
    // The stand-in's capacity is 0 whatever its memory holds.
    let cap = super::fault::load_at(e, fifo, 4, K::Int(32))?;
    let zero = e.c_u32(0);
    let cap = e.b.select(u32t, None, have, cap, zero).map_err(internal1)?;
    e.b.store(fifo_var, fifo, None, []).map_err(internal1)?;
    e.b.store(cap_var, cap, None, []).map_err(internal1)
}

/// Store the 64-bit `values` (1 to 4) at 8-byte aligned device address
/// `addr` as one vector (a scalar for one).
fn store_u64s(e: &mut Emitter, addr: Word, values: &[Word]) -> Result<(), Diagnostic> {
    let u64t = e.t_int(64);
    let (t, v) = match values {
        [v] => (u64t, *v),
        _ => {
            let vt = e.ty(super::TyKey::Vec(u64t, values.len() as u32));
            let v = e.b.composite_construct(vt, None, values.iter().copied()).map_err(internal1)?;
            (vt, v)
        }
    };
    let pt = e.t_ptr(spirv::StorageClass::PhysicalStorageBuffer, t);
    let p = e.b.convert_u_to_ptr(pt, None, addr).map_err(internal1)?;
    e.b.store(p, v, Some(MemoryAccess::ALIGNED), [SOp::LiteralBit32(8)]).map_err(internal1)
}

/// The 32-bit `words` paired into u64s, the first of each pair low (an odd
/// count padded with a zero word, which a record's size covers).
fn pair_words(e: &mut Emitter, words: &[Word]) -> Result<Vec<Word>, Diagnostic> {
    let zero = e.c_u32(0);
    words.chunks(2).map(|p| e.make_u64(p[0], p.get(1).copied().unwrap_or(zero))).collect()
}

/// Store the u64 `values` of a record at `addr` (8-byte aligned), 32 bytes
/// to a store: llvmpipe compiles each store as a loop over the lanes, and a
/// kernel's compile time grows with the square of their number.
fn store_record(e: &mut Emitter, addr: Word, values: &[Word]) -> Result<(), Diagnostic> {
    for (k, chunk) in values.chunks(4).enumerate() {
        let at = add64(e, addr, 32 * k as u64)?;
        match chunk.len() {
            3 => {
                store_u64s(e, at, &chunk[..2])?;
                let at = add64(e, at, 16)?;
                store_u64s(e, at, &chunk[2..])?;
            }
            _ => store_u64s(e, at, chunk)?,
        }
    }
    Ok(())
}

/// Reserve `size` bytes (a u32 multiple of 8) in the FIFO: the address to
/// write the record at, in the record space when it fits there, otherwise
/// in the sink after it (no branch: llvmpipe's compile time grows with the
/// blocks of a kernel, and a kernel may have hundreds of `printf`s).
fn reserve(e: &mut Emitter, size: Word, span: Span) -> Result<Word, Diagnostic> {
    let Some((fifo_var, cap_var)) = e.printf_fifo_vars else {
        return Err(Diagnostic::error(span, "internal error: printf FIFO slot missing"));
    };
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let bt = e.t_bool();
    let fifo = e.b.load(u64t, None, fifo_var, None, []).map_err(internal1)?;
    let pt = e.t_ptr(spirv::StorageClass::PhysicalStorageBuffer, u32t);
    let used = e.b.convert_u_to_ptr(pt, None, fifo).map_err(internal1)?;
    let scope = e.c_u32(spirv::Scope::Device as u32);
    let sem = e.c_u32(0);
    let off = e.b.atomic_i_add(u32t, None, used, scope, sem, size).map_err(internal1)?;
    let cap = e.b.load(u32t, None, cap_var, None, []).map_err(internal1)?;
    // Fits when off <= cap and size <= cap - off (no overflow).
    let a = e.b.u_less_than_equal(bt, None, off, cap).map_err(internal1)?;
    let room = e.b.i_sub(u32t, None, cap, off).map_err(internal1)?;
    let b = e.b.u_less_than_equal(bt, None, size, room).map_err(internal1)?;
    let fits = e.b.logical_and(bt, None, a, b).map_err(internal1)?;
    let at = e.b.select(u32t, None, fits, off, cap).map_err(internal1)?;
    let at = e.b.u_convert(u64t, None, at).map_err(internal1)?;
    let rec = e.b.i_add(u64t, None, fifo, at).map_err(internal1)?;
    add64(e, rec, pf::HEADER_BYTES)
}

/// A record's header (size and kind, the string's address) as two u64s.
fn header(e: &mut Emitter, size: Word, kind: u32, string: Word) -> Result<Vec<Word>, Diagnostic> {
    let kind = e.c_u32(kind);
    Ok(vec![e.make_u64(size, kind)?, string])
}

/// What [`vprintf`] emits for a call, decided before any code.
struct Plan {
    site: super::printf_sites::Site,
    /// A string literal format (immutable): the argument bytes its
    /// conversions read, and their count.
    literal: Option<(u32, u32)>,
    /// The argument words copied from the local words at constant indices
    /// (the first word and the count), when their place is known.
    known: Option<(u32, u32)>,
}

fn plan(e: &Emitter, fx: &Fx, inst: &Instruction) -> Plan {
    let site = fx.printf_sites.of(inst);
    let literal: Option<(u32, u32)> = site
        .format
        .as_ref()
        .filter(|(name, _)| !fx.shared.contains_key(name))
        .and_then(|(name, off)| e.literals.get(name)?.get(usize::try_from(*off).ok()?..))
        .filter(|bytes| bytes.contains(&0))
        .map(|f| (pf::argument_bytes(f).min(pf::MAX_ARG_BYTES).div_ceil(4) * 4, pf::conversions(f)));
    let needed = literal.map_or(pf::MAX_ARG_BYTES, |(bytes, _)| bytes);
    // Argument bytes to copy: none for a null pointer, at most MAX_ARG_BYTES,
    // and no further than the end of the local words for a .local pointer.
    // A buffer at a known place in the frame (nvcc's: in its local depot) is
    // copied from the local words at constant indices, no further than the
    // end of its variable or what a literal format reads, when that is small.
    let known = match site.args {
        Args::Null => Some((0, 0)),
        Args::Local { offset: off, room } if fx.local_var.is_some() => (|| {
            let at = fx.local_base.checked_add(off)?;
            let n = fx.local_total.checked_sub(at)?.min(pf::MAX_ARG_BYTES).min(room).min(needed);
            (at % 4 == 0 && n / 4 <= MAX_UNROLLED_WORDS).then_some((off / 4, n / 4))
        })(),
        _ => None,
    };
    Plan { site, literal, known }
}

/// The loop constructs [`vprintf`]'s code for `inst` has: the copy of the
/// arguments when their place is not known, the count of the conversions
/// when the result is read and the format is not a literal.
pub(crate) fn loops(e: &Emitter, fx: &Fx, inst: &Instruction) -> u32 {
    let p = plan(e, fx, inst);
    u32::from(p.known.is_none()) + u32::from(p.site.result_read && p.literal.is_none())
}

/// `call (ret), vprintf, (format, args)`.
pub(crate) fn vprintf(
    e: &mut Emitter,
    fx: &mut Fx,
    inst: &Instruction,
    rets: &[Operand],
    args: &[Operand],
) -> Result<(), Diagnostic> {
    if args.len() != 2 || rets.len() > 1 {
        return Err(Diagnostic::error(inst.span, "vprintf takes (format, args) and returns one value"));
    }
    let span = inst.span;
    let Plan { site, literal, known } = plan(e, fx, inst);
    let fmt = param_arg(e, fx, args, 0, span)?;
    let fmt = as_u64(e, fmt)?;
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let bt = e.t_bool();
    let zero64 = e.c_int(64, 0);
    let (size, copy) = match known {
        Some((first, words)) => {
            let size = (pf::RECORD_HEADER_BYTES + 4 * words).div_ceil(8) * 8;
            let mut loaded = Vec::new();
            for k in 0..words {
                loaded.push(load_local_word(e, fx, first + k)?);
            }
            (e.c_u32(size), Copy::Words(loaded))
        }
        None => {
            let argp = param_arg(e, fx, args, 1, span)?;
            let argp = as_u64(e, argp)?;
            let max = e.c_u32(pf::MAX_ARG_BYTES);
            let mut n = max;
            if fx.local_var.is_some() {
                let mask = e.c_int(64, crate::abi::WINDOW_MASK);
                let tag = e.b.bitwise_and(u64t, None, argp, mask).map_err(internal1)?;
                let want = e.c_int(64, crate::abi::LOCAL_WINDOW);
                let is_local = e.b.i_equal(bt, None, tag, want).map_err(internal1)?;
                let off = e.b.u_convert(u32t, None, argp).map_err(internal1)?;
                let total = e.c_u32(fx.local_total);
                let inside = e.b.u_less_than(bt, None, off, total).map_err(internal1)?;
                let left = e.b.i_sub(u32t, None, total, off).map_err(internal1)?;
                let zero = e.c_u32(0);
                let left = e.b.select(u32t, None, inside, left, zero).map_err(internal1)?;
                let less = e.b.u_less_than(bt, None, left, max).map_err(internal1)?;
                let capped = e.b.select(u32t, None, less, left, max).map_err(internal1)?;
                n = e.b.select(u32t, None, is_local, capped, max).map_err(internal1)?;
            }
            let null = e.b.i_equal(bt, None, argp, zero64).map_err(internal1)?;
            let zero = e.c_u32(0);
            let n = e.b.select(u32t, None, null, zero, n).map_err(internal1)?;
            let two = e.c_u32(2);
            let words = e.b.shift_right_logical(u32t, None, n, two).map_err(internal1)?;
            let bytes = e.b.shift_left_logical(u32t, None, words, two).map_err(internal1)?;
            let hdr = e.c_u32(pf::RECORD_HEADER_BYTES + 7);
            let size = e.b.i_add(u32t, None, bytes, hdr).map_err(internal1)?;
            let align = e.c_u32(!7u32);
            let size = e.b.bitwise_and(u32t, None, size, align).map_err(internal1)?;
            (size, Copy::Loop { from: argp, words })
        }
    };

    let rec = reserve(e, size, span)?;
    let mut record = header(e, size, pf::KIND_PRINTF, fmt)?;
    match copy {
        // The header and the arguments together, 32 bytes to a store.
        Copy::Words(words) => {
            record.extend(pair_words(e, &words)?);
            store_record(e, rec, &record)?;
        }
        Copy::Loop { from, words } => {
            store_record(e, rec, &record)?;
            let data = add64(e, rec, pf::RECORD_HEADER_BYTES as u64)?;
            copy_words(e, fx, from, data, words)?;
        }
    }

    // Nothing reads the count: it is not computed.
    let Some(dst) = rets.first().filter(|_| site.result_read) else {
        return Ok(());
    };
    let r = match literal {
        Some((_, conversions)) => e.c_u32(conversions),
        None => {
            // CUDA returns the number of arguments, -1 for a null format.
            let bad = e.b.i_equal(bt, None, fmt, zero64).map_err(internal1)?;
            let count = count_conversions(e, fx, fmt, bad)?;
            let m1 = e.c_u32(u32::MAX);
            e.b.select(u32t, None, bad, m1, count).map_err(internal1)?
        }
    };
    let base = super::call::param_var_offset(fx, dst)?;
    super::mem::store_local_word(e, fx, base / 4, r)
}

/// Most argument words copied without a loop (a buffer at a known place).
const MAX_UNROLLED_WORDS: u32 = 32;

/// How a `printf` record gets its argument bytes.
enum Copy {
    /// These words (loaded from the local words).
    Words(Vec<Word>),
    /// A loop over this many words from this generic address.
    Loop { from: Word, words: Word },
}

/// The number of conversions in the NUL-terminated format at generic `fmt`
/// (a `%` not followed by `%`): what CUDA's `printf` returns. `skip`: the
/// format is null (no bytes are read then).
fn count_conversions(e: &mut Emitter, fx: &Fx, fmt: Word, skip: Word) -> Result<Word, Diagnostic> {
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let bt = e.t_bool();
    let zero = e.c_u32(0);
    let one = e.c_u32(1);
    let f = e.c_bool(false);
    let header = e.b.id();
    let body = e.b.id();
    let cont = e.b.id();
    let merge = e.b.id();
    let (ni, ncount, nprev, ndone) = (e.b.id(), e.b.id(), e.b.id(), e.b.id());
    super::loop_limit::enter(e)?;
    // After `enter`, which may end the block it began in.
    let pre = e.current_label()?;
    e.b.branch(header).map_err(internal1)?;
    e.b.begin_block(Some(header)).map_err(internal1)?;
    let i = e.b.phi(u32t, None, [(zero, pre), (ni, cont)]).map_err(internal1)?;
    let count = e.b.phi(u32t, None, [(zero, pre), (ncount, cont)]).map_err(internal1)?;
    let prev = e.b.phi(bt, None, [(f, pre), (nprev, cont)]).map_err(internal1)?;
    let done = e.b.phi(bt, None, [(skip, pre), (ndone, cont)]).map_err(internal1)?;
    let limit = e.c_u32(pf::MAX_FORMAT_BYTES);
    let inside = e.b.u_less_than(bt, None, i, limit).map_err(internal1)?;
    let not_done = e.b.logical_not(bt, None, done).map_err(internal1)?;
    let more = e.b.logical_and(bt, None, inside, not_done).map_err(internal1)?;
    super::loop_limit::loop_merge(e, merge, cont)?;
    e.b.branch_conditional(more, body, merge, []).map_err(internal1)?;
    e.b.begin_block(Some(body)).map_err(internal1)?;
    // The aligned word holding byte i (module data is padded to whole words).
    let i64v = e.b.u_convert(u64t, None, i).map_err(internal1)?;
    let at = e.b.i_add(u64t, None, fmt, i64v).map_err(internal1)?;
    let mask = e.c_int(64, !3u64);
    let word_at = e.b.bitwise_and(u64t, None, at, mask).map_err(internal1)?;
    let w = load(e, fx, Addr::Generic(word_at), K::Int(32), false)?;
    let three = e.c_int(64, 3);
    let lane = e.b.bitwise_and(u64t, None, at, three).map_err(internal1)?;
    let lane = e.b.u_convert(u32t, None, lane).map_err(internal1)?;
    let eight = e.c_u32(8);
    let shift = e.b.i_mul(u32t, None, lane, eight).map_err(internal1)?;
    let sh = e.b.shift_right_logical(u32t, None, w, shift).map_err(internal1)?;
    let ff = e.c_u32(0xFF);
    let c = e.b.bitwise_and(u32t, None, sh, ff).map_err(internal1)?;
    let pct = e.c_u32(b'%' as u32);
    let is_pct = e.b.i_equal(bt, None, c, pct).map_err(internal1)?;
    let is_nul = e.b.i_equal(bt, None, c, zero).map_err(internal1)?;
    // After a lone '%', any byte but '%' (or the end) starts a conversion.
    let not_pct = e.b.logical_not(bt, None, is_pct).map_err(internal1)?;
    let not_nul = e.b.logical_not(bt, None, is_nul).map_err(internal1)?;
    let conv = e.b.logical_and(bt, None, prev, not_pct).map_err(internal1)?;
    let conv = e.b.logical_and(bt, None, conv, not_nul).map_err(internal1)?;
    let add = e.b.select(u32t, None, conv, one, zero).map_err(internal1)?;
    let not_prev = e.b.logical_not(bt, None, prev).map_err(internal1)?;
    super::loop_limit::check(e, None)?;
    e.b.branch(cont).map_err(internal1)?;
    e.b.begin_block(Some(cont)).map_err(internal1)?;
    e.b.i_add(u32t, Some(ncount), count, add).map_err(internal1)?;
    e.b.logical_and(bt, Some(nprev), not_prev, is_pct).map_err(internal1)?;
    e.b.copy_object(bt, Some(ndone), is_nul).map_err(internal1)?;
    e.b.i_add(u32t, Some(ni), i, one).map_err(internal1)?;
    e.b.branch(header).map_err(internal1)?;
    e.b.begin_block(Some(merge)).map_err(internal1)?;
    super::loop_limit::merged(e)?;
    Ok(count)
}

/// Copy `words` 32-bit words from generic `src` to device address `dst` (a loop).
fn copy_words(e: &mut Emitter, fx: &Fx, src: Word, dst: Word, words: Word) -> Result<(), Diagnostic> {
    let u32t = e.t_int(32);
    let u64t = e.t_int(64);
    let bt = e.t_bool();
    let zero = e.c_u32(0);
    let one = e.c_u32(1);
    let two64 = e.c_int(64, 2);
    let header = e.b.id();
    let body = e.b.id();
    let cont = e.b.id();
    let merge = e.b.id();
    let next = e.b.id();
    super::loop_limit::enter(e)?;
    // After `enter`, which may end the block it began in.
    let pre = e.current_label()?;
    e.b.branch(header).map_err(internal1)?;
    e.b.begin_block(Some(header)).map_err(internal1)?;
    let i = e.b.phi(u32t, None, [(zero, pre), (next, cont)]).map_err(internal1)?;
    let more = e.b.u_less_than(bt, None, i, words).map_err(internal1)?;
    super::loop_limit::loop_merge(e, merge, cont)?;
    e.b.branch_conditional(more, body, merge, []).map_err(internal1)?;
    e.b.begin_block(Some(body)).map_err(internal1)?;
    let i64v = e.b.u_convert(u64t, None, i).map_err(internal1)?;
    let byte = e.b.shift_left_logical(u64t, None, i64v, two64).map_err(internal1)?;
    let from = e.b.i_add(u64t, None, src, byte).map_err(internal1)?;
    let w = load(e, fx, Addr::Generic(from), K::Int(32), false)?;
    let to = e.b.i_add(u64t, None, dst, byte).map_err(internal1)?;
    store(e, fx, Addr::Global(to), w, K::Int(32), false, Span::default())?;
    super::loop_limit::check(e, None)?;
    e.b.branch(cont).map_err(internal1)?;
    e.b.begin_block(Some(cont)).map_err(internal1)?;
    e.b.i_add(u32t, Some(next), i, one).map_err(internal1)?;
    e.b.branch(header).map_err(internal1)?;
    e.b.begin_block(Some(merge)).map_err(internal1)?;
    super::loop_limit::merged(e)?;
    Ok(())
}

/// `call __assertfail, (message, file, line, function, char_size)`: write an
/// assert record, set the trap word's assert bit and end the thread.
pub(crate) fn assertfail(
    e: &mut Emitter,
    fx: &mut Fx,
    inst: &Instruction,
    rets: &[Operand],
    args: &[Operand],
) -> Result<(), Diagnostic> {
    if args.len() != 5 || !rets.is_empty() {
        return Err(Diagnostic::error(inst.span, "__assertfail takes (message, file, line, function, char_size)"));
    }
    let span = inst.span;
    let msg = param_arg(e, fx, args, 0, span)?;
    let msg = as_u64(e, msg)?;
    let file = param_arg(e, fx, args, 1, span)?;
    let file = as_u64(e, file)?;
    let line = param_arg(e, fx, args, 2, span)?;
    let line = as_u32(e, line)?;
    let func = param_arg(e, fx, args, 3, span)?;
    let func = as_u64(e, func)?;
    let mut ids = Vec::new();
    for reg in ["%ctaid", "%tid"] {
        for c in [b'x', b'y', b'z'] {
            let Some((v, _)) = e.special(fx, reg, Some(c), span)? else {
                return Err(Diagnostic::error(span, "internal error: special register"));
            };
            ids.push(v);
        }
    }
    let size = e.c_u32(pf::RECORD_HEADER_BYTES + pf::ASSERT_PAYLOAD);
    let rec = reserve(e, size, span)?;
    let mut record = header(e, size, pf::KIND_ASSERT, msg)?;
    record.extend([file, func]);
    let mut words = vec![line];
    words.extend(ids);
    words.push(e.c_u32(0));
    record.extend(pair_words(e, &words)?);
    store_record(e, rec, &record)?;
    // End the thread: a selection whose one arm traps.
    let t = e.c_bool(true);
    let stop = e.b.id();
    let resume = e.b.id();
    e.b.selection_merge(resume, spirv::SelectionControl::NONE).map_err(internal1)?;
    e.b.branch_conditional(t, stop, resume, []).map_err(internal1)?;
    e.b.begin_block(Some(stop)).map_err(internal1)?;
    trap_now(e, fx, resume, pf::TRAP_ASSERT)?;
    e.b.begin_block(Some(resume)).map_err(internal1)?;
    Ok(())
}
