//! The Vulkan instance, the validation-layer messenger, and device discovery.
//!
//! [`enumerate_devices`] lists the usable devices (Vulkan 1.2+ with
//! `bufferDeviceAddress`) in preference order; a [`DeviceSelector`] picks one.

use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use ash::vk;

use crate::error::{map_create, Error, Result};

/// Environment variable naming the device [`DeviceSelector::Default`] picks:
/// an index into [`enumerate_devices`]'s list or a case-insensitive substring
/// of the device name.
pub const DEVICE_ENV: &str = "PTXVK_DEVICE";
/// Environment variable that, set to `1`, enables the Khronos validation layer.
pub const VALIDATION_ENV: &str = "PTXVK_VALIDATION";
/// `PTXVK_SPIRV_VAL=1`: run `spirv-val` on every module the runtime
/// translates, and refuse modules it rejects (tests set it).
pub const SPIRV_VAL_ENV: &str = "PTXVK_SPIRV_VAL";
/// The id bound above which a module is translated to one SPIR-V module per
/// entry (default: SPIR-V's universal limit, 4,194,303 ids); for tests.
pub const MAX_MODULE_IDS_ENV: &str = "PTXVK_MAX_MODULE_IDS";

/// `PTXVK_LOOP_LIVE_OUTS=0`: on llvmpipe, leave registers that a loop writes
/// and code after it reads as ordinary variables (for measurements; results
/// can be wrong: see the translator's `loop_live_outs_in_memory`).
pub const LOOP_LIVE_OUTS_ENV: &str = "PTXVK_LOOP_LIVE_OUTS";

/// `PTXVK_UNIFORM_PARAMS=0`: on llvmpipe, leave 64-bit kernel parameters
/// without the translator's uniformity hint (for measurements; see the
/// translator's `uniform_params`).
pub const UNIFORM_PARAMS_ENV: &str = "PTXVK_UNIFORM_PARAMS";

/// `PTXVK_FMAD=0`: keep every `mul` and `add`/`sub` without a rounding
/// modifier separately rounded instead of fusing the pairs NVIDIA's `ptxas`
/// fuses (the translator's `contract`; nvcc's `--fmad=false` for PTX that
/// was compiled with the default `--fmad=true`).
pub const FMAD_ENV: &str = "PTXVK_FMAD";

/// `PTXVK_NATIVE_F64_DIV=0`: compute f64 `div.rn`, `rcp.rn` and `sqrt.rn`
/// with the exact correction even where the context's probe found the
/// driver's f64 division and square root correctly rounded (for
/// measurements, and for a driver the probe cannot judge).
pub const NATIVE_F64_DIV_ENV: &str = "PTXVK_NATIVE_F64_DIV";

/// `PTXVK_DUMP=<folder>`: write every PTX module the runtime translates, and
/// its SPIR-V, to `<folder>/<n>-<file name>.ptx` and `.spv` (for bug
/// reports: what a client such as numba actually loads).
pub const DUMP_ENV: &str = "PTXVK_DUMP";
/// `PTXVK_TRACE=1` (and 2, which the driver library also reads): report on
/// stderr each kernel whose pipeline took the Vulkan driver more than a
/// second to compile, and at `2` every pipeline when its compile starts
/// and ends (for hangs and slow first launches: llvmpipe compiles some
/// kernels for minutes).
pub const TRACE_ENV: &str = "PTXVK_TRACE";

/// The [`TRACE_ENV`] level (0 when unset, empty or `0`; 1 for any other
/// value that is not a number).
pub(crate) fn trace_level() -> u8 {
    static LEVEL: std::sync::OnceLock<u8> = std::sync::OnceLock::new();
    *LEVEL.get_or_init(|| match std::env::var(TRACE_ENV) {
        Ok(v) if v.is_empty() || v == "0" => 0,
        Ok(v) => v.trim().parse::<u8>().unwrap_or(1).max(1),
        Err(_) => 0,
    })
}
/// Set to `0` to translate without loop-limit detection on llvmpipe
/// (`Options::loop_limit`; for measurements: a kernel past the limit then
/// computes wrong results silently).
pub const LOOP_LIMIT_ENV: &str = "PTXVK_LOOP_LIMIT";
/// `PTXVK_BLOCK_ORDER_THREADS=N`: the worker threads llvmpipe runs a
/// dispatch on, for `Options::block_order_threads` (blocks start in grid
/// order on each thread, as on a GPU; `0` leaves `%ctaid` the workgroup id).
/// Default: llvmpipe's own count, `LP_NUM_THREADS` or the CPUs this process
/// may use, at most 16 (Mesa 22's `LP_MAX_THREADS`).
pub const BLOCK_ORDER_THREADS_ENV: &str = "PTXVK_BLOCK_ORDER_THREADS";

/// `Options::block_order_threads` on llvmpipe: [`BLOCK_ORDER_THREADS_ENV`]
/// when set, else llvmpipe's pool ([`crate::device::llvmpipe_pool`]).
pub(crate) fn block_order_threads() -> u32 {
    if let Some(n) = std::env::var(BLOCK_ORDER_THREADS_ENV).ok().and_then(|v| v.trim().parse().ok()) {
        return n;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    crate::device::llvmpipe_pool(cpus, std::env::var("LP_NUM_THREADS").ok().as_deref())
}

/// `PTXVK_UNROLL_LOOPS=N`: copies of each small innermost loop's body per
/// iteration on llvmpipe (`Options::unroll_loops`; default 8, so loops run
/// up to 8 x 65535 iterations before its loop limiter; `0` or `1` leaves
/// loops alone).
pub const UNROLL_LOOPS_ENV: &str = "PTXVK_UNROLL_LOOPS";
/// `PTXVK_RESUME_ROUNDS=N`: on llvmpipe, the most resume rounds dispatched
/// after a launch of an entry whose threads are independent, so that a
/// thread loops past the loop limiter in up to `N + 1` invocations
/// (`Options::resume_loops`, `abi::resume`; default [`RESUME_ROUNDS`], at
/// most 255; `0` turns resuming off).
pub const RESUME_ROUNDS_ENV: &str = "PTXVK_RESUME_ROUNDS";
/// `PTXVK_RESUME_COUNT=1`: every entry whose threads go on in resume rounds
/// counts its loop iterations, so that a thread saves itself before
/// llvmpipe's limiter cuts its loop; by default only those whose cuts could
/// not be recovered where they happen do (`Options::resume_count`; for
/// measurement and tests).
pub const RESUME_COUNT_ENV: &str = "PTXVK_RESUME_COUNT";
/// Resume rounds after a launch by default (see [`RESUME_ROUNDS_ENV`]).
pub const RESUME_ROUNDS: u32 = 8;

/// The resume rounds of this process (see [`RESUME_ROUNDS_ENV`]).
pub(crate) fn resume_rounds() -> u32 {
    // Read once: every launch asks (the launch path).
    static ROUNDS: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *ROUNDS.get_or_init(|| {
        std::env::var(RESUME_ROUNDS_ENV)
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(RESUME_ROUNDS)
            .min(ptxvk_translator::abi::resume::MAX_ROUNDS)
    })
}
/// `PTXVK_SHARED_SPILL=0`: translate without the code that keeps `.shared`
/// memory beyond the device's Workgroup memory in device memory (the
/// translator's `shared_spill`; for measurements: launches needing more
/// shared memory than the device has then fail).
pub const SHARED_SPILL_ENV: &str = "PTXVK_SHARED_SPILL";
/// `PTXVK_FORWARD_PROGRESS=0`: translate without the interleaving of
/// diverged lanes around spin loops (the translator's `forward_progress`;
/// for measurements: a lane spinning on a lock another lane of its warp
/// holds then livelocks). `all`: interleave around every loop (a test of
/// the rewriting: results must not change).
pub const FORWARD_PROGRESS_ENV: &str = "PTXVK_FORWARD_PROGRESS";
/// `PTXVK_LOCKSTEP=0`: translate without the lock-step points of legacy
/// warp-synchronous code on the emulated warp path (the translator's
/// `lockstep`; for measurements: such code then computes wrong results).
pub const LOCKSTEP_ENV: &str = "PTXVK_LOCKSTEP";
/// `PTXVK_SHARED_HOT=1`/`0`: launches that spill `.shared` memory keep (or
/// do not keep) a hot part in Workgroup memory (default: keep, except on
/// llvmpipe; see `Context::shared_hot_part`).
pub const SHARED_HOT_ENV: &str = "PTXVK_SHARED_HOT";

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// The kind of a Vulkan device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceType {
    /// A discrete GPU.
    DiscreteGpu,
    /// A GPU integrated with the host CPU.
    IntegratedGpu,
    /// A GPU in a virtualised environment.
    VirtualGpu,
    /// A software implementation running on the CPU (lavapipe, SwiftShader).
    Cpu,
    /// Anything else.
    Other,
}

impl DeviceType {
    pub(crate) fn from_vk(t: vk::PhysicalDeviceType) -> Self {
        match t {
            vk::PhysicalDeviceType::DISCRETE_GPU => DeviceType::DiscreteGpu,
            vk::PhysicalDeviceType::INTEGRATED_GPU => DeviceType::IntegratedGpu,
            vk::PhysicalDeviceType::VIRTUAL_GPU => DeviceType::VirtualGpu,
            vk::PhysicalDeviceType::CPU => DeviceType::Cpu,
            _ => DeviceType::Other,
        }
    }

    /// Lower is preferred.
    fn preference(self) -> u32 {
        match self {
            DeviceType::DiscreteGpu => 0,
            DeviceType::IntegratedGpu => 1,
            DeviceType::VirtualGpu => 2,
            DeviceType::Cpu => 3,
            DeviceType::Other => 4,
        }
    }
}

/// Which device a [`crate::Context`] runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeviceSelector {
    /// The first device of [`enumerate_devices`]: the one `PTXVK_DEVICE`
    /// names if set, else a discrete GPU, then integrated, virtual, CPU.
    #[default]
    Default,
    /// The device at this index of [`enumerate_devices`].
    Index(usize),
}

/// A usable device as [`enumerate_devices`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceDesc {
    /// Position in the list (the CUDA device ordinal).
    pub index: usize,
    /// `VkPhysicalDeviceProperties::deviceName`.
    pub name: String,
    /// The kind of device.
    pub device_type: DeviceType,
    /// `VkPhysicalDeviceIDProperties::deviceUUID`.
    pub uuid: [u8; 16],
}

/// Counts validation-layer warnings and errors; shared with the messenger callback.
#[derive(Debug, Default)]
pub(crate) struct MessageCounter {
    count: AtomicU32,
}

impl MessageCounter {
    pub(crate) fn get(&self) -> u32 {
        self.count.load(Ordering::Relaxed)
    }
}

/// Owns the loader entry, the `VkInstance` and, with validation, the debug messenger.
pub(crate) struct Instance {
    pub(crate) entry: ash::Entry,
    pub(crate) raw: ash::Instance,
    /// Instance-level API version in use (at most 1.3).
    pub(crate) api_version: u32,
    debug: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    /// Kept alive for as long as the messenger may call back with its address.
    pub(crate) messages: Arc<MessageCounter>,
    pub(crate) validation: bool,
}

impl Drop for Instance {
    fn drop(&mut self) {
        // SAFETY: the messenger and instance were created by this object; every
        // child object (the logical device) holds an `Arc` of this instance and
        // is therefore already destroyed.
        unsafe {
            if let Some((loader, messenger)) = self.debug.take() {
                loader.destroy_debug_utils_messenger(messenger, None);
            }
            self.raw.destroy_instance(None);
        }
    }
}

/// The `VK_EXT_debug_utils` messenger callback: logs every message and counts
/// warnings and errors.
///
/// # Safety
/// Called by the loader with a valid (or null) callback-data pointer and the
/// `MessageCounter` pointer given at messenger creation as `user`.
unsafe extern "system" fn debug_callback(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: the layer passes a valid callback-data pointer (or null) for the
    // duration of the call; `user` is the `MessageCounter` the instance keeps alive.
    let message = unsafe {
        data.as_ref().and_then(|d| d.message_as_c_str()).map(|m| m.to_string_lossy().into_owned()).unwrap_or_default()
    };
    let important = severity
        .intersects(vk::DebugUtilsMessageSeverityFlagsEXT::WARNING | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR);
    if important {
        // SAFETY: see above; the counter outlives the messenger.
        if let Some(counter) = unsafe { (user as *const MessageCounter).as_ref() } {
            counter.count.fetch_add(1, Ordering::Relaxed);
        }
        if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) {
            log::error!("vulkan validation: {message}");
        } else {
            log::warn!("vulkan validation: {message}");
        }
    } else {
        log::debug!("vulkan: {message}");
    }
    vk::FALSE
}

fn validation_requested() -> bool {
    std::env::var(VALIDATION_ENV).map(|v| v == "1").unwrap_or(false)
}

impl Instance {
    /// Creates an instance; `allow_validation` lets `PTXVK_VALIDATION=1` enable
    /// the validation layer (device enumeration passes `false`).
    pub(crate) fn new(allow_validation: bool) -> Result<Arc<Instance>> {
        // SAFETY: loading the system Vulkan loader runs its initialisers; we
        // trust the installed loader like any Vulkan application must.
        let entry = unsafe { ash::Entry::load() }.map_err(|e| {
            log::warn!("cannot load the Vulkan loader: {e}");
            Error::NoDevice
        })?;
        // SAFETY: plain query on a loaded entry.
        let loader_version =
            unsafe { entry.try_enumerate_instance_version() }.map_err(map_create)?.unwrap_or(vk::API_VERSION_1_0);
        if loader_version < vk::API_VERSION_1_2 {
            log::warn!("Vulkan loader supports only {}", version_string(loader_version));
            return Err(Error::NoDevice);
        }
        let api_version = loader_version.min(vk::API_VERSION_1_3);

        // SAFETY: plain queries on a loaded entry.
        let layers = unsafe { entry.enumerate_instance_layer_properties() }.map_err(map_create)?;
        // SAFETY: as above.
        let extensions = unsafe { entry.enumerate_instance_extension_properties(None) }.map_err(map_create)?;
        let has_ext = |name: &CStr| extensions.iter().any(|e| e.extension_name_as_c_str().ok() == Some(name));

        let mut validation = allow_validation && validation_requested();
        if validation && !layers.iter().any(|l| l.layer_name_as_c_str().ok() == Some(VALIDATION_LAYER)) {
            log::warn!("{VALIDATION_ENV}=1 but VK_LAYER_KHRONOS_validation is not installed");
            validation = false;
        }
        let debug_utils = validation && has_ext(ash::ext::debug_utils::NAME);

        let mut ext_names = Vec::new();
        let mut flags = vk::InstanceCreateFlags::empty();
        if has_ext(ash::khr::portability_enumeration::NAME) {
            ext_names.push(ash::khr::portability_enumeration::NAME.as_ptr());
            flags |= vk::InstanceCreateFlags::ENUMERATE_PORTABILITY_KHR;
        }
        if debug_utils {
            ext_names.push(ash::ext::debug_utils::NAME.as_ptr());
        }
        let layer_names = if validation { vec![VALIDATION_LAYER.as_ptr()] } else { Vec::new() };

        let app =
            vk::ApplicationInfo::default().application_name(c"ptxvk").engine_name(c"ptxvk").api_version(api_version);
        let messages = Arc::new(MessageCounter::default());
        let mut messenger_info = vk::DebugUtilsMessengerCreateInfoEXT::default()
            .message_severity(
                vk::DebugUtilsMessageSeverityFlagsEXT::WARNING | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
            )
            .message_type(
                vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                    | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                    | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
            )
            .pfn_user_callback(Some(debug_callback))
            .user_data(Arc::as_ptr(&messages) as *mut c_void);
        let mut create_info = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_layer_names(&layer_names)
            .enabled_extension_names(&ext_names)
            .flags(flags);
        if debug_utils {
            create_info = create_info.push_next(&mut messenger_info);
        }
        // SAFETY: every pointer in `create_info` refers to locals that outlive the call.
        let raw = unsafe { entry.create_instance(&create_info, None) }.map_err(|e| {
            log::warn!("vkCreateInstance failed: {e}");
            match e {
                vk::Result::ERROR_INCOMPATIBLE_DRIVER => Error::NoDevice,
                other => map_create(other),
            }
        })?;
        let mut instance = Instance { entry, raw, api_version, debug: None, messages, validation };
        if debug_utils {
            let loader = ash::ext::debug_utils::Instance::new(&instance.entry, &instance.raw);
            // SAFETY: the create info's user data points at `instance.messages`,
            // which lives as long as the messenger (destroyed first in Drop).
            let messenger =
                unsafe { loader.create_debug_utils_messenger(&messenger_info, None) }.map_err(map_create)?;
            instance.debug = Some((loader, messenger));
        }
        Ok(Arc::new(instance))
    }

    /// The usable physical devices, in preference order (see [`enumerate_devices`]).
    pub(crate) fn candidates(&self) -> Result<Vec<Candidate>> {
        // SAFETY: plain query on a live instance.
        let physical = match unsafe { self.raw.enumerate_physical_devices() } {
            Ok(p) => p,
            Err(vk::Result::ERROR_INITIALIZATION_FAILED) => Vec::new(),
            Err(e) => return Err(map_create(e)),
        };
        let mut out = Vec::new();
        for pd in physical {
            if let Some(c) = self.candidate(pd) {
                out.push(c);
            }
        }
        // Stable sort keeps the driver's order among devices of one kind.
        out.sort_by_key(|c| c.device_type.preference());
        if let Ok(wanted) = std::env::var(DEVICE_ENV) {
            let wanted = wanted.trim();
            let pos = if let Ok(i) = wanted.parse::<usize>() {
                (i < out.len()).then_some(i)
            } else {
                let lower = wanted.to_lowercase();
                out.iter().position(|c| c.name.to_lowercase().contains(&lower))
            };
            match pos {
                Some(i) => {
                    let c = out.remove(i);
                    out.insert(0, c);
                }
                None if !wanted.is_empty() => {
                    log::warn!("{DEVICE_ENV}={wanted} matches no usable Vulkan device")
                }
                None => {}
            }
        }
        Ok(out)
    }

    fn candidate(&self, pd: vk::PhysicalDevice) -> Option<Candidate> {
        // SAFETY: `pd` comes from this instance.
        let props = unsafe { self.raw.get_physical_device_properties(pd) };
        let name = props.device_name_as_c_str().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        if props.api_version < vk::API_VERSION_1_2 {
            log::info!("skipping {name}: Vulkan {} < 1.2", version_string(props.api_version));
            return None;
        }
        let mut id = vk::PhysicalDeviceIDProperties::default();
        let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
        // SAFETY: `pd` comes from this instance, which is Vulkan 1.2+.
        unsafe { self.raw.get_physical_device_properties2(pd, &mut props2) };
        let mut f12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut f12);
        // SAFETY: as above.
        unsafe { self.raw.get_physical_device_features2(pd, &mut f2) };
        if f12.buffer_device_address == vk::FALSE {
            log::info!("skipping {name}: no bufferDeviceAddress");
            return None;
        }
        let uuid = id.device_uuid;
        Some(Candidate { physical: pd, name, device_type: DeviceType::from_vk(props.device_type), uuid })
    }
}

/// A usable physical device of one instance.
pub(crate) struct Candidate {
    pub(crate) physical: vk::PhysicalDevice,
    pub(crate) name: String,
    pub(crate) device_type: DeviceType,
    pub(crate) uuid: [u8; 16],
}

/// Lists the usable Vulkan devices (Vulkan 1.2+ with `bufferDeviceAddress`).
///
/// Order: the device `PTXVK_DEVICE` names (an index into the type-sorted list,
/// or a case-insensitive name substring) first, then discrete GPUs, integrated
/// GPUs, virtual GPUs, CPU implementations, in driver order within a kind.
/// Index 0 is thus what [`DeviceSelector::Default`] picks. An empty list (no
/// loader, no device) is `Ok(vec![])`.
pub fn enumerate_devices() -> Result<Vec<DeviceDesc>> {
    let instance = match Instance::new(false) {
        Ok(i) => i,
        Err(Error::NoDevice) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(instance
        .candidates()?
        .into_iter()
        .enumerate()
        .map(|(index, c)| DeviceDesc { index, name: c.name, device_type: c.device_type, uuid: c.uuid })
        .collect())
}

/// `major.minor.patch` of a Vulkan version number.
pub(crate) fn version_string(v: u32) -> String {
    format!("{}.{}.{}", vk::api_version_major(v), vk::api_version_minor(v), vk::api_version_patch(v))
}
