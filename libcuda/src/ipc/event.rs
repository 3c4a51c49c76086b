//! Interprocess events (Linux): `cuIpcGetEventHandle`, `cuIpcOpenEventHandle`.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

use super::transport::{fetch_fd, made_here, server, REQUEST_EVENT};
use super::{lock, IpcHandle, IPC_HANDLE_SIZE, VERSION};
use crate::context;
use crate::ffi::write_out;
use crate::result::{CuError, CuResult};

/// First bytes of an event handle made here.
const EVENT_MAGIC: [u8; 4] = *b"PVKE";

/// What an interprocess event shares: one page of memory (a memfd) that
/// every process holding the event maps. Each `cuEventRecord`, in any of
/// them, takes the next record number; the recording process marks it done
/// when the work queued before it has finished (a watcher thread polls for
/// that, so the process need not call the driver again). The event is
/// complete when the latest record is done.
#[repr(C)]
struct Record {
    /// Number of the latest record.
    seq: AtomicU64,
    /// Highest record number whose work has finished.
    done: AtomicU64,
    /// Process id of the latest recorder (0: none yet), so that a waiter
    /// can tell when the record will never be marked done.
    recorder: AtomicU64,
}

/// Size of the shared mapping.
const RECORD_BYTES: usize = 4096;

/// An interprocess event's shared record, mapped in this process.
pub struct SharedEvent {
    fd: OwnedFd,
    map: NonNull<Record>,
}

// SAFETY: the mapping is shared memory that lives as long as the object and
// is only accessed through atomics.
unsafe impl Send for SharedEvent {}
// SAFETY: as above.
unsafe impl Sync for SharedEvent {}

impl Drop for SharedEvent {
    fn drop(&mut self) {
        // SAFETY: `map` is this object's mapping of RECORD_BYTES, unused from now on.
        unsafe { libc::munmap(self.map.as_ptr().cast(), RECORD_BYTES) };
    }
}

impl SharedEvent {
    /// A new record (zero: never recorded, so complete), for `cuEventCreate`
    /// with `CU_EVENT_INTERPROCESS`.
    pub fn create() -> CuResult<Arc<SharedEvent>> {
        let os = |what: &str| {
            CuError::CUDA_ERROR_OUT_OF_MEMORY
                .because(format!("interprocess event: {what}: {}", std::io::Error::last_os_error()))
        };
        // SAFETY: a NUL-terminated name and valid flags.
        let raw =
            unsafe { libc::memfd_create(c"ptxvk-ipc-event".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
        if raw < 0 {
            return Err(os("memfd_create"));
        }
        // SAFETY: `memfd_create` returned a new descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: `fd` is a live memfd.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), RECORD_BYTES as libc::off_t) } != 0 {
            return Err(os("ftruncate"));
        }
        // Sealed at its size: a process that maps it cannot shrink it under
        // the others' atomics (they would fault).
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        // SAFETY: `fd` is a live memfd created with MFD_ALLOW_SEALING.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
            return Err(os("sealing"));
        }
        SharedEvent::map(fd)
    }

    /// Maps a record another process (or [`SharedEvent::create`]) made.
    fn map(fd: OwnedFd) -> CuResult<Arc<SharedEvent>> {
        // SAFETY: a zeroed stat is valid for fstat to fill.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is live; `st` is writable.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 || (st.st_size as usize) < RECORD_BYTES {
            return Err(CuError::CUDA_ERROR_MAP_FAILED.because("the event's shared record has the wrong size"));
        }
        // SAFETY: mapping RECORD_BYTES of a file at least that long, shared.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                RECORD_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(CuError::CUDA_ERROR_MAP_FAILED
                .because(format!("mapping the event's shared record: {}", std::io::Error::last_os_error())));
        }
        let map = NonNull::new(p.cast::<Record>()).ok_or(CuError::CUDA_ERROR_MAP_FAILED)?;
        Ok(Arc::new(SharedEvent { fd, map }))
    }

    fn record(&self) -> &Record {
        // SAFETY: the mapping is page-aligned, RECORD_BYTES long, zero-filled
        // at creation (a valid `Record`) and lives as long as `self`.
        unsafe { self.map.as_ref() }
    }

    /// Whether the work before the latest record, in whichever process made
    /// it, has finished (`cuEventQuery`).
    pub fn is_complete(&self) -> bool {
        let r = self.record();
        let seq = r.seq.load(Ordering::Acquire);
        r.done.load(Ordering::Acquire) >= seq
    }

    /// Waits until [`SharedEvent::is_complete`]; `CUDA_ERROR_ILLEGAL_STATE`
    /// if the process that made the latest record exited before its work
    /// finished (the record would never complete).
    pub fn wait(&self) -> CuResult<()> {
        let mut pause = Duration::from_micros(20);
        let mut polls = 0u32;
        while !self.is_complete() {
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(1));
            polls += 1;
            if polls.is_multiple_of(100) && !self.recorder_alive() && !self.is_complete() {
                return Err(CuError::CUDA_ERROR_ILLEGAL_STATE
                    .because("the process that recorded the interprocess event exited before its work finished"));
            }
        }
        Ok(())
    }

    /// Whether the latest recorder (if any) is still running.
    fn recorder_alive(&self) -> bool {
        let Ok(pid) = libc::pid_t::try_from(self.record().recorder.load(Ordering::Acquire)) else { return true };
        if pid <= 0 {
            return true;
        }
        // SAFETY: signal 0 only checks that the process exists.
        let rc = unsafe { libc::kill(pid, 0) };
        rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }

    /// `cuEventRecord` here: the event is complete again once the work
    /// `runtime` has queued so far has finished.
    pub fn record_on(self: &Arc<Self>, runtime: &ptxvk_runtime::Context) -> CuResult<()> {
        self.record().recorder.store(u64::from(std::process::id()), Ordering::Release);
        let seq = self.record().seq.fetch_add(1, Ordering::AcqRel) + 1;
        let mark = runtime.work_mark();
        if runtime.is_done(mark)? {
            self.record().done.fetch_max(seq, Ordering::AcqRel);
            return Ok(());
        }
        let mut w = lock(&WATCHER);
        if w.pid != std::process::id() {
            let pid = std::process::id();
            std::thread::Builder::new()
                .name("ptxvk-ipc-events".into())
                .spawn(watch)
                .map_err(|e| CuError::CUDA_ERROR_OUT_OF_MEMORY.because(format!("IPC event thread: {e}")))?;
            *w = Watcher { pid, pending: Vec::new() };
        }
        w.pending.push(Pending { runtime: runtime.clone(), mark, event: self.clone(), seq });
        WATCHER_WAKE.notify_one();
        Ok(())
    }
}

/// A record whose work has not finished yet.
struct Pending {
    runtime: ptxvk_runtime::Context,
    mark: u64,
    event: Arc<SharedEvent>,
    seq: u64,
}

/// Records the watcher thread marks done.
struct Watcher {
    /// The process whose thread serves the list (a forked child starts its own).
    pid: u32,
    pending: Vec<Pending>,
}

static WATCHER: Mutex<Watcher> = Mutex::new(Watcher { pid: 0, pending: Vec::new() });
static WATCHER_WAKE: Condvar = Condvar::new();

/// Marks pending records done as their work finishes.
fn watch() {
    let mut w = lock(&WATCHER);
    loop {
        while w.pending.is_empty() {
            w = WATCHER_WAKE.wait(w).unwrap_or_else(|p| p.into_inner());
        }
        w.pending.retain(|p| {
            // A failure of that work is the recording process's to report;
            // for the event it has finished all the same.
            let finished = p.runtime.is_done(p.mark).unwrap_or(true);
            if finished {
                p.event.record().done.fetch_max(p.seq, Ordering::AcqRel);
            }
            !finished
        });
        drop(w);
        std::thread::sleep(Duration::from_micros(200));
        w = lock(&WATCHER);
    }
}

/// Interprocess events handed out by [`ipc_get_event_handle`], by id.
static EXPORTED_EVENTS: Mutex<BTreeMap<u64, Weak<SharedEvent>>> = Mutex::new(BTreeMap::new());
/// Next exported event id.
static NEXT_EVENT_ID: AtomicU64 = AtomicU64::new(1);

/// The contents of a `CUipcEventHandle` made here (little-endian): magic
/// `PVKE` (0..4), version (4..6), exporter pid (8..12), token (16..24),
/// event id (24..32), zeros.
fn encode_event(pid: u32, token: u64, id: u64) -> [u8; IPC_HANDLE_SIZE] {
    let mut b = [0u8; IPC_HANDLE_SIZE];
    b[0..4].copy_from_slice(&EVENT_MAGIC);
    b[4..6].copy_from_slice(&VERSION.to_le_bytes());
    b[8..12].copy_from_slice(&pid.to_le_bytes());
    b[16..24].copy_from_slice(&token.to_le_bytes());
    b[24..32].copy_from_slice(&id.to_le_bytes());
    b
}

/// `(pid, token, id)` of an event handle; `None` for other bytes.
fn decode_event(b: &[u8; IPC_HANDLE_SIZE]) -> Option<(u32, u64, u64)> {
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
    let pid = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
    let ok = b[0..4] == EVENT_MAGIC
        && b[4..6] == VERSION.to_le_bytes()
        && b[6..8] == [0, 0]
        && b[12..16] == [0; 4]
        && b[32..].iter().all(|&x| x == 0)
        && pid != 0;
    ok.then(|| (pid, u64_at(16), u64_at(24)))
}

/// `cuIpcGetEventHandle(CUipcEventHandle *pHandle, CUevent event)`: a NULL
/// `pHandle`, or an event not created with `CU_EVENT_INTERPROCESS` and
/// `CU_EVENT_DISABLE_TIMING`, is `CUDA_ERROR_INVALID_VALUE`; an event that
/// is not live, `CUDA_ERROR_INVALID_HANDLE`. For an event that is not
/// interprocess `*pHandle` is zeroed as well, as NVIDIA's driver leaves it:
/// Warp copies the handle out whatever the result and tells the user
/// "IPC event handle appears to be invalid" when the bytes are all zero
/// (Warp's `test_ipc_event_missing_interprocess_flag`).
///
/// # Safety
/// `handle` is NULL or writable.
pub unsafe fn ipc_get_event_handle(handle: *mut IpcHandle, event: crate::ffi::Handle) -> CuResult<()> {
    let ev = crate::stream::lookup_event(event)?;
    if handle.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pHandle is NULL"));
    }
    let Some(shared) = ev.ipc.as_ref().filter(|_| ev.flags & crate::stream::CU_EVENT_INTERPROCESS != 0) else {
        // SAFETY: checked non-null; writable per the caller.
        unsafe { write_out(handle, IpcHandle { reserved: [0; 64] })? };
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("the event was not created with CU_EVENT_INTERPROCESS"));
    };
    let (pid, token) = server()?;
    let mut exported = lock(&EXPORTED_EVENTS);
    exported.retain(|_, e| e.strong_count() > 0);
    let id = exported.iter().find(|(_, e)| e.as_ptr() == Arc::as_ptr(shared)).map(|(&id, _)| id);
    let id = id.unwrap_or_else(|| {
        let id = NEXT_EVENT_ID.fetch_add(1, Ordering::Relaxed);
        exported.insert(id, Arc::downgrade(shared));
        id
    });
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(handle, IpcHandle { reserved: encode_event(pid, token, id) }) }
}

/// `cuIpcOpenEventHandle(CUevent *phEvent, CUipcEventHandle handle)`: an
/// event that behaves like one created here with `CU_EVENT_DISABLE_TIMING`,
/// sharing its state with the exporter's. A NULL `phEvent` or bytes that
/// are no handle are `CUDA_ERROR_INVALID_VALUE`; a handle of this process,
/// `CUDA_ERROR_INVALID_CONTEXT`; an exporter that is gone or an event it
/// destroyed, `CUDA_ERROR_INVALID_HANDLE`.
///
/// # Safety
/// `ph_event` is NULL or writable.
pub unsafe fn ipc_open_event_handle(ph_event: *mut crate::ffi::Handle, handle: IpcHandle) -> CuResult<()> {
    let ctx = context::current()?;
    if ph_event.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("phEvent is NULL"));
    }
    let (pid, token, id) = decode_event(&handle.reserved)
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because("the bytes are not a CUipcEventHandle of ptxvk"))?;
    if made_here(pid, token) {
        return Err(CuError::CUDA_ERROR_INVALID_CONTEXT
            .because("the handle was exported by this process; it can only be opened in another one"));
    }
    let shared = SharedEvent::map(fetch_fd(pid, token, REQUEST_EVENT, 0, id)?)?;
    let h = crate::stream::new_event(ctx, crate::stream::CU_EVENT_DISABLE_TIMING, Some(shared));
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(ph_event, h) }
}

/// A new descriptor of the shared record of exported event `id` (the server's side).
pub(super) fn served_fd(id: u64) -> CuResult<OwnedFd> {
    let shared = lock(&EXPORTED_EVENTS).get(&id).and_then(Weak::upgrade).ok_or(CuError::CUDA_ERROR_INVALID_HANDLE)?;
    shared.fd.try_clone().map_err(|e| CuError::CUDA_ERROR_MAP_FAILED.because(format!("duplicating the record: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_bytes_round_trip() {
        let e = encode_event(99, 0xfeed, 5);
        assert_eq!(decode_event(&e), Some((99, 0xfeed, 5)));
        let mut bad = e;
        bad[1] ^= 1;
        assert_eq!(decode_event(&bad), None);
        assert_eq!(decode_event(&[0; IPC_HANDLE_SIZE]), None);
    }

    #[test]
    fn shared_event_records_complete_when_marked_done() {
        let a = SharedEvent::create().unwrap();
        assert!(a.is_complete(), "never recorded");
        let b = SharedEvent::map(a.fd.try_clone().unwrap()).unwrap();
        let seq = a.record().seq.fetch_add(1, Ordering::AcqRel) + 1;
        assert!(!a.is_complete() && !b.is_complete(), "both mappings see the record");
        b.record().done.fetch_max(seq, Ordering::AcqRel);
        assert!(a.is_complete());
        a.wait().unwrap();
    }
}
