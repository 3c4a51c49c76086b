//! The exporting process's descriptor server and the importer's request
//! (Linux): a Unix-domain socket in the abstract namespace named after the
//! pid and a random token, descriptors passed as `SCM_RIGHTS`.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::sync::Mutex;
use std::time::Duration;

use super::lock;
use crate::result::{CuError, CuResult};

/// First bytes of a request to the exporting process's server.
const REQUEST_MAGIC: [u8; 4] = *b"PVKR";
/// Request kind: a memory descriptor.
pub(super) const REQUEST_MEMORY: u32 = 1;
/// Request kind: an event's shared record.
pub(super) const REQUEST_EVENT: u32 = 2;
/// How long either side waits for the other.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The exporting side's server, once started in this process.
struct Server {
    /// The process that started it (a forked child starts its own).
    pid: u32,
    token: u64,
}

static SERVER: Mutex<Option<Server>> = Mutex::new(None);

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
pub(super) fn server() -> CuResult<(u32, u64)> {
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
/// object id (32 bytes). The reply is a 4-byte `CUresult`, with the
/// object's descriptor attached when it is `CUDA_SUCCESS`.
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
    let fd = match u32_at(4) {
        REQUEST_MEMORY => super::memory::served_fd(u32_at(8), id),
        REQUEST_EVENT => super::event::served_fd(id),
        _ => Err(CuError::CUDA_ERROR_INVALID_HANDLE),
    };
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

/// Asks process `pid` (whose server has `token`) for the descriptor of
/// object `id` of `kind`.
pub(super) fn fetch_fd(pid: u32, token: u64, kind: u32, ordinal: u32, id: u64) -> CuResult<OwnedFd> {
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

/// Whether a handle carrying `pid` and `token` was made by this process.
pub(super) fn made_here(pid: u32, token: u64) -> bool {
    let mine = lock(&SERVER).as_ref().is_some_and(|s| s.pid == std::process::id() && s.token == token);
    mine || pid == std::process::id()
}
