//! Device queries: `cuInit`, `cuDriverGetVersion`, `cuDeviceGet*` and the
//! `CUdevice_attribute` table.

use std::ffi::{c_char, c_int, c_uint, c_void};

use ptxvk_runtime::{DeviceInfo, DeviceType};

use crate::driver::{self, Device, DRIVER_VERSION};
use crate::ffi::{copy_c_string, write_out, CUdevice};
use crate::result::{CuError, CuResult};

/// `cuInit(Flags)`. "CUDA_ERROR_INVALID_VALUE: Flags must be 0."
pub fn init(flags: c_uint) -> CuResult<()> {
    if flags != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("cuInit flags must be 0"));
    }
    driver::init()
}

/// `cuDriverGetVersion(int *driverVersion)`; works before `cuInit`.
///
/// # Safety
/// `version` is NULL or writable.
pub unsafe fn driver_get_version(version: *mut c_int) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe { write_out(version, DRIVER_VERSION) }
}

/// `cuDeviceGet(CUdevice *device, int ordinal)`.
///
/// # Safety
/// `device` is NULL or writable.
pub unsafe fn device_get(device: *mut CUdevice, ordinal: c_int) -> CuResult<()> {
    let d = driver::device(ordinal)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(device, d.ordinal) }
}

/// `cuDeviceGetCount(int *count)`.
///
/// # Safety
/// `count` is NULL or writable.
pub unsafe fn device_get_count(count: *mut c_int) -> CuResult<()> {
    let n = driver::driver()?.devices.len();
    // SAFETY: forwarded caller contract.
    unsafe { write_out(count, c_int::try_from(n).unwrap_or(c_int::MAX)) }
}

/// `cuDeviceGetName(char *name, int len, CUdevice dev)`: the Vulkan device
/// name, truncated to `len - 1` bytes and NUL-terminated.
///
/// # Safety
/// `name` is NULL or valid for writing `len` bytes.
pub unsafe fn device_get_name(name: *mut c_char, len: c_int, dev: CUdevice) -> CuResult<()> {
    let d = driver::device(dev)?;
    if name.is_null() || len <= 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("name is NULL or len is not positive"));
    }
    // SAFETY: `name` holds `len` writable bytes per the caller.
    unsafe { copy_c_string(name, len as usize, d.desc.name.as_bytes()) };
    Ok(())
}

/// `cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)`: the largest
/// device-local heap.
///
/// # Safety
/// `bytes` is NULL or writable.
pub unsafe fn device_total_mem(bytes: *mut usize, dev: CUdevice) -> CuResult<()> {
    let d = driver::device(dev)?;
    if bytes.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("bytes is NULL"));
    }
    let total = d.runtime()?.info().total_memory;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(bytes, usize::try_from(total).unwrap_or(usize::MAX)) }
}

/// `cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)` (and `_v2`): the Vulkan
/// `deviceUUID`.
///
/// # Safety
/// `uuid` is NULL or valid for writing 16 bytes.
pub unsafe fn device_get_uuid(uuid: *mut [u8; 16], dev: CUdevice) -> CuResult<()> {
    let d = driver::device(dev)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(uuid, d.desc.uuid) }
}

/// `cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)`
/// (deprecated in CUDA, still used).
///
/// # Safety
/// `major` and `minor` are NULL or writable.
pub unsafe fn device_compute_capability(major: *mut c_int, minor: *mut c_int, dev: CUdevice) -> CuResult<()> {
    driver::device(dev)?;
    if major.is_null() || minor.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("major or minor is NULL"));
    }
    let (ma, mi) = driver::reported_compute_capability()?;
    // SAFETY: both checked non-null; writable per the caller.
    unsafe {
        write_out(major, ma)?;
        write_out(minor, mi)
    }
}

/// `cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)`:
/// `domain:bus:device.function`, all zero when Vulkan does not say.
///
/// # Safety
/// `bus_id` is NULL or valid for writing `len` bytes.
pub unsafe fn device_get_pci_bus_id(bus_id: *mut c_char, len: c_int, dev: CUdevice) -> CuResult<()> {
    let d = driver::device(dev)?;
    if bus_id.is_null() || len <= 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pciBusId is NULL or len is not positive"));
    }
    let text = match d.runtime()?.info().pci {
        Some(p) => format!("{:08X}:{:02X}:{:02X}.{:X}", p.domain, p.bus, p.device, p.function),
        None => "00000000:00:00.0".to_string(),
    };
    // SAFETY: `bus_id` holds `len` writable bytes per the caller.
    unsafe { copy_c_string(bus_id, len as usize, text.as_bytes()) };
    Ok(())
}

/// `cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)`.
///
/// # Safety
/// `pi` is NULL or writable.
pub unsafe fn device_get_attribute(pi: *mut c_int, attrib: c_int, dev: CUdevice) -> CuResult<()> {
    let d = driver::device(dev)?;
    if pi.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pi is NULL"));
    }
    let value = attribute(d, attrib)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(pi, value) }
}

/// Largest `CUdevice_attribute` value this library answers (CUDA 13.5's last,
/// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_LOCALIZED_MEMORY_SUPPORTED`;
/// cudart 13.5 reads them all at start-up).
const LAST_KNOWN_ATTRIBUTE: c_int = 161;

/// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR`.
pub const ATTR_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
/// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR`.
pub const ATTR_COMPUTE_CAPABILITY_MINOR: c_int = 76;

/// Shared memory a CUDA block gets without opting in (48 KiB on every NVIDIA GPU).
pub const DEFAULT_SHARED_PER_BLOCK: u32 = 48 * 1024;

/// Whether blocks may have more shared memory than the device's Workgroup
/// memory: the runtime keeps the rest in device memory unless
/// `PTXVK_SHARED_SPILL=0`.
pub fn shared_spill() -> bool {
    !std::env::var(ptxvk_runtime::instance::SHARED_SPILL_ENV).is_ok_and(|v| v == "0")
}

/// The shared memory of an NVIDIA GPU of compute capability `cc`: the most
/// a block may opt in to, and the most per multiprocessor (bytes; the CUDA
/// programming guide's "Technical Specifications per Compute Capability").
pub fn architecture_shared(cc: (i32, i32)) -> (u32, u32) {
    const K: u32 = 1024;
    match cc {
        (5, 2) | (6, 1) => (48 * K, 96 * K),
        (..=6, _) => (48 * K, 64 * K),
        (7, 5) => (64 * K, 64 * K),
        (7, _) => (96 * K, 96 * K),
        (8, 0) | (8, 7) => (163 * K, 164 * K),
        (8, _) => (99 * K, 100 * K),
        (9..=11, _) => (227 * K, 228 * K),
        _ => (99 * K, 100 * K),
    }
}

/// Shared memory per block without opting in: 48 KiB (on a device with
/// less Workgroup memory too, unless spilling is off: then the device's).
pub fn shared_per_block(info: &DeviceInfo) -> u32 {
    if shared_spill() {
        DEFAULT_SHARED_PER_BLOCK
    } else {
        info.max_shared_bytes.min(DEFAULT_SHARED_PER_BLOCK)
    }
}

/// The most shared memory a block may opt in to, and the most per
/// multiprocessor: the reported architecture's (or the device's Workgroup
/// memory, when spilling is off).
pub fn shared_limits(info: &DeviceInfo) -> CuResult<(u32, u32)> {
    if shared_spill() {
        // The programs' capability for every caller, libraries included:
        // what a block may really have here (13.0 has no entry of its own).
        Ok(architecture_shared(driver::driver()?.compute_capability))
    } else {
        Ok((info.max_shared_bytes, info.max_shared_bytes))
    }
}

fn to_int(v: impl TryInto<c_int>) -> c_int {
    v.try_into().unwrap_or(c_int::MAX)
}

/// The value of `CUdevice_attribute` `attrib` (numbering of `cuda.h`).
///
/// Limits come from the Vulkan device; features this library does not offer
/// (concurrent managed access, multi-device cooperative launch, ...) report 0; other
/// properties that Vulkan does not expose report typical values of an sm_80
/// part. An attribute number outside the known range is
/// `CUDA_ERROR_INVALID_VALUE`.
fn attribute(d: &Device, attrib: c_int) -> CuResult<c_int> {
    if attrib == ATTR_COMPUTE_CAPABILITY_MAJOR || attrib == ATTR_COMPUTE_CAPABILITY_MINOR {
        let (ma, mi) = driver::reported_compute_capability()?;
        return Ok(if attrib == ATTR_COMPUTE_CAPABILITY_MAJOR { ma } else { mi });
    }
    if !(1..=LAST_KNOWN_ATTRIBUTE).contains(&attrib) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown device attribute {attrib}")));
    }
    let info = d.runtime()?.info();
    let pci = info.pci;
    let v = match attrib {
        1 => to_int(info.max_threads_per_block), // MAX_THREADS_PER_BLOCK
        2..=4 => to_int(info.max_block_dim[(attrib - 2) as usize]), // MAX_BLOCK_DIM_X/Y/Z
        5..=7 => to_int(info.max_grid_dim[(attrib - 5) as usize]), // MAX_GRID_DIM_X/Y/Z
        8 => to_int(shared_per_block(info)),     // MAX_SHARED_MEMORY_PER_BLOCK
        9 => 65536,                              // TOTAL_CONSTANT_MEMORY
        10 => 32,                                // WARP_SIZE
        11 => c_int::MAX,                        // MAX_PITCH
        12 => 65536,                             // MAX_REGISTERS_PER_BLOCK
        13 => 1_410_000,                         // CLOCK_RATE (kHz)
        14 => 512,                               // TEXTURE_ALIGNMENT
        15 => 1,                                 // GPU_OVERLAP
        16 => to_int(info.multiprocessor_count.max(1)), // MULTIPROCESSOR_COUNT
        17 => 0,                                 // KERNEL_EXEC_TIMEOUT
        18 => c_int::from(info.device_type == DeviceType::IntegratedGpu), // INTEGRATED
        19 => 1,                                 // CAN_MAP_HOST_MEMORY
        20 => 0,                                 // COMPUTE_MODE (default)
        30 => 512,                               // SURFACE_ALIGNMENT
        31 => 1,                                 // CONCURRENT_KERNELS
        32 => 0,                                 // ECC_ENABLED
        33 => pci.map_or(0, |p| to_int(p.bus)),  // PCI_BUS_ID
        34 => pci.map_or(0, |p| to_int(p.device)), // PCI_DEVICE_ID
        35 => 0,                                 // TCC_DRIVER
        36 => 1_215_000,                         // MEMORY_CLOCK_RATE (kHz)
        37 => 256,                               // GLOBAL_MEMORY_BUS_WIDTH
        38 => 4 * 1024 * 1024,                   // L2_CACHE_SIZE
        39 => 2048,                              // MAX_THREADS_PER_MULTIPROCESSOR
        40 => 1,                                 // ASYNC_ENGINE_COUNT
        41 => 1,                                 // UNIFIED_ADDRESSING
        21..=29 | 42..=49 | 52..=74 | 77 => texture_limit(attrib),
        50 => pci.map_or(0, |p| to_int(p.domain)),          // PCI_DOMAIN_ID
        51 => 32,                                           // TEXTURE_PITCH_ALIGNMENT
        79 | 80 => 1,                                       // GLOBAL/LOCAL_L1_CACHE_SUPPORTED
        81 => to_int(shared_limits(info)?.1),               // MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
        82 => 65536,                                        // MAX_REGISTERS_PER_MULTIPROCESSOR
        83 => c_int::from(d.runtime()?.supports_managed()), // MANAGED_MEMORY
        87 => 2,                                            // SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO
        95 => c_int::from(info.cooperative_launch),         // COOPERATIVE_LAUNCH
        97 => to_int(shared_limits(info)?.0),               // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
        99 => 1,                                            // HOST_REGISTER_SUPPORTED
        113 => c_int::from(d.runtime()?.info().host_import_alignment.is_some()), // READ_ONLY_HOST_REGISTER_SUPPORTED
        115 => 1,                                           // MEMORY_POOLS_SUPPORTED (mempool.rs)
        106 => 32,                                          // MAX_BLOCKS_PER_MULTIPROCESSOR
        // IPC_EVENT_SUPPORTED: what cuda.h tells programs to test for cuIpc* (memory and events).
        125 => c_int::from(info.supports_ipc_memory),
        126 => 1,        // MEM_SYNC_DOMAIN_COUNT
        131 | 134 => -1, // NUMA_ID, HOST_NUMA_ID
        // GPU_PCI_DEVICE_ID: "the combined 16-bit PCI device ID and 16-bit PCI
        // vendor ID" (Vulkan's deviceID and vendorID), device ID high.
        139 => ((info.device_id & 0xffff) << 16 | (info.vendor_id & 0xffff)) as c_int,
        149 => 1,                                        // LOCALITY_DOMAIN_COUNT
        157 => to_int(info.multiprocessor_count.max(1)), // LOCALITY_DOMAIN_MULTIPROCESSOR_COUNT
        // TENSOR_MAP_LARGE_TENSOR_MIN_SIZE: "devices where allocation-class
        // selection is a no-op report INT_MAX".
        160 => c_int::MAX,
        // Multi-device cooperative and cluster launch, pool IPC handle
        // types, VMM, ...: not offered.
        _ => 0,
    };
    Ok(v)
}

/// Texture and surface size limits (attributes 21-29, 42-49, 52-74, 77):
/// those NVIDIA's driver reports for compute capability 8.x (the CUDA C++
/// Programming Guide's technical specifications). Textures and surfaces
/// are a software unit over device memory here (`docs/textures.md`), so
/// `cuArray3DCreate` takes these sizes and more; reporting NVIDIA's values
/// keeps clients that size their arrays by them on the sizes they use on a GPU.
fn texture_limit(attrib: c_int) -> c_int {
    match attrib {
        21 | 22 | 56 | 70 => 131072, // TEXTURE1D/2D_WIDTH, SURFACE2D_WIDTH, TEXTURE2D_LINEAR_WIDTH
        23 | 57 => 65536,            // TEXTURE2D_HEIGHT, SURFACE2D_HEIGHT
        24..=26 | 58..=60 => 16384,  // TEXTURE3D_*, SURFACE3D_*
        29 | 43 | 62 | 65 => 2048,   // 2D/1D layered texture and surface layers
        44 => 1,                     // CAN_TEX2D_GATHER (tld4 is offered)
        47 | 48 => 8192,             // TEXTURE3D_WIDTH/HEIGHT_ALTERNATE
        49 => 32768,                 // TEXTURE3D_DEPTH_ALTERNATE
        54 | 68 => 2046,             // cubemap layered texture and surface layers
        69 => 1 << 28,               // TEXTURE1D_LINEAR_WIDTH
        71 => 65000,                 // TEXTURE2D_LINEAR_HEIGHT
        72 => 2_097_120,             // TEXTURE2D_LINEAR_PITCH
        // TEXTURE2D_LAYERED_WIDTH/HEIGHT, TEXTURE1D_LAYERED_WIDTH,
        // TEXTURE2D_GATHER_*, TEXTURECUBEMAP_*, SURFACE1D_WIDTH,
        // SURFACE1D/2D_LAYERED_*, SURFACECUBEMAP_*, mipmapped widths and heights.
        _ => 32768,
    }
}

/// `CUdevprop`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct DevProp {
    max_threads_per_block: c_int,
    max_threads_dim: [c_int; 3],
    max_grid_size: [c_int; 3],
    shared_mem_per_block: c_int,
    total_constant_memory: c_int,
    simd_width: c_int,
    mem_pitch: c_int,
    regs_per_block: c_int,
    clock_rate: c_int,
    texture_align: c_int,
}

/// `cuDeviceGetProperties(CUdevprop *prop, CUdevice dev)` (deprecated): the
/// same values as the corresponding attributes.
///
/// # Safety
/// `prop` is NULL or writable.
pub unsafe fn device_get_properties(prop: *mut DevProp, dev: CUdevice) -> CuResult<()> {
    let d = driver::device(dev)?;
    if prop.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("prop is NULL"));
    }
    let a = |attrib| attribute(d, attrib);
    let p = DevProp {
        max_threads_per_block: a(1)?,
        max_threads_dim: [a(2)?, a(3)?, a(4)?],
        max_grid_size: [a(5)?, a(6)?, a(7)?],
        shared_mem_per_block: a(8)?,
        total_constant_memory: a(9)?,
        simd_width: a(10)?,
        mem_pitch: a(11)?,
        regs_per_block: a(12)?,
        clock_rate: a(13)?,
        texture_align: a(14)?,
    };
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(prop, p) }
}

/// `cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)`:
/// always 0 (Vulkan devices do not share memory here).
///
/// # Safety
/// `can_access` is NULL or writable.
pub unsafe fn device_can_access_peer(can_access: *mut c_int, dev: CUdevice, peer: CUdevice) -> CuResult<()> {
    driver::device(dev)?;
    driver::device(peer)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(can_access, 0) }
}

/// `cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attrib, CUdevice
/// srcDevice, CUdevice dstDevice)`: 0 for every attribute; "CUDA_ERROR_INVALID_DEVICE"
/// if both are the same device.
///
/// # Safety
/// `value` is NULL or writable.
pub unsafe fn device_get_p2p_attribute(value: *mut c_int, attrib: c_int, src: CUdevice, dst: CUdevice) -> CuResult<()> {
    driver::device(src)?;
    driver::device(dst)?;
    if src == dst {
        return Err(CuError::CUDA_ERROR_INVALID_DEVICE.because("source and destination are the same device"));
    }
    if !(1..=5).contains(&attrib) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown P2P attribute {attrib}")));
    }
    // SAFETY: forwarded caller contract.
    unsafe { write_out(value, 0) }
}

/// `cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)`: matches
/// `[domain]:[bus]:[device].[function]` (hex) against every device's
/// `cuDeviceGetPCIBusId`; `CUDA_ERROR_INVALID_DEVICE` if none matches.
///
/// # Safety
/// `dev` is NULL or writable; `bus_id` is NULL or NUL-terminated.
pub unsafe fn device_get_by_pci_bus_id(dev: *mut CUdevice, bus_id: *const c_char) -> CuResult<()> {
    let drv = driver::driver()?;
    if dev.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("dev is NULL"));
    }
    // SAFETY: NUL-terminated per the caller.
    let wanted = parse_bus_id(unsafe { crate::ffi::c_str(bus_id) }?)
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because("malformed PCI bus id"))?;
    for d in &drv.devices {
        let have = d.runtime()?.info().pci.map_or((0, 0, 0, 0), |p| (p.domain & 0xffff, p.bus, p.device, p.function));
        if have == wanted {
            // SAFETY: checked non-null; writable per the caller.
            return unsafe { write_out(dev, d.ordinal) };
        }
    }
    Err(CuError::CUDA_ERROR_INVALID_DEVICE.because("no device has that PCI bus id"))
}

/// Parses `domain:bus:device.function` or `bus:device.function` (hex).
fn parse_bus_id(text: &str) -> Option<(u32, u32, u32, u32)> {
    let (head, func) = text.trim().rsplit_once('.')?;
    let parts: Vec<&str> = head.split(':').collect();
    let hex = |s: &str| u32::from_str_radix(s, 16).ok();
    let (domain, bus, device) = match parts[..] {
        [d, b, v] => (hex(d)? & 0xffff, hex(b)?, hex(v)?),
        [b, v] => (0, hex(b)?, hex(v)?),
        _ => return None,
    };
    Some((domain, bus, device, hex(func)?))
}

/// `CU_DEV_RESOURCE_TYPE_SM`.
const DEV_RESOURCE_TYPE_SM: c_int = 1;
/// Bytes of a `CUdevResource` (`cuda.h` 12.4 to 13.x): the type, 92 bytes of
/// padding, a 40-byte union (48 before 13.0, with no pointer after it) and
/// the next-resource pointer.
const DEV_RESOURCE_BYTES: usize = 144;
/// Where the union (for an SM resource, `CUdevSmResource`) begins.
const DEV_RESOURCE_UNION: usize = 96;

/// Fills `resource` with the SM resource of the device `d`: all of its
/// multiprocessors (what attribute 16 reports), partitions of at least one,
/// no flags; there are no green contexts here, so a device, a context and a
/// stream all have the whole device. Only `CU_DEV_RESOURCE_TYPE_SM` exists
/// (`CUDA_ERROR_INVALID_RESOURCE_TYPE` otherwise).
///
/// # Safety
/// `resource` is NULL or writable for a `CUdevResource`.
pub unsafe fn write_sm_resource(d: &Device, resource: *mut c_void, kind: c_int) -> CuResult<()> {
    if resource.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("resource is NULL"));
    }
    if kind != DEV_RESOURCE_TYPE_SM {
        return Err(CuError::CUDA_ERROR_INVALID_RESOURCE_TYPE
            .because(format!("resource type {kind}: only CU_DEV_RESOURCE_TYPE_SM (1) is offered")));
    }
    let sm_count = d.runtime()?.info().multiprocessor_count.max(1);
    let mut bytes = [0u8; DEV_RESOURCE_BYTES];
    bytes[..4].copy_from_slice(&(DEV_RESOURCE_TYPE_SM as u32).to_le_bytes());
    let sm = &mut bytes[DEV_RESOURCE_UNION..];
    // smCount, minSmPartitionSize, smCoscheduledAlignment, flags.
    for (i, v) in [sm_count, 1, 1, 0].into_iter().enumerate() {
        sm[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
    }
    // SAFETY: writable for a `CUdevResource` per the caller; bytes, so no
    // alignment is needed.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), resource.cast::<u8>(), DEV_RESOURCE_BYTES) };
    Ok(())
}

/// `cuDeviceGetDevResource(CUdevice device, CUdevResource *resource,
/// CUdevResourceType type)` (see [`write_sm_resource`]).
///
/// # Safety
/// `resource` is NULL or writable for a `CUdevResource`.
pub unsafe fn device_get_dev_resource(dev: CUdevice, resource: *mut c_void, kind: c_int) -> CuResult<()> {
    let d = driver::device(dev)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_sm_resource(d, resource, kind) }
}
