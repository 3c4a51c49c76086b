//! The exported C entry points.
//!
//! Every `extern "C"` function is generated from the one list below: it runs
//! its implementation under [`guard`] (no panic crosses the C ABI; the
//! `Result` becomes the `CUresult`). The same list gives `cuGetProcAddress`
//! its table. Names are the symbols `cuda.h` maps its API names to (`_v2`
//! where the header says so).
#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_uint, c_void};

use crate::capture as cap;
use crate::context as ctx;
use crate::device as dev;
use crate::ffi::{c_str, write_opt, write_out, CUdevice, CUdeviceptr, Handle};
use crate::graph::{self as gr, EdgeData};
use crate::ipc;
use crate::launch;
use crate::library as lib;
use crate::link;
use crate::logs;
use crate::memory as mem;
use crate::mempool as pool;
use crate::module as modl;
use crate::result::{error_name, error_string, guard, CUresult, CuError, CuResult};
use crate::stream;
use crate::tensor_map as tmap;
use crate::texture as tex;

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

/// Defines one exported function per name (the entry's symbol and its
/// aliases), each forwarding to the same implementation.
macro_rules! export_fns {
    ([$(#[doc = $doc:literal])*] [] $kind:ident $args:tt $imp:path) => {};
    ([$(#[doc = $doc:literal])*] [$first:ident $($rest:ident)*] $kind:ident ($($arg:ident: $ty:ty),*) $imp:path) => {
        $(#[doc = $doc])*
        ///
        /// # Safety
        /// Pointer arguments must be NULL or valid for what the CUDA driver
        /// API documents for this function.
        #[no_mangle]
        pub unsafe extern "C" fn $first($($arg: $ty),*) -> CUresult {
            guard(stringify!($first), || call_impl!($kind $imp($($arg),*)))
        }
        export_fns!([$(#[doc = $doc])*] [$($rest)*] $kind ($($arg: $ty),*) $imp);
    };
}

/// The list of implemented entry points: `safe|raw fn SYMBOL(args) [| ALIAS]* => implementation;`
/// (one per line: `build.rs` reads the symbols from here). Aliases are
/// the legacy symbols with the same signature and the per-thread default
/// stream (`_ptds`/`_ptsz`) symbols, which behave the same here because all
/// work is ordered on one queue.
macro_rules! exports {
    ($( $(#[doc = $doc:literal])* $kind:ident fn $name:ident $args:tt $(| $alias:ident)* => $imp:path; )*) => {
        $(
            export_fns!([$(#[doc = $doc])*] [$name $($alias)*] $kind $args $imp);
        )*

        /// The exported entry point called `symbol`, if there is one
        /// (implemented or a `CUDA_ERROR_NOT_SUPPORTED` stub).
        pub fn exported(symbol: &str) -> Option<*mut c_void> {
            match symbol {
                $(
                    stringify!($name) => Some($name as *const () as *mut c_void),
                    $( stringify!($alias) => Some($alias as *const () as *mut c_void), )*
                )*
                _ => unsupported_symbol(symbol),
            }
        }

        /// Names of every implemented entry point (aliases included).
        pub const IMPLEMENTED_NAMES: &[&str] = &[$( stringify!($name), $( stringify!($alias), )* )*];
    };
}

/// Exports each listed symbol as a function that returns
/// `CUDA_ERROR_NOT_SUPPORTED` (it ignores its arguments, which the C calling
/// convention allows: the caller owns them).
macro_rules! unsupported {
    ($( $name:ident, )*) => {
        $(
            /// Declared by `cuda.h`, not implemented: returns `CUDA_ERROR_NOT_SUPPORTED`.
            #[no_mangle]
            pub extern "C" fn $name() -> CUresult {
                guard(stringify!($name), || not_supported(stringify!($name)))
            }
        )*

        /// The `CUDA_ERROR_NOT_SUPPORTED` stub called `symbol`, if there is one.
        fn unsupported_symbol(symbol: &str) -> Option<*mut c_void> {
            match symbol {
                $( stringify!($name) => Some($name as *const () as *mut c_void), )*
                _ => None,
            }
        }

        /// Names of every stub.
        pub const UNSUPPORTED_NAMES: &[&str] = &[$( stringify!($name) ),*];
    };
}

/// The body of every stub.
fn not_supported(name: &str) -> CuResult<()> {
    Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because(format!("{name} is not implemented by ptxvk")))
}

/// Which symbol family a table entry belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// The default (legacy default stream) symbol.
    Plain,
    /// `_ptds`: per-thread default stream, synchronous function.
    Ptds,
    /// `_ptsz`: per-thread default stream, asynchronous function.
    Ptsz,
}

/// One version of one driver API function.
#[derive(Clone, Copy, Debug)]
pub struct ApiEntry {
    /// The API name (`cuMemAlloc`).
    pub name: &'static str,
    /// The CUDA version that introduced it (`1000 * major + 10 * minor`).
    pub version: u32,
    /// Default- or per-thread-stream symbol.
    pub variant: Variant,
    /// The exported symbol (`cuMemAlloc_v2`).
    pub symbol: &'static str,
}

// API_TABLE and the `unsupported!` list, generated by build.rs from cuda-api.tsv.
include!(concat!(env!("OUT_DIR"), "/cuda_api.rs"));

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
    /// `cuGetExportTable`: the private tables of NVIDIA's CUDA runtime (`export_table`).
    raw fn cuGetExportTable(table: *mut *const c_void, id: *const c_void) => crate::export_table::get_export_table;
    /// `cuProfilerStart`: there is no profiler to start.
    safe fn cuProfilerStart() => profiler_nothing;
    /// `cuProfilerStop`.
    safe fn cuProfilerStop() => profiler_nothing;

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
    /// `cuDeviceGetUuid` (and `_v2`).
    raw fn cuDeviceGetUuid(uuid: *mut [u8; 16], device: CUdevice) | cuDeviceGetUuid_v2 => dev::device_get_uuid;
    /// `cuDeviceGetDevResource`.
    raw fn cuDeviceGetDevResource(device: CUdevice, resource: *mut c_void, kind: c_int) => dev::device_get_dev_resource;
    /// `cuDeviceComputeCapability`.
    raw fn cuDeviceComputeCapability(major: *mut c_int, minor: *mut c_int, device: CUdevice) => dev::device_compute_capability;
    /// `cuDeviceGetPCIBusId`.
    raw fn cuDeviceGetPCIBusId(bus_id: *mut c_char, len: c_int, device: CUdevice) => dev::device_get_pci_bus_id;
    /// `cuDeviceGetByPCIBusId`.
    raw fn cuDeviceGetByPCIBusId(device: *mut CUdevice, bus_id: *const c_char) => dev::device_get_by_pci_bus_id;
    /// `cuDeviceGetProperties`.
    raw fn cuDeviceGetProperties(prop: *mut dev::DevProp, device: CUdevice) => dev::device_get_properties;
    /// `cuDeviceCanAccessPeer`.
    raw fn cuDeviceCanAccessPeer(can_access: *mut c_int, device: CUdevice, peer: CUdevice) => dev::device_can_access_peer;
    /// `cuDeviceGetP2PAttribute`.
    raw fn cuDeviceGetP2PAttribute(value: *mut c_int, attrib: c_int, src: CUdevice, dst: CUdevice) => dev::device_get_p2p_attribute;

    /// `cuDevicePrimaryCtxRetain`.
    raw fn cuDevicePrimaryCtxRetain(pctx: *mut Handle, device: CUdevice) => ctx::primary_retain;
    /// `cuDevicePrimaryCtxRelease_v2` (and the CUDA 7.0 symbol, same behaviour).
    safe fn cuDevicePrimaryCtxRelease_v2(device: CUdevice) | cuDevicePrimaryCtxRelease => ctx::primary_release;
    /// `cuDevicePrimaryCtxReset_v2`.
    safe fn cuDevicePrimaryCtxReset_v2(device: CUdevice) | cuDevicePrimaryCtxReset => ctx::primary_reset;
    /// `cuDevicePrimaryCtxGetState`.
    raw fn cuDevicePrimaryCtxGetState(device: CUdevice, flags: *mut c_uint, active: *mut c_int) => ctx::primary_get_state;
    /// `cuDevicePrimaryCtxSetFlags_v2`.
    safe fn cuDevicePrimaryCtxSetFlags_v2(device: CUdevice, flags: c_uint) | cuDevicePrimaryCtxSetFlags => ctx::primary_set_flags;

    /// `cuCtxCreate_v2` (and the CUDA 2.0 symbol of the same signature).
    raw fn cuCtxCreate_v2(pctx: *mut Handle, flags: c_uint, device: CUdevice) | cuCtxCreate => ctx::ctx_create;
    /// `cuCtxCreate_v3` (execution affinity).
    raw fn cuCtxCreate_v3(pctx: *mut Handle, params: *const c_void, num_params: c_int, flags: c_uint, device: CUdevice) => ctx::ctx_create_v3;
    /// `cuCtxCreate_v4` (`CUctxCreateParams`).
    raw fn cuCtxCreate_v4(pctx: *mut Handle, params: *const ctx::CtxCreateParams, flags: c_uint, device: CUdevice) => ctx::ctx_create_v4;
    /// `cuCtxDestroy_v2`.
    safe fn cuCtxDestroy_v2(context: Handle) | cuCtxDestroy => ctx::ctx_destroy;
    /// `cuCtxGetCurrent`.
    raw fn cuCtxGetCurrent(pctx: *mut Handle) => ctx::ctx_get_current;
    /// `cuCtxSetCurrent`.
    safe fn cuCtxSetCurrent(context: Handle) => ctx::ctx_set_current;
    /// `cuCtxPushCurrent_v2`.
    safe fn cuCtxPushCurrent_v2(context: Handle) | cuCtxPushCurrent => ctx::ctx_push_current;
    /// `cuCtxPopCurrent_v2`.
    raw fn cuCtxPopCurrent_v2(pctx: *mut Handle) | cuCtxPopCurrent => ctx::ctx_pop_current;
    /// `cuCtxGetDevice`.
    raw fn cuCtxGetDevice(device: *mut CUdevice) => ctx::ctx_get_device;
    /// `cuCtxGetDevResource`.
    raw fn cuCtxGetDevResource(hctx: Handle, resource: *mut c_void, kind: c_int) => ctx::ctx_get_dev_resource;
    /// `cuCtxGetDevice_v2` (CUDA 13).
    raw fn cuCtxGetDevice_v2(device: *mut CUdevice, context: Handle) => ctx::ctx_get_device_v2;
    /// `cuCtxGetFlags`.
    raw fn cuCtxGetFlags(flags: *mut c_uint) => ctx::ctx_get_flags;
    /// `cuCtxSetFlags`.
    safe fn cuCtxSetFlags(flags: c_uint) => ctx::ctx_set_flags;
    /// `cuCtxGetId`.
    raw fn cuCtxGetId(context: Handle, id: *mut u64) => ctx::ctx_get_id;
    /// `cuCtxGetApiVersion`.
    raw fn cuCtxGetApiVersion(context: Handle, version: *mut c_uint) => ctx::ctx_get_api_version;
    /// `cuCtxSynchronize`.
    safe fn cuCtxSynchronize() => ctx::ctx_synchronize;
    /// `cuCtxSynchronize_v2` (CUDA 13).
    safe fn cuCtxSynchronize_v2(context: Handle) => ctx::ctx_synchronize_v2;
    /// `cuCtxGetLimit`.
    raw fn cuCtxGetLimit(value: *mut usize, limit: c_int) => ctx::ctx_get_limit;
    /// `cuCtxSetLimit`.
    safe fn cuCtxSetLimit(limit: c_int, value: usize) => ctx::ctx_set_limit;
    /// `cuCtxGetCacheConfig`.
    raw fn cuCtxGetCacheConfig(config: *mut c_int) => ctx::ctx_get_cache_config;
    /// `cuCtxSetCacheConfig`.
    safe fn cuCtxSetCacheConfig(config: c_int) => ctx::ctx_set_cache_config;
    /// `cuCtxGetSharedMemConfig`.
    raw fn cuCtxGetSharedMemConfig(config: *mut c_int) => ctx::ctx_get_shared_mem_config;
    /// `cuCtxSetSharedMemConfig`.
    safe fn cuCtxSetSharedMemConfig(config: c_int) => ctx::ctx_set_shared_mem_config;
    /// `cuCtxGetStreamPriorityRange`.
    raw fn cuCtxGetStreamPriorityRange(least: *mut c_int, greatest: *mut c_int) => ctx::ctx_get_stream_priority_range;
    /// `cuCtxResetPersistingL2Cache`.
    safe fn cuCtxResetPersistingL2Cache() => ctx::ctx_reset_persisting_l2_cache;
    /// `cuCtxEnablePeerAccess`.
    safe fn cuCtxEnablePeerAccess(peer: Handle, flags: c_uint) => ctx::ctx_enable_peer_access;
    /// `cuCtxDisablePeerAccess`.
    safe fn cuCtxDisablePeerAccess(peer: Handle) => ctx::ctx_disable_peer_access;
    /// `cuCtxRecordEvent`.
    safe fn cuCtxRecordEvent(context: Handle, event: Handle) => stream::ctx_record_event;
    /// `cuCtxWaitEvent`.
    safe fn cuCtxWaitEvent(context: Handle, event: Handle) => stream::ctx_wait_event;

    /// `cuModuleLoad`.
    raw fn cuModuleLoad(module: *mut Handle, fname: *const c_char) => modl::module_load;
    /// `cuModuleLoadData`.
    raw fn cuModuleLoadData(module: *mut Handle, image: *const c_void) => modl::module_load_data;
    /// `cuModuleLoadDataEx`.
    raw fn cuModuleLoadDataEx(module: *mut Handle, image: *const c_void, num_options: c_uint, options: *const c_int, option_values: *mut *mut c_void) => modl::module_load_data_ex;
    /// `cuModuleLoadFatBinary`.
    raw fn cuModuleLoadFatBinary(module: *mut Handle, fat_cubin: *const c_void) => modl::module_load_fat_binary;
    /// `cuModuleUnload`.
    safe fn cuModuleUnload(module: Handle) => modl::module_unload;
    /// `cuModuleGetFunction`.
    raw fn cuModuleGetFunction(hfunc: *mut Handle, module: Handle, name: *const c_char) => modl::module_get_function;
    /// `cuModuleGetGlobal_v2`.
    raw fn cuModuleGetGlobal_v2(dptr: *mut CUdeviceptr, bytes: *mut usize, module: Handle, name: *const c_char) => modl::module_get_global;
    /// `cuModuleGetLoadingMode`.
    raw fn cuModuleGetLoadingMode(mode: *mut c_int) => modl::module_get_loading_mode;
    /// `cuModuleGetFunctionCount`.
    raw fn cuModuleGetFunctionCount(count: *mut c_uint, module: Handle) => modl::module_get_function_count;
    /// `cuModuleEnumerateFunctions`.
    raw fn cuModuleEnumerateFunctions(functions: *mut Handle, num: c_uint, module: Handle) => modl::module_enumerate_functions;

    /// `cuLinkCreate_v2`.
    raw fn cuLinkCreate_v2(num_options: c_uint, options: *const c_int, option_values: *mut *mut c_void, state_out: *mut Handle) | cuLinkCreate => link::link_create;
    /// `cuLinkAddData_v2`.
    raw fn cuLinkAddData_v2(state: Handle, kind: c_int, data: *mut c_void, size: usize, name: *const c_char, num_options: c_uint, options: *const c_int, option_values: *mut *mut c_void) | cuLinkAddData => link::link_add_data;
    /// `cuLinkAddFile_v2`.
    raw fn cuLinkAddFile_v2(state: Handle, kind: c_int, path: *const c_char, num_options: c_uint, options: *const c_int, option_values: *mut *mut c_void) | cuLinkAddFile => link::link_add_file;
    /// `cuLinkComplete`.
    raw fn cuLinkComplete(state: Handle, cubin_out: *mut *mut c_void, size_out: *mut usize) => link::link_complete;
    /// `cuLinkDestroy`.
    safe fn cuLinkDestroy(state: Handle) => link::link_destroy;

    /// `cuLibraryLoadData`.
    raw fn cuLibraryLoadData(library: *mut Handle, code: *const c_void, jit_options: *const c_int, jit_values: *mut *mut c_void, num_jit: c_uint, library_options: *const c_int, library_values: *mut *mut c_void, num_library: c_uint) => lib::library_load_data;
    /// `cuLibraryLoadFromFile`.
    raw fn cuLibraryLoadFromFile(library: *mut Handle, file_name: *const c_char, jit_options: *const c_int, jit_values: *mut *mut c_void, num_jit: c_uint, library_options: *const c_int, library_values: *mut *mut c_void, num_library: c_uint) => lib::library_load_from_file;
    /// `cuLibraryUnload`.
    safe fn cuLibraryUnload(library: Handle) => lib::library_unload;
    /// `cuLibraryGetKernel`.
    raw fn cuLibraryGetKernel(kernel: *mut Handle, library: Handle, name: *const c_char) => lib::library_get_kernel;
    /// `cuLibraryGetKernelCount`.
    raw fn cuLibraryGetKernelCount(count: *mut c_uint, library: Handle) => lib::library_get_kernel_count;
    /// `cuLibraryEnumerateKernels`.
    raw fn cuLibraryEnumerateKernels(kernels: *mut Handle, num: c_uint, library: Handle) => lib::library_enumerate_kernels;
    /// `cuLibraryGetModule`.
    raw fn cuLibraryGetModule(module: *mut Handle, library: Handle) => lib::library_get_module;
    /// `cuLibraryGetGlobal`.
    raw fn cuLibraryGetGlobal(dptr: *mut CUdeviceptr, bytes: *mut usize, library: Handle, name: *const c_char) => lib::library_get_global;
    /// `cuKernelGetFunction`.
    raw fn cuKernelGetFunction(pfunc: *mut Handle, kernel: Handle) => lib::kernel_get_function;
    /// `cuKernelGetName`.
    raw fn cuKernelGetName(name: *mut *const c_char, kernel: Handle) => lib::kernel_get_name;
    /// `cuKernelGetLibrary`.
    raw fn cuKernelGetLibrary(library: *mut Handle, kernel: Handle) => lib::kernel_get_library;
    /// `cuKernelGetAttribute`.
    raw fn cuKernelGetAttribute(pi: *mut c_int, attrib: c_int, kernel: Handle, device: CUdevice) => lib::kernel_get_attribute;
    /// `cuKernelSetAttribute`.
    safe fn cuKernelSetAttribute(attrib: c_int, value: c_int, kernel: Handle, device: CUdevice) => lib::kernel_set_attribute;
    /// `cuKernelSetCacheConfig`.
    safe fn cuKernelSetCacheConfig(kernel: Handle, config: c_int, device: CUdevice) => lib::kernel_set_cache_config;
    /// `cuKernelGetParamCount`.
    raw fn cuKernelGetParamCount(kernel: Handle, count: *mut usize) => lib::kernel_get_param_count;
    /// `cuKernelGetParamInfo`.
    raw fn cuKernelGetParamInfo(kernel: Handle, index: usize, offset: *mut usize, size: *mut usize) => lib::kernel_get_param_info;

    /// `cuFuncGetAttribute`.
    raw fn cuFuncGetAttribute(pi: *mut c_int, attrib: c_int, hfunc: Handle) => launch::func_get_attribute;
    /// `cuFuncSetAttribute`.
    safe fn cuFuncSetAttribute(hfunc: Handle, attrib: c_int, value: c_int) => launch::func_set_attribute;
    /// `cuFuncSetCacheConfig`.
    safe fn cuFuncSetCacheConfig(hfunc: Handle, config: c_int) => launch::func_set_cache_config;
    /// `cuFuncGetName`.
    raw fn cuFuncGetName(name: *mut *const c_char, hfunc: Handle) => launch::func_get_name;
    /// `cuFuncGetModule`.
    raw fn cuFuncGetModule(module: *mut Handle, hfunc: Handle) => launch::func_get_module;
    /// `cuFuncGetParamCount`.
    raw fn cuFuncGetParamCount(hfunc: Handle, count: *mut usize) => launch::func_get_param_count;
    /// `cuFuncGetParamInfo`.
    raw fn cuFuncGetParamInfo(hfunc: Handle, index: usize, offset: *mut usize, size: *mut usize) => launch::func_get_param_info;
    /// `cuFuncIsLoaded`.
    raw fn cuFuncIsLoaded(state: *mut c_int, hfunc: Handle) => launch::func_is_loaded;
    /// `cuFuncLoad`.
    safe fn cuFuncLoad(hfunc: Handle) => launch::func_load;
    /// `cuLaunchKernel` (a `CUkernel` is accepted for `f`).
    raw fn cuLaunchKernel(hfunc: Handle, grid_x: c_uint, grid_y: c_uint, grid_z: c_uint, block_x: c_uint, block_y: c_uint, block_z: c_uint, shared_mem_bytes: c_uint, hstream: Handle, kernel_params: *mut *mut c_void, extra: *mut *mut c_void) | cuLaunchKernel_ptsz => launch::launch_kernel;
    /// `cuLaunchKernelEx`.
    raw fn cuLaunchKernelEx(config: *const launch::LaunchConfig, hfunc: Handle, kernel_params: *mut *mut c_void, extra: *mut *mut c_void) | cuLaunchKernelEx_ptsz => launch::launch_kernel_ex;
    /// `cuLaunchCooperativeKernel`.
    raw fn cuLaunchCooperativeKernel(hfunc: Handle, grid_x: c_uint, grid_y: c_uint, grid_z: c_uint, block_x: c_uint, block_y: c_uint, block_z: c_uint, shared_mem_bytes: c_uint, hstream: Handle, kernel_params: *mut *mut c_void) | cuLaunchCooperativeKernel_ptsz => launch::launch_cooperative_kernel;
    /// `cuLaunchHostFunc`.
    raw fn cuLaunchHostFunc(hstream: Handle, f: stream::HostFn, user_data: *mut c_void) | cuLaunchHostFunc_ptsz => stream::launch_host_func;
    /// `cuLaunchHostFunc_v2` (CUDA 13.1).
    raw fn cuLaunchHostFunc_v2(hstream: Handle, f: stream::HostFn, user_data: *mut c_void, mode: c_uint) | cuLaunchHostFunc_v2_ptsz => stream::launch_host_func_v2;
    /// `cuOccupancyMaxActiveBlocksPerMultiprocessor`.
    raw fn cuOccupancyMaxActiveBlocksPerMultiprocessor(num_blocks: *mut c_int, hfunc: Handle, block_size: c_int, dynamic_smem: usize) => launch::occupancy_max_active_blocks;
    /// `cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags`.
    raw fn cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(num_blocks: *mut c_int, hfunc: Handle, block_size: c_int, dynamic_smem: usize, flags: c_uint) => launch::occupancy_max_active_blocks_with_flags;
    /// `cuOccupancyMaxPotentialBlockSize`.
    raw fn cuOccupancyMaxPotentialBlockSize(min_grid: *mut c_int, block_size: *mut c_int, hfunc: Handle, to_smem: launch::BlockToSmem, dynamic_smem: usize, limit: c_int) => launch::occupancy_max_potential_block_size;
    /// `cuOccupancyMaxPotentialBlockSizeWithFlags`.
    raw fn cuOccupancyMaxPotentialBlockSizeWithFlags(min_grid: *mut c_int, block_size: *mut c_int, hfunc: Handle, to_smem: launch::BlockToSmem, dynamic_smem: usize, limit: c_int, flags: c_uint) => launch::occupancy_max_potential_block_size_with_flags;
    /// `cuOccupancyMaxActiveClusters`.
    raw fn cuOccupancyMaxActiveClusters(num_clusters: *mut c_int, hfunc: Handle, config: *const launch::LaunchConfig) => launch::occupancy_max_active_clusters;
    /// `cuOccupancyMaxPotentialClusterSize`.
    raw fn cuOccupancyMaxPotentialClusterSize(cluster_size: *mut c_int, hfunc: Handle, config: *const launch::LaunchConfig) => launch::occupancy_max_potential_cluster_size;
    /// `cuOccupancyAvailableDynamicSMemPerBlock`.
    raw fn cuOccupancyAvailableDynamicSMemPerBlock(dynamic_smem: *mut usize, hfunc: Handle, num_blocks: c_int, block_size: c_int) => launch::occupancy_available_dynamic_smem;

    /// `cuMemAlloc_v2`.
    raw fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytesize: usize) => mem::mem_alloc;
    /// `cuMemAllocPitch_v2`.
    raw fn cuMemAllocPitch_v2(dptr: *mut CUdeviceptr, pitch: *mut usize, width: usize, height: usize, element_size: c_uint) => mem::mem_alloc_pitch;
    /// `cuMemAllocManaged`.
    raw fn cuMemAllocManaged(dptr: *mut CUdeviceptr, bytesize: usize, flags: c_uint) => mem::mem_alloc_managed;
    /// `cuMemFree_v2`.
    safe fn cuMemFree_v2(dptr: CUdeviceptr) => mem::mem_free;
    /// `cuMemGetInfo_v2`.
    raw fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) => mem::mem_get_info;
    /// `cuMemAllocAsync`.
    raw fn cuMemAllocAsync(dptr: *mut CUdeviceptr, bytesize: usize, hstream: Handle) | cuMemAllocAsync_ptsz => pool::mem_alloc_async;
    /// `cuMemAllocFromPoolAsync`.
    raw fn cuMemAllocFromPoolAsync(dptr: *mut CUdeviceptr, bytesize: usize, mem_pool: Handle, hstream: Handle) | cuMemAllocFromPoolAsync_ptsz => pool::mem_alloc_from_pool_async;
    /// `cuMemFreeAsync`.
    safe fn cuMemFreeAsync(dptr: CUdeviceptr, hstream: Handle) | cuMemFreeAsync_ptsz => pool::mem_free_async;
    /// `cuDeviceGetDefaultMemPool`.
    raw fn cuDeviceGetDefaultMemPool(pool_out: *mut Handle, dev: CUdevice) => pool::device_get_default_mem_pool;
    /// `cuDeviceGetMemPool`.
    raw fn cuDeviceGetMemPool(mem_pool: *mut Handle, dev: CUdevice) => pool::device_get_mem_pool;
    /// `cuDeviceSetMemPool`.
    safe fn cuDeviceSetMemPool(dev: CUdevice, mem_pool: Handle) => pool::device_set_mem_pool;
    /// `cuMemGetDefaultMemPool`.
    raw fn cuMemGetDefaultMemPool(pool_out: *mut Handle, location: *const pool::MemLocation, alloc_type: c_int) => pool::mem_get_default_mem_pool;
    /// `cuMemGetMemPool`.
    raw fn cuMemGetMemPool(mem_pool: *mut Handle, location: *const pool::MemLocation, alloc_type: c_int) => pool::mem_get_mem_pool;
    /// `cuMemSetMemPool`.
    raw fn cuMemSetMemPool(location: *const pool::MemLocation, alloc_type: c_int, mem_pool: Handle) => pool::mem_set_mem_pool;
    /// `cuMemPoolCreate`.
    raw fn cuMemPoolCreate(mem_pool: *mut Handle, props: *const pool::MemPoolProps) => pool::mem_pool_create;
    /// `cuMemPoolDestroy`.
    safe fn cuMemPoolDestroy(mem_pool: Handle) => pool::mem_pool_destroy;
    /// `cuMemPoolSetAttribute`.
    raw fn cuMemPoolSetAttribute(mem_pool: Handle, attr: c_int, value: *mut c_void) => pool::mem_pool_set_attribute;
    /// `cuMemPoolGetAttribute`.
    raw fn cuMemPoolGetAttribute(mem_pool: Handle, attr: c_int, value: *mut c_void) => pool::mem_pool_get_attribute;
    /// `cuMemPoolTrimTo`.
    safe fn cuMemPoolTrimTo(mem_pool: Handle, min_bytes_to_keep: usize) => pool::mem_pool_trim_to;
    /// `cuMemPoolSetAccess`.
    raw fn cuMemPoolSetAccess(mem_pool: Handle, map: *const pool::MemAccessDesc, count: usize) => pool::mem_pool_set_access;
    /// `cuMemPoolGetAccess`.
    raw fn cuMemPoolGetAccess(flags: *mut c_int, mem_pool: Handle, location: *const pool::MemLocation) => pool::mem_pool_get_access;
    /// `cuIpcGetEventHandle`.
    raw fn cuIpcGetEventHandle(handle: *mut ipc::IpcHandle, event: Handle) => ipc::ipc_get_event_handle;
    /// `cuIpcOpenEventHandle`.
    raw fn cuIpcOpenEventHandle(ph_event: *mut Handle, handle: ipc::IpcHandle) => ipc::ipc_open_event_handle;
    /// `cuIpcGetMemHandle`.
    raw fn cuIpcGetMemHandle(handle: *mut ipc::IpcHandle, dptr: CUdeviceptr) => ipc::ipc_get_mem_handle;
    /// `cuIpcOpenMemHandle_v2` (and the CUDA 4.0 symbol, same signature).
    raw fn cuIpcOpenMemHandle_v2(pdptr: *mut CUdeviceptr, handle: ipc::IpcHandle, flags: c_uint) | cuIpcOpenMemHandle => ipc::ipc_open_mem_handle;
    /// `cuIpcCloseMemHandle`.
    safe fn cuIpcCloseMemHandle(dptr: CUdeviceptr) => ipc::ipc_close_mem_handle;
    /// `cuMemGetAddressRange_v2`.
    raw fn cuMemGetAddressRange_v2(pbase: *mut CUdeviceptr, psize: *mut usize, dptr: CUdeviceptr) => mem::mem_get_address_range;
    /// `cuMemAllocHost_v2`.
    raw fn cuMemAllocHost_v2(pp: *mut *mut c_void, bytesize: usize) => mem::mem_alloc_host;
    /// `cuMemHostAlloc`.
    raw fn cuMemHostAlloc(pp: *mut *mut c_void, bytesize: usize, flags: c_uint) => mem::mem_host_alloc;
    /// `cuMemFreeHost`.
    safe fn cuMemFreeHost(p: *mut c_void) => mem::mem_free_host;
    /// `cuMemHostGetFlags`.
    raw fn cuMemHostGetFlags(flags: *mut c_uint, p: *mut c_void) => mem::mem_host_get_flags;
    /// `cuMemHostGetDevicePointer_v2`.
    raw fn cuMemHostGetDevicePointer_v2(pdptr: *mut CUdeviceptr, p: *mut c_void, flags: c_uint) => mem::mem_host_get_device_pointer;
    /// `cuMemHostRegister_v2`.
    raw fn cuMemHostRegister_v2(p: *mut c_void, bytesize: usize, flags: c_uint) | cuMemHostRegister => mem::mem_host_register;
    /// `cuMemHostUnregister`.
    safe fn cuMemHostUnregister(p: *mut c_void) => mem::mem_host_unregister;
    /// `cuMemcpy` (unified addressing).
    raw fn cuMemcpy(dst: CUdeviceptr, src: CUdeviceptr, n: usize) | cuMemcpy_ptds => mem::memcpy;
    /// `cuMemcpyAsync`.
    raw fn cuMemcpyAsync(dst: CUdeviceptr, src: CUdeviceptr, n: usize, hstream: Handle) | cuMemcpyAsync_ptsz => mem::memcpy_async;
    /// `cuMemcpyHtoD_v2`.
    raw fn cuMemcpyHtoD_v2(dst: CUdeviceptr, src: *const c_void, n: usize) | cuMemcpyHtoD_v2_ptds => mem::memcpy_htod;
    /// `cuMemcpyDtoH_v2`.
    raw fn cuMemcpyDtoH_v2(dst: *mut c_void, src: CUdeviceptr, n: usize) | cuMemcpyDtoH_v2_ptds => mem::memcpy_dtoh;
    /// `cuMemcpyDtoD_v2`.
    safe fn cuMemcpyDtoD_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize) | cuMemcpyDtoD_v2_ptds => mem::memcpy_dtod;
    /// `cuMemcpyHtoDAsync_v2`.
    raw fn cuMemcpyHtoDAsync_v2(dst: CUdeviceptr, src: *const c_void, n: usize, hstream: Handle) | cuMemcpyHtoDAsync_v2_ptsz => mem::memcpy_htod_async;
    /// `cuMemcpyDtoHAsync_v2`.
    raw fn cuMemcpyDtoHAsync_v2(dst: *mut c_void, src: CUdeviceptr, n: usize, hstream: Handle) | cuMemcpyDtoHAsync_v2_ptsz => mem::memcpy_dtoh_async;
    /// `cuMemcpyDtoDAsync_v2`.
    safe fn cuMemcpyDtoDAsync_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize, hstream: Handle) | cuMemcpyDtoDAsync_v2_ptsz => mem::memcpy_dtod_async;
    /// `cuLogsRegisterCallback`.
    raw fn cuLogsRegisterCallback(callback: Option<logs::LogsCallback>, user_data: *mut c_void, callback_out: *mut *mut c_void) => logs::register_callback;
    /// `cuLogsUnregisterCallback`.
    safe fn cuLogsUnregisterCallback(callback: *mut c_void) => logs::unregister_callback;
    /// `cuLogsCurrent`.
    raw fn cuLogsCurrent(iterator_out: *mut c_uint, flags: c_uint) => logs::current;
    /// `cuLogsDumpToFile`.
    raw fn cuLogsDumpToFile(iterator: *mut c_uint, path: *const c_char, flags: c_uint) => logs::dump_to_file;
    /// `cuLogsDumpToMemory`.
    raw fn cuLogsDumpToMemory(iterator: *mut c_uint, buffer: *mut c_char, size: *mut usize, flags: c_uint) => logs::dump_to_memory;
    /// `cuMemcpyPeer`.
    safe fn cuMemcpyPeer(dst: CUdeviceptr, dst_ctx: Handle, src: CUdeviceptr, src_ctx: Handle, n: usize) | cuMemcpyPeer_ptds => mem::memcpy_peer;
    /// `cuMemcpyPeerAsync`.
    safe fn cuMemcpyPeerAsync(dst: CUdeviceptr, dst_ctx: Handle, src: CUdeviceptr, src_ctx: Handle, n: usize, hstream: Handle) | cuMemcpyPeerAsync_ptsz => mem::memcpy_peer_async;
    /// `cuMemcpy2D_v2` (and `cuMemcpy2DUnaligned_v2`).
    raw fn cuMemcpy2D_v2(copy: *const mem::Memcpy2D) | cuMemcpy2D_v2_ptds | cuMemcpy2DUnaligned_v2 | cuMemcpy2DUnaligned_v2_ptds => mem::memcpy_2d;
    /// `cuMemcpy2DAsync_v2`.
    raw fn cuMemcpy2DAsync_v2(copy: *const mem::Memcpy2D, hstream: Handle) | cuMemcpy2DAsync_v2_ptsz => mem::memcpy_2d_async;
    /// `cuMemcpy3D_v2`.
    raw fn cuMemcpy3D_v2(copy: *const mem::Memcpy3D) | cuMemcpy3D_v2_ptds => mem::memcpy_3d;
    /// `cuMemcpy3DAsync_v2`.
    raw fn cuMemcpy3DAsync_v2(copy: *const mem::Memcpy3D, hstream: Handle) | cuMemcpy3DAsync_v2_ptsz => mem::memcpy_3d_async;
    /// `cuMemsetD8_v2`.
    safe fn cuMemsetD8_v2(dst: CUdeviceptr, value: u8, n: usize) | cuMemsetD8_v2_ptds => mem::memset_d8;
    /// `cuMemsetD16_v2`.
    safe fn cuMemsetD16_v2(dst: CUdeviceptr, value: u16, n: usize) | cuMemsetD16_v2_ptds => mem::memset_d16;
    /// `cuMemsetD32_v2`.
    safe fn cuMemsetD32_v2(dst: CUdeviceptr, value: u32, n: usize) | cuMemsetD32_v2_ptds => mem::memset_d32;
    /// `cuMemsetD8Async`.
    safe fn cuMemsetD8Async(dst: CUdeviceptr, value: u8, n: usize, hstream: Handle) | cuMemsetD8Async_ptsz => mem::memset_d8_async;
    /// `cuMemsetD16Async`.
    safe fn cuMemsetD16Async(dst: CUdeviceptr, value: u16, n: usize, hstream: Handle) | cuMemsetD16Async_ptsz => mem::memset_d16_async;
    /// `cuMemsetD32Async`.
    safe fn cuMemsetD32Async(dst: CUdeviceptr, value: u32, n: usize, hstream: Handle) | cuMemsetD32Async_ptsz => mem::memset_d32_async;
    /// `cuMemsetD2D8_v2`.
    safe fn cuMemsetD2D8_v2(dst: CUdeviceptr, pitch: usize, value: u8, width: usize, height: usize) | cuMemsetD2D8_v2_ptds => mem::memset_d2d8;
    /// `cuMemsetD2D16_v2`.
    safe fn cuMemsetD2D16_v2(dst: CUdeviceptr, pitch: usize, value: u16, width: usize, height: usize) | cuMemsetD2D16_v2_ptds => mem::memset_d2d16;
    /// `cuMemsetD2D32_v2`.
    safe fn cuMemsetD2D32_v2(dst: CUdeviceptr, pitch: usize, value: u32, width: usize, height: usize) | cuMemsetD2D32_v2_ptds => mem::memset_d2d32;
    /// `cuMemsetD2D8Async`.
    safe fn cuMemsetD2D8Async(dst: CUdeviceptr, pitch: usize, value: u8, width: usize, height: usize, hstream: Handle) | cuMemsetD2D8Async_ptsz => mem::memset_d2d8_async;
    /// `cuMemsetD2D16Async`.
    safe fn cuMemsetD2D16Async(dst: CUdeviceptr, pitch: usize, value: u16, width: usize, height: usize, hstream: Handle) | cuMemsetD2D16Async_ptsz => mem::memset_d2d16_async;
    /// `cuMemsetD2D32Async`.
    safe fn cuMemsetD2D32Async(dst: CUdeviceptr, pitch: usize, value: u32, width: usize, height: usize, hstream: Handle) | cuMemsetD2D32Async_ptsz => mem::memset_d2d32_async;
    /// `cuPointerGetAttribute`.
    raw fn cuPointerGetAttribute(data: *mut c_void, attrib: c_int, ptr: CUdeviceptr) => mem::pointer_get_attribute;
    /// `cuPointerGetAttributes`.
    raw fn cuPointerGetAttributes(num: c_uint, attributes: *const c_int, data: *mut *mut c_void, ptr: CUdeviceptr) => mem::pointer_get_attributes;

    /// `cuStreamCreate`.
    raw fn cuStreamCreate(ph_stream: *mut Handle, flags: c_uint) => stream::stream_create;
    /// `cuStreamCreateWithPriority`.
    raw fn cuStreamCreateWithPriority(ph_stream: *mut Handle, flags: c_uint, priority: c_int) => stream::stream_create_with_priority;
    /// `cuStreamDestroy_v2`.
    safe fn cuStreamDestroy_v2(hstream: Handle) | cuStreamDestroy => stream::stream_destroy;
    /// `cuStreamSynchronize`.
    safe fn cuStreamSynchronize(hstream: Handle) | cuStreamSynchronize_ptsz => stream::stream_synchronize;
    /// `cuStreamQuery`.
    safe fn cuStreamQuery(hstream: Handle) | cuStreamQuery_ptsz => stream::stream_query;
    /// `cuStreamGetFlags`.
    raw fn cuStreamGetFlags(hstream: Handle, flags: *mut c_uint) | cuStreamGetFlags_ptsz => stream::stream_get_flags;
    /// `cuStreamGetPriority`.
    raw fn cuStreamGetPriority(hstream: Handle, priority: *mut c_int) | cuStreamGetPriority_ptsz => stream::stream_get_priority;
    /// `cuStreamGetId`.
    raw fn cuStreamGetId(hstream: Handle, id: *mut u64) | cuStreamGetId_ptsz => stream::stream_get_id;
    /// `cuStreamGetCtx`.
    raw fn cuStreamGetCtx(hstream: Handle, pctx: *mut Handle) | cuStreamGetCtx_ptsz => stream::stream_get_ctx;
    /// `cuStreamGetCtx_v2`.
    raw fn cuStreamGetCtx_v2(hstream: Handle, pctx: *mut Handle, green: *mut Handle) | cuStreamGetCtx_v2_ptsz => stream::stream_get_ctx_v2;
    /// `cuStreamGetGreenCtx`.
    raw fn cuStreamGetGreenCtx(hstream: Handle, phctx: *mut Handle) => stream::stream_get_green_ctx;
    /// `cuStreamGetDevResource`.
    raw fn cuStreamGetDevResource(hstream: Handle, resource: *mut c_void, kind: c_int) | cuStreamGetDevResource_ptsz => stream::stream_get_dev_resource;
    /// `cuStreamGetDevice`.
    raw fn cuStreamGetDevice(hstream: Handle, device: *mut CUdevice) | cuStreamGetDevice_ptsz => stream::stream_get_device;
    /// `cuStreamIsCapturing`.
    raw fn cuStreamIsCapturing(hstream: Handle, status: *mut c_int) | cuStreamIsCapturing_ptsz => cap::is_capturing;
    /// `cuStreamWaitEvent`.
    safe fn cuStreamWaitEvent(hstream: Handle, event: Handle, flags: c_uint) | cuStreamWaitEvent_ptsz => stream::stream_wait_event;
    /// `cuStreamAddCallback`.
    raw fn cuStreamAddCallback(hstream: Handle, callback: stream::StreamCallback, user_data: *mut c_void, flags: c_uint) | cuStreamAddCallback_ptsz => stream::stream_add_callback;

    /// `cuEventCreate`.
    raw fn cuEventCreate(ph_event: *mut Handle, flags: c_uint) => stream::event_create;
    /// `cuEventDestroy_v2`.
    safe fn cuEventDestroy_v2(event: Handle) | cuEventDestroy => stream::event_destroy;
    /// `cuEventRecord`.
    safe fn cuEventRecord(event: Handle, hstream: Handle) | cuEventRecord_ptsz => stream::event_record;
    /// `cuEventRecordWithFlags`.
    safe fn cuEventRecordWithFlags(event: Handle, hstream: Handle, flags: c_uint) | cuEventRecordWithFlags_ptsz => stream::event_record_with_flags;
    /// `cuEventQuery`.
    safe fn cuEventQuery(event: Handle) => stream::event_query;
    /// `cuEventSynchronize`.
    safe fn cuEventSynchronize(event: Handle) => stream::event_synchronize;
    /// `cuEventElapsedTime` (and `_v2`, same signature).
    raw fn cuEventElapsedTime(ms: *mut f32, start: Handle, end: Handle) | cuEventElapsedTime_v2 => stream::event_elapsed_time;

    /// `cuStreamBeginCapture_v2`.
    safe fn cuStreamBeginCapture_v2(hstream: Handle, mode: c_int) | cuStreamBeginCapture_v2_ptsz => cap::begin_capture;
    /// `cuStreamBeginCapture` (CUDA 10.0, global mode).
    safe fn cuStreamBeginCapture(hstream: Handle) | cuStreamBeginCapture_ptsz => cap::begin_capture_v1;
    /// `cuStreamBeginCaptureToGraph`.
    raw fn cuStreamBeginCaptureToGraph(hstream: Handle, graph: Handle, deps: *const Handle, edge_data: *const EdgeData, n: usize, mode: c_int) | cuStreamBeginCaptureToGraph_ptsz => cap::begin_capture_to_graph;
    /// `cuStreamEndCapture`.
    raw fn cuStreamEndCapture(hstream: Handle, ph_graph: *mut Handle) | cuStreamEndCapture_ptsz => cap::end_capture;
    /// `cuStreamGetCaptureInfo_v3`.
    raw fn cuStreamGetCaptureInfo_v3(hstream: Handle, status: *mut c_int, id: *mut u64, graph: *mut Handle, deps: *mut *const Handle, edge_data: *mut *const EdgeData, n: *mut usize) | cuStreamGetCaptureInfo_v3_ptsz => cap::get_capture_info;
    /// `cuStreamGetCaptureInfo_v2`.
    raw fn cuStreamGetCaptureInfo_v2(hstream: Handle, status: *mut c_int, id: *mut u64, graph: *mut Handle, deps: *mut *const Handle, n: *mut usize) | cuStreamGetCaptureInfo_v2_ptsz => cap::get_capture_info_v2;
    /// `cuStreamGetCaptureInfo` (CUDA 10.1).
    raw fn cuStreamGetCaptureInfo(hstream: Handle, status: *mut c_int, id: *mut u64) | cuStreamGetCaptureInfo_ptsz => cap::get_capture_info_v1;
    /// `cuStreamUpdateCaptureDependencies_v2`.
    raw fn cuStreamUpdateCaptureDependencies_v2(hstream: Handle, deps: *const Handle, edge_data: *const EdgeData, n: usize, flags: c_uint) | cuStreamUpdateCaptureDependencies_v2_ptsz => cap::update_capture_dependencies;
    /// `cuStreamUpdateCaptureDependencies` (CUDA 11.3).
    raw fn cuStreamUpdateCaptureDependencies(hstream: Handle, deps: *const Handle, n: usize, flags: c_uint) | cuStreamUpdateCaptureDependencies_ptsz => cap::update_capture_dependencies_v1;
    /// `cuThreadExchangeStreamCaptureMode`.
    raw fn cuThreadExchangeStreamCaptureMode(mode: *mut c_int) => cap::thread_exchange_mode;

    /// `cuGraphCreate`.
    raw fn cuGraphCreate(ph_graph: *mut Handle, flags: c_uint) => gr::graph_create;
    /// `cuGraphDestroy`.
    safe fn cuGraphDestroy(graph: Handle) => gr::graph_destroy;
    /// `cuGraphGetId`.
    raw fn cuGraphGetId(graph: Handle, id: *mut c_uint) => gr::graph_get_id;
    /// `cuGraphAddKernelNode_v2`.
    raw fn cuGraphAddKernelNode_v2(ph: *mut Handle, graph: Handle, deps: *const Handle, n: usize, params: *const gr::KernelNodeParams) => gr::add_kernel_node;
    /// `cuGraphAddKernelNode` (CUDA 10 parameters).
    raw fn cuGraphAddKernelNode(ph: *mut Handle, graph: Handle, deps: *const Handle, n: usize, params: *const gr::KernelNodeParamsV1) => gr::add_kernel_node_v1;
    /// `cuGraphAddMemcpyNode`.
    raw fn cuGraphAddMemcpyNode(ph: *mut Handle, graph: Handle, deps: *const Handle, n: usize, copy: *const mem::Memcpy3D, context: Handle) => gr::add_memcpy_node;
    /// `cuGraphAddMemsetNode`.
    raw fn cuGraphAddMemsetNode(ph: *mut Handle, graph: Handle, deps: *const Handle, n: usize, params: *const gr::MemsetNodeParams, context: Handle) => gr::add_memset_node;
    /// `cuGraphAddHostNode`.
    raw fn cuGraphAddHostNode(ph: *mut Handle, graph: Handle, deps: *const Handle, n: usize, params: *const gr::HostNodeParams) => gr::add_host_node;
    /// `cuGraphAddEmptyNode`.
    raw fn cuGraphAddEmptyNode(ph: *mut Handle, graph: Handle, deps: *const Handle, n: usize) => gr::add_empty_node;
    /// `cuGraphAddMemAllocNode`.
    raw fn cuGraphAddMemAllocNode(ph: *mut Handle, graph: Handle, deps: *const Handle, n: usize, params: *mut crate::graph_mem::MemAllocNodeParams) => gr::add_mem_alloc_node;
    /// `cuGraphAddMemFreeNode`.
    raw fn cuGraphAddMemFreeNode(ph: *mut Handle, graph: Handle, deps: *const Handle, n: usize, dptr: CUdeviceptr) => gr::add_mem_free_node;
    /// `cuGraphMemAllocNodeGetParams`.
    raw fn cuGraphMemAllocNodeGetParams(node: Handle, out: *mut crate::graph_mem::MemAllocNodeParams) => gr::mem_alloc_node_get_params;
    /// `cuGraphMemFreeNodeGetParams`.
    raw fn cuGraphMemFreeNodeGetParams(node: Handle, out: *mut CUdeviceptr) => gr::mem_free_node_get_params;
    /// `cuDeviceGetGraphMemAttribute`.
    raw fn cuDeviceGetGraphMemAttribute(dev: CUdevice, attr: c_int, value: *mut c_void) => crate::graph_mem::device_get_graph_mem_attribute;
    /// `cuDeviceSetGraphMemAttribute`.
    raw fn cuDeviceSetGraphMemAttribute(dev: CUdevice, attr: c_int, value: *mut c_void) => crate::graph_mem::device_set_graph_mem_attribute;
    /// `cuDeviceGraphMemTrim`.
    safe fn cuDeviceGraphMemTrim(dev: CUdevice) => crate::graph_mem::device_graph_mem_trim;
    /// `cuGraphAddEventRecordNode`.
    raw fn cuGraphAddEventRecordNode(ph: *mut Handle, graph: Handle, deps: *const Handle, n: usize, event: Handle) => gr::add_event_record_node;
    /// `cuGraphAddEventWaitNode`.
    raw fn cuGraphAddEventWaitNode(ph: *mut Handle, graph: Handle, deps: *const Handle, n: usize, event: Handle) => gr::add_event_wait_node;
    /// `cuGraphAddChildGraphNode`.
    raw fn cuGraphAddChildGraphNode(ph: *mut Handle, graph: Handle, deps: *const Handle, n: usize, child: Handle) => gr::add_child_graph_node;
    /// `cuGraphAddDependencies_v2`.
    raw fn cuGraphAddDependencies_v2(graph: Handle, from: *const Handle, to: *const Handle, edge_data: *const EdgeData, n: usize) => gr::add_dependencies;
    /// `cuGraphAddDependencies` (CUDA 10).
    raw fn cuGraphAddDependencies(graph: Handle, from: *const Handle, to: *const Handle, n: usize) => gr::add_dependencies_v1;
    /// `cuGraphRemoveDependencies_v2`.
    raw fn cuGraphRemoveDependencies_v2(graph: Handle, from: *const Handle, to: *const Handle, edge_data: *const EdgeData, n: usize) => gr::remove_dependencies;
    /// `cuGraphRemoveDependencies` (CUDA 10).
    raw fn cuGraphRemoveDependencies(graph: Handle, from: *const Handle, to: *const Handle, n: usize) => gr::remove_dependencies_v1;
    /// `cuGraphGetNodes`.
    raw fn cuGraphGetNodes(graph: Handle, nodes: *mut Handle, n: *mut usize) => gr::get_nodes;
    /// `cuGraphGetRootNodes`.
    raw fn cuGraphGetRootNodes(graph: Handle, nodes: *mut Handle, n: *mut usize) => gr::get_root_nodes;
    /// `cuGraphGetEdges_v2`.
    raw fn cuGraphGetEdges_v2(graph: Handle, from: *mut Handle, to: *mut Handle, edge_data: *mut EdgeData, n: *mut usize) => gr::get_edges;
    /// `cuGraphGetEdges` (CUDA 10).
    raw fn cuGraphGetEdges(graph: Handle, from: *mut Handle, to: *mut Handle, n: *mut usize) => gr::get_edges_v1;
    /// `cuGraphNodeGetDependencies_v2`.
    raw fn cuGraphNodeGetDependencies_v2(node: Handle, deps: *mut Handle, edge_data: *mut EdgeData, n: *mut usize) => gr::node_get_dependencies;
    /// `cuGraphNodeGetDependencies` (CUDA 10).
    raw fn cuGraphNodeGetDependencies(node: Handle, deps: *mut Handle, n: *mut usize) => gr::node_get_dependencies_v1;
    /// `cuGraphNodeGetDependentNodes_v2`.
    raw fn cuGraphNodeGetDependentNodes_v2(node: Handle, nodes: *mut Handle, edge_data: *mut EdgeData, n: *mut usize) => gr::node_get_dependent_nodes;
    /// `cuGraphNodeGetDependentNodes` (CUDA 10).
    raw fn cuGraphNodeGetDependentNodes(node: Handle, nodes: *mut Handle, n: *mut usize) => gr::node_get_dependent_nodes_v1;
    /// `cuGraphConditionalHandleCreate`.
    raw fn cuGraphConditionalHandleCreate(out: *mut u64, graph: Handle, ctx: Handle, default: c_uint, flags: c_uint) => crate::graph_cond::handle_create;
    /// `cuGraphNodeGetType`.
    raw fn cuGraphNodeGetType(node: Handle, ty: *mut c_int) => gr::node_get_type;
    /// `cuGraphDestroyNode`.
    safe fn cuGraphDestroyNode(node: Handle) => gr::destroy_node;
    /// `cuGraphKernelNodeGetParams_v2`.
    raw fn cuGraphKernelNodeGetParams_v2(node: Handle, params: *mut gr::KernelNodeParams) => gr::kernel_node_get_params;
    /// `cuGraphKernelNodeGetParams` (CUDA 10 parameters).
    raw fn cuGraphKernelNodeGetParams(node: Handle, params: *mut gr::KernelNodeParamsV1) => gr::kernel_node_get_params_v1;
    /// `cuGraphKernelNodeSetParams_v2`.
    raw fn cuGraphKernelNodeSetParams_v2(node: Handle, params: *const gr::KernelNodeParams) => gr::kernel_node_set_params;
    /// `cuGraphKernelNodeSetParams` (CUDA 10 parameters).
    raw fn cuGraphKernelNodeSetParams(node: Handle, params: *const gr::KernelNodeParamsV1) => gr::kernel_node_set_params_v1;
    /// `cuGraphMemcpyNodeGetParams`.
    raw fn cuGraphMemcpyNodeGetParams(node: Handle, params: *mut mem::Memcpy3D) => gr::memcpy_node_get_params;
    /// `cuGraphMemcpyNodeSetParams`.
    raw fn cuGraphMemcpyNodeSetParams(node: Handle, params: *const mem::Memcpy3D) => gr::memcpy_node_set_params;
    /// `cuGraphMemsetNodeGetParams`.
    raw fn cuGraphMemsetNodeGetParams(node: Handle, params: *mut gr::MemsetNodeParams) => gr::memset_node_get_params;
    /// `cuGraphMemsetNodeSetParams`.
    raw fn cuGraphMemsetNodeSetParams(node: Handle, params: *const gr::MemsetNodeParams) => gr::memset_node_set_params;
    /// `cuGraphHostNodeGetParams`.
    raw fn cuGraphHostNodeGetParams(node: Handle, params: *mut gr::HostNodeParams) => gr::host_node_get_params;
    /// `cuGraphHostNodeSetParams`.
    raw fn cuGraphHostNodeSetParams(node: Handle, params: *const gr::HostNodeParams) => gr::host_node_set_params;
    /// `cuGraphChildGraphNodeGetGraph`.
    raw fn cuGraphChildGraphNodeGetGraph(node: Handle, ph_graph: *mut Handle) => gr::child_graph_node_get_graph;
    /// `cuGraphEventRecordNodeGetEvent`.
    raw fn cuGraphEventRecordNodeGetEvent(node: Handle, event: *mut Handle) => gr::event_record_node_get_event;
    /// `cuGraphEventRecordNodeSetEvent`.
    safe fn cuGraphEventRecordNodeSetEvent(node: Handle, event: Handle) => gr::event_record_node_set_event;
    /// `cuGraphEventWaitNodeGetEvent`.
    raw fn cuGraphEventWaitNodeGetEvent(node: Handle, event: *mut Handle) => gr::event_wait_node_get_event;
    /// `cuGraphEventWaitNodeSetEvent`.
    safe fn cuGraphEventWaitNodeSetEvent(node: Handle, event: Handle) => gr::event_wait_node_set_event;
    /// `cuGraphClone`.
    raw fn cuGraphClone(ph_clone: *mut Handle, graph: Handle) => gr::graph_clone;
    /// `cuGraphNodeFindInClone`.
    raw fn cuGraphNodeFindInClone(ph_node: *mut Handle, original: Handle, clone: Handle) => gr::node_find_in_clone;
    /// `cuGraphInstantiateWithFlags`.
    raw fn cuGraphInstantiateWithFlags(ph_exec: *mut Handle, graph: Handle, flags: u64) => gr::instantiate_with_flags;
    /// `cuGraphInstantiate` / `cuGraphInstantiate_v2` (CUDA 10/11 signature with a log buffer).
    raw fn cuGraphInstantiate_v2(ph_exec: *mut Handle, graph: Handle, err_node: *mut Handle, log: *mut c_char, size: usize) | cuGraphInstantiate => gr::instantiate_v1;
    /// `cuGraphInstantiateWithParams`.
    raw fn cuGraphInstantiateWithParams(ph_exec: *mut Handle, graph: Handle, params: *mut gr::InstantiateParams) | cuGraphInstantiateWithParams_ptsz => gr::instantiate_with_params;
    /// `cuGraphExecDestroy`.
    safe fn cuGraphExecDestroy(exec: Handle) => gr::exec_destroy;
    /// `cuGraphExecGetFlags`.
    raw fn cuGraphExecGetFlags(exec: Handle, flags: *mut u64) => gr::exec_get_flags;
    /// `cuGraphLaunch`.
    safe fn cuGraphLaunch(exec: Handle, hstream: Handle) | cuGraphLaunch_ptsz => gr::graph_launch;
    /// `cuGraphUpload`.
    safe fn cuGraphUpload(exec: Handle, hstream: Handle) | cuGraphUpload_ptsz => gr::graph_upload;
    /// `cuGraphExecKernelNodeSetParams_v2`.
    raw fn cuGraphExecKernelNodeSetParams_v2(exec: Handle, node: Handle, params: *const gr::KernelNodeParams) => gr::exec_kernel_node_set_params;
    /// `cuGraphExecKernelNodeSetParams` (CUDA 10 parameters).
    raw fn cuGraphExecKernelNodeSetParams(exec: Handle, node: Handle, params: *const gr::KernelNodeParamsV1) => gr::exec_kernel_node_set_params_v1;
    /// `cuGraphExecMemcpyNodeSetParams`.
    raw fn cuGraphExecMemcpyNodeSetParams(exec: Handle, node: Handle, params: *const mem::Memcpy3D, context: Handle) => gr::exec_memcpy_node_set_params;
    /// `cuGraphExecMemsetNodeSetParams`.
    raw fn cuGraphExecMemsetNodeSetParams(exec: Handle, node: Handle, params: *const gr::MemsetNodeParams, context: Handle) => gr::exec_memset_node_set_params;
    /// `cuGraphExecHostNodeSetParams`.
    raw fn cuGraphExecHostNodeSetParams(exec: Handle, node: Handle, params: *const gr::HostNodeParams) => gr::exec_host_node_set_params;
    /// `cuGraphExecChildGraphNodeSetParams`.
    safe fn cuGraphExecChildGraphNodeSetParams(exec: Handle, node: Handle, child: Handle) => gr::exec_child_graph_node_set_params;
    /// `cuGraphExecEventRecordNodeSetEvent`.
    safe fn cuGraphExecEventRecordNodeSetEvent(exec: Handle, node: Handle, event: Handle) => gr::exec_event_record_node_set_event;
    /// `cuGraphExecEventWaitNodeSetEvent`.
    safe fn cuGraphExecEventWaitNodeSetEvent(exec: Handle, node: Handle, event: Handle) => gr::exec_event_wait_node_set_event;
    /// `cuGraphNodeSetEnabled`.
    safe fn cuGraphNodeSetEnabled(exec: Handle, node: Handle, enabled: c_uint) => gr::node_set_enabled;
    /// `cuGraphNodeGetEnabled`.
    raw fn cuGraphNodeGetEnabled(exec: Handle, node: Handle, enabled: *mut c_uint) => gr::node_get_enabled;
    /// `cuGraphExecUpdate_v2`.
    raw fn cuGraphExecUpdate_v2(exec: Handle, graph: Handle, info: *mut gr::UpdateResultInfo) => gr::exec_update;
    /// `cuGraphExecUpdate` (CUDA 10.2 signature).
    raw fn cuGraphExecUpdate(exec: Handle, graph: Handle, err_node: *mut Handle, result: *mut c_int) => gr::exec_update_v1;
    /// `cuGraphAddNode_v2` (and `_v3`, same signature).
    raw fn cuGraphAddNode_v2(ph: *mut Handle, graph: Handle, deps: *const Handle, edge_data: *const EdgeData, n: usize, params: *mut gr::GraphNodeParams) | cuGraphAddNode_v3 => gr::add_node_params;
    /// `cuGraphAddNode` (CUDA 12.2, no edge data).
    raw fn cuGraphAddNode(ph: *mut Handle, graph: Handle, deps: *const Handle, n: usize, params: *mut gr::GraphNodeParams) => gr::add_node_params_v1;
    /// `cuGraphNodeSetParams` (and `_v2`, same signature).
    raw fn cuGraphNodeSetParams(node: Handle, params: *mut gr::GraphNodeParams) | cuGraphNodeSetParams_v2 => gr::node_set_params;
    /// `cuGraphNodeGetParams`.
    raw fn cuGraphNodeGetParams(node: Handle, params: *mut gr::GraphNodeParams) => gr::node_get_params;
    /// `cuGraphExecNodeSetParams`.
    raw fn cuGraphExecNodeSetParams(exec: Handle, node: Handle, params: *mut gr::GraphNodeParams) => gr::exec_node_set_params;
    /// `cuGraphKernelNodeSetAttribute`.
    raw fn cuGraphKernelNodeSetAttribute(node: Handle, attr: c_int, value: *const [u64; 8]) => gr::kernel_node_set_attribute;
    /// `cuGraphKernelNodeGetAttribute`.
    raw fn cuGraphKernelNodeGetAttribute(node: Handle, attr: c_int, value: *mut [u64; 8]) => gr::kernel_node_get_attribute;
    /// `cuGraphKernelNodeCopyAttributes`.
    safe fn cuGraphKernelNodeCopyAttributes(dst: Handle, src: Handle) => gr::kernel_node_copy_attributes;
    /// `cuGraphDebugDotPrint`.
    raw fn cuGraphDebugDotPrint(graph: Handle, path: *const c_char, flags: c_uint) => gr::debug_dot_print;
    /// `cuUserObjectCreate`.
    raw fn cuUserObjectCreate(out: *mut Handle, ptr: *mut c_void, destroy: stream::HostFn, initial: c_uint, flags: c_uint) => gr::user_object_create;
    /// `cuUserObjectRetain`.
    safe fn cuUserObjectRetain(obj: Handle, count: c_uint) => gr::user_object_retain;
    /// `cuUserObjectRelease`.
    safe fn cuUserObjectRelease(obj: Handle, count: c_uint) => gr::user_object_release;
    /// `cuGraphRetainUserObject`.
    safe fn cuGraphRetainUserObject(graph: Handle, obj: Handle, count: c_uint, flags: c_uint) => gr::graph_retain_user_object;
    /// `cuGraphReleaseUserObject`.
    safe fn cuGraphReleaseUserObject(graph: Handle, obj: Handle, count: c_uint) => gr::graph_release_user_object;

    /// `cuArrayCreate_v2`.
    raw fn cuArrayCreate_v2(out: *mut Handle, desc: *const tex::ArrayDesc) => tex::array_create;
    /// `cuArray3DCreate_v2`.
    raw fn cuArray3DCreate_v2(out: *mut Handle, desc: *const tex::Array3DDesc) => tex::array_3d_create;
    /// `cuArrayGetDescriptor_v2`.
    raw fn cuArrayGetDescriptor_v2(out: *mut tex::ArrayDesc, array: Handle) => tex::array_get_descriptor;
    /// `cuArray3DGetDescriptor_v2`.
    raw fn cuArray3DGetDescriptor_v2(out: *mut tex::Array3DDesc, array: Handle) => tex::array_3d_get_descriptor;
    /// `cuArrayDestroy`.
    safe fn cuArrayDestroy(array: Handle) => tex::array_destroy;
    /// `cuMipmappedArrayCreate`.
    raw fn cuMipmappedArrayCreate(out: *mut Handle, desc: *const tex::Array3DDesc, levels: c_uint) => tex::mipmapped_create;
    /// `cuMipmappedArrayGetLevel`.
    raw fn cuMipmappedArrayGetLevel(out: *mut Handle, mipmapped: Handle, level: c_uint) => tex::mipmapped_get_level;
    /// `cuMipmappedArrayDestroy`.
    safe fn cuMipmappedArrayDestroy(mipmapped: Handle) => tex::mipmapped_destroy;
    /// `cuMemcpyHtoA_v2`.
    raw fn cuMemcpyHtoA_v2(dst: Handle, offset: usize, src: *const c_void, n: usize) | cuMemcpyHtoA_v2_ptds => tex::memcpy_htoa;
    /// `cuMemcpyAtoH_v2`.
    raw fn cuMemcpyAtoH_v2(dst: *mut c_void, src: Handle, offset: usize, n: usize) | cuMemcpyAtoH_v2_ptds => tex::memcpy_atoh;
    /// `cuMemcpyHtoAAsync_v2`.
    raw fn cuMemcpyHtoAAsync_v2(dst: Handle, offset: usize, src: *const c_void, n: usize, hstream: Handle) | cuMemcpyHtoAAsync_v2_ptsz => tex::memcpy_htoa_async;
    /// `cuMemcpyAtoHAsync_v2`.
    raw fn cuMemcpyAtoHAsync_v2(dst: *mut c_void, src: Handle, offset: usize, n: usize, hstream: Handle) | cuMemcpyAtoHAsync_v2_ptsz => tex::memcpy_atoh_async;
    /// `cuMemcpyDtoA_v2`.
    safe fn cuMemcpyDtoA_v2(dst: Handle, offset: usize, src: CUdeviceptr, n: usize) | cuMemcpyDtoA_v2_ptds => tex::memcpy_dtoa;
    /// `cuMemcpyAtoD_v2`.
    safe fn cuMemcpyAtoD_v2(dst: CUdeviceptr, src: Handle, offset: usize, n: usize) | cuMemcpyAtoD_v2_ptds => tex::memcpy_atod;
    /// `cuMemcpyAtoA_v2`.
    safe fn cuMemcpyAtoA_v2(dst: Handle, dst_offset: usize, src: Handle, src_offset: usize, n: usize) | cuMemcpyAtoA_v2_ptds => tex::memcpy_atoa;
    /// `cuTexObjectCreate`.
    raw fn cuTexObjectCreate(out: *mut u64, res: *const tex::ResourceDesc, desc: *const tex::TextureDescC, view: *const c_void) => tex::tex_object_create;
    /// `cuTexObjectDestroy`.
    safe fn cuTexObjectDestroy(obj: u64) => tex::tex_object_destroy;
    /// `cuTexObjectGetResourceDesc`.
    raw fn cuTexObjectGetResourceDesc(out: *mut tex::ResourceDesc, obj: u64) => tex::tex_object_get_resource_desc;
    /// `cuTexObjectGetTextureDesc`.
    raw fn cuTexObjectGetTextureDesc(out: *mut tex::TextureDescC, obj: u64) => tex::tex_object_get_texture_desc;
    /// `cuSurfObjectCreate`.
    raw fn cuSurfObjectCreate(out: *mut u64, res: *const tex::ResourceDesc) => tex::surf_object_create;
    /// `cuSurfObjectDestroy`.
    safe fn cuSurfObjectDestroy(obj: u64) => tex::surf_object_destroy;
    /// `cuSurfObjectGetResourceDesc`.
    raw fn cuSurfObjectGetResourceDesc(out: *mut tex::ResourceDesc, obj: u64) => tex::surf_object_get_resource_desc;

    /// `cuModuleGetTexRef`.
    raw fn cuModuleGetTexRef(out: *mut Handle, hmod: Handle, name: *const c_char) => tex::module_get_tex_ref;
    /// `cuModuleGetSurfRef`.
    raw fn cuModuleGetSurfRef(out: *mut Handle, hmod: Handle, name: *const c_char) => tex::module_get_surf_ref;
    /// `cuTexRefSetArray`.
    safe fn cuTexRefSetArray(texref: Handle, array: Handle, flags: c_uint) => tex::tex_ref_set_array;
    /// `cuTexRefSetMipmappedArray`.
    safe fn cuTexRefSetMipmappedArray(texref: Handle, mipmapped: Handle, flags: c_uint) => tex::tex_ref_set_mipmapped_array;
    /// `cuTexRefSetAddress_v2`.
    raw fn cuTexRefSetAddress_v2(offset: *mut usize, texref: Handle, dptr: CUdeviceptr, bytes: usize) => tex::tex_ref_set_address;
    /// `cuTexRefSetAddress2D_v3`.
    raw fn cuTexRefSetAddress2D_v3(texref: Handle, desc: *const tex::ArrayDesc, dptr: CUdeviceptr, pitch: usize) => tex::tex_ref_set_address_2d;
    /// `cuTexRefSetFormat`.
    safe fn cuTexRefSetFormat(texref: Handle, format: c_uint, channels: c_int) => tex::tex_ref_set_format;
    /// `cuTexRefSetAddressMode`.
    safe fn cuTexRefSetAddressMode(texref: Handle, dim: c_int, mode: c_uint) => tex::tex_ref_set_address_mode;
    /// `cuTexRefSetFilterMode`.
    safe fn cuTexRefSetFilterMode(texref: Handle, mode: c_uint) => tex::tex_ref_set_filter_mode;
    /// `cuTexRefSetMipmapFilterMode`.
    safe fn cuTexRefSetMipmapFilterMode(texref: Handle, mode: c_uint) => tex::tex_ref_set_mipmap_filter_mode;
    /// `cuTexRefSetFlags`.
    safe fn cuTexRefSetFlags(texref: Handle, flags: c_uint) => tex::tex_ref_set_flags;
    /// `cuTexRefSetBorderColor`.
    raw fn cuTexRefSetBorderColor(texref: Handle, color: *const [f32; 4]) => tex::tex_ref_set_border_color;
    /// `cuTexRefSetMipmapLevelBias`.
    safe fn cuTexRefSetMipmapLevelBias(texref: Handle, bias: f32) => tex::tex_ref_set_mipmap_level_bias;
    /// `cuTexRefSetMipmapLevelClamp`.
    safe fn cuTexRefSetMipmapLevelClamp(texref: Handle, min: f32, max: f32) => tex::tex_ref_set_mipmap_level_clamp;
    /// `cuTexRefSetMaxAnisotropy`.
    safe fn cuTexRefSetMaxAnisotropy(texref: Handle, aniso: c_uint) => tex::tex_ref_set_max_anisotropy;
    /// `cuTexRefGetAddress_v2`.
    raw fn cuTexRefGetAddress_v2(out: *mut CUdeviceptr, texref: Handle) => tex::tex_ref_get_address;
    /// `cuTexRefGetArray`.
    raw fn cuTexRefGetArray(out: *mut Handle, texref: Handle) => tex::tex_ref_get_array;
    /// `cuTexRefGetAddressMode`.
    raw fn cuTexRefGetAddressMode(out: *mut c_uint, texref: Handle, dim: c_int) => tex::tex_ref_get_address_mode;
    /// `cuTexRefGetFilterMode`.
    raw fn cuTexRefGetFilterMode(out: *mut c_uint, texref: Handle) => tex::tex_ref_get_filter_mode;
    /// `cuTexRefGetFlags`.
    raw fn cuTexRefGetFlags(out: *mut c_uint, texref: Handle) => tex::tex_ref_get_flags;
    /// `cuTexRefGetFormat`.
    raw fn cuTexRefGetFormat(format: *mut c_uint, channels: *mut c_int, texref: Handle) => tex::tex_ref_get_format;
    /// `cuTexRefGetBorderColor`.
    raw fn cuTexRefGetBorderColor(out: *mut [f32; 4], texref: Handle) => tex::tex_ref_get_border_color;
    /// `cuSurfRefSetArray`.
    safe fn cuSurfRefSetArray(surfref: Handle, array: Handle, flags: c_uint) => tex::surf_ref_set_array;
    /// `cuSurfRefGetArray`.
    raw fn cuSurfRefGetArray(out: *mut Handle, surfref: Handle) => tex::surf_ref_get_array;

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

/// `CU_GET_PROC_ADDRESS_SUCCESS`.
const PROC_FOUND: c_int = 0;
/// `CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND`.
const PROC_SYMBOL_NOT_FOUND: c_int = 1;
/// `CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT`.
const PROC_VERSION_NOT_SUFFICIENT: c_int = 2;

/// `CU_GET_PROC_ADDRESS_LEGACY_STREAM`.
const PROC_LEGACY_STREAM: u64 = 1;
/// `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM`.
const PROC_PER_THREAD_DEFAULT_STREAM: u64 = 2;

/// Why a name did not resolve.
#[derive(Debug, PartialEq, Eq)]
pub enum Unresolved {
    /// `cuda.h` has no function of that name.
    Unknown,
    /// The function exists only in versions newer than the one asked for.
    TooNew(u32),
}

/// Resolves an API name (without version suffix, as `cuda.h` spells it)
/// for CUDA version `cuda_version`: the newest version of the function not
/// newer than that, in its per-thread-default-stream variant when `flags`
/// ask for one and it has one. Functions this library does not implement
/// resolve to their `CUDA_ERROR_NOT_SUPPORTED` stub.
pub fn resolve(name: &str, cuda_version: c_int, flags: u64) -> Result<(&'static str, *mut c_void), Unresolved> {
    let versions: Vec<&ApiEntry> = API_TABLE.iter().filter(|e| e.name == name).collect();
    if versions.is_empty() {
        return Err(Unresolved::Unknown);
    }
    let wanted = u32::try_from(cuda_version).unwrap_or(0);
    let newest = |pred: &dyn Fn(&ApiEntry) -> bool| {
        versions.iter().filter(|e| e.version <= wanted && pred(e)).max_by_key(|e| e.version).copied()
    };
    let plain = newest(&|e| e.variant == Variant::Plain);
    let entry = if flags & PROC_PER_THREAD_DEFAULT_STREAM != 0 {
        // The per-thread variant of the newest plain version, if it has one.
        let per_thread = newest(&|e| e.variant != Variant::Plain);
        match (per_thread, plain) {
            (Some(pt), Some(p)) if pt.symbol.starts_with(p.symbol) => Some(pt),
            (_, p) => p,
        }
    } else {
        plain
    };
    let entry = entry.ok_or_else(|| Unresolved::TooNew(versions.iter().map(|e| e.version).min().unwrap_or(0)))?;
    let f = exported(entry.symbol).ok_or(Unresolved::Unknown)?;
    Ok((entry.symbol, f))
}

/// `cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
/// cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)`.
///
/// Every function `cuda.h` declares resolves (see [`resolve`]); a name it
/// does not declare is `CUDA_ERROR_NOT_FOUND` with `*symbolStatus =
/// CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND`, one that exists only in newer
/// versions than `cudaVersion` is `CUDA_ERROR_NOT_FOUND` with
/// `CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT`; `*pfn` is NULL then.
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
    if flags & !(PROC_LEGACY_STREAM | PROC_PER_THREAD_DEFAULT_STREAM) != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown flags {flags:#x}")));
    }
    match resolve(name, cuda_version, flags) {
        Ok((_, f)) => {
            // SAFETY: forwarded caller contract.
            unsafe {
                write_out(pfn, f)?;
                write_opt(symbol_status, PROC_FOUND);
            }
            Ok(())
        }
        Err(why) => {
            let (status, msg) = match why {
                Unresolved::Unknown => (PROC_SYMBOL_NOT_FOUND, format!("{name} is not a driver API function")),
                Unresolved::TooNew(v) => {
                    (PROC_VERSION_NOT_SUFFICIENT, format!("{name} needs CUDA version {v}, asked for {cuda_version}"))
                }
            };
            // SAFETY: forwarded caller contract.
            unsafe {
                write_out(pfn, std::ptr::null_mut())?;
                write_opt(symbol_status, status);
            }
            Err(CuError::CUDA_ERROR_NOT_FOUND.because(msg))
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

/// `cuProfilerStart` / `cuProfilerStop`: accepted, nothing to do.
fn profiler_nothing() -> CuResult<()> {
    crate::context::current().map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn symbol(name: &str, version: c_int, flags: u64) -> Option<&'static str> {
        resolve(name, version, flags).ok().map(|(s, _)| s)
    }

    #[test]
    fn proc_address_resolves_versions() {
        assert_eq!(symbol("cuMemAlloc", 12000, 0), Some("cuMemAlloc_v2"));
        assert_eq!(symbol("cuMemAlloc", 2000, 0), Some("cuMemAlloc"));
        assert_eq!(symbol("cuInit", 12000, 0), Some("cuInit"));
        assert_eq!(symbol("cuCtxCreate", 11000, 0), Some("cuCtxCreate_v2"));
        assert_eq!(symbol("cuCtxCreate", 12000, 0), Some("cuCtxCreate_v3"));
        assert_eq!(symbol("cuCtxCreate", 13000, 0), Some("cuCtxCreate_v4"));
        assert_eq!(resolve("cuNoSuchThing", 12000, 0).unwrap_err(), Unresolved::Unknown);
        assert_eq!(resolve("cuLibraryLoadData", 11080, 0).unwrap_err(), Unresolved::TooNew(12000));
        assert_eq!(resolve("cuMemAlloc", 12000, 0).unwrap().1, exported("cuMemAlloc_v2").unwrap());
    }

    #[test]
    fn proc_address_per_thread_variants() {
        assert_eq!(symbol("cuMemcpyHtoD", 12000, 2), Some("cuMemcpyHtoD_v2_ptds"));
        assert_eq!(symbol("cuMemcpyHtoD", 12000, 1), Some("cuMemcpyHtoD_v2"));
        assert_eq!(symbol("cuLaunchKernel", 12000, 2), Some("cuLaunchKernel_ptsz"));
        assert_eq!(symbol("cuStreamSynchronize", 12000, 0), Some("cuStreamSynchronize"));
        // No per-thread variant: the plain one.
        assert_eq!(symbol("cuMemAlloc", 12000, 2), Some("cuMemAlloc_v2"));
    }

    #[test]
    fn graph_and_capture_entry_points_are_implemented() {
        let names = [
            ("cuGraphAddKernelNode", "cuGraphAddKernelNode_v2"),
            ("cuGraphKernelNodeGetParams", "cuGraphKernelNodeGetParams_v2"),
            ("cuGraphExecKernelNodeSetParams", "cuGraphExecKernelNodeSetParams_v2"),
            ("cuGraphInstantiate", "cuGraphInstantiate_v2"),
            ("cuGraphInstantiateWithFlags", "cuGraphInstantiateWithFlags"),
            ("cuGraphInstantiateWithParams", "cuGraphInstantiateWithParams"),
            ("cuGraphExecUpdate", "cuGraphExecUpdate_v2"),
            ("cuGraphGetEdges", "cuGraphGetEdges_v2"),
            ("cuGraphAddDependencies", "cuGraphAddDependencies_v2"),
            ("cuStreamBeginCapture", "cuStreamBeginCapture_v2"),
            ("cuStreamEndCapture", "cuStreamEndCapture"),
            ("cuStreamGetCaptureInfo", "cuStreamGetCaptureInfo_v3"),
            ("cuThreadExchangeStreamCaptureMode", "cuThreadExchangeStreamCaptureMode"),
        ];
        for (name, want) in names {
            assert_eq!(symbol(name, 12080, 0), Some(want), "{name}");
            assert!(IMPLEMENTED_NAMES.contains(&want), "{want} is a stub");
        }
        assert_eq!(symbol("cuGraphLaunch", 12000, 2), Some("cuGraphLaunch_ptsz"));
        assert_eq!(symbol("cuStreamGetCaptureInfo", 11030, 0), Some("cuStreamGetCaptureInfo_v2"));
        assert_eq!(symbol("cuGraphAddKernelNode", 11080, 0), Some("cuGraphAddKernelNode"));
        assert!(IMPLEMENTED_NAMES.contains(&"cuGraphAddKernelNode"));
    }

    #[test]
    fn every_table_symbol_is_exported() {
        for e in API_TABLE {
            assert!(exported(e.symbol).is_some(), "{} is not exported", e.symbol);
        }
        for name in IMPLEMENTED_NAMES {
            assert!(API_TABLE.iter().any(|e| e.symbol == *name), "{name} is not in cuda-api.tsv");
            assert!(!UNSUPPORTED_NAMES.contains(name), "{name} is both implemented and a stub");
        }
    }
}
