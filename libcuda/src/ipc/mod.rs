//! CUDA IPC: `cuIpcGetMemHandle`, `cuIpcOpenMemHandle`, `cuIpcCloseMemHandle`,
//! `cuIpcGetEventHandle`, `cuIpcOpenEventHandle` (Linux; elsewhere
//! `CUDA_ERROR_NOT_SUPPORTED`).
//!
//! An allocation is shared as Vulkan opaque-fd memory (see
//! `ptxvk_runtime::Context::export_memory`). A file descriptor cannot travel
//! inside the 64 bytes of a `CUipcMemHandle`, so the exporting process runs a
//! small server (a thread started at the first export) on a Unix-domain
//! socket in the abstract namespace, named after its pid and a random token.
//! The handle carries that name and what the importer must repeat to import
//! the memory; the importer connects, presents the handle,
//! and receives a fresh descriptor of the memory as `SCM_RIGHTS` ancillary
//! data. The server answers only peers of the same user id that know the
//! token, and only for allocations still alive.
//!
//! Work is queued until a synchronisation point (see the runtime), so the
//! exporter's context is synchronised when it exports and again when an
//! importer opens the handle, and the importer's when it closes it: data
//! written before those points is seen by the other side. Writes made
//! while both have it open are seen once the writer synchronises
//! (`cuCtxSynchronize`, `cuStreamSynchronize`, `cuEventSynchronize`).
//!
//! Opening in the process that exported the handle fails with
//! `CUDA_ERROR_INVALID_CONTEXT`, as NVIDIA's driver does. A handle opened
//! again by the same context returns the same pointer with its reference
//! count raised; `cuIpcCloseMemHandle` lowers it and unmaps at zero.

//! Interprocess events share a page of memory (a memfd, passed the same
//! way) that holds the number of the latest record and of the highest one
//! finished (see [`SharedEvent`]).
//!
//! `transport` is the socket side, `memory` and `event` the entry points.

use std::sync::{Mutex, MutexGuard};

/// `CU_IPC_HANDLE_SIZE`.
pub const IPC_HANDLE_SIZE: usize = 64;

/// `CUipcMemHandle` (and `CUipcEventHandle`): 64 opaque bytes, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IpcHandle {
    /// The bytes (what is in them is this module's business).
    pub reserved: [u8; IPC_HANDLE_SIZE],
}

/// Layout version of the handles made here.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const VERSION: u16 = 2;

/// Locks `m`, ignoring poisoning (the tables stay consistent).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(target_os = "linux")]
mod event;
#[cfg(target_os = "linux")]
mod memory;
#[cfg(target_os = "linux")]
mod transport;
#[cfg(target_os = "linux")]
pub use event::{ipc_get_event_handle, ipc_open_event_handle, SharedEvent};
#[cfg(target_os = "linux")]
pub use memory::{forget_context, ipc_close_mem_handle, ipc_get_mem_handle, ipc_open_mem_handle};

#[cfg(not(target_os = "linux"))]
mod unsupported;
#[cfg(not(target_os = "linux"))]
pub use unsupported::*;
