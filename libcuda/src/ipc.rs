//! CUDA IPC: `cuIpcGetMemHandle`, `cuIpcOpenMemHandle`, `cuIpcCloseMemHandle`.
//!
//! An allocation is shared as Vulkan opaque-fd memory (see
//! `ptxvk_runtime::Context::export_memory`). A file descriptor cannot travel
//! inside the 64 bytes of a `CUipcMemHandle`, so the exporting process runs a
//! small server (a thread started at the first export) on a Unix-domain
//! socket in the abstract namespace, named after its pid and a random token.
//! The handle carries that name and what the importer must repeat to import
//! the memory ([`MemHandle`]); the importer connects, presents the handle,
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

use std::collections::BTreeMap;
use std::ffi::c_uint;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::Duration;

use ptxvk_runtime::ExportedMemory;

use crate::context;
use crate::driver;
use crate::ffi::{write_out, CUdeviceptr};
use crate::result::{CuError, CuResult};

/// `CU_IPC_HANDLE_SIZE`.
pub const IPC_HANDLE_SIZE: usize = 64;

/// `CUipcMemHandle` (and `CUipcEventHandle`): 64 opaque bytes, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IpcHandle {
    /// The bytes ([`MemHandle::encode`]).
    pub reserved: [u8; IPC_HANDLE_SIZE],
}

/// `CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS`, the one flag of `cuIpcOpenMemHandle`.
const CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: c_uint = 0x1;

/// First bytes of a memory handle made here.
const MEM_MAGIC: [u8; 4] = *b"PVKM";
/// Layout version of [`MemHandle`].
const VERSION: u16 = 1;
/// First bytes of a request to the exporting process's server.
const REQUEST_MAGIC: [u8; 4] = *b"PVKR";
/// Request kind: a memory descriptor.
const REQUEST_MEMORY: u32 = 1;
/// Request kind: an event's shared record.
const REQUEST_EVENT: u32 = 2;
/// First bytes of an event handle made here.
const EVENT_MAGIC: [u8; 4] = *b"PVKE";
/// How long either side waits for the other.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The contents of a `CUipcMemHandle` made by [`ipc_get_mem_handle`]
/// (little-endian): magic `PVKM` (0..4), version (4..6), exporter pid
/// (8..12), exporter device ordinal (12..16), token (16..24), allocation id
/// (24..32), memory size (32..40), buffer size (40..48), requested size
/// (48..56), memory type (56..60), device fingerprint (60..64).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct MemHandle {
    pid: u32,
    ordinal: u32,
    token: u64,
    memory: ExportedMemory,
    /// The first four bytes of the exporting device's UUID: memory can only
    /// be imported on the same device (and driver).
    device: u32,
}

impl MemHandle {
    fn encode(&self) -> [u8; IPC_HANDLE_SIZE] {
        let mut b = [0u8; IPC_HANDLE_SIZE];
        b[0..4].copy_from_slice(&MEM_MAGIC);
        b[4..6].copy_from_slice(&VERSION.to_le_bytes());
        b[8..12].copy_from_slice(&self.pid.to_le_bytes());
        b[12..16].copy_from_slice(&self.ordinal.to_le_bytes());
        b[16..24].copy_from_slice(&self.token.to_le_bytes());
        b[24..32].copy_from_slice(&self.memory.id.to_le_bytes());
        b[32..40].copy_from_slice(&self.memory.memory_size.to_le_bytes());
        b[40..48].copy_from_slice(&self.memory.buffer_size.to_le_bytes());
        b[48..56].copy_from_slice(&self.memory.size.to_le_bytes());
        b[56..60].copy_from_slice(&self.memory.memory_type.to_le_bytes());
        b[60..64].copy_from_slice(&self.device.to_le_bytes());
        b
    }

    /// `None` for bytes [`MemHandle::encode`] did not make.
    fn decode(b: &[u8; IPC_HANDLE_SIZE]) -> Option<MemHandle> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| u64::from(u32_at(i)) | u64::from(u32_at(i + 4)) << 32;
        if b[0..4] != MEM_MAGIC || b[4..6] != VERSION.to_le_bytes() || b[6..8] != [0, 0] {
            return None;
        }
        let h = MemHandle {
            pid: u32_at(8),
            ordinal: u32_at(12),
            token: u64_at(16),
            memory: ExportedMemory {
                id: u64_at(24),
                memory_size: u64_at(32),
                buffer_size: u64_at(40),
                size: u64_at(48),
                memory_type: u32_at(56),
            },
            device: u32_at(60),
        };
        (h.pid != 0 && h.memory.size != 0).then_some(h)
    }
}

/// The first four bytes of a device UUID, as a handle records it.
fn fingerprint(uuid: &[u8; 16]) -> u32 {
    u32::from_le_bytes([uuid[0], uuid[1], uuid[2], uuid[3]])
}

/// The exporting side's server, once started in this process.
struct Server {
    /// The process that started it (a forked child starts its own).
    pid: u32,
    token: u64,
}

static SERVER: Mutex<Option<Server>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The abstract socket name of process `pid`'s server.
fn socket_name(pid: u32, token: u64) -> String {
    format!("ptxvk-ipc-{pid}-{token:016x}")
}

/// 64 bits no other process can guess: from the kernel's random source,
/// or, failing that, from std's randomly keyed hasher and the clock.
fn random_token() -> u64 {
    let mut b = [0u8; 8];
    if std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b)).is_ok() {
        return u64::from_le_bytes(b);
    }
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.finish()
}

/// This process's server (started now if needed): `(pid, token)`.
fn server() -> CuResult<(u32, u64)> {
    let pid = std::process::id();
    let mut guard = lock(&SERVER);
    if let Some(s) = guard.as_ref().filter(|s| s.pid == pid) {
        return Ok((s.pid, s.token));
    }
    let map_failed = |what: &str, e: std::io::Error| CuError::CUDA_ERROR_MAP_FAILED.because(format!("{what}: {e}"));
    let token = random_token();
    let addr = SocketAddr::from_abstract_name(socket_name(pid, token)).map_err(|e| map_failed("IPC socket name", e))?;
    let listener = UnixListener::bind_addr(&addr).map_err(|e| map_failed("IPC socket", e))?;
    std::thread::Builder::new()
        .name("ptxvk-ipc".into())
        .spawn(move || serve(listener, token))
        .map_err(|e| map_failed("IPC server thread", e))?;
    *guard = Some(Server { pid, token });
    Ok((pid, token))
}

/// Answers importers, one connection at a time, for the life of the process.
fn serve(listener: UnixListener, token: u64) {
    for stream in listener.incoming() {
        match stream {
            Ok(s) => {
                if let Err(e) = answer(s, token) {
                    log::warn!("ptxvk IPC: a request failed: {e}");
                }
            }
            Err(e) => log::warn!("ptxvk IPC: accept failed: {e}"),
        }
    }
}

/// The user id of the process at the other end of `s` (`SO_PEERCRED`).
fn peer_uid(s: &UnixStream) -> std::io::Result<u32> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writing, `len` holds the size of `cred`.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// Serves one request: `REQUEST_MAGIC`, kind, device ordinal, 0, token,
/// allocation id (32 bytes). The reply is a 4-byte `CUresult`, with the
/// memory's descriptor attached when it is `CUDA_SUCCESS`.
fn answer(mut s: UnixStream, token: u64) -> std::io::Result<()> {
    s.set_read_timeout(Some(TIMEOUT))?;
    s.set_write_timeout(Some(TIMEOUT))?;
    // SAFETY: `getuid` has no preconditions.
    if peer_uid(&s)? != unsafe { libc::getuid() } {
        return send_reply(&s, CuError::CUDA_ERROR_INVALID_HANDLE.code(), None);
    }
    let mut req = [0u8; 32];
    s.read_exact(&mut req)?;
    let u32_at = |i: usize| u32::from_le_bytes([req[i], req[i + 1], req[i + 2], req[i + 3]]);
    let token_in = u64::from(u32_at(16)) | u64::from(u32_at(20)) << 32;
    let id = u64::from(u32_at(24)) | u64::from(u32_at(28)) << 32;
    if req[0..4] != REQUEST_MAGIC || token_in != token {
        return send_reply(&s, CuError::CUDA_ERROR_INVALID_HANDLE.code(), None);
    }
    if u32_at(4) == REQUEST_EVENT {
        let shared = lock(&EXPORTED_EVENTS).get(&id).and_then(std::sync::Weak::upgrade);
        return match shared.map(|e| e.fd.try_clone()) {
            Some(Ok(fd)) => send_reply(&s, 0, Some(&fd)),
            _ => send_reply(&s, CuError::CUDA_ERROR_INVALID_HANDLE.code(), None),
        };
    }
    if u32_at(4) != REQUEST_MEMORY {
        return send_reply(&s, CuError::CUDA_ERROR_INVALID_HANDLE.code(), None);
    }
    let fd = driver::driver()
        .and_then(|d| d.devices.get(u32_at(8) as usize).ok_or(CuError::CUDA_ERROR_INVALID_HANDLE))
        .and_then(|d| d.runtime())
        .and_then(|rt| {
            // As at export: the importer sees what was written before it opened.
            rt.synchronize()?;
            rt.exported_memory_fd(id).map_err(|_| CuError::CUDA_ERROR_INVALID_HANDLE)
        });
    match fd {
        Ok(fd) => send_reply(&s, 0, Some(&fd)),
        Err(e) => send_reply(&s, e.code(), None),
    }
}

/// Space for one `int` of `SCM_RIGHTS` ancillary data, aligned for `cmsghdr`.
#[repr(C, align(8))]
struct CmsgSpace([u8; 64]);

/// Sends `code` (and `fd` as `SCM_RIGHTS`).
fn send_reply(s: &UnixStream, code: u32, fd: Option<&OwnedFd>) -> std::io::Result<()> {
    let mut body = code.to_le_bytes();
    let mut iov = libc::iovec { iov_base: body.as_mut_ptr().cast(), iov_len: body.len() };
    let mut space = CmsgSpace([0; 64]);
    // SAFETY: a zeroed msghdr is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if let Some(fd) = fd {
        let int = std::mem::size_of::<libc::c_int>() as u32;
        // SAFETY: CMSG_SPACE/CMSG_LEN only compute sizes.
        let (space_len, len) = unsafe { (libc::CMSG_SPACE(int) as usize, libc::CMSG_LEN(int) as usize) };
        msg.msg_control = space.0.as_mut_ptr().cast();
        msg.msg_controllen = space_len;
        // SAFETY: the control buffer is aligned, zeroed and at least
        // CMSG_SPACE(sizeof(int)) bytes, so the first header and its data fit.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = len as _;
            libc::CMSG_DATA(cmsg).cast::<libc::c_int>().write_unaligned(fd.as_raw_fd());
        }
    }
    // SAFETY: `msg` points at live buffers of the lengths it records.
    let n = unsafe { libc::sendmsg(s.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n != body.len() as isize {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Receives a reply of [`send_reply`]: the code and the descriptor, if one came.
fn recv_reply(s: &UnixStream) -> std::io::Result<(u32, Option<OwnedFd>)> {
    let mut body = [0u8; 4];
    let mut iov = libc::iovec { iov_base: body.as_mut_ptr().cast(), iov_len: body.len() };
    let mut space = CmsgSpace([0; 64]);
    // SAFETY: a zeroed msghdr is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.0.as_mut_ptr().cast();
    msg.msg_controllen = space.0.len();
    // SAFETY: `msg` points at live, writable buffers of the lengths it records.
    let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut fd = None;
    // SAFETY: the kernel filled the control buffer; the CMSG macros walk
    // only within `msg_controllen`.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let raw = libc::CMSG_DATA(cmsg).cast::<libc::c_int>().read_unaligned();
                // The descriptor is ours now (one per message is all the server sends).
                fd = Some(OwnedFd::from_raw_fd(raw));
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if n != body.len() as isize {
        return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "short IPC reply"));
    }
    Ok((u32::from_le_bytes(body), fd))
}

/// Asks the exporting process of `h` for its memory's descriptor.
fn fetch_memory_fd(h: &MemHandle) -> CuResult<OwnedFd> {
    fetch_fd(h.pid, h.token, REQUEST_MEMORY, h.ordinal, h.memory.id)
}

/// Asks process `pid` (whose server has `token`) for the descriptor of
/// object `id` of `kind`.
fn fetch_fd(pid: u32, token: u64, kind: u32, ordinal: u32, id: u64) -> CuResult<OwnedFd> {
    let gone = |e: std::io::Error| {
        CuError::CUDA_ERROR_INVALID_HANDLE
            .because(format!("the process that exported this handle (pid {pid}) cannot be reached: {e}"))
    };
    let addr = SocketAddr::from_abstract_name(socket_name(pid, token)).map_err(gone)?;
    let mut s = UnixStream::connect_addr(&addr).map_err(gone)?;
    s.set_read_timeout(Some(TIMEOUT)).map_err(gone)?;
    s.set_write_timeout(Some(TIMEOUT)).map_err(gone)?;
    let mut req = [0u8; 32];
    req[0..4].copy_from_slice(&REQUEST_MAGIC);
    req[4..8].copy_from_slice(&kind.to_le_bytes());
    req[8..12].copy_from_slice(&ordinal.to_le_bytes());
    req[16..24].copy_from_slice(&token.to_le_bytes());
    req[24..32].copy_from_slice(&id.to_le_bytes());
    s.write_all(&req).map_err(gone)?;
    match recv_reply(&s).map_err(gone)? {
        (0, Some(fd)) => Ok(fd),
        (0, None) => Err(CuError::CUDA_ERROR_MAP_FAILED.because("the exporting process sent no descriptor")),
        (_, _) => Err(CuError::CUDA_ERROR_INVALID_HANDLE
            .because(format!("process {pid} has no live object {id} to share (freed or destroyed?)"))),
    }
}

/// One handle opened in this process.
struct Import {
    /// Exporting process, its token and the allocation id.
    key: (u32, u64, u64),
    /// `cuCtxGetId` of the context that opened it.
    context: u64,
    runtime: ptxvk_runtime::Context,
    addr: u64,
    refs: u32,
}

static IMPORTS: Mutex<Vec<Import>> = Mutex::new(Vec::new());

/// `cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)`: "dptr -
/// Base pointer to previously allocated device memory" (`cuMemAlloc`), so
/// any other pointer is `CUDA_ERROR_INVALID_VALUE`, as is a NULL `pHandle`;
/// `CUDA_ERROR_NOT_SUPPORTED` where the device cannot share memory
/// (`CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED` 0; see `PTXVK_IPC`).
///
/// # Safety
/// `handle` is NULL or writable.
pub unsafe fn ipc_get_mem_handle(handle: *mut IpcHandle, dptr: CUdeviceptr) -> CuResult<()> {
    let ctx = context::current()?;
    if handle.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pHandle is NULL"));
    }
    let owner = crate::memory::owner_of(&ctx, dptr).ok_or_else(|| {
        CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{dptr:#x} is not the base of a cuMemAlloc allocation"))
    })?;
    let memory = owner.runtime.export_memory(dptr)?;
    // Work is queued until a synchronisation point: what the process wrote
    // before exporting must reach the memory before another process reads it.
    owner.runtime.synchronize()?;
    let (pid, token) = server()?;
    let h = MemHandle {
        pid,
        ordinal: owner.device.ordinal as u32,
        token,
        memory,
        device: fingerprint(&owner.runtime.info().uuid),
    };
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(handle, IpcHandle { reserved: h.encode() }) }
}

/// `cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
/// unsigned int Flags)`: Flags other than 0 and
/// `CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS`, a NULL `pdptr` and bytes that are
/// no handle are `CUDA_ERROR_INVALID_VALUE`; a handle this process
/// exported is `CUDA_ERROR_INVALID_CONTEXT`; a handle whose exporter is
/// gone or whose allocation was freed is `CUDA_ERROR_INVALID_HANDLE`; one
/// from another device, or memory the driver refuses, `CUDA_ERROR_MAP_FAILED`.
///
/// # Safety
/// `pdptr` is NULL or writable.
pub unsafe fn ipc_open_mem_handle(pdptr: *mut CUdeviceptr, handle: IpcHandle, flags: c_uint) -> CuResult<()> {
    let ctx = context::current()?;
    if pdptr.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pdptr is NULL"));
    }
    if flags & !CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown flags {flags:#x}")));
    }
    let h = MemHandle::decode(&handle.reserved)
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because("the bytes are not a CUipcMemHandle of ptxvk"))?;
    let mine = lock(&SERVER).as_ref().is_some_and(|s| s.pid == std::process::id() && s.token == h.token);
    if mine || h.pid == std::process::id() {
        return Err(CuError::CUDA_ERROR_INVALID_CONTEXT
            .because("the handle was exported by this process; it can only be opened in another one"));
    }
    if !ctx.runtime.info().supports_ipc_memory {
        return Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because("this device cannot share memory between processes"));
    }
    if fingerprint(&ctx.runtime.info().uuid) != h.device {
        return Err(CuError::CUDA_ERROR_MAP_FAILED
            .because("the memory belongs to another device than the current context's (no peer mappings here)"));
    }
    let key = (h.pid, h.token, h.memory.id);
    let mut imports = lock(&IMPORTS);
    if let Some(i) = imports.iter_mut().find(|i| i.key == key && i.context == ctx.id) {
        i.refs += 1;
        // SAFETY: checked non-null; writable per the caller.
        return unsafe { write_out(pdptr, i.addr) };
    }
    let fd = fetch_memory_fd(&h)?;
    let addr = ctx.runtime.import_memory(fd, &h.memory).map_err(|e| {
        let why = e.to_string();
        match e {
            ptxvk_runtime::Error::OutOfMemory => CuError::CUDA_ERROR_OUT_OF_MEMORY.because(why),
            _ => CuError::CUDA_ERROR_MAP_FAILED.because(why),
        }
    })?;
    imports.push(Import { key, context: ctx.id, runtime: ctx.runtime.clone(), addr, refs: 1 });
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(pdptr, addr) }
}

/// `cuIpcCloseMemHandle(CUdeviceptr dptr)`: lowers the reference count of
/// memory returned by `cuIpcOpenMemHandle` and unmaps it at zero; any other
/// pointer (one already closed included) is `CUDA_ERROR_INVALID_VALUE`.
pub fn ipc_close_mem_handle(dptr: CUdeviceptr) -> CuResult<()> {
    let ctx = context::current()?;
    let mut imports = lock(&IMPORTS);
    let at = imports
        .iter()
        .position(|i| i.addr == dptr && i.context == ctx.id)
        .or_else(|| imports.iter().position(|i| i.addr == dptr))
        .ok_or_else(|| {
            CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{dptr:#x} is not memory opened by cuIpcOpenMemHandle"))
        })?;
    imports[at].refs -= 1;
    if imports[at].refs == 0 {
        let import = imports.swap_remove(at);
        // Queued writes reach the shared memory before it is unmapped here.
        import.runtime.synchronize()?;
        import.runtime.close_imported(import.addr)?;
    }
    Ok(())
}

/// Unmaps what the context `id` opened and has not closed (it is being destroyed).
pub fn forget_context(id: u64) {
    let mut imports = lock(&IMPORTS);
    imports.retain(|i| {
        if i.context == id {
            let _ = i.runtime.close_imported(i.addr);
        }
        i.context != id
    });
}

// ---- events ---------------------------------------------------------------

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
        let raw = unsafe { libc::memfd_create(c"ptxvk-ipc-event".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(os("memfd_create"));
        }
        // SAFETY: `memfd_create` returned a new descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: `fd` is a live memfd.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), RECORD_BYTES as libc::off_t) } != 0 {
            return Err(os("ftruncate"));
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

    /// Waits until [`SharedEvent::is_complete`].
    pub fn wait(&self) {
        let mut pause = Duration::from_micros(20);
        while !self.is_complete() {
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(1));
        }
    }

    /// `cuEventRecord` here: the event is complete again once the work
    /// `runtime` has queued so far has finished.
    pub fn record_on(self: &Arc<Self>, runtime: &ptxvk_runtime::Context) -> CuResult<()> {
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
/// is not live, `CUDA_ERROR_INVALID_HANDLE`.
///
/// # Safety
/// `handle` is NULL or writable.
pub unsafe fn ipc_get_event_handle(handle: *mut IpcHandle, event: crate::ffi::Handle) -> CuResult<()> {
    let ev = crate::stream::lookup_event(event)?;
    if handle.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pHandle is NULL"));
    }
    let shared = ev.ipc.as_ref().filter(|_| ev.flags & crate::stream::CU_EVENT_INTERPROCESS != 0).ok_or_else(|| {
        CuError::CUDA_ERROR_INVALID_VALUE.because("the event was not created with CU_EVENT_INTERPROCESS")
    })?;
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
    let mine = lock(&SERVER).as_ref().is_some_and(|s| s.pid == std::process::id() && s.token == token);
    if mine || pid == std::process::id() {
        return Err(CuError::CUDA_ERROR_INVALID_CONTEXT
            .because("the handle was exported by this process; it can only be opened in another one"));
    }
    let shared = SharedEvent::map(fetch_fd(pid, token, REQUEST_EVENT, 0, id)?)?;
    let h = crate::stream::new_event(ctx, crate::stream::CU_EVENT_DISABLE_TIMING, Some(shared));
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(ph_event, h) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_bytes_round_trip() {
        let h = MemHandle {
            pid: 4242,
            ordinal: 1,
            token: 0x0123_4567_89ab_cdef,
            memory: ExportedMemory { id: 77, memory_size: 8192, memory_type: 3, buffer_size: 4352, size: 4321 },
            device: 0xdead_beef,
        };
        let b = h.encode();
        assert_eq!(&b[0..4], b"PVKM");
        assert_eq!(MemHandle::decode(&b), Some(h));
        let mut bad = b;
        bad[0] = b'X';
        assert_eq!(MemHandle::decode(&bad), None);
        assert_eq!(MemHandle::decode(&[0; IPC_HANDLE_SIZE]), None);
        assert_eq!(decode_event(&b), None);
        let e = encode_event(99, 0xfeed, 5);
        assert_eq!(decode_event(&e), Some((99, 0xfeed, 5)));
        assert_eq!(MemHandle::decode(&e), None);
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
        a.wait();
    }
}
