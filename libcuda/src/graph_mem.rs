//! Graph memory nodes: allocation (`CU_GRAPH_NODE_TYPE_MEM_ALLOC`) and free
//! (`CU_GRAPH_NODE_TYPE_MEM_FREE`) nodes, made by `cuGraphAddMemAllocNode`,
//! `cuGraphAddMemFreeNode`, `cuGraphAddNode` or by capturing
//! `cuMemAllocAsync`/`cuMemFreeAsync`, and the device's graph memory
//! attributes.
//!
//! An allocation node's memory is allocated when the node is created: its
//! address is fixed across instantiations and launches, as CUDA promises,
//! and the memory stays with it until no graph or executable graph holds the
//! node and the allocation is not live. A launch makes the allocation live
//! (a launch while it is still live from an earlier one is
//! `CUDA_ERROR_INVALID_VALUE`, unless the executable graph was instantiated
//! with `CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH`); a free node in
//! the same or another graph, `cuMemFreeAsync` or `cuMemFree` end it. Since
//! the memory is not handed back at a free, "reserved" graph memory is what
//! the live nodes hold and "used" is what is live.

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::driver;
use crate::ffi::{read_in, write_out, CUdevice, CUdeviceptr};
use crate::mempool::{MemAccessDesc, MemPoolProps};
use crate::result::{CuError, CuResult};

/// `CUDA_MEM_ALLOC_NODE_PARAMS` (v1 and v2 have one layout).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct MemAllocNodeParams {
    /// Where and how: pinned device memory without export handles.
    pub pool_props: MemPoolProps,
    /// Peer access descriptors (`accessDescCount` of them).
    pub access_descs: *const MemAccessDesc,
    /// Number of access descriptors.
    pub access_desc_count: usize,
    /// Bytes to allocate.
    pub bytesize: usize,
    /// Out: the allocation's address.
    pub dptr: CUdeviceptr,
}

/// The memory of one allocation node.
pub struct GraphAlloc {
    /// Its device address.
    pub dptr: CUdeviceptr,
    /// Its size in bytes.
    pub bytesize: usize,
    ordinal: CUdevice,
    /// The node's parameters as given (for `cuGraphMemAllocNodeGetParams`).
    props: MemPoolProps,
    /// The access descriptors, owned here (the answer points to them).
    access: Vec<MemAccessDesc>,
    /// Between a launch of its node and the free that ends it.
    live: AtomicBool,
    /// Free nodes for it that exist (the one a user graph has and its
    /// copies in executable graphs): it can be freed in one graph only.
    free_nodes: AtomicU32,
    /// Whether that free node is in the graph that owns the allocation node
    /// (then nothing outside that graph may free it).
    freed_in_owner: AtomicBool,
    /// The graph its allocation node was made in (`GraphObj` id).
    owner_graph: u32,
}

impl Drop for GraphAlloc {
    fn drop(&mut self) {
        // Released after the queued work that may use it (runtime `free`).
        if let Ok(rt) = driver::device(self.ordinal).and_then(|d| d.runtime()) {
            let _ = rt.free(self.dptr);
        }
    }
}

/// Every graph allocation by address. An entry goes when nothing else holds
/// it and it is not live ([`sweep`]).
fn allocations() -> MutexGuard<'static, BTreeMap<CUdeviceptr, Arc<GraphAlloc>>> {
    static TABLE: OnceLock<Mutex<BTreeMap<CUdeviceptr, Arc<GraphAlloc>>>> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(BTreeMap::new())).lock().unwrap_or_else(|p| p.into_inner())
}

/// Per device: the high watermarks of used and reserved graph memory.
fn watermarks() -> MutexGuard<'static, BTreeMap<CUdevice, (u64, u64)>> {
    static TABLE: OnceLock<Mutex<BTreeMap<CUdevice, (u64, u64)>>> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(BTreeMap::new())).lock().unwrap_or_else(|p| p.into_inner())
}

/// Used and reserved graph memory of device `dev` now.
fn usage(dev: CUdevice) -> (u64, u64) {
    let table = allocations();
    let mine = table.values().filter(|a| a.ordinal == dev);
    mine.fold((0, 0), |(used, reserved), a| {
        let size = a.bytesize as u64;
        (used + if a.live.load(Ordering::Relaxed) { size } else { 0 }, reserved + size)
    })
}

/// Raises the high watermarks of `dev` to the current usage.
fn note_usage(dev: CUdevice) {
    let (used, reserved) = usage(dev);
    let mut w = watermarks();
    let e = w.entry(dev).or_default();
    e.0 = e.0.max(used);
    e.1 = e.1.max(reserved);
}

/// Drops the allocations that no graph holds any more and that are not live.
pub fn sweep() {
    allocations().retain(|_, a| Arc::strong_count(a) > 1 || a.live.load(Ordering::Relaxed));
}

/// Reads and checks allocation node parameters and allocates the memory:
/// pinned device memory of a real device, no export handles, the device's
/// own access read-write, no peers.
///
/// # Safety
/// `p.access_descs` is NULL or readable for `p.access_desc_count` entries.
pub unsafe fn new_allocation(p: &MemAllocNodeParams, owner_graph: u32) -> CuResult<Arc<GraphAlloc>> {
    let props = p.pool_props;
    let ordinal = crate::mempool::check_pool_props(&props)?;
    if p.bytesize == 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("bytesize is 0"));
    }
    if p.access_desc_count > 0 && p.access_descs.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("accessDescs is NULL with accessDescCount > 0"));
    }
    let count = driver::driver()?.devices.len();
    if p.access_desc_count > count {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("more access descriptors than devices"));
    }
    let mut access = Vec::with_capacity(p.access_desc_count);
    for i in 0..p.access_desc_count {
        // SAFETY: readable for `access_desc_count` entries, per the caller.
        let d = unsafe { p.access_descs.add(i).read_unaligned() };
        crate::mempool::check_access(&d, ordinal)?;
        access.push(d);
    }
    let dptr = driver::device(ordinal)?.runtime()?.alloc(p.bytesize as u64)?;
    let a = Arc::new(GraphAlloc {
        dptr,
        bytesize: p.bytesize,
        ordinal,
        props,
        access,
        live: AtomicBool::new(false),
        free_nodes: AtomicU32::new(0),
        freed_in_owner: AtomicBool::new(false),
        owner_graph,
    });
    allocations().insert(dptr, a.clone());
    note_usage(ordinal);
    Ok(a)
}

/// Checks that a free node for `dptr` may be added to the graph with id
/// `graph_id` and records it: "CUDA_ERROR_INVALID_VALUE if the user
/// attempts to free an allocation twice in the same graph, an address that
/// was not returned by an allocation node, an invalid address".
pub fn new_free(dptr: CUdeviceptr, graph_id: u32) -> CuResult<CUdeviceptr> {
    driver::driver()?;
    let a = allocations().get(&dptr).cloned().ok_or_else(|| {
        CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{dptr:#x} is not the address of a graph allocation"))
    })?;
    if a.free_nodes.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed).is_err() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{dptr:#x} already has a free node")));
    }
    a.freed_in_owner.store(a.owner_graph == graph_id, Ordering::Relaxed);
    Ok(dptr)
}

/// A copy of a free node for `dptr` was made (an instantiation).
pub fn retain_free(dptr: CUdeviceptr) {
    if let Some(a) = allocations().get(&dptr) {
        a.free_nodes.fetch_add(1, Ordering::AcqRel);
    }
}

/// A free node for `dptr` is gone (its graph was destroyed): when it was
/// the last, the allocation may get a free node elsewhere, or be freed
/// outside graphs.
pub fn release_free(dptr: CUdeviceptr) {
    if let Some(a) = allocations().get(&dptr) {
        if a.free_nodes.fetch_sub(1, Ordering::AcqRel) == 1 {
            a.freed_in_owner.store(false, Ordering::Relaxed);
        }
    }
}

/// Before a launch: "CUDA_ERROR_INVALID_VALUE" when an allocation of the
/// graph is still live from an earlier launch, unless `auto_free` (then it
/// is freed first, as `cuMemFreeAsync` would).
pub fn before_launch(allocs: &[Arc<GraphAlloc>], auto_free: bool) -> CuResult<()> {
    for a in allocs {
        if a.live.load(Ordering::Relaxed) {
            if !auto_free {
                return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!(
                    "the graph allocation at {:#x} of an earlier launch has not been freed",
                    a.dptr
                )));
            }
            a.live.store(false, Ordering::Relaxed);
        }
    }
    Ok(())
}

/// An allocation node runs: the allocation is live.
pub fn run_alloc(a: &GraphAlloc) {
    a.live.store(true, Ordering::Relaxed);
    note_usage(a.ordinal);
}

/// A free node runs: the allocation at `dptr` is no longer live.
pub fn run_free(dptr: CUdeviceptr) {
    let a = allocations().get(&dptr).cloned();
    if let Some(a) = a {
        a.live.store(false, Ordering::Relaxed);
    }
    sweep();
}

/// `cuMemFree`/`cuMemFreeAsync` of a graph allocation, outside graphs: ends
/// a live allocation that its own graph does not free; `None` if `dptr` is
/// no graph allocation.
pub fn free_outside(dptr: CUdeviceptr) -> Option<CuResult<()>> {
    let a = allocations().get(&dptr).cloned()?;
    let r = if a.freed_in_owner.load(Ordering::Relaxed) {
        Err(CuError::CUDA_ERROR_INVALID_VALUE.because("the allocation is freed by a free node of its own graph"))
    } else if !a.live.swap(false, Ordering::Relaxed) {
        Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("the graph allocation at {dptr:#x} is not live")))
    } else {
        Ok(())
    };
    drop(a);
    sweep();
    Some(r)
}

/// The parameters of an allocation node, its descriptors pointing into the node.
pub fn params_of(a: &GraphAlloc) -> MemAllocNodeParams {
    MemAllocNodeParams {
        pool_props: a.props,
        access_descs: if a.access.is_empty() { std::ptr::null() } else { a.access.as_ptr() },
        access_desc_count: a.access.len(),
        bytesize: a.bytesize,
        dptr: a.dptr,
    }
}

/// `CU_GRAPH_MEM_ATTR_*`.
const ATTR_USED_MEM_CURRENT: c_int = 0;
const ATTR_USED_MEM_HIGH: c_int = 1;
const ATTR_RESERVED_MEM_CURRENT: c_int = 2;
const ATTR_RESERVED_MEM_HIGH: c_int = 3;

fn check_device(dev: CUdevice) -> CuResult<()> {
    driver::device(dev).map(|_| ()).map_err(|_| CuError::CUDA_ERROR_INVALID_DEVICE.because(format!("no device {dev}")))
}

/// `cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute
/// attr, void *value)` (each a cuuint64_t).
///
/// # Safety
/// `value` is NULL or writable for 8 bytes.
pub unsafe fn device_get_graph_mem_attribute(dev: CUdevice, attr: c_int, value: *mut c_void) -> CuResult<()> {
    check_device(dev)?;
    sweep();
    note_usage(dev);
    let (used, reserved) = usage(dev);
    let (used_high, reserved_high) = watermarks().get(&dev).copied().unwrap_or_default();
    let v = match attr {
        ATTR_USED_MEM_CURRENT => used,
        ATTR_USED_MEM_HIGH => used_high,
        ATTR_RESERVED_MEM_CURRENT => reserved,
        ATTR_RESERVED_MEM_HIGH => reserved_high,
        _ => return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown graph memory attribute {attr}"))),
    };
    // SAFETY: forwarded caller contract.
    unsafe { write_out(value.cast::<u64>(), v) }
}

/// `cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
/// void *value)`: the high watermarks, which can only be reset to zero
/// (to the current value, as the driver does).
///
/// # Safety
/// `value` is NULL or readable for 8 bytes.
pub unsafe fn device_set_graph_mem_attribute(dev: CUdevice, attr: c_int, value: *mut c_void) -> CuResult<()> {
    check_device(dev)?;
    // SAFETY: forwarded caller contract.
    let v = unsafe { read_in(value.cast::<u64>()) }?;
    if !matches!(attr, ATTR_USED_MEM_HIGH | ATTR_RESERVED_MEM_HIGH) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("graph memory attribute {attr} cannot be set")));
    }
    if v != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("a high watermark can only be reset to zero"));
    }
    sweep();
    let (used, reserved) = usage(dev);
    let mut w = watermarks();
    let e = w.entry(dev).or_default();
    if attr == ATTR_USED_MEM_HIGH {
        e.0 = used;
    } else {
        e.1 = reserved;
    }
    Ok(())
}

/// `cuDeviceGraphMemTrim(CUdevice device)`: graph memory is held by the
/// nodes that allocated it, so there is nothing unused to release.
pub fn device_graph_mem_trim(dev: CUdevice) -> CuResult<()> {
    check_device(dev)?;
    sweep();
    Ok(())
}
