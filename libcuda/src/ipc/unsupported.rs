//! CUDA IPC where it is not implemented (systems other than Linux): every
//! entry point is `CUDA_ERROR_NOT_SUPPORTED`, as is creating an event with
//! `CU_EVENT_INTERPROCESS`.

use std::ffi::c_uint;
use std::sync::Arc;

use super::IpcHandle;
use crate::ffi::{CUdeviceptr, Handle};
use crate::result::{CuError, CuResult};

fn unsupported<T>() -> CuResult<T> {
    Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because("CUDA IPC is implemented on Linux only"))
}

/// An interprocess event's shared state; never made here.
pub struct SharedEvent(());

impl SharedEvent {
    /// `CUDA_ERROR_NOT_SUPPORTED`.
    pub fn create() -> CuResult<Arc<SharedEvent>> {
        unsupported()
    }

    /// Never called: no shared event exists.
    pub fn is_complete(&self) -> bool {
        true
    }

    /// Never called: no shared event exists.
    pub fn wait(&self) {}

    /// Never called: no shared event exists.
    pub fn record_on(self: &Arc<Self>, _runtime: &ptxvk_runtime::Context) -> CuResult<()> {
        unsupported()
    }
}

/// `cuIpcGetMemHandle`: `CUDA_ERROR_NOT_SUPPORTED`.
///
/// # Safety
/// None needed: nothing is written.
pub unsafe fn ipc_get_mem_handle(_handle: *mut IpcHandle, _dptr: CUdeviceptr) -> CuResult<()> {
    unsupported()
}

/// `cuIpcOpenMemHandle_v2`: `CUDA_ERROR_NOT_SUPPORTED`.
///
/// # Safety
/// None needed: nothing is written.
pub unsafe fn ipc_open_mem_handle(_pdptr: *mut CUdeviceptr, _handle: IpcHandle, _flags: c_uint) -> CuResult<()> {
    unsupported()
}

/// `cuIpcCloseMemHandle`: `CUDA_ERROR_NOT_SUPPORTED`.
pub fn ipc_close_mem_handle(_dptr: CUdeviceptr) -> CuResult<()> {
    unsupported()
}

/// Nothing is ever opened here.
pub fn forget_context(_id: u64) {}

/// `cuIpcGetEventHandle`: `CUDA_ERROR_NOT_SUPPORTED`.
///
/// # Safety
/// None needed: nothing is written.
pub unsafe fn ipc_get_event_handle(_handle: *mut IpcHandle, _event: Handle) -> CuResult<()> {
    unsupported()
}

/// `cuIpcOpenEventHandle`: `CUDA_ERROR_NOT_SUPPORTED`.
///
/// # Safety
/// None needed: nothing is written.
pub unsafe fn ipc_open_event_handle(_ph_event: *mut Handle, _handle: IpcHandle) -> CuResult<()> {
    unsupported()
}
