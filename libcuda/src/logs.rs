//! Error log management (CUDA 12.9's `cuLogs*`, "Error Log Management
//! Functions" of the driver API): every failing call leaves a message that
//! says why, in words, beside its `CUresult`.
//!
//! Each failure of an entry point ([`crate::result::guard`]; not a query's
//! `CUDA_ERROR_NOT_READY`, which polling loops get by the thousand) becomes one
//! message, `[HH:MM:SS.mmm][TID][CUDA][E][cuName] reason (CUDA_ERROR_...)`
//! (time of day in UTC, the OS thread id), as NVIDIA's driver formats them
//! (CUDA Programming Guide, "Error Log Management"). A message goes
//!
//! - to the registered callbacks (`cuLogsRegisterCallback`), in
//!   registration order, on the failing thread, with `CU_LOG_LEVEL_ERROR`;
//! - to `CUDA_LOG_FILE` when it is set (`stdout`, `stderr` or a file path,
//!   appended to), as NVIDIA's driver does;
//! - into a buffer of the most recent messages, at most [`CAPACITY`] bytes
//!   (NVIDIA's size), that `cuLogsDumpToFile` and `cuLogsDumpToMemory` copy
//!   out from a `CUlogIterator` (the number of the next message, from
//!   `cuLogsCurrent`). When older messages were dropped, a dump starts with
//!   a line that says how many.
//!
//! A callback that makes a failing call does not get that call's message
//! (it would recurse); the message is still kept and written.

use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::io::Write as _;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::ffi::{write_opt, write_out};
use crate::result::{CuError, CuResult};

/// `CU_LOG_LEVEL_ERROR` (`CUlogLevel`).
pub const CU_LOG_LEVEL_ERROR: c_int = 0;

/// The most bytes of messages kept (each with its newline): the size of
/// NVIDIA's log buffer (`cuLogsDumpToMemory`: "the maximum size of the buffer
/// is 25600 bytes").
pub const CAPACITY: usize = 25600;

/// `CUlogsCallback`: `void (*)(void *data, CUlogLevel logLevel, char
/// *message, size_t length)`.
pub type LogsCallback = unsafe extern "C" fn(*mut c_void, c_int, *mut c_char, usize);

/// The log: kept messages and registered callbacks.
struct Log {
    /// Messages kept, oldest first, with their numbers (consecutive).
    lines: VecDeque<(u32, String)>,
    /// Bytes of `lines`, a newline each included.
    bytes: usize,
    /// The number of the next message (`cuLogsCurrent`'s iterator).
    next: u32,
    /// Registered callbacks: handle, function, user data (as an address).
    callbacks: Vec<(usize, LogsCallback, usize)>,
    /// The next callback handle (never 0).
    next_handle: usize,
}

static LOG: Mutex<Log> =
    Mutex::new(Log { lines: VecDeque::new(), bytes: 0, next: 0, callbacks: Vec::new(), next_handle: 1 });

thread_local! {
    /// Whether this thread is inside a log callback.
    static IN_CALLBACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn log() -> MutexGuard<'static, Log> {
    LOG.lock().unwrap_or_else(|p| p.into_inner())
}

/// Records that entry point `name` fails with `err` because of `why`
/// (`None`: no reason was given).
pub fn record(name: &str, err: CuError, why: Option<&str>) {
    let message = format!("{}[E][{name}] {} ({err:?})", header(), why.unwrap_or("failed"));
    let callbacks = {
        let mut l = log();
        l.bytes += message.len() + 1;
        let n = l.next;
        l.lines.push_back((n, message.clone()));
        l.next = n.wrapping_add(1);
        while l.bytes > CAPACITY {
            match l.lines.pop_front() {
                Some((_, old)) => l.bytes -= old.len() + 1,
                None => break,
            }
        }
        l.callbacks.clone()
    };
    write_to_log_file(&message);
    // `try_with`: at process exit (cudart's exit handlers call the driver)
    // this thread's storage may be gone, and `with` would panic there,
    // outside the entry point's `catch_unwind`. No callbacks then.
    if callbacks.is_empty() || IN_CALLBACK.try_with(|c| c.replace(true)).unwrap_or(true) {
        return;
    }
    let mut text = message.into_bytes();
    let len = text.len();
    text.push(0);
    for (_, f, data) in callbacks {
        // SAFETY: `f` was registered as a `CUlogsCallback`; the message is
        // NUL-terminated and `len` bytes long, writable as the type says,
        // and outlives the call.
        unsafe { f(data as *mut c_void, CU_LOG_LEVEL_ERROR, text.as_mut_ptr().cast(), len) };
    }
    let _ = IN_CALLBACK.try_with(|c| c.set(false));
}

/// The start of a message, `[HH:MM:SS.mmm][TID][CUDA]`.
fn header() -> String {
    format!("[{}][{}][CUDA]", clock(), thread_id())
}

/// The time of day in UTC, `HH:MM:SS.mmm`.
fn clock() -> String {
    let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let s = t.as_secs() % 86_400;
    format!("{:02}:{:02}:{:02}.{:03}", s / 3600, s / 60 % 60, s % 60, t.subsec_millis())
}

/// The OS thread id.
fn thread_id() -> i64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid takes no arguments and cannot fail.
        unsafe { libc::syscall(libc::SYS_gettid) }
    }
    #[cfg(not(target_os = "linux"))]
    {
        std::process::id().into()
    }
}

/// Where `CUDA_LOG_FILE` sends messages.
enum Sink {
    Stdout,
    Stderr,
    File(Mutex<std::fs::File>),
}

/// Writes `message` to `CUDA_LOG_FILE`'s destination, if any (opened once;
/// a path that cannot be opened is ignored, as is a failed write).
fn write_to_log_file(message: &str) {
    static SINK: OnceLock<Option<Sink>> = OnceLock::new();
    let sink = SINK.get_or_init(|| {
        let dest = std::env::var_os("CUDA_LOG_FILE")?;
        match dest.to_str() {
            Some("stdout") => Some(Sink::Stdout),
            Some("stderr") => Some(Sink::Stderr),
            _ => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&dest)
                .ok()
                .map(|f| Sink::File(Mutex::new(f))),
        }
    });
    let _ = match sink {
        None => Ok(()),
        Some(Sink::Stdout) => writeln!(std::io::stdout(), "{message}"),
        Some(Sink::Stderr) => writeln!(std::io::stderr(), "{message}"),
        Some(Sink::File(f)) => writeln!(f.lock().unwrap_or_else(|p| p.into_inner()), "{message}"),
    };
}

fn check_flags(flags: c_uint) -> CuResult<()> {
    if flags != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("flags must be 0"));
    }
    Ok(())
}

/// `cuLogsRegisterCallback(CUlogsCallback callbackFunc, void *userData,
/// CUlogsCallbackHandle *callback_out)`: `callback_out` is optional.
///
/// # Safety
/// `callback` is a function of `CUlogsCallback`'s type or NULL;
/// `callback_out` is NULL or writable.
pub unsafe fn register_callback(
    callback: Option<LogsCallback>,
    user_data: *mut c_void,
    callback_out: *mut *mut c_void,
) -> CuResult<()> {
    let f = callback.ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because("callbackFunc is NULL"))?;
    let handle = {
        let mut l = log();
        let h = l.next_handle;
        l.next_handle += 1;
        l.callbacks.push((h, f, user_data as usize));
        h
    };
    // SAFETY: optional output, writable per the caller.
    unsafe { write_opt(callback_out, handle as *mut c_void) };
    Ok(())
}

/// `cuLogsUnregisterCallback(CUlogsCallbackHandle callback)`.
pub fn unregister_callback(callback: *mut c_void) -> CuResult<()> {
    let mut l = log();
    let before = l.callbacks.len();
    l.callbacks.retain(|c| c.0 != callback as usize);
    if l.callbacks.len() == before {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("no callback is registered under this handle"));
    }
    Ok(())
}

/// `cuLogsCurrent(CUlogIterator *iterator_out, unsigned int flags)`.
///
/// # Safety
/// `iterator_out` is NULL or writable.
pub unsafe fn current(iterator_out: *mut c_uint, flags: c_uint) -> CuResult<()> {
    check_flags(flags)?;
    let next = log().next;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(iterator_out, next) }
}

/// The messages from `from` (`None`: all kept) to the newest, how many of
/// those are no longer kept, and the number of the next message.
fn since(from: Option<u32>) -> (Vec<String>, u32, u32) {
    let l = log();
    // Numbers are consecutive, so the kept ones are the last `kept`.
    let kept = l.lines.len() as u32;
    let behind = match from {
        None => kept,
        // An iterator ahead of the log (one it never gave) reads as current.
        Some(f) => Some(l.next.wrapping_sub(f)).filter(|&b| b <= u32::MAX / 2).unwrap_or(0),
    };
    let take = behind.min(kept);
    let lines = l.lines.iter().skip((kept - take) as usize).map(|m| m.1.clone()).collect();
    (lines, behind - take, l.next)
}

/// The line (after [`header`]) that stands for `n` messages a dump leaves out.
fn truncation_line(header: &str, n: u32) -> String {
    format!(
        "{header}[W] {n} earlier messages are left out (the log keeps {CAPACITY} bytes; a dump buffer may hold less)"
    )
}

/// `cuLogsDumpToFile(CUlogIterator *iterator, const char *pathToFile,
/// unsigned int flags)`: appends the messages from `*iterator` (all kept
/// ones for NULL) to the file, a line each, and advances `*iterator`.
///
/// # Safety
/// `iterator` is NULL or readable and writable; `path` is NULL or a
/// NUL-terminated string.
pub unsafe fn dump_to_file(iterator: *mut c_uint, path: *const c_char, flags: c_uint) -> CuResult<()> {
    check_flags(flags)?;
    if path.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pathToFile is NULL"));
    }
    // SAFETY: non-null, NUL-terminated per the caller.
    let path = unsafe { CStr::from_ptr(path) }.to_string_lossy().into_owned();
    // SAFETY: NULL or readable per the caller.
    let from = unsafe { iterator.as_ref() }.copied();
    let (lines, lost, next) = since(from);
    let mut text = String::new();
    if lost > 0 {
        text.push_str(&truncation_line(&header(), lost));
        text.push('\n');
    }
    for l in &lines {
        text.push_str(l);
        text.push('\n');
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| CuError::CUDA_ERROR_OPERATING_SYSTEM.because(format!("cannot open {path}: {e}")))?;
    file.write_all(text.as_bytes())
        .map_err(|e| CuError::CUDA_ERROR_OPERATING_SYSTEM.because(format!("cannot write {path}: {e}")))?;
    // SAFETY: optional in-out argument, writable per the caller.
    unsafe { write_opt(iterator, next) };
    Ok(())
}

/// `lines` (and `lost` messages before them) as a dump of at most `cap`
/// bytes: all of them, or a line that counts those left out and the newest
/// that fit; `None` when no message fits.
fn fitting(lines: &[String], lost: u32, cap: usize) -> Option<String> {
    let joined = |ls: &[String]| ls.iter().flat_map(|l| [l.as_str(), "\n"]).collect::<String>();
    if lost == 0 && lines.iter().map(|l| l.len() + 1).sum::<usize>() <= cap {
        return Some(joined(lines));
    }
    // The newest messages that fit after the note; the note's length
    // depends only on the count it names.
    let header = header();
    let note = |kept: usize| truncation_line(&header, lost + (lines.len() - kept) as u32);
    let (mut kept, mut used) = (0, 0);
    for l in lines.iter().rev() {
        if used + l.len() + 1 + note(kept + 1).len() + 1 > cap {
            break;
        }
        used += l.len() + 1;
        kept += 1;
    }
    let text = format!("{}\n{}", note(kept), joined(&lines[lines.len() - kept..]));
    (text.len() <= cap && (kept > 0 || lines.is_empty())).then_some(text)
}

/// `cuLogsDumpToMemory(CUlogIterator *iterator, char *buffer, size_t *size,
/// unsigned int flags)`: the messages from `*iterator` (all kept ones for
/// NULL), a newline after each, NUL-terminated, into `buffer` of `*size`
/// bytes; `*size` becomes the bytes written without the NUL. When they do
/// not all fit, the newest that fit are written after a line saying so;
/// when none fits, `*size` is 0 and the call fails.
///
/// # Safety
/// `iterator` is NULL or readable and writable; `size` is NULL or readable
/// and writable; `buffer` is NULL or holds `*size` writable bytes.
pub unsafe fn dump_to_memory(
    iterator: *mut c_uint,
    buffer: *mut c_char,
    size: *mut usize,
    flags: c_uint,
) -> CuResult<()> {
    check_flags(flags)?;
    if buffer.is_null() || size.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("buffer or size is NULL"));
    }
    // SAFETY: non-null, readable per the caller.
    let room = unsafe { *size };
    if room == 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("*size is 0: no room for the terminating NUL"));
    }
    // SAFETY: NULL or readable per the caller.
    let from = unsafe { iterator.as_ref() }.copied();
    let (lines, lost, next) = since(from);
    let Some(text) = fitting(&lines, lost, room - 1) else {
        // SAFETY: non-null, writable per the caller.
        unsafe {
            *size = 0;
            *buffer = 0;
        }
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("the buffer holds no whole message"));
    };
    // SAFETY: `buffer` holds `room` > `text.len()` writable bytes per the
    // caller; `size` is writable.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buffer.cast::<u8>(), text.len());
        *buffer.add(text.len()) = 0;
        *size = text.len();
    }
    // SAFETY: optional in-out argument, writable per the caller.
    unsafe { write_opt(iterator, next) };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_has_the_drivers_form() {
        let c = clock();
        assert_eq!(c.len(), 12, "{c}");
        assert_eq!(&c[2..3], ":");
        assert_eq!(&c[8..9], ".");
    }
}
