//! The logical device: capability probing ([`DeviceInfo`]), feature enabling,
//! the compute queue and the memory allocator.

use std::ffi::CStr;
use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex, MutexGuard};

use ash::vk;
use gpu_allocator::vulkan::{Allocator, AllocatorCreateDesc};
use ptxvk_translator::{TargetEnv, WarpPath};

use crate::error::{map_allocator, map_create, Error, Result};
use crate::instance::{version_string, Candidate, DeviceSelector, DeviceType, Instance};

/// PCI location of a device (from `VK_EXT_pci_bus_info`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PciBusInfo {
    /// PCI domain.
    pub domain: u32,
    /// PCI bus.
    pub bus: u32,
    /// PCI device.
    pub device: u32,
    /// PCI function.
    pub function: u32,
}

/// What the selected device can do, queried once at context creation.
///
/// Limits are expressed the way CUDA reports them; each feature flag says
/// whether the corresponding Vulkan feature was *enabled* on the device.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    /// `VkPhysicalDeviceProperties::deviceName`.
    pub name: String,
    /// `VkPhysicalDeviceIDProperties::deviceUUID`.
    pub uuid: [u8; 16],
    /// The kind of device.
    pub device_type: DeviceType,
    /// PCI vendor id.
    pub vendor_id: u32,
    /// Vendor-specific device id.
    pub device_id: u32,
    /// Vulkan API version in use (packed, at most 1.3).
    pub api_version: u32,
    /// Driver version (packed, vendor-specific encoding).
    pub driver_version: u32,
    /// `VkPhysicalDeviceVulkan12Properties::driverName` (e.g. "llvmpipe").
    pub driver_name: String,
    /// The SPIR-V environment modules are translated for.
    pub target_env: TargetEnv,
    /// Most threads in one block: `min(maxComputeWorkGroupInvocations,
    /// maxComputeWorkGroupSize[0])` rounded down to a multiple of 32.
    pub max_threads_per_block: u32,
    /// Largest block extent per dimension.
    pub max_block_dim: [u32; 3],
    /// Largest grid extent per dimension (grids are split into several dispatches).
    pub max_grid_dim: [u32; 3],
    /// `maxComputeWorkGroupCount`: the largest single dispatch.
    pub max_dispatch: [u32; 3],
    /// Largest `VkBuffer`, hence largest allocation (`maxBufferSize` from
    /// maintenance4; `u64::MAX` when the device does not say).
    pub max_buffer_size: u64,
    /// `maxComputeSharedMemorySize`: static plus dynamic `.shared` bytes per block.
    pub max_shared_bytes: u32,
    /// `maxPushConstantsSize`.
    pub max_push_constant_bytes: u32,
    /// Subgroup size kernels run with (`VkPhysicalDeviceVulkan11Properties::subgroupSize`,
    /// or the required size when [`DeviceInfo::required_subgroup_size`] is set).
    pub subgroup_size: u32,
    /// Subgroup size pipelines are created with (`VK_EXT_subgroup_size_control`,
    /// core in 1.3), when the device can run compute with 32-wide subgroups.
    pub required_subgroup_size: Option<u32>,
    /// `computeFullSubgroups` (`VK_EXT_subgroup_size_control`, core in 1.3):
    /// pipelines with a required subgroup size also require full subgroups.
    pub supports_compute_full_subgroups: bool,
    /// `maxComputeWorkgroupSubgroups`: with a required subgroup size `s`, a
    /// block of more than `s * max_compute_workgroup_subgroups` threads runs
    /// with the driver's choice of size.
    pub max_compute_workgroup_subgroups: u32,
    /// How kernels run 32-lane warps on this device (see the `warp` module:
    /// native with 32-wide subgroups, slice with 64/128, emulated otherwise).
    pub warp_path: WarpPath,
    /// Every warp path the device can run, best first (emulated always;
    /// see [`crate::Context::load_module_with_warp_path`]).
    pub warp_paths: Vec<WarpPath>,
    /// Size of the largest device-local memory heap.
    pub total_memory: u64,
    /// Best guess at the number of multiprocessors (`VK_NV_shader_sm_builtins`,
    /// the host's thread count for CPU devices, else a guess).
    pub multiprocessor_count: u32,
    /// Workgroups of one dispatch that are known to run at the same time,
    /// each making progress while the others spin (what a cooperative launch
    /// needs, see `ptxvk_translator::abi::grid`): llvmpipe's compute thread
    /// pool size (`llvmpipe_threads`); 1 on other devices, where Vulkan
    /// promises nothing.
    pub coresident_workgroups: u32,
    /// Whether cooperative launches are offered: on devices whose
    /// [`DeviceInfo::coresident_workgroups`] is known (llvmpipe).
    pub cooperative_launch: bool,
    /// PCI location, when `VK_EXT_pci_bus_info` is available.
    pub pci: Option<PciBusInfo>,
    /// Whether translated modules emulate a fused multiply-add (the driver's
    /// `Fma` is not fused; found by a probe kernel at context creation).
    pub emulate_fma: bool,
    /// `shaderFloat64` (Vulkan 1.0).
    pub supports_f64: bool,
    /// `shaderDenormPreserveFloat32` (Vulkan 1.2 float controls): modules
    /// ask for f32 subnormals to be kept.
    pub denorm_preserve_f32: bool,
    /// `shaderDenormPreserveFloat64`: modules ask for f64 subnormals to be
    /// kept. Without it the driver's default applies (lavapipe reports
    /// false for both yet keeps subnormals in add, sub, mul, div and sqrt).
    pub denorm_preserve_f64: bool,
    /// `shaderSignedZeroInfNanPreserveFloat32`: modules ask for IEEE signed
    /// zeros, infinities and NaNs in f32 arithmetic.
    pub signed_zero_inf_nan_f32: bool,
    /// `shaderSignedZeroInfNanPreserveFloat64`: the same for f64.
    pub signed_zero_inf_nan_f64: bool,
    /// `shaderSignedZeroInfNanPreserveFloat16`: the same for f16.
    pub signed_zero_inf_nan_f16: bool,
    /// Subnormal f32 results survive `mul`/`add` as modules are compiled
    /// for this device (a probe kernel at context creation; `true` before).
    pub keeps_f32_subnormals: bool,
    /// The same for f64.
    pub keeps_f64_subnormals: bool,
    /// Whether the driver's f64 division and square root round correctly,
    /// so that translated modules use them as they are (a probe kernel at
    /// context creation, `PTXVK_NATIVE_F64_DIV=0` to keep the exact
    /// correction; see `ptxvk_translator::Options::correct_f64_div_sqrt`).
    pub correct_f64_div_sqrt: bool,
    /// `shaderInt64` (Vulkan 1.0).
    pub supports_i64: bool,
    /// `shaderInt16` (Vulkan 1.0).
    pub supports_i16: bool,
    /// `shaderInt8` (Vulkan 1.2).
    pub supports_i8: bool,
    /// `shaderFloat16` (Vulkan 1.2).
    pub supports_f16: bool,
    /// `storageBuffer8BitAccess` and `uniformAndStorageBuffer8BitAccess` (Vulkan 1.2).
    pub supports_storage_8bit: bool,
    /// `storageBuffer16BitAccess` (Vulkan 1.1).
    pub supports_storage_16bit: bool,
    /// `storagePushConstant8` (Vulkan 1.2).
    pub supports_push_constant_8bit: bool,
    /// `storagePushConstant16` (Vulkan 1.1).
    pub supports_push_constant_16bit: bool,
    /// `vulkanMemoryModel` and `vulkanMemoryModelDeviceScope` (Vulkan 1.2).
    pub supports_vulkan_memory_model: bool,
    /// `scalarBlockLayout` (Vulkan 1.2).
    pub supports_scalar_block_layout: bool,
    /// `variablePointers` and `variablePointersStorageBuffer` (Vulkan 1.1).
    pub supports_variable_pointers: bool,
    /// `shaderSubgroupExtendedTypes` (Vulkan 1.2).
    pub supports_subgroup_extended_types: bool,
    /// Subgroup ballot operations in compute shaders
    /// (`subgroupSupportedOperations` has `BALLOT`, `subgroupSupportedStages`
    /// has `COMPUTE`).
    pub supports_subgroup_ballot: bool,
    /// `shaderBufferInt64Atomics` (Vulkan 1.2).
    pub supports_buffer_int64_atomics: bool,
    /// `shaderSharedInt64Atomics` (Vulkan 1.2).
    pub supports_shared_int64_atomics: bool,
    /// `shaderBufferFloat32AtomicAdd` (`VK_EXT_shader_atomic_float`).
    pub supports_buffer_f32_atomic_add: bool,
    /// `shaderSharedFloat32AtomicAdd` (`VK_EXT_shader_atomic_float`).
    pub supports_shared_f32_atomic_add: bool,
    /// `shaderBufferFloat64AtomicAdd` (`VK_EXT_shader_atomic_float`).
    pub supports_buffer_f64_atomic_add: bool,
    /// `shaderSharedFloat64AtomicAdd` (`VK_EXT_shader_atomic_float`).
    pub supports_shared_f64_atomic_add: bool,
    /// `shaderBufferFloat32AtomicMinMax` (`VK_EXT_shader_atomic_float2`).
    pub supports_buffer_f32_atomic_min_max: bool,
    /// `shaderSharedFloat32AtomicMinMax` (`VK_EXT_shader_atomic_float2`).
    pub supports_shared_f32_atomic_min_max: bool,
    /// `shaderDeviceClock` or `shaderSubgroupClock` (`VK_KHR_shader_clock`).
    pub supports_shader_clock: bool,
    /// Nanoseconds per tick of the queue's timestamps (`timestampPeriod`), or
    /// `None` when the queue cannot write timestamps (`timestampValidBits`
    /// 0); event times then come from the host clock.
    pub timestamp_period_ns: Option<f64>,
    /// `subgroupSizeControl` (`VK_EXT_subgroup_size_control`, core in 1.3).
    pub supports_subgroup_size_control: bool,
    /// `maintenance4` (`VK_KHR_maintenance4`, core in 1.3): allows the
    /// `LocalSizeId` execution mode.
    pub supports_maintenance4: bool,
    /// Whether the Khronos validation layer is active for this context.
    pub validation: bool,
    /// `minImportedHostPointerAlignment` when host memory can be imported
    /// as device memory (`VK_EXT_external_memory_host`): what
    /// [`crate::Context::register_host`] needs; `None` without it.
    pub host_import_alignment: Option<u64>,
    /// Whether user allocations can be shared with other processes (CUDA
    /// IPC): `VK_KHR_external_memory_fd` is enabled, buffers of the
    /// allocation usage can be exported and imported as opaque file
    /// descriptors, and `PTXVK_IPC` is not `0`. [`crate::Context::alloc`]
    /// allocations are then exportable `VkDeviceMemory` objects of their
    /// own, as long as a quarter of the process's descriptor limit is not
    /// used up by them (lavapipe holds a descriptor per memory object; the
    /// soft `RLIMIT_NOFILE` is raised to the hard one at device creation);
    /// later ones are pooled and cannot be exported.
    pub supports_ipc_memory: bool,
}

/// Environment variable that turns exportable (IPC-capable) allocations off
/// when set to `0`: allocations are then suballocated by gpu-allocator and
/// cannot be shared with other processes.
pub const IPC_ENV: &str = "PTXVK_IPC";

/// The logical device with its queue and allocator. Every other Vulkan object
/// holds an `Arc<Device>`, so the device is destroyed last.
pub(crate) struct Device {
    pub(crate) raw: ash::Device,
    pub(crate) queue: vk::Queue,
    pub(crate) queue_family: u32,
    pub(crate) info: DeviceInfo,
    allocator: ManuallyDrop<Mutex<Allocator>>,
    /// `VK_EXT_external_memory_host`'s functions, when enabled.
    pub(crate) host_memory: Option<ash::ext::external_memory_host::Device>,
    /// `VK_KHR_external_memory_fd`, when [`DeviceInfo::supports_ipc_memory`].
    pub(crate) external_memory_fd: Option<ash::khr::external_memory_fd::Device>,
    /// Live shareable memory objects (exported or imported): drivers such as
    /// lavapipe hold a file descriptor for each.
    pub(crate) shareable_live: std::sync::atomic::AtomicU64,
    /// How many of them may be live before new allocations fall back to
    /// pooled, unshareable memory (a quarter of the descriptor limit, at most
    /// half of `maxMemoryAllocationCount`).
    pub(crate) shareable_budget: u64,
    /// Whether exportable (opaque-fd) buffers need memory of their own
    /// (`VK_EXTERNAL_MEMORY_FEATURE_DEDICATED_ONLY_BIT`): then no
    /// allocation is carved from a shared chunk.
    pub(crate) opaque_fd_dedicated_only: bool,
    /// Memory types of the physical device.
    pub(crate) memory_types: Vec<vk::MemoryType>,
    /// The persistent cache (`PTXVK_CACHE`), when on.
    pub(crate) disk_cache: Option<crate::disk_cache::DiskCache>,
    /// The device's `VkPipelineCache`, which every module's pipelines go
    /// through: filled from the persistent cache at creation, written back
    /// there (see [`Device::save_pipeline_cache`]).
    pub(crate) pipeline_cache: vk::PipelineCache,
    /// The size of the pipeline cache data last written (0: none yet), and when.
    pipeline_cache_saved: Mutex<(usize, Option<std::time::Instant>)>,
    /// Declared last: dropped after the device is destroyed.
    pub(crate) instance: Arc<Instance>,
}

impl Drop for Device {
    fn drop(&mut self) {
        self.save_pipeline_cache(true);
        // SAFETY: every child object holds an `Arc<Device>` and has therefore
        // been destroyed (no pipeline is being created from the pipeline
        // cache); the allocator frees its memory blocks before the
        // device goes, and is never used again.
        unsafe {
            let _ = self.raw.device_wait_idle();
            self.raw.destroy_pipeline_cache(self.pipeline_cache, None);
            ManuallyDrop::drop(&mut self.allocator);
            self.raw.destroy_device(None);
        }
    }
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device").field("name", &self.info.name).finish_non_exhaustive()
    }
}

impl Device {
    /// Writes the pipeline cache's data to the persistent cache when it
    /// grew, and (unless `now`) a second or more after the last write: a
    /// program that compiles many pipelines writes it a few times, not once
    /// a pipeline. Best effort.
    pub(crate) fn save_pipeline_cache(&self, now: bool) {
        let Some(disk) = &self.disk_cache else {
            return;
        };
        let mut saved = self.pipeline_cache_saved.lock().unwrap_or_else(|p| p.into_inner());
        if !now && saved.1.is_some_and(|t| t.elapsed().as_secs_f64() < 1.0) {
            return;
        }
        // SAFETY: the pipeline cache is live; Vulkan synchronises access to it.
        let Ok(data) = (unsafe { self.raw.get_pipeline_cache_data(self.pipeline_cache) }) else {
            return;
        };
        if data.len() <= saved.0 {
            return;
        }
        disk.put("p", &crate::disk_cache::pipeline_cache_key(&self.info), &data);
        *saved = (data.len(), Some(std::time::Instant::now()));
    }

    /// The allocator, locked. Lock order: context state, then allocator.
    pub(crate) fn allocator(&self) -> MutexGuard<'_, Allocator> {
        // A panic while holding the allocator lock leaves it consistent enough
        // to keep freeing memory, so poisoning is ignored.
        self.allocator.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates the device `selector` picks.
    pub(crate) fn new(selector: DeviceSelector) -> Result<Arc<Device>> {
        let instance = Instance::new(true)?;
        let mut candidates = instance.candidates()?;
        if candidates.is_empty() {
            return Err(Error::NoDevice);
        }
        let index = match selector {
            DeviceSelector::Default => 0,
            DeviceSelector::Index(i) => i,
        };
        if index >= candidates.len() {
            return Err(Error::InvalidValue(format!(
                "device index {index} out of range ({} usable devices)",
                candidates.len()
            )));
        }
        let candidate = candidates.swap_remove(index);
        create_device(instance, candidate)
    }
}

/// Features queried from (and then enabled on) a physical device.
#[derive(Default)]
struct Features<'a> {
    core: vk::PhysicalDeviceFeatures,
    v11: vk::PhysicalDeviceVulkan11Features<'a>,
    v12: vk::PhysicalDeviceVulkan12Features<'a>,
    v13: vk::PhysicalDeviceVulkan13Features<'a>,
    size_control: vk::PhysicalDeviceSubgroupSizeControlFeaturesEXT<'a>,
    atomic_float: vk::PhysicalDeviceShaderAtomicFloatFeaturesEXT<'a>,
    atomic_float2: vk::PhysicalDeviceShaderAtomicFloat2FeaturesEXT<'a>,
    clock: vk::PhysicalDeviceShaderClockFeaturesKHR<'a>,
    maintenance4: vk::PhysicalDeviceMaintenance4Features<'a>,
}

/// Which optional structures a device supports.
struct Available {
    v13: bool,
    size_control_ext: bool,
    maintenance4_ext: bool,
    atomic_float: bool,
    atomic_float2: bool,
    clock: bool,
    pci: bool,
    sm_builtins: bool,
    portability_subset: bool,
    host_memory: bool,
    external_memory_fd: bool,
}

fn has_ext(exts: &[vk::ExtensionProperties], name: &CStr) -> bool {
    exts.iter().any(|e| e.extension_name_as_c_str().ok() == Some(name))
}

fn create_device(instance: Arc<Instance>, candidate: Candidate) -> Result<Arc<Device>> {
    let raw_instance = &instance.raw;
    let pd = candidate.physical;
    // SAFETY: `pd` was enumerated from this instance.
    let props = unsafe { raw_instance.get_physical_device_properties(pd) };
    let api_version = props.api_version.min(instance.api_version).min(vk::API_VERSION_1_3);
    // SAFETY: as above.
    let exts = unsafe { raw_instance.enumerate_device_extension_properties(pd) }.map_err(map_create)?;
    let avail = Available {
        v13: api_version >= vk::API_VERSION_1_3,
        size_control_ext: api_version < vk::API_VERSION_1_3 && has_ext(&exts, ash::ext::subgroup_size_control::NAME),
        maintenance4_ext: api_version < vk::API_VERSION_1_3 && has_ext(&exts, ash::khr::maintenance4::NAME),
        atomic_float: has_ext(&exts, ash::ext::shader_atomic_float::NAME),
        atomic_float2: has_ext(&exts, ash::ext::shader_atomic_float2::NAME),
        clock: has_ext(&exts, ash::khr::shader_clock::NAME),
        pci: has_ext(&exts, ash::ext::pci_bus_info::NAME),
        sm_builtins: has_ext(&exts, ash::nv::shader_sm_builtins::NAME),
        portability_subset: has_ext(&exts, ash::khr::portability_subset::NAME),
        host_memory: has_ext(&exts, ash::ext::external_memory_host::NAME),
        external_memory_fd: has_ext(&exts, ash::khr::external_memory_fd::NAME)
            && (api_version >= vk::API_VERSION_1_1 || has_ext(&exts, ash::khr::external_memory::NAME)),
    };

    // ---- query features ----
    let mut q = Features::default();
    {
        let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut q.v11).push_next(&mut q.v12);
        if avail.v13 {
            f2 = f2.push_next(&mut q.v13);
        }
        if avail.size_control_ext {
            f2 = f2.push_next(&mut q.size_control);
        }
        if avail.maintenance4_ext {
            f2 = f2.push_next(&mut q.maintenance4);
        }
        if avail.atomic_float {
            f2 = f2.push_next(&mut q.atomic_float);
        }
        if avail.atomic_float2 {
            f2 = f2.push_next(&mut q.atomic_float2);
        }
        if avail.clock {
            f2 = f2.push_next(&mut q.clock);
        }
        // SAFETY: the chain only holds structures the device's version or
        // extensions define; all of them outlive the call.
        unsafe { raw_instance.get_physical_device_features2(pd, &mut f2) };
        q.core = f2.features;
    }

    // ---- query properties ----
    let mut p11 = vk::PhysicalDeviceVulkan11Properties::default();
    let mut p12 = vk::PhysicalDeviceVulkan12Properties::default();
    let mut p13 = vk::PhysicalDeviceVulkan13Properties::default();
    let mut psize = vk::PhysicalDeviceSubgroupSizeControlPropertiesEXT::default();
    let mut ppci = vk::PhysicalDevicePCIBusInfoPropertiesEXT::default();
    let mut psm = vk::PhysicalDeviceShaderSMBuiltinsPropertiesNV::default();
    let mut pm4 = vk::PhysicalDeviceMaintenance4Properties::default();
    let mut phost = vk::PhysicalDeviceExternalMemoryHostPropertiesEXT::default();
    let limits;
    {
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut p11).push_next(&mut p12);
        if avail.v13 {
            p2 = p2.push_next(&mut p13);
        }
        if avail.size_control_ext {
            p2 = p2.push_next(&mut psize);
        }
        if avail.maintenance4_ext {
            p2 = p2.push_next(&mut pm4);
        }
        if avail.pci {
            p2 = p2.push_next(&mut ppci);
        }
        if avail.sm_builtins {
            p2 = p2.push_next(&mut psm);
        }
        if avail.host_memory {
            p2 = p2.push_next(&mut phost);
        }
        // SAFETY: as for the feature query.
        unsafe { raw_instance.get_physical_device_properties2(pd, &mut p2) };
        limits = p2.properties.limits;
    }
    let (min_sg, max_sg, sg_stages, max_wg_subgroups) = if avail.v13 {
        (
            p13.min_subgroup_size,
            p13.max_subgroup_size,
            p13.required_subgroup_size_stages,
            p13.max_compute_workgroup_subgroups,
        )
    } else {
        (
            psize.min_subgroup_size,
            psize.max_subgroup_size,
            psize.required_subgroup_size_stages,
            psize.max_compute_workgroup_subgroups,
        )
    };

    // ---- choose features to enable ----
    let on = |b: vk::Bool32| b != vk::FALSE;
    let mut e = Features::default();
    e.core.shader_int64 = q.core.shader_int64;
    e.core.shader_float64 = q.core.shader_float64;
    e.core.shader_int16 = q.core.shader_int16;
    e.v11.storage_buffer16_bit_access = q.v11.storage_buffer16_bit_access;
    e.v11.uniform_and_storage_buffer16_bit_access = q.v11.uniform_and_storage_buffer16_bit_access;
    e.v11.storage_push_constant16 = q.v11.storage_push_constant16;
    e.v11.variable_pointers_storage_buffer = q.v11.variable_pointers_storage_buffer;
    e.v11.variable_pointers =
        if on(q.v11.variable_pointers_storage_buffer) { q.v11.variable_pointers } else { vk::FALSE };
    e.v12.buffer_device_address = vk::TRUE;
    e.v12.shader_int8 = q.v12.shader_int8;
    e.v12.shader_float16 = q.v12.shader_float16;
    e.v12.storage_buffer8_bit_access = q.v12.storage_buffer8_bit_access;
    e.v12.uniform_and_storage_buffer8_bit_access = q.v12.uniform_and_storage_buffer8_bit_access;
    e.v12.storage_push_constant8 = q.v12.storage_push_constant8;
    e.v12.vulkan_memory_model = q.v12.vulkan_memory_model;
    e.v12.vulkan_memory_model_device_scope =
        if on(q.v12.vulkan_memory_model) { q.v12.vulkan_memory_model_device_scope } else { vk::FALSE };
    e.v12.shader_buffer_int64_atomics = q.v12.shader_buffer_int64_atomics;
    e.v12.shader_shared_int64_atomics = q.v12.shader_shared_int64_atomics;
    e.v12.scalar_block_layout = q.v12.scalar_block_layout;
    e.v12.shader_subgroup_extended_types = q.v12.shader_subgroup_extended_types;
    let (size_control, full_subgroups) = if avail.v13 {
        (q.v13.subgroup_size_control, q.v13.compute_full_subgroups)
    } else if avail.size_control_ext {
        (q.size_control.subgroup_size_control, q.size_control.compute_full_subgroups)
    } else {
        (vk::FALSE, vk::FALSE)
    };
    let maintenance4 = if avail.v13 {
        q.v13.maintenance4
    } else if avail.maintenance4_ext {
        q.maintenance4.maintenance4
    } else {
        vk::FALSE
    };
    e.v13.maintenance4 = maintenance4;
    e.maintenance4.maintenance4 = maintenance4;
    e.v13.subgroup_size_control = size_control;
    e.v13.compute_full_subgroups = full_subgroups;
    e.size_control.subgroup_size_control = size_control;
    e.size_control.compute_full_subgroups = full_subgroups;
    let af = &q.atomic_float;
    e.atomic_float.shader_buffer_float32_atomics = af.shader_buffer_float32_atomics;
    e.atomic_float.shader_buffer_float32_atomic_add = af.shader_buffer_float32_atomic_add;
    e.atomic_float.shader_buffer_float64_atomics = af.shader_buffer_float64_atomics;
    e.atomic_float.shader_buffer_float64_atomic_add = af.shader_buffer_float64_atomic_add;
    e.atomic_float.shader_shared_float32_atomics = af.shader_shared_float32_atomics;
    e.atomic_float.shader_shared_float32_atomic_add = af.shader_shared_float32_atomic_add;
    e.atomic_float.shader_shared_float64_atomics = af.shader_shared_float64_atomics;
    e.atomic_float.shader_shared_float64_atomic_add = af.shader_shared_float64_atomic_add;
    let af2 = &q.atomic_float2;
    e.atomic_float2.shader_buffer_float32_atomic_min_max = af2.shader_buffer_float32_atomic_min_max;
    e.atomic_float2.shader_shared_float32_atomic_min_max = af2.shader_shared_float32_atomic_min_max;
    e.atomic_float2.shader_buffer_float64_atomic_min_max = af2.shader_buffer_float64_atomic_min_max;
    e.atomic_float2.shader_shared_float64_atomic_min_max = af2.shader_shared_float64_atomic_min_max;
    e.clock.shader_subgroup_clock = q.clock.shader_subgroup_clock;
    e.clock.shader_device_clock = q.clock.shader_device_clock;

    // Where the subgroup size can vary (and SPIR-V 1.6 modules may vary by
    // default), ask for 32 so that a warp is a subgroup.
    let required_subgroup_size = (on(size_control)
        && sg_stages.contains(vk::ShaderStageFlags::COMPUTE)
        && min_sg <= 32
        && 32 <= max_sg
        && min_sg != max_sg)
        .then_some(32);

    // ---- extensions ----
    let mut ext_names: Vec<*const std::ffi::c_char> = Vec::new();
    if avail.size_control_ext && on(size_control) {
        ext_names.push(ash::ext::subgroup_size_control::NAME.as_ptr());
    }
    let use_m4_ext = avail.maintenance4_ext && on(maintenance4);
    if use_m4_ext {
        ext_names.push(ash::khr::maintenance4::NAME.as_ptr());
    }
    let use_af = avail.atomic_float
        && [
            af.shader_buffer_float32_atomics,
            af.shader_buffer_float32_atomic_add,
            af.shader_shared_float32_atomics,
            af.shader_shared_float32_atomic_add,
            af.shader_buffer_float64_atomics,
            af.shader_buffer_float64_atomic_add,
        ]
        .iter()
        .any(|&b| on(b));
    if use_af {
        ext_names.push(ash::ext::shader_atomic_float::NAME.as_ptr());
    }
    let use_af2 = avail.atomic_float2
        && (on(af2.shader_buffer_float32_atomic_min_max) || on(af2.shader_shared_float32_atomic_min_max));
    if use_af2 {
        ext_names.push(ash::ext::shader_atomic_float2::NAME.as_ptr());
    }
    let use_clock = avail.clock && (on(q.clock.shader_device_clock) || on(q.clock.shader_subgroup_clock));
    if use_clock {
        ext_names.push(ash::khr::shader_clock::NAME.as_ptr());
    }
    if avail.portability_subset {
        ext_names.push(ash::khr::portability_subset::NAME.as_ptr());
    }
    // Host memory imported as device memory (cuMemHostRegister with
    // DEVICEMAP); needs an alignment that is a power of two.
    let use_host_memory = avail.host_memory && phost.min_imported_host_pointer_alignment.is_power_of_two();
    if use_host_memory {
        ext_names.push(ash::ext::external_memory_host::NAME.as_ptr());
    }
    let ipc_memory = cfg!(unix)
        && avail.external_memory_fd
        && std::env::var(IPC_ENV).map_or(true, |v| v.trim() != "0")
        && opaque_fd_buffers_shareable(raw_instance, pd).is_some();
    let opaque_fd_dedicated_only = ipc_memory && opaque_fd_buffers_shareable(raw_instance, pd) == Some(true);
    if ipc_memory {
        ext_names.push(ash::khr::external_memory_fd::NAME.as_ptr());
        if api_version < vk::API_VERSION_1_1 {
            ext_names.push(ash::khr::external_memory::NAME.as_ptr());
        }
    }

    // ---- queue ----
    // SAFETY: `pd` was enumerated from this instance.
    let families = unsafe { raw_instance.get_physical_device_queue_family_properties(pd) };
    let queue_family = families
        .iter()
        .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE) && f.queue_count > 0)
        .ok_or_else(|| Error::Unsupported(format!("{}: no compute queue", candidate.name)))?
        as u32;
    let priorities = [1.0f32];
    let queue_info =
        [vk::DeviceQueueCreateInfo::default().queue_family_index(queue_family).queue_priorities(&priorities)];

    // ---- create ----
    let raw = {
        let mut f2 =
            vk::PhysicalDeviceFeatures2::default().features(e.core).push_next(&mut e.v11).push_next(&mut e.v12);
        if avail.v13 {
            f2 = f2.push_next(&mut e.v13);
        } else if avail.size_control_ext && on(size_control) {
            f2 = f2.push_next(&mut e.size_control);
        }
        if use_m4_ext {
            f2 = f2.push_next(&mut e.maintenance4);
        }
        if use_af {
            f2 = f2.push_next(&mut e.atomic_float);
        }
        if use_af2 {
            f2 = f2.push_next(&mut e.atomic_float2);
        }
        if use_clock {
            f2 = f2.push_next(&mut e.clock);
        }
        let create_info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queue_info)
            .enabled_extension_names(&ext_names)
            .push_next(&mut f2);
        // SAFETY: every feature enabled was reported supported; every
        // extension named is supported; all pointers outlive the call.
        unsafe { raw_instance.create_device(pd, &create_info, None) }.map_err(map_create)?
    };
    // SAFETY: the queue family and index were requested at device creation.
    let queue = unsafe { raw.get_device_queue(queue_family, 0) };

    // ---- allocator ----
    let allocator = match Allocator::new(&AllocatorCreateDesc {
        instance: raw_instance.clone(),
        device: raw.clone(),
        physical_device: pd,
        debug_settings: Default::default(),
        buffer_device_address: true,
        allocation_sizes: Default::default(),
    }) {
        Ok(a) => a,
        Err(err) => {
            // SAFETY: the device has no child objects yet.
            unsafe { raw.destroy_device(None) };
            return Err(map_allocator(err));
        }
    };

    // ---- info ----
    // SAFETY: `pd` was enumerated from this instance.
    let mem = unsafe { raw_instance.get_physical_device_memory_properties(pd) };
    let total_memory = mem.memory_heaps[..mem.memory_heap_count as usize]
        .iter()
        .filter(|h| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
        .map(|h| h.size)
        .max()
        .unwrap_or(0);
    let max_threads = limits.max_compute_work_group_invocations.min(limits.max_compute_work_group_size[0]) / 32 * 32;
    let driver_name = p12.driver_name_as_c_str().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let cpus = std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1);
    let lp_threads =
        (driver_name == "llvmpipe").then(|| llvmpipe_threads(cpus, std::env::var("LP_NUM_THREADS").ok().as_deref()));
    let multiprocessor_count = if avail.sm_builtins && psm.shader_sm_count > 0 {
        psm.shader_sm_count
    } else if let Some(n) = lp_threads {
        n
    } else if candidate.device_type == DeviceType::Cpu {
        cpus
    } else {
        16
    };
    let coresident_workgroups = lp_threads.unwrap_or(1);
    let warp_paths = crate::warp::possible(&crate::warp::SubgroupFacts {
        default_size: p11.subgroup_size,
        stages: p11.subgroup_supported_stages,
        operations: p11.subgroup_supported_operations,
        required_size: required_subgroup_size,
        min_size: if on(size_control) { min_sg } else { 0 },
        max_size: if on(size_control) { max_sg } else { 0 },
        full_subgroups: on(full_subgroups),
        max_workgroup_subgroups: max_wg_subgroups,
        max_threads,
    });
    let info = DeviceInfo {
        name: candidate.name,
        uuid: candidate.uuid,
        device_type: candidate.device_type,
        vendor_id: props.vendor_id,
        device_id: props.device_id,
        api_version,
        driver_version: props.driver_version,
        driver_name,
        target_env: if avail.v13 { TargetEnv::Vulkan1_3 } else { TargetEnv::Vulkan1_2 },
        max_threads_per_block: max_threads,
        max_block_dim: [
            max_threads.min(limits.max_compute_work_group_size[0]).min(1024),
            max_threads.min(1024),
            max_threads.min(64),
        ],
        max_grid_dim: [i32::MAX as u32, 65535, 65535],
        max_dispatch: limits.max_compute_work_group_count,
        max_buffer_size: if avail.v13 {
            p13.max_buffer_size
        } else if avail.maintenance4_ext {
            pm4.max_buffer_size
        } else {
            u64::MAX
        },
        max_shared_bytes: limits.max_compute_shared_memory_size,
        max_push_constant_bytes: limits.max_push_constants_size,
        subgroup_size: required_subgroup_size.unwrap_or(p11.subgroup_size),
        required_subgroup_size,
        supports_compute_full_subgroups: on(full_subgroups),
        max_compute_workgroup_subgroups: max_wg_subgroups,
        warp_path: crate::warp::choose(&warp_paths),
        warp_paths,
        total_memory,
        multiprocessor_count,
        coresident_workgroups,
        cooperative_launch: lp_threads.is_some(),
        pci: avail.pci.then_some(PciBusInfo {
            domain: ppci.pci_domain,
            bus: ppci.pci_bus,
            device: ppci.pci_device,
            function: ppci.pci_function,
        }),
        emulate_fma: true,
        supports_f64: on(e.core.shader_float64),
        denorm_preserve_f32: on(p12.shader_denorm_preserve_float32),
        denorm_preserve_f64: on(p12.shader_denorm_preserve_float64),
        signed_zero_inf_nan_f32: on(p12.shader_signed_zero_inf_nan_preserve_float32),
        signed_zero_inf_nan_f64: on(p12.shader_signed_zero_inf_nan_preserve_float64),
        signed_zero_inf_nan_f16: on(p12.shader_signed_zero_inf_nan_preserve_float16),
        keeps_f32_subnormals: true,
        keeps_f64_subnormals: true,
        correct_f64_div_sqrt: false,
        supports_i64: on(e.core.shader_int64),
        supports_i16: on(e.core.shader_int16),
        supports_i8: on(e.v12.shader_int8),
        supports_f16: on(e.v12.shader_float16),
        supports_storage_8bit: on(e.v12.storage_buffer8_bit_access) && on(e.v12.uniform_and_storage_buffer8_bit_access),
        supports_storage_16bit: on(e.v11.storage_buffer16_bit_access),
        supports_push_constant_8bit: on(e.v12.storage_push_constant8),
        supports_push_constant_16bit: on(e.v11.storage_push_constant16),
        supports_vulkan_memory_model: on(e.v12.vulkan_memory_model) && on(e.v12.vulkan_memory_model_device_scope),
        supports_scalar_block_layout: on(e.v12.scalar_block_layout),
        supports_variable_pointers: on(e.v11.variable_pointers) && on(e.v11.variable_pointers_storage_buffer),
        supports_subgroup_extended_types: on(e.v12.shader_subgroup_extended_types),
        supports_subgroup_ballot: p11.subgroup_supported_operations.contains(vk::SubgroupFeatureFlags::BALLOT)
            && p11.subgroup_supported_stages.contains(vk::ShaderStageFlags::COMPUTE),
        supports_buffer_int64_atomics: on(e.v12.shader_buffer_int64_atomics),
        supports_shared_int64_atomics: on(e.v12.shader_shared_int64_atomics),
        supports_buffer_f32_atomic_add: use_af && on(af.shader_buffer_float32_atomic_add),
        supports_shared_f32_atomic_add: use_af && on(af.shader_shared_float32_atomic_add),
        supports_buffer_f64_atomic_add: use_af && on(af.shader_buffer_float64_atomic_add),
        supports_shared_f64_atomic_add: use_af && on(af.shader_shared_float64_atomic_add),
        supports_buffer_f32_atomic_min_max: use_af2 && on(af2.shader_buffer_float32_atomic_min_max),
        supports_shared_f32_atomic_min_max: use_af2 && on(af2.shader_shared_float32_atomic_min_max),
        supports_shader_clock: use_clock,
        timestamp_period_ns: (families[queue_family as usize].timestamp_valid_bits > 0)
            .then_some(limits.timestamp_period as f64),
        supports_subgroup_size_control: on(size_control),
        supports_maintenance4: on(maintenance4),
        validation: instance.validation,
        host_import_alignment: use_host_memory.then_some(phost.min_imported_host_pointer_alignment),
        supports_ipc_memory: ipc_memory,
    };
    log::info!(
        "ptxvk: using {} ({:?}, Vulkan {}, driver {}, subgroup size {}, {} warps)",
        info.name,
        info.device_type,
        version_string(api_version),
        info.driver_name,
        info.subgroup_size,
        info.warp_path.name()
    );
    let disk_cache = crate::disk_cache::DiskCache::from_env();
    // The data an earlier process left; a driver ignores data that is not
    // its own (the header names the device and driver).
    let initial = disk_cache.as_ref().and_then(|c| c.get("p", &crate::disk_cache::pipeline_cache_key(&info)));
    let cache_info = vk::PipelineCacheCreateInfo::default().initial_data(initial.as_deref().unwrap_or(&[]));
    // SAFETY: `raw` is live; the initial data is a byte slice.
    let pipeline_cache = match unsafe { raw.create_pipeline_cache(&cache_info, None) } {
        Ok(c) => c,
        Err(_) => {
            // SAFETY: as above, without initial data.
            unsafe { raw.create_pipeline_cache(&vk::PipelineCacheCreateInfo::default(), None) }.map_err(map_create)?
        }
    };
    let host_memory = use_host_memory.then(|| ash::ext::external_memory_host::Device::new(raw_instance, &raw));
    let external_memory_fd = ipc_memory.then(|| ash::khr::external_memory_fd::Device::new(raw_instance, &raw));
    Ok(Arc::new(Device {
        raw,
        queue,
        queue_family,
        info,
        allocator: ManuallyDrop::new(Mutex::new(allocator)),
        host_memory,
        external_memory_fd,
        shareable_live: std::sync::atomic::AtomicU64::new(0),
        // Also at most half of `maxMemoryAllocationCount` (4096 on some
        // drivers): the allocator's blocks and other objects need the rest.
        shareable_budget: if ipc_memory {
            (descriptor_limit() / 4).min(u64::from(limits.max_memory_allocation_count) / 2)
        } else {
            0
        },
        opaque_fd_dedicated_only,
        memory_types: mem.memory_types[..mem.memory_type_count as usize].to_vec(),
        pipeline_cache_saved: Mutex::new((initial.map_or(0, |d| d.len()), None)),
        disk_cache,
        pipeline_cache,
        instance,
    }))
}

/// The process's limit on open file descriptors (`RLIMIT_NOFILE`), raised to
/// its hard limit first: with shareable allocations, lavapipe holds a
/// descriptor per allocation, and the usual soft limit of 1024 would cap a
/// program at a few hundred (the Go runtime raises it the same way).
#[cfg(unix)]
fn descriptor_limit() -> u64 {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `lim` is valid for writing.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
        // SAFETY: `raised` is a valid limit (soft at most hard).
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim = raised;
        }
    }
    lim.rlim_cur
}

/// No descriptors to count where memory is not shared as file descriptors.
#[cfg(not(unix))]
fn descriptor_limit() -> u64 {
    0
}

/// Whether buffers with the usage of user allocations can be both exported
/// and imported as `VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT` memory
/// (`vkGetPhysicalDeviceExternalBufferProperties`, Vulkan 1.1): `None` if
/// not, otherwise whether such memory must be a dedicated allocation.
fn opaque_fd_buffers_shareable(instance: &ash::Instance, pd: vk::PhysicalDevice) -> Option<bool> {
    let info = vk::PhysicalDeviceExternalBufferInfo::default()
        .usage(crate::memory::DEVICE_USAGE)
        .handle_type(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
    let mut props = vk::ExternalBufferProperties::default();
    // SAFETY: `pd` belongs to `instance`; both structures outlive the call.
    unsafe { instance.get_physical_device_external_buffer_properties(pd, &info, &mut props) };
    let features = props.external_memory_properties.external_memory_features;
    let shareable = features
        .contains(vk::ExternalMemoryFeatureFlags::EXPORTABLE | vk::ExternalMemoryFeatureFlags::IMPORTABLE)
        && props
            .external_memory_properties
            .compatible_handle_types
            .contains(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
    shareable.then_some(features.contains(vk::ExternalMemoryFeatureFlags::DEDICATED_ONLY))
}

/// llvmpipe's (lavapipe's) compute thread pool, which runs each workgroup of
/// a dispatch to completion on one thread, each thread taking a contiguous
/// run of the dispatch's workgroups ([`llvmpipe_pool`]): that many
/// workgroups run at once. Mesa sizes
/// the pool to the number of CPUs (no pool, the workgroups run one after
/// another, with one CPU), `LP_NUM_THREADS` overriding, at most
/// [`LLVMPIPE_MAX_THREADS`]. Counted here as at most `cpus` (the CPUs this
/// process may use), since threads beyond those only take turns with the
/// spinning ones (measured in `docs/cooperative.md`), and at least 1.
pub fn llvmpipe_threads(cpus: u32, lp_num_threads: Option<&str>) -> u32 {
    let pool = match lp_num_threads.map(|v| v.trim().parse::<u32>()) {
        Some(Ok(n)) => n,
        _ => cpus,
    };
    pool.min(LLVMPIPE_MAX_THREADS).min(cpus).max(1)
}

/// The threads of llvmpipe's compute pool as Mesa counts them: `LP_NUM_THREADS`
/// when set, else `cpus`, at most [`LLVMPIPE_MAX_THREADS`]; 0 when there is
/// no pool (one CPU: workgroups run in order on the submitting thread).
/// Mesa's pool (`lp_cs_tpool.c`) hands each thread `N / pool` consecutive
/// workgroups of a dispatch of `N`, and the `N % pool` left over one at a
/// time at the end (`Options::block_order_threads` undoes the split).
pub fn llvmpipe_pool(cpus: u32, lp_num_threads: Option<&str>) -> u32 {
    let pool = match lp_num_threads.map(|v| v.trim().parse::<u32>()) {
        Some(Ok(n)) => n,
        _ if cpus < 2 => 0,
        _ => cpus,
    };
    pool.min(LLVMPIPE_MAX_THREADS)
}

/// Mesa's `LP_MAX_THREADS` (the bound of the compute thread pool), at its
/// smallest across the Mesa releases that ship lavapipe.
pub const LLVMPIPE_MAX_THREADS: u32 = 16;
