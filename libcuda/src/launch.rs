//! Kernel launch (`cuLaunchKernel`) and function attributes
//! (`cuFuncGetAttribute`, `cuFuncSetAttribute`).

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::capture;
use crate::context;
use crate::driver;
use crate::ffi::{bytes, read_in, write_opt, write_out, Handle};
use crate::graph::{KernelNode, NodeKind};
use crate::library::resolve_function;
use crate::module::FunctionObj;
use crate::result::{CuError, CuResult};
use crate::stream;

/// `CU_LAUNCH_PARAM_END`: ends the `extra` array.
pub const CU_LAUNCH_PARAM_END: usize = 0;
/// `CU_LAUNCH_PARAM_BUFFER_POINTER`: next entry points to the packed parameter buffer.
pub const CU_LAUNCH_PARAM_BUFFER_POINTER: usize = 1;
/// `CU_LAUNCH_PARAM_BUFFER_SIZE`: next entry points to a `size_t` with its size.
pub const CU_LAUNCH_PARAM_BUFFER_SIZE: usize = 2;

/// `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`.
pub const CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: c_int = 0;
/// `CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES`.
pub const CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: c_int = 1;
/// `CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES`.
pub const CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: c_int = 2;
/// `CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES`.
pub const CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: c_int = 3;
/// `CU_FUNC_ATTRIBUTE_NUM_REGS`.
pub const CU_FUNC_ATTRIBUTE_NUM_REGS: c_int = 4;
/// `CU_FUNC_ATTRIBUTE_PTX_VERSION`.
pub const CU_FUNC_ATTRIBUTE_PTX_VERSION: c_int = 5;
/// `CU_FUNC_ATTRIBUTE_BINARY_VERSION`.
pub const CU_FUNC_ATTRIBUTE_BINARY_VERSION: c_int = 6;
/// `CU_FUNC_ATTRIBUTE_CACHE_MODE_CA`.
pub const CU_FUNC_ATTRIBUTE_CACHE_MODE_CA: c_int = 7;
/// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
pub const CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: c_int = 8;
/// `CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT`.
pub const CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: c_int = 9;
/// Last cluster attribute (`CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE`).
const LAST_FUNC_ATTRIBUTE: c_int = 15;
/// `CU_FUNC_ATTRIBUTE_DEVICE_NODE_UPDATE_SUPPORTED` (CUDA 13): 0, no device-side graph updates.
const CU_FUNC_ATTRIBUTE_DEVICE_NODE_UPDATE_SUPPORTED: c_int = 16;
/// `CU_FUNC_ATTRIBUTE_SHARED_MEMORY_MODE` (CUDA 13): `CU_SHARED_MEMORY_MODE_DEFAULT` (0).
const CU_FUNC_ATTRIBUTE_SHARED_MEMORY_MODE: c_int = 17;

/// Registers per thread reported by `CU_FUNC_ATTRIBUTE_NUM_REGS` (there are
/// no registers to count; 32 lets occupancy calculators allow full blocks).
const REPORTED_REGISTERS: c_int = 32;

fn to_int(v: impl TryInto<c_int>) -> c_int {
    v.try_into().unwrap_or(c_int::MAX)
}

/// Most threads a block of `f` may have: the device limit, lowered by the
/// entry's `.maxntid` / `.reqntid`, and by the translator's warp scratch
/// memory (per thread on the emulated warp path), which must fit in shared
/// memory with the static `.shared` variables.
fn max_threads(f: &FunctionObj) -> u32 {
    let info = f.function.info();
    let device = f.context.runtime.info();
    let mut limit = device.max_threads_per_block;
    for dims in [info.maxntid, info.reqntid].into_iter().flatten() {
        let n = dims.iter().map(|&d| u64::from(d.max(1))).product::<u64>();
        limit = limit.min(u32::try_from(n).unwrap_or(u32::MAX));
    }
    if info.scratch_words_per_invocation > 0 {
        // `.shared` that does not fit may spill; translator scratch may not.
        let spills = info.shared_spill && crate::device::shared_spill();
        let shared = if spills {
            u64::from(ptxvk_translator::abi::SHARED_HOT_ALIGN) + 8
        } else {
            ptxvk_translator::abi::shared_words(info.static_shared_bytes, 0) as u64 * 4
        };
        let fixed = shared + info.scratch_bytes(0);
        let room = u64::from(device.max_shared_bytes).saturating_sub(fixed);
        let threads = room / (u64::from(info.scratch_words_per_invocation) * 4) / 32 * 32;
        limit = limit.min(u32::try_from(threads).unwrap_or(u32::MAX));
    }
    limit
}

/// `cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)`.
///
/// # Safety
/// `pi` is NULL or writable.
pub unsafe fn func_get_attribute(pi: *mut c_int, attrib: c_int, hfunc: Handle) -> CuResult<()> {
    let f = resolve_function(hfunc)?;
    // SAFETY: forwarded caller contract.
    unsafe { function_attribute(pi, attrib, &f) }
}

/// `cuFuncGetAttribute` on a resolved function (also `cuKernelGetAttribute`).
///
/// # Safety
/// `pi` is NULL or writable.
pub unsafe fn function_attribute(pi: *mut c_int, attrib: c_int, f: &FunctionObj) -> CuResult<()> {
    if pi.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pi is NULL"));
    }
    let info = f.function.info();
    let v = match attrib {
        CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK => to_int(max_threads(f)),
        CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES => to_int(info.static_shared_bytes),
        CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES => to_int(f.const_bytes),
        CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES => to_int(info.local_bytes),
        CU_FUNC_ATTRIBUTE_NUM_REGS => REPORTED_REGISTERS,
        CU_FUNC_ATTRIBUTE_PTX_VERSION => f.ptx_version,
        CU_FUNC_ATTRIBUTE_BINARY_VERSION => {
            let (ma, mi) = driver::reported_compute_capability()?;
            ma * 10 + mi
        }
        CU_FUNC_ATTRIBUTE_CACHE_MODE_CA => 0,
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES => to_int(f.max_dynamic_shared.load(Ordering::Relaxed)),
        CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT => f.carveout.load(Ordering::Relaxed),
        // Cluster attributes: no clusters here.
        10..=LAST_FUNC_ATTRIBUTE => 0,
        CU_FUNC_ATTRIBUTE_DEVICE_NODE_UPDATE_SUPPORTED | CU_FUNC_ATTRIBUTE_SHARED_MEMORY_MODE => 0,
        other => return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown function attribute {other}"))),
    };
    // SAFETY: forwarded caller contract.
    unsafe { write_out(pi, v) }
}

/// `cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)`.
///
/// `MAX_DYNAMIC_SHARED_SIZE_BYTES` must leave room for the static shared
/// memory within the device's opt-in limit ("CUDA_ERROR_INVALID_VALUE"
/// otherwise); the carveout is 0..=100 or -1 and only recorded. Other
/// attributes are read-only (`CUDA_ERROR_INVALID_VALUE`).
pub fn func_set_attribute(hfunc: Handle, attrib: c_int, value: c_int) -> CuResult<()> {
    let f = resolve_function(hfunc)?;
    set_function_attribute(&f, attrib, value)
}

/// `cuFuncSetAttribute` on a resolved function (also `cuKernelSetAttribute`).
pub fn set_function_attribute(f: &FunctionObj, attrib: c_int, value: c_int) -> CuResult<()> {
    match attrib {
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES => {
            let limit = crate::device::shared_limits(f.context.runtime.info())?.0;
            let static_bytes = f.function.info().static_shared_bytes;
            let v = u32::try_from(value)
                .ok()
                .filter(|&v| u64::from(v) + u64::from(static_bytes) <= u64::from(limit))
                .ok_or_else(|| {
                CuError::CUDA_ERROR_INVALID_VALUE.because(format!(
                    "{value} bytes of dynamic shared memory plus {static_bytes} static exceed the device's {limit}"
                ))
            })?;
            f.max_dynamic_shared.store(v, Ordering::Relaxed);
            Ok(())
        }
        CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT => {
            if !(-1..=100).contains(&value) {
                return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("carveout must be -1 or 0..=100"));
            }
            f.carveout.store(value, Ordering::Relaxed);
            Ok(())
        }
        other => Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("function attribute {other} cannot be set"))),
    }
}

/// `cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)`: recorded
/// nowhere; there is no L1/shared split to configure.
pub fn func_set_cache_config(hfunc: Handle, config: c_int) -> CuResult<()> {
    resolve_function(hfunc)?;
    check_cache_config(config)
}

/// "CUDA_ERROR_INVALID_VALUE" unless `config` is a `CUfunc_cache` (0..=3).
pub fn check_cache_config(config: c_int) -> CuResult<()> {
    if !(0..=3).contains(&config) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown cache config {config}")));
    }
    Ok(())
}

/// `cuFuncGetName(const char **name, CUfunction hfunc)`: valid while the
/// function's module is loaded.
///
/// # Safety
/// `name` is NULL or writable.
pub unsafe fn func_get_name(name: *mut *const c_char, hfunc: Handle) -> CuResult<()> {
    let f = resolve_function(hfunc)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(name, f.name.as_ptr()) }
}

/// The parameter block from `kernelParams`: one pointer per parameter, each
/// to a value of the size the entry declares.
///
/// # Safety
/// `params` is NULL or an array with one readable pointer per parameter.
unsafe fn args_from_kernel_params(f: &FunctionObj, params: *mut *mut c_void) -> CuResult<Vec<&[u8]>> {
    let info = f.function.info();
    if info.params.is_empty() {
        return Ok(Vec::new());
    }
    if params.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!(
            "{} takes {} parameters but kernelParams and extra are NULL",
            info.name,
            info.params.len()
        )));
    }
    let mut args = Vec::with_capacity(info.params.len());
    for (i, p) in info.params.iter().enumerate() {
        // SAFETY: the array has one entry per parameter, per the caller.
        let ptr = unsafe { *params.add(i) };
        if ptr.is_null() {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("kernelParams[{i}] ({}) is NULL", p.name)));
        }
        // SAFETY: each entry points to a value of the parameter's size, per the caller.
        args.push(unsafe { bytes(ptr, p.size as usize) }?);
    }
    Ok(args)
}

/// The parameter block from `extra` (`CU_LAUNCH_PARAM_BUFFER_POINTER`,
/// `CU_LAUNCH_PARAM_BUFFER_SIZE`, ..., `CU_LAUNCH_PARAM_END`), laid out as
/// CUDA lays out parameters.
///
/// # Safety
/// `extra` is a `CU_LAUNCH_PARAM_END`-terminated key/value array whose buffer
/// pointer is readable for the size given.
unsafe fn args_from_extra<'a>(f: &FunctionObj, extra: *mut *mut c_void) -> CuResult<Vec<&'a [u8]>> {
    let mut buffer: *const c_void = std::ptr::null();
    let mut size: Option<usize> = None;
    let mut i = 0usize;
    loop {
        // SAFETY: the array is terminated by CU_LAUNCH_PARAM_END, per the caller.
        let key = unsafe { *extra.add(i) } as usize;
        match key {
            CU_LAUNCH_PARAM_END => break,
            CU_LAUNCH_PARAM_BUFFER_POINTER => {
                // SAFETY: a key is followed by its value.
                buffer = unsafe { *extra.add(i + 1) };
            }
            CU_LAUNCH_PARAM_BUFFER_SIZE => {
                // SAFETY: a key is followed by its value, a pointer to a size_t.
                let p = unsafe { *extra.add(i + 1) } as *const usize;
                // SAFETY: readable per the caller.
                size = Some(unsafe { read_in(p) }?);
            }
            other => {
                return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown key {other:#x} in extra")));
            }
        }
        i += 2;
    }
    let info = f.function.info();
    let (Some(size), false) = (size, buffer.is_null()) else {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE
            .because("extra needs both CU_LAUNCH_PARAM_BUFFER_POINTER and CU_LAUNCH_PARAM_BUFFER_SIZE"));
    };
    if size < info.param_bytes as usize {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE
            .because(format!("parameter buffer has {size} bytes, {} needs {}", info.name, info.param_bytes)));
    }
    // SAFETY: `buffer` is readable for `size` bytes per the caller.
    let block = unsafe { bytes(buffer, size) }?;
    info.params
        .iter()
        .map(|p| {
            let (start, end) = (p.offset as usize, p.offset as usize + p.size as usize);
            block.get(start..end).ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because("parameter buffer too small"))
        })
        .collect()
}

/// `cuLaunchKernel(CUfunction f, gridDimX..Z, blockDimX..Z, sharedMemBytes,
/// CUstream hStream, void **kernelParams, void **extra)`.
///
/// Parameters come from exactly one of `kernelParams` and `extra`
/// ("CUDA_ERROR_INVALID_VALUE" if both are given). The launch is queued in
/// order with all other work of the device; `hStream` is checked, not used.
///
/// # Safety
/// `kernel_params` is NULL or holds one readable pointer per parameter, each
/// to a value of the parameter's size; `extra` is NULL or a
/// `CU_LAUNCH_PARAM_END`-terminated key/value array whose buffer is readable
/// for the size it gives.
#[allow(clippy::too_many_arguments)]
pub unsafe fn launch_kernel(
    hfunc: Handle,
    grid_x: c_uint,
    grid_y: c_uint,
    grid_z: c_uint,
    block_x: c_uint,
    block_y: c_uint,
    block_z: c_uint,
    shared_mem_bytes: c_uint,
    hstream: Handle,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CuResult<()> {
    context::current()?;
    let f = resolve_function(hfunc)?;
    stream::check(hstream)?;
    let (grid, block) = ([grid_x, grid_y, grid_z], [block_x, block_y, block_z]);
    // SAFETY: forwarded caller contract.
    if unsafe { capture_launch(&f, hfunc, grid, block, shared_mem_bytes, hstream, kernel_params, extra) }? {
        return Ok(());
    }
    // SAFETY: forwarded caller contract.
    stream::note_work(hstream, || unsafe { launch(&f, grid, block, shared_mem_bytes, kernel_params, extra, false) })
}

/// A cooperative launch on a capturing stream: "CUDA_ERROR_NOT_SUPPORTED"
/// (graph kernel nodes here are not cooperative); nothing otherwise.
fn refuse_cooperative_capture(hstream: Handle) -> CuResult<()> {
    capture::capture_node(hstream, || {
        Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because("cooperative launches cannot be captured into a graph"))
    })
    .map(|_| ())
}

/// On a capturing stream, adds the launch as a kernel node (parameter
/// values copied now) and returns `true`.
///
/// # Safety
/// As [`launch_kernel`].
#[allow(clippy::too_many_arguments)]
unsafe fn capture_launch(
    f: &Arc<FunctionObj>,
    hfunc: Handle,
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared_mem_bytes: c_uint,
    hstream: Handle,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CuResult<bool> {
    let is_function = crate::module::FUNCTIONS.get(hfunc).is_some();
    let (func, kern) = if is_function { (hfunc as usize, 0) } else { (0, hfunc as usize) };
    capture::capture_node(hstream, || {
        // SAFETY: forwarded caller contract.
        let node =
            unsafe { KernelNode::new(f.clone(), func, kern, grid, block, shared_mem_bytes, kernel_params, extra) }?;
        Ok(NodeKind::Kernel(node))
    })
}

/// Checks a launch configuration and queues it.
///
/// # Safety
/// As [`launch_kernel`].
unsafe fn launch(
    f: &FunctionObj,
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared_mem_bytes: c_uint,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
    cooperative: bool,
) -> CuResult<()> {
    check_config(f, grid, block, shared_mem_bytes)?;
    // SAFETY: forwarded caller contract.
    let args = unsafe { collect_args(f, kernel_params, extra) }?;
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    let packed = f.function.pack_params(&refs)?;
    if cooperative {
        let dev = f.context.runtime.info();
        if !dev.cooperative_launch && grid.iter().map(|&g| u64::from(g)).product::<u64>() > 1 {
            return Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because(
                "cooperative launches of more than one block are not supported on this device (Vulkan does not \
                 promise that its workgroups run at once)",
            ));
        }
        f.context.runtime.launch_cooperative(&f.function, grid, block, shared_mem_bytes, &packed)?;
    } else {
        f.context.runtime.launch(&f.function, grid, block, shared_mem_bytes, &packed)?;
    }
    if launch_blocking() {
        f.context.runtime.synchronize()?;
    }
    Ok(())
}

/// `CUDA_LAUNCH_BLOCKING=1`: each kernel launch returns once the kernel has
/// run, and a kernel that fails makes its own launch call fail, as with
/// NVIDIA's driver (for debugging: which of the kernels queued since the
/// last synchronisation failed is otherwise not known).
fn launch_blocking() -> bool {
    static BLOCKING: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *BLOCKING.get_or_init(|| std::env::var("CUDA_LAUNCH_BLOCKING").is_ok_and(|v| v.trim() == "1"))
}

/// "CUDA_ERROR_INVALID_VALUE" unless the grid, block and dynamic shared
/// memory are within the device's and the function's limits.
pub fn check_config(f: &FunctionObj, grid: [c_uint; 3], block: [c_uint; 3], shared_mem_bytes: c_uint) -> CuResult<()> {
    if grid.contains(&0) || block.contains(&0) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE
            .because(format!("zero grid or block dimension: grid {grid:?}, block {block:?}")));
    }
    let dev = f.context.runtime.info();
    let threads = block.iter().map(|&d| u64::from(d)).product::<u64>();
    if (0..3).any(|i| block[i] > dev.max_block_dim[i] || grid[i] > dev.max_grid_dim[i])
        || threads > u64::from(dev.max_threads_per_block)
    {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!(
            "grid {grid:?} / block {block:?} exceed the device limits (grid {:?}, block {:?}, {} threads)",
            dev.max_grid_dim, dev.max_block_dim, dev.max_threads_per_block
        )));
    }
    let max_dynamic = f.max_dynamic_shared.load(Ordering::Relaxed);
    if shared_mem_bytes > max_dynamic {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!(
            "{shared_mem_bytes} bytes of dynamic shared memory exceed the function's limit of {max_dynamic} \
             (raise it with cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES))"
        )));
    }
    Ok(())
}

/// Copies of the parameter values from exactly one of `kernelParams` and
/// `extra` ("CUDA_ERROR_INVALID_VALUE" if both are given), one per
/// parameter the entry declares.
///
/// # Safety
/// As [`launch_kernel`].
pub unsafe fn collect_args(
    f: &FunctionObj,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CuResult<Vec<Vec<u8>>> {
    let args = match (kernel_params.is_null(), extra.is_null()) {
        (false, false) => {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("both kernelParams and extra are given"));
        }
        // SAFETY: forwarded caller contract.
        (true, false) => unsafe { args_from_extra(f, extra) }?,
        // SAFETY: forwarded caller contract (NULL is handled inside).
        _ => unsafe { args_from_kernel_params(f, kernel_params) }?,
    };
    Ok(args.into_iter().map(<[u8]>::to_vec).collect())
}

/// Queues a launch whose parameter values were copied by [`collect_args`]
/// (a graph's kernel node), after checking the configuration again.
pub fn launch_copied(
    f: &FunctionObj,
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared_mem_bytes: c_uint,
    args: &[Vec<u8>],
) -> CuResult<()> {
    check_config(f, grid, block, shared_mem_bytes)?;
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    let packed = f.function.pack_params(&refs)?;
    f.context.runtime.launch(&f.function, grid, block, shared_mem_bytes, &packed)?;
    Ok(())
}

/// `CUlaunchConfig`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct LaunchConfig {
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared_mem_bytes: c_uint,
    stream: Handle,
    attrs: *const LaunchAttribute,
    num_attrs: c_uint,
}

/// `CUlaunchAttribute`: an id and a 64-byte value union.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct LaunchAttribute {
    id: c_int,
    pad: [u8; 4],
    value: [u64; 8],
}

/// `CU_LAUNCH_ATTRIBUTE_COOPERATIVE`.
const LAUNCH_ATTRIBUTE_COOPERATIVE: c_int = 2;
/// `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`.
const LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: c_int = 4;
/// `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT`: `{CUevent event; int flags;
/// int triggerAtBlockStart;}`.
const LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT: c_int = 7;
/// `CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT`: `{CUevent event; int flags;}`.
const LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT: c_int = 12;
/// Largest `CUlaunchAttributeID` of CUDA 13.
const LAST_LAUNCH_ATTRIBUTE: c_int = 32;

/// `cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void
/// **kernelParams, void **extra)`: a `CUkernel` is accepted for `f`.
/// Attributes are checked: a cluster larger than one block is
/// `CUDA_ERROR_NOT_SUPPORTED` (there are no clusters here); a nonzero
/// `CU_LAUNCH_ATTRIBUTE_COOPERATIVE` makes it a cooperative launch (see
/// [`launch_cooperative_kernel`]); the events of
/// `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT` (which fires once every block
/// has triggered its dependents or ended) and
/// `CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT` (once every block has
/// begun) are recorded on the stream after the kernel, which is later
/// than CUDA's point and so orders everything it does; the others
/// (priority, access policy, programmatic serialisation, ...) need nothing,
/// since launches run one after another (a kernel's `griddepcontrol.wait`
/// finds its prerequisites complete).
///
/// # Safety
/// `config` is NULL or readable, with `numAttrs` readable attributes; the
/// parameters as [`launch_kernel`].
pub unsafe fn launch_kernel_ex(
    config: *const LaunchConfig,
    hfunc: Handle,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CuResult<()> {
    context::current()?;
    // SAFETY: forwarded caller contract.
    let cfg = unsafe { read_in(config) }?;
    let f = resolve_function(hfunc)?;
    stream::check(cfg.stream)?;
    if cfg.num_attrs > 0 && cfg.attrs.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("config->attrs is NULL with numAttrs > 0"));
    }
    let mut cooperative = false;
    let mut events: Vec<Handle> = Vec::new();
    for i in 0..cfg.num_attrs as usize {
        // SAFETY: `numAttrs` readable attributes, per the caller.
        let a = unsafe { cfg.attrs.add(i).read_unaligned() };
        match a.id {
            LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION => {
                let dims = [a.value[0] as u32, (a.value[0] >> 32) as u32, a.value[1] as u32];
                if dims.iter().any(|&d| d > 1) {
                    return Err(CuError::CUDA_ERROR_NOT_SUPPORTED
                        .because(format!("thread block clusters ({dims:?}) are not supported")));
                }
            }
            LAUNCH_ATTRIBUTE_COOPERATIVE => cooperative = a.value[0] as u32 != 0,
            LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT | LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT => {
                let event = a.value[0] as usize as Handle;
                stream::lookup_event(event)?;
                if a.value[1] as u32 & !1 != 0 {
                    return Err(CuError::CUDA_ERROR_INVALID_VALUE
                        .because(format!("launch attribute {}: unknown event flags {:#x}", a.id, a.value[1] as u32)));
                }
                events.push(event);
            }
            id if (0..=LAST_LAUNCH_ATTRIBUTE).contains(&id) => {}
            id => return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown launch attribute {id}"))),
        }
    }
    // SAFETY: forwarded caller contract.
    if cooperative {
        refuse_cooperative_capture(cfg.stream)?;
    } else if unsafe {
        capture_launch(&f, hfunc, cfg.grid, cfg.block, cfg.shared_mem_bytes, cfg.stream, kernel_params, extra)
    }? {
        for event in events {
            stream::event_record(event, cfg.stream)?;
        }
        return Ok(());
    }
    // SAFETY: forwarded caller contract.
    stream::note_work(cfg.stream, || unsafe {
        launch(&f, cfg.grid, cfg.block, cfg.shared_mem_bytes, kernel_params, extra, cooperative)
    })?;
    for event in events {
        stream::event_record(event, cfg.stream)?;
    }
    Ok(())
}

/// `cuLaunchCooperativeKernel(...)`: as `cuLaunchKernel` without `extra`,
/// and the kernel may synchronise its grid (`this_grid().sync()`). Every
/// block must run at once: more blocks than
/// `cuOccupancyMaxActiveBlocksPerMultiprocessor` x `multiProcessorCount`
/// is `CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE`. Devices without
/// `CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH` accept one-block grids only
/// (`CUDA_ERROR_NOT_SUPPORTED` otherwise).
///
/// # Safety
/// As [`launch_kernel`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn launch_cooperative_kernel(
    hfunc: Handle,
    grid_x: c_uint,
    grid_y: c_uint,
    grid_z: c_uint,
    block_x: c_uint,
    block_y: c_uint,
    block_z: c_uint,
    shared_mem_bytes: c_uint,
    hstream: Handle,
    kernel_params: *mut *mut c_void,
) -> CuResult<()> {
    context::current()?;
    let f = resolve_function(hfunc)?;
    stream::check(hstream)?;
    let (grid, block) = ([grid_x, grid_y, grid_z], [block_x, block_y, block_z]);
    refuse_cooperative_capture(hstream)?;
    // SAFETY: forwarded caller contract.
    stream::note_work(hstream, || unsafe {
        launch(&f, grid, block, shared_mem_bytes, kernel_params, std::ptr::null_mut(), true)
    })
}

/// `cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)`.
///
/// # Safety
/// `hmod` is NULL or writable.
pub unsafe fn func_get_module(hmod: *mut Handle, hfunc: Handle) -> CuResult<()> {
    let f = resolve_function(hfunc)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(hmod, f.module as Handle) }
}

/// `cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t
/// *paramOffset, size_t *paramSize)`: `CUDA_ERROR_INVALID_VALUE` past the
/// last parameter; outputs optional.
///
/// # Safety
/// `offset` and `size` are NULL or writable.
pub unsafe fn func_get_param_info(hfunc: Handle, index: usize, offset: *mut usize, size: *mut usize) -> CuResult<()> {
    let f = resolve_function(hfunc)?;
    // SAFETY: forwarded caller contract.
    unsafe { param_info(&f, index, offset, size) }
}

/// `cuFuncGetParamCount(CUfunction func, size_t *paramCount)`.
///
/// # Safety
/// `count` is NULL or writable.
pub unsafe fn func_get_param_count(hfunc: Handle, count: *mut usize) -> CuResult<()> {
    let f = resolve_function(hfunc)?;
    // SAFETY: forwarded caller contract.
    unsafe { param_count(&f, count) }
}

/// The number of parameters of `f`.
///
/// # Safety
/// `count` is NULL or writable.
pub unsafe fn param_count(f: &FunctionObj, count: *mut usize) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe { write_out(count, f.function.info().params.len()) }
}

/// Offset and size of parameter `index` of `f`.
///
/// # Safety
/// `offset` and `size` are NULL or writable.
pub unsafe fn param_info(f: &FunctionObj, index: usize, offset: *mut usize, size: *mut usize) -> CuResult<()> {
    let info = f.function.info();
    let p = info.params.get(index).ok_or_else(|| {
        CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{} has {} parameters", info.name, info.params.len()))
    })?;
    // SAFETY: optional outputs, writable per the caller.
    unsafe {
        write_opt(offset, p.offset as usize);
        write_opt(size, p.size as usize);
    }
    Ok(())
}

/// `cuFuncIsLoaded(CUfunctionLoadingState *state, CUfunction function)`:
/// always `CU_FUNCTION_LOADING_STATE_LOADED` (1).
///
/// # Safety
/// `state` is NULL or writable.
pub unsafe fn func_is_loaded(state: *mut c_int, hfunc: Handle) -> CuResult<()> {
    resolve_function(hfunc)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(state, 1) }
}

/// `cuFuncLoad(CUfunction function)`: functions are loaded with their module.
pub fn func_load(hfunc: Handle) -> CuResult<()> {
    resolve_function(hfunc).map(|_| ())
}

/// Blocks of `block_size` threads and `dynamic_smem` bytes of dynamic shared
/// memory that fit on one multiprocessor at once: limited by the threads
/// (2048) and blocks (32) per multiprocessor and by the shared memory.
fn blocks_per_sm(f: &FunctionObj, block_size: c_int, dynamic_smem: usize) -> CuResult<c_int> {
    let limits =
        BlockLimits { max_threads: max_threads(f), static_shared: u64::from(f.function.info().static_shared_bytes) };
    resident_blocks(f.context.runtime.info(), limits, block_size, dynamic_smem)
}

/// What a function allows of its blocks, for the occupancy calculations.
#[derive(Clone, Copy)]
struct BlockLimits {
    /// Most threads a block may have.
    max_threads: u32,
    /// Static shared memory per block.
    static_shared: u64,
}

/// Blocks of `block_size` threads and `dynamic_smem` bytes resident per
/// multiprocessor of `info`'s device (see [`blocks_per_sm`]).
fn resident_blocks(
    info: &ptxvk_runtime::DeviceInfo,
    limits: BlockLimits,
    block_size: c_int,
    dynamic_smem: usize,
) -> CuResult<c_int> {
    if block_size <= 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("blockSize must be positive"));
    }
    if block_size as u32 > limits.max_threads {
        return Ok(0);
    }
    let warps = (block_size + 31) / 32;
    let by_threads = MAX_THREADS_PER_SM / (warps * 32);
    let smem = limits.static_shared + dynamic_smem as u64;
    let per_sm = crate::device::shared_limits(info)?.1;
    let by_smem = u64::from(per_sm).checked_div(smem).map_or(MAX_BLOCKS_PER_SM, to_int);
    // A device with known co-residency (llvmpipe: a "multiprocessor" is a
    // thread of its pool, which runs one workgroup at a time) holds
    // `coresident_workgroups / multiprocessor_count` blocks per
    // multiprocessor, so that this times the multiprocessor count bounds a
    // cooperative launch exactly.
    let most = if info.cooperative_launch {
        to_int(u64::from(info.coresident_workgroups) / u64::from(info.multiprocessor_count.max(1))).max(1)
    } else {
        MAX_BLOCKS_PER_SM
    };
    Ok(by_threads.min(by_smem).clamp(0, most))
}

/// Threads per multiprocessor reported by the device attributes.
const MAX_THREADS_PER_SM: c_int = 2048;
/// Blocks per multiprocessor reported by the device attributes.
const MAX_BLOCKS_PER_SM: c_int = 32;

/// `cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction
/// func, int blockSize, size_t dynamicSMemSize)`.
///
/// # Safety
/// `num_blocks` is NULL or writable.
pub unsafe fn occupancy_max_active_blocks(
    num_blocks: *mut c_int,
    hfunc: Handle,
    block_size: c_int,
    dynamic_smem: usize,
) -> CuResult<()> {
    let f = resolve_function(hfunc)?;
    if num_blocks.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("numBlocks is NULL"));
    }
    let n = blocks_per_sm(&f, block_size, dynamic_smem)?;
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(num_blocks, n) }
}

/// `cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(...)`: the flags
/// (`CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE`) change nothing.
///
/// # Safety
/// As [`occupancy_max_active_blocks`].
pub unsafe fn occupancy_max_active_blocks_with_flags(
    num_blocks: *mut c_int,
    hfunc: Handle,
    block_size: c_int,
    dynamic_smem: usize,
    flags: c_uint,
) -> CuResult<()> {
    if flags > 1 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown occupancy flags {flags:#x}")));
    }
    // SAFETY: forwarded caller contract.
    unsafe { occupancy_max_active_blocks(num_blocks, hfunc, block_size, dynamic_smem) }
}

/// The cluster dimension of `config` (its `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`),
/// the block size and the dynamic shared memory, for the cluster occupancy
/// queries.
///
/// # Safety
/// `config` is NULL or readable, with `numAttrs` readable attributes.
unsafe fn cluster_query(config: *const LaunchConfig) -> CuResult<(Option<[u32; 3]>, c_int, usize)> {
    if config.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("config is NULL"));
    }
    // SAFETY: checked non-null; readable per the caller.
    let cfg = unsafe { read_in(config) }?;
    if cfg.num_attrs > 0 && cfg.attrs.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("config->attrs is NULL with numAttrs > 0"));
    }
    let mut cluster = None;
    for i in 0..cfg.num_attrs as usize {
        // SAFETY: `numAttrs` readable attributes, per the caller.
        let a = unsafe { cfg.attrs.add(i).read_unaligned() };
        match a.id {
            LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION => {
                let dims = [a.value[0] as u32, (a.value[0] >> 32) as u32, a.value[1] as u32];
                if dims.contains(&0) {
                    return Err(CuError::CUDA_ERROR_INVALID_CLUSTER_SIZE
                        .because(format!("cluster dimension {dims:?} has a zero")));
                }
                cluster = Some(dims);
            }
            id if (0..=LAST_LAUNCH_ATTRIBUTE).contains(&id) => {}
            id => return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown launch attribute {id}"))),
        }
    }
    let threads = cfg.block.iter().map(|&d| u64::from(d)).product::<u64>();
    if threads == 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("block dimension {:?} has a zero", cfg.block)));
    }
    Ok((cluster, to_int(threads), cfg.shared_mem_bytes as usize))
}

/// The block limits and device of a cluster occupancy query's function.
/// cuBLAS 13 asks with no function (`cublasLtCreate` passes NULL through
/// `cudaOccupancyMaxActiveClusters`, and NVIDIA's driver answers): then a
/// block is limited by the current context's device alone.
fn cluster_subject(hfunc: Handle) -> CuResult<(Arc<context::ContextObj>, BlockLimits)> {
    if hfunc.is_null() {
        let ctx = context::current()?;
        let limits = BlockLimits { max_threads: ctx.runtime.info().max_threads_per_block, static_shared: 0 };
        return Ok((ctx, limits));
    }
    let f = resolve_function(hfunc)?;
    let limits =
        BlockLimits { max_threads: max_threads(&f), static_shared: u64::from(f.function.info().static_shared_bytes) };
    Ok((f.context.clone(), limits))
}

/// `cuOccupancyMaxActiveClusters(int *numClusters, CUfunction func, const
/// CUlaunchConfig *config)`: how many clusters of `config`'s cluster
/// dimension can be resident at once. No device here launches clusters of
/// more than one block (`CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH` is 0, and such
/// a launch is `CUDA_ERROR_NOT_SUPPORTED`), so for those the answer is 0;
/// clusters of one block are blocks, as many as
/// `cuOccupancyMaxActiveBlocksPerMultiprocessor` per multiprocessor. The
/// functions here require no cluster size (`CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_*`
/// read 0), so the config must give one (`CUDA_ERROR_INVALID_CLUSTER_SIZE`
/// otherwise, as documented). `func` may be NULL (see `cluster_subject`).
///
/// # Safety
/// `num_clusters` is NULL or writable; `config` as `cluster_query`.
pub unsafe fn occupancy_max_active_clusters(
    num_clusters: *mut c_int,
    hfunc: Handle,
    config: *const LaunchConfig,
) -> CuResult<()> {
    let (ctx, limits) = cluster_subject(hfunc)?;
    if num_clusters.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("numClusters is NULL"));
    }
    // SAFETY: forwarded caller contract.
    let (cluster, threads, smem) = unsafe { cluster_query(config) }?;
    let Some(dims) = cluster else {
        return Err(CuError::CUDA_ERROR_INVALID_CLUSTER_SIZE
            .because("the function requires no cluster size, so config must give one"));
    };
    let info = ctx.runtime.info();
    let n = if dims == [1, 1, 1] {
        let sms = to_int(info.multiprocessor_count.max(1));
        resident_blocks(info, limits, threads, smem)?.saturating_mul(sms)
    } else {
        0
    };
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(num_clusters, n) }
}

/// `cuOccupancyMaxPotentialClusterSize(int *clusterSize, CUfunction func,
/// const CUlaunchConfig *config)`: the largest cluster, in blocks, that can
/// run: one block (there are no larger clusters here), or 0 when a block of
/// `config`'s shape cannot run at all. `func` may be NULL (see
/// `cluster_subject`).
///
/// # Safety
/// As [`occupancy_max_active_clusters`].
pub unsafe fn occupancy_max_potential_cluster_size(
    cluster_size: *mut c_int,
    hfunc: Handle,
    config: *const LaunchConfig,
) -> CuResult<()> {
    let (ctx, limits) = cluster_subject(hfunc)?;
    if cluster_size.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("clusterSize is NULL"));
    }
    // SAFETY: forwarded caller contract.
    let (_, threads, smem) = unsafe { cluster_query(config) }?;
    let n = c_int::from(resident_blocks(ctx.runtime.info(), limits, threads, smem)? > 0);
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(cluster_size, n) }
}

/// `CUoccupancyB2DSize`: dynamic shared memory for a block size.
pub type BlockToSmem = Option<unsafe extern "C" fn(c_int) -> usize>;

/// `cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize,
/// CUfunction func, CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t
/// dynamicSMemSize, int blockSizeLimit)`: the block size (a multiple of 32)
/// with the most resident threads per multiprocessor, largest first on ties.
///
/// # Safety
/// `min_grid` and `block_size` are NULL or writable; `to_smem` is NULL or a
/// function that may be called with block sizes.
pub unsafe fn occupancy_max_potential_block_size(
    min_grid: *mut c_int,
    block_size: *mut c_int,
    hfunc: Handle,
    to_smem: BlockToSmem,
    dynamic_smem: usize,
    limit: c_int,
) -> CuResult<()> {
    let f = resolve_function(hfunc)?;
    if min_grid.is_null() || block_size.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("minGridSize or blockSize is NULL"));
    }
    let max = max_threads(&f) as c_int;
    let max = if limit > 0 { max.min(limit) } else { max };
    let (mut best, mut best_threads) = (0, -1);
    let mut size = (max / 32) * 32;
    if size == 0 {
        size = max;
    }
    while size > 0 {
        let smem = match to_smem {
            // SAFETY: the caller's callback, called as the driver API documents.
            Some(cb) => unsafe { cb(size) },
            None => dynamic_smem,
        };
        let blocks = blocks_per_sm(&f, size, smem)?;
        if blocks * size > best_threads {
            best_threads = blocks * size;
            best = size;
        }
        size -= 32;
    }
    let sms = to_int(f.context.runtime.info().multiprocessor_count.max(1));
    let per_sm = if best > 0 {
        let smem = match to_smem {
            // SAFETY: as above.
            Some(cb) => unsafe { cb(best) },
            None => dynamic_smem,
        };
        blocks_per_sm(&f, best, smem)?
    } else {
        0
    };
    // SAFETY: both checked non-null; writable per the caller.
    unsafe {
        write_out(min_grid, per_sm.saturating_mul(sms))?;
        write_out(block_size, best)
    }
}

/// `cuOccupancyMaxPotentialBlockSizeWithFlags(...)`.
///
/// # Safety
/// As [`occupancy_max_potential_block_size`].
pub unsafe fn occupancy_max_potential_block_size_with_flags(
    min_grid: *mut c_int,
    block_size: *mut c_int,
    hfunc: Handle,
    to_smem: BlockToSmem,
    dynamic_smem: usize,
    limit: c_int,
    flags: c_uint,
) -> CuResult<()> {
    if flags > 1 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown occupancy flags {flags:#x}")));
    }
    // SAFETY: forwarded caller contract.
    unsafe { occupancy_max_potential_block_size(min_grid, block_size, hfunc, to_smem, dynamic_smem, limit) }
}

/// `cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize,
/// CUfunction func, int numBlocks, int blockSize)`.
///
/// # Safety
/// `dynamic_smem` is NULL or writable.
pub unsafe fn occupancy_available_dynamic_smem(
    dynamic_smem: *mut usize,
    hfunc: Handle,
    num_blocks: c_int,
    block_size: c_int,
) -> CuResult<()> {
    let f = resolve_function(hfunc)?;
    if num_blocks <= 0 || block_size <= 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("numBlocks and blockSize must be positive"));
    }
    let info = f.context.runtime.info();
    let per_block = u64::from(crate::device::shared_limits(info)?.1) / num_blocks as u64;
    let avail = per_block
        .min(u64::from(f.max_dynamic_shared.load(Ordering::Relaxed)) + u64::from(f.function.info().static_shared_bytes))
        .saturating_sub(u64::from(f.function.info().static_shared_bytes));
    // SAFETY: forwarded caller contract.
    unsafe { write_out(dynamic_smem, avail as usize) }
}
