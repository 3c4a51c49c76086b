//! `libcuda.so.1`: the CUDA driver API on the ptxvk runtime.
//!
//! Programs and frameworks that speak the driver API (`cuda.h`, numba-cuda,
//! cuda-python) load this library in place of NVIDIA's driver; their PTX is
//! translated to SPIR-V and runs on any Vulkan 1.2 device.
//!
//! Layers, outside in:
//! - [`api`]: the exported `extern "C"` functions, generated from one list;
//!   each runs its implementation under [`result::guard`].
//! - Implementations by concern, each validating its arguments and handles
//!   first: [`device`], [`context`], [`module`] (with [`jit`] options and
//!   [`fatbin`] containers), [`link`], [`library`], [`memory`], [`launch`],
//!   [`stream`] (streams and events), [`graph`] (CUDA graphs) and
//!   [`capture`] (stream capture), [`tensor_map`], [`export_table`] (the
//!   private tables of NVIDIA's CUDA runtime; [`integrity`] its hash).
//! - Shared plumbing: [`result`] (`CUresult` codes), [`ffi`] (checked pointer
//!   access), [`handles`] (registries of live objects), [`driver`] (global
//!   state).
//! - Below: [`ptxvk_runtime`], which owns everything Vulkan.
//!
//! # Environment
//! - `PTXVK_CC`: compute capability to report to programs, e.g. `8.6` (default `8.0`).
//! - `PTXVK_LIBRARY_CC`: compute capability to report to NVIDIA's libraries
//!   and the shared CUDA runtime (default `13.0`; see
//!   [`driver::reported_compute_capability`]).
//! - `PTXVK_TRACE=1`: report every failing call on stderr with its reason;
//!   `PTXVK_TRACE=2`: every call.
//! - `PTXVK_DEVICE`: which Vulkan device is ordinal 0 (see the runtime).
//!
//! # Entry points
//! Every function `cuda.h` declares is exported: the implemented ones from the
//! list in [`api`], the others as stubs returning `CUDA_ERROR_NOT_SUPPORTED`,
//! all generated from `cuda-api.tsv` (see `build.rs`).

pub mod api;
pub mod caller;
pub mod capture;
pub mod context;
pub mod device;
pub mod driver;
pub mod export_table;
pub mod fatbin;
pub mod ffi;
pub mod graph;
pub mod graph_cond;
pub mod graph_mem;
pub mod handles;
pub mod integrity;
pub mod ipc;
pub mod jit;
pub mod launch;
pub mod library;
pub mod link;
pub mod logs;
pub mod memory;
pub mod mempool;
pub mod module;
pub mod result;
pub mod stream;
pub mod tensor_map;
pub mod texture;
