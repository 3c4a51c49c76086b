//! Kernel launch (`cuLaunchKernel`) and function attributes
//! (`cuFuncGetAttribute`, `cuFuncSetAttribute`).

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::Ordering;

use crate::context;
use crate::driver;
use crate::ffi::{bytes, read_in, write_out, Handle};
use crate::module::{lookup_function, FunctionObj};
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

/// Registers per thread reported by `CU_FUNC_ATTRIBUTE_NUM_REGS` (there are
/// no registers to count; 32 lets occupancy calculators allow full blocks).
const REPORTED_REGISTERS: c_int = 32;

fn to_int(v: impl TryInto<c_int>) -> c_int {
    v.try_into().unwrap_or(c_int::MAX)
}

/// Most threads a block of `f` may have: the device limit, lowered by the
/// entry's `.maxntid` / `.reqntid`.
fn max_threads(f: &FunctionObj) -> u32 {
    let info = f.function.info();
    let mut limit = f.context.runtime.info().max_threads_per_block;
    for dims in [info.maxntid, info.reqntid].into_iter().flatten() {
        let n = dims.iter().map(|&d| u64::from(d.max(1))).product::<u64>();
        limit = limit.min(u32::try_from(n).unwrap_or(u32::MAX));
    }
    limit
}

/// `cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)`.
///
/// # Safety
/// `pi` is NULL or writable.
pub unsafe fn func_get_attribute(pi: *mut c_int, attrib: c_int, hfunc: Handle) -> CuResult<()> {
    let f = lookup_function(hfunc)?;
    if pi.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pi is NULL"));
    }
    let info = f.function.info();
    let (ma, mi) = driver::driver()?.compute_capability;
    let v = match attrib {
        CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK => to_int(max_threads(&f)),
        CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES => to_int(info.static_shared_bytes),
        CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES => to_int(f.const_bytes),
        CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES => to_int(info.local_bytes),
        CU_FUNC_ATTRIBUTE_NUM_REGS => REPORTED_REGISTERS,
        CU_FUNC_ATTRIBUTE_PTX_VERSION => f.ptx_version,
        CU_FUNC_ATTRIBUTE_BINARY_VERSION => ma * 10 + mi,
        CU_FUNC_ATTRIBUTE_CACHE_MODE_CA => 0,
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES => to_int(f.max_dynamic_shared.load(Ordering::Relaxed)),
        CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT => f.carveout.load(Ordering::Relaxed),
        // Cluster attributes: no clusters here.
        10..=LAST_FUNC_ATTRIBUTE => 0,
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
    let f = lookup_function(hfunc)?;
    match attrib {
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES => {
            let limit = f.context.runtime.info().max_shared_bytes;
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
    lookup_function(hfunc)?;
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
    let f = lookup_function(hfunc)?;
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
    let f = lookup_function(hfunc)?;
    stream::check(hstream)?;
    let grid = [grid_x, grid_y, grid_z];
    let block = [block_x, block_y, block_z];
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
    let args = match (kernel_params.is_null(), extra.is_null()) {
        (false, false) => {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("both kernelParams and extra are given"));
        }
        // SAFETY: forwarded caller contract.
        (true, false) => unsafe { args_from_extra(&f, extra) }?,
        // SAFETY: forwarded caller contract (NULL is handled inside).
        _ => unsafe { args_from_kernel_params(&f, kernel_params) }?,
    };
    let packed = f.function.pack_params(&args)?;
    f.context.runtime.launch(&f.function, grid, block, shared_mem_bytes, &packed)?;
    Ok(())
}
