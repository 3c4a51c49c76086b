//! Streams. All work of a device runs in submission order on its one queue,
//! so a `CUstream` only has to exist: synchronizing any stream waits for the
//! whole context, and work on different streams never overlaps.

use std::ffi::{c_int, c_uint};
use std::sync::Arc;

use crate::context::{self, ContextObj};
use crate::ffi::{write_out, Handle};
use crate::handles::Registry;
use crate::result::{CuError, CuResult};

/// `CU_STREAM_LEGACY`: the legacy default stream, as a handle value.
pub const CU_STREAM_LEGACY: usize = 0x1;
/// `CU_STREAM_PER_THREAD`: the per-thread default stream, as a handle value.
pub const CU_STREAM_PER_THREAD: usize = 0x2;

/// A `CUstream` created by `cuStreamCreate`.
pub struct StreamObj {
    /// The context it was created in.
    pub context: Arc<ContextObj>,
    /// Creation flags (`CU_STREAM_DEFAULT` or `CU_STREAM_NON_BLOCKING`).
    pub flags: c_uint,
}

/// Live streams.
pub static STREAMS: Registry<StreamObj> = Registry::new();

/// Accepts the null stream, `CU_STREAM_LEGACY`, `CU_STREAM_PER_THREAD` and
/// live streams; anything else is `CUDA_ERROR_INVALID_HANDLE`.
pub fn check(stream: Handle) -> CuResult<()> {
    let v = stream as usize;
    if v == 0 || v == CU_STREAM_LEGACY || v == CU_STREAM_PER_THREAD || STREAMS.get(stream).is_some() {
        Ok(())
    } else {
        Err(CuError::CUDA_ERROR_INVALID_HANDLE.because(format!("{stream:p} is not a live stream")))
    }
}

/// `cuStreamCreate(CUstream *phStream, unsigned int flags)`.
///
/// # Safety
/// `ph_stream` is NULL or writable.
pub unsafe fn stream_create(ph_stream: *mut Handle, flags: c_uint) -> CuResult<()> {
    let context = context::current()?;
    if ph_stream.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("phStream is NULL"));
    }
    if flags & !1 != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown stream flags {flags:#x}")));
    }
    let handle = STREAMS.insert(Arc::new(StreamObj { context, flags }));
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(ph_stream, handle) }
}

/// `cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)`:
/// the priority is accepted and ignored.
///
/// # Safety
/// `ph_stream` is NULL or writable.
pub unsafe fn stream_create_with_priority(ph_stream: *mut Handle, flags: c_uint, _priority: c_int) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe { stream_create(ph_stream, flags) }
}

/// `cuStreamDestroy_v2(CUstream hStream)`: waits for the stream's work.
pub fn stream_destroy(stream: Handle) -> CuResult<()> {
    let obj = STREAMS
        .remove(stream)
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_HANDLE.because(format!("{stream:p} is not a live stream")))?;
    obj.context.runtime.synchronize()?;
    Ok(())
}

/// `cuStreamSynchronize(CUstream hStream)`.
pub fn stream_synchronize(stream: Handle) -> CuResult<()> {
    check(stream)?;
    match STREAMS.get(stream) {
        Some(obj) => obj.context.runtime.synchronize()?,
        None => context::current()?.runtime.synchronize()?,
    }
    Ok(())
}

/// `cuStreamQuery(CUstream hStream)`: reports completion after waiting, so
/// it never says `CUDA_ERROR_NOT_READY`.
pub fn stream_query(stream: Handle) -> CuResult<()> {
    stream_synchronize(stream)
}
