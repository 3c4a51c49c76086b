//! Operand access: registers, immediates, special registers and symbol
//! addresses, converted to the kind an instruction wants.

use super::func::{internal1, Fx};
use super::Emitter;
use crate::ast::{FloatImm, Operand, ScalarType};
use crate::diag::{Diagnostic, Span};
use rspirv::dr::Operand as SOp;
use rspirv::spirv::{self, Word};

/// The SPIR-V kind of a value: predicate, integer of a width, float of a width.
/// Integers are always unsigned SPIR-V types; signedness is in the operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum K {
    Pred,
    Int(u32),
    Float(u32),
}

impl K {
    pub fn bits(self) -> u32 {
        match self {
            K::Pred => 1,
            K::Int(b) | K::Float(b) => b,
        }
    }
}

/// The kind in which an instruction of type `t` computes.
pub(crate) fn kind_of(t: ScalarType) -> K {
    use ScalarType::*;
    match t {
        Pred => K::Pred,
        F32 => K::Float(32),
        F64 => K::Float(64),
        F16 | Bf16 | S8 | U8 | B8 | S16 | U16 | B16 => K::Int(16),
        S32 | U32 | B32 | F16x2 | Bf16x2 => K::Int(32),
        S64 | U64 | B64 | B128 | F32x2 => K::Int(64),
    }
}

impl Emitter<'_> {
    pub fn kty(&mut self, k: K) -> Word {
        match k {
            K::Pred => self.t_bool(),
            K::Int(w) => self.t_int(w),
            K::Float(w) => self.t_float(w),
        }
    }

    /// Convert between kinds keeping bits (register reinterpretation), with
    /// truncation or extension when widths differ.
    pub fn convert(&mut self, v: Word, from: K, to: K, signed: bool) -> Result<Word, Diagnostic> {
        if from == to {
            return Ok(v);
        }
        let b = &mut self.b;
        let _ = b;
        match (from, to) {
            (K::Int(a), K::Int(c)) => {
                let t = self.t_int(c);
                if a > c || !signed {
                    self.b.u_convert(t, None, v).map_err(internal1)
                } else {
                    self.sext(v, a, c)
                }
            }
            (K::Float(a), _) if to != K::Pred => {
                let ti = self.t_int(a);
                let bits = self.b.bitcast(ti, None, v).map_err(internal1)?;
                self.convert(bits, K::Int(a), to, signed)
            }
            (K::Int(a), K::Float(c)) => {
                let bits = self.convert(v, K::Int(a), K::Int(c), signed)?;
                let tf = self.t_float(c);
                self.b.bitcast(tf, None, bits).map_err(internal1)
            }
            (K::Pred, _) => {
                let one = self.convert_const_one(to)?;
                let zero = self.zero(to);
                let t = self.kty(to);
                self.b.select(t, None, v, one, zero).map_err(internal1)
            }
            (_, K::Pred) => {
                let bits = self.convert(v, from, K::Int(from.bits()), false)?;
                let z = self.c_int(from.bits(), 0);
                let bt = self.t_bool();
                self.b.i_not_equal(bt, None, bits, z).map_err(internal1)
            }
            _ => Err(Diagnostic::error(Span::default(), "internal error: bad conversion")),
        }
    }

    /// Sign-extend an integer of `from` bits to `to` bits.
    ///
    /// Written as a zero extension and two shifts rather than `OpSConvert`:
    /// Mesa's SPIR-V front end (lavapipe 22.x) takes a conversion's
    /// signedness from the operand's declared type, and every integer here
    /// is declared unsigned, so `OpSConvert` zero-extends there.
    pub fn sext(&mut self, v: Word, from: u32, to: u32) -> Result<Word, Diagnostic> {
        let t = self.t_int(to);
        let w = self.b.u_convert(t, None, v).map_err(internal1)?;
        let s = self.c_int(to, (to - from) as u64);
        let l = self.b.shift_left_logical(t, None, w, s).map_err(internal1)?;
        self.b.shift_right_arithmetic(t, None, l, s).map_err(internal1)
    }

    fn convert_const_one(&mut self, k: K) -> Result<Word, Diagnostic> {
        Ok(match k {
            K::Int(w) => self.c_int(w, 1),
            K::Float(w) => self.c_float(w, 1.0),
            K::Pred => self.c_bool(true),
        })
    }

    pub fn zero(&mut self, k: K) -> Word {
        match k {
            K::Int(w) => self.c_int(w, 0),
            K::Float(w) => self.c_float(w, 0.0),
            K::Pred => self.c_bool(false),
        }
    }

    /// Load word `i` of the push-constant block.
    pub fn push_word(&mut self, fx: &Fx, i: u32) -> Result<Word, Diagnostic> {
        let Some(pv) = fx.push_var else {
            return Err(Diagnostic::error(Span::default(), "internal error: no push constants"));
        };
        let u32t = self.t_int(32);
        let pt = self.t_ptr(spirv::StorageClass::PushConstant, u32t);
        let c0 = self.c_u32(0);
        let ci = self.c_u32(i);
        let p = self.b.access_chain(pt, None, pv, [c0, ci]).map_err(internal1)?;
        self.b.load(u32t, None, p, None, []).map_err(internal1)
    }

    /// The module data buffer's device address, `None` when the module has
    /// no data: a load of the `Private` copy [`init_module_data_address`]
    /// made at the start of the entry.
    pub fn module_data_address(&mut self) -> Result<Option<Word>, Diagnostic> {
        let Some(var) = self.module_data_var else {
            return Ok(None);
        };
        let u64t = self.t_int(64);
        self.b.load(u64t, None, var, None, []).map(Some).map_err(internal1)
    }

    /// The device address of the entry's parameter buffer (header words 6, 7).
    pub fn param_buffer_address(&mut self, fx: &Fx) -> Result<Word, Diagnostic> {
        self.push_u64(fx, 6)
    }

    /// The 64-bit value of push-constant words `w` (low) and `w + 1`, the
    /// same in every invocation ([`Emitter::uniform_u64`]).
    pub(crate) fn push_u64(&mut self, fx: &Fx, w: u32) -> Result<Word, Diagnostic> {
        let lo = self.push_word(fx, w)?;
        let hi = self.push_word(fx, w + 1)?;
        let v = self.make_u64(lo, hi)?;
        self.uniform_u64(v)
    }

    /// The label of the block being emitted (for `OpPhi` operands).
    pub fn current_label(&mut self) -> Result<Word, Diagnostic> {
        self.b.selected_label().ok_or_else(|| Diagnostic::error(Span::default(), "internal error: no current block"))
    }

    /// Combine two 32-bit words into a 64-bit integer.
    pub fn make_u64(&mut self, lo: Word, hi: Word) -> Result<Word, Diagnostic> {
        let u64t = self.t_int(64);
        let l = self.b.u_convert(u64t, None, lo).map_err(internal1)?;
        let h = self.b.u_convert(u64t, None, hi).map_err(internal1)?;
        let c32 = self.c_int(64, 32);
        let hs = self.b.shift_left_logical(u64t, None, h, c32).map_err(internal1)?;
        self.b.bitwise_or(u64t, None, l, hs).map_err(internal1)
    }

    /// `v` (a 64-bit integer, the same in every invocation) as the driver's
    /// compiler should see it: through `OpGroupNonUniformBroadcastFirst`
    /// where [`crate::Options::uniform_params`] asks for it, else as it is.
    pub(crate) fn uniform_u64(&mut self, v: Word) -> Result<Word, Diagnostic> {
        if !self.opts.uniform_params {
            return Ok(v);
        }
        self.cap(spirv::Capability::GroupNonUniform);
        self.cap(spirv::Capability::GroupNonUniformBallot);
        let u64t = self.t_int(64);
        let scope = self.c_u32(spirv::Scope::Subgroup as u32);
        self.b.group_non_uniform_broadcast_first(u64t, None, scope, v).map_err(internal1)
    }

    pub(crate) fn bin_u32(&mut self, op: spirv::Op, a: Word, b: Word) -> Result<Word, Diagnostic> {
        let t = self.t_int(32);
        self.b.op(op, t, None, &[a, b]).map_err(internal1)
    }

    /// A special register's value and kind, or `None` when `name` is not one.
    pub fn special(
        &mut self,
        fx: &Fx,
        name: &str,
        comp: Option<u8>,
        span: Span,
    ) -> Result<Option<(Word, K)>, Diagnostic> {
        let c = match comp {
            Some(b'x') | None => 0usize,
            Some(b'y') => 1,
            Some(b'z') => 2,
            Some(_) => return Err(Diagnostic::error(span, format!("{name} has no component .w"))),
        };
        let u32t = self.t_int(32);
        let l = fx.linear;
        let [nx, ny, nz] = self.spec_ntid;
        use spirv::Op;
        let v = match name {
            "%tid" => match c {
                0 => self.bin_u32(Op::UMod, l, nx)?,
                1 => {
                    let q = self.bin_u32(Op::UDiv, l, nx)?;
                    self.bin_u32(Op::UMod, q, ny)?
                }
                _ => {
                    let xy = self.bin_u32(Op::IMul, nx, ny)?;
                    self.bin_u32(Op::UDiv, l, xy)?
                }
            },
            "%ntid" => self.spec_ntid[c],
            "%ctaid" => super::block_order::ctaid(self, fx)?[c],
            "%nctaid" => self.push_word(fx, 3 + c as u32)?,
            // Thread block clusters: every launch has clusters of one
            // block (the driver refuses larger cluster dimensions), so each
            // block is its own cluster, as on NVIDIA's GPUs for a launch
            // without clusters or with clusters of 1x1x1. An entry that
            // requires larger ones (`.reqnctapercluster`) cannot read them.
            "%clusterid"
            | "%nclusterid"
            | "%cluster_ctaid"
            | "%cluster_ctarank"
            | "%cluster_nctaid"
            | "%cluster_nctarank"
            | "%is_explicit_cluster"
                if self.required_cluster.is_some() =>
            {
                let d = self.required_cluster.unwrap_or([1; 3]);
                return Err(Diagnostic::error(
                    span,
                    format!(
                        "{name} in an entry that requires thread block clusters of {}x{}x{} blocks \
                         (.reqnctapercluster): clusters are not supported",
                        d[0], d[1], d[2]
                    ),
                ));
            }
            "%clusterid" => super::block_order::ctaid(self, fx)?[c],
            "%nclusterid" => self.push_word(fx, 3 + c as u32)?,
            "%cluster_ctaid" | "%cluster_ctarank" => self.c_u32(0),
            "%cluster_nctaid" | "%cluster_nctarank" => self.c_u32(1),
            "%is_explicit_cluster" => return Ok(Some((self.c_bool(self.explicit_cluster), K::Pred))),
            "%laneid" => {
                let m = self.c_u32(31);
                self.bin_u32(Op::BitwiseAnd, l, m)?
            }
            "%warpid" => {
                let s = self.c_u32(5);
                self.bin_u32(Op::ShiftRightLogical, l, s)?
            }
            "%nwarpid" => {
                let xy = self.bin_u32(Op::IMul, nx, ny)?;
                let n = self.bin_u32(Op::IMul, xy, nz)?;
                let c31 = self.c_u32(31);
                let r = self.bin_u32(Op::IAdd, n, c31)?;
                let s = self.c_u32(5);
                self.bin_u32(Op::ShiftRightLogical, r, s)?
            }
            "WARP_SZ" | "%warpsize" => self.c_u32(32),
            "%smid" | "%gridid" => self.c_u32(0),
            "%dynamic_smem_size" => match self.spec_dynamic_shared {
                Some(c) => c,
                None => {
                    let u32t = self.t_int(32);
                    let c = self.b.spec_constant_bit32(u32t, 0);
                    self.b.decorate(
                        c,
                        spirv::Decoration::SpecId,
                        [SOp::LiteralBit32(crate::abi::SPEC_DYNAMIC_SHARED_BYTES)],
                    );
                    self.spec_dynamic_shared = Some(c);
                    c
                }
            },
            "%nsmid" => self.c_u32(1),
            // The resume pass's registers (`crate::resume`, `abi::resume`).
            "%__ptxvk_resume_round" => {
                let mark = self.push_word(fx, 1)?;
                let want = self.c_u32(crate::abi::resume::ROUND_MARK);
                let bt = self.t_bool();
                let is_round = self.b.i_equal(bt, None, mark, want).map_err(internal1)?;
                let round = self.push_word(fx, 0)?;
                let zero = self.c_u32(0);
                self.b.select(u32t, None, is_round, round, zero).map_err(internal1)?
            }
            "%__ptxvk_resume_index" => {
                let x = super::block_order::workgroup_id(self)?[0];
                let xy = self.bin_u32(Op::IMul, nx, ny)?;
                let n = self.bin_u32(Op::IMul, xy, nz)?;
                let base = self.bin_u32(Op::IMul, x, n)?;
                self.bin_u32(Op::IAdd, base, l)?
            }
            "%__ptxvk_resume_slot" => {
                let (Some(off), Some(data)) = (self.resume_offset, self.module_data_address()?) else {
                    return Err(Diagnostic::error(span, "internal error: no resume slot"));
                };
                let c = self.c_int(64, off);
                let u64t = self.t_int(64);
                let v = self.b.i_add(u64t, None, data, c).map_err(internal1)?;
                return Ok(Some((v, K::Int(64))));
            }
            "%__ptxvk_loop_count" => super::loop_limit::lane_count(self)?,
            "%envreg1" | "%envreg2" => match super::grid::envreg(self, fx, name, span)? {
                Some(v) => v,
                None => return Ok(None),
            },
            "%lanemask_eq" | "%lanemask_lt" | "%lanemask_le" | "%lanemask_gt" | "%lanemask_ge" => {
                let m = self.c_u32(31);
                let lane = self.bin_u32(Op::BitwiseAnd, l, m)?;
                let one = self.c_u32(1);
                let eq = self.bin_u32(Op::ShiftLeftLogical, one, lane)?;
                let lt = self.bin_u32(Op::ISub, eq, one)?;
                let eq2 = self.bin_u32(Op::ShiftLeftLogical, eq, one)?;
                let le = self.bin_u32(Op::ISub, eq2, one)?;
                match name {
                    "%lanemask_eq" => eq,
                    "%lanemask_lt" => lt,
                    "%lanemask_le" => le,
                    "%lanemask_gt" => self.b.not(u32t, None, le).map_err(internal1)?,
                    _ => self.b.not(u32t, None, lt).map_err(internal1)?,
                }
            }
            // `%globaltimer` (nanoseconds in CUDA) reads the same clock: it
            // counts nanoseconds on lavapipe (llvmpipe reads the host's
            // monotonic time), the device's own units elsewhere.
            "%clock" | "%clock64" | "%globaltimer" | "%globaltimer_lo" | "%globaltimer_hi" => {
                self.cap(spirv::Capability::ShaderClockKHR);
                self.b.extension("SPV_KHR_shader_clock");
                let u64t = self.t_int(64);
                let scope = self.c_u32(spirv::Scope::Subgroup as u32);
                let v = self.b.read_clock_khr(u64t, None, scope).map_err(internal1)?;
                match name {
                    "%clock" | "%globaltimer_lo" => self.b.u_convert(u32t, None, v).map_err(internal1)?,
                    "%globaltimer_hi" => {
                        let k32 = self.c_int(64, 32);
                        let hi = self.b.shift_right_logical(u64t, None, v, k32).map_err(internal1)?;
                        self.b.u_convert(u32t, None, hi).map_err(internal1)?
                    }
                    _ => return Ok(Some((v, K::Int(64)))),
                }
            }
            _ => return Ok(None),
        };
        Ok(Some((v, K::Int(32))))
    }
}

fn imm_int(e: &mut Emitter, v: i128, want: K) -> Word {
    match want {
        K::Int(w) => e.c_int(w, v as u64),
        K::Float(w) => e.c_float(w, v as f64),
        K::Pred => e.c_bool(v != 0),
    }
}

fn imm_float(e: &mut Emitter, f: FloatImm, want: K) -> Word {
    let value = match f {
        FloatImm::F32Bits(b) => f32::from_bits(b) as f64,
        FloatImm::F64Bits(b) => f64::from_bits(b),
        FloatImm::Decimal(d) => d,
    };
    match want {
        K::Float(64) => match f {
            FloatImm::F64Bits(b) => {
                let t = e.t_float(64);
                e.constant_bits(t, 64, b)
            }
            _ => e.c_f64(value),
        },
        K::Float(_) => match f {
            FloatImm::F32Bits(b) => {
                let t = e.t_float(32);
                e.constant_bits(t, 32, b as u64)
            }
            _ => e.c_f32(value as f32),
        },
        // A float literal in an integer context gives its bits.
        K::Int(w) => match f {
            FloatImm::F32Bits(b) => e.c_int(w, b as u64),
            FloatImm::F64Bits(b) => e.c_int(w, b),
            FloatImm::Decimal(d) => {
                if w == 64 {
                    e.c_int(w, d.to_bits())
                } else {
                    e.c_int(w, (d as f32).to_bits() as u64)
                }
            }
        },
        K::Pred => e.c_bool(value != 0.0),
    }
}

impl Emitter<'_> {
    pub fn constant_bits(&mut self, t: Word, w: u32, v: u64) -> Word {
        if let Some(&id) = self.consts_get(t, v) {
            return id;
        }
        let id = if w == 64 { self.b.constant_bit64(t, v) } else { self.b.constant_bit32(t, v as u32) };
        self.consts_put(t, v, id);
        id
    }
}

/// Read an operand as kind `want`.
pub(crate) fn get(e: &mut Emitter, fx: &mut Fx, op: &Operand, want: K, signed: bool) -> Result<Word, Diagnostic> {
    match op {
        Operand::Name { span, name, component } => {
            if let Some(&(var, k)) = fx.regs.get(name.as_str()) {
                if component.is_some() {
                    return Err(Diagnostic::error(*span, format!("register '{name}' has no components")));
                }
                let t = e.kty(k);
                let v = e.b.load(t, None, var, None, []).map_err(internal1)?;
                let v = e.convert(v, k, want, signed)?;
                if e.opts.zero_operand_workaround {
                    return super::zero::launder(e, v, want);
                }
                return Ok(v);
            }
            if let Some((v, k)) = e.special(fx, name, *component, *span)? {
                return e.convert(v, k, want, false);
            }
            if let Some((v, k)) = symbol_address(e, fx, name, *span)? {
                return e.convert(v, k, want, false);
            }
            Err(Diagnostic::error(*span, format!("unknown name '{name}'")))
        }
        Operand::Int(_, v) => Ok(imm_int(e, *v, want)),
        Operand::Float(_, f) => Ok(imm_float(e, *f, want)),
        // A one-element vector is its element (`{ %r1 }`, as ptxas reads it).
        Operand::Vector(_, v) if v.len() == 1 => get(e, fx, &v[0], want, signed),
        Operand::Not(span, inner) => {
            if want != K::Pred {
                return Err(Diagnostic::error(*span, "'!' applies only to predicates"));
            }
            let v = get(e, fx, inner, K::Pred, false)?;
            let bt = e.t_bool();
            e.b.logical_not(bt, None, v).map_err(internal1)
        }
        // `var+imm` (and `var[imm]`, resolved to it by the check pass): the
        // variable's address plus a byte offset.
        Operand::SymbolOffset(span, name, offset) => {
            let Some((v, k)) = symbol_address(e, fx, name, *span)? else {
                return Err(Diagnostic::error(*span, format!("unknown name '{name}'")));
            };
            let K::Int(w) = k else {
                return Err(Diagnostic::error(*span, "internal error: address is not an integer"));
            };
            let t = e.t_int(w);
            let c = e.c_int(w, *offset as u64);
            let sum = e.b.i_add(t, None, v, c).map_err(internal1)?;
            e.convert(sum, k, want, false)
        }
        other => Err(Diagnostic::error(other.span(), "expected a register or an immediate here")),
    }
}

/// The address a variable name stands for, with its kind.
pub(crate) fn symbol_address(
    e: &mut Emitter,
    fx: &Fx,
    name: &str,
    span: Span,
) -> Result<Option<(Word, K)>, Diagnostic> {
    if let Some(p) = fx.shared.get(name) {
        return Ok(Some((e.c_u32(p.offset as u32), K::Int(32))));
    }
    if let Some(p) = fx.local.get(name) {
        return Ok(Some((e.c_u32(fx.local_base + p.offset as u32), K::Int(32))));
    }
    if let Some(&(off, _)) = e.globals.get(name) {
        let Some(base) = e.module_data_address()? else {
            return Err(Diagnostic::error(span, "internal error: module data address missing"));
        };
        let u64t = e.t_int(64);
        let c = e.c_int(64, off);
        let v = e.b.i_add(u64t, None, base, c).map_err(internal1)?;
        return Ok(Some((v, K::Int(64))));
    }
    if let Some(&i) = e.func_index.get(name) {
        return Ok(Some((e.c_int(64, crate::abi::FUNCTION_WINDOW | i as u64), K::Int(64))));
    }
    if let Some(p) = fx.params.get(name) {
        // The entry's parameters are then in the parameter buffer (see
        // `entry_info`): the address is a device address.
        if fx.passing != crate::abi::ParamPassing::Buffer {
            return Err(Diagnostic::error(span, format!("internal error: address of parameter '{name}'")));
        }
        let offset = p.offset as u64;
        let base = e.param_buffer_address(fx)?;
        let u64t = e.t_int(64);
        let c = e.c_int(64, offset);
        return Ok(Some((e.b.i_add(u64t, None, base, c).map_err(internal1)?, K::Int(64))));
    }
    Ok(None)
}

/// Write `v` (of kind `have`) to a destination operand.
pub(crate) fn set(
    e: &mut Emitter,
    fx: &mut Fx,
    op: &Operand,
    v: Word,
    have: K,
    signed: bool,
) -> Result<(), Diagnostic> {
    match op {
        Operand::Sink(_) => Ok(()),
        Operand::Vector(_, parts) if parts.len() == 1 => set(e, fx, &parts[0], v, have, signed),
        Operand::Name { span, name, component } => {
            let Some(&(var, k)) = fx.regs.get(name.as_str()) else {
                return Err(Diagnostic::error(*span, format!("'{name}' is not a register")));
            };
            if component.is_some() {
                return Err(Diagnostic::error(*span, "vector register components are not supported"));
            }
            let v = e.convert(v, have, k, signed)?;
            e.b.store(var, v, None, []).map_err(internal1)
        }
        other => Err(Diagnostic::error(other.span(), "expected a register as destination")),
    }
}

/// A guard or branch predicate.
pub(crate) fn pred(e: &mut Emitter, fx: &mut Fx, name: &str, negated: bool, span: Span) -> Result<Word, Diagnostic> {
    let Some(&(var, k)) = fx.regs.get(name) else {
        return Err(Diagnostic::error(span, format!("unknown predicate '{name}'")));
    };
    let t = e.kty(k);
    let v = e.b.load(t, None, var, None, []).map_err(internal1)?;
    let v = e.convert(v, k, K::Pred, false)?;
    if negated {
        let bt = e.t_bool();
        e.b.logical_not(bt, None, v).map_err(internal1)
    } else {
        Ok(v)
    }
}

/// Copies the module data address from push-constant header words 8 and 9
/// ([`crate::abi::PUSH_HEADER_WORDS`]) to its `Private` variable; an entry
/// does this first.
pub(crate) fn init_module_data_address(e: &mut Emitter, fx: &Fx) -> Result<(), Diagnostic> {
    let Some(var) = e.module_data_var else {
        return Ok(());
    };
    let a = e.push_u64(fx, 8)?;
    e.b.store(var, a, None, []).map_err(internal1)
}
