//! [`Context`]: one device with its memory, command stream and loaded modules.
//! All methods take `&self`; a mutex serialises them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::stream::with_stream_tag;
use ash::vk;
use gpu_allocator::MemoryLocation;
use ptxvk_translator::{abi, Options, ParamPassing, WarpPath};

use crate::device::{Device, DeviceInfo};
use crate::error::{Error, Result};
use crate::fault::{FaultMode, FaultState};
use crate::instance::DeviceSelector;
use crate::memory::{
    align_up, AllocationTable, Buffer, Chunk, ExportedMemory, Readback, ALLOC_ALIGN, CHUNK_MAX_PIECE, DEVICE_USAGE,
    STAGING_CHUNK,
};
use crate::module::{Function, Module, ModuleInner};
use crate::pipeline::PipelineKey;
use crate::printf::DeviceStrings;
use crate::stream::Stream;

/// A trap word read at a synchronisation: its address, the kernels that
/// may have set it, its module data (kept alive), and its value (`None`:
/// the module was unloaded meanwhile).
type TrapRead = (u64, Vec<String>, Arc<Buffer>, Option<u32>);

/// Mutable state of a context, behind its mutex. Lock order: this, then a
/// module's pipeline map, then the allocator.
struct State {
    /// Declared first: dropping it waits for queued work before anything it
    /// may use goes away.
    stream: Stream,
    table: AllocationTable,
    /// Allocations made available to other processes, by [`Buffer::id`].
    exported: std::collections::HashMap<u64, std::sync::Weak<Buffer>>,
    readback: Readback,
    /// Trap words of modules launched since the last check (address,
    /// kernel, and the module data buffer, kept so that its address is not
    /// reused by another allocation before the word is read).
    /// Trap words of the modules launched since the last check, each with
    /// the kernels of its module launched since then (the word is the
    /// module's: it does not say which of them set it).
    trap_words: Vec<(u64, Vec<String>, Arc<Buffer>)>,
    /// Trap words found set (the launch failed), zeroed again by
    /// [`Context::clear_failure`].
    tripped: Vec<(u64, Arc<Buffer>)>,
    /// Kernel printf output (see [`crate::printf`]).
    printf: PrintfState,
    /// Device timestamps of [`Context::record_timestamp`].
    timestamps: Timestamps,
    /// The device heap of kernels' `malloc` (see [`abi::heap`]).
    heap: HeapState,
    /// The grid workspace of cooperative launches (see [`abi::grid`]),
    /// created at the first one.
    grid: Option<Arc<Buffer>>,
    /// The spill area of `.shared` memory beyond the device's Workgroup
    /// memory (see [`abi`], "Shared memory beyond Workgroup memory"),
    /// created at the first launch that needs it and grown as needed.
    spill: Option<Arc<Buffer>>,
    /// The resume area of launches whose threads go on in resume rounds
    /// (see [`abi::resume`]), created at the first one.
    resume: Option<Arc<Buffer>>,
    /// The fault log and range table of the fault checks (see [`crate::fault`]).
    fault: FaultState,
    /// Exportable memory that small allocations are carved from (oldest first).
    chunks: Vec<Arc<Chunk>>,
}

/// The device heap of a context.
struct HeapState {
    /// Created at the first launch of a kernel that allocates; its size is fixed from then on.
    buffer: Option<Arc<Buffer>>,
    /// Bytes of block space (`CU_LIMIT_MALLOC_HEAP_SIZE`).
    limit: u64,
}

/// A query pool of device timestamps and the slots in use.
#[derive(Default)]
struct Timestamps {
    pool: Option<QueryPool>,
    /// Unused slots.
    free: Vec<u32>,
    /// Slots written by queued work, not read back yet.
    pending: Vec<(u32, Arc<Mutex<Stamp>>)>,
}

/// Slots of the timestamp query pool.
const TIMESTAMP_SLOTS: u32 = 256;

struct QueryPool {
    raw: vk::QueryPool,
    device: Arc<Device>,
}

impl Drop for QueryPool {
    fn drop(&mut self) {
        // SAFETY: the pool is ours; the stream (dropped before it, see
        // `State`) has waited for the work that writes it.
        unsafe { self.device.raw.destroy_query_pool(self.raw, None) };
    }
}

#[derive(Clone, Copy, Debug)]
enum Stamp {
    /// To be written by queued work.
    Pending,
    /// Device time in ticks of `timestampPeriod`.
    Device(u64),
    /// Host time, on devices without timestamps.
    Host(std::time::Instant),
}

/// A point in a context's command stream (see [`Context::record_timestamp`]).
#[derive(Clone, Debug)]
pub struct Timestamp(Arc<Mutex<Stamp>>);

impl Timestamp {
    fn get(&self) -> Stamp {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The printf FIFO of a context.
struct PrintfState {
    /// Created at the first launch of a kernel that prints; its size is fixed from then on.
    fifo: Option<Arc<Buffer>>,
    /// Bytes of record space (`CU_LIMIT_PRINTF_FIFO_SIZE`).
    limit: u64,
    /// When set, output is collected here instead of going to standard output.
    capture: Option<Vec<u8>>,
}

pub(crate) struct ContextInner {
    state: Mutex<State>,
    /// Whether mapped memory has the same host and device address (see [`Context::alloc_managed`]).
    managed: std::sync::OnceLock<bool>,
    info: DeviceInfo,
    device: Arc<Device>,
    /// Bytes of the per-thread stack of recursive functions in modules
    /// loaded from now on (`CU_LIMIT_STACK_SIZE`).
    stack_bytes: std::sync::atomic::AtomicU32,
    /// Launches that spill `.shared` memory keep a hot part in Workgroup
    /// memory (see [`Context::set_shared_hot_part`]).
    shared_hot: std::sync::atomic::AtomicBool,
    /// How kernels' memory accesses are checked (fixed at creation).
    fault_mode: FaultMode,
    /// Whether kernels' `.shared` accesses are tracked for hazards.
    race_check: bool,
    /// Modules loaded from the persistent cache, and translated and stored
    /// in it (statistics).
    cache_hits: AtomicU64,
    cache_stores: AtomicU64,
}

/// A CUDA-like context on one Vulkan device: allocates memory, loads PTX,
/// launches kernels and copies, in order, like one CUDA stream.
///
/// Cheap to clone, `Send + Sync`; clones share the same device and state.
#[derive(Clone)]
pub struct Context(Arc<ContextInner>);

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("device", &self.0.info.name).finish_non_exhaustive()
    }
}

impl Context {
    /// Opens the device `selector` picks, probes it, and creates a context.
    ///
    /// Its kernels' memory accesses are checked as `PTXVK_MEMCHECK` and
    /// `PTXVK_FAULT_CHECKS` say (by default on CPU devices, see
    /// [`FaultMode`]).
    pub fn new(selector: DeviceSelector) -> Result<Context> {
        Context::with_fault_mode(selector, None)
    }

    /// [`Context::new`] with the fault checks of `mode` (`None`: as the
    /// environment says).
    pub fn with_fault_mode(selector: DeviceSelector, mode: Option<FaultMode>) -> Result<Context> {
        let race = std::env::var(crate::fault::RACECHECK_ENV).is_ok_and(|v| v == "1");
        Context::with_racecheck(selector, mode, race)
    }

    /// [`Context::with_fault_mode`], with the racecheck on or off: every
    /// non-atomic `.shared` access of its kernels is tracked, and hazards
    /// between the threads of a block (two accesses of a byte between the
    /// same barriers, one of them a write) are reported on standard error
    /// and by [`Context::race_hazards`]; the launches go on. The racecheck
    /// needs fault checks: with `mode` off it turns them on.
    pub fn with_racecheck(selector: DeviceSelector, mode: Option<FaultMode>, race: bool) -> Result<Context> {
        let device = Device::new(selector)?;
        let llvmpipe = device.info.driver_name == "llvmpipe";
        let mut fault_mode =
            mode.unwrap_or_else(|| FaultMode::from_env(device.info.device_type == crate::instance::DeviceType::Cpu));
        if race && fault_mode == FaultMode::Off {
            fault_mode = FaultMode::Checks;
        }
        let mut fault = FaultState::new(fault_mode);
        fault.race = race;
        let stream = Stream::new(&device)?;
        let mut inner = ContextInner {
            managed: std::sync::OnceLock::new(),
            state: Mutex::new(State {
                stream,
                table: AllocationTable::default(),
                exported: Default::default(),
                readback: Readback::default(),
                trap_words: Vec::new(),
                tripped: Vec::new(),
                printf: PrintfState { fifo: None, limit: abi::printf::DEFAULT_FIFO_BYTES, capture: None },
                timestamps: Timestamps::default(),
                heap: HeapState { buffer: None, limit: abi::heap::DEFAULT_HEAP_BYTES },
                grid: None,
                spill: None,
                resume: None,
                fault,
                chunks: Vec::new(),
            }),
            fault_mode,
            race_check: race,
            cache_hits: AtomicU64::new(0),
            cache_stores: AtomicU64::new(0),
            info: device.info.clone(),
            device,
            stack_bytes: std::sync::atomic::AtomicU32::new(ptxvk_translator::recursion::STACK_BYTES),
            shared_hot: std::sync::atomic::AtomicBool::new(match std::env::var(crate::instance::SHARED_HOT_ENV) {
                Ok(v) => v != "0",
                // llvmpipe's compile time grows steeply with code size (CUB's
                // onesweep radix sort takes over ten minutes with one path
                // per shared access): keep one path there.
                Err(_) => !llvmpipe,
            }),
        };
        inner.info.emulate_fma = crate::probe::needs_fma_emulation(&inner);
        if inner.info.supports_f64 {
            (inner.info.keeps_f32_subnormals, inner.info.keeps_f64_subnormals) = crate::probe::keeps_subnormals(&inner);
            if !std::env::var(crate::instance::NATIVE_F64_DIV_ENV).is_ok_and(|v| v == "0") {
                // The probe's own module is translated with the driver's
                // operations; the answer applies to every later module.
                inner.info.correct_f64_div_sqrt = true;
                inner.info.correct_f64_div_sqrt = crate::probe::correct_f64_div_sqrt(&inner);
            }
        }
        inner.lock().table.forget_freed();
        Ok(Context(Arc::new(inner)))
    }

    /// How the memory accesses of this context's kernels are checked.
    pub fn fault_mode(&self) -> FaultMode {
        self.0.fault_mode
    }

    /// Whether this context's kernels are race-checked.
    pub fn racecheck(&self) -> bool {
        self.0.race_check
    }

    /// Every hazard the racecheck has reported in this context (up to the
    /// last synchronisation), one per pair of instructions, with how many
    /// threads met it.
    pub fn race_hazards(&self) -> Vec<crate::fault::RaceHazard> {
        self.0.lock().fault.hazards()
    }

    /// What the device can do.
    pub fn info(&self) -> &DeviceInfo {
        &self.0.info
    }

    /// Allocates `bytes` of device memory; returns its device address (the
    /// `CUdeviceptr`), aligned to 256. Where the device can share memory
    /// with other processes ([`DeviceInfo::supports_ipc_memory`]) the
    /// allocation can be exported ([`Context::export_memory`]).
    pub fn alloc(&self, bytes: u64) -> Result<u64> {
        self.0.alloc(bytes)
    }

    /// Allocates `bytes` of host memory the device can address too (mapped,
    /// host-coherent): returns its device address and its host address. The
    /// device sees host writes made before the work that reads them is
    /// queued; the host sees device writes after a synchronisation. Freed
    /// with [`Context::free`] (of the device address); the host address is
    /// valid until then.
    pub fn alloc_mapped(&self, bytes: u64) -> Result<(u64, *mut u8)> {
        self.0.alloc_mapped(bytes)
    }

    /// Allocates managed memory: `bytes` of host-visible memory whose device
    /// address is also its host address, so one pointer serves the host and
    /// kernels (CUDA's `cuMemAllocManaged`). The host sees device writes
    /// after a synchronisation. Only possible where the Vulkan driver maps
    /// memory at its device address (CPU implementations such as lavapipe);
    /// elsewhere [`Error::Unsupported`] (see [`Context::supports_managed`]).
    /// Freed with [`Context::free`].
    pub fn alloc_managed(&self, bytes: u64) -> Result<u64> {
        let (device, host) = self.0.alloc_mapped(bytes)?;
        if device != host as u64 {
            let _ = self.0.free(device);
            return Err(Error::Unsupported(
                "managed memory: this device's addresses differ from the host addresses of the same memory".into(),
            ));
        }
        Ok(device)
    }

    /// Makes `bytes` of the caller's host memory at `host` addressable by
    /// the device (CUDA's `cuMemHostRegister` with `DEVICEMAP`): the pages
    /// holding it are imported as device memory, and the device address of
    /// `host` is returned. Copies and kernels then reach the host memory
    /// itself; the host sees device writes after a synchronisation.
    /// [`Error::Unsupported`] without `VK_EXT_external_memory_host`
    /// ([`DeviceInfo::host_import_alignment`]). Undone by
    /// [`Context::unregister_host`].
    ///
    /// # Safety
    /// The memory stays allocated until `unregister_host` returns.
    pub unsafe fn register_host(&self, host: *mut u8, bytes: u64) -> Result<u64> {
        let align = self.0.info.host_import_alignment.ok_or_else(|| {
            Error::Unsupported("this device cannot map host memory (no VK_EXT_external_memory_host)".into())
        })?;
        if host.is_null() || bytes == 0 {
            return Err(Error::InvalidValue("host memory to register is NULL or empty".into()));
        }
        let start = host as u64 & !(align - 1);
        let end = (host as u64).checked_add(bytes).and_then(|e| align_up(e, align)).ok_or(Error::OutOfMemory)?;
        let size = end - start;
        if size > self.0.info.max_buffer_size {
            return Err(Error::OutOfMemory);
        }
        // SAFETY: whole pages around the caller's memory, which stays
        // allocated until `unregister_host` (caller contract), and that
        // waits for the device work before the buffer goes.
        let buffer = unsafe { Buffer::import_host(&self.0.device, start as *mut u8, size) }?;
        let base = buffer.address;
        self.0.lock().table.insert_user(Arc::new(buffer), size);
        Ok(base + (host as u64 - start))
    }

    /// Undoes [`Context::register_host`] for the device address it returned
    /// (or any address inside the registration): waits for queued work,
    /// since that may still use the host memory, then drops the mapping.
    pub fn unregister_host(&self, addr: u64) -> Result<()> {
        let (base, _) = self
            .allocation_of(addr)
            .ok_or_else(|| Error::InvalidValue(format!("{addr:#x} is not registered host memory")))?;
        // The mapping goes even if the queued work failed (that error is
        // still reported): the caller is about to release the pages.
        let synced = self.synchronize();
        self.0.free(base)?;
        synced
    }

    /// Whether [`Context::alloc_managed`] works on this device (probed once).
    pub fn supports_managed(&self) -> bool {
        *self.0.managed.get_or_init(|| match self.alloc_managed(4096) {
            Ok(d) => {
                let _ = self.0.free(d);
                true
            }
            Err(_) => false,
        })
    }

    /// Frees the allocation based at `addr` (after queued work that may use it).
    pub fn free(&self, addr: u64) -> Result<()> {
        self.0.free(addr)
    }

    /// Makes the allocation based at `addr` (from [`Context::alloc`])
    /// available to other processes: returns what an importer needs besides
    /// the memory's file descriptor ([`Context::exported_memory_fd`]).
    /// [`Error::Unsupported`] when the device cannot share memory
    /// ([`DeviceInfo::supports_ipc_memory`]); [`Error::InvalidValue`] when
    /// `addr` is not the base of such an allocation.
    pub fn export_memory(&self, addr: u64) -> Result<ExportedMemory> {
        if !self.0.info.supports_ipc_memory {
            return Err(Error::Unsupported("this device cannot share memory with other processes".into()));
        }
        let mut st = self.0.lock();
        let (buffer, size) = st
            .table
            .user_at(addr)
            .ok_or_else(|| Error::InvalidValue(format!("{addr:#x} is not the base of a device allocation")))?;
        let exported = buffer.exported(size).ok_or_else(|| {
            Error::InvalidValue(format!(
                "{addr:#x} cannot be shared: host or managed memory, or allocated past the descriptor budget"
            ))
        })?;
        st.exported.retain(|_, b| b.strong_count() > 0);
        st.exported.insert(exported.id, Arc::downgrade(&buffer));
        Ok(exported)
    }

    /// A new file descriptor for the memory of the exported allocation `id`
    /// (see [`Context::export_memory`]), for another process to import;
    /// [`Error::NotFound`] once the allocation has been freed.
    #[cfg(unix)]
    pub fn exported_memory_fd(&self, id: u64) -> Result<std::os::fd::OwnedFd> {
        let buffer = self
            .0
            .lock()
            .exported
            .get(&id)
            .and_then(std::sync::Weak::upgrade)
            .ok_or_else(|| Error::NotFound(format!("exported allocation {id} (freed?)")))?;
        buffer.memory_fd()
    }

    /// Maps memory another process exported ([`Context::export_memory`] and
    /// [`Context::exported_memory_fd`] there, on a device with the same
    /// UUID) into this context: returns its device address here. Copies and
    /// kernels reach it like an allocation of this context; the host sees
    /// the other process's writes after it has synchronised. Released with
    /// [`Context::close_imported`].
    #[cfg(unix)]
    pub fn import_memory(&self, fd: std::os::fd::OwnedFd, memory: &ExportedMemory) -> Result<u64> {
        use std::os::fd::{AsRawFd, IntoRawFd};
        if !self.0.info.supports_ipc_memory {
            return Err(Error::Unsupported("this device cannot share memory with other processes".into()));
        }
        let fits = memory.offset & (ALLOC_ALIGN - 1) == 0
            && memory.offset.checked_add(memory.size).is_some_and(|end| end <= memory.buffer_size);
        if memory.size == 0 || !fits {
            return Err(Error::InvalidValue(format!(
                "exported allocation of {} bytes at offset {} in a {}-byte buffer",
                memory.size, memory.offset, memory.buffer_size
            )));
        }
        // On failure `fd` is still ours and closes here; on success the driver owns it.
        let buffer = Buffer::new_shareable(&self.0.device, memory.buffer_size, Some((fd.as_raw_fd(), memory)))?;
        let _ = fd.into_raw_fd();
        let addr = buffer.address + memory.offset;
        self.0.lock().table.insert_imported(Arc::new(buffer), addr, memory.size);
        Ok(addr)
    }

    /// Unmaps memory mapped by [`Context::import_memory`] (after queued work
    /// that may use it).
    pub fn close_imported(&self, addr: u64) -> Result<()> {
        let mut st = self.0.lock();
        let buffer = st.table.remove_imported(addr)?;
        if st.stream.has_pending() {
            st.stream.keep(buffer);
        }
        Ok(())
    }

    /// How many address ranges the fault checks would compare a global
    /// access against now (0 without checks): the default checks count a
    /// chunk that small allocations are carved from once, however many
    /// allocations it holds.
    pub fn fault_range_count(&self) -> usize {
        self.0.fault_range_count()
    }

    /// `(base, size)` of the allocation (or module variable buffer) containing `addr`.
    pub fn allocation_of(&self, addr: u64) -> Option<(u64, u64)> {
        self.0.lock().table.allocation_of(addr)
    }

    /// Copies host memory to device memory at `dst` (queued in order).
    pub fn copy_htod(&self, dst: u64, src: &[u8]) -> Result<()> {
        self.0.copy_htod(dst, src)
    }

    /// Copies device memory at `src` to host memory, after all queued work.
    pub fn copy_dtoh(&self, dst: &mut [u8], src: u64) -> Result<()> {
        self.0.copy_dtoh(dst, src)?;
        self.0.check_traps()
    }

    /// Copies `bytes` of device memory from `src` to `dst` (queued in order;
    /// overlapping ranges behave like `memmove`).
    pub fn copy_dtod(&self, dst: u64, src: u64, bytes: u64) -> Result<()> {
        self.0.copy_dtod(dst, src, bytes)
    }

    /// Sets `count` bytes at `dst` to `value`.
    pub fn memset_d8(&self, dst: u64, value: u8, count: u64) -> Result<()> {
        self.0.memset(dst, &[value], count)
    }

    /// Sets `count` 16-bit values at `dst` to `value`.
    pub fn memset_d16(&self, dst: u64, value: u16, count: u64) -> Result<()> {
        let bytes = count.checked_mul(2).ok_or_else(|| Error::InvalidValue("count too large".into()))?;
        self.0.memset(dst, &value.to_le_bytes(), bytes)
    }

    /// Sets `count` 32-bit values at `dst` to `value`.
    pub fn memset_d32(&self, dst: u64, value: u32, count: u64) -> Result<()> {
        let bytes = count.checked_mul(4).ok_or_else(|| Error::InvalidValue("count too large".into()))?;
        self.0.memset(dst, &value.to_le_bytes(), bytes)
    }

    /// `(free, total)` device memory in bytes (free = total minus this context's allocations).
    pub fn mem_info(&self) -> (u64, u64) {
        let used = self.0.lock().table.user_bytes;
        let total = self.0.info.total_memory;
        (total.saturating_sub(used), total)
    }

    /// Translates PTX and loads it. Bad PTX gives [`Error::InvalidPtx`] with
    /// the rendered diagnostics.
    pub fn load_module(&self, ptx: &str, file_name: &str) -> Result<Module> {
        self.0.load_module(ptx, file_name, self.0.info.emulate_fma, self.0.info.warp_path)
    }

    /// Like [`Context::load_module`], with warp operations built for `path`
    /// instead of the device's choice; [`Error::Unsupported`] unless the
    /// device can run it (see [`DeviceInfo::warp_paths`]).
    pub fn load_module_with_warp_path(&self, ptx: &str, file_name: &str, path: WarpPath) -> Result<Module> {
        if !self.0.info.warp_paths.contains(&path) {
            return Err(Error::Unsupported(format!("the {} warp path on this device", path.name())));
        }
        self.0.load_module(ptx, file_name, self.0.info.emulate_fma, path)
    }

    /// Loads an already translated module (for example `ptx2spv` output or a
    /// cached translation). `info` must be the metadata the translator
    /// produced with this device's options; the SPIR-V must follow the launch
    /// ABI in [`ptxvk_translator::abi`].
    pub fn load_spirv(&self, spirv: &[u32], info: ptxvk_translator::ModuleInfo) -> Result<Module> {
        self.0.load_spirv(spirv, info, self.0.info.warp_path)
    }

    /// The persistent cache's directory (`PTXVK_CACHE_DIR`), `None` when it
    /// is off (`PTXVK_CACHE=0`) or cannot be created.
    pub fn cache_dir(&self) -> Option<&std::path::Path> {
        self.0.device.disk_cache.as_ref().map(|c| c.dir())
    }

    /// How many modules this context found translated in the persistent
    /// cache, and how many it translated and stored there.
    pub fn cache_counts(&self) -> (u64, u64) {
        (self.0.cache_hits.load(Ordering::Relaxed), self.0.cache_stores.load(Ordering::Relaxed))
    }

    /// The translator options modules are translated with on this device.
    pub fn translate_options(&self) -> Options {
        self.0.options(self.0.info.emulate_fma, self.0.info.warp_path)
    }

    /// Queues a kernel launch. `params` is the packed parameter block (see
    /// [`Function::pack_params`]).
    pub fn launch(
        &self,
        f: &Function,
        grid: [u32; 3],
        block: [u32; 3],
        dynamic_shared_bytes: u32,
        params: &[u8],
    ) -> Result<()> {
        self.0.launch(f, grid, block, dynamic_shared_bytes, params, false)
    }

    /// Queues a cooperative launch (CUDA's `cuLaunchCooperativeKernel`): as
    /// [`Context::launch`], and the kernel may synchronise its grid (see
    /// `ptxvk_translator::abi::grid`). Every block must run at once:
    /// [`Error::CooperativeLaunchTooLarge`] when the grid has more blocks
    /// than [`DeviceInfo::coresident_workgroups`].
    pub fn launch_cooperative(
        &self,
        f: &Function,
        grid: [u32; 3],
        block: [u32; 3],
        dynamic_shared_bytes: u32,
        params: &[u8],
    ) -> Result<()> {
        // The grid workspace is the context's: cooperative launches are
        // ordered against all work.
        crate::stream::with_stream_tag(None, || self.0.launch(f, grid, block, dynamic_shared_bytes, params, true))
    }

    /// Makes the next queued command wait for all work queued before it,
    /// whatever its stream (for a wait on an event; see
    /// [`crate::with_stream_tag`]).
    pub fn order_next(&self) {
        self.0.lock().stream.order_next();
    }

    /// Barriers recorded between commands so far (statistics: tagged work
    /// of different streams shares epochs between barriers, see
    /// [`crate::with_stream_tag`]).
    pub fn barriers_recorded(&self) -> u64 {
        self.0.lock().stream.barriers()
    }

    /// Waits for all queued work. A kernel that executed `trap` makes this
    /// (and every later call) fail with [`Error::LaunchFailed`].
    pub fn synchronize(&self) -> Result<()> {
        // The trap words are read in the same submission as the work.
        self.0.check_traps()
    }

    /// Makes a context that a faulting kernel (or a trap or failed assert)
    /// failed usable again, as `cuDevicePrimaryCtxReset` does in CUDA: waits
    /// for the device, forgets the failure, and zeroes the trap words that
    /// reported it. Returns the failure there was, if any.
    pub fn clear_failure(&self) -> Option<Error> {
        let mut st = self.0.lock();
        let failed = st.stream.clear_failure()?;
        // Work queued after the failure never ran usefully: wait it out.
        if let Err(e) = st.stream.flush() {
            log::warn!("waiting for the work of a failed context: {e}");
            st.stream.clear_failure();
        }
        let _ = st.fault.take();
        let tripped = std::mem::take(&mut st.tripped);
        for (addr, _keep) in tripped {
            // A module unloaded meanwhile has no word left to clear.
            let _ = self.0.copy_htod_locked(&mut st, addr, &[0u8; 4]);
        }
        let _ = st.stream.flush();
        if st.stream.is_idle() {
            st.fault.work_done();
        }
        Some(failed)
    }

    /// A point in the command stream after the work queued so far, for
    /// [`Context::is_done`].
    pub fn work_mark(&self) -> u64 {
        self.0.lock().stream.mark()
    }

    /// Whether the work queued before `mark` (from [`Context::work_mark`])
    /// has finished. Never waits; work still being batched is submitted so
    /// that polling makes progress. Failures of that work (a trap) are reported by the next synchronisation.
    pub fn is_done(&self, mark: u64) -> Result<bool> {
        self.0.lock().stream.poll(mark)
    }

    /// Queues a timestamp behind the work queued so far: the device's clock
    /// when that work has finished (`vkCmdWriteTimestamp`), or, on devices
    /// whose queue has no timestamps, the host clock after waiting for it.
    pub fn record_timestamp(&self) -> Result<Timestamp> {
        self.0.record_timestamp()
    }

    /// Milliseconds from `start` to `end` (negative when `end` came first),
    /// waiting for the work before them if needed.
    pub fn elapsed_ms(&self, start: &Timestamp, end: &Timestamp) -> Result<f64> {
        self.0.elapsed_ms(start, end)
    }

    /// Size of the kernel printf FIFO in bytes (`CU_LIMIT_PRINTF_FIFO_SIZE`,
    /// 1 MiB by default). Records that do not fit are dropped.
    pub fn printf_fifo_size(&self) -> u64 {
        self.0.lock().printf.limit
    }

    /// Sets the printf FIFO size; [`Error::InvalidValue`] once a kernel that
    /// prints has been launched (as in CUDA), or for sizes under 64 bytes or
    /// of 4 GiB and more.
    pub fn set_printf_fifo_size(&self, bytes: u64) -> Result<()> {
        let mut st = self.0.lock();
        if st.printf.fifo.is_some() {
            return Err(Error::InvalidValue(
                "the printf FIFO size cannot change after a kernel that prints was launched".into(),
            ));
        }
        if !(64..1 << 32).contains(&bytes) {
            return Err(Error::InvalidValue(format!("printf FIFO size {bytes} is out of range")));
        }
        st.printf.limit = bytes & !7;
        Ok(())
    }

    /// Bytes of each thread's stack for recursive functions
    /// (`CU_LIMIT_STACK_SIZE`; 16 KiB by default).
    pub fn stack_size(&self) -> u32 {
        self.0.stack_bytes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sets the stack of recursive functions for modules loaded from now
    /// on: `bytes` rounded up to 16, at least the default 16 KiB (the
    /// translator's frames are larger than ptxas's), at most 1 MiB
    /// ([`Error::InvalidValue`] past it).
    pub fn set_stack_size(&self, bytes: u64) -> Result<()> {
        let max = u64::from(ptxvk_translator::recursion::MAX_STACK_BYTES);
        if bytes > max {
            return Err(Error::InvalidValue(format!("stack size {bytes} is more than {max} bytes")));
        }
        let v = bytes.div_ceil(16) * 16;
        let v = v.max(u64::from(ptxvk_translator::recursion::STACK_BYTES));
        self.0.stack_bytes.store(v as u32, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Whether launches whose `.shared` memory exceeds the device's
    /// Workgroup memory keep its first part there (each access then tests
    /// where its byte lives, and the kernel's code for shared accesses
    /// doubles) or keep all of it in device memory (one path, slower
    /// accesses). Default: keep a hot part, except on llvmpipe, whose
    /// compile time grows too much; `PTXVK_SHARED_HOT=0`/`1` chooses.
    pub fn shared_hot_part(&self) -> bool {
        self.0.shared_hot.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sets [`Context::shared_hot_part`] for launches from now on.
    pub fn set_shared_hot_part(&self, keep: bool) {
        self.0.shared_hot.store(keep, std::sync::atomic::Ordering::Relaxed);
    }

    /// Size of the device heap of kernels' `malloc` in bytes
    /// (`CU_LIMIT_MALLOC_HEAP_SIZE`, 8 MiB by default).
    pub fn malloc_heap_size(&self) -> u64 {
        self.0.lock().heap.limit
    }

    /// Sets the device heap size; [`Error::InvalidValue`] once a kernel that
    /// allocates has been launched (as in CUDA), or for sizes of 4 GiB and
    /// more (block offsets are 32-bit).
    pub fn set_malloc_heap_size(&self, bytes: u64) -> Result<()> {
        let mut st = self.0.lock();
        if st.heap.buffer.is_some() {
            return Err(Error::InvalidValue(
                "the malloc heap size cannot change after a kernel that allocates was launched".into(),
            ));
        }
        if bytes >= (1 << 32) - abi::heap::HEADER_BYTES {
            return Err(Error::InvalidValue(format!("malloc heap size {bytes} is out of range")));
        }
        st.heap.limit = bytes & !15;
        Ok(())
    }

    /// Collects kernel printf and assert output in memory instead of writing
    /// it to standard output (`false` restores standard output and discards
    /// what was collected). See [`Context::take_printf_output`].
    pub fn capture_printf(&self, on: bool) {
        self.0.lock().printf.capture = on.then(Vec::new);
    }

    /// The output collected since the last call (with [`Context::capture_printf`] on).
    pub fn take_printf_output(&self) -> Vec<u8> {
        self.0.lock().printf.capture.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Number of validation-layer warnings and errors seen so far (always 0
    /// without `PTXVK_VALIDATION=1`).
    pub fn validation_messages(&self) -> u32 {
        self.0.device.instance.messages.get()
    }
}

/// The kernel a module's trap word blames: the one kernel of the module
/// launched since the last check, or all of them when there were several
/// (one word serves the whole module).
fn kernels_named(kernels: &[String]) -> String {
    match kernels {
        [] => String::from("(none recorded)"),
        [one] => one.clone(),
        [first, ..] => format!(
            "{first} (or another of the {} kernels of its module launched since the last synchronisation: {})",
            kernels.len(),
            kernels.join(", ")
        ),
    }
}

/// Byte `rel` bytes past the start of a memset of `pattern` (period 1, 2 or 4).
fn pattern_byte(pattern: &[u8], rel: u64) -> u8 {
    pattern[(rel % pattern.len() as u64) as usize]
}

impl ContextInner {
    pub(crate) fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Prints the kernel output in the printf FIFO, then reads the trap
    /// words of the modules launched since the last check; a set word fails
    /// the context for good, as a trap or a failed assert does in CUDA.
    /// Flushes the stream with a copy of each trap word appended to the
    /// batch (one submission and wait, where reading each word on its own
    /// took one more per module: the launch round trip of an empty kernel
    /// cost about 1.4x a plain dispatch's), and returns the words with
    /// their values (`None`: its module was unloaded meanwhile).
    fn flush_reading_trap_words(&self) -> Result<Vec<TrapRead>> {
        let mut st = self.lock();
        let words = std::mem::take(&mut st.trap_words);
        // Words the host can read in place after the flush (all of them on
        // lavapipe) need no copy in the batch; the others are copied to a
        // readback buffer in the same submission.
        let (mut copies, mut direct) = (Vec::new(), Vec::new());
        for (i, (addr, _, _)) in words.iter().enumerate() {
            if let Ok(source) = st.table.resolve(*addr, 4, "source") {
                if source.buffer.host_readable() {
                    direct.push((i, source));
                } else {
                    copies.push((i, source));
                }
            }
        }
        let flush = |st: &mut State| -> Result<Option<Arc<Buffer>>> {
            let readback =
                if copies.is_empty() { None } else { Some(st.readback.get(&self.device, 4 * words.len() as u64)?) };
            if let Some(readback) = &readback {
                let cmd = st.stream.begin_command()?;
                for (i, source) in &copies {
                    let region = vk::BufferCopy { src_offset: source.offset, dst_offset: 4 * *i as u64, size: 4 };
                    // SAFETY: `cmd` is recording; the word lies inside its
                    // buffer and slot `i` inside the readback buffer; the
                    // flush below waits for the copy before either can go.
                    unsafe { self.device.raw.cmd_copy_buffer(cmd, source.buffer.raw, readback.raw, &[region]) };
                }
            }
            st.stream.flush()?;
            Ok(readback)
        };
        let readback = match flush(&mut st) {
            Ok(r) => r,
            Err(e) => {
                // Unread: a later synchronisation reads them (and a
                // context reset zeroes the ones that tripped).
                st.trap_words.extend(words);
                return Err(e);
            }
        };
        let mut values = vec![None; words.len()];
        for (i, source) in &direct {
            let mut word = [0u8; 4];
            // The flush waited for the batch, whose end makes device writes
            // visible to host reads.
            if source.buffer.read(source.offset, &mut word).is_ok() {
                values[*i] = Some(u32::from_le_bytes(word));
            }
        }
        if let Some(readback) = &readback {
            let mut bytes = vec![0u8; 4 * words.len()];
            readback.read(0, &mut bytes)?;
            for (i, _) in &copies {
                values[*i] =
                    Some(u32::from_le_bytes([bytes[4 * i], bytes[4 * i + 1], bytes[4 * i + 2], bytes[4 * i + 3]]));
            }
        }
        Ok(words.into_iter().zip(values).map(|((addr, kernels, data), v)| (addr, kernels, data, v)).collect())
    }

    fn check_traps(&self) -> Result<()> {
        let words = self.flush_reading_trap_words()?;
        self.drain_printf();
        {
            let mut st = self.lock();
            // Another thread may have queued work since this one synchronised.
            if st.stream.is_idle() {
                st.fault.work_done();
                if st.fault.race {
                    st.fault.collect_hazards()?;
                }
            }
        }
        for (addr, kernels, _data, w) in words {
            let kernel = kernels_named(&kernels);
            // A module unloaded meanwhile has no word left to read.
            let Some(w) = w else { continue };
            if w != 0 {
                self.lock().tripped.push((addr, _data.clone()));
            }
            if w & abi::printf::TRAP_ASSERT != 0 {
                let err = Error::Assert(format!("in kernel {kernel}"));
                self.lock().stream.fail(err.clone());
                return Err(err);
            }
            let fault_bits = abi::printf::TRAP_ILLEGAL_ADDRESS | abi::printf::TRAP_MISALIGNED;
            if w & fault_bits != 0 {
                let err = self.fault_error(&kernel, w);
                self.lock().stream.fail(err.clone());
                return Err(err);
            }
            if w & abi::printf::TRAP_GRID_SYNC != 0 {
                let err = Error::LaunchFailed(format!(
                    "kernel {kernel}: a grid synchronisation timed out (its blocks did not all arrive; on lavapipe \
                     the loop limiter ends a long wait)"
                ));
                self.lock().stream.fail(err.clone());
                return Err(err);
            }
            if w & abi::printf::TRAP_LOOP_LIMIT != 0 {
                let err = Error::LaunchFailed(format!(
                    "kernel {kernel}: a thread reached lavapipe's loop limit of {} loop iterations per invocation \
                     (llvmpipe ends every loop there); the results would be wrong",
                    abi::printf::LOOP_LIMIT
                ));
                self.lock().stream.fail(err.clone());
                return Err(err);
            }
            if w & abi::printf::TRAP_VECTOR_READ != 0 {
                let err = Error::LaunchFailed(format!(
                    "kernel {kernel}: a 16-byte ordered load (`ld.relaxed/.volatile/.acquire` of 16 bytes) saw \
                     writers of its lock slot move in each of its {} tries and could not read the bytes whole",
                    abi::printf::VECTOR_READ_TRIES
                ));
                self.lock().stream.fail(err.clone());
                return Err(err);
            }
            if w != 0 {
                let err = Error::LaunchFailed(format!("kernel {kernel} executed trap"));
                self.lock().stream.fail(err.clone());
                return Err(err);
            }
        }
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // State stays consistent across a panic in a caller's thread (every
        // mutation completes before anything that can panic), so ignore poisoning.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn record_timestamp(&self) -> Result<Timestamp> {
        let mut st = self.lock();
        st.stream.check()?;
        if self.info.timestamp_period_ns.is_none() {
            st.stream.flush()?;
            return Ok(Timestamp(Arc::new(Mutex::new(Stamp::Host(std::time::Instant::now())))));
        }
        if st.timestamps.pool.is_none() {
            let info =
                vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(TIMESTAMP_SLOTS);
            // SAFETY: a valid create info; the pool is destroyed by `QueryPool::drop`.
            let raw = unsafe { self.device.raw.create_query_pool(&info, None) }.map_err(crate::error::map_create)?;
            st.timestamps.pool = Some(QueryPool { raw, device: self.device.clone() });
            st.timestamps.free = (0..TIMESTAMP_SLOTS).rev().collect();
        }
        if st.timestamps.free.is_empty() {
            st.stream.flush()?;
            self.resolve_timestamps(&mut st);
        }
        let (Some(slot), Some(pool)) = (st.timestamps.free.pop(), st.timestamps.pool.as_ref().map(|p| p.raw)) else {
            return Err(Error::OutOfMemory);
        };
        st.stream.maybe_flush()?;
        let cmd = st.stream.begin_command()?;
        // SAFETY: `cmd` is recording outside any render pass; `slot` is a
        // query of the pool that no queued work uses (it was free).
        unsafe {
            self.device.raw.cmd_reset_query_pool(cmd, pool, slot, 1);
            self.device.raw.cmd_write_timestamp(cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE, pool, slot);
        }
        let cell = Arc::new(Mutex::new(Stamp::Pending));
        st.timestamps.pending.push((slot, cell.clone()));
        Ok(Timestamp(cell))
    }

    /// Reads back the timestamps of completed work (the stream is idle).
    fn resolve_timestamps(&self, st: &mut State) {
        let Some(pool) = st.timestamps.pool.as_ref().map(|p| p.raw) else {
            return;
        };
        for (slot, cell) in std::mem::take(&mut st.timestamps.pending) {
            let mut v = [0u64; 1];
            // SAFETY: the work that wrote the slot has completed (callers
            // flushed the stream); one 64-bit result fits `v`.
            let r =
                unsafe { self.device.raw.get_query_pool_results(pool, slot, &mut v, vk::QueryResultFlags::TYPE_64) };
            // A slot the device never wrote (its batch failed) reads as 0.
            let ticks = if r.is_ok() { v[0] } else { 0 };
            *cell.lock().unwrap_or_else(|p| p.into_inner()) = Stamp::Device(ticks);
            st.timestamps.free.push(slot);
        }
    }

    fn elapsed_ms(&self, start: &Timestamp, end: &Timestamp) -> Result<f64> {
        if matches!(start.get(), Stamp::Pending) || matches!(end.get(), Stamp::Pending) {
            let mut st = self.lock();
            st.stream.flush()?;
            self.resolve_timestamps(&mut st);
        }
        match (start.get(), end.get()) {
            (Stamp::Device(a), Stamp::Device(b)) => {
                let period = self.info.timestamp_period_ns.unwrap_or(1.0);
                Ok((b as i128 - a as i128) as f64 * period / 1e6)
            }
            (Stamp::Host(a), Stamp::Host(b)) => {
                Ok(if b >= a { (b - a).as_secs_f64() * 1e3 } else { -((a - b).as_secs_f64() * 1e3) })
            }
            _ => Err(Error::InvalidValue("the timestamps are not from the same context".into())),
        }
    }

    /// How many address ranges the fault checks' table would hold for a
    /// launch now (0 without fault checks): at most 8 keeps every check a
    /// few comparisons; more need a search per access (see [`crate::fault`]).
    pub(crate) fn fault_range_count(&self) -> usize {
        let st = self.lock();
        if st.fault.mode == FaultMode::Off {
            return 0;
        }
        let exact = st.fault.mode == FaultMode::Memcheck;
        crate::fault::merge(Self::live_ranges(&st, exact), !exact).len()
    }

    /// Every range a kernel may reach: allocations, module data, the heap,
    /// the grid workspace and the parameter buffers (each allocation's
    /// exact bytes with `exact`).
    fn live_ranges(st: &State, exact: bool) -> Vec<crate::fault::Range> {
        let mut live = Vec::new();
        st.table.live_ranges(exact, &mut live);
        st.stream.arena.live_ranges(&mut live);
        for b in [&st.heap.buffer, &st.grid].into_iter().flatten() {
            live.push(crate::fault::Range { base: b.address, end: b.address + b.size, block: b.block() });
        }
        live
    }

    /// The range table's depth for a launch now (see [`crate::fault`]):
    /// the table lists every range a kernel may reach (allocations, module
    /// data, the heap, the grid workspace and the parameter buffers).
    fn fault_ranges(&self, st: &mut State) -> Result<u32> {
        let live = Self::live_ranges(st, st.fault.mode == FaultMode::Memcheck);
        let (depth, table) = st.fault.prepare(&self.device, live)?;
        if let (Some(table), Some(log)) = (table, st.fault.log()) {
            // Ordered against all work: kernels read the table of their launch.
            st.stream.maybe_flush()?;
            let cmd = with_stream_tag(None, || st.stream.begin_command())?;
            // SAFETY: `cmd` is recording; the 8 bytes lie inside the log,
            // which the stream keeps alive until the batch completes.
            unsafe {
                self.device.raw.cmd_update_buffer(
                    cmd,
                    log.raw,
                    ptxvk_translator::abi::fault::RANGES,
                    &table.to_le_bytes(),
                )
            };
            st.stream.keep(log);
        }
        Ok(depth)
    }

    /// Zeroes the racecheck shadow for a launch and stores its address and
    /// slot count in the fault log, both in stream order against all work.
    fn race_shadow(&self, st: &mut State, blocks: u64, shared_bytes: u64) -> Result<()> {
        let (shadow, slots, bytes) = st.fault.race_shadow(&self.device, blocks, shared_bytes)?;
        let Some(log) = st.fault.log() else { return Ok(()) };
        st.stream.maybe_flush()?;
        let cmd = with_stream_tag(None, || st.stream.begin_command())?;
        let mut header = [0u8; 16];
        header[..8].copy_from_slice(&shadow.address.to_le_bytes());
        header[8..12].copy_from_slice(&slots.to_le_bytes());
        // SAFETY: `cmd` is recording; the filled range lies inside the
        // shadow and the 16 header bytes inside the log; the stream keeps
        // both alive until the batch completes.
        unsafe {
            self.device.raw.cmd_fill_buffer(cmd, shadow.raw, 0, bytes, 0);
            self.device.raw.cmd_update_buffer(cmd, log.raw, ptxvk_translator::abi::fault::RACE_SHADOW, &header);
        }
        st.stream.keep(shadow);
        st.stream.keep(log);
        Ok(())
    }

    /// The error of a launch whose kernel faulted (its trap word has
    /// `bits`): the first fault, and with the memcheck every fault
    /// reported on standard error.
    fn fault_error(&self, kernel: &str, bits: u32) -> Error {
        let mut st = self.lock();
        let (count, records) = match st.fault.take() {
            Ok(x) => x,
            Err(e) => return e,
        };
        let mut reports = Vec::with_capacity(records.len());
        for r in &records {
            let global = st
                .fault
                .sites
                .get(&r.module)
                .and_then(|(s, _)| s.get(r.site as usize))
                .is_none_or(|s| s.space == ptxvk_translator::abi::fault::SPACE_GLOBAL);
            let nearest = if global { st.table.nearest(r.address) } else { None };
            let freed = if global { st.table.freed_at(r.address) } else { None };
            reports.push(st.fault.describe(r, kernel, nearest, freed));
        }
        let memcheck = st.fault.mode == FaultMode::Memcheck;
        drop(st);
        if memcheck {
            let mut out = String::new();
            for rep in &reports {
                out.push_str(rep);
                out.push_str("=========\n");
            }
            if count as usize > records.len() {
                out.push_str(&format!(
                    "========= {} more errors were not recorded (the log holds {})\n",
                    count as usize - records.len(),
                    crate::fault::MEMCHECK_RECORDS
                ));
            }
            out.push_str(&format!("========= ERROR SUMMARY: {count} error{}\n", if count == 1 { "" } else { "s" }));
            eprint!("{out}");
        }
        let first =
            reports.first().map(|r| r.replace("=========     ", "; ").replace("========= ", "")).unwrap_or_default();
        let first = first.replace('\n', "");
        let more = if count > 1 { format!(" (and {} more)", count - 1) } else { String::new() };
        let msg = format!("kernel {kernel}: {first}{more}");
        if bits & abi::printf::TRAP_ILLEGAL_ADDRESS == 0 {
            Error::MisalignedAddress(msg)
        } else {
            Error::IllegalAddress(msg)
        }
    }

    /// The device address of the printf FIFO, created on first use.
    fn printf_fifo(&self, st: &mut State) -> Result<u64> {
        if let Some(b) = &st.printf.fifo {
            return Ok(b.address);
        }
        let limit = st.printf.limit;
        // The sink after the record space takes the records that do not fit.
        let size = abi::printf::HEADER_BYTES + limit + abi::printf::SINK_BYTES;
        let buffer = Buffer::new(&self.device, size, DEVICE_USAGE, MemoryLocation::GpuToCpu, 16, "ptxvk printf FIFO")?;
        let mut header = [0u8; abi::printf::HEADER_BYTES as usize];
        header[4..8].copy_from_slice(&(limit as u32).to_le_bytes());
        buffer.write(0, &header)?;
        let addr = buffer.address;
        st.printf.fifo = Some(Arc::new(buffer));
        Ok(addr)
    }

    /// The device address of the device heap, created (its header written
    /// through the mapping before any kernel can use it) on first use.
    fn malloc_heap(&self, st: &mut State) -> Result<u64> {
        if let Some(b) = &st.heap.buffer {
            return Ok(b.address);
        }
        let limit = st.heap.limit;
        let size = abi::heap::HEADER_BYTES + limit;
        let buffer = Buffer::new(&self.device, size, DEVICE_USAGE, MemoryLocation::CpuToGpu, 16, "ptxvk malloc heap")?;
        let mut header = vec![0u8; abi::heap::HEADER_BYTES as usize];
        let cap = abi::heap::CAPACITY as usize;
        header[cap..cap + 8].copy_from_slice(&limit.to_le_bytes());
        buffer.write(0, &header)?;
        let addr = buffer.address;
        st.heap.buffer = Some(Arc::new(buffer));
        Ok(addr)
    }

    /// Queues the zeroing of the context's grid workspace (creating it the
    /// first time) and returns its address.
    fn grid_workspace(&self, st: &mut State) -> Result<u64> {
        let buffer = match &st.grid {
            Some(b) => b.clone(),
            None => {
                let b = Arc::new(Buffer::new(
                    &self.device,
                    abi::grid::BYTES,
                    DEVICE_USAGE,
                    MemoryLocation::GpuOnly,
                    16,
                    "ptxvk grid workspace",
                )?);
                st.grid = Some(b.clone());
                b
            }
        };
        st.stream.maybe_flush()?;
        let cmd = st.stream.begin_command()?;
        // SAFETY: `cmd` is recording; both ranges lie inside the buffer, which
        // the stream keeps alive until the batch completes.
        unsafe {
            self.device.raw.cmd_fill_buffer(cmd, buffer.raw, 0, 4, abi::grid::BYTES as u32);
            self.device.raw.cmd_fill_buffer(cmd, buffer.raw, abi::grid::BARRIER, 4, 0);
        }
        let address = buffer.address;
        st.stream.keep(buffer);
        Ok(address)
    }

    /// Formats and prints the records in the printf FIFO and empties it.
    /// Callers have waited for all queued work.
    fn drain_printf(&self) {
        let mut st = self.lock();
        let Some(fifo) = st.printf.fifo.clone() else {
            return;
        };
        let mut header = [0u8; 8];
        if fifo.read(0, &mut header).is_err() {
            return;
        }
        let used = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as u64;
        if used == 0 {
            return;
        }
        let n = used.min(st.printf.limit) as usize;
        let mut data = vec![0u8; n];
        if fifo.read(abi::printf::HEADER_BYTES, &mut data).is_err() {
            return;
        }
        // The device is idle: reset the write position for the next launches.
        let _ = fifo.write(0, &[0u8; 4]);
        let mut strings = Strings { ctx: self, st: &mut st, cache: Vec::new() };
        let mut out = Vec::new();
        for r in crate::printf::records(&data) {
            match r {
                crate::printf::Record::Printf { format, args } => {
                    let Some(fmt) = strings.string(format) else { continue };
                    out.extend(crate::printf::format(&fmt, &args, &mut strings));
                }
                crate::printf::Record::Assert { message, file, function, ids } => {
                    let mut s = |a: u64| strings.string(a).unwrap_or_default();
                    let (m, f, func) = (s(message), s(file), s(function));
                    out.extend(crate::printf::assert_message(&m, &f, &func, &ids));
                }
            }
        }
        match st.printf.capture.as_mut() {
            Some(c) => c.extend_from_slice(&out),
            None => {
                use std::io::Write;
                let mut so = std::io::stdout().lock();
                // Output errors (a closed pipe) are not the kernel's failure.
                let _ = so.write_all(&out);
                let _ = so.flush();
            }
        }
    }

    pub(crate) fn alloc(&self, bytes: u64) -> Result<u64> {
        if bytes == 0 {
            return Err(Error::InvalidValue("cannot allocate 0 bytes".into()));
        }
        let size = align_up(bytes.max(4), ALLOC_ALIGN).ok_or(Error::OutOfMemory)?;
        if size > self.info.max_buffer_size {
            return Err(Error::OutOfMemory);
        }
        // Any allocation may be exported later (cuIpcGetMemHandle), so each
        // lies in exportable memory while the descriptor budget lasts: a
        // piece of a shared chunk, or memory of its own when large; beyond
        // the budget, or if the driver refuses, pooled memory.
        if self.info.supports_ipc_memory && size <= CHUNK_MAX_PIECE && !self.device.opaque_fd_dedicated_only {
            match self.carve(size) {
                Ok(Some(buffer)) => {
                    let addr = buffer.address;
                    self.lock().table.insert_user(Arc::new(buffer), bytes);
                    return Ok(addr);
                }
                Ok(None) => {}
                Err(e) => log::warn!("ptxvk: exportable memory failed ({e}); this allocation cannot be shared"),
            }
        }
        let shareable = self.info.supports_ipc_memory
            && (size > CHUNK_MAX_PIECE || self.device.opaque_fd_dedicated_only)
            && self.device.shareable_live.load(Ordering::Relaxed) < self.device.shareable_budget;
        let buffer = match shareable.then(|| Buffer::new_shareable(&self.device, size, None)) {
            Some(Ok(b)) if b.address & (ALLOC_ALIGN - 1) == 0 => b,
            other => {
                if let Some(Err(e)) = other {
                    log::warn!("ptxvk: a shareable allocation failed ({e}); this one cannot be shared");
                }
                let b = new_device_buffer(&self.device, size, "ptxvk allocation")?;
                b.zero_reused();
                b
            }
        };
        let addr = buffer.address;
        self.lock().table.insert_user(Arc::new(buffer), bytes);
        Ok(addr)
    }

    /// A buffer of `size` bytes carved from one of the context's
    /// exportable chunks, a new chunk when none has room (`None` when the
    /// descriptor budget allows no new chunk).
    fn carve(&self, size: u64) -> Result<Option<Buffer>> {
        // The memcheck leaves a gap after each piece, as compute-sanitizer
        // pads allocations: an access just past one meets no other.
        let gap = if self.fault_mode == FaultMode::Memcheck { ALLOC_ALIGN } else { 0 };
        // One buffer, placed in whichever chunk has room.
        let (mut buffer, requirements) = Chunk::piece_buffer(&self.device, size)?;
        let mut st = self.lock();
        // Chunks emptied by frees are released, but one is kept for reuse.
        let mut kept_empty = false;
        st.chunks.retain(|c| !c.is_empty() || !std::mem::replace(&mut kept_empty, true));
        let mut placed = false;
        for chunk in st.chunks.iter().rev() {
            if chunk.place(&mut buffer, &requirements, gap)? {
                placed = true;
                break;
            }
        }
        if !placed {
            if self.device.shareable_live.load(Ordering::Relaxed) >= self.device.shareable_budget {
                return Ok(None);
            }
            let chunk = Chunk::new(&self.device)?;
            placed = chunk.place(&mut buffer, &requirements, gap)?;
            st.chunks.push(chunk);
        }
        if !placed {
            return Ok(None);
        }
        check_aligned(&buffer)?;
        Ok(Some(buffer))
    }

    pub(crate) fn alloc_mapped(&self, bytes: u64) -> Result<(u64, *mut u8)> {
        if bytes == 0 {
            return Err(Error::InvalidValue("cannot allocate 0 bytes".into()));
        }
        // Page-aligned, like CUDA's page-locked host memory.
        const PAGE: u64 = 4096;
        let size = align_up(bytes.max(4), PAGE).ok_or(Error::OutOfMemory)?;
        if size > self.info.max_buffer_size {
            return Err(Error::OutOfMemory);
        }
        let buffer =
            Buffer::new(&self.device, size, DEVICE_USAGE, MemoryLocation::CpuToGpu, PAGE, "ptxvk mapped host memory")?;
        let host = buffer.host_ptr()?;
        let addr = buffer.address;
        self.lock().table.insert_user(Arc::new(buffer), bytes);
        Ok((addr, host))
    }

    pub(crate) fn free(&self, addr: u64) -> Result<()> {
        let mut st = self.lock();
        let buffer = st.table.remove_user(addr)?;
        // Other processes can no longer open it (queued work may keep the buffer a while).
        st.exported.remove(&buffer.id);
        if st.stream.has_pending() {
            // Queued commands may still use it: release it with the batch.
            st.stream.keep(buffer);
        }
        Ok(())
    }

    pub(crate) fn copy_htod(&self, dst: u64, src: &[u8]) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        let mut st = self.lock();
        self.copy_htod_locked(&mut st, dst, src)
    }

    fn copy_htod_locked(&self, st: &mut State, dst: u64, src: &[u8]) -> Result<()> {
        st.stream.check()?;
        let target = st.table.resolve(dst, src.len() as u64, "destination")?;
        for (i, chunk) in src.chunks(STAGING_CHUNK as usize).enumerate() {
            st.stream.maybe_flush()?;
            let staged = st.stream.arena.alloc(&self.device, chunk.len() as u64)?;
            staged.buffer.write(staged.offset, chunk)?;
            let region = vk::BufferCopy {
                src_offset: staged.offset,
                dst_offset: target.offset + (i as u64) * STAGING_CHUNK,
                size: chunk.len() as u64,
            };
            let cmd = st.stream.begin_command()?;
            // SAFETY: `cmd` is recording; both ranges lie inside their buffers
            // (resolve/arena checked them); the buffers stay alive until the
            // batch completes (arena reset / table or keep-alive).
            unsafe { self.device.raw.cmd_copy_buffer(cmd, staged.buffer.raw, target.buffer.raw, &[region]) };
            st.stream.keep(target.buffer.clone());
        }
        Ok(())
    }

    pub(crate) fn copy_dtoh(&self, dst: &mut [u8], src: u64) -> Result<()> {
        let mut st = self.lock();
        self.copy_dtoh_locked(&mut st, dst, src)
    }

    fn copy_dtoh_locked(&self, st: &mut State, dst: &mut [u8], src: u64) -> Result<()> {
        if dst.is_empty() {
            return st.stream.flush();
        }
        st.stream.check()?;
        let source = st.table.resolve(src, dst.len() as u64, "source")?;
        for (i, chunk) in dst.chunks_mut(STAGING_CHUNK as usize).enumerate() {
            let readback = st.readback.get(&self.device, chunk.len() as u64)?;
            let region = vk::BufferCopy {
                src_offset: source.offset + (i as u64) * STAGING_CHUNK,
                dst_offset: 0,
                size: chunk.len() as u64,
            };
            let cmd = st.stream.begin_command()?;
            // SAFETY: `cmd` is recording; both ranges are inside their buffers;
            // the flush below waits for the copy before the buffers can go.
            unsafe { self.device.raw.cmd_copy_buffer(cmd, source.buffer.raw, readback.raw, &[region]) };
            st.stream.flush()?;
            readback.read(0, chunk)?;
        }
        Ok(())
    }

    pub(crate) fn copy_dtod(&self, dst: u64, src: u64, bytes: u64) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let mut st = self.lock();
        st.stream.check()?;
        let from = st.table.resolve(src, bytes, "source")?;
        let to = st.table.resolve(dst, bytes, "destination")?;
        let same = Arc::ptr_eq(&from.buffer, &to.buffer);
        let overlap = same && from.offset < to.offset + bytes && to.offset < from.offset + bytes;
        let d = &self.device.raw;
        if !overlap {
            let region = vk::BufferCopy { src_offset: from.offset, dst_offset: to.offset, size: bytes };
            let cmd = st.stream.begin_command()?;
            // SAFETY: `cmd` is recording; the ranges are inside their buffers
            // and do not overlap; both buffers are kept alive for the batch.
            unsafe { d.cmd_copy_buffer(cmd, from.buffer.raw, to.buffer.raw, &[region]) };
            st.stream.keep(from.buffer.clone());
            st.stream.keep(to.buffer.clone());
            return Ok(());
        }
        // Overlapping: bounce each chunk through staging memory, walking
        // backwards when the destination is above the source (memmove).
        let chunks = bytes.div_ceil(STAGING_CHUNK);
        for n in 0..chunks {
            let k = if to.offset > from.offset { chunks - 1 - n } else { n };
            let start = k * STAGING_CHUNK;
            let len = STAGING_CHUNK.min(bytes - start);
            st.stream.maybe_flush()?;
            let tmp = st.stream.arena.alloc(&self.device, len)?;
            let cmd = st.stream.begin_command()?;
            let r1 = vk::BufferCopy { src_offset: from.offset + start, dst_offset: tmp.offset, size: len };
            // SAFETY: as above; `tmp` is a fresh arena range.
            unsafe { d.cmd_copy_buffer(cmd, from.buffer.raw, tmp.buffer.raw, &[r1]) };
            let cmd = st.stream.begin_command()?;
            let r2 = vk::BufferCopy { src_offset: tmp.offset, dst_offset: to.offset + start, size: len };
            // SAFETY: as above; the barrier from `begin_command` orders this after r1.
            unsafe { d.cmd_copy_buffer(cmd, tmp.buffer.raw, to.buffer.raw, &[r2]) };
            st.stream.keep(to.buffer.clone());
        }
        Ok(())
    }

    /// Fills `bytes` bytes at `dst` with `pattern` repeated (period 1, 2 or 4).
    pub(crate) fn memset(&self, dst: u64, pattern: &[u8], bytes: u64) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let mut st = self.lock();
        st.stream.check()?;
        let target = st.table.resolve(dst, bytes, "destination")?;
        let d = &self.device.raw;
        // Offsets inside the buffer: fill the 4-aligned middle, stage the edges.
        let start = target.offset;
        let end = start + bytes;
        let mid_start = align_up(start, 4).ok_or(Error::OutOfMemory)?.min(end);
        let mid_end = (end & !3).max(mid_start);
        if mid_end > mid_start {
            let mut word = [0u8; 4];
            for (k, b) in word.iter_mut().enumerate() {
                *b = pattern_byte(pattern, mid_start - start + k as u64);
            }
            let word = u32::from_le_bytes(word);
            let cmd = st.stream.begin_command()?;
            // SAFETY: `cmd` is recording; offset and size are multiples of 4
            // inside the buffer, which has TRANSFER_DST usage.
            unsafe { d.cmd_fill_buffer(cmd, target.buffer.raw, mid_start, mid_end - mid_start, word) };
        }
        for (a, b) in [(start, mid_start), (mid_end, end)] {
            if b > a {
                let edge: Vec<u8> = (a..b).map(|o| pattern_byte(pattern, o - start)).collect();
                st.stream.maybe_flush()?;
                let staged = st.stream.arena.alloc(&self.device, edge.len() as u64)?;
                staged.buffer.write(staged.offset, &edge)?;
                let cmd = st.stream.begin_command()?;
                let region = vk::BufferCopy { src_offset: staged.offset, dst_offset: a, size: b - a };
                // SAFETY: `cmd` is recording; ranges are inside their buffers.
                unsafe { d.cmd_copy_buffer(cmd, staged.buffer.raw, target.buffer.raw, &[region]) };
            }
        }
        st.stream.keep(target.buffer);
        Ok(())
    }

    fn options(&self, emulate_fma: bool, warp_path: WarpPath) -> Options {
        Options {
            target_env: self.info.target_env,
            entry: None,
            skip_entries: Vec::new(),
            max_push_constant_bytes: self.info.max_push_constant_bytes,
            emulate_fma,
            float_atomics: self.info.supports_buffer_f32_atomic_add,
            warp_path,
            denorm_preserve_f32: self.info.denorm_preserve_f32,
            denorm_preserve_f64: self.info.denorm_preserve_f64,
            signed_zero_inf_nan_f32: self.info.signed_zero_inf_nan_f32,
            signed_zero_inf_nan_f64: self.info.signed_zero_inf_nan_f64,
            signed_zero_inf_nan_f16: self.info.signed_zero_inf_nan_f16,
            zero_operand_workaround: self.info.driver_name == "llvmpipe",
            exact_f64_rounding: self.info.driver_name == "llvmpipe",
            correct_f64_div_sqrt: self.info.correct_f64_div_sqrt,
            // It takes a 64-bit pointer parameter apart lane by lane where it
            // does not see that the value is the same in every lane.
            uniform_params: self.info.driver_name == "llvmpipe"
                && self.info.supports_subgroup_ballot
                && !std::env::var(crate::instance::UNIFORM_PARAMS_ENV).is_ok_and(|v| v == "0"),
            printf_sites: true,
            generic_to_global: true,
            memory_semantics: self.info.driver_name != "llvmpipe",
            // llvmpipe's loop limiter ends a spin-wait after 65535 polls.
            unroll_spin_loops: if self.info.driver_name == "llvmpipe" { 64 } else { 0 },
            // Its loop limiter counts back-edges: small loops get 8 copies of
            // their body per back-edge.
            unroll_loops: if self.info.driver_name == "llvmpipe" {
                std::env::var(crate::instance::UNROLL_LOOPS_ENV).ok().and_then(|v| v.parse().ok()).unwrap_or(8)
            } else {
                0
            },
            // It runs each worker thread's share of a grid as one contiguous
            // run: blocks that wait on earlier ones would wait on a whole run.
            block_order_threads: if self.info.driver_name == "llvmpipe" {
                crate::instance::block_order_threads()
            } else {
                0
            },
            // Its loop limiter ends loops silently after 65535 iterations in all.
            loop_limit: self.info.driver_name == "llvmpipe"
                && !std::env::var(crate::instance::LOOP_LIMIT_ENV).is_ok_and(|v| v == "0"),
            // So threads that loop past it stop and go on in resume rounds.
            resume_loops: self.info.driver_name == "llvmpipe" && crate::instance::resume_rounds() > 0,
            resume_count: std::env::var(crate::instance::RESUME_COUNT_ENV).is_ok_and(|v| v == "1"),
            // It recomputes values a loop leaves behind for lanes that left early.
            loop_live_outs_in_memory: self.info.driver_name == "llvmpipe"
                && !std::env::var(crate::instance::LOOP_LIVE_OUTS_ENV).is_ok_and(|v| v == "0"),
            // ptxas fuses mul + add pairs without rounding modifiers.
            contract: !std::env::var(crate::instance::FMAD_ENV).is_ok_and(|v| v == "0" || v == "false"),
            recursion_stack_bytes: self.stack_bytes.load(std::sync::atomic::Ordering::Relaxed),
            shared_spill: !std::env::var(crate::instance::SHARED_SPILL_ENV).is_ok_and(|v| v == "0"),
            forward_progress: !std::env::var(crate::instance::FORWARD_PROGRESS_ENV).is_ok_and(|v| v == "0"),
            lockstep: !std::env::var(crate::instance::LOCKSTEP_ENV).is_ok_and(|v| v == "0"),
            interleave_every_loop: std::env::var(crate::instance::FORWARD_PROGRESS_ENV).is_ok_and(|v| v == "all"),
            fault_checks: self.fault_mode != FaultMode::Off,
            race_checks: self.race_check,
        }
    }

    pub(crate) fn load_module(
        &self,
        ptx: &str,
        file_name: &str,
        emulate_fma: bool,
        warp_path: WarpPath,
    ) -> Result<Module> {
        let dump = dump_path(file_name);
        if let Some(p) = &dump {
            // Best effort: a dump that cannot be written does not fail the load.
            let _ = std::fs::write(p.with_extension("ptx"), ptx);
        }
        let mut options = self.options(emulate_fma, warp_path);
        // PTX from the `ptxas` stand-in keeps the assembler's `--fmad=false`.
        if ptxvk_translator::ptxas_standin_fmad(ptx) == Some(false) {
            options.contract = false;
        }
        let validate = std::env::var(crate::instance::SPIRV_VAL_ENV).is_ok_and(|v| v == "1");
        // A dump shows a translation made now.
        let cache = self.device.disk_cache.as_ref().filter(|_| dump.is_none());
        let key =
            cache.map(|_| crate::disk_cache::translation_key(&self.info, &options, max_module_ids(), file_name, ptx));
        if let (Some(cache), Some(key)) = (cache, &key) {
            if let Some(hit) = cache.get("t", key).and_then(|p| crate::disk_cache::CachedTranslation::decode(&p)) {
                if crate::instance::trace_level() >= 1 {
                    eprintln!("ptxvk: {file_name}: translation from the cache in {}", cache.dir().display());
                }
                for (name, diag) in &hit.deferred {
                    log::warn!("{file_name}: kernel {name} is left out (getting or launching it fails): {diag}");
                }
                if validate {
                    for spirv in &hit.shaders {
                        spirv_val(spirv, self.info.target_env, file_name)?;
                    }
                }
                self.cache_hits.fetch_add(1, Ordering::Relaxed);
                return self.load_shaders(&hit.shaders, hit.info, warp_path, hit.deferred);
            }
        }
        let prepared =
            ptxvk_translator::prepare(ptx, file_name, &options).map_err(|d| Error::InvalidPtx(d.to_string()))?;
        let (translation, deferred) = match prepared.emit(&options) {
            Ok(t) => (t, Vec::new()),
            Err(whole) => without_failing_entries(&prepared, &options, whole)?,
        };
        for (name, diag) in &deferred {
            log::warn!("{file_name}: kernel {name} is left out (getting or launching it fails): {diag}");
        }
        if let Some(p) = &dump {
            let bytes: Vec<u8> = translation.spirv.iter().flat_map(|w| w.to_le_bytes()).collect();
            let _ = std::fs::write(p.with_extension("spv"), bytes);
        }
        // A module over SPIR-V's id limit (CUB's libraries, say) becomes one
        // SPIR-V module per entry, each with the functions it calls; the
        // module data layout and the launch metadata stay the whole module's.
        // Should an entry not translate alone as it does in the module, the
        // module stays whole (as drivers that take over-limit modules, such
        // as llvmpipe, run it).
        let split = (ptxvk_translator::id_bound(&translation.spirv) > max_module_ids())
            .then(|| split_by_entry(&prepared, &options, &translation.info))
            .and_then(|r| r.map_err(|e| log::warn!("{file_name}: kept as one SPIR-V module: {e}")).ok());
        let shaders = split.unwrap_or_else(|| vec![translation.spirv]);
        if validate {
            for spirv in &shaders {
                spirv_val(spirv, self.info.target_env, file_name)?;
            }
        }
        let entry = crate::disk_cache::CachedTranslation { shaders, info: translation.info, deferred };
        let encoded = cache.map(|_| entry.encode());
        let module = self.load_shaders(&entry.shaders, entry.info, warp_path, entry.deferred)?;
        // Stored once the driver took it.
        if let (Some(cache), Some(key), Some(encoded)) = (cache, &key, encoded) {
            cache.put("t", key, &encoded);
            self.cache_stores.fetch_add(1, Ordering::Relaxed);
        }
        Ok(module)
    }

    pub(crate) fn load_spirv(
        &self,
        spirv: &[u32],
        info: ptxvk_translator::ModuleInfo,
        warp_path: WarpPath,
    ) -> Result<Module> {
        self.load_shaders(&[spirv.to_vec()], info, warp_path, Vec::new())
    }

    /// Loads a module from one SPIR-V module for all entries, or one per
    /// entry (in the order of `info.entries`); `deferred` are the entries
    /// left out, with their diagnostics.
    fn load_shaders(
        &self,
        shaders: &[Vec<u32>],
        info: ptxvk_translator::ModuleInfo,
        warp_path: WarpPath,
        deferred: Vec<(String, String)>,
    ) -> Result<Module> {
        match shaders {
            [one] => check_entry_points(one, &info.entries)?,
            many if many.len() == info.entries.len() => {
                for (spirv, entry) in many.iter().zip(&info.entries) {
                    check_entry_points(spirv, std::slice::from_ref(entry))?;
                }
            }
            _ => return Err(Error::InvalidValue("one SPIR-V module per entry, or one for all".into())),
        }
        for e in &info.entries {
            if e.push_constant_bytes > self.info.max_push_constant_bytes || e.push_constant_bytes % 4 != 0 {
                return Err(Error::InvalidValue(format!(
                    "entry {} needs {} push-constant bytes; the device allows {}",
                    e.name, e.push_constant_bytes, self.info.max_push_constant_bytes
                )));
            }
        }
        let data = if info.global_data_bytes > 0 {
            let size = align_up(info.global_data_bytes, ALLOC_ALIGN).ok_or(Error::OutOfMemory)?;
            let buffer = Arc::new(new_device_buffer(&self.device, size, "ptxvk module data")?);
            let mut image = module_data_image(&info, buffer.address)?;
            let mut st = self.lock();
            if let Some(off) = info.fault_offset {
                // The module's word holding the context's fault log.
                let log = st.fault.log_address(&self.device)?;
                let bad = || Error::InvalidValue("the fault log word lies outside the module data".into());
                let at = usize::try_from(off).map_err(|_| bad())?;
                image.get_mut(at..at + 8).ok_or_else(bad)?.copy_from_slice(&log.to_le_bytes());
            }
            st.table.insert_module(&buffer, info.global_data_bytes);
            drop(st);
            self.copy_htod(buffer.address, &image)?;
            Some(buffer)
        } else {
            None
        };
        let mut inner = ModuleInner::new(&self.device, shaders, info, data, warp_path)?;
        inner.deferred = deferred;
        Ok(Module(Arc::new(inner)))
    }

    pub(crate) fn launch(
        &self,
        f: &Function,
        grid: [u32; 3],
        block: [u32; 3],
        dynamic_shared_bytes: u32,
        params: &[u8],
        cooperative: bool,
    ) -> Result<()> {
        if !Arc::ptr_eq(&f.module.device, &self.device) {
            return Err(Error::InvalidValue(format!("{} belongs to another context", f.name())));
        }
        let entry = f.info();
        let info = &self.info;
        if grid.contains(&0) || block.contains(&0) {
            return Err(Error::InvalidValue(format!(
                "launch of {}: grid {grid:?} and block {block:?} must be nonzero",
                entry.name
            )));
        }
        for d in 0..3 {
            if grid[d] > info.max_grid_dim[d] {
                return Err(Error::InvalidValue(format!(
                    "launch of {}: grid {grid:?} exceeds {:?}",
                    entry.name, info.max_grid_dim
                )));
            }
            if block[d] > info.max_block_dim[d] {
                return Err(Error::InvalidValue(format!(
                    "launch of {}: block {block:?} exceeds {:?}",
                    entry.name, info.max_block_dim
                )));
            }
        }
        let threads = block.iter().map(|&b| b as u64).product::<u64>();
        if cooperative {
            let blocks = grid.iter().map(|&g| g as u64).product::<u64>();
            let most = info.coresident_workgroups as u64;
            if blocks > most {
                return Err(Error::CooperativeLaunchTooLarge(format!(
                    "cooperative launch of {}: {blocks} blocks, but at most {most} run at once on this device",
                    entry.name
                )));
            }
        }
        if threads > info.max_threads_per_block as u64 {
            return Err(Error::InvalidValue(format!(
                "launch of {}: {threads} threads per block exceed the device's {}",
                entry.name, info.max_threads_per_block
            )));
        }
        if let Some(req) = entry.reqntid {
            if req != block {
                return Err(Error::InvalidValue(format!(
                    "launch of {}: block {block:?} differs from .reqntid {req:?}",
                    entry.name
                )));
            }
        }
        if let Some(max) = entry.maxntid {
            let limit = max.iter().map(|&b| b as u64).product::<u64>();
            if threads > limit {
                return Err(Error::InvalidValue(format!(
                    "launch of {}: {threads} threads per block exceed .maxntid {max:?}",
                    entry.name
                )));
            }
        }
        // On the slice warp path every subgroup must be full: pad to whole subgroups.
        let granule = if f.module.warp_path == WarpPath::Slice { info.subgroup_size } else { 32 };
        let workgroup_size = abi::workgroup_size(block, granule);
        let scratch = entry.scratch_bytes(workgroup_size);
        let shared = abi::shared_words(
            entry.static_shared_bytes,
            if entry.uses_dynamic_shared { dynamic_shared_bytes } else { 0 },
        );
        // The module's other `.shared` variable has one word (see the ABI's
        // "Shared memory variables"); some tools count it.
        let other = if f.module.two_shared_variables { 8 } else { 0 };
        let keep_hot = self.shared_hot.load(Ordering::Relaxed);
        let plan =
            SharedPlan::new(entry, shared, scratch + other, info.max_shared_bytes, keep_hot).ok_or_else(|| {
                Error::LaunchOutOfResources(format!(
                "launch of {}: {} bytes of static and {dynamic_shared_bytes} of dynamic shared memory, with {scratch} \
                 of warp scratch for {threads} threads, exceed the device's {}{}",
                entry.name,
                entry.static_shared_bytes,
                info.max_shared_bytes,
                if entry.shared_spill { " (and the most a block may spill)" } else { "" }
            ))
            })?;
        let param_bytes = entry.param_bytes as usize;
        if params.len() < param_bytes {
            return Err(Error::InvalidValue(format!(
                "launch of {}: parameter block is {} bytes, the kernel takes {param_bytes}",
                entry.name,
                params.len()
            )));
        }
        let params = &params[..param_bytes];
        let total_blocks = grid.iter().map(|&g| g as u64).product::<u64>();
        // Workgroups per dispatch: the device's limit, and with spilling as
        // many as the spill area's budget holds.
        let mut limit = info.max_dispatch;
        if plan.stride > 0 {
            let most = (SPILL_BUDGET_BYTES / plan.stride as u64).max(1);
            if cooperative && most < total_blocks {
                return Err(Error::CooperativeLaunchTooLarge(format!(
                    "cooperative launch of {}: {total_blocks} blocks each spilling {} bytes of shared memory \
                     to device memory do not run at once",
                    entry.name, plan.stride
                )));
            }
            let mut room = most;
            for d in 0..3 {
                limit[d] = (limit[d] as u64).min(grid[d] as u64).min(room.max(1)) as u32;
                room /= limit[d].max(1) as u64;
            }
        }

        let mut st = self.lock();
        st.stream.check()?;
        st.stream.maybe_flush()?;
        let spill_address = if plan.stride > 0 {
            let per_dispatch = limit.iter().map(|&l| l as u64).product::<u64>();
            self.spill_area(&mut st, per_dispatch * plan.stride as u64)?
        } else {
            0
        };
        let mut key = PipelineKey {
            entry: f.index,
            workgroup_size: workgroup_size as u32,
            ntid: block,
            shared_words: if entry.shared_wide { 1 } else { plan.hot_words.max(1) },
            shared_wide_words: if entry.shared_wide { plan.hot_words.div_ceil(2).max(1) } else { 1 },
            spill_hot_bytes: if plan.stride > 0 { plan.hot_words * 4 } else { 0 },
            dynamic_shared_bytes,
            spill_address,
            spill_stride: plan.stride,
            fault_depth: 0,
        };
        if let (Some(off), Some(data)) = (f.module.info.trap_offset, &f.module.data) {
            let word = data.address + off;
            match st.trap_words.iter_mut().find(|(a, _, _)| *a == word) {
                Some((_, kernels, _)) => {
                    if !kernels.contains(&entry.name) {
                        kernels.push(entry.name.clone());
                    }
                }
                None => st.trap_words.push((word, vec![entry.name.clone()], data.clone())),
            }
        }
        if let (Some(off), Some(data)) = (f.module.info.printf_offset, &f.module.data) {
            let fifo = self.printf_fifo(&mut st)?;
            if f.module.printf_slot.swap(fifo, Ordering::Relaxed) != fifo {
                // The slot is the module's: ordered against all work.
                with_stream_tag(None, || self.copy_htod_locked(&mut st, data.address + off, &fifo.to_le_bytes()))?;
            }
        }
        if let (Some(off), Some(data)) = (f.module.info.heap_offset, &f.module.data) {
            let heap = self.malloc_heap(&mut st)?;
            if f.module.heap_slot.swap(heap, Ordering::Relaxed) != heap {
                with_stream_tag(None, || self.copy_htod_locked(&mut st, data.address + off, &heap.to_le_bytes()))?;
            }
        }
        if let (Some(off), Some(data)) = (f.module.info.grid_offset, &f.module.data) {
            let ws = if cooperative { self.grid_workspace(&mut st)? } else { 0 };
            if f.module.grid_slot.swap(ws, Ordering::Relaxed) != ws {
                with_stream_tag(None, || self.copy_htod_locked(&mut st, data.address + off, &ws.to_le_bytes()))?;
            }
        }
        // Resume rounds (see `abi::resume`): the context's area, ordered
        // after and before all other work; its header zeroed.
        let rounds = crate::instance::resume_rounds();
        let resume = match (f.module.info.resume_offset, &f.module.data) {
            (Some(off), Some(data)) if entry.resumable && rounds > 0 => {
                let area = self.resume_area(&mut st)?;
                if f.module.resume_slot.swap(area.address, Ordering::Relaxed) != area.address {
                    let mut slot = [0u8; abi::resume::SLOT_BYTES as usize];
                    slot[0..8].copy_from_slice(&area.address.to_le_bytes());
                    slot[8..12].copy_from_slice(&(RESUME_HALF_BYTES as u32).to_le_bytes());
                    slot[12..16].copy_from_slice(&rounds.to_le_bytes());
                    with_stream_tag(None, || self.copy_htod_locked(&mut st, data.address + off, &slot))?;
                }
                st.stream.order_next();
                let cmd = st.stream.begin_command()?;
                // SAFETY: `cmd` is recording; the range lies inside the area,
                // which the stream keeps alive until the batch completes.
                unsafe { self.device.raw.cmd_fill_buffer(cmd, area.raw, 0, abi::resume::HEADER_BYTES, 0) };
                st.stream.keep(area.clone());
                st.stream.order_next();
                Some(area)
            }
            _ => None,
        };
        let param_address = match entry.param_passing {
            ParamPassing::Buffer => {
                let staged = st.stream.arena.alloc(&self.device, (param_bytes as u64).max(4))?;
                staged.buffer.write(staged.offset, params)?;
                staged.address()
            }
            ParamPassing::PushConstants => 0,
        };
        // After the heap, the grid workspace and the parameter buffer exist:
        // the table lists them.
        if let (Some(_), Some(data)) = (f.module.info.fault_offset, &f.module.data) {
            key.fault_depth = self.fault_ranges(&mut st)?;
            let (sites, file) = &f.module.fault_sites;
            st.fault.sites.insert(data.address, (sites.clone(), file.clone()));
            if f.module.info.race_checked && st.fault.race {
                // What the kernel's `shared_limit` is: the Workgroup array,
                // or the hot part plus the spilled part.
                let shared_bytes = if key.spill_stride > 0 {
                    key.spill_hot_bytes as u64 + key.spill_stride as u64
                } else if entry.shared_wide {
                    key.shared_wide_words as u64 * 8
                } else {
                    key.shared_words as u64 * 4
                };
                self.race_shadow(&mut st, total_blocks, shared_bytes)?;
            }
        }
        let (pipeline, layout) = f.module.pipeline(&key)?;
        let mut push = vec![0u8; entry.push_constant_bytes as usize];
        let header_len = (abi::PUSH_HEADER_BYTES as usize).min(push.len());
        if entry.param_passing == ParamPassing::PushConstants && push.len() > header_len {
            let n = params.len().min(push.len() - header_len);
            push[header_len..header_len + n].copy_from_slice(&params[..n]);
        }
        let mut header = [0u32; abi::PUSH_HEADER_WORDS as usize];
        header[3..6].copy_from_slice(&grid);
        header[6] = param_address as u32;
        header[7] = (param_address >> 32) as u32;
        let data_address = f.module.data_address();
        header[8] = data_address as u32;
        header[9] = (data_address >> 32) as u32;

        let d = &self.device.raw;
        if spill_address != 0 {
            // One spill area for the context: after all queued work, and
            // before all later work, whatever its stream.
            st.stream.order_next();
        }
        let cmd = st.stream.begin_command()?;
        // SAFETY: `cmd` is recording; the pipeline and layout are live and kept
        // alive with their module until the batch completes.
        unsafe { d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipeline.raw) };
        let mut dispatches = 0u32;
        let mut z = 0;
        while z < grid[2] {
            let nz = (grid[2] - z).min(limit[2]);
            let mut y = 0;
            while y < grid[1] {
                let ny = (grid[1] - y).min(limit[1]);
                let mut x = 0;
                while x < grid[0] {
                    let nx = (grid[0] - x).min(limit[0]);
                    header[0] = x;
                    header[1] = y;
                    header[2] = z;
                    for (i, w) in header.iter().enumerate() {
                        if i * 4 < header_len {
                            push[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
                        }
                    }
                    if spill_address != 0 && dispatches > 0 {
                        // The dispatches of a launch take turns in the spill area.
                        let barrier = vk::MemoryBarrier::default()
                            .src_access_mask(vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE)
                            .dst_access_mask(vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE);
                        let stage = vk::PipelineStageFlags::COMPUTE_SHADER;
                        // SAFETY: `cmd` is recording.
                        unsafe {
                            d.cmd_pipeline_barrier(
                                cmd,
                                stage,
                                stage,
                                vk::DependencyFlags::empty(),
                                &[barrier],
                                &[],
                                &[],
                            )
                        };
                    }
                    dispatches += 1;
                    // SAFETY: `cmd` is recording with `pipeline` bound; the push
                    // range matches the layout's single range.
                    unsafe {
                        if !push.is_empty() {
                            d.cmd_push_constants(cmd, layout, vk::ShaderStageFlags::COMPUTE, 0, &push);
                        }
                        d.cmd_dispatch(cmd, nx, ny, nz);
                    }
                    x += nx;
                }
                y += ny;
            }
            z += nz;
        }
        if let Some(area) = &resume {
            // Round r reads the records and the indirect command round r - 1 wrote.
            let barrier = vk::MemoryBarrier::default().src_access_mask(vk::AccessFlags::SHADER_WRITE).dst_access_mask(
                vk::AccessFlags::INDIRECT_COMMAND_READ | vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE,
            );
            header[0..3].copy_from_slice(&[0, abi::resume::ROUND_MARK, 0]);
            for r in 1..=rounds {
                header[0] = r;
                for (i, w) in header.iter().enumerate() {
                    if i * 4 < header_len {
                        push[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
                    }
                }
                let command = abi::resume::INDIRECT + abi::resume::INDIRECT_BYTES * u64::from(r - 1);
                // SAFETY: `cmd` is recording with `pipeline` bound; the push
                // range matches the layout's single range; the indirect
                // command lies inside the area, which the stream keeps alive.
                unsafe {
                    d.cmd_pipeline_barrier(
                        cmd,
                        vk::PipelineStageFlags::COMPUTE_SHADER,
                        vk::PipelineStageFlags::DRAW_INDIRECT | vk::PipelineStageFlags::COMPUTE_SHADER,
                        vk::DependencyFlags::empty(),
                        &[barrier],
                        &[],
                        &[],
                    );
                    if !push.is_empty() {
                        d.cmd_push_constants(cmd, layout, vk::ShaderStageFlags::COMPUTE, 0, &push);
                    }
                    d.cmd_dispatch_indirect(cmd, area.raw, command);
                }
            }
        }
        st.stream.keep(f.module.clone());
        if spill_address != 0 || resume.is_some() {
            st.stream.order_next();
        }
        Ok(())
    }

    /// The context's resume area (see [`abi::resume`]), created the first
    /// time: its header and two record buffers of [`RESUME_HALF_BYTES`].
    fn resume_area(&self, st: &mut State) -> Result<Arc<Buffer>> {
        if let Some(b) = &st.resume {
            return Ok(b.clone());
        }
        let b = Arc::new(Buffer::new(
            &self.device,
            abi::resume::RECORDS + 2 * RESUME_HALF_BYTES,
            DEVICE_USAGE | vk::BufferUsageFlags::INDIRECT_BUFFER,
            MemoryLocation::GpuOnly,
            16,
            "ptxvk resume area",
        )?);
        st.resume = Some(b.clone());
        Ok(b)
    }

    /// The device address of a spill area of at least `bytes`, kept alive
    /// by the current batch.
    fn spill_area(&self, st: &mut State, bytes: u64) -> Result<u64> {
        let buffer = crate::memory::grown_device_buffer(
            &self.device,
            &mut st.spill,
            bytes,
            abi::SHARED_HOT_ALIGN as u64,
            "ptxvk shared spill area",
        )?;
        let address = buffer.address;
        st.stream.keep(buffer);
        Ok(address)
    }
}

/// Bytes of each of the resume area's two record buffers: records of
/// threads saved in one round (a record holds the registers live at a loop
/// header, tens of bytes: hundreds of thousands of threads).
const RESUME_HALF_BYTES: u64 = 32 << 20;

/// Most bytes of spilled `.shared` memory one dispatch uses; launches whose
/// blocks spill more are dispatched in parts, one after another.
const SPILL_BUDGET_BYTES: u64 = 256 << 20;

/// Most `.shared` bytes a block may have when it spills: far beyond every
/// CUDA architecture's 227 KiB (`libcuda` enforces the architecture's
/// limits); offsets stay well inside 32 bits.
const MAX_SPILLED_SHARED_BYTES: u64 = 1 << 30;

/// Where a launch's `.shared` memory lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SharedPlan {
    /// The words in Workgroup memory (all of them unless spilling; then
    /// the hot part, possibly none).
    hot_words: u32,
    /// Spill bytes per block (0: all in Workgroup memory).
    stride: u32,
}

impl SharedPlan {
    /// `words` of `.shared` with `scratch` bytes of translator scratch in
    /// `max` bytes of Workgroup memory, keeping a hot part there when
    /// spilling if `keep_hot`; `None` when it cannot be done.
    fn new(entry: &abi::EntryInfo, words: u32, scratch: u64, max: u32, keep_hot: bool) -> Option<SharedPlan> {
        let bytes = words as u64 * 4;
        if bytes + scratch <= max as u64 {
            return Some(SharedPlan { hot_words: words, stride: 0 });
        }
        let align = abi::SHARED_HOT_ALIGN as u64;
        if !entry.shared_spill || bytes > MAX_SPILLED_SHARED_BYTES || scratch + align > max as u64 {
            return None;
        }
        let hot = if keep_hot { (max as u64 - scratch) / align * align } else { 0 };
        let stride = (bytes - hot).div_ceil(align) * align;
        Some(SharedPlan { hot_words: (hot / 4) as u32, stride: stride as u32 })
    }
}

/// A device buffer for user data or module variables.
fn new_device_buffer(device: &Arc<Device>, size: u64, name: &str) -> Result<Buffer> {
    let buffer = Buffer::new(device, size, DEVICE_USAGE, MemoryLocation::GpuOnly, ALLOC_ALIGN, name)?;
    check_aligned(&buffer)?;
    Ok(buffer)
}

/// Checks that a device buffer's address has CUDA's allocation alignment.
fn check_aligned(buffer: &Buffer) -> Result<()> {
    if buffer.address & (ALLOC_ALIGN - 1) != 0 {
        // Memory objects are at least this aligned on every known driver.
        return Err(Error::Unsupported(format!(
            "device address {:#x} is not {ALLOC_ALIGN}-byte aligned",
            buffer.address
        )));
    }
    Ok(())
}

/// Checks that `spirv` is a SPIR-V module declaring every entry of `info`.
/// The id bound above which a module is split into one SPIR-V module per
/// entry: SPIR-V's limit, or `PTXVK_MAX_MODULE_IDS` (for tests).
fn max_module_ids() -> u32 {
    std::env::var(crate::instance::MAX_MODULE_IDS_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ptxvk_translator::MAX_SPIRV_IDS)
}

/// The module without the entries that do not translate, when the whole
/// module does not (`whole` is its diagnostic) but some entries do: NVIDIA's
/// driver with lazy loading (the default since CUDA 12.2) fails only the
/// kernel that does not compile, when it is first got or launched, and a
/// library whose load failed makes the CUDA runtime skip the launches of
/// other libraries without an error (CuPy's CUB after its Thrust). Returns
/// the translation and each left-out entry with its own diagnostic; the
/// whole module's diagnostic when no entry, or every entry, fails alone.
fn without_failing_entries(
    prepared: &ptxvk_translator::Prepared,
    options: &ptxvk_translator::Options,
    whole: ptxvk_translator::Diagnostics,
) -> Result<(ptxvk_translator::Translation, Vec<(String, String)>)> {
    let entries = prepared.entry_names();
    let refused = || Error::InvalidPtx(whole.to_string());
    let alone = |name: &str| {
        let one = ptxvk_translator::Options { entry: Some(name.to_string()), ..options.clone() };
        prepared.emit(&one).err().map(|d| d.to_string())
    };
    let mut deferred: Vec<(String, String)> = Vec::new();
    let mut error = whole.items.first().cloned();
    // Each round leaves out the entry the first error lies in; an error in
    // a `.func` (or outside every function) leaves out every entry that
    // does not translate alone.
    for _ in 0..=entries.len() {
        let owner = error.as_ref().and_then(|d| prepared.function_of(d));
        let first = match owner {
            Some((name, true)) if !deferred.iter().any(|(n, _)| *n == name) => alone(&name).map(|d| (name, d)),
            _ => None,
        };
        let left_out: Vec<(String, String)> = match first {
            Some(one) => vec![one],
            None => entries
                .iter()
                .filter(|n| !deferred.iter().any(|(d, _)| d == *n))
                .filter_map(|n| alone(n).map(|d| (n.clone(), d)))
                .collect(),
        };
        if left_out.is_empty() {
            return Err(refused());
        }
        deferred.extend(left_out);
        if deferred.len() >= entries.len() {
            return Err(refused());
        }
        let skip = deferred.iter().map(|(n, _)| n.clone()).collect();
        match prepared.emit(&ptxvk_translator::Options { skip_entries: skip, ..options.clone() }) {
            Ok(t) => return Ok((t, deferred)),
            Err(d) => error = d.items.first().cloned(),
        }
    }
    Err(refused())
}

/// One SPIR-V module per entry of `whole`, in its order.
fn split_by_entry(
    prepared: &ptxvk_translator::Prepared,
    options: &ptxvk_translator::Options,
    whole: &ptxvk_translator::ModuleInfo,
) -> Result<Vec<Vec<u32>>> {
    let mut shaders = Vec::with_capacity(whole.entries.len());
    for entry in &whole.entries {
        let one = ptxvk_translator::Options { entry: Some(entry.name.clone()), ..options.clone() };
        let t = prepared.emit(&one).map_err(|d| Error::InvalidPtx(d.to_string()))?;
        check_same_entry(whole, &t.info, &entry.name)?;
        shaders.push(t.spirv);
    }
    Ok(shaders)
}

/// An entry translated alone must launch as the whole module's does: the
/// same parameters, shared memory and scratch needs at most the module's,
/// the same module data layout, and the module data words it uses where
/// the whole module has them.
fn check_same_entry(
    whole: &ptxvk_translator::ModuleInfo,
    alone: &ptxvk_translator::ModuleInfo,
    name: &str,
) -> Result<()> {
    let a = whole.entries.iter().find(|e| e.name == name);
    let b = alone.entries.iter().find(|e| e.name == name);
    let within = |x: Option<u64>, y: Option<u64>| y.is_none() || x == y;
    let same = match (a, b) {
        (Some(a), Some(b)) => {
            a.params == b.params
                && a.param_bytes == b.param_bytes
                && a.param_passing == b.param_passing
                && a.push_constant_bytes == b.push_constant_bytes
                && a.static_shared_bytes == b.static_shared_bytes
                && a.uses_dynamic_shared == b.uses_dynamic_shared
                && a.shared_spill == b.shared_spill
                && a.shared_wide == b.shared_wide
                && a.local_bytes == b.local_bytes
                && b.scratch_words_per_invocation <= a.scratch_words_per_invocation
                && b.scratch_words_fixed <= a.scratch_words_fixed
                && b.loop_counter_words <= a.loop_counter_words
                && b.block_ticket_words <= a.block_ticket_words
                && whole.globals == alone.globals
                && alone.global_data_bytes <= whole.global_data_bytes
                && within(whole.trap_offset, alone.trap_offset)
                && within(whole.printf_offset, alone.printf_offset)
                && within(whole.heap_offset, alone.heap_offset)
                && within(whole.grid_offset, alone.grid_offset)
                && within(whole.vector_lock_offset, alone.vector_lock_offset)
        }
        _ => false,
    };
    if same {
        Ok(())
    } else {
        Err(Error::InvalidValue(format!("entry {name} translated alone has another layout")))
    }
}

fn check_entry_points(spirv: &[u32], entries: &[ptxvk_translator::EntryInfo]) -> Result<()> {
    const MAGIC: u32 = 0x0723_0203;
    const OP_ENTRY_POINT: u32 = 15;
    if spirv.len() < 5 || spirv[0] != MAGIC {
        return Err(Error::InvalidValue("not a SPIR-V module".into()));
    }
    let mut names = Vec::new();
    let mut i = 5;
    while i < spirv.len() {
        let count = (spirv[i] >> 16) as usize;
        let opcode = spirv[i] & 0xffff;
        if count == 0 || i + count > spirv.len() {
            return Err(Error::InvalidValue("malformed SPIR-V instruction stream".into()));
        }
        if opcode == OP_ENTRY_POINT && count > 3 {
            let bytes: Vec<u8> = spirv[i + 3..i + count].iter().flat_map(|w| w.to_le_bytes()).collect();
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            names.push(String::from_utf8_lossy(&bytes[..end]).into_owned());
        }
        i += count;
    }
    for e in entries {
        if !names.contains(&e.name) {
            return Err(Error::NotFound(format!("entry point {} is not in the SPIR-V module", e.name)));
        }
    }
    Ok(())
}

/// The initial contents of a module data buffer based at `base`.
fn module_data_image(info: &ptxvk_translator::ModuleInfo, base: u64) -> Result<Vec<u8>> {
    let size = usize::try_from(info.global_data_bytes).map_err(|_| Error::OutOfMemory)?;
    let mut image = vec![0u8; size];
    for g in &info.globals {
        let bad = || Error::InvalidValue(format!("module variable {} lies outside the module data", g.name));
        let start = usize::try_from(g.offset).map_err(|_| bad())?;
        let slot = image.get_mut(start..start + g.init.len()).ok_or_else(bad)?;
        slot.copy_from_slice(&g.init);
        for &r in &g.relocations {
            let at = usize::try_from(r).map_err(|_| bad())?;
            let word = slot.get_mut(at..at + 8).ok_or_else(bad)?;
            let mut v = [0u8; 8];
            v.copy_from_slice(word);
            let relocated = u64::from_le_bytes(v).wrapping_add(base);
            word.copy_from_slice(&relocated.to_le_bytes());
        }
    }
    Ok(image)
}

/// Runs `spirv-val` on a translated module (see [`crate::instance::SPIRV_VAL_ENV`]).
pub(crate) fn spirv_val(spirv: &[u32], env: ptxvk_translator::TargetEnv, file_name: &str) -> Result<()> {
    use std::io::Write;
    let target = match env {
        ptxvk_translator::TargetEnv::Vulkan1_2 => "vulkan1.2",
        ptxvk_translator::TargetEnv::Vulkan1_3 => "vulkan1.3",
    };
    let bytes: Vec<u8> = spirv.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut child = std::process::Command::new("spirv-val")
        .args(["--target-env", target, "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| Error::Unsupported(format!("PTXVK_SPIRV_VAL=1 but spirv-val cannot run: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(&bytes).map_err(|e| Error::Unsupported(format!("spirv-val: {e}")))?;
    }
    let out = child.wait_with_output().map_err(|e| Error::Unsupported(format!("spirv-val: {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::InvalidPtx(format!(
            "{file_name}: internal error: the translated module fails spirv-val:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

/// Reads strings out of device memory for the printf formatter, one
/// allocation (or its first 64 KiB from the string) at a time, cached.
struct Strings<'a, 'b> {
    ctx: &'a ContextInner,
    st: &'a mut MutexGuard<'b, State>,
    /// (start address, bytes) of ranges read so far.
    cache: Vec<(u64, Vec<u8>)>,
}

impl DeviceStrings for Strings<'_, '_> {
    fn string(&mut self, addr: u64) -> Option<Vec<u8>> {
        const WINDOW: u64 = 64 << 10;
        let hit = self.cache.iter().position(|(a, b)| addr >= *a && addr < *a + b.len() as u64);
        let i = match hit {
            Some(i) => i,
            None => {
                let (base, size) = self.st.table.allocation_of(addr)?;
                let start = if size <= 16 * WINDOW { base } else { addr };
                let end = (base + size).min(start.saturating_add(if size <= 16 * WINDOW { size } else { WINDOW }));
                let mut bytes = vec![0u8; end.checked_sub(start)? as usize];
                self.ctx.copy_dtoh_locked(self.st, &mut bytes, start).ok()?;
                self.cache.push((start, bytes));
                self.cache.len() - 1
            }
        };
        let (a, b) = &self.cache[i];
        let tail = &b[(addr - a) as usize..];
        let len = tail.iter().position(|&c| c == 0).unwrap_or(tail.len());
        Some(tail[..len].to_vec())
    }
}

/// Where [`crate::instance::DUMP_ENV`] asks a module to be dumped (without
/// extension): `<folder>/<n>-<file name>`, numbered in load order.
fn dump_path(file_name: &str) -> Option<std::path::PathBuf> {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::var_os(crate::instance::DUMP_ENV)?;
    let n = COUNT.fetch_add(1, Ordering::Relaxed);
    let base: String =
        file_name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
    let dir = std::path::PathBuf::from(dir);
    let _ = std::fs::create_dir_all(&dir);
    Some(dir.join(format!("{n:03}-{base}")))
}
