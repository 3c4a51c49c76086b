//! IPC memory handles (Linux): `cuIpcGetMemHandle`, `cuIpcOpenMemHandle`,
//! `cuIpcCloseMemHandle`.

use std::ffi::c_uint;
use std::os::fd::OwnedFd;
use std::sync::Mutex;

use ptxvk_runtime::ExportedMemory;

use super::transport::{fetch_fd, made_here, server, REQUEST_MEMORY};
use super::{lock, IpcHandle, IPC_HANDLE_SIZE, VERSION};
use crate::context;
use crate::driver;
use crate::ffi::{write_out, CUdeviceptr};
use crate::result::{CuError, CuResult};

/// `CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS`, the one flag of `cuIpcOpenMemHandle`.
const CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: c_uint = 0x1;
/// First bytes of a memory handle made here.
const MEM_MAGIC: [u8; 4] = *b"PVKM";

/// The contents of a `CUipcMemHandle` made by [`ipc_get_mem_handle`]
/// (little-endian): magic `PVKM` (0..4), version (4..6), exporter pid
/// (8..12), exporter device ordinal (12..16), token (16..24), allocation id
/// (24..32), memory size (32..40), buffer size (40..48), requested size
/// (48..56), the allocation's offset in the buffer in units of 256 bytes
/// (56..60), device fingerprint (60..64); the memory type is byte 6 and
/// byte 7 is 1 when the memory is a dedicated allocation (0: a chunk that
/// several allocations are carved from).
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
        // Vulkan has at most 32 memory types; offsets are multiples of 256
        // below a chunk's size (checked again by the importer).
        b[6] = self.memory.memory_type as u8;
        b[7] = u8::from(self.memory.dedicated);
        b[8..12].copy_from_slice(&self.pid.to_le_bytes());
        b[12..16].copy_from_slice(&self.ordinal.to_le_bytes());
        b[16..24].copy_from_slice(&self.token.to_le_bytes());
        b[24..32].copy_from_slice(&self.memory.id.to_le_bytes());
        b[32..40].copy_from_slice(&self.memory.memory_size.to_le_bytes());
        b[40..48].copy_from_slice(&self.memory.buffer_size.to_le_bytes());
        b[48..56].copy_from_slice(&self.memory.size.to_le_bytes());
        b[56..60].copy_from_slice(&((self.memory.offset / 256) as u32).to_le_bytes());
        b[60..64].copy_from_slice(&self.device.to_le_bytes());
        b
    }

    /// `None` for bytes [`MemHandle::encode`] did not make.
    fn decode(b: &[u8; IPC_HANDLE_SIZE]) -> Option<MemHandle> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| u64::from(u32_at(i)) | u64::from(u32_at(i + 4)) << 32;
        if b[0..4] != MEM_MAGIC || b[4..6] != VERSION.to_le_bytes() || b[7] > 1 {
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
                memory_type: u32::from(b[6]),
                offset: u64::from(u32_at(56)) * 256,
                dedicated: b[7] == 1,
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

/// Asks the exporting process of `h` for its memory's descriptor.
fn fetch_memory_fd(h: &MemHandle) -> CuResult<OwnedFd> {
    fetch_fd(h.pid, h.token, REQUEST_MEMORY, h.ordinal, h.memory.id)
}

/// A new descriptor of allocation `id` of device `ordinal`, for an importer
/// (the server's side). As at export, the context is synchronised first, so
/// the importer sees what was written before it opened.
pub(super) fn served_fd(ordinal: u32, id: u64) -> CuResult<OwnedFd> {
    let rt = driver::driver()?.devices.get(ordinal as usize).ok_or(CuError::CUDA_ERROR_INVALID_HANDLE)?.runtime()?;
    rt.synchronize()?;
    rt.exported_memory_fd(id).map_err(|_| CuError::CUDA_ERROR_INVALID_HANDLE)
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
    if made_here(h.pid, h.token) {
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
        // Queued writes reach the shared memory before it is unmapped here;
        // the mapping goes even if that work failed (its error is reported).
        let synced = import.runtime.synchronize();
        import.runtime.close_imported(import.addr)?;
        synced?;
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
            memory: ExportedMemory {
                id: 77,
                memory_size: 8192,
                memory_type: 3,
                buffer_size: 4352,
                size: 4321,
                offset: 0,
                dedicated: true,
            },
            device: 0xdead_beef,
        };
        let b = h.encode();
        assert_eq!(&b[0..4], b"PVKM");
        assert_eq!(MemHandle::decode(&b), Some(h));
        let piece = MemHandle {
            memory: ExportedMemory {
                memory_size: 64 << 20,
                buffer_size: 64 << 20,
                offset: 0x12_3400,
                dedicated: false,
                ..h.memory
            },
            ..h
        };
        assert_eq!(MemHandle::decode(&piece.encode()), Some(piece));
        let mut bad = b;
        bad[0] = b'X';
        assert_eq!(MemHandle::decode(&bad), None);
        assert_eq!(MemHandle::decode(&[0; IPC_HANDLE_SIZE]), None);
    }
}
