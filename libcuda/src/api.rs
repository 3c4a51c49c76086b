//! The exported C entry points.
//!
//! Every `extern "C"` function is generated from the one list below: it runs
//! its implementation under [`guard`] (no panic crosses the C ABI; the
//! `Result` becomes the `CUresult`). The same list gives `cuGetProcAddress`
//! its table. Names are the symbols `cuda.h` maps its API names to (`_v2`
//! where the header says so).
#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_uint, c_void};

use crate::context as ctx;
use crate::device as dev;
use crate::ffi::{c_str, write_opt, write_out, CUdevice, CUdeviceptr, Handle};
use crate::launch;
use crate::memory as mem;
use crate::module as modl;
use crate::result::{error_name, error_string, guard, CUresult, CuError, CuResult};
use crate::stream;
use crate::tensor_map as tmap;

/// Calls an implementation: `safe` ones directly, `raw` ones (which take C
/// pointers) in an `unsafe` block.
macro_rules! call_impl {
    (safe $e:expr) => {
        $e
    };
    (raw $e:expr) => {
        // SAFETY: the exported function's caller upholds the driver API's
        // contract for every pointer argument, which is exactly the contract
        // of the implementation it is forwarded to.
        unsafe { $e }
    };
}

macro_rules! exports {
    ($( $(#[doc = $doc:literal])* $kind:ident fn $name:ident($($arg:ident: $ty:ty),* $(,)?) => $imp:path; )*) => {
        $(
            $(#[doc = $doc])*
            ///
            /// # Safety
            /// Pointer arguments must be NULL or valid for what the CUDA driver
            /// API documents for this function.
            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> CUresult {
                guard(stringify!($name), || call_impl!($kind $imp($($arg),*)))
            }
        )*

        /// The exported entry point called `symbol`, if there is one.
        pub fn exported(symbol: &str) -> Option<*mut c_void> {
            match symbol {
                $( stringify!($name) => Some($name as *const () as *mut c_void), )*
                _ => None,
            }
        }

        /// Names of every exported entry point.
        pub const EXPORTED_NAMES: &[&str] = &[$( stringify!($name) ),*];
    };
}

exports! {
    /// `cuInit`.
    safe fn cuInit(flags: c_uint) => dev::init;
    /// `cuDriverGetVersion`.
    raw fn cuDriverGetVersion(version: *mut c_int) => dev::driver_get_version;
    /// `cuGetErrorName`.
    raw fn cuGetErrorName(error: CUresult, p_str: *mut *const c_char) => get_error_name;
    /// `cuGetErrorString`.
    raw fn cuGetErrorString(error: CUresult, p_str: *mut *const c_char) => get_error_string;
    /// `cuGetProcAddress_v2` (CUDA 12).
    raw fn cuGetProcAddress_v2(symbol: *const c_char, pfn: *mut *mut c_void, cuda_version: c_int, flags: u64, symbol_status: *mut c_int) => get_proc_address;
    /// `cuGetProcAddress` (CUDA 11.3).
    raw fn cuGetProcAddress(symbol: *const c_char, pfn: *mut *mut c_void, cuda_version: c_int, flags: u64) => get_proc_address_v1;
    /// `cuGetExportTable`: the undocumented tables of NVIDIA's runtime are not provided.
    safe fn cuGetExportTable(table: *mut *const c_void, id: *const c_void) => get_export_table;

    /// `cuDeviceGet`.
    raw fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int) => dev::device_get;
    /// `cuDeviceGetCount`.
    raw fn cuDeviceGetCount(count: *mut c_int) => dev::device_get_count;
    /// `cuDeviceGetName`.
    raw fn cuDeviceGetName(name: *mut c_char, len: c_int, device: CUdevice) => dev::device_get_name;
    /// `cuDeviceGetAttribute`.
    raw fn cuDeviceGetAttribute(pi: *mut c_int, attrib: c_int, device: CUdevice) => dev::device_get_attribute;
    /// `cuDeviceTotalMem_v2`.
    raw fn cuDeviceTotalMem_v2(bytes: *mut usize, device: CUdevice) => dev::device_total_mem;
    /// `cuDeviceGetUuid`.
    raw fn cuDeviceGetUuid(uuid: *mut [u8; 16], device: CUdevice) => dev::device_get_uuid;
    /// `cuDeviceGetUuid_v2`.
    raw fn cuDeviceGetUuid_v2(uuid: *mut [u8; 16], device: CUdevice) => dev::device_get_uuid;
    /// `cuDeviceComputeCapability`.
    raw fn cuDeviceComputeCapability(major: *mut c_int, minor: *mut c_int, device: CUdevice) => dev::device_compute_capability;
    /// `cuDeviceGetPCIBusId`.
    raw fn cuDeviceGetPCIBusId(bus_id: *mut c_char, len: c_int, device: CUdevice) => dev::device_get_pci_bus_id;

    /// `cuDevicePrimaryCtxRetain`.
    raw fn cuDevicePrimaryCtxRetain(pctx: *mut Handle, device: CUdevice) => ctx::primary_retain;
    /// `cuDevicePrimaryCtxRelease_v2`.
    safe fn cuDevicePrimaryCtxRelease_v2(device: CUdevice) => ctx::primary_release;
    /// `cuDevicePrimaryCtxRelease` (CUDA 7.0 name, same behaviour).
    safe fn cuDevicePrimaryCtxRelease(device: CUdevice) => ctx::primary_release;
    /// `cuDevicePrimaryCtxReset_v2`.
    safe fn cuDevicePrimaryCtxReset_v2(device: CUdevice) => ctx::primary_reset;
    /// `cuDevicePrimaryCtxReset`.
    safe fn cuDevicePrimaryCtxReset(device: CUdevice) => ctx::primary_reset;
    /// `cuDevicePrimaryCtxGetState`.
    raw fn cuDevicePrimaryCtxGetState(device: CUdevice, flags: *mut c_uint, active: *mut c_int) => ctx::primary_get_state;
    /// `cuDevicePrimaryCtxSetFlags_v2`.
    safe fn cuDevicePrimaryCtxSetFlags_v2(device: CUdevice, flags: c_uint) => ctx::primary_set_flags;
    /// `cuDevicePrimaryCtxSetFlags`.
    safe fn cuDevicePrimaryCtxSetFlags(device: CUdevice, flags: c_uint) => ctx::primary_set_flags;

    /// `cuCtxCreate_v2`.
    raw fn cuCtxCreate_v2(pctx: *mut Handle, flags: c_uint, device: CUdevice) => ctx::ctx_create;
    /// `cuCtxDestroy_v2`.
    safe fn cuCtxDestroy_v2(context: Handle) => ctx::ctx_destroy;
    /// `cuCtxGetCurrent`.
    raw fn cuCtxGetCurrent(pctx: *mut Handle) => ctx::ctx_get_current;
    /// `cuCtxSetCurrent`.
    safe fn cuCtxSetCurrent(context: Handle) => ctx::ctx_set_current;
    /// `cuCtxPushCurrent_v2`.
    safe fn cuCtxPushCurrent_v2(context: Handle) => ctx::ctx_push_current;
    /// `cuCtxPopCurrent_v2`.
    raw fn cuCtxPopCurrent_v2(pctx: *mut Handle) => ctx::ctx_pop_current;
    /// `cuCtxGetDevice`.
    raw fn cuCtxGetDevice(device: *mut CUdevice) => ctx::ctx_get_device;
    /// `cuCtxGetFlags`.
    raw fn cuCtxGetFlags(flags: *mut c_uint) => ctx::ctx_get_flags;
    /// `cuCtxGetApiVersion`.
    raw fn cuCtxGetApiVersion(context: Handle, version: *mut c_uint) => ctx::ctx_get_api_version;
    /// `cuCtxSynchronize`.
    safe fn cuCtxSynchronize() => ctx::ctx_synchronize;

    /// `cuModuleLoad`.
    raw fn cuModuleLoad(module: *mut Handle, fname: *const c_char) => modl::module_load;
    /// `cuModuleLoadData`.
    raw fn cuModuleLoadData(module: *mut Handle, image: *const c_void) => modl::module_load_data;
    /// `cuModuleLoadDataEx`.
    raw fn cuModuleLoadDataEx(module: *mut Handle, image: *const c_void, num_options: c_uint, options: *const c_int, option_values: *mut *mut c_void) => modl::module_load_data_ex;
    /// `cuModuleLoadFatBinary`.
    safe fn cuModuleLoadFatBinary(module: Handle, fat_cubin: *const c_void) => modl::module_load_fat_binary;
    /// `cuModuleUnload`.
    safe fn cuModuleUnload(module: Handle) => modl::module_unload;
    /// `cuModuleGetFunction`.
    raw fn cuModuleGetFunction(hfunc: *mut Handle, module: Handle, name: *const c_char) => modl::module_get_function;
    /// `cuModuleGetGlobal_v2`.
    raw fn cuModuleGetGlobal_v2(dptr: *mut CUdeviceptr, bytes: *mut usize, module: Handle, name: *const c_char) => modl::module_get_global;

    /// `cuFuncGetAttribute`.
    raw fn cuFuncGetAttribute(pi: *mut c_int, attrib: c_int, hfunc: Handle) => launch::func_get_attribute;
    /// `cuFuncSetAttribute`.
    safe fn cuFuncSetAttribute(hfunc: Handle, attrib: c_int, value: c_int) => launch::func_set_attribute;
    /// `cuFuncSetCacheConfig`.
    safe fn cuFuncSetCacheConfig(hfunc: Handle, config: c_int) => launch::func_set_cache_config;
    /// `cuFuncGetName`.
    raw fn cuFuncGetName(name: *mut *const c_char, hfunc: Handle) => launch::func_get_name;
    /// `cuLaunchKernel`.
    raw fn cuLaunchKernel(hfunc: Handle, grid_x: c_uint, grid_y: c_uint, grid_z: c_uint, block_x: c_uint, block_y: c_uint, block_z: c_uint, shared_mem_bytes: c_uint, hstream: Handle, kernel_params: *mut *mut c_void, extra: *mut *mut c_void) => launch::launch_kernel;

    /// `cuMemAlloc_v2`.
    raw fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytesize: usize) => mem::mem_alloc;
    /// `cuMemFree_v2`.
    safe fn cuMemFree_v2(dptr: CUdeviceptr) => mem::mem_free;
    /// `cuMemGetInfo_v2`.
    raw fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) => mem::mem_get_info;
    /// `cuMemGetAddressRange_v2`.
    raw fn cuMemGetAddressRange_v2(pbase: *mut CUdeviceptr, psize: *mut usize, dptr: CUdeviceptr) => mem::mem_get_address_range;
    /// `cuMemcpyHtoD_v2`.
    raw fn cuMemcpyHtoD_v2(dst: CUdeviceptr, src: *const c_void, n: usize) => mem::memcpy_htod;
    /// `cuMemcpyDtoH_v2`.
    raw fn cuMemcpyDtoH_v2(dst: *mut c_void, src: CUdeviceptr, n: usize) => mem::memcpy_dtoh;
    /// `cuMemcpyDtoD_v2`.
    safe fn cuMemcpyDtoD_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize) => mem::memcpy_dtod;
    /// `cuMemcpyHtoDAsync_v2`.
    raw fn cuMemcpyHtoDAsync_v2(dst: CUdeviceptr, src: *const c_void, n: usize, hstream: Handle) => mem::memcpy_htod_async;
    /// `cuMemcpyDtoHAsync_v2`.
    raw fn cuMemcpyDtoHAsync_v2(dst: *mut c_void, src: CUdeviceptr, n: usize, hstream: Handle) => mem::memcpy_dtoh_async;
    /// `cuMemcpyDtoDAsync_v2`.
    safe fn cuMemcpyDtoDAsync_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize, hstream: Handle) => mem::memcpy_dtod_async;
    /// `cuMemsetD8_v2`.
    safe fn cuMemsetD8_v2(dst: CUdeviceptr, value: u8, n: usize) => mem::memset_d8;
    /// `cuMemsetD16_v2`.
    safe fn cuMemsetD16_v2(dst: CUdeviceptr, value: u16, n: usize) => mem::memset_d16;
    /// `cuMemsetD32_v2`.
    safe fn cuMemsetD32_v2(dst: CUdeviceptr, value: u32, n: usize) => mem::memset_d32;
    /// `cuMemsetD8Async`.
    safe fn cuMemsetD8Async(dst: CUdeviceptr, value: u8, n: usize, hstream: Handle) => mem::memset_d8_async;
    /// `cuMemsetD16Async`.
    safe fn cuMemsetD16Async(dst: CUdeviceptr, value: u16, n: usize, hstream: Handle) => mem::memset_d16_async;
    /// `cuMemsetD32Async`.
    safe fn cuMemsetD32Async(dst: CUdeviceptr, value: u32, n: usize, hstream: Handle) => mem::memset_d32_async;

    /// `cuStreamCreate`.
    raw fn cuStreamCreate(ph_stream: *mut Handle, flags: c_uint) => stream::stream_create;
    /// `cuStreamCreateWithPriority`.
    raw fn cuStreamCreateWithPriority(ph_stream: *mut Handle, flags: c_uint, priority: c_int) => stream::stream_create_with_priority;
    /// `cuStreamDestroy_v2`.
    safe fn cuStreamDestroy_v2(hstream: Handle) => stream::stream_destroy;
    /// `cuStreamSynchronize`.
    safe fn cuStreamSynchronize(hstream: Handle) => stream::stream_synchronize;
    /// `cuStreamQuery`.
    safe fn cuStreamQuery(hstream: Handle) => stream::stream_query;

    /// `cuTensorMapEncodeTiled`.
    raw fn cuTensorMapEncodeTiled(tensor_map: *mut c_void, data_type: c_int, rank: u32, global_address: *mut c_void, global_dim: *const u64, global_strides: *const u64, box_dim: *const u32, element_strides: *const u32, interleave: c_int, swizzle: c_int, l2_promotion: c_int, oob_fill: c_int) => tmap::encode_tiled;
    /// `cuTensorMapEncodeIm2col`.
    raw fn cuTensorMapEncodeIm2col(tensor_map: *mut c_void, data_type: c_int, rank: u32, global_address: *mut c_void, global_dim: *const u64, global_strides: *const u64, lower_corner: *const c_int, upper_corner: *const c_int, channels_per_pixel: u32, pixels_per_column: u32, element_strides: *const u32, interleave: c_int, swizzle: c_int, l2_promotion: c_int, oob_fill: c_int) => tmap::encode_im2col;
    /// `cuTensorMapEncodeIm2colWide`.
    raw fn cuTensorMapEncodeIm2colWide(tensor_map: *mut c_void, data_type: c_int, rank: u32, global_address: *mut c_void, global_dim: *const u64, global_strides: *const u64, lower_corner_width: c_int, upper_corner_width: c_int, channels_per_pixel: u32, pixels_per_column: u32, element_strides: *const u32, interleave: c_int, mode: c_int, swizzle: c_int, l2_promotion: c_int, oob_fill: c_int) => tmap::encode_im2col_wide;
    /// `cuTensorMapReplaceAddress`.
    raw fn cuTensorMapReplaceAddress(tensor_map: *mut c_void, global_address: *mut c_void) => tmap::replace_address;
    /// `cuTensorMapSetAllocationClass`.
    raw fn cuTensorMapSetAllocationClass(tensor_map: *mut c_void, alloc_class: c_int, out_alloc_class: *mut c_int) => tmap::set_allocation_class;
}

/// `cuGetErrorName(CUresult error, const char **pStr)`: "CUDA_ERROR_INVALID_VALUE
/// if error is not a valid CUresult", with `*pStr` set to NULL.
///
/// # Safety
/// `p_str` is NULL or writable.
unsafe fn get_error_name(error: CUresult, p_str: *mut *const c_char) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe { string_answer(error_name(error), p_str) }
}

/// `cuGetErrorString(CUresult error, const char **pStr)`; as [`get_error_name`].
///
/// # Safety
/// `p_str` is NULL or writable.
unsafe fn get_error_string(error: CUresult, p_str: *mut *const c_char) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe { string_answer(error_string(error), p_str) }
}

/// # Safety
/// `p_str` is NULL or writable.
unsafe fn string_answer(s: Option<&'static std::ffi::CStr>, p_str: *mut *const c_char) -> CuResult<()> {
    match s {
        // SAFETY: forwarded caller contract.
        Some(s) => unsafe { write_out(p_str, s.as_ptr()) },
        None => {
            // SAFETY: forwarded caller contract.
            unsafe { write_opt(p_str, std::ptr::null()) };
            Err(CuError::CUDA_ERROR_INVALID_VALUE.because("not a CUresult"))
        }
    }
}

/// API names whose current version is a suffixed symbol, with that symbol.
const VERSIONED: &[(&str, &str)] = &[
    ("cuCtxCreate", "cuCtxCreate_v2"),
    ("cuCtxDestroy", "cuCtxDestroy_v2"),
    ("cuCtxPushCurrent", "cuCtxPushCurrent_v2"),
    ("cuCtxPopCurrent", "cuCtxPopCurrent_v2"),
    ("cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2"),
    ("cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2"),
    ("cuDevicePrimaryCtxSetFlags", "cuDevicePrimaryCtxSetFlags_v2"),
    ("cuDeviceTotalMem", "cuDeviceTotalMem_v2"),
    ("cuDeviceGetUuid", "cuDeviceGetUuid_v2"),
    ("cuModuleGetGlobal", "cuModuleGetGlobal_v2"),
    ("cuMemAlloc", "cuMemAlloc_v2"),
    ("cuMemFree", "cuMemFree_v2"),
    ("cuMemGetInfo", "cuMemGetInfo_v2"),
    ("cuMemGetAddressRange", "cuMemGetAddressRange_v2"),
    ("cuMemcpyHtoD", "cuMemcpyHtoD_v2"),
    ("cuMemcpyDtoH", "cuMemcpyDtoH_v2"),
    ("cuMemcpyDtoD", "cuMemcpyDtoD_v2"),
    ("cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2"),
    ("cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2"),
    ("cuMemcpyDtoDAsync", "cuMemcpyDtoDAsync_v2"),
    ("cuMemsetD8", "cuMemsetD8_v2"),
    ("cuMemsetD16", "cuMemsetD16_v2"),
    ("cuMemsetD32", "cuMemsetD32_v2"),
    ("cuStreamDestroy", "cuStreamDestroy_v2"),
    ("cuGetProcAddress", "cuGetProcAddress_v2"),
];

/// API names that got a version with a different signature which this
/// library does not export, with the CUDA version that introduced it. Asking
/// for them at that version or later finds nothing rather than a function of
/// the wrong signature.
const NEWER_THAN_EXPORTED: &[(&str, c_int)] = &[("cuCtxCreate", 11040)];

/// `CU_GET_PROC_ADDRESS_SUCCESS` / `..._SYMBOL_NOT_FOUND`.
const PROC_FOUND: c_int = 0;
const PROC_SYMBOL_NOT_FOUND: c_int = 1;

/// Resolves an API name (without version suffix) for CUDA version `cuda_version`.
pub fn resolve(symbol: &str, cuda_version: c_int) -> Option<*mut c_void> {
    if NEWER_THAN_EXPORTED.iter().any(|&(n, v)| n == symbol && cuda_version >= v) {
        return None;
    }
    let target = VERSIONED.iter().find(|(n, _)| *n == symbol).map_or(symbol, |(_, t)| t);
    exported(target)
}

/// `cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
/// cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)`.
/// The per-thread-default-stream flag changes nothing here (all work is
/// ordered). `CUDA_ERROR_NOT_FOUND` for names this library does not export.
///
/// # Safety
/// `symbol` is NULL or NUL-terminated; `pfn` and `symbol_status` are NULL or writable.
unsafe fn get_proc_address(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
    symbol_status: *mut c_int,
) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    let name = unsafe { c_str(symbol) }?;
    if pfn.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pfn is NULL"));
    }
    if flags > 2 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown flags {flags:#x}")));
    }
    match resolve(name, cuda_version) {
        Some(f) => {
            // SAFETY: forwarded caller contract.
            unsafe {
                write_out(pfn, f)?;
                write_opt(symbol_status, PROC_FOUND);
            }
            Ok(())
        }
        None => {
            // SAFETY: forwarded caller contract.
            unsafe {
                write_out(pfn, std::ptr::null_mut())?;
                write_opt(symbol_status, PROC_SYMBOL_NOT_FOUND);
            }
            Err(CuError::CUDA_ERROR_NOT_FOUND.because(format!("{name} is not provided by this driver")))
        }
    }
}

/// `cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)`.
///
/// # Safety
/// As [`get_proc_address`].
unsafe fn get_proc_address_v1(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
) -> CuResult<()> {
    // SAFETY: forwarded caller contract; no status output.
    unsafe { get_proc_address(symbol, pfn, cuda_version, flags, std::ptr::null_mut()) }
}

/// `cuGetExportTable`: `CUDA_ERROR_NOT_SUPPORTED`.
fn get_export_table(_table: *mut *const c_void, _id: *const c_void) -> CuResult<()> {
    Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because("cuGetExportTable: NVIDIA's private tables are not provided"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_address_resolves_versions() {
        assert_eq!(resolve("cuMemAlloc", 12000), exported("cuMemAlloc_v2"));
        assert!(resolve("cuMemAlloc", 12000).is_some());
        assert!(resolve("cuInit", 12000).is_some());
        assert!(resolve("cuCtxCreate", 11000).is_some());
        assert!(resolve("cuCtxCreate", 12000).is_none());
        assert!(resolve("cuNoSuchThing", 12000).is_none());
        for (_, target) in VERSIONED {
            assert!(exported(target).is_some(), "{target} is not exported");
        }
    }

    #[test]
    fn required_names_are_exported() {
        for name in ["cuInit", "cuLaunchKernel", "cuTensorMapEncodeTiled", "cuTensorMapEncodeIm2col"] {
            assert!(EXPORTED_NAMES.contains(&name));
        }
    }
}
