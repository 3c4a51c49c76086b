//! Contexts: `CUcontext` objects, each host thread's context stack, and the
//! per-device primary context.
//!
//! A context owns the allocations made and the modules loaded while it was
//! current; destroying it (or releasing a primary context for the last time)
//! frees them. All contexts of a device share the device's runtime context.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{c_int, c_uint};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::driver::{self, Device};
use crate::ffi::{write_opt, write_out, CUdevice, Handle};
use crate::handles::Registry;
use crate::result::{CuError, CuResult};

/// A `CUcontext`.
pub struct ContextObj {
    /// The device it belongs to.
    pub device: &'static Device,
    /// The device's runtime context.
    pub runtime: ptxvk_runtime::Context,
    /// Whether this is the device's primary context.
    pub primary: bool,
    /// The flags it was created with (`cuCtxSetFlags` changes them).
    pub flags: AtomicU32,
    /// `CUlimit` values (see [`LIMIT_DEFAULTS`]).
    limits: Mutex<[usize; LIMIT_COUNT]>,
    /// `CUfunc_cache` preference (recorded only).
    cache_config: AtomicI32,
    /// `CUsharedconfig` (recorded only).
    shared_config: AtomicI32,
    /// `cuCtxGetId`: unique over the process's lifetime.
    pub id: u64,
    owned: Mutex<Owned>,
    /// The sticky error of a kernel of this context that faulted, trapped
    /// or failed an assert (0: none): every later call returns it until the
    /// context is destroyed or (primary) reset.
    sticky: AtomicU32,
}

/// Number of `CUlimit` values answered (`CU_LIMIT_STACK_SIZE` ..
/// `CU_LIMIT_PERSISTING_L2_CACHE_SIZE`).
pub const LIMIT_COUNT: usize = 7;

/// Defaults of the limits, as NVIDIA's driver reports them on sm_80: stack
/// 1 KiB per thread, printf FIFO 1 MiB, malloc heap 8 MiB, device-runtime
/// sync depth 2 and pending launches 2048, L2 fetch granularity 64 bytes,
/// no persisting L2.
pub const LIMIT_DEFAULTS: [usize; LIMIT_COUNT] = [1024, 1 << 20, 8 << 20, 2, 2048, 64, 0];

/// `CU_LIMIT_SHMEM_SIZE` .. `CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED`: known, not
/// supported (except [`LIMIT_CIG_ENABLED`]'s query).
const LIMIT_UNSUPPORTED: std::ops::RangeInclusive<c_int> = 7..=9;

/// `CU_LIMIT_CIG_ENABLED`: whether the context is a CUDA-in-graphics one
/// (read-only). None is here: it reads 0 (cuBLAS 13 asks at `cublasCreate`).
const LIMIT_CIG_ENABLED: c_int = 8;

/// Next `cuCtxGetId` value.
static NEXT_CONTEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What a context releases when it goes.
#[derive(Default)]
pub struct Owned {
    /// Device allocations (`cuMemAlloc`, `cuMemAllocManaged`), by address.
    pub allocations: BTreeMap<u64, Allocation>,
    /// Module handles (`cuModuleLoad*`), as addresses.
    pub modules: BTreeSet<usize>,
}

/// How an allocation of [`Owned::allocations`] was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocation {
    /// `cuMemAlloc` and the like.
    Device,
    /// `cuMemAllocManaged` (`CU_POINTER_ATTRIBUTE_IS_MANAGED`): its device
    /// addresses are its host addresses.
    Managed,
}

impl ContextObj {
    /// What this context owns, locked.
    pub fn owned(&self) -> MutexGuard<'_, Owned> {
        self.owned.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Live contexts.
pub static CONTEXTS: Registry<ContextObj> = Registry::new();

/// The primary context of a device: its handle while active, and the
/// retain count.
#[derive(Default)]
pub struct PrimaryState {
    handle: Option<usize>,
    refcount: u32,
    flags: c_uint,
}

thread_local! {
    /// This thread's context stack; the last entry is the current context.
    static STACK: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

fn stack_top() -> Option<usize> {
    // After this thread's storage is destroyed (exit handlers), nothing is current.
    STACK.try_with(|s| s.borrow().last().copied()).ok().flatten()
}

/// The calling thread's current context.
///
/// `CUDA_ERROR_NOT_INITIALIZED` before `cuInit`; `CUDA_ERROR_INVALID_CONTEXT`
/// when no context is current; `CUDA_ERROR_CONTEXT_IS_DESTROYED` when the
/// current one has been destroyed (`cuCtxDestroy`, or the last release of a
/// primary context), as `cuda.h` documents that code.
pub fn current() -> CuResult<Arc<ContextObj>> {
    let obj = current_any()?;
    if let Some(err) = CuError::from_code(obj.sticky.load(Ordering::Acquire)) {
        return Err(err.because("a kernel of this context failed earlier (destroy or reset the context)"));
    }
    Ok(obj)
}

/// The current context even when a sticky error failed it: for the calls
/// that still answer then (queries of the context, which clients such as
/// numba make while closing a failed context).
pub fn current_any() -> CuResult<Arc<ContextObj>> {
    driver::driver()?;
    let top = stack_top()
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_CONTEXT.because("no context is current on this thread"))?;
    CONTEXTS
        .get(top as Handle)
        .ok_or_else(|| CuError::CUDA_ERROR_CONTEXT_IS_DESTROYED.because("the current context has been destroyed"))
}

/// Whether `code` is an error that leaves a context unusable in CUDA: a
/// kernel that faulted, trapped or failed an assert.
pub fn is_sticky(code: u32) -> bool {
    [
        CuError::CUDA_ERROR_ILLEGAL_ADDRESS,
        CuError::CUDA_ERROR_MISALIGNED_ADDRESS,
        CuError::CUDA_ERROR_LAUNCH_FAILED,
        CuError::CUDA_ERROR_ASSERT,
        CuError::CUDA_ERROR_HARDWARE_STACK_ERROR,
        CuError::CUDA_ERROR_ILLEGAL_INSTRUCTION,
        CuError::CUDA_ERROR_INVALID_PC,
    ]
    .iter()
    .any(|e| e.code() == code)
}

/// After a call failed with a sticky error (see [`is_sticky`]): the
/// current context keeps the error, and the device's runtime context,
/// which every CUDA context of the device shares, is cleared of it so that
/// other contexts go on.
pub fn make_sticky(err: CuError) {
    let Some(top) = stack_top() else { return };
    let Some(obj) = CONTEXTS.get(top as Handle) else { return };
    let _ = obj.sticky.compare_exchange(0, err.code(), Ordering::AcqRel, Ordering::Acquire);
    obj.runtime.clear_failure();
}

/// The live context `ctx`; `CUDA_ERROR_INVALID_CONTEXT` otherwise (the
/// driver reports bad context handles as invalid contexts).
pub fn lookup(ctx: Handle) -> CuResult<Arc<ContextObj>> {
    driver::driver()?;
    CONTEXTS
        .get(ctx)
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_CONTEXT.because(format!("{ctx:p} is not a live context")))
}

fn new_context(device: &'static Device, primary: bool, flags: c_uint) -> CuResult<Handle> {
    let runtime = device.runtime()?.clone();
    let obj = Arc::new(ContextObj {
        device,
        runtime,
        primary,
        flags: AtomicU32::new(flags),
        limits: Mutex::new(LIMIT_DEFAULTS),
        cache_config: AtomicI32::new(0),
        shared_config: AtomicI32::new(0),
        id: NEXT_CONTEXT_ID.fetch_add(1, Ordering::Relaxed),
        owned: Mutex::new(Owned::default()),
        sticky: AtomicU32::new(0),
    });
    Ok(CONTEXTS.insert(obj))
}

/// Frees everything `ctx` owns: waits for the device, unloads its modules
/// and frees its allocations.
fn release_resources(ctx: &ContextObj) {
    let _ = ctx.runtime.synchronize();
    crate::ipc::forget_context(ctx.id);
    let owned = std::mem::take(&mut *ctx.owned());
    for module in owned.modules {
        crate::module::forget(module as Handle);
    }
    for addr in owned.allocations.into_keys() {
        let _ = ctx.runtime.free(addr);
    }
}

/// Context creation flags: `CU_CTX_SCHED_MASK` (0x07), `CU_CTX_MAP_HOST`
/// (0x08), `CU_CTX_LMEM_RESIZE_TO_MAX` (0x10), `CU_CTX_COREDUMP_ENABLE` (0x20),
/// `CU_CTX_USER_COREDUMP_ENABLE` (0x40), `CU_CTX_SYNC_MEMOPS` (0x80). They are
/// recorded and reported back; none changes behaviour here.
const KNOWN_CONTEXT_FLAGS: c_uint = 0xff;

/// "CUDA_ERROR_INVALID_VALUE" for flags outside [`KNOWN_CONTEXT_FLAGS`].
fn check_flags(flags: c_uint) -> CuResult<()> {
    if flags & !KNOWN_CONTEXT_FLAGS != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown context flags {flags:#x}")));
    }
    Ok(())
}

/// `cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)`:
/// creates a context and makes it current (pushes it on this thread's stack).
///
/// # Safety
/// `pctx` is NULL or writable.
pub unsafe fn ctx_create(pctx: *mut Handle, flags: c_uint, dev: CUdevice) -> CuResult<()> {
    let device = driver::device(dev)?;
    if pctx.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pctx is NULL"));
    }
    check_flags(flags)?;
    let handle = new_context(device, false, flags)?;
    STACK.with(|s| s.borrow_mut().push(handle as usize));
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(pctx, handle) }
}

/// `cuCtxDestroy_v2(CUcontext ctx)`: frees what the context owns; it is popped
/// from this thread's stack if there. A primary context cannot be destroyed
/// this way (`CUDA_ERROR_INVALID_CONTEXT`; use `cuDevicePrimaryCtxRelease`).
pub fn ctx_destroy(ctx: Handle) -> CuResult<()> {
    let obj = lookup(ctx)?;
    if obj.primary {
        return Err(CuError::CUDA_ERROR_INVALID_CONTEXT
            .because("a primary context is released with cuDevicePrimaryCtxRelease, not destroyed"));
    }
    crate::export_table::context_released(ctx);
    CONTEXTS.remove(ctx);
    let _ = STACK.try_with(|s| s.borrow_mut().retain(|&c| c != ctx as usize));
    release_resources(&obj);
    Ok(())
}

/// `cuCtxGetCurrent(CUcontext *pctx)`: NULL when no context is current.
///
/// # Safety
/// `pctx` is NULL or writable.
pub unsafe fn ctx_get_current(pctx: *mut Handle) -> CuResult<()> {
    driver::driver()?;
    let top = stack_top().map_or(std::ptr::null_mut(), |c| c as Handle);
    // SAFETY: forwarded caller contract.
    unsafe { write_out(pctx, top) }
}

/// `cuCtxSetCurrent(CUcontext ctx)`: replaces the top of the stack; NULL pops.
pub fn ctx_set_current(ctx: Handle) -> CuResult<()> {
    driver::driver()?;
    if ctx.is_null() {
        STACK.with(|s| s.borrow_mut().pop());
        return Ok(());
    }
    lookup(ctx)?;
    STACK.with(|s| {
        let mut s = s.borrow_mut();
        s.pop();
        s.push(ctx as usize);
    });
    Ok(())
}

/// `cuCtxPushCurrent_v2(CUcontext ctx)`.
pub fn ctx_push_current(ctx: Handle) -> CuResult<()> {
    lookup(ctx)?;
    STACK.with(|s| s.borrow_mut().push(ctx as usize));
    Ok(())
}

/// `cuCtxPopCurrent_v2(CUcontext *pctx)`: `pctx` may be NULL.
/// `CUDA_ERROR_INVALID_CONTEXT` when the stack is empty.
///
/// # Safety
/// `pctx` is NULL or writable.
pub unsafe fn ctx_pop_current(pctx: *mut Handle) -> CuResult<()> {
    driver::driver()?;
    let popped = STACK
        .with(|s| s.borrow_mut().pop())
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_CONTEXT.because("the context stack is empty"))?;
    // SAFETY: forwarded caller contract.
    unsafe { write_opt(pctx, popped as Handle) };
    Ok(())
}

/// `cuCtxGetDevice(CUdevice *device)`.
///
/// # Safety
/// `device` is NULL or writable.
pub unsafe fn ctx_get_device(device: *mut CUdevice) -> CuResult<()> {
    let ctx = current_any()?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(device, ctx.device.ordinal) }
}

/// `cuCtxGetFlags(unsigned int *flags)`.
///
/// # Safety
/// `flags` is NULL or writable.
pub unsafe fn ctx_get_flags(flags: *mut c_uint) -> CuResult<()> {
    let ctx = current_any()?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(flags, ctx.flags.load(Ordering::Relaxed)) }
}

/// `cuCtxSetFlags(unsigned int flags)`: on the current context.
pub fn ctx_set_flags(flags: c_uint) -> CuResult<()> {
    let ctx = current()?;
    check_flags(flags)?;
    ctx.flags.store(flags, Ordering::Relaxed);
    Ok(())
}

/// The context `ctx`, or the current one when `ctx` is NULL.
pub fn given_or_current(ctx: Handle) -> CuResult<Arc<ContextObj>> {
    if ctx.is_null() {
        current_any()
    } else {
        lookup(ctx)
    }
}

/// The handle of `ctx` (the current context when NULL), checked live.
/// Errors as [`given_or_current`].
pub fn handle_or_current(ctx: Handle) -> CuResult<Handle> {
    given_or_current(ctx)?;
    Ok(if ctx.is_null() { stack_top().map_or(std::ptr::null_mut(), |c| c as Handle) } else { ctx })
}

/// `cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)`: NULL means current.
///
/// # Safety
/// `device` is NULL or writable.
pub unsafe fn ctx_get_device_v2(device: *mut CUdevice, ctx: Handle) -> CuResult<()> {
    let c = given_or_current(ctx)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(device, c.device.ordinal) }
}

/// `cuCtxSynchronize_v2(CUcontext ctx)`: NULL means current.
pub fn ctx_synchronize_v2(ctx: Handle) -> CuResult<()> {
    let c = given_or_current(ctx)?;
    crate::capture::check_unsafe_call()?;
    c.runtime.synchronize()?;
    Ok(())
}

/// `cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)`: NULL means current.
///
/// # Safety
/// `id` is NULL or writable.
pub unsafe fn ctx_get_id(ctx: Handle, id: *mut u64) -> CuResult<()> {
    let c = given_or_current(ctx)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(id, c.id) }
}

/// `cuCtxGetLimit(size_t *pvalue, CUlimit limit)`.
/// "CUDA_ERROR_UNSUPPORTED_LIMIT" for limits this device does not have.
///
/// # Safety
/// `value` is NULL or writable.
pub unsafe fn ctx_get_limit(value: *mut usize, limit: c_int) -> CuResult<()> {
    let ctx = current_any()?;
    if value.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pvalue is NULL"));
    }
    if limit == LIMIT_CIG_ENABLED {
        // SAFETY: checked non-null; writable per the caller.
        return unsafe { write_out(value, 0) };
    }
    let i = limit_index(limit)?;
    let v = ctx.limits.lock().unwrap_or_else(|p| p.into_inner())[i];
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(value, v) }
}

fn limit_index(limit: c_int) -> CuResult<usize> {
    match usize::try_from(limit) {
        Ok(i) if i < LIMIT_COUNT => Ok(i),
        _ if LIMIT_UNSUPPORTED.contains(&limit) => {
            Err(CuError::CUDA_ERROR_UNSUPPORTED_LIMIT.because(format!("limit {limit} is not supported")))
        }
        _ => Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown CUlimit {limit}"))),
    }
}

/// `cuCtxSetLimit(CUlimit limit, size_t value)`: `CU_LIMIT_PRINTF_FIFO_SIZE`
/// sizes the kernel printf FIFO and `CU_LIMIT_MALLOC_HEAP_SIZE` the device
/// heap (each only before the first launch of a kernel that uses it, as in
/// CUDA); `CU_LIMIT_STACK_SIZE` sizes the stack of recursive functions in
/// modules loaded from then on (at least the translator's 16 KiB, at most
/// 1 MiB: more is `CUDA_ERROR_INVALID_VALUE`) and is reported back as set;
/// the other values are recorded and reported back; the L2 fetch
/// granularity must be 0..=128.
pub fn ctx_set_limit(limit: c_int, value: usize) -> CuResult<()> {
    let ctx = current()?;
    if limit == LIMIT_CIG_ENABLED {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("CU_LIMIT_CIG_ENABLED can only be queried"));
    }
    let i = limit_index(limit)?;
    if i == 5 && value > 128 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("the L2 fetch granularity is at most 128 bytes"));
    }
    let value = if i == LIMIT_STACK_SIZE {
        ctx.runtime.set_stack_size(value as u64)?;
        value
    } else if i == LIMIT_PRINTF_FIFO_SIZE {
        ctx.runtime.set_printf_fifo_size(value as u64)?;
        ctx.runtime.printf_fifo_size() as usize
    } else if i == LIMIT_MALLOC_HEAP_SIZE {
        ctx.runtime.set_malloc_heap_size(value as u64)?;
        ctx.runtime.malloc_heap_size() as usize
    } else {
        value
    };
    ctx.limits.lock().unwrap_or_else(|p| p.into_inner())[i] = value;
    Ok(())
}

/// Index of `CU_LIMIT_STACK_SIZE`.
const LIMIT_STACK_SIZE: usize = 0;
/// Index of `CU_LIMIT_PRINTF_FIFO_SIZE`.
const LIMIT_PRINTF_FIFO_SIZE: usize = 1;
/// Index of `CU_LIMIT_MALLOC_HEAP_SIZE`.
const LIMIT_MALLOC_HEAP_SIZE: usize = 2;

/// `cuCtxGetCacheConfig(CUfunc_cache *pconfig)`.
///
/// # Safety
/// `config` is NULL or writable.
pub unsafe fn ctx_get_cache_config(config: *mut c_int) -> CuResult<()> {
    let ctx = current_any()?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(config, ctx.cache_config.load(Ordering::Relaxed)) }
}

/// `cuCtxSetCacheConfig(CUfunc_cache config)`: recorded; there is no L1/shared split here.
pub fn ctx_set_cache_config(config: c_int) -> CuResult<()> {
    let ctx = current()?;
    crate::launch::check_cache_config(config)?;
    ctx.cache_config.store(config, Ordering::Relaxed);
    Ok(())
}

/// `cuCtxGetSharedMemConfig(CUsharedconfig *pConfig)`.
///
/// # Safety
/// `config` is NULL or writable.
pub unsafe fn ctx_get_shared_mem_config(config: *mut c_int) -> CuResult<()> {
    let ctx = current_any()?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(config, ctx.shared_config.load(Ordering::Relaxed)) }
}

/// `cuCtxSetSharedMemConfig(CUsharedconfig config)`: 0..=2, recorded.
pub fn ctx_set_shared_mem_config(config: c_int) -> CuResult<()> {
    let ctx = current()?;
    if !(0..=2).contains(&config) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown CUsharedconfig {config}")));
    }
    ctx.shared_config.store(config, Ordering::Relaxed);
    Ok(())
}

/// `cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)`:
/// both 0 (stream priorities are accepted but have no effect); either
/// output may be NULL.
///
/// # Safety
/// Both are NULL or writable.
pub unsafe fn ctx_get_stream_priority_range(least: *mut c_int, greatest: *mut c_int) -> CuResult<()> {
    current_any()?;
    // SAFETY: optional outputs, writable per the caller.
    unsafe {
        write_opt(least, 0);
        write_opt(greatest, 0);
    }
    Ok(())
}

/// `cuCtxResetPersistingL2Cache()`: there is no persisting L2 to reset.
pub fn ctx_reset_persisting_l2_cache() -> CuResult<()> {
    current().map(|_| ())
}

/// `cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int
/// numParams, unsigned int flags, CUdevice dev)`: execution affinity is not
/// supported (`CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY` when asked for).
///
/// # Safety
/// `pctx` is NULL or writable.
pub unsafe fn ctx_create_v3(
    pctx: *mut Handle,
    params: *const std::ffi::c_void,
    num_params: c_int,
    flags: c_uint,
    dev: CUdevice,
) -> CuResult<()> {
    driver::device(dev)?;
    if num_params < 0 || (num_params > 0 && params.is_null()) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("bad execution affinity parameters"));
    }
    if num_params > 0 {
        return Err(CuError::CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY.because("execution affinity is not supported"));
    }
    // SAFETY: forwarded caller contract.
    unsafe { ctx_create(pctx, flags, dev) }
}

/// `CUctxCreateParams`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CtxCreateParams {
    exec_affinity: *const std::ffi::c_void,
    num_exec_affinity: c_int,
    cig: *const std::ffi::c_void,
}

/// `cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
/// unsigned int flags, CUdevice dev)`: NULL params, or params asking for
/// neither execution affinity nor CUDA-in-graphics, as `cuCtxCreate_v2`.
///
/// # Safety
/// `pctx` is NULL or writable; `params` is NULL or readable.
pub unsafe fn ctx_create_v4(
    pctx: *mut Handle,
    params: *const CtxCreateParams,
    flags: c_uint,
    dev: CUdevice,
) -> CuResult<()> {
    driver::device(dev)?;
    if !params.is_null() {
        // SAFETY: non-null and readable per the caller.
        let p = unsafe { params.read_unaligned() };
        if p.num_exec_affinity > 0 {
            return Err(CuError::CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY.because("execution affinity is not supported"));
        }
        if !p.cig.is_null() {
            return Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because("CUDA-in-graphics contexts are not supported"));
        }
    }
    // SAFETY: forwarded caller contract.
    unsafe { ctx_create(pctx, flags, dev) }
}

/// `cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)`:
/// `CUDA_ERROR_PEER_ACCESS_UNSUPPORTED` (devices do not share memory here).
pub fn ctx_enable_peer_access(peer: Handle, flags: c_uint) -> CuResult<()> {
    let ctx = current()?;
    let peer = lookup(peer)?;
    if flags != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("flags must be 0"));
    }
    if Arc::ptr_eq(&ctx, &peer) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("a context cannot be its own peer"));
    }
    Err(CuError::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED.because("peer access between Vulkan devices is not supported"))
}

/// `cuCtxDisablePeerAccess(CUcontext peerContext)`:
/// `CUDA_ERROR_PEER_ACCESS_NOT_ENABLED` (it never is).
pub fn ctx_disable_peer_access(peer: Handle) -> CuResult<()> {
    current()?;
    lookup(peer)?;
    Err(CuError::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED.because("peer access is never enabled here"))
}

/// `cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)`: 3020, the
/// version of the `_v2` context API every current program uses. A NULL `ctx`
/// means the current context.
///
/// # Safety
/// `version` is NULL or writable.
pub unsafe fn ctx_get_api_version(ctx: Handle, version: *mut c_uint) -> CuResult<()> {
    if ctx.is_null() {
        current_any()?;
    } else {
        lookup(ctx)?;
    }
    // SAFETY: forwarded caller contract.
    unsafe { write_out(version, 3020) }
}

/// `cuCtxSynchronize()`: waits for all work of the current context.
pub fn ctx_synchronize() -> CuResult<()> {
    let ctx = current()?;
    crate::capture::check_unsafe_call()?;
    ctx.runtime.synchronize()?;
    Ok(())
}

fn primary_state(device: &Device) -> MutexGuard<'_, PrimaryState> {
    device.primary.lock().unwrap_or_else(|p| p.into_inner())
}

/// `cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)`.
///
/// # Safety
/// `pctx` is NULL or writable.
pub unsafe fn primary_retain(pctx: *mut Handle, dev: CUdevice) -> CuResult<()> {
    let device = driver::device(dev)?;
    if pctx.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pctx is NULL"));
    }
    let mut state = primary_state(device);
    let handle = match state.handle {
        Some(h) => h as Handle,
        None => {
            let flags = state.flags;
            let h = new_context(device, true, flags)?;
            state.handle = Some(h as usize);
            h
        }
    };
    state.refcount += 1;
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(pctx, handle) }
}

/// `cuDevicePrimaryCtxRelease_v2(CUdevice dev)`: at the last release the
/// primary context is destroyed (its allocations and modules freed).
/// `CUDA_ERROR_INVALID_CONTEXT` if it is not active.
pub fn primary_release(dev: CUdevice) -> CuResult<()> {
    let device = driver::device(dev)?;
    let released = {
        let mut state = primary_state(device);
        if state.refcount == 0 {
            return Err(CuError::CUDA_ERROR_INVALID_CONTEXT.because("the primary context is not retained"));
        }
        state.refcount -= 1;
        if state.refcount == 0 {
            state.handle.take()
        } else {
            None
        }
    };
    // Outside the lock: context-local storage destructors call back into the API.
    if let Some(h) = released {
        crate::export_table::context_released(h as Handle);
        if let Some(obj) = CONTEXTS.remove(h as Handle) {
            release_resources(&obj);
        }
    }
    Ok(())
}

/// `cuDevicePrimaryCtxReset_v2(CUdevice dev)`: destroys the primary
/// context's resources now (first the destructors of its context-local
/// storage, see `export_table`); the handle stays valid while retained.
pub fn primary_reset(dev: CUdevice) -> CuResult<()> {
    let device = driver::device(dev)?;
    let handle = primary_state(device).handle;
    if let Some(h) = handle {
        crate::export_table::context_released(h as Handle);
        if let Some(obj) = CONTEXTS.get(h as Handle) {
            release_resources(&obj);
            obj.runtime.clear_failure();
            obj.sticky.store(0, Ordering::Release);
        }
    }
    Ok(())
}

/// `cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)`.
///
/// # Safety
/// `flags` and `active` are NULL or writable.
pub unsafe fn primary_get_state(dev: CUdevice, flags: *mut c_uint, active: *mut c_int) -> CuResult<()> {
    let device = driver::device(dev)?;
    if flags.is_null() || active.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("flags or active is NULL"));
    }
    let state = primary_state(device);
    // SAFETY: both checked non-null; writable per the caller.
    unsafe {
        write_out(flags, state.flags)?;
        write_out(active, c_int::from(state.handle.is_some()))
    }
}

/// `cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)`: the
/// scheduling flags are recorded and reported back; they change nothing.
pub fn primary_set_flags(dev: CUdevice, flags: c_uint) -> CuResult<()> {
    let device = driver::device(dev)?;
    check_flags(flags)?;
    let mut state = primary_state(device);
    state.flags = flags;
    if let Some(obj) = state.handle.and_then(|h| CONTEXTS.get(h as Handle)) {
        obj.flags.store(flags, Ordering::Relaxed);
    }
    Ok(())
}

/// `cuCtxGetDevResource(CUcontext hCtx, CUdevResource *resource,
/// CUdevResourceType type)`: the context's device's whole SM resource
/// (there are no green contexts; see `device::write_sm_resource`).
///
/// # Safety
/// `resource` is NULL or writable for a `CUdevResource`.
pub unsafe fn ctx_get_dev_resource(ctx: Handle, resource: *mut std::ffi::c_void, kind: c_int) -> CuResult<()> {
    let c = given_or_current(ctx)?;
    // SAFETY: forwarded caller contract.
    unsafe { crate::device::write_sm_resource(c.device, resource, kind) }
}
