//! Stream-ordered allocation: `cuMemAllocAsync`, `cuMemFreeAsync` and the
//! memory pools behind them (`CUmemoryPool`).
//!
//! All work of a device runs in submission order on its one queue, so
//! stream order is that order: an allocation is made when it is queued, and
//! is usable by everything queued after it; a free releases the memory once
//! the work queued before it has completed (the runtime keeps the buffer
//! alive until its batch completes). Pools do not cache freed memory: their
//! reserved memory is the memory in use, so `CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`
//! is kept and reported but never has anything to hold, and `cuMemPoolTrimTo`
//! has nothing to release. Pools cannot be shared with other processes
//! (`CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES` is 0). While a
//! stream captures, `cuMemAllocAsync` and `cuMemFreeAsync` add allocation
//! and free nodes to the graph instead (`graph_mem.rs`).

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::driver;
use crate::ffi::{read_in, write_out, CUdevice, CUdeviceptr, Handle};
use crate::graph_mem::{self, MemAllocNodeParams};
use crate::handles::Registry;
use crate::result::{CuError, CuResult};
use crate::stream;

/// `CU_MEM_ALLOCATION_TYPE_PINNED`.
const ALLOCATION_TYPE_PINNED: c_int = 1;
/// `CU_MEM_LOCATION_TYPE_DEVICE`.
const LOCATION_TYPE_DEVICE: c_int = 1;
/// `CU_MEM_ACCESS_FLAGS_PROT_READWRITE`.
const ACCESS_READWRITE: c_int = 3;

/// `CUmemLocation`: a type and an id (a device ordinal for devices).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MemLocation {
    kind: c_int,
    id: c_int,
}

/// `CUmemPoolProps` (88 bytes; the tail is reserved and must be 0).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct MemPoolProps {
    alloc_type: c_int,
    handle_types: c_int,
    location: MemLocation,
    win32_security_attributes: *mut c_void,
    max_size: usize,
    usage: u16,
    gpu_direct_rdma_capable: u8,
    reserved: [u8; 53],
}

// SAFETY: the one pointer, `win32SecurityAttributes` (Windows only), is
// required to be NULL and never dereferenced here: the value is plain data.
unsafe impl Send for MemPoolProps {}
// SAFETY: as for `Send`.
unsafe impl Sync for MemPoolProps {}

/// `CUmemAccessDesc`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct MemAccessDesc {
    location: MemLocation,
    flags: c_int,
}

/// The values `cuMemPoolGetAttribute` reports.
#[derive(Clone, Copy, Debug, Default)]
struct Usage {
    /// Bytes of live allocations (reserved memory is the same).
    used: u64,
    /// High watermarks since their last reset.
    used_high: u64,
    reserved_high: u64,
}

/// A `CUmemoryPool`.
pub struct PoolObj {
    /// The device its memory is on.
    ordinal: CUdevice,
    /// A device's default pool (cannot be destroyed).
    default: bool,
    /// `maxSize` (0: no limit).
    max_size: u64,
    /// The three reuse attributes (kept; every free is completed in order).
    reuse: Mutex<[c_int; 3]>,
    /// `CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`.
    release_threshold: Mutex<u64>,
    /// Live allocations: base address → size in bytes.
    allocations: Mutex<BTreeMap<u64, u64>>,
    usage: Mutex<Usage>,
    /// Destroyed by `cuMemPoolDestroy` while allocations were live: it
    /// takes no new ones and goes when the last one is freed.
    destroyed: AtomicBool,
}

impl PoolObj {
    fn new(ordinal: CUdevice, default: bool, max_size: u64) -> PoolObj {
        PoolObj {
            ordinal,
            default,
            max_size,
            reuse: Mutex::new([1, 1, 1]),
            release_threshold: Mutex::new(0),
            allocations: Mutex::new(BTreeMap::new()),
            usage: Mutex::new(Usage::default()),
            destroyed: AtomicBool::new(false),
        }
    }

    fn allocations(&self) -> MutexGuard<'_, BTreeMap<u64, u64>> {
        self.allocations.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn usage(&self) -> MutexGuard<'_, Usage> {
        self.usage.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Live pools, including the default ones once asked for.
static POOLS: Registry<PoolObj> = Registry::new();

/// Per device: its default pool and its current pool (handles).
struct DevicePools {
    default: Handle,
    current: Handle,
}

// SAFETY: the handles are registry keys, never dereferenced.
unsafe impl Send for DevicePools {}

fn device_pools() -> MutexGuard<'static, BTreeMap<CUdevice, DevicePools>> {
    static TABLE: OnceLock<Mutex<BTreeMap<CUdevice, DevicePools>>> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(BTreeMap::new())).lock().unwrap_or_else(|p| p.into_inner())
}

/// The default and current pools of device `dev`, created on first use.
fn pools_of(dev: CUdevice) -> CuResult<(Handle, Handle)> {
    driver::device(dev)?;
    let mut table = device_pools();
    let entry = table.entry(dev).or_insert_with(|| {
        let h = POOLS.insert(Arc::new(PoolObj::new(dev, true, 0)));
        DevicePools { default: h, current: h }
    });
    Ok((entry.default, entry.current))
}

fn lookup(pool: Handle) -> CuResult<Arc<PoolObj>> {
    driver::driver()?;
    POOLS
        .get(pool)
        .filter(|p| !p.destroyed.load(Ordering::Relaxed))
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{pool:p} is not a live memory pool")))
}

/// Checks a `CUmemLocation` naming a device; its ordinal.
fn device_location(loc: &MemLocation) -> CuResult<CUdevice> {
    if loc.kind != LOCATION_TYPE_DEVICE {
        return Err(CuError::CUDA_ERROR_NOT_SUPPORTED
            .because(format!("memory pools in location type {} (only device memory pools exist here)", loc.kind)));
    }
    driver::device(loc.id).map_err(|_| CuError::CUDA_ERROR_INVALID_DEVICE.because(format!("no device {}", loc.id)))?;
    Ok(loc.id)
}

/// `cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)`.
///
/// # Safety
/// `pool_out` is NULL or writable.
pub unsafe fn device_get_default_mem_pool(pool_out: *mut Handle, dev: CUdevice) -> CuResult<()> {
    driver::device(dev).map_err(|_| CuError::CUDA_ERROR_INVALID_DEVICE.because(format!("no device {dev}")))?;
    let (default, _) = pools_of(dev)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(pool_out, default) }
}

/// `cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)`: the pool
/// `cuMemAllocAsync` takes from on `dev`.
///
/// # Safety
/// `pool` is NULL or writable.
pub unsafe fn device_get_mem_pool(pool: *mut Handle, dev: CUdevice) -> CuResult<()> {
    driver::device(dev).map_err(|_| CuError::CUDA_ERROR_INVALID_DEVICE.because(format!("no device {dev}")))?;
    let (_, current) = pools_of(dev)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(pool, current) }
}

/// `cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)`: "The memory pool
/// must be local to the specified device."
pub fn device_set_mem_pool(dev: CUdevice, pool: Handle) -> CuResult<()> {
    driver::device(dev).map_err(|_| CuError::CUDA_ERROR_INVALID_DEVICE.because(format!("no device {dev}")))?;
    let p = lookup(pool)?;
    if p.ordinal != dev {
        return Err(
            CuError::CUDA_ERROR_INVALID_VALUE.because(format!("the pool is on device {}, not {dev}", p.ordinal))
        );
    }
    pools_of(dev)?;
    if let Some(e) = device_pools().get_mut(&dev) {
        e.current = pool;
    }
    Ok(())
}

/// Reads a location and allocation type (`cuMemGetDefaultMemPool` and
/// friends): pinned device memory is all there is.
///
/// # Safety
/// `location` is NULL or readable.
unsafe fn pinned_device(location: *const MemLocation, alloc_type: c_int) -> CuResult<CUdevice> {
    driver::driver()?;
    // SAFETY: forwarded caller contract.
    let loc = unsafe { read_in(location) }?;
    if alloc_type != ALLOCATION_TYPE_PINNED {
        return Err(CuError::CUDA_ERROR_NOT_SUPPORTED
            .because(format!("memory pools of allocation type {alloc_type} (only pinned device memory)")));
    }
    device_location(&loc)
}

/// `cuMemGetDefaultMemPool(CUmemoryPool *pool_out, CUmemLocation *location,
/// CUmemAllocationType type)`.
///
/// # Safety
/// `pool_out` is NULL or writable; `location` is NULL or readable.
pub unsafe fn mem_get_default_mem_pool(pool_out: *mut Handle, location: *const MemLocation, t: c_int) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    let dev = unsafe { pinned_device(location, t) }?;
    // SAFETY: forwarded caller contract.
    unsafe { device_get_default_mem_pool(pool_out, dev) }
}

/// `cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location,
/// CUmemAllocationType type)`.
///
/// # Safety
/// As [`mem_get_default_mem_pool`].
pub unsafe fn mem_get_mem_pool(pool: *mut Handle, location: *const MemLocation, t: c_int) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    let dev = unsafe { pinned_device(location, t) }?;
    // SAFETY: forwarded caller contract.
    unsafe { device_get_mem_pool(pool, dev) }
}

/// `cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type,
/// CUmemoryPool pool)`.
///
/// # Safety
/// `location` is NULL or readable.
pub unsafe fn mem_set_mem_pool(location: *const MemLocation, t: c_int, pool: Handle) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    let dev = unsafe { pinned_device(location, t) }?;
    device_set_mem_pool(dev, pool)
}

/// Checks pool properties (of a pool or a graph allocation node): pinned
/// device memory of a real device without export handles; the device.
pub fn check_pool_props(p: &MemPoolProps) -> CuResult<CUdevice> {
    if p.alloc_type != ALLOCATION_TYPE_PINNED {
        return Err(CuError::CUDA_ERROR_NOT_SUPPORTED
            .because(format!("memory pools of allocation type {} (only pinned device memory)", p.alloc_type)));
    }
    if p.handle_types != 0 {
        return Err(CuError::CUDA_ERROR_NOT_SUPPORTED
            .because("memory pools cannot be shared with other processes (handleTypes must be 0)"));
    }
    if !p.win32_security_attributes.is_null() || p.reserved.iter().any(|&b| b != 0) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("win32SecurityAttributes and reserved must be 0"));
    }
    device_location(&p.location)
}

/// Checks one access descriptor for memory of device `owner`: read-write for
/// the owner itself, none for others (there is no peer access).
pub fn check_access(d: &MemAccessDesc, owner: CUdevice) -> CuResult<()> {
    let dev = device_location(&d.location)?;
    if !(0..=ACCESS_READWRITE).contains(&d.flags) || d.flags == 2 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("access flags {}", d.flags)));
    }
    if dev == owner && d.flags != ACCESS_READWRITE {
        return Err(CuError::CUDA_ERROR_INVALID_DEVICE.because("the memory's own device keeps read-write access"));
    }
    if dev != owner && d.flags != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_DEVICE.because("peer access to another device's memory"));
    }
    Ok(())
}

/// `cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)`:
/// pinned device memory without export handles; other allocation types,
/// host locations and shareable handles are `CUDA_ERROR_NOT_SUPPORTED`.
///
/// # Safety
/// `pool` is NULL or writable; `props` is NULL or readable.
pub unsafe fn mem_pool_create(pool: *mut Handle, props: *const MemPoolProps) -> CuResult<()> {
    driver::driver()?;
    if pool.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pool is NULL"));
    }
    // SAFETY: forwarded caller contract.
    let p = unsafe { read_in(props) }?;
    let dev = check_pool_props(&p)?;
    let handle = POOLS.insert(Arc::new(PoolObj::new(dev, false, p.max_size as u64)));
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(pool, handle) }
}

/// `cuMemPoolDestroy(CUmemoryPool pool)`: a device's default pool cannot be
/// destroyed; the device's current pool reverts to its default; a pool with
/// live allocations goes when the last of them is freed.
pub fn mem_pool_destroy(pool: Handle) -> CuResult<()> {
    let p = lookup(pool)?;
    if p.default {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("a device's default memory pool cannot be destroyed"));
    }
    if let Some(e) = device_pools().get_mut(&p.ordinal) {
        if e.current == pool {
            e.current = e.default;
        }
    }
    // Under the allocations lock: an allocation either lands before (and
    // keeps the pool until it is freed) or sees the flag and fails.
    let allocs = p.allocations();
    p.destroyed.store(true, Ordering::Relaxed);
    if allocs.is_empty() {
        drop(allocs);
        POOLS.remove(pool);
    }
    Ok(())
}

/// `CU_MEMPOOL_ATTR_*` values.
const ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: c_int = 1;
const ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: c_int = 3;
const ATTR_RELEASE_THRESHOLD: c_int = 4;
const ATTR_RESERVED_MEM_CURRENT: c_int = 5;
const ATTR_RESERVED_MEM_HIGH: c_int = 6;
const ATTR_USED_MEM_CURRENT: c_int = 7;
const ATTR_USED_MEM_HIGH: c_int = 8;
const ATTR_ALLOCATION_TYPE: c_int = 9;
const ATTR_EXPORT_HANDLE_TYPES: c_int = 10;
const ATTR_LOCATION_ID: c_int = 11;
const ATTR_LOCATION_TYPE: c_int = 12;
const ATTR_MAX_POOL_SIZE: c_int = 13;
const ATTR_HW_DECOMPRESS_ENABLED: c_int = 14;
const ATTR_LOCALITY_DOMAIN_ID: c_int = 15;

/// `cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void
/// *value)`: the reuse flags (int), the release threshold (cuuint64_t), and
/// the two high watermarks, which "can only be reset to zero".
///
/// # Safety
/// `value` is NULL or readable for the attribute's type.
pub unsafe fn mem_pool_set_attribute(pool: Handle, attr: c_int, value: *mut c_void) -> CuResult<()> {
    let p = lookup(pool)?;
    match attr {
        ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES..=ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES => {
            // SAFETY: forwarded caller contract (an int).
            let v = unsafe { read_in(value.cast::<c_int>()) }?;
            p.reuse.lock().unwrap_or_else(|e| e.into_inner())[(attr - 1) as usize] = c_int::from(v != 0);
        }
        ATTR_RELEASE_THRESHOLD => {
            // SAFETY: forwarded caller contract (a cuuint64_t).
            let v = unsafe { read_in(value.cast::<u64>()) }?;
            *p.release_threshold.lock().unwrap_or_else(|e| e.into_inner()) = v;
        }
        ATTR_RESERVED_MEM_HIGH | ATTR_USED_MEM_HIGH => {
            // SAFETY: forwarded caller contract (a cuuint64_t).
            let v = unsafe { read_in(value.cast::<u64>()) }?;
            if v != 0 {
                return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("a high watermark can only be reset to zero"));
            }
            let mut u = p.usage();
            // Reset to the current value, as the driver does.
            if attr == ATTR_RESERVED_MEM_HIGH {
                u.reserved_high = u.used;
            } else {
                u.used_high = u.used;
            }
        }
        _ => {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("memory pool attribute {attr} cannot be set")))
        }
    }
    Ok(())
}

/// `cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)`.
///
/// # Safety
/// `value` is NULL or writable for the attribute's type.
pub unsafe fn mem_pool_get_attribute(pool: Handle, attr: c_int, value: *mut c_void) -> CuResult<()> {
    let p = lookup(pool)?;
    let u = *p.usage();
    // SAFETY (all arms): forwarded caller contract, each with the type the
    // documentation gives the attribute.
    unsafe {
        match attr {
            ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES..=ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES => {
                let v = p.reuse.lock().unwrap_or_else(|e| e.into_inner())[(attr - 1) as usize];
                write_out(value.cast::<c_int>(), v)
            }
            ATTR_RELEASE_THRESHOLD => {
                write_out(value.cast::<u64>(), *p.release_threshold.lock().unwrap_or_else(|e| e.into_inner()))
            }
            ATTR_RESERVED_MEM_CURRENT | ATTR_USED_MEM_CURRENT => write_out(value.cast::<u64>(), u.used),
            ATTR_RESERVED_MEM_HIGH => write_out(value.cast::<u64>(), u.reserved_high),
            ATTR_USED_MEM_HIGH => write_out(value.cast::<u64>(), u.used_high),
            ATTR_ALLOCATION_TYPE => write_out(value.cast::<c_int>(), ALLOCATION_TYPE_PINNED),
            ATTR_EXPORT_HANDLE_TYPES => write_out(value.cast::<c_int>(), 0),
            ATTR_LOCATION_ID => write_out(value.cast::<c_int>(), p.ordinal),
            ATTR_LOCATION_TYPE => write_out(value.cast::<c_int>(), LOCATION_TYPE_DEVICE),
            ATTR_MAX_POOL_SIZE => write_out(value.cast::<u64>(), p.max_size),
            ATTR_HW_DECOMPRESS_ENABLED => write_out(value.cast::<c_int>(), 0),
            ATTR_LOCALITY_DOMAIN_ID => write_out(value.cast::<c_int>(), -1),
            _ => Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown memory pool attribute {attr}"))),
        }
    }
}

/// `cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)`: nothing is
/// held beyond the live allocations, which cannot be released.
pub fn mem_pool_trim_to(pool: Handle, _min_bytes_to_keep: usize) -> CuResult<()> {
    lookup(pool).map(|_| ())
}

/// `cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t
/// count)`: the pool's own device always has read-write access (and may not
/// be given less); there are no peers to give access to.
///
/// # Safety
/// `map` is NULL or readable for `count` descriptors.
pub unsafe fn mem_pool_set_access(pool: Handle, map: *const MemAccessDesc, count: usize) -> CuResult<()> {
    let p = lookup(pool)?;
    if count > 0 && map.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("map is NULL"));
    }
    for i in 0..count {
        // SAFETY: `count` readable descriptors, per the caller.
        let d = unsafe { map.add(i).read_unaligned() };
        check_access(&d, p.ordinal)?;
    }
    Ok(())
}

/// `cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool,
/// CUmemLocation *location)`: read-write for the pool's device, none for
/// any other.
///
/// # Safety
/// `flags` is NULL or writable; `location` is NULL or readable.
pub unsafe fn mem_pool_get_access(flags: *mut c_int, pool: Handle, location: *const MemLocation) -> CuResult<()> {
    let p = lookup(pool)?;
    // SAFETY: forwarded caller contract.
    let loc = unsafe { read_in(location) }?;
    let dev = device_location(&loc)?;
    let f = if dev == p.ordinal { ACCESS_READWRITE } else { 0 };
    // SAFETY: forwarded caller contract.
    unsafe { write_out(flags, f) }
}

/// Allocates `bytesize` from `pool` for work queued on `stream`.
///
/// # Safety
/// `dptr` is NULL or writable.
unsafe fn alloc_from(dptr: *mut CUdeviceptr, bytesize: usize, pool: Handle, stream: Handle) -> CuResult<()> {
    let ctx = stream::context_of(stream)?;
    if dptr.is_null() || bytesize == 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("dptr is NULL or bytesize is 0"));
    }
    let p = lookup(pool)?;
    if p.ordinal != ctx.device.ordinal {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE
            .because(format!("the pool is on device {}, the stream on {}", p.ordinal, ctx.device.ordinal)));
    }
    // While capturing, an allocation node (owned by the graph, with the
    // pool's properties) instead.
    let mut captured = 0;
    let node = crate::graph::captured_memory_node(stream, |graph_id| {
        let params = MemAllocNodeParams {
            pool_props: pool_props_of(&p),
            access_descs: std::ptr::null(),
            access_desc_count: 0,
            bytesize,
            dptr: 0,
        };
        // SAFETY: no access descriptors.
        let a = unsafe { graph_mem::new_allocation(&params, graph_id) }?;
        captured = a.dptr;
        Ok(crate::graph::NodeKind::MemAlloc(a))
    })?;
    if node {
        // SAFETY: checked non-null; writable per the caller.
        return unsafe { write_out(dptr, captured) };
    }
    let size = bytesize as u64;
    let mut allocs = p.allocations();
    // Destroyed since `lookup` (the flag is set under this lock).
    if p.destroyed.load(Ordering::Relaxed) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{pool:p} is not a live memory pool")));
    }
    let in_use = allocs.values().sum::<u64>();
    if p.max_size != 0 && in_use.checked_add(size).is_none_or(|total| total > p.max_size) {
        return Err(CuError::CUDA_ERROR_OUT_OF_MEMORY.because(format!("the pool's maxSize {} is reached", p.max_size)));
    }
    let addr = ctx.runtime.alloc(size)?;
    allocs.insert(addr, size);
    drop(allocs);
    let mut u = p.usage();
    u.used += size;
    u.used_high = u.used_high.max(u.used);
    u.reserved_high = u.reserved_high.max(u.used);
    drop(u);
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(dptr, addr) }
}

/// `cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)`:
/// from the current pool of the stream's device.
///
/// # Safety
/// `dptr` is NULL or writable.
pub unsafe fn mem_alloc_async(dptr: *mut CUdeviceptr, bytesize: usize, stream: Handle) -> CuResult<()> {
    let ctx = stream::context_of(stream)?;
    let (_, current) = pools_of(ctx.device.ordinal)?;
    // SAFETY: forwarded caller contract.
    unsafe { alloc_from(dptr, bytesize, current, stream) }
}

/// `cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool
/// pool, CUstream hStream)`.
///
/// # Safety
/// `dptr` is NULL or writable.
pub unsafe fn mem_alloc_from_pool_async(
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    pool: Handle,
    stream: Handle,
) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe { alloc_from(dptr, bytesize, pool, stream) }
}

/// Properties describing `pool` (for allocation nodes captured from it).
fn pool_props_of(pool: &PoolObj) -> MemPoolProps {
    MemPoolProps {
        alloc_type: ALLOCATION_TYPE_PINNED,
        handle_types: 0,
        location: MemLocation { kind: LOCATION_TYPE_DEVICE, id: pool.ordinal },
        win32_security_attributes: std::ptr::null_mut(),
        max_size: pool.max_size as usize,
        usage: 0,
        gpu_direct_rdma_capable: 0,
        reserved: [0; 53],
    }
}

/// The pool that allocated `base`, if any (and its handle).
fn owner(base: u64) -> Option<(Handle, Arc<PoolObj>)> {
    POOLS.all().into_iter().find(|(_, p)| p.allocations().contains_key(&base))
}

/// The pool handle of the allocation based at `base`
/// (`CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE`), NULL for other memory.
pub fn pool_of(base: u64) -> Handle {
    owner(base).map_or(std::ptr::null_mut(), |(h, _)| h)
}

/// Frees a pool allocation based at `dptr` once the work queued before now
/// has completed; `None` if no pool allocated it.
pub fn free_pool_allocation(dptr: CUdeviceptr) -> Option<CuResult<()>> {
    let (handle, p) = owner(dptr)?;
    Some((|| {
        // Forgotten before the runtime releases the memory (another thread
        // may get the address back at once); a second free of it fails.
        let Some(size) = p.allocations().remove(&dptr) else {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{dptr:#x} was freed by another thread")));
        };
        if let Err(e) = driver::device(p.ordinal).and_then(|d| d.runtime()).and_then(|r| Ok(r.free(dptr)?)) {
            p.allocations().insert(dptr, size);
            return Err(e);
        }
        {
            let mut u = p.usage();
            u.used = u.used.saturating_sub(size);
        }
        let allocs = p.allocations();
        if p.destroyed.load(Ordering::Relaxed) && allocs.is_empty() {
            drop(allocs);
            POOLS.remove(handle);
        }
        Ok(())
    })())
}

/// `cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)`: memory from
/// `cuMemAllocAsync` (or `cuMemAlloc`, or a graph allocation), released
/// after the work queued before it; NULL frees nothing.
pub fn mem_free_async(dptr: CUdeviceptr, stream: Handle) -> CuResult<()> {
    let ctx = stream::context_of(stream)?;
    if dptr == 0 {
        return Ok(());
    }
    // While capturing, a free node (of a graph allocation) instead.
    let node = crate::graph::captured_memory_node(stream, |graph_id| {
        graph_mem::new_free(dptr, graph_id).map(crate::graph::NodeKind::MemFree)
    })?;
    if node {
        return Ok(());
    }
    if let Some(r) = free_pool_allocation(dptr) {
        return r;
    }
    if let Some(r) = graph_mem::free_outside(dptr) {
        return r;
    }
    if ctx.runtime.allocation_of(dptr).is_some_and(|(base, _)| base == dptr) {
        // A cuMemAlloc allocation: freed the same way, after queued work
        // (in the stream's context, and no unsafe call while capturing).
        return crate::memory::free_in(&ctx, dptr);
    }
    Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{dptr:#x} is not the start of a live allocation")))
}
