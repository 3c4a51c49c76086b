//! Device memory: buffers bound to gpu-allocator memory, the table that maps
//! device addresses (CUDA `CUdeviceptr`s) back to buffers, and the
//! host-visible staging memory used for copies and parameter buffers.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use ash::vk;
use gpu_allocator::vulkan::{Allocation, AllocationCreateDesc, AllocationScheme};
use gpu_allocator::MemoryLocation;

use crate::device::Device;
use crate::error::{map_allocator, map_create, Error, Result};

/// Alignment of every allocation's device address (CUDA guarantees 256).
pub(crate) const ALLOC_ALIGN: u64 = 256;
/// Largest piece a single staged copy moves; larger copies are chunked.
pub(crate) const STAGING_CHUNK: u64 = 64 << 20;
/// Size of an upload-arena block (requests larger than this get their own).
const ARENA_BLOCK: u64 = 4 << 20;
/// Arena blocks kept for reuse after a batch completes.
const ARENA_KEEP_BYTES: u64 = 64 << 20;
/// Once a batch has this much staged data in flight, it is submitted.
pub(crate) const ARENA_FLUSH_BYTES: u64 = 256 << 20;

/// Rounds `v` up to a multiple of `align` (a power of two); `None` on overflow.
pub(crate) fn align_up(v: u64, align: u64) -> Option<u64> {
    Some(v.checked_add(align - 1)? & !(align - 1))
}

/// A `VkBuffer` with its own memory and device address.
pub(crate) struct Buffer {
    device: Arc<Device>,
    pub(crate) raw: vk::Buffer,
    allocation: Option<Allocation>,
    /// Memory of its own (an exportable or imported allocation), freed after the buffer.
    dedicated: Option<Dedicated>,
    /// A piece of an exportable [`Chunk`], given back to it after the buffer.
    slice: Option<Slice>,
    /// `vkGetBufferDeviceAddress` of the buffer.
    pub(crate) address: u64,
    /// Size of the `VkBuffer`.
    pub(crate) size: u64,
    /// Unique over the process's lifetime (names an exported allocation).
    pub(crate) id: u64,
}

/// A `VkDeviceMemory` bound to one buffer at offset 0: shareable with other
/// processes as an opaque file descriptor, or host pages imported as device
/// memory ([`Buffer::import_host`]).
#[derive(Clone, Copy)]
struct Dedicated {
    memory: vk::DeviceMemory,
    /// `allocationSize` and `memoryTypeIndex`, which an importer must repeat.
    size: u64,
    memory_type: u32,
    /// Whether it was allocated here for export (not imported).
    exportable: bool,
    /// Whether it counts against [`Device::shareable_budget`] (opaque-fd
    /// memory; not imported host pages).
    shareable: bool,
}

/// Size of the `VkBuffer` an exportable [`Chunk`] is made for (its memory
/// is that buffer's `VkMemoryRequirements::size`).
pub(crate) const CHUNK_BYTES: u64 = 64 << 20;
/// Largest allocation suballocated from a [`Chunk`]; larger ones get
/// exportable memory of their own.
pub(crate) const CHUNK_MAX_PIECE: u64 = CHUNK_BYTES / 4;

/// One exportable `VkDeviceMemory` that user allocations are carved from,
/// as NVIDIA's driver carves small allocations from larger mappings: an
/// exported piece shares the whole chunk's file descriptor (the importer
/// maps the chunk and offsets into it), so one descriptor serves many
/// allocations, and the default fault checks see the chunk as one range.
pub(crate) struct Chunk {
    device: Arc<Device>,
    memory: vk::DeviceMemory,
    /// `allocationSize` and `memoryTypeIndex`, which an importer repeats.
    memory_size: u64,
    memory_type: u32,
    /// Free `(offset, length)` pieces, by offset, coalesced.
    free: std::sync::Mutex<BTreeMap<u64, u64>>,
    /// The whole memory mapped on the host, where its type is host-visible
    /// (lavapipe; resizable-BAR and integrated GPUs): a piece given back is
    /// zeroed through it ([`Chunk::give_back`]).
    host: Option<HostMapping>,
}

/// The host address of a mapped memory object's first byte.
#[derive(Clone, Copy)]
struct HostMapping(std::ptr::NonNull<u8>);

// SAFETY: the mapping is a plain address range valid while its memory
// object lives; the owner of the memory object decides who writes where
// (a chunk writes only pieces no buffer is bound to, under its lock).
unsafe impl Send for HostMapping {}
// SAFETY: as above; `&HostMapping` only hands out the address.
unsafe impl Sync for HostMapping {}

/// Largest sub-allocation of gpu-allocator's that [`Buffer::zero_reused`]
/// zeroes (its default memory block size for host-visible types): larger
/// ones get a memory object of their own, fresh from the driver.
const ZEROED_SUBALLOCATION_MAX: u64 = 64 << 20;

/// The piece of a [`Chunk`] a buffer is bound to.
struct Slice {
    chunk: Arc<Chunk>,
    offset: u64,
    len: u64,
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: the memory was allocated by this chunk, and every buffer
        // bound to it holds the chunk (so all are destroyed by now).
        unsafe { self.device.raw.free_memory(self.memory, None) };
        self.device.shareable_live.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Chunk {
    /// A new exportable chunk of [`CHUNK_BYTES`] (one memory object).
    pub(crate) fn new(device: &Arc<Device>) -> Result<Arc<Chunk>> {
        if device.external_memory_fd.is_none() {
            return Err(Error::Unsupported("memory shared between processes (VK_KHR_external_memory_fd)".into()));
        }
        let handle_type = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;
        // A buffer of the chunk's size only to learn the memory it needs.
        let (probe, requirements) = Buffer::external(device, CHUNK_BYTES, handle_type)?;
        drop(probe);
        let memory_type = device_local_type(device, requirements.memory_type_bits)?;
        let mut flags = vk::MemoryAllocateFlagsInfo::default().flags(vk::MemoryAllocateFlags::DEVICE_ADDRESS);
        let mut export = vk::ExportMemoryAllocateInfo::default().handle_types(handle_type);
        let alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(requirements.size)
            .memory_type_index(memory_type)
            .push_next(&mut flags)
            .push_next(&mut export);
        // SAFETY: valid allocate info of a type the buffer allows.
        let memory = unsafe { device.raw.allocate_memory(&alloc, None) }.map_err(map_create)?;
        device.shareable_live.fetch_add(1, Ordering::Relaxed);
        let mut free = BTreeMap::new();
        free.insert(0, CHUNK_BYTES);
        let mut chunk = Chunk {
            device: device.clone(),
            memory,
            memory_size: requirements.size,
            memory_type,
            free: std::sync::Mutex::new(free),
            host: None,
        };
        let visible =
            device.memory_types[memory_type as usize].property_flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE);
        if visible {
            // SAFETY: host-visible memory of this device, not mapped yet; it
            // stays mapped until `vkFreeMemory` in Drop unmaps it.
            let mapped = unsafe { device.raw.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) };
            // Without a mapping, pieces are not zeroed when given back.
            chunk.host = mapped.ok().and_then(|p| std::ptr::NonNull::new(p as *mut u8)).map(HostMapping);
        }
        Ok(Arc::new(chunk))
    }

    fn free_list(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, u64>> {
        // A panic while holding the lock leaves a consistent map.
        self.free.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether nothing is carved from the chunk.
    pub(crate) fn is_empty(&self) -> bool {
        self.free_list().get(&0) == Some(&CHUNK_BYTES)
    }

    /// Takes `len` bytes at an offset aligned to `align` (first fit).
    fn take(&self, len: u64, align: u64) -> Option<u64> {
        let mut free = self.free_list();
        let (start, piece_off, piece_len) = free.iter().find_map(|(&off, &plen)| {
            let start = align_up(off, align)?;
            (start.checked_add(len)? <= off + plen).then_some((start, off, plen))
        })?;
        free.remove(&piece_off);
        if start > piece_off {
            free.insert(piece_off, start - piece_off);
        }
        let end = start + len;
        if end < piece_off + piece_len {
            free.insert(end, piece_off + piece_len - end);
        }
        Some(start)
    }

    /// Gives `len` bytes at `offset` back, merging with free neighbours.
    /// Where the chunk is mapped, the piece is zeroed first, so every byte
    /// no allocation holds reads zero, as fresh memory does: NVIDIA's
    /// allocations read zero in practice, and clients rely on it without
    /// knowing (Taichi reads a little past its buffers, and follows what it
    /// finds there).
    fn give_back(&self, offset: u64, len: u64) {
        let mut free = self.free_list();
        if let Some(HostMapping(base)) = self.host {
            // SAFETY: `[offset, offset + len)` lies in the mapped chunk (it
            // was taken from it), no buffer is bound to it any more, and the
            // device work that used it has completed (buffers are dropped
            // after it); the free list's lock keeps `take` from handing it
            // out meanwhile.
            unsafe { std::ptr::write_bytes(base.as_ptr().add(offset as usize), 0, len as usize) };
        }
        let (mut start, mut end) = (offset, offset + len);
        if let Some((&prev, &plen)) = free.range(..offset).next_back() {
            if prev + plen == start {
                free.remove(&prev);
                start = prev;
            }
        }
        if let Some(&nlen) = free.get(&end) {
            free.remove(&end);
            end += nlen;
        }
        free.insert(start, end - start);
    }

    /// A device buffer of `size` bytes ([`DEVICE_USAGE`]) that a chunk's
    /// memory can be bound to ([`Chunk::place`]), and its requirements.
    pub(crate) fn piece_buffer(device: &Arc<Device>, size: u64) -> Result<(Buffer, vk::MemoryRequirements)> {
        Buffer::external(device, size, vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD)
    }

    /// Binds `buffer` (from [`Chunk::piece_buffer`], not yet bound) to a
    /// free piece of the chunk, with `gap` bytes after it that nothing else
    /// takes; `false` when no piece is large enough.
    pub(crate) fn place(
        self: &Arc<Chunk>,
        buffer: &mut Buffer,
        requirements: &vk::MemoryRequirements,
        gap: u64,
    ) -> Result<bool> {
        if requirements.memory_type_bits & (1 << self.memory_type) == 0 {
            return Err(Error::Unsupported("a buffer cannot use the exportable memory type".into()));
        }
        let len = align_up(requirements.size.max(buffer.size), ALLOC_ALIGN)
            .and_then(|l| l.checked_add(gap))
            .ok_or(Error::OutOfMemory)?;
        let Some(offset) = self.take(len, requirements.alignment.max(ALLOC_ALIGN)) else { return Ok(false) };
        buffer.slice = Some(Slice { chunk: self.clone(), offset, len });
        // SAFETY: the piece is free, inside the memory, aligned as the
        // buffer requires, and of a type it allows; the buffer has no memory yet.
        unsafe { self.device.raw.bind_buffer_memory(buffer.raw, self.memory, offset) }.map_err(map_create)?;
        // SAFETY: SHADER_DEVICE_ADDRESS usage and DEVICE_ADDRESS memory.
        buffer.address = unsafe {
            self.device.raw.get_buffer_device_address(&vk::BufferDeviceAddressInfo::default().buffer(buffer.raw))
        };
        Ok(true)
    }
}

/// Next [`Buffer::id`].
static NEXT_BUFFER_ID: AtomicU64 = AtomicU64::new(1);

/// What another process needs to import an exported allocation (the
/// parameters of `vkAllocateMemory` an import of opaque-fd memory must
/// repeat, and the buffer to bind it to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExportedMemory {
    /// The allocation's id in the exporting process.
    pub id: u64,
    /// `VkMemoryAllocateInfo::allocationSize`.
    pub memory_size: u64,
    /// `VkMemoryAllocateInfo::memoryTypeIndex`.
    pub memory_type: u32,
    /// Size of the `VkBuffer` it is bound to.
    pub buffer_size: u64,
    /// Bytes the user asked for.
    pub size: u64,
    /// Where the allocation starts in the buffer (a multiple of 256).
    pub offset: u64,
    /// Whether the memory is a dedicated allocation of its buffer (an
    /// allocation of its own; otherwise a chunk that pieces are carved
    /// from): an import repeats it.
    pub dedicated: bool,
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: the buffer was created by this object on `device`; whoever
        // records commands that use it keeps an `Arc` until they complete.
        unsafe { self.device.raw.destroy_buffer(self.raw, None) };
        if let Some(a) = self.allocation.take() {
            if let Err(e) = self.device.allocator().free(a) {
                log::error!("freeing buffer memory failed: {e}");
            }
        }
        if let Some(d) = self.dedicated.take() {
            // SAFETY: the memory was allocated by this object and only the
            // buffer destroyed above was bound to it.
            unsafe { self.device.raw.free_memory(d.memory, None) };
            if d.shareable {
                self.device.shareable_live.fetch_sub(1, Ordering::Relaxed);
            }
        }
        if let Some(s) = self.slice.take() {
            s.chunk.give_back(s.offset, s.len);
        }
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer({:#x}, {} bytes)", self.address, self.size)
    }
}

/// Usage of device allocations (and the module data buffer).
pub(crate) const DEVICE_USAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::STORAGE_BUFFER.as_raw()
        | vk::BufferUsageFlags::SHADER_DEVICE_ADDRESS.as_raw()
        | vk::BufferUsageFlags::TRANSFER_SRC.as_raw()
        | vk::BufferUsageFlags::TRANSFER_DST.as_raw(),
);

impl Buffer {
    /// The memory block the buffer is bound to and the device address its
    /// byte 0 would have (the buffer's address less its offset in the
    /// block): buffers with the same pair lie in one mapping of the block.
    pub(crate) fn block(&self) -> Option<(vk::DeviceMemory, u64)> {
        if let Some(a) = &self.allocation {
            // SAFETY: the handle is only compared, never used to free or map.
            let memory = unsafe { a.memory() };
            return Some((memory, self.address.wrapping_sub(a.offset())));
        }
        if let Some(s) = &self.slice {
            return Some((s.chunk.memory, self.address - s.offset));
        }
        self.dedicated.map(|d| (d.memory, self.address))
    }

    /// `[first, end)` device addresses of the whole memory object the
    /// buffer is carved from, when that is an exportable [`Chunk`] (all of
    /// it is mapped in this process).
    pub(crate) fn chunk_extent(&self) -> Option<(u64, u64)> {
        let s = self.slice.as_ref()?;
        let first = self.address - s.offset;
        Some((first, first + CHUNK_BYTES))
    }

    /// Creates a buffer of `size` bytes whose device address is aligned to `align`.
    pub(crate) fn new(
        device: &Arc<Device>,
        size: u64,
        usage: vk::BufferUsageFlags,
        location: MemoryLocation,
        align: u64,
        name: &str,
    ) -> Result<Buffer> {
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(usage | vk::BufferUsageFlags::SHADER_DEVICE_ADDRESS)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: valid create info; the buffer is destroyed in Drop (or below).
        let raw = unsafe { device.raw.create_buffer(&info, None) }.map_err(map_create)?;
        // From here on `buffer` owns `raw` and cleans up on every error path.
        let mut buffer = Buffer::owning(device, raw, size);
        // SAFETY: `raw` is a live buffer of this device.
        let mut requirements = unsafe { device.raw.get_buffer_memory_requirements(raw) };
        requirements.alignment = requirements.alignment.max(align);
        let allocation = device
            .allocator()
            .allocate(&AllocationCreateDesc {
                name,
                requirements,
                location,
                linear: true,
                allocation_scheme: AllocationScheme::GpuAllocatorManaged,
            })
            .map_err(map_allocator)?;
        // SAFETY: the allocation satisfies the buffer's requirements and is
        // not bound to anything else.
        let bound = unsafe { device.raw.bind_buffer_memory(raw, allocation.memory(), allocation.offset()) };
        buffer.allocation = Some(allocation);
        bound.map_err(map_create)?;
        // SAFETY: the buffer has SHADER_DEVICE_ADDRESS usage and bound memory
        // allocated with VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT.
        buffer.address =
            unsafe { device.raw.get_buffer_device_address(&vk::BufferDeviceAddressInfo::default().buffer(raw)) };
        Ok(buffer)
    }

    /// A buffer over `size` bytes of host memory at `host`, imported as
    /// device memory (`VK_EXT_external_memory_host`): kernels and copies
    /// reach those host pages through its device address. `host` and `size`
    /// are multiples of the device's `minImportedHostPointerAlignment`.
    ///
    /// # Safety
    /// The pages stay allocated, and are not unmapped, until the buffer is
    /// dropped and the device work using it has completed.
    pub(crate) unsafe fn import_host(device: &Arc<Device>, host: *mut u8, size: u64) -> Result<Buffer> {
        let ext = device.host_memory.as_ref().ok_or_else(|| {
            Error::Unsupported("this device cannot import host memory (no VK_EXT_external_memory_host)".into())
        })?;
        let handle = vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT;
        let (mut buffer, requirements) = Buffer::external(device, size, handle)?;
        let raw = buffer.raw;
        let mut host_props = vk::MemoryHostPointerPropertiesEXT::default();
        // SAFETY: `host` is an aligned host pointer (caller contract); the
        // extension is enabled on this device. (ash 0.38 has no wrapper for
        // this command: the raw function pointer.)
        let rc = unsafe {
            (ext.fp().get_memory_host_pointer_properties_ext)(ext.device(), handle, host.cast(), &mut host_props)
        };
        if rc != vk::Result::SUCCESS {
            return Err(Error::InvalidValue(format!(
                "host memory at {host:p} cannot be imported by this device ({rc})"
            )));
        }
        let types = requirements.memory_type_bits & host_props.memory_type_bits;
        let index = (0..device.memory_types.len() as u32)
            .filter(|&i| types & (1 << i) != 0)
            .max_by_key(|&i| {
                let f = device.memory_types[i as usize].property_flags;
                (f.contains(vk::MemoryPropertyFlags::HOST_COHERENT), f.contains(vk::MemoryPropertyFlags::HOST_VISIBLE))
            })
            .ok_or_else(|| Error::Unsupported("no memory type can hold imported host memory for a buffer".into()))?;
        if requirements.size > size {
            return Err(Error::Unsupported(format!(
                "a buffer over {size} bytes of host memory needs {} bytes",
                requirements.size
            )));
        }
        let mut import = vk::ImportMemoryHostPointerInfoEXT::default().handle_type(handle).host_pointer(host.cast());
        let mut flags = vk::MemoryAllocateFlagsInfo::default().flags(vk::MemoryAllocateFlags::DEVICE_ADDRESS);
        let alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(size)
            .memory_type_index(index)
            .push_next(&mut import)
            .push_next(&mut flags);
        // SAFETY: `host` and `size` are aligned as the extension requires and
        // the memory type is one the pointer's properties allow.
        let memory = unsafe { device.raw.allocate_memory(&alloc, None) }.map_err(map_create)?;
        buffer.dedicated = Some(Dedicated { memory, size, memory_type: index, exportable: false, shareable: false });
        // SAFETY: the memory is new, large enough and of an allowed type.
        unsafe { device.raw.bind_buffer_memory(raw, memory, 0) }.map_err(map_create)?;
        // SAFETY: SHADER_DEVICE_ADDRESS usage, memory allocated with DEVICE_ADDRESS.
        buffer.address =
            unsafe { device.raw.get_buffer_device_address(&vk::BufferDeviceAddressInfo::default().buffer(raw)) };
        Ok(buffer)
    }

    /// A device buffer of `size` bytes ([`DEVICE_USAGE`]) that may be bound
    /// to external memory of `handle` type, with no memory yet, and its
    /// memory requirements.
    fn external(
        device: &Arc<Device>,
        size: u64,
        handle: vk::ExternalMemoryHandleTypeFlags,
    ) -> Result<(Buffer, vk::MemoryRequirements)> {
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(handle);
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(DEVICE_USAGE)
            .sharing_mode(vk::SharingMode::EXCLUSIVE)
            .push_next(&mut external);
        // SAFETY: valid create info; the buffer is destroyed in Drop.
        let raw = unsafe { device.raw.create_buffer(&info, None) }.map_err(map_create)?;
        let buffer = Buffer::owning(device, raw, size);
        // SAFETY: `raw` is a live buffer of this device.
        let requirements = unsafe { device.raw.get_buffer_memory_requirements(raw) };
        Ok((buffer, requirements))
    }

    /// A buffer object owning `raw`, with no memory yet.
    fn owning(device: &Arc<Device>, raw: vk::Buffer, size: u64) -> Buffer {
        let id = NEXT_BUFFER_ID.fetch_add(1, Ordering::Relaxed);
        Buffer { device: device.clone(), raw, allocation: None, dedicated: None, slice: None, address: 0, size, id }
    }

    /// Creates a device buffer of `size` bytes (usage [`DEVICE_USAGE`]) with a
    /// device-local memory allocation of its own that can be exported as an
    /// opaque file descriptor, or, with `import`, bound to the memory another
    /// process exported (the raw descriptor, which the driver owns on
    /// success and the caller still owns on failure). Needs
    /// `VK_KHR_external_memory_fd` ([`crate::DeviceInfo::supports_ipc_memory`]).
    pub(crate) fn new_shareable(
        device: &Arc<Device>,
        size: u64,
        import: Option<(i32, &ExportedMemory)>,
    ) -> Result<Buffer> {
        if device.external_memory_fd.is_none() {
            return Err(Error::Unsupported("memory shared between processes (VK_KHR_external_memory_fd)".into()));
        }
        let handle_type = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;
        let (mut buffer, requirements) = Buffer::external(device, size, handle_type)?;
        let raw = buffer.raw;
        let (memory_size, memory_type) = match &import {
            Some((_, e)) => {
                // The type comes from another process's handle: check it is
                // one of this device's before shifting by it.
                let allowed = (e.memory_type as usize) < device.memory_types.len()
                    && requirements.memory_type_bits & (1 << e.memory_type) != 0;
                if e.memory_size != requirements.size || !allowed {
                    return Err(Error::InvalidValue(format!(
                        "imported memory ({} bytes, type {}) does not fit a {size}-byte buffer on this device",
                        e.memory_size, e.memory_type
                    )));
                }
                (e.memory_size, e.memory_type)
            }
            None => (requirements.size, device_local_type(device, requirements.memory_type_bits)?),
        };
        let mut flags = vk::MemoryAllocateFlagsInfo::default().flags(vk::MemoryAllocateFlags::DEVICE_ADDRESS);
        let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(raw);
        let mut export = vk::ExportMemoryAllocateInfo::default().handle_types(handle_type);
        let fd = import.map(|(fd, _)| fd);
        let mut import_info = vk::ImportMemoryFdInfoKHR::default().handle_type(handle_type).fd(fd.unwrap_or(-1));
        let mut alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(memory_size)
            .memory_type_index(memory_type)
            .push_next(&mut flags);
        // An import is dedicated exactly when the export was.
        if !matches!(import, Some((_, e)) if !e.dedicated) {
            alloc = alloc.push_next(&mut dedicated);
        }
        alloc = if import.is_some() { alloc.push_next(&mut import_info) } else { alloc.push_next(&mut export) };
        // SAFETY: valid allocate info; an imported descriptor came from
        // `vkGetMemoryFdKHR` of the same device UUID (checked by the caller),
        // with the size and type it was exported with.
        let memory = unsafe { device.raw.allocate_memory(&alloc, None) }.map_err(|e| match e {
            vk::Result::ERROR_INVALID_EXTERNAL_HANDLE => {
                Error::InvalidValue("the exported memory's file descriptor was refused by the driver".into())
            }
            other => map_create(other),
        })?;
        device.shareable_live.fetch_add(1, Ordering::Relaxed);
        buffer.dedicated =
            Some(Dedicated { memory, size: memory_size, memory_type, exportable: fd.is_none(), shareable: true });
        // SAFETY: memory of the buffer's requirements (its own, or a whole
        // chunk as large as the buffer), bound at 0.
        unsafe { device.raw.bind_buffer_memory(raw, memory, 0) }.map_err(map_create)?;
        // SAFETY: SHADER_DEVICE_ADDRESS usage and DEVICE_ADDRESS memory.
        buffer.address =
            unsafe { device.raw.get_buffer_device_address(&vk::BufferDeviceAddressInfo::default().buffer(raw)) };
        Ok(buffer)
    }

    /// The import parameters of an exportable buffer ([`Buffer::new_shareable`]
    /// without `import`); `None` for other buffers.
    pub(crate) fn exported(&self, user_size: u64) -> Option<ExportedMemory> {
        if let Some(s) = &self.slice {
            return Some(ExportedMemory {
                id: self.id,
                memory_size: s.chunk.memory_size,
                memory_type: s.chunk.memory_type,
                buffer_size: CHUNK_BYTES,
                size: user_size,
                offset: s.offset,
                dedicated: false,
            });
        }
        let d = self.dedicated.filter(|d| d.exportable)?;
        Some(ExportedMemory {
            id: self.id,
            memory_size: d.size,
            memory_type: d.memory_type,
            buffer_size: self.size,
            size: user_size,
            offset: 0,
            dedicated: true,
        })
    }

    /// A new file descriptor for the memory of an exportable buffer
    /// (`vkGetMemoryFdKHR`): each call makes one, which the caller owns.
    #[cfg(unix)]
    pub(crate) fn memory_fd(&self) -> Result<std::os::fd::OwnedFd> {
        use std::os::fd::FromRawFd;
        let memory = match (&self.slice, self.dedicated.filter(|d| d.exportable)) {
            (Some(s), _) => s.chunk.memory,
            (None, Some(d)) => d.memory,
            (None, None) => return Err(Error::InvalidValue("this allocation cannot be exported".into())),
        };
        let ext = self.device.external_memory_fd.as_ref().ok_or(Error::OutOfMemory)?;
        let info =
            vk::MemoryGetFdInfoKHR::default().memory(memory).handle_type(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
        // SAFETY: the memory was allocated with an export of this handle type.
        let fd = unsafe { ext.get_memory_fd(&info) }.map_err(map_create)?;
        // SAFETY: `vkGetMemoryFdKHR` returns a new descriptor the caller owns.
        Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
    }

    /// Copies `data` into the mapped memory at `offset`.
    ///
    /// The caller guarantees the range is not in use by the device.
    pub(crate) fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        let ptr = self.mapped(offset, data.len() as u64)?;
        // SAFETY: `mapped` checked that the range lies inside this mapped,
        // host-coherent allocation; no device work touches it (caller contract)
        // and the source is a distinct host slice.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr, data.len()) };
        Ok(())
    }

    /// Copies mapped memory at `offset` into `out`.
    ///
    /// The caller guarantees device writes to the range have completed.
    pub(crate) fn read(&self, offset: u64, out: &mut [u8]) -> Result<()> {
        let ptr = self.mapped(offset, out.len() as u64)?;
        // SAFETY: as in `write`, with the device work already waited for.
        unsafe { std::ptr::copy_nonoverlapping(ptr as *const u8, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Whether the host may read this buffer in place once the device work
    /// that wrote it has completed and a host-read barrier closed it (as
    /// every batch's end does): mapped, host-coherent memory (all memory
    /// on lavapipe and other unified-memory devices). Elsewhere a copy to
    /// staging memory is needed.
    pub(crate) fn host_readable(&self) -> bool {
        self.allocation.as_ref().is_some_and(|a| {
            a.mapped_ptr().is_some() && a.memory_properties().contains(vk::MemoryPropertyFlags::HOST_COHERENT)
        })
    }

    /// Zeroes a new buffer carved from a gpu-allocator memory block that is
    /// mapped on the host, since the piece may hold an earlier buffer's
    /// data (user allocations read zero, as chunk pieces do, see
    /// [`Chunk::give_back`]). Memory objects of their own are left as the
    /// driver gives them (fresh, so zero), and so is memory the host cannot
    /// map.
    pub(crate) fn zero_reused(&self) {
        let Some(a) = &self.allocation else { return };
        if a.is_dedicated() || a.size() > ZEROED_SUBALLOCATION_MAX {
            return;
        }
        if let Some(p) = a.mapped_ptr() {
            // SAFETY: the mapping covers the allocation's `size` bytes, and
            // nothing uses the new buffer yet.
            unsafe { std::ptr::write_bytes(p.as_ptr() as *mut u8, 0, a.size() as usize) };
        }
    }

    /// The host address of a host-visible buffer's first byte.
    pub(crate) fn host_ptr(&self) -> Result<*mut u8> {
        self.mapped(0, self.size)
    }

    fn mapped(&self, offset: u64, len: u64) -> Result<*mut u8> {
        let allocation = self.allocation.as_ref().ok_or(Error::OutOfMemory)?;
        let base =
            allocation.mapped_ptr().ok_or_else(|| Error::Unsupported("staging memory is not host-visible".into()))?;
        if offset > self.size || len > self.size - offset {
            return Err(Error::InvalidValue("staging range out of bounds".into()));
        }
        // SAFETY: offset + len <= size, inside the mapping.
        Ok(unsafe { (base.as_ptr() as *mut u8).add(offset as usize) })
    }
}

/// The first device-local memory type among `bits` (any of them when none is).
fn device_local_type(device: &Device, bits: u32) -> Result<u32> {
    let allowed = |i: usize| bits & (1 << i) != 0;
    let types = &device.memory_types;
    (0..types.len())
        .find(|&i| allowed(i) && types[i].property_flags.contains(vk::MemoryPropertyFlags::DEVICE_LOCAL))
        .or_else(|| (0..types.len()).find(|&i| allowed(i)))
        .map(|i| i as u32)
        .ok_or_else(|| Error::Unsupported("no memory type for an exportable buffer".into()))
}

/// Who owns a tracked address range.
enum Owner {
    /// A user allocation (`Context::alloc`), freed by `Context::free`.
    User(Arc<Buffer>),
    /// Memory another process exported (`Context::import_memory`), released
    /// by `Context::close_imported`.
    Imported(Arc<Buffer>),
    /// A module's data buffer; gone when the module is dropped.
    Module(Weak<Buffer>),
}

struct Region {
    owner: Owner,
    /// Bytes usable from the base address.
    size: u64,
}

/// A tracked range resolved for a copy: the buffer and the offset in it.
pub(crate) struct Resolved {
    pub(crate) buffer: Arc<Buffer>,
    pub(crate) offset: u64,
}

/// The device buffer in `slot` when it holds `bytes`; otherwise a new one
/// of at least `bytes`, grown by halves at least (so that a few sizes serve
/// all launches), kept in `slot`. The old buffer lives on wherever queued
/// work keeps it.
pub(crate) fn grown_device_buffer(
    device: &Arc<Device>,
    slot: &mut Option<Arc<Buffer>>,
    bytes: u64,
    align: u64,
    name: &str,
) -> Result<Arc<Buffer>> {
    if let Some(b) = slot.as_ref().filter(|b| b.size >= bytes) {
        return Ok(b.clone());
    }
    let size = bytes.max(slot.as_ref().map_or(0, |b| b.size + b.size / 2));
    let b = Arc::new(Buffer::new(device, size, DEVICE_USAGE, MemoryLocation::GpuOnly, align, name)?);
    *slot = Some(b.clone());
    Ok(b)
}

/// Maps device addresses to the buffers that back them.
#[derive(Default)]
pub(crate) struct AllocationTable {
    regions: BTreeMap<u64, Region>,
    /// Bytes of user allocations (as created, rounded).
    pub(crate) user_bytes: u64,
    /// The most recently freed user allocations, `(base, size)`, newest
    /// last (at most [`FREED_HISTORY`]): a fault report says when an
    /// address lies in one of them (a use after free).
    freed: std::collections::VecDeque<(u64, u64)>,
}

/// Freed allocations an [`AllocationTable`] remembers for fault reports.
const FREED_HISTORY: usize = 4096;

impl AllocationTable {
    /// Tracks a user allocation whose base is `buffer.address`.
    pub(crate) fn insert_user(&mut self, buffer: Arc<Buffer>, size: u64) {
        self.user_bytes += buffer.size;
        self.regions.insert(buffer.address, Region { owner: Owner::User(buffer), size });
    }

    /// Tracks a module data buffer (weakly: the module owns it).
    pub(crate) fn insert_module(&mut self, buffer: &Arc<Buffer>, size: u64) {
        self.regions.insert(buffer.address, Region { owner: Owner::Module(Arc::downgrade(buffer)), size });
    }

    /// Tracks memory imported from another process, `size` bytes at `base`
    /// in `buffer`.
    pub(crate) fn insert_imported(&mut self, buffer: Arc<Buffer>, base: u64, size: u64) {
        self.regions.insert(base, Region { owner: Owner::Imported(buffer), size });
    }

    /// Removes the imported memory based at `addr`.
    pub(crate) fn remove_imported(&mut self, addr: u64) -> Result<Arc<Buffer>> {
        if !matches!(self.regions.get(&addr), Some(Region { owner: Owner::Imported(_), .. })) {
            return Err(Error::InvalidValue(format!(
                "{addr:#x} is not the base of memory imported from another process"
            )));
        }
        match self.regions.remove(&addr) {
            Some(Region { owner: Owner::Imported(b), .. }) => Ok(b),
            _ => Err(Error::InvalidValue(format!("{addr:#x} is not imported memory"))),
        }
    }

    /// The user allocation based at `addr` and its requested size.
    pub(crate) fn user_at(&self, addr: u64) -> Option<(Arc<Buffer>, u64)> {
        match self.regions.get(&addr) {
            Some(Region { owner: Owner::User(b), size }) => Some((b.clone(), *size)),
            _ => None,
        }
    }

    /// Removes the user allocation based at `addr`.
    pub(crate) fn remove_user(&mut self, addr: u64) -> Result<Arc<Buffer>> {
        match self.regions.get(&addr) {
            Some(Region { owner: Owner::User(_), .. }) => {}
            Some(Region { owner: Owner::Imported(_), .. }) => {
                return Err(Error::InvalidValue(format!(
                    "{addr:#x} is memory imported from another process (released by closing its IPC handle)"
                )))
            }
            Some(Region { owner: Owner::Module(_), .. }) => {
                return Err(Error::InvalidValue(format!("{addr:#x} is a module's global data, not an allocation")))
            }
            None => return Err(Error::InvalidValue(format!("{addr:#x} is not the base of an allocation"))),
        }
        match self.regions.remove(&addr) {
            Some(Region { owner: Owner::User(b), size }) => {
                self.user_bytes -= b.size;
                if self.freed.len() == FREED_HISTORY {
                    self.freed.pop_front();
                }
                self.freed.push_back((addr, size));
                Ok(b)
            }
            _ => Err(Error::InvalidValue(format!("{addr:#x} is not the base of an allocation"))),
        }
    }

    /// The live region containing `addr`: (base, size, buffer).
    fn find(&mut self, addr: u64) -> Option<(u64, u64, Arc<Buffer>)> {
        loop {
            let (&base, region) = self.regions.range(..=addr).next_back()?;
            let buffer = match &region.owner {
                Owner::User(b) | Owner::Imported(b) => b.clone(),
                Owner::Module(w) => match w.upgrade() {
                    Some(b) => b,
                    None => {
                        // The module is gone: forget its range and look again.
                        self.regions.remove(&base);
                        continue;
                    }
                },
            };
            let size = region.size;
            return (addr - base < size).then_some((base, size, buffer));
        }
    }

    /// Every live region as a range a kernel may access: the bytes asked
    /// for (`exact`) or the whole buffer.
    pub(crate) fn live_ranges(&self, exact: bool, out: &mut Vec<crate::fault::Range>) {
        for (&base, region) in &self.regions {
            let buffer = match &region.owner {
                Owner::User(b) | Owner::Imported(b) => b.clone(),
                Owner::Module(w) => match w.upgrade() {
                    Some(b) => b,
                    None => continue,
                },
            };
            // Without `exact`, a piece of a chunk is the whole chunk: every
            // byte of it is mapped here, as NVIDIA's driver maps small
            // allocations in larger pages that only fault outside them.
            if let (false, Some((first, end))) = (exact, buffer.chunk_extent()) {
                out.push(crate::fault::Range { base: first, end, block: buffer.block() });
                continue;
            }
            let size = if exact { region.size } else { region.size.max(buffer.size - (base - buffer.address)) };
            out.push(crate::fault::Range { base, end: base.saturating_add(size), block: buffer.block() });
        }
    }

    /// The live region nearest to `addr`: `(base, size)`.
    pub(crate) fn nearest(&self, addr: u64) -> Option<(u64, u64)> {
        let below = self.regions.range(..=addr).next_back().map(|(&b, r)| (b, r.size));
        let above = self.regions.range(addr..).next().map(|(&b, r)| (b, r.size));
        let dist = |(b, s): (u64, u64)| if addr < b { b - addr } else { addr.saturating_sub(b + s) };
        match (below, above) {
            (Some(x), Some(y)) => Some(if dist(x) <= dist(y) { x } else { y }),
            (x, y) => x.or(y),
        }
    }

    /// `(base, size)` of the most recently freed allocation that contained
    /// `addr` (among the last [`FREED_HISTORY`] freed), when no live
    /// allocation contains it now.
    pub(crate) fn freed_at(&mut self, addr: u64) -> Option<(u64, u64)> {
        if self.find(addr).is_some() {
            return None;
        }
        self.freed.iter().rev().copied().find(|&(b, s)| addr >= b && addr - b < s)
    }

    /// Forget the freed allocations so far (the context's probe kernels'
    /// buffers are not the user's: a later fault in memory they used is not
    /// a use after free).
    pub(crate) fn forget_freed(&mut self) {
        self.freed.clear();
    }

    /// `(base, size)` of the allocation containing `addr`.
    pub(crate) fn allocation_of(&mut self, addr: u64) -> Option<(u64, u64)> {
        self.find(addr).map(|(base, size, _)| (base, size))
    }

    /// Resolves `len` bytes at `addr`, which must lie inside one allocation.
    pub(crate) fn resolve(&mut self, addr: u64, len: u64, what: &str) -> Result<Resolved> {
        let (base, size, buffer) = self
            .find(addr)
            .ok_or_else(|| Error::InvalidValue(format!("{what} address {addr:#x} is not inside an allocation")))?;
        let offset = addr - base;
        if len > size - offset {
            return Err(Error::InvalidValue(format!(
                "{what} range {addr:#x}+{len} exceeds its allocation {base:#x}+{size}"
            )));
        }
        let offset = offset + (base - buffer.address);
        Ok(Resolved { buffer, offset })
    }
}

/// Bump-allocated host-visible memory for uploads and parameter buffers.
/// Everything handed out stays valid until [`UploadArena::reset`], which the
/// stream calls once the batch using it has completed.
#[derive(Default)]
pub(crate) struct UploadArena {
    blocks: Vec<(Arc<Buffer>, u64)>,
    /// Bytes handed out since the last reset.
    pub(crate) used: u64,
}

/// A piece of the upload arena.
pub(crate) struct Staged {
    pub(crate) buffer: Arc<Buffer>,
    pub(crate) offset: u64,
}

impl Staged {
    /// Device address of the piece.
    pub(crate) fn address(&self) -> u64 {
        self.buffer.address + self.offset
    }
}

impl UploadArena {
    /// `len` bytes aligned to 16, host-writable and device-addressable.
    pub(crate) fn alloc(&mut self, device: &Arc<Device>, len: u64) -> Result<Staged> {
        let len = align_up(len.max(16), 16).ok_or(Error::OutOfMemory)?;
        for (buffer, used) in &mut self.blocks {
            if buffer.size - *used >= len {
                let offset = *used;
                *used += len;
                self.used += len;
                return Ok(Staged { buffer: buffer.clone(), offset });
            }
        }
        let size = len.max(ARENA_BLOCK);
        let buffer = Arc::new(Buffer::new(
            device,
            size,
            vk::BufferUsageFlags::TRANSFER_SRC
                | vk::BufferUsageFlags::TRANSFER_DST
                | vk::BufferUsageFlags::STORAGE_BUFFER,
            MemoryLocation::CpuToGpu,
            16,
            "ptxvk upload arena",
        )?);
        self.blocks.push((buffer.clone(), len));
        self.used += len;
        Ok(Staged { buffer, offset: 0 })
    }

    /// The blocks as ranges kernels may access (parameter buffers live here).
    pub(crate) fn live_ranges(&self, out: &mut Vec<crate::fault::Range>) {
        for (b, _) in &self.blocks {
            out.push(crate::fault::Range { base: b.address, end: b.address + b.size, block: b.block() });
        }
    }

    /// Makes every block free again, keeping up to `ARENA_KEEP_BYTES` for reuse.
    pub(crate) fn reset(&mut self) {
        let mut kept = 0;
        self.blocks.retain_mut(|(buffer, used)| {
            *used = 0;
            kept += buffer.size;
            kept <= ARENA_KEEP_BYTES
        });
        self.used = 0;
    }
}

/// A host-readable buffer for device-to-host copies, grown on demand.
#[derive(Default)]
pub(crate) struct Readback {
    buffer: Option<Arc<Buffer>>,
}

impl Readback {
    /// A readback buffer of at least `len` bytes.
    pub(crate) fn get(&mut self, device: &Arc<Device>, len: u64) -> Result<Arc<Buffer>> {
        if let Some(b) = &self.buffer {
            if b.size >= len {
                return Ok(b.clone());
            }
        }
        self.buffer = None;
        let size = len.max(1 << 20).next_power_of_two().min(STAGING_CHUNK).max(len);
        let b = Arc::new(Buffer::new(
            device,
            size,
            vk::BufferUsageFlags::TRANSFER_DST,
            MemoryLocation::GpuToCpu,
            16,
            "ptxvk readback",
        )?);
        self.buffer = Some(b.clone());
        Ok(b)
    }
}
