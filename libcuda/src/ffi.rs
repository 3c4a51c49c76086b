//! C types of the driver API and the checked accessors every entry point
//! uses to read its pointer arguments.
//!
//! Each accessor enforces the rule the driver documents for pointer
//! arguments: a required pointer that is NULL is `CUDA_ERROR_INVALID_VALUE`.

use std::ffi::{c_char, c_int, c_void, CStr};

use crate::result::{CuError, CuResult};

/// `CUdevice`: a device ordinal.
pub type CUdevice = c_int;
/// `CUdeviceptr`: a device address (`VkDeviceAddress` underneath).
pub type CUdeviceptr = u64;
/// `CUcontext`, `CUmodule`, `CUfunction`, `CUstream`: opaque handles.
pub type Handle = *mut c_void;

/// Writes `value` through the output pointer `ptr`.
///
/// `CUDA_ERROR_INVALID_VALUE` if `ptr` is NULL.
///
/// # Safety
/// `ptr` is NULL or valid for writing a `T` (alignment is not required).
pub unsafe fn write_out<T>(ptr: *mut T, value: T) -> CuResult<()> {
    if ptr.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("output pointer is NULL"));
    }
    // SAFETY: non-null, and the caller promises it is writable.
    unsafe { ptr.write_unaligned(value) };
    Ok(())
}

/// Writes `value` through `ptr` when `ptr` is not NULL (optional outputs).
///
/// # Safety
/// `ptr` is NULL or valid for writing a `T`.
pub unsafe fn write_opt<T>(ptr: *mut T, value: T) {
    if !ptr.is_null() {
        // SAFETY: non-null, and the caller promises it is writable.
        unsafe { ptr.write_unaligned(value) };
    }
}

/// Reads the value behind the input pointer `ptr`.
///
/// `CUDA_ERROR_INVALID_VALUE` if `ptr` is NULL.
///
/// # Safety
/// `ptr` is NULL or valid for reading a `T`.
pub unsafe fn read_in<T: Copy>(ptr: *const T) -> CuResult<T> {
    if ptr.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("input pointer is NULL"));
    }
    // SAFETY: non-null, and the caller promises it is readable.
    Ok(unsafe { ptr.read_unaligned() })
}

/// The NUL-terminated string at `ptr` as UTF-8.
///
/// `CUDA_ERROR_INVALID_VALUE` if `ptr` is NULL or the text is not UTF-8.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string that lives for `'a`.
pub unsafe fn c_str<'a>(ptr: *const c_char) -> CuResult<&'a str> {
    if ptr.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("string argument is NULL"));
    }
    // SAFETY: non-null and NUL-terminated, as the caller promises.
    let s = unsafe { CStr::from_ptr(ptr) };
    s.to_str().map_err(|_| CuError::CUDA_ERROR_INVALID_VALUE.because("string argument is not UTF-8"))
}

/// `len` bytes at `ptr`; an empty slice when `len` is 0 (then `ptr` may be NULL).
///
/// `CUDA_ERROR_INVALID_VALUE` if `ptr` is NULL and `len` is not 0.
///
/// # Safety
/// When `len > 0`, `ptr` is NULL or valid for reading `len` bytes during `'a`.
pub unsafe fn bytes<'a>(ptr: *const c_void, len: usize) -> CuResult<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("host pointer is NULL"));
    }
    if len > isize::MAX as usize {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("byte count too large"));
    }
    // SAFETY: non-null, length checked against isize::MAX, readable per the caller.
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// `len` writable bytes at `ptr`; see [`bytes`].
///
/// # Safety
/// When `len > 0`, `ptr` is NULL or valid for writing `len` bytes during `'a`,
/// and nothing else accesses them meanwhile.
pub unsafe fn bytes_mut<'a>(ptr: *mut c_void, len: usize) -> CuResult<&'a mut [u8]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("host pointer is NULL"));
    }
    if len > isize::MAX as usize {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("byte count too large"));
    }
    // SAFETY: non-null, length checked against isize::MAX, writable and unaliased per the caller.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr.cast::<u8>(), len) })
}

/// Copies `text` into the C buffer `buf` of `cap` bytes, truncated and
/// NUL-terminated; returns the number of bytes written before the NUL.
///
/// # Safety
/// `buf` is NULL or valid for writing `cap` bytes.
pub unsafe fn copy_c_string(buf: *mut c_char, cap: usize, text: &[u8]) -> usize {
    if buf.is_null() || cap == 0 {
        return 0;
    }
    let n = text.len().min(cap - 1);
    // SAFETY: `buf` holds `cap > n` writable bytes; `text` is a distinct Rust slice.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
        buf.add(n).write(0);
    }
    n
}
