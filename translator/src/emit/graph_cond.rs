//! `cudaGraphSetConditional(handle, value)`: the device side of conditional
//! graph nodes (CUDA 12.4). nvcc and NVRTC leave it an undefined
//! `.extern .func` of the device runtime (a `__cudart_builtin__`), called
//! with a 64-bit handle and a 32-bit value, as NVIDIA Warp's
//! `capture_if`/`capture_while` kernels and CCCL's graph helpers do.
//!
//! The driver library makes a conditional handle the device address of the
//! handle's 32-bit value (see `libcuda/src/graph.rs`), so setting it is one
//! checked global store; the graph reads the value when it reaches the
//! conditional node, after the kernels before it are complete. A handle
//! that is no such address faults as a store to it would.

use super::fault::{Access, Site};
use super::func::Fx;
use super::mem::{load_local_word, store_checked, Addr};
use super::values::K;
use super::Emitter;
use crate::ast::{Instruction, Operand};
use crate::diag::Diagnostic;

/// The name of the system call.
pub(crate) const SET_CONDITIONAL: &str = "cudaGraphSetConditional";

/// `call cudaGraphSetConditional, (handle, value)`: `st.global.u32 [handle], value`.
pub(crate) fn set_conditional(
    e: &mut Emitter,
    fx: &mut Fx,
    inst: &Instruction,
    rets: &[Operand],
    args: &[Operand],
) -> Result<(), Diagnostic> {
    let ([handle_op, value_op], []) = (args, rets) else {
        return Err(Diagnostic::error(inst.span, "cudaGraphSetConditional takes (handle, value) and returns nothing"));
    };
    let handle = super::call::param_var_offset(fx, handle_op)? / 4;
    let lo = load_local_word(e, fx, handle)?;
    let hi = load_local_word(e, fx, handle + 1)?;
    let address = e.make_u64(lo, hi)?;
    let value = load_local_word(e, fx, super::call::param_var_offset(fx, value_op)? / 4)?;
    let site = Site { span: inst.span, access: Access::Write, bytes: 4, align: 4 };
    store_checked(e, fx, Addr::Global(address), value, K::Int(32), true, site)
}
