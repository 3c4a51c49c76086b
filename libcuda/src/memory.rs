//! Device memory: `cuMemAlloc`, `cuMemFree`, copies and memsets.
//!
//! A `CUdeviceptr` is the Vulkan buffer device address the runtime hands out.
//! Allocations belong to the context that was current when they were made.
//! Copies and memsets complete before they return (the `Async` forms too:
//! every stream is ordered with the null stream here).

use std::ffi::c_void;

use crate::context::{self, ContextObj, CONTEXTS};
use crate::ffi::{bytes, bytes_mut, write_opt, write_out, CUdeviceptr, Handle};
use crate::result::{CuError, CuResult};
use crate::stream;

/// `cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)`.
/// "CUDA_ERROR_INVALID_VALUE if bytesize is 0."
///
/// # Safety
/// `dptr` is NULL or writable.
pub unsafe fn mem_alloc(dptr: *mut CUdeviceptr, bytesize: usize) -> CuResult<()> {
    let ctx = context::current()?;
    if dptr.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("dptr is NULL"));
    }
    if bytesize == 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("bytesize is 0"));
    }
    let addr = ctx.runtime.alloc(bytesize as u64)?;
    ctx.owned().allocations.insert(addr);
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(dptr, addr) }
}

/// The live context that owns allocation `addr`: the current one, or another
/// context of the same device.
fn owner_of(current: &std::sync::Arc<ContextObj>, addr: u64) -> Option<std::sync::Arc<ContextObj>> {
    if current.owned().allocations.contains(&addr) {
        return Some(current.clone());
    }
    CONTEXTS
        .all()
        .into_iter()
        .map(|(_, c)| c)
        .find(|c| c.device.ordinal == current.device.ordinal && c.owned().allocations.contains(&addr))
}

/// `cuMemFree_v2(CUdeviceptr dptr)`: freeing 0 does nothing; an address
/// that is not the start of a live allocation is `CUDA_ERROR_INVALID_VALUE`.
pub fn mem_free(dptr: CUdeviceptr) -> CuResult<()> {
    let ctx = context::current()?;
    if dptr == 0 {
        return Ok(());
    }
    let owner = owner_of(&ctx, dptr).ok_or_else(|| {
        CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{dptr:#x} is not the start of a live allocation"))
    })?;
    owner.runtime.free(dptr)?;
    owner.owned().allocations.remove(&dptr);
    Ok(())
}

/// `cuMemGetInfo_v2(size_t *free, size_t *total)`.
///
/// # Safety
/// `free` and `total` are NULL or writable.
pub unsafe fn mem_get_info(free: *mut usize, total: *mut usize) -> CuResult<()> {
    let ctx = context::current()?;
    if free.is_null() || total.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("free or total is NULL"));
    }
    let (f, t) = ctx.runtime.mem_info();
    // SAFETY: both checked non-null; writable per the caller.
    unsafe {
        write_out(free, usize::try_from(f).unwrap_or(usize::MAX))?;
        write_out(total, usize::try_from(t).unwrap_or(usize::MAX))
    }
}

/// `cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)`:
/// both outputs are optional. `CUDA_ERROR_NOT_FOUND` if `dptr` is in no allocation.
///
/// # Safety
/// `pbase` and `psize` are NULL or writable.
pub unsafe fn mem_get_address_range(pbase: *mut CUdeviceptr, psize: *mut usize, dptr: CUdeviceptr) -> CuResult<()> {
    let ctx = context::current()?;
    let (base, size) = ctx
        .runtime
        .allocation_of(dptr)
        .ok_or_else(|| CuError::CUDA_ERROR_NOT_FOUND.because(format!("{dptr:#x} is in no allocation")))?;
    // SAFETY: optional outputs; writable per the caller.
    unsafe {
        write_opt(pbase, base);
        write_opt(psize, usize::try_from(size).unwrap_or(usize::MAX));
    }
    Ok(())
}

/// `cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)`.
///
/// # Safety
/// `src` is NULL or readable for `n` bytes.
pub unsafe fn memcpy_htod(dst: CUdeviceptr, src: *const c_void, n: usize) -> CuResult<()> {
    let ctx = context::current()?;
    // SAFETY: forwarded caller contract.
    let data = unsafe { bytes(src, n) }?;
    if n > 0 {
        ctx.runtime.copy_htod(dst, data)?;
    }
    Ok(())
}

/// `cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)`.
///
/// # Safety
/// `dst` is NULL or writable for `n` bytes.
pub unsafe fn memcpy_dtoh(dst: *mut c_void, src: CUdeviceptr, n: usize) -> CuResult<()> {
    let ctx = context::current()?;
    // SAFETY: forwarded caller contract.
    let out = unsafe { bytes_mut(dst, n) }?;
    if n > 0 {
        ctx.runtime.copy_dtoh(out, src)?;
    }
    Ok(())
}

/// `cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)`.
pub fn memcpy_dtod(dst: CUdeviceptr, src: CUdeviceptr, n: usize) -> CuResult<()> {
    let ctx = context::current()?;
    if n > 0 {
        ctx.runtime.copy_dtod(dst, src, n as u64)?;
    }
    Ok(())
}

/// `cuMemcpyHtoDAsync_v2`: as [`memcpy_htod`], after checking the stream.
///
/// # Safety
/// As [`memcpy_htod`].
pub unsafe fn memcpy_htod_async(dst: CUdeviceptr, src: *const c_void, n: usize, s: Handle) -> CuResult<()> {
    stream::check(s)?;
    // SAFETY: forwarded caller contract.
    unsafe { memcpy_htod(dst, src, n) }
}

/// `cuMemcpyDtoHAsync_v2`: as [`memcpy_dtoh`], after checking the stream.
///
/// # Safety
/// As [`memcpy_dtoh`].
pub unsafe fn memcpy_dtoh_async(dst: *mut c_void, src: CUdeviceptr, n: usize, s: Handle) -> CuResult<()> {
    stream::check(s)?;
    // SAFETY: forwarded caller contract.
    unsafe { memcpy_dtoh(dst, src, n) }
}

/// `cuMemcpyDtoDAsync_v2`: as [`memcpy_dtod`], after checking the stream.
pub fn memcpy_dtod_async(dst: CUdeviceptr, src: CUdeviceptr, n: usize, s: Handle) -> CuResult<()> {
    stream::check(s)?;
    memcpy_dtod(dst, src, n)
}

/// `cuMemsetD8_v2(CUdeviceptr dst, unsigned char uc, size_t n)`.
pub fn memset_d8(dst: CUdeviceptr, value: u8, n: usize) -> CuResult<()> {
    let ctx = context::current()?;
    if n > 0 {
        ctx.runtime.memset_d8(dst, value, n as u64)?;
    }
    Ok(())
}

/// `cuMemsetD16_v2(CUdeviceptr dst, unsigned short us, size_t n)`:
/// "CUDA_ERROR_INVALID_VALUE" unless `dst` is 2-byte aligned.
pub fn memset_d16(dst: CUdeviceptr, value: u16, n: usize) -> CuResult<()> {
    let ctx = context::current()?;
    if dst & 1 != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("cuMemsetD16 needs a 2-byte aligned address"));
    }
    if n > 0 {
        ctx.runtime.memset_d16(dst, value, n as u64)?;
    }
    Ok(())
}

/// `cuMemsetD32_v2(CUdeviceptr dst, unsigned int ui, size_t n)`:
/// "CUDA_ERROR_INVALID_VALUE" unless `dst` is 4-byte aligned.
pub fn memset_d32(dst: CUdeviceptr, value: u32, n: usize) -> CuResult<()> {
    let ctx = context::current()?;
    if dst & 3 != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("cuMemsetD32 needs a 4-byte aligned address"));
    }
    if n > 0 {
        ctx.runtime.memset_d32(dst, value, n as u64)?;
    }
    Ok(())
}

/// `cuMemsetD8Async`.
pub fn memset_d8_async(dst: CUdeviceptr, value: u8, n: usize, s: Handle) -> CuResult<()> {
    stream::check(s)?;
    memset_d8(dst, value, n)
}

/// `cuMemsetD16Async`.
pub fn memset_d16_async(dst: CUdeviceptr, value: u16, n: usize, s: Handle) -> CuResult<()> {
    stream::check(s)?;
    memset_d16(dst, value, n)
}

/// `cuMemsetD32Async`.
pub fn memset_d32_async(dst: CUdeviceptr, value: u32, n: usize, s: Handle) -> CuResult<()> {
    stream::check(s)?;
    memset_d32(dst, value, n)
}
