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

use std::ffi::c_uint;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::sync::{Mutex, MutexGuard};
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
    if req[0..4] != REQUEST_MAGIC || u32_at(4) != REQUEST_MEMORY || token_in != token {
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
    let gone = |e: std::io::Error| {
        CuError::CUDA_ERROR_INVALID_HANDLE
            .because(format!("the process that exported this handle (pid {}) cannot be reached: {e}", h.pid))
    };
    let addr = SocketAddr::from_abstract_name(socket_name(h.pid, h.token)).map_err(gone)?;
    let mut s = UnixStream::connect_addr(&addr).map_err(gone)?;
    s.set_read_timeout(Some(TIMEOUT)).map_err(gone)?;
    s.set_write_timeout(Some(TIMEOUT)).map_err(gone)?;
    let mut req = [0u8; 32];
    req[0..4].copy_from_slice(&REQUEST_MAGIC);
    req[4..8].copy_from_slice(&REQUEST_MEMORY.to_le_bytes());
    req[8..12].copy_from_slice(&h.ordinal.to_le_bytes());
    req[16..24].copy_from_slice(&h.token.to_le_bytes());
    req[24..32].copy_from_slice(&h.memory.id.to_le_bytes());
    s.write_all(&req).map_err(gone)?;
    match recv_reply(&s).map_err(gone)? {
        (0, Some(fd)) => Ok(fd),
        (0, None) => Err(CuError::CUDA_ERROR_MAP_FAILED.because("the exporting process sent no descriptor")),
        (_, _) => Err(CuError::CUDA_ERROR_INVALID_HANDLE
            .because(format!("process {} has no live allocation {} to share (freed?)", h.pid, h.memory.id))),
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
    }
}
