//! Conditional graph nodes (CUDA 12.4): `cuGraphConditionalHandleCreate`
//! and nodes of type `CU_GRAPH_NODE_TYPE_CONDITIONAL` (`if`, `while`,
//! `switch`), added with `cuGraphAddNode` and filled by the node APIs or by
//! `cuStreamBeginCaptureToGraph`, as NVIDIA Warp's `capture_if` and
//! `capture_while` do.
//!
//! A conditional handle is the device address of its 32-bit value: the
//! translator lowers the device runtime's `cudaGraphSetConditional(handle,
//! value)` to a store there (`translator/src/emit/graph_cond.rs`). The
//! value lives in a 4-byte allocation of the handle's context, held by the
//! graph the handle was created for and by every graph cloned or
//! instantiated from it, freed when the last of them goes.
//!
//! The graph executor evaluates a conditional node on the host when it
//! reaches it: it waits for the work queued before it (the kernels that set
//! the value), reads the value and runs the chosen body graph in place of
//! the node (`if`: body 0 when non-zero, body 1 when zero and there are
//! two; `switch`: body `value` when there is one; `while`: body 0 until
//! the value reads zero, tested before each iteration). A handle created
//! with `CU_GRAPH_COND_ASSIGN_DEFAULT` takes its default value whenever the
//! graph it belongs to starts running (each launch, for the top graph; each
//! execution of a body, for a body graph's handles). Without it the value
//! keeps what was last stored (0 at first).

use std::collections::BTreeMap;
use std::ffi::{c_int, c_uint};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use crate::context;
use crate::ffi::{write_out, Handle};
use crate::result::{CuError, CuResult};

/// `CU_GRAPH_COND_ASSIGN_DEFAULT`.
pub const ASSIGN_DEFAULT: c_uint = 1;
/// `CU_GRAPH_COND_TYPE_IF`.
pub const TYPE_IF: c_int = 0;
/// `CU_GRAPH_COND_TYPE_WHILE`.
pub const TYPE_WHILE: c_int = 1;
/// `CU_GRAPH_COND_TYPE_SWITCH`.
pub const TYPE_SWITCH: c_int = 2;

/// A `CUgraphConditionalHandle`: its value's device memory.
pub struct CondHandle {
    /// The value's device address (the handle itself).
    pub addr: u64,
    /// The runtime context that owns the memory.
    runtime: ptxvk_runtime::Context,
    /// The value assigned when the owning graph starts, if any.
    pub default: Option<u32>,
}

impl Drop for CondHandle {
    fn drop(&mut self) {
        // Released after the queued work that may still set it.
        let _ = self.runtime.free(self.addr);
    }
}

impl CondHandle {
    /// The value, after all work queued so far (a kernel fault or trap in
    /// that work is the error).
    pub fn read(&self) -> CuResult<u32> {
        let mut b = [0u8; 4];
        self.runtime.copy_dtoh(&mut b, self.addr)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Queues the store of the default value, if the handle has one.
    pub fn assign_default(&self) -> CuResult<()> {
        match self.default {
            Some(v) => Ok(self.runtime.memset_d32(self.addr, v, 1)?),
            None => Ok(()),
        }
    }
}

/// Every handle by address; entries of freed handles are dead and are
/// replaced when their address is reused.
fn handles() -> MutexGuard<'static, BTreeMap<u64, Weak<CondHandle>>> {
    static TABLE: OnceLock<Mutex<BTreeMap<u64, Weak<CondHandle>>>> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(BTreeMap::new())).lock().unwrap_or_else(|p| p.into_inner())
}

/// The live handle `h`; "CUDA_ERROR_INVALID_VALUE" for anything else.
pub fn lookup(h: u64) -> CuResult<Arc<CondHandle>> {
    let found = handles().get(&h).and_then(Weak::upgrade);
    found.ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{h:#x} is not a conditional handle")))
}

/// `cuGraphConditionalHandleCreate(CUgraphConditionalHandle *pHandle_out,
/// CUgraph hGraph, CUcontext ctx, unsigned int defaultLaunchValue, unsigned
/// int flags)`: flags 0 or `CU_GRAPH_COND_ASSIGN_DEFAULT`; the value starts
/// at `defaultLaunchValue` either way.
///
/// # Safety
/// `out` is NULL or writable.
pub unsafe fn handle_create(out: *mut u64, graph: Handle, ctx: Handle, default: c_uint, flags: c_uint) -> CuResult<()> {
    let g = crate::graph::lookup_graph(graph)?;
    let ctx = context::given_or_current(ctx)?;
    if out.is_null() || flags & !ASSIGN_DEFAULT != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pHandle_out is NULL or flags are unknown"));
    }
    let addr = ctx.runtime.alloc(4)?;
    let h = Arc::new(CondHandle {
        addr,
        runtime: ctx.runtime.clone(),
        default: (flags & ASSIGN_DEFAULT != 0).then_some(default),
    });
    if let Err(e) = ctx.runtime.memset_d32(addr, default, 1) {
        drop(h);
        return Err(e.into());
    }
    handles().insert(addr, Arc::downgrade(&h));
    crate::graph::own_cond_handle(&g, h);
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(out, addr) }
}

/// `CUDA_CONDITIONAL_NODE_PARAMS`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ConditionalNodeParams {
    /// The handle the node tests.
    pub handle: u64,
    /// `CUgraphConditionalNodeType`.
    pub ty: c_int,
    /// Number of body graphs.
    pub size: c_uint,
    /// Out: the driver-owned array of body graphs.
    pub ph_graph_out: *mut Handle,
    /// The context (NULL: current).
    pub ctx: Handle,
}

/// Checks the parameters of a new conditional node: the handle is live and
/// the body count fits the type (if: 1 or 2; while: 1; switch: 1 or more).
pub fn check(p: &ConditionalNodeParams) -> CuResult<Arc<CondHandle>> {
    context::given_or_current(p.ctx)?;
    let ok = match p.ty {
        TYPE_IF => p.size == 1 || p.size == 2,
        TYPE_WHILE => p.size == 1,
        TYPE_SWITCH => p.size >= 1,
        _ => false,
    };
    if !ok {
        return Err(
            CuError::CUDA_ERROR_INVALID_VALUE.because(format!("conditional type {} with {} body graphs", p.ty, p.size))
        );
    }
    lookup(p.handle)
}
