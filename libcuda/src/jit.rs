//! `CUjit_option` arrays: reading the options of `cuModuleLoadDataEx` and
//! writing the logs and outputs back the way the driver does.
//!
//! Option values travel in a `void *` array: pointers as pointers, integers
//! (sizes) as pointer-sized integers, the wall time as a `float` stored in the
//! slot. On return the driver overwrites each log-size slot with the number of
//! bytes it wrote and the wall-time slot with the time taken.

use std::ffi::{c_char, c_int, c_uint, c_void};

use crate::ffi::copy_c_string;
use crate::result::{CuError, CuResult};

/// `CU_JIT_WALL_TIME`: output, `float` milliseconds.
pub const CU_JIT_WALL_TIME: c_int = 2;
/// `CU_JIT_INFO_LOG_BUFFER`: `char *`.
pub const CU_JIT_INFO_LOG_BUFFER: c_int = 3;
/// `CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES`: `unsigned int`, in/out.
pub const CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES: c_int = 4;
/// `CU_JIT_ERROR_LOG_BUFFER`: `char *`.
pub const CU_JIT_ERROR_LOG_BUFFER: c_int = 5;
/// `CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES`: `unsigned int`, in/out.
pub const CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: c_int = 6;
/// `CU_JIT_LOG_VERBOSE`: `int`, 1 asks for verbose info-log output.
pub const CU_JIT_LOG_VERBOSE: c_int = 12;

/// Options at or above this value are not `CUjit_option`s of any CUDA release.
const CU_JIT_NUM_OPTIONS_BOUND: c_int = 64;

/// One log buffer the caller passed.
struct LogOut {
    buf: *mut c_char,
    cap: usize,
    size_slot: *mut *mut c_void,
}

impl Default for LogOut {
    fn default() -> Self {
        LogOut { buf: std::ptr::null_mut(), cap: 0, size_slot: std::ptr::null_mut() }
    }
}

impl LogOut {
    /// Writes `text` (truncated, NUL-terminated) and the size slot.
    ///
    /// # Safety
    /// The pointers came from a valid option array (see [`JitOptions::parse`]).
    unsafe fn write(&self, text: &str) {
        // SAFETY: the caller of `parse` promised `buf` holds `cap` bytes.
        let written = unsafe { copy_c_string(self.buf, self.cap, text.as_bytes()) };
        if !self.size_slot.is_null() {
            // SAFETY: the slot is an element of the caller's optionValues array.
            unsafe { *self.size_slot = written as *mut c_void };
        }
    }
}

/// The options of one `cuModuleLoadDataEx` call.
#[derive(Default)]
pub struct JitOptions {
    error_log: LogOut,
    info_log: LogOut,
    wall_time_slot: Option<*mut *mut c_void>,
    /// `CU_JIT_LOG_VERBOSE` was set.
    pub verbose: bool,
}

impl JitOptions {
    /// Reads `num` options. Options this library has no use for (register
    /// limits, optimisation level, target, cache mode, ...) are accepted and
    /// ignored; a number that is no `CUjit_option` at all is
    /// `CUDA_ERROR_INVALID_VALUE`, as are NULL arrays with `num > 0`.
    ///
    /// # Safety
    /// When `num > 0`, `options` and `values` are NULL or arrays of `num`
    /// elements; each log buffer holds as many bytes as its size option says,
    /// and all of them stay valid until [`JitOptions::finish`].
    pub unsafe fn parse(num: c_uint, options: *const c_int, values: *mut *mut c_void) -> CuResult<JitOptions> {
        let mut out = JitOptions::default();
        if num == 0 {
            return Ok(out);
        }
        if options.is_null() || values.is_null() {
            return Err(
                CuError::CUDA_ERROR_INVALID_VALUE.because("numOptions > 0 with a NULL options or optionValues array")
            );
        }
        for i in 0..num as usize {
            // SAFETY: both arrays have `num` elements per the caller.
            let (option, slot) = unsafe { (*options.add(i), values.add(i)) };
            // SAFETY: `slot` is in bounds (see above).
            let value = unsafe { *slot };
            match option {
                CU_JIT_WALL_TIME => out.wall_time_slot = Some(slot),
                CU_JIT_INFO_LOG_BUFFER => out.info_log.buf = value.cast(),
                CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES => {
                    out.info_log.cap = size_value(value);
                    out.info_log.size_slot = slot;
                }
                CU_JIT_ERROR_LOG_BUFFER => out.error_log.buf = value.cast(),
                CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES => {
                    out.error_log.cap = size_value(value);
                    out.error_log.size_slot = slot;
                }
                CU_JIT_LOG_VERBOSE => out.verbose = size_value(value) != 0,
                o if (0..CU_JIT_NUM_OPTIONS_BOUND).contains(&o) => {}
                o => return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown CUjit_option {o}"))),
            }
        }
        Ok(out)
    }

    /// Writes the logs and the wall time (milliseconds) back.
    ///
    /// # Safety
    /// As for [`JitOptions::parse`].
    pub unsafe fn finish(&self, error_log: &str, info_log: &str, wall_time_ms: f32) {
        // SAFETY: forwarded contract of `parse`.
        unsafe {
            self.error_log.write(error_log);
            self.info_log.write(info_log);
            if let Some(slot) = self.wall_time_slot {
                *slot = wall_time_ms.to_bits() as usize as *mut c_void;
            }
        }
    }
}

/// An `unsigned int` option value passed in a `void *` slot (only the low 32
/// bits are meaningful, as in the driver).
fn size_value(value: *mut c_void) -> usize {
    (value as usize) & 0xffff_ffff
}
