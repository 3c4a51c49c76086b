//! Device memory: `cuMemAlloc`, `cuMemFree`, copies and memsets.
//!
//! A `CUdeviceptr` is the Vulkan buffer device address the runtime hands out.
//! Allocations belong to the context that was current when they were made.
//! Copies and memsets complete before they return (the `Async` forms too:
//! every stream is ordered with the null stream here).

use std::alloc::Layout;
use std::collections::BTreeMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::capture;
use crate::context::{self, Allocation, ContextObj, CONTEXTS};
use crate::driver;
use crate::ffi::{bytes, bytes_mut, read_in, write_opt, write_out, CUdeviceptr, Handle};
use crate::graph::{CopyNode, MemsetNode, NodeKind};
use crate::handles::handle_of;
use crate::result::{CuError, CuResult};
use crate::stream;

/// `cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)`.
/// "CUDA_ERROR_INVALID_VALUE if bytesize is 0."
///
/// # Safety
/// `dptr` is NULL or writable.
pub unsafe fn mem_alloc(dptr: *mut CUdeviceptr, bytesize: usize) -> CuResult<()> {
    let ctx = context::current()?;
    capture::check_unsafe_call()?;
    // SAFETY: forwarded caller contract.
    unsafe { alloc_in(&ctx, dptr, bytesize) }
}

/// Allocates `bytesize` bytes in `ctx` and writes the address to `dptr`.
///
/// # Safety
/// `dptr` is NULL or writable.
unsafe fn alloc_in(ctx: &ContextObj, dptr: *mut CUdeviceptr, bytesize: usize) -> CuResult<()> {
    if dptr.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("dptr is NULL"));
    }
    if bytesize == 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("bytesize is 0"));
    }
    let addr = ctx.runtime.alloc(bytesize as u64)?;
    ctx.owned().allocations.insert(addr, Allocation::Device);
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(dptr, addr) }
}

/// The live context that owns allocation `addr`: the current one, or another
/// context of the same device.
pub(crate) fn owner_of(current: &std::sync::Arc<ContextObj>, addr: u64) -> Option<std::sync::Arc<ContextObj>> {
    if current.owned().allocations.contains_key(&addr) {
        return Some(current.clone());
    }
    CONTEXTS
        .all()
        .into_iter()
        .map(|(_, c)| c)
        .find(|c| c.device.ordinal == current.device.ordinal && c.owned().allocations.contains_key(&addr))
}

/// `cuMemFree_v2(CUdeviceptr dptr)`: freeing 0 does nothing; an address
/// that is not the start of a live allocation is `CUDA_ERROR_INVALID_VALUE`.
pub fn mem_free(dptr: CUdeviceptr) -> CuResult<()> {
    let ctx = context::current()?;
    capture::check_unsafe_call()?;
    free_in(&ctx, dptr)
}

/// Frees the allocation `dptr` of `ctx` or another context of its device
/// (after queued work); NULL is a no-op.
pub(crate) fn free_in(ctx: &std::sync::Arc<ContextObj>, dptr: CUdeviceptr) -> CuResult<()> {
    if dptr == 0 {
        return Ok(());
    }
    let Some(owner) = owner_of(ctx, dptr) else {
        // Memory from cuMemAllocAsync (or a graph's allocation node) may be
        // freed here too.
        return crate::mempool::free_pool_allocation(dptr)
            .or_else(|| crate::graph_mem::free_outside(dptr))
            .unwrap_or_else(|| {
                Err(CuError::CUDA_ERROR_INVALID_VALUE
                    .because(format!("{dptr:#x} is not the start of a live allocation")))
            });
    };
    // Forget the address before the runtime releases the memory: another
    // thread's cuMemAlloc may get the same address back at once (lavapipe's
    // dedicated allocations are host mappings), and its entry must survive.
    let Some(kind) = owner.owned().allocations.remove(&dptr) else {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{dptr:#x} was freed by another thread")));
    };
    if let Err(e) = owner.runtime.free(dptr) {
        owner.owned().allocations.insert(dptr, kind);
        return Err(e.into());
    }
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
    capture::check_unsafe_call()?;
    // SAFETY: forwarded caller contract.
    unsafe { memcpy_htod_impl(dst, src, n) }?;
    finish_if_mapped(&ctx, src as u64)
}

/// [`memcpy_htod`] without the stream capture checks.
///
/// # Safety
/// As [`memcpy_htod`].
unsafe fn memcpy_htod_impl(dst: CUdeviceptr, src: *const c_void, n: usize) -> CuResult<()> {
    let ctx = context::current()?;
    if is_device(&ctx, src as u64) {
        // NVIDIA's driver sees through the declared direction under unified
        // addressing: a "host" source inside a device allocation is copied
        // device to device, in stream order. Warp's APIC `set_param` relies
        // on it (cudaMemcpyHostToDevice from a device array); read as host
        // memory it would be read now, before the stream's earlier work, and
        // on a discrete GPU it is no host memory at all.
        return memcpy_dtod_impl(dst, src as u64, n);
    }
    // SAFETY: forwarded caller contract.
    let data = unsafe { bytes(src, n) }?;
    if n > 0 {
        ctx.runtime.copy_htod(dst, data)?;
        finish_if_mapped(&ctx, dst)?;
    }
    Ok(())
}

/// `cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)`.
///
/// # Safety
/// `dst` is NULL or writable for `n` bytes.
pub unsafe fn memcpy_dtoh(dst: *mut c_void, src: CUdeviceptr, n: usize) -> CuResult<()> {
    context::current()?;
    capture::check_unsafe_call()?;
    // SAFETY: forwarded caller contract.
    unsafe { memcpy_dtoh_impl(dst, src, n) }
}

/// [`memcpy_dtoh`] without the stream capture checks.
///
/// # Safety
/// As [`memcpy_dtoh`].
unsafe fn memcpy_dtoh_impl(dst: *mut c_void, src: CUdeviceptr, n: usize) -> CuResult<()> {
    let ctx = context::current()?;
    if is_device(&ctx, dst as u64) {
        // A "host" destination inside a device allocation: device to device,
        // as in [`memcpy_htod_impl`] (Warp's APIC `get_param`).
        return memcpy_dtod_impl(dst as u64, src, n);
    }
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
    capture::check_unsafe_call()?;
    memcpy_dtod_impl(dst, src, n)?;
    finish_if_mapped(&ctx, src)
}

/// [`memcpy_dtod`] without the stream capture checks.
fn memcpy_dtod_impl(dst: CUdeviceptr, src: CUdeviceptr, n: usize) -> CuResult<()> {
    let ctx = context::current()?;
    if n > 0 {
        ctx.runtime.copy_dtod(dst, src, n as u64)?;
        finish_if_mapped(&ctx, dst)?;
    }
    Ok(())
}

/// `cuMemcpyHtoDAsync_v2`: as [`memcpy_htod`], after checking the stream.
///
/// # Safety
/// As [`memcpy_htod`].
pub unsafe fn memcpy_htod_async(dst: CUdeviceptr, src: *const c_void, n: usize, s: Handle) -> CuResult<()> {
    stream::check(s)?;
    let copy = Memcpy3D::linear(CU_MEMORYTYPE_DEVICE, 0, dst, CU_MEMORYTYPE_HOST, src as usize, 0, n);
    if capture_copy(s, copy)? {
        return Ok(());
    }
    // SAFETY: forwarded caller contract.
    stream::note_work(s, || unsafe { memcpy_htod_impl(dst, src, n) })
}

/// Adds `copy` to the capture of `s` if it captures (checked like `cuMemcpy3D`).
fn capture_copy(s: Handle, copy: Memcpy3D) -> CuResult<bool> {
    capture::capture_node(s, || {
        check_memcpy_3d(&copy)?;
        Ok(NodeKind::Memcpy(CopyNode(copy)))
    })
}

/// `cuMemcpyDtoHAsync_v2`: as [`memcpy_dtoh`], after checking the stream.
///
/// # Safety
/// As [`memcpy_dtoh`].
pub unsafe fn memcpy_dtoh_async(dst: *mut c_void, src: CUdeviceptr, n: usize, s: Handle) -> CuResult<()> {
    stream::check(s)?;
    let copy = Memcpy3D::linear(CU_MEMORYTYPE_HOST, dst as usize, 0, CU_MEMORYTYPE_DEVICE, 0, src, n);
    if capture_copy(s, copy)? {
        return Ok(());
    }
    // SAFETY: forwarded caller contract.
    stream::note_work(s, || unsafe { memcpy_dtoh_impl(dst, src, n) })
}

/// `cuMemcpyDtoDAsync_v2`: as [`memcpy_dtod`], after checking the stream.
pub fn memcpy_dtod_async(dst: CUdeviceptr, src: CUdeviceptr, n: usize, s: Handle) -> CuResult<()> {
    stream::check(s)?;
    let copy = Memcpy3D::linear(CU_MEMORYTYPE_DEVICE, 0, dst, CU_MEMORYTYPE_DEVICE, 0, src, n);
    if capture_copy(s, copy)? {
        return Ok(());
    }
    stream::note_work(s, || memcpy_dtod_impl(dst, src, n))
}

/// `cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr
/// srcDevice, CUcontext srcContext, size_t ByteCount)`: between contexts of
/// one device (they share its memory) a device-to-device copy; between
/// devices, through host memory once the source's device has finished its
/// queued work.
pub fn memcpy_peer(dst: CUdeviceptr, dst_ctx: Handle, src: CUdeviceptr, src_ctx: Handle, n: usize) -> CuResult<()> {
    context::current()?;
    capture::check_unsafe_call()?;
    memcpy_peer_impl(dst, dst_ctx, src, src_ctx, n)
}

/// [`memcpy_peer`] without the stream capture checks.
fn memcpy_peer_impl(dst: CUdeviceptr, dst_ctx: Handle, src: CUdeviceptr, src_ctx: Handle, n: usize) -> CuResult<()> {
    let (d, s) = peer_contexts(dst_ctx, src_ctx)?;
    if n == 0 {
        return Ok(());
    }
    if std::ptr::eq(d.device, s.device) {
        d.runtime.copy_dtod(dst, src, n as u64)?;
    } else {
        let mut staged = vec![0u8; n];
        s.runtime.copy_dtoh(&mut staged, src)?;
        d.runtime.copy_htod(dst, &staged)?;
    }
    finish_if_mapped(&d, dst)
}

/// The destination and source contexts of a peer copy (both must be live).
fn peer_contexts(dst_ctx: Handle, src_ctx: Handle) -> CuResult<(Arc<ContextObj>, Arc<ContextObj>)> {
    if dst_ctx.is_null() || src_ctx.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_CONTEXT.because("a peer copy names both contexts"));
    }
    Ok((context::lookup(dst_ctx)?, context::lookup(src_ctx)?))
}

/// `cuMemcpyPeerAsync`: as [`memcpy_peer`], on `s`. Between contexts of
/// one device it is an ordinary device-to-device copy (also in a stream
/// capture); between devices it runs when called (which an asynchronous
/// copy may) and cannot be captured.
pub fn memcpy_peer_async(
    dst: CUdeviceptr,
    dst_ctx: Handle,
    src: CUdeviceptr,
    src_ctx: Handle,
    n: usize,
    s: Handle,
) -> CuResult<()> {
    stream::check(s)?;
    let (d, sc) = peer_contexts(dst_ctx, src_ctx)?;
    let same_device = std::ptr::eq(d.device, sc.device);
    let copy = Memcpy3D::linear(CU_MEMORYTYPE_DEVICE, 0, dst, CU_MEMORYTYPE_DEVICE, 0, src, n);
    let captured = capture::capture_node(s, || {
        if !same_device {
            return Err(CuError::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
                .because("a peer copy between devices cannot be captured here"));
        }
        check_memcpy_3d(&copy)?;
        Ok(NodeKind::Memcpy(CopyNode(copy)))
    })?;
    if captured {
        return Ok(());
    }
    stream::note_work(s, || memcpy_peer_impl(dst, dst_ctx, src, src_ctx, n))
}

/// `cuMemsetD8_v2(CUdeviceptr dst, unsigned char uc, size_t n)`.
pub fn memset_d8(dst: CUdeviceptr, value: u8, n: usize) -> CuResult<()> {
    context::current()?;
    capture::check_unsafe_call()?;
    memset_d8_impl(dst, value, n)
}

/// [`memset_d8`] without the stream capture checks.
fn memset_d8_impl(dst: CUdeviceptr, value: u8, n: usize) -> CuResult<()> {
    let ctx = context::current()?;
    if n > 0 {
        ctx.runtime.memset_d8(dst, value, n as u64)?;
        finish_if_mapped(&ctx, dst)?;
    }
    Ok(())
}

/// `cuMemsetD16_v2(CUdeviceptr dst, unsigned short us, size_t n)`:
/// "CUDA_ERROR_INVALID_VALUE" unless `dst` is 2-byte aligned.
pub fn memset_d16(dst: CUdeviceptr, value: u16, n: usize) -> CuResult<()> {
    context::current()?;
    capture::check_unsafe_call()?;
    memset_d16_impl(dst, value, n)
}

/// [`memset_d16`] without the stream capture checks.
fn memset_d16_impl(dst: CUdeviceptr, value: u16, n: usize) -> CuResult<()> {
    let ctx = context::current()?;
    if dst & 1 != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("cuMemsetD16 needs a 2-byte aligned address"));
    }
    if n > 0 {
        ctx.runtime.memset_d16(dst, value, n as u64)?;
        finish_if_mapped(&ctx, dst)?;
    }
    Ok(())
}

/// `cuMemsetD32_v2(CUdeviceptr dst, unsigned int ui, size_t n)`:
/// "CUDA_ERROR_INVALID_VALUE" unless `dst` is 4-byte aligned.
pub fn memset_d32(dst: CUdeviceptr, value: u32, n: usize) -> CuResult<()> {
    context::current()?;
    capture::check_unsafe_call()?;
    memset_d32_impl(dst, value, n)
}

/// [`memset_d32`] without the stream capture checks.
fn memset_d32_impl(dst: CUdeviceptr, value: u32, n: usize) -> CuResult<()> {
    let ctx = context::current()?;
    if dst & 3 != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("cuMemsetD32 needs a 4-byte aligned address"));
    }
    if n > 0 {
        ctx.runtime.memset_d32(dst, value, n as u64)?;
        finish_if_mapped(&ctx, dst)?;
    }
    Ok(())
}

/// `cuMemsetD8Async`.
pub fn memset_d8_async(dst: CUdeviceptr, value: u8, n: usize, s: Handle) -> CuResult<()> {
    stream::check(s)?;
    if capture_memset(s, dst, 0, u32::from(value), 1, n, 1)? {
        return Ok(());
    }
    stream::note_work(s, || memset_d8_impl(dst, value, n))
}

/// `cuMemsetD16Async`.
pub fn memset_d16_async(dst: CUdeviceptr, value: u16, n: usize, s: Handle) -> CuResult<()> {
    stream::check(s)?;
    if capture_memset(s, dst, 0, u32::from(value), 2, n, 1)? {
        return Ok(());
    }
    stream::note_work(s, || memset_d16_impl(dst, value, n))
}

/// `cuMemsetD32Async`.
pub fn memset_d32_async(dst: CUdeviceptr, value: u32, n: usize, s: Handle) -> CuResult<()> {
    stream::check(s)?;
    if capture_memset(s, dst, 0, value, 4, n, 1)? {
        return Ok(());
    }
    stream::note_work(s, || memset_d32_impl(dst, value, n))
}

/// Adds a memset to the capture of `s` if it captures.
fn capture_memset(
    s: Handle,
    dst: CUdeviceptr,
    pitch: usize,
    value: u32,
    elem: u32,
    w: usize,
    h: usize,
) -> CuResult<bool> {
    capture::capture_node(s, || Ok(NodeKind::Memset(MemsetNode::new(dst, pitch, value, elem, w, h)?)))
}

/// `CU_MEMORYTYPE_HOST`.
pub const CU_MEMORYTYPE_HOST: u32 = 1;
/// `CU_MEMORYTYPE_DEVICE`.
pub const CU_MEMORYTYPE_DEVICE: u32 = 2;
/// `CU_MEMORYTYPE_ARRAY`.
pub const CU_MEMORYTYPE_ARRAY: u32 = 3;
/// `CU_MEMORYTYPE_UNIFIED`.
pub const CU_MEMORYTYPE_UNIFIED: u32 = 4;

/// Page-locked host memory this library handed out or had registered:
/// start address → (size, flags, context handle, allocated here).
static HOST_MEMORY: Mutex<BTreeMap<usize, HostRange>> = Mutex::new(BTreeMap::new());

#[derive(Clone, Copy)]
struct HostRange {
    size: usize,
    flags: c_uint,
    context: usize,
    allocated: bool,
    /// Device address of the mapping (0: not mapped), and its device ordinal.
    device: u64,
    ordinal: c_int,
}

/// Alignment of host allocations (a page).
const HOST_ALIGN: usize = 4096;

fn host_memory() -> MutexGuard<'static, BTreeMap<usize, HostRange>> {
    HOST_MEMORY.lock().unwrap_or_else(|p| p.into_inner())
}

/// The registered or allocated host range containing `addr`: (start, range).
fn host_range_of(addr: usize) -> Option<(usize, HostRange)> {
    let map = host_memory();
    let (&start, &r) = map.range(..=addr).next_back()?;
    (addr < start + r.size.max(1)).then_some((start, r))
}

/// Waits for queued work when `dst` is the device address of mapped host
/// memory, so the host sees what a synchronous copy or memset wrote there.
fn finish_if_mapped(ctx: &ContextObj, dst: CUdeviceptr) -> CuResult<()> {
    finish_if_any_mapped(ctx, &[dst])
}

/// Waits for queued work when one of `addrs` is the device address of
/// mapped host memory. A synchronous copy from or to page-locked host memory
/// returns once it is done (CUDA's "API synchronization behavior": pinned
/// host to device is synchronous with respect to the host, device to host
/// returns once the copy has completed); where the device maps such memory
/// at its host address (lavapipe), the copy was queued as a device-to-device
/// one, so the host must not touch the memory before it ran.
fn finish_if_any_mapped(ctx: &ContextObj, addrs: &[u64]) -> CuResult<()> {
    let mapped = host_memory()
        .values()
        .any(|r| r.device != 0 && addrs.iter().any(|a| (r.device..r.device + r.size as u64).contains(a)));
    if mapped {
        ctx.runtime.synchronize()?;
    }
    Ok(())
}

/// `cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)`:
/// page-locked host memory, mapped into the device's address space (as all
/// page-locked memory is under unified addressing); the device address comes
/// from `cuMemHostGetDevicePointer`, and is not the host address. If the
/// device has no room for the mapping, memory that is not
/// `CU_MEMHOSTALLOC_DEVICEMAP` falls back to plain host memory.
///
/// # Safety
/// `pp` is NULL or writable.
pub unsafe fn mem_host_alloc(pp: *mut *mut c_void, bytesize: usize, flags: c_uint) -> CuResult<()> {
    let ctx = context::current()?;
    if pp.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pp is NULL"));
    }
    if bytesize == 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("bytesize is 0"));
    }
    if flags & !0x7 != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown host allocation flags {flags:#x}")));
    }
    let range = |device: u64, allocated: bool| HostRange {
        size: bytesize,
        flags,
        context: handle_of(&ctx) as usize,
        allocated,
        device,
        ordinal: ctx.device.ordinal,
    };
    let p = match ctx.runtime.alloc_mapped(bytesize as u64) {
        Ok((device, host)) => {
            host_memory().insert(host as usize, range(device, false));
            host
        }
        Err(e) if flags & 0x2 != 0 => return Err(CuError::from(e)),
        Err(_) => {
            let layout = Layout::from_size_align(bytesize, HOST_ALIGN)
                .map_err(|_| CuError::CUDA_ERROR_OUT_OF_MEMORY.because("host allocation too large"))?;
            // SAFETY: the layout has a non-zero size.
            let p = unsafe { std::alloc::alloc_zeroed(layout) };
            if p.is_null() {
                return Err(CuError::CUDA_ERROR_OUT_OF_MEMORY.because("host allocation failed"));
            }
            host_memory().insert(p as usize, range(0, true));
            p
        }
    };
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(pp, p.cast()) }
}

/// `cuMemAllocHost_v2(void **pp, size_t bytesize)`.
///
/// # Safety
/// `pp` is NULL or writable.
pub unsafe fn mem_alloc_host(pp: *mut *mut c_void, bytesize: usize) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe { mem_host_alloc(pp, bytesize, 0) }
}

/// `cuMemFreeHost(void *p)`: "CUDA_ERROR_INVALID_VALUE" unless `p` came from
/// `cuMemAllocHost`/`cuMemHostAlloc`.
pub fn mem_free_host(p: *mut c_void) -> CuResult<()> {
    driver::driver()?;
    let mut map = host_memory();
    let r = match map.get(&(p as usize)) {
        Some(r) if r.allocated || r.device != 0 => *r,
        _ => {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{p:p} was not allocated by cuMemHostAlloc")))
        }
    };
    map.remove(&(p as usize));
    drop(map);
    if r.device != 0 {
        driver::device(r.ordinal)?.runtime()?.free(r.device)?;
        return Ok(());
    }
    let layout = Layout::from_size_align(r.size, HOST_ALIGN).map_err(|_| CuError::CUDA_ERROR_INVALID_VALUE)?;
    // SAFETY: `p` was allocated by `mem_host_alloc` with this layout and is
    // removed from the map, so it is freed once.
    unsafe { std::alloc::dealloc(p.cast(), layout) };
    Ok(())
}

/// `cuMemHostGetFlags(unsigned int *pFlags, void *p)`.
///
/// # Safety
/// `flags` is NULL or writable.
pub unsafe fn mem_host_get_flags(flags: *mut c_uint, p: *mut c_void) -> CuResult<()> {
    driver::driver()?;
    let (_, r) = host_range_of(p as usize)
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{p:p} is not page-locked memory")))?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(flags, r.flags) }
}

/// `cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int
/// Flags)`: the device address of page-locked memory from `cuMemHostAlloc`
/// (any address inside it); "CUDA_ERROR_INVALID_VALUE" for other memory and
/// non-zero flags.
///
/// # Safety
/// `pdptr` is NULL or writable.
pub unsafe fn mem_host_get_device_pointer(pdptr: *mut CUdeviceptr, p: *mut c_void, flags: c_uint) -> CuResult<()> {
    context::current()?;
    if pdptr.is_null() || p.is_null() || flags != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pdptr or p is NULL, or flags is not 0"));
    }
    let (start, r) = host_range_of(p as usize)
        .filter(|(_, r)| r.device != 0)
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{p:p} is not mapped host memory")))?;
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(pdptr, r.device + (p as usize - start) as u64) }
}

/// `CU_MEMHOSTREGISTER_DEVICEMAP`.
const MEMHOSTREGISTER_DEVICEMAP: c_uint = 0x2;
/// `CU_MEMHOSTREGISTER_IOMEMORY`.
const MEMHOSTREGISTER_IOMEMORY: c_uint = 0x4;
/// `CU_MEMHOSTREGISTER_READ_ONLY`.
const MEMHOSTREGISTER_READ_ONLY: c_uint = 0x8;

/// `cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)`:
/// recorded, so copies from and to it work as from any host memory; with
/// `CU_MEMHOSTREGISTER_DEVICEMAP` its pages are also imported as device
/// memory (`VK_EXT_external_memory_host`), so kernels reach the host memory
/// through the address `cuMemHostGetDevicePointer` gives. On a device that
/// cannot import host memory the failure is deferred to
/// `cuMemHostGetDevicePointer`, as the documentation says. `_IOMEMORY`
/// (a PCIe BAR of another device) is `CUDA_ERROR_NOT_SUPPORTED`, and so is
/// `_READ_ONLY` where `CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED`
/// is 0.
///
/// # Safety
/// `p` is NULL or valid for `bytesize` bytes until `cuMemHostUnregister`.
pub unsafe fn mem_host_register(p: *mut c_void, bytesize: usize, flags: c_uint) -> CuResult<()> {
    let ctx = context::current()?;
    if p.is_null() || bytesize == 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("p is NULL or bytesize is 0"));
    }
    if flags & !0xf != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown registration flags {flags:#x}")));
    }
    if flags & MEMHOSTREGISTER_IOMEMORY != 0 {
        return Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because("I/O memory cannot be registered (IOMEMORY)"));
    }
    let can_import = ctx.runtime.info().host_import_alignment.is_some();
    if flags & MEMHOSTREGISTER_READ_ONLY != 0 && !can_import {
        return Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because("this device cannot map host memory (READ_ONLY)"));
    }
    let start = p as usize;
    let end = start.checked_add(bytesize).ok_or(CuError::CUDA_ERROR_INVALID_VALUE)?;
    let mut map = host_memory();
    let overlaps = map.range(..end).next_back().is_some_and(|(&s, r)| s + r.size > start);
    if overlaps {
        return Err(CuError::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
            .because(format!("{p:p}..+{bytesize} overlaps registered or page-locked memory")));
    }
    let device = if flags & MEMHOSTREGISTER_DEVICEMAP != 0 && can_import {
        // SAFETY: the caller keeps the memory until it unregisters it, and
        // unregistering drops the mapping first.
        unsafe { ctx.runtime.register_host(p.cast(), bytesize as u64) }?
    } else {
        0
    };
    let range = HostRange {
        size: bytesize,
        flags,
        context: handle_of(&ctx) as usize,
        allocated: false,
        device,
        ordinal: ctx.device.ordinal,
    };
    map.insert(start, range);
    Ok(())
}

/// `cuMemHostUnregister(void *p)`: "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"
/// unless `p` is the start of a registered range. A mapped registration
/// waits for queued work (which may still use the memory) and is unmapped.
pub fn mem_host_unregister(p: *mut c_void) -> CuResult<()> {
    context::current()?;
    let mut map = host_memory();
    match map.get(&(p as usize)).copied() {
        Some(r) if !r.allocated => {
            map.remove(&(p as usize));
            // Not while holding the table: unmapping waits for the device.
            drop(map);
            if r.device != 0 {
                driver::device(r.ordinal)?.runtime()?.unregister_host(r.device)?;
            }
            Ok(())
        }
        _ => Err(CuError::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED.because(format!("{p:p} is not registered"))),
    }
}

/// `cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int
/// flags)`: host-visible memory whose device address is also its host
/// address. That needs a Vulkan driver that maps memory at its device
/// address (lavapipe does); elsewhere "CUDA_ERROR_NOT_SUPPORTED" and
/// `CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY` is 0. Host and device must not touch
/// it at the same time (`CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS` is 0):
/// the host sees kernel writes after a synchronisation.
///
/// # Safety
/// `dptr` is NULL or writable.
pub unsafe fn mem_alloc_managed(dptr: *mut CUdeviceptr, bytesize: usize, flags: c_uint) -> CuResult<()> {
    let ctx = context::current()?;
    if dptr.is_null() || bytesize == 0 || !(1..=2).contains(&flags) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("dptr is NULL, bytesize is 0 or flags are invalid"));
    }
    let addr = ctx.runtime.alloc_managed(bytesize as u64)?;
    ctx.owned().allocations.insert(addr, Allocation::Managed);
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(dptr, addr) }
}

/// Pitch alignment of `cuMemAllocPitch` (`CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT`
/// is smaller; CUDA's own pitches are 512-aligned).
const PITCH_ALIGN: usize = 512;

/// `cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t
/// WidthInBytes, size_t Height, unsigned int ElementSizeBytes)`:
/// "ElementSizeBytes ... may be 4, 8 or 16".
///
/// # Safety
/// `dptr` and `pitch` are NULL or writable.
pub unsafe fn mem_alloc_pitch(
    dptr: *mut CUdeviceptr,
    pitch: *mut usize,
    width: usize,
    height: usize,
    element_size: c_uint,
) -> CuResult<()> {
    context::current()?;
    if dptr.is_null() || pitch.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("dptr or pPitch is NULL"));
    }
    if width == 0 || height == 0 || ![4, 8, 16].contains(&element_size) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("zero size, or ElementSizeBytes is not 4, 8 or 16"));
    }
    let p = width.div_ceil(PITCH_ALIGN).checked_mul(PITCH_ALIGN).ok_or(CuError::CUDA_ERROR_INVALID_VALUE)?;
    let bytes = p.checked_mul(height).ok_or(CuError::CUDA_ERROR_OUT_OF_MEMORY)?;
    // SAFETY: forwarded caller contract.
    unsafe { mem_alloc(dptr, bytes) }?;
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(pitch, p) }
}

/// Whether `addr` lies in device memory of `ctx`'s device.
fn is_device(ctx: &ContextObj, addr: u64) -> bool {
    ctx.runtime.allocation_of(addr).is_some()
}

/// `cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)`: with
/// unified addressing either side may be host or device memory.
///
/// # Safety
/// Whichever of `dst` and `src` is not device memory is host memory valid
/// for `n` bytes.
pub unsafe fn memcpy(dst: CUdeviceptr, src: CUdeviceptr, n: usize) -> CuResult<()> {
    let ctx = context::current()?;
    capture::check_unsafe_call()?;
    // SAFETY: forwarded caller contract.
    unsafe { memcpy_impl(dst, src, n) }?;
    finish_if_mapped(&ctx, src)
}

/// [`memcpy`] without the stream capture checks.
///
/// # Safety
/// As [`memcpy`].
unsafe fn memcpy_impl(dst: CUdeviceptr, src: CUdeviceptr, n: usize) -> CuResult<()> {
    let ctx = context::current()?;
    if n == 0 {
        return Ok(());
    }
    match (is_device(&ctx, dst), is_device(&ctx, src)) {
        (true, true) => memcpy_dtod_impl(dst, src, n),
        // SAFETY: `src` is host memory readable for `n` bytes per the caller.
        (true, false) => unsafe { memcpy_htod_impl(dst, src as *const c_void, n) },
        // SAFETY: `dst` is host memory writable for `n` bytes per the caller.
        (false, true) => unsafe { memcpy_dtoh_impl(dst as *mut c_void, src, n) },
        (false, false) => {
            if dst == 0 || src == 0 {
                return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("NULL pointer"));
            }
            ctx.runtime.synchronize()?;
            // SAFETY: both are host memory valid for `n` bytes per the caller;
            // `copy` allows overlap.
            unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, n) };
            Ok(())
        }
    }
}

/// `cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)`.
///
/// # Safety
/// As [`memcpy`].
pub unsafe fn memcpy_async(dst: CUdeviceptr, src: CUdeviceptr, n: usize, s: Handle) -> CuResult<()> {
    stream::check(s)?;
    let copy = Memcpy3D::linear(CU_MEMORYTYPE_UNIFIED, 0, dst, CU_MEMORYTYPE_UNIFIED, 0, src, n);
    if capture_copy(s, copy)? {
        return Ok(());
    }
    // SAFETY: forwarded caller contract.
    stream::note_work(s, || unsafe { memcpy_impl(dst, src, n) })
}

/// One side of a 2D/3D copy.
#[derive(Clone, Copy)]
struct Side {
    device: bool,
    /// Device address or host address of byte (0, 0, 0).
    base: u64,
    x: usize,
    y: usize,
    z: usize,
    pitch: usize,
    height: usize,
    /// For a CUDA array: bytes per row, rows and slices it has.
    limit: Option<(usize, usize, usize)>,
}

impl Side {
    /// Checks that a `width`-byte, `height` x `depth` box fits an array side.
    fn check_box(&self, width: usize, height: usize, depth: usize) -> CuResult<()> {
        let Some((w, h, d)) = self.limit else { return Ok(()) };
        let fits = |at: usize, n: usize, most: usize| at.checked_add(n).is_some_and(|end| end <= most);
        if fits(self.x, width, w) && fits(self.y, height, h) && fits(self.z, depth, d) {
            Ok(())
        } else {
            Err(CuError::CUDA_ERROR_INVALID_VALUE.because("the copy reaches outside the CUDA array"))
        }
    }

    fn offset(&self, row: usize, slice: usize) -> CuResult<u64> {
        let rows = (self.z + slice)
            .checked_mul(self.height)
            .and_then(|r| r.checked_add(self.y + row))
            .and_then(|r| r.checked_mul(self.pitch))
            .and_then(|r| r.checked_add(self.x))
            .ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because("copy extent overflows"))?;
        Ok(self.base + rows as u64)
    }
}

/// Resolves a memory type and its pointers into a [`Side`].
#[allow(clippy::too_many_arguments)]
fn side(
    ctx: &ContextObj,
    kind: u32,
    host: usize,
    device: CUdeviceptr,
    array: Handle,
    x: usize,
    y: usize,
    z: usize,
    pitch: usize,
    height: usize,
) -> CuResult<Side> {
    let (is_dev, base) = match kind {
        // A host pointer inside a device allocation is device memory, as in
        // [`memcpy_htod_impl`].
        CU_MEMORYTYPE_HOST => (is_device(ctx, host as u64), host as u64),
        CU_MEMORYTYPE_DEVICE => (true, device),
        CU_MEMORYTYPE_UNIFIED => (is_device(ctx, device), device),
        CU_MEMORYTYPE_ARRAY => {
            // Pitch and height come from the array; x is in bytes.
            let a = crate::texture::array(array)?;
            let (pitch, rows, slices) = (a.pitch(), a.rows(), a.slices());
            return Ok(Side {
                device: true,
                base: a.addr,
                x,
                y,
                z,
                pitch,
                height: rows,
                limit: Some((pitch, rows, slices)),
            });
        }
        other => return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown CUmemorytype {other}"))),
    };
    if base == 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("copy endpoint pointer is NULL"));
    }
    Ok(Side { device: is_dev, base, x, y, z, pitch, height, limit: None })
}

/// Copies a `width` x `height` x `depth` box row by row.
///
/// # Safety
/// Host sides are valid for every row the box touches.
unsafe fn copy_box(ctx: &ContextObj, src: Side, dst: Side, width: usize, height: usize, depth: usize) -> CuResult<()> {
    if width == 0 || height == 0 || depth == 0 {
        return Ok(());
    }
    src.check_box(width, height, depth)?;
    dst.check_box(width, height, depth)?;
    if (height > 1 || depth > 1) && (src.pitch < width || dst.pitch < width) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("a pitch is smaller than WidthInBytes"));
    }
    if depth > 1 && (src.height < height || dst.height < height) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("a height is smaller than Height"));
    }
    // Device to host: read the whole span once, then scatter the rows.
    if src.device && !dst.device {
        let first = src.offset(0, 0)?;
        let last = src.offset(height - 1, depth - 1)? + width as u64;
        let mut span = vec![0u8; (last - first) as usize];
        ctx.runtime.copy_dtoh(&mut span, first)?;
        for z in 0..depth {
            for y in 0..height {
                let from = (src.offset(y, z)? - first) as usize;
                let to = dst.offset(y, z)? as usize as *mut u8;
                // SAFETY: the row lies in the host destination per the caller;
                // `from + width <= span.len()` by construction.
                unsafe { std::ptr::copy_nonoverlapping(span.as_ptr().add(from), to, width) };
            }
        }
        return Ok(());
    }
    for z in 0..depth {
        for y in 0..height {
            let (s, d) = (src.offset(y, z)?, dst.offset(y, z)?);
            match (src.device, dst.device) {
                (true, true) => ctx.runtime.copy_dtod(d, s, width as u64)?,
                (false, true) => {
                    // SAFETY: the row lies in the host source per the caller.
                    let row = unsafe { std::slice::from_raw_parts(s as usize as *const u8, width) };
                    ctx.runtime.copy_htod(d, row)?;
                }
                _ => {
                    // SAFETY: both rows lie in host memory per the caller.
                    unsafe { std::ptr::copy(s as usize as *const u8, d as usize as *mut u8, width) };
                }
            }
        }
    }
    Ok(())
}

/// `CUDA_MEMCPY2D`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Memcpy2D {
    src_x: usize,
    src_y: usize,
    src_type: u32,
    src_host: *const c_void,
    src_device: CUdeviceptr,
    src_array: Handle,
    src_pitch: usize,
    dst_x: usize,
    dst_y: usize,
    dst_type: u32,
    dst_host: *mut c_void,
    dst_device: CUdeviceptr,
    dst_array: Handle,
    dst_pitch: usize,
    width: usize,
    height: usize,
}

/// `cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)` (also `Unaligned`): host,
/// device, unified and CUDA-array endpoints.
///
/// # Safety
/// `copy` is NULL or readable; its host pointers cover the rows it names.
pub unsafe fn memcpy_2d(copy: *const Memcpy2D) -> CuResult<()> {
    let ctx = context::current()?;
    capture::check_unsafe_call()?;
    // SAFETY: forwarded caller contract.
    let c = unsafe { read_in(copy) }?;
    // SAFETY: forwarded caller contract.
    unsafe { memcpy_2d_impl(&c) }?;
    let ends = [
        endpoint(c.src_type, c.src_host as usize, c.src_device),
        endpoint(c.dst_type, c.dst_host as usize, c.dst_device),
    ];
    finish_if_any_mapped(&ctx, &ends)
}

/// The address of one end of a 2D/3D copy of memory type `kind` (0 for a
/// CUDA array), for [`finish_if_any_mapped`].
fn endpoint(kind: u32, host: usize, device: CUdeviceptr) -> u64 {
    match kind {
        CU_MEMORYTYPE_HOST => host as u64,
        CU_MEMORYTYPE_ARRAY => 0,
        _ => device,
    }
}

/// [`memcpy_2d`] of the descriptor read, without the stream capture checks.
///
/// # Safety
/// The host pointers of `c` cover the rows it names.
unsafe fn memcpy_2d_impl(c: &Memcpy2D) -> CuResult<()> {
    let ctx = context::current()?;
    let src =
        side(&ctx, c.src_type, c.src_host as usize, c.src_device, c.src_array, c.src_x, c.src_y, 0, c.src_pitch, 0)?;
    let dst =
        side(&ctx, c.dst_type, c.dst_host as usize, c.dst_device, c.dst_array, c.dst_x, c.dst_y, 0, c.dst_pitch, 0)?;
    // SAFETY: forwarded caller contract.
    unsafe { copy_box(&ctx, src, dst, c.width, c.height, 1) }
}

/// `cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)`.
///
/// # Safety
/// As [`memcpy_2d`].
pub unsafe fn memcpy_2d_async(copy: *const Memcpy2D, s: Handle) -> CuResult<()> {
    stream::check(s)?;
    // SAFETY: forwarded caller contract.
    let c = unsafe { read_in(copy) }?;
    if capture_copy(s, Memcpy3D::from_2d(&c))? {
        return Ok(());
    }
    // SAFETY: forwarded caller contract.
    stream::note_work(s, || unsafe { memcpy_2d_impl(&c) })
}

/// `CUDA_MEMCPY3D`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Memcpy3D {
    src_x: usize,
    src_y: usize,
    src_z: usize,
    src_lod: usize,
    src_type: u32,
    src_host: *const c_void,
    src_device: CUdeviceptr,
    src_array: Handle,
    reserved0: *mut c_void,
    src_pitch: usize,
    src_height: usize,
    dst_x: usize,
    dst_y: usize,
    dst_z: usize,
    dst_lod: usize,
    dst_type: u32,
    dst_host: *mut c_void,
    dst_device: CUdeviceptr,
    dst_array: Handle,
    reserved1: *mut c_void,
    dst_pitch: usize,
    dst_height: usize,
    width: usize,
    height: usize,
    depth: usize,
}

/// `cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy)`.
///
/// # Safety
/// `copy` is NULL or readable; its host pointers cover the rows it names.
pub unsafe fn memcpy_3d(copy: *const Memcpy3D) -> CuResult<()> {
    let ctx = context::current()?;
    capture::check_unsafe_call()?;
    // SAFETY: forwarded caller contract.
    let c = unsafe { read_in(copy) }?;
    // SAFETY: forwarded caller contract.
    unsafe { run_memcpy_3d(&c) }?;
    let ends = [
        endpoint(c.src_type, c.src_host as usize, c.src_device),
        endpoint(c.dst_type, c.dst_host as usize, c.dst_device),
    ];
    finish_if_any_mapped(&ctx, &ends)
}

impl Memcpy3D {
    /// A linear copy of `n` bytes between two endpoints (host address or device address per type).
    pub fn linear(
        dst_type: u32,
        dst_host: usize,
        dst_dev: CUdeviceptr,
        src_type: u32,
        src_host: usize,
        src_dev: CUdeviceptr,
        n: usize,
    ) -> Memcpy3D {
        Memcpy3D {
            src_x: 0,
            src_y: 0,
            src_z: 0,
            src_lod: 0,
            src_type,
            src_host: src_host as *const c_void,
            src_device: src_dev,
            src_array: std::ptr::null_mut(),
            reserved0: std::ptr::null_mut(),
            src_pitch: 0,
            src_height: 0,
            dst_x: 0,
            dst_y: 0,
            dst_z: 0,
            dst_lod: 0,
            dst_type,
            dst_host: dst_host as *mut c_void,
            dst_device: dst_dev,
            dst_array: std::ptr::null_mut(),
            reserved1: std::ptr::null_mut(),
            dst_pitch: 0,
            dst_height: 0,
            width: n,
            height: 1,
            depth: 1,
        }
    }

    /// The 3D form of a 2D copy.
    pub fn from_2d(c: &Memcpy2D) -> Memcpy3D {
        let mut m = Memcpy3D::linear(
            c.dst_type,
            c.dst_host as usize,
            c.dst_device,
            c.src_type,
            c.src_host as usize,
            c.src_device,
            c.width,
        );
        m.src_x = c.src_x;
        m.src_y = c.src_y;
        m.src_array = c.src_array;
        m.src_pitch = c.src_pitch;
        m.dst_x = c.dst_x;
        m.dst_y = c.dst_y;
        m.dst_array = c.dst_array;
        m.dst_pitch = c.dst_pitch;
        m.height = c.height;
        m
    }
}

/// Checks a copy for a graph node: reserved fields, known memory types,
/// live CUDA arrays, no NULL endpoints.
pub fn check_memcpy_3d(c: &Memcpy3D) -> CuResult<()> {
    if !c.reserved0.is_null() || !c.reserved1.is_null() || c.src_lod != 0 || c.dst_lod != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("reserved fields must be NULL and LODs 0"));
    }
    for (kind, host, device, array) in [
        (c.src_type, c.src_host as usize, c.src_device, c.src_array),
        (c.dst_type, c.dst_host as usize, c.dst_device, c.dst_array),
    ] {
        let null = match kind {
            CU_MEMORYTYPE_HOST => host == 0,
            CU_MEMORYTYPE_DEVICE | CU_MEMORYTYPE_UNIFIED => device == 0,
            CU_MEMORYTYPE_ARRAY => crate::texture::array(array).map(|_| false)?,
            other => return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown CUmemorytype {other}"))),
        };
        if null {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("copy endpoint pointer is NULL"));
        }
    }
    Ok(())
}

/// Runs a `cuMemcpy3D` copy (no stream capture checks).
///
/// # Safety
/// The copy's host pointers cover the rows it names.
pub unsafe fn run_memcpy_3d(c: &Memcpy3D) -> CuResult<()> {
    let ctx = context::current()?;
    if !c.reserved0.is_null() || !c.reserved1.is_null() || c.src_lod != 0 || c.dst_lod != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("reserved fields must be NULL and LODs 0"));
    }
    let src = side(
        &ctx,
        c.src_type,
        c.src_host as usize,
        c.src_device,
        c.src_array,
        c.src_x,
        c.src_y,
        c.src_z,
        c.src_pitch,
        c.src_height,
    )?;
    let dst = side(
        &ctx,
        c.dst_type,
        c.dst_host as usize,
        c.dst_device,
        c.dst_array,
        c.dst_x,
        c.dst_y,
        c.dst_z,
        c.dst_pitch,
        c.dst_height,
    )?;
    // SAFETY: forwarded caller contract.
    unsafe { copy_box(&ctx, src, dst, c.width, c.height, c.depth) }
}

/// `cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)`.
///
/// # Safety
/// As [`memcpy_3d`].
pub unsafe fn memcpy_3d_async(copy: *const Memcpy3D, s: Handle) -> CuResult<()> {
    stream::check(s)?;
    // SAFETY: forwarded caller contract.
    let c = unsafe { read_in(copy) }?;
    if capture_copy(s, c)? {
        return Ok(());
    }
    // SAFETY: forwarded caller contract.
    stream::note_work(s, || unsafe { run_memcpy_3d(&c) })
}

/// Fills `height` rows of `width` elements at `dst` (rows `pitch` bytes
/// apart) with `pattern` (1, 2 or 4 bytes).
fn memset_2d(dst: CUdeviceptr, pitch: usize, pattern: &[u8], width: usize, height: usize) -> CuResult<()> {
    let ctx = context::current()?;
    let elem = pattern.len();
    if dst & (elem as u64 - 1) != 0 || (height > 1 && pitch < width * elem) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("misaligned destination or pitch smaller than the row"));
    }
    for y in 0..height {
        let row = dst + (y * pitch) as u64;
        match elem {
            1 => ctx.runtime.memset_d8(row, pattern[0], width as u64)?,
            2 => ctx.runtime.memset_d16(row, u16::from_le_bytes([pattern[0], pattern[1]]), width as u64)?,
            _ => ctx.runtime.memset_d32(
                row,
                u32::from_le_bytes([pattern[0], pattern[1], pattern[2], pattern[3]]),
                width as u64,
            )?,
        }
    }
    finish_if_mapped(&ctx, dst)?;
    Ok(())
}

/// `cuMemsetD2D8_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height)`.
pub fn memset_d2d8(dst: CUdeviceptr, pitch: usize, value: u8, width: usize, height: usize) -> CuResult<()> {
    context::current()?;
    capture::check_unsafe_call()?;
    memset_d2d8_impl(dst, pitch, value, width, height)
}

/// [`memset_d2d8`] without the stream capture checks.
pub fn memset_d2d8_impl(dst: CUdeviceptr, pitch: usize, value: u8, width: usize, height: usize) -> CuResult<()> {
    memset_2d(dst, pitch, &[value], width, height)
}

/// `cuMemsetD2D16_v2(...)`.
pub fn memset_d2d16(dst: CUdeviceptr, pitch: usize, value: u16, width: usize, height: usize) -> CuResult<()> {
    context::current()?;
    capture::check_unsafe_call()?;
    memset_d2d16_impl(dst, pitch, value, width, height)
}

/// [`memset_d2d16`] without the stream capture checks.
pub fn memset_d2d16_impl(dst: CUdeviceptr, pitch: usize, value: u16, width: usize, height: usize) -> CuResult<()> {
    memset_2d(dst, pitch, &value.to_le_bytes(), width, height)
}

/// `cuMemsetD2D32_v2(...)`.
pub fn memset_d2d32(dst: CUdeviceptr, pitch: usize, value: u32, width: usize, height: usize) -> CuResult<()> {
    context::current()?;
    capture::check_unsafe_call()?;
    memset_d2d32_impl(dst, pitch, value, width, height)
}

/// [`memset_d2d32`] without the stream capture checks.
pub fn memset_d2d32_impl(dst: CUdeviceptr, pitch: usize, value: u32, width: usize, height: usize) -> CuResult<()> {
    memset_2d(dst, pitch, &value.to_le_bytes(), width, height)
}

/// `cuMemsetD2D8Async(...)`.
pub fn memset_d2d8_async(dst: CUdeviceptr, pitch: usize, v: u8, w: usize, h: usize, s: Handle) -> CuResult<()> {
    stream::check(s)?;
    if capture_memset(s, dst, pitch, u32::from(v), 1, w, h)? {
        return Ok(());
    }
    stream::note_work(s, || memset_d2d8_impl(dst, pitch, v, w, h))
}

/// `cuMemsetD2D16Async(...)`.
pub fn memset_d2d16_async(dst: CUdeviceptr, pitch: usize, v: u16, w: usize, h: usize, s: Handle) -> CuResult<()> {
    stream::check(s)?;
    if capture_memset(s, dst, pitch, u32::from(v), 2, w, h)? {
        return Ok(());
    }
    stream::note_work(s, || memset_d2d16_impl(dst, pitch, v, w, h))
}

/// `cuMemsetD2D32Async(...)`.
pub fn memset_d2d32_async(dst: CUdeviceptr, pitch: usize, v: u32, w: usize, h: usize, s: Handle) -> CuResult<()> {
    stream::check(s)?;
    if capture_memset(s, dst, pitch, v, 4, w, h)? {
        return Ok(());
    }
    stream::note_work(s, || memset_d2d32_impl(dst, pitch, v, w, h))
}

/// What `cuPointerGetAttribute` knows about an address.
enum PointerKind {
    /// Device memory: owning context handle, device ordinal, base, size,
    /// and whether it is managed memory (`cuMemAllocManaged`: its device
    /// addresses are its host addresses).
    Device { context: Handle, ordinal: c_int, base: u64, size: u64, managed: bool },
    /// Page-locked or registered host memory: context handle, start, size,
    /// device address of the mapping (0 if none).
    Host { context: Handle, start: usize, size: usize, device: u64 },
}

fn classify_pointer(ptr: CUdeviceptr) -> Option<PointerKind> {
    // Host ranges first: on devices whose device addresses are host
    // addresses (lavapipe) a mapped host pointer is both.
    if let Some((start, r)) = host_range_of(ptr as usize) {
        return Some(PointerKind::Host { context: r.context as Handle, start, size: r.size, device: r.device });
    }
    for (h, c) in CONTEXTS.all() {
        if let Some((base, size)) = c.runtime.allocation_of(ptr) {
            // Prefer the context that owns the allocation.
            let (owner, kind) = CONTEXTS
                .all()
                .into_iter()
                .filter(|(_, o)| o.device.ordinal == c.device.ordinal)
                .find_map(|(oh, o)| Some((oh, *o.owned().allocations.get(&base)?)))
                .unwrap_or((h, Allocation::Device));
            let managed = kind == Allocation::Managed;
            return Some(PointerKind::Device { context: owner, ordinal: c.device.ordinal, base, size, managed });
        }
    }
    None
}

/// Writes one attribute value into `data`; `Err` for attributes that have
/// no value for this kind of pointer.
///
/// # Safety
/// `data` is writable for the attribute's type.
unsafe fn write_pointer_attribute(
    data: *mut c_void,
    attr: c_int,
    ptr: CUdeviceptr,
    kind: &PointerKind,
) -> CuResult<()> {
    let na = || CuError::CUDA_ERROR_INVALID_VALUE.because(format!("pointer attribute {attr} does not apply"));
    // SAFETY (all writes below): `data` is writable for the attribute's type,
    // per the caller.
    unsafe {
        match (attr, kind) {
            (1, PointerKind::Device { context, .. } | PointerKind::Host { context, .. }) => {
                write_out(data.cast::<Handle>(), *context)
            }
            (2, PointerKind::Device { .. }) => write_out(data.cast::<u32>(), CU_MEMORYTYPE_DEVICE),
            (2, PointerKind::Host { .. }) => write_out(data.cast::<u32>(), CU_MEMORYTYPE_HOST),
            (3, PointerKind::Device { .. }) => write_out(data.cast::<u64>(), ptr),
            (3, PointerKind::Host { start, device, .. }) if *device != 0 => {
                write_out(data.cast::<u64>(), device + (ptr - *start as u64))
            }
            // HOST_POINTER: managed memory is at the same address on the host.
            (4, PointerKind::Host { .. } | PointerKind::Device { managed: true, .. }) => {
                write_out(data.cast::<*mut c_void>(), ptr as usize as *mut c_void)
            }
            // SYNC_MEMOPS, IS_MANAGED, IS_LEGACY_CUDA_IPC_CAPABLE, IS_GPU_DIRECT_RDMA_CAPABLE: bool.
            (6, _) => write_out(data.cast::<u8>(), 1),
            (8, PointerKind::Device { managed, .. }) => write_out(data.cast::<u8>(), u8::from(*managed)),
            // IS_LEGACY_CUDA_IPC_CAPABLE: a cuMemAlloc allocation on a device that can share memory.
            (10, PointerKind::Device { context, base, managed: false, .. }) => {
                let capable = CONTEXTS
                    .get(*context)
                    .is_some_and(|c| c.runtime.info().supports_ipc_memory && c.owned().allocations.contains_key(base));
                write_out(data.cast::<u8>(), u8::from(capable))
            }
            (8 | 10 | 15, _) => write_out(data.cast::<u8>(), 0),
            (7 | 20, PointerKind::Device { base, .. }) => write_out(data.cast::<u64>(), *base),
            (7 | 20, PointerKind::Host { start, .. }) => write_out(data.cast::<u64>(), *start as u64),
            (9, PointerKind::Device { ordinal, .. }) => write_out(data.cast::<c_int>(), *ordinal),
            (9, PointerKind::Host { context, .. }) => {
                let ordinal = CONTEXTS.get(*context).map_or(0, |c| c.device.ordinal);
                write_out(data.cast::<c_int>(), ordinal)
            }
            (11 | 19, PointerKind::Device { base, .. }) => write_out(data.cast::<u64>(), *base),
            (11 | 19, PointerKind::Host { start, .. }) => write_out(data.cast::<u64>(), *start as u64),
            (12 | 18, PointerKind::Device { size, .. }) => write_out(data.cast::<usize>(), *size as usize),
            (12 | 18, PointerKind::Host { size, .. }) => write_out(data.cast::<usize>(), *size),
            (13, PointerKind::Host { device, .. }) => write_out(data.cast::<u8>(), u8::from(*device != 0)),
            (13, _) => write_out(data.cast::<u8>(), 1),
            (14, _) => write_out(data.cast::<u64>(), 0),
            // CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE.
            (16, _) => write_out(data.cast::<u32>(), 3),
            (17, PointerKind::Device { base, .. }) => write_out(data.cast::<Handle>(), crate::mempool::pool_of(*base)),
            (21, PointerKind::Device { .. }) => write_out(data.cast::<u8>(), 0),
            _ => Err(na()),
        }
    }
}

/// Largest `CUpointer_attribute` of CUDA 13 (`CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE`).
const LAST_POINTER_ATTRIBUTE: c_int = 21;

/// `cuPointerGetAttribute(void *data, CUpointer_attribute attribute,
/// CUdeviceptr ptr)`: "CUDA_ERROR_INVALID_VALUE" for a pointer that is
/// neither device memory nor page-locked/registered host memory, and for
/// attributes that do not apply to it.
///
/// # Safety
/// `data` is NULL or writable for the attribute's type.
pub unsafe fn pointer_get_attribute(data: *mut c_void, attr: c_int, ptr: CUdeviceptr) -> CuResult<()> {
    driver::driver()?;
    if data.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("data is NULL"));
    }
    if !(1..=LAST_POINTER_ATTRIBUTE).contains(&attr) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown pointer attribute {attr}")));
    }
    let kind = classify_pointer(ptr).ok_or_else(|| {
        CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{ptr:#x} is not memory this driver knows"))
    })?;
    // SAFETY: forwarded caller contract.
    unsafe { write_pointer_attribute(data, attr, ptr, &kind) }
}

/// `cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute
/// *attributes, void **data, CUdeviceptr ptr)`: unlike the single form, an
/// unknown pointer is not an error: its memory type is 0 and the other
/// values are left zeroed.
///
/// # Safety
/// `attributes` and `data` are NULL or arrays of `num` entries; each data
/// pointer is writable for its attribute's type.
pub unsafe fn pointer_get_attributes(
    num: c_uint,
    attributes: *const c_int,
    data: *mut *mut c_void,
    ptr: CUdeviceptr,
) -> CuResult<()> {
    driver::driver()?;
    if num == 0 || attributes.is_null() || data.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("numAttributes is 0 or an array is NULL"));
    }
    let kind = classify_pointer(ptr);
    for i in 0..num as usize {
        // SAFETY: arrays of `num` entries per the caller.
        let (attr, out) = unsafe { (*attributes.add(i), *data.add(i)) };
        if out.is_null() {
            continue;
        }
        if !(1..=LAST_POINTER_ATTRIBUTE).contains(&attr) {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown pointer attribute {attr}")));
        }
        match &kind {
            // SAFETY: forwarded caller contract; attributes that do not apply are skipped.
            Some(k) => {
                let _ = unsafe { write_pointer_attribute(out, attr, ptr, k) };
            }
            None => {
                if attr == 2 {
                    // SAFETY: writable for a CUmemorytype per the caller.
                    unsafe { write_out(out.cast::<u32>(), 0) }?;
                }
            }
        }
    }
    Ok(())
}
