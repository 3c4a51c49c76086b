//! Device memory: buffers bound to gpu-allocator memory, the table that maps
//! device addresses (CUDA `CUdeviceptr`s) back to buffers, and the
//! host-visible staging memory used for copies and parameter buffers.

use std::collections::BTreeMap;
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
    /// Memory imported from host pages ([`Buffer::import_host`]), owned
    /// by the buffer (null otherwise).
    imported: vk::DeviceMemory,
    /// `vkGetBufferDeviceAddress` of the buffer.
    pub(crate) address: u64,
    /// Size of the `VkBuffer`.
    pub(crate) size: u64,
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: the buffer was created by this object on `device`; whoever
        // records commands that use it keeps an `Arc` until they complete.
        unsafe { self.device.raw.destroy_buffer(self.raw, None) };
        if self.imported != vk::DeviceMemory::null() {
            // SAFETY: the memory was allocated by `import_host` for this
            // buffer alone, which is destroyed above.
            unsafe { self.device.raw.free_memory(self.imported, None) };
        }
        if let Some(a) = self.allocation.take() {
            if let Err(e) = self.device.allocator().free(a) {
                log::error!("freeing buffer memory failed: {e}");
            }
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
        // From here on `buffer` owns `raw` and cleans up on every error path.
        let mut buffer = Buffer::unbound(device, &info, size)?;
        let raw = buffer.raw;
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

    /// A new buffer without memory yet; dropping it destroys the buffer.
    fn unbound(device: &Arc<Device>, info: &vk::BufferCreateInfo<'_>, size: u64) -> Result<Buffer> {
        // SAFETY: a valid create info; the buffer is destroyed in Drop.
        let raw = unsafe { device.raw.create_buffer(info, None) }.map_err(map_create)?;
        Ok(Buffer {
            device: device.clone(),
            raw,
            allocation: None,
            imported: vk::DeviceMemory::null(),
            address: 0,
            size,
        })
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
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(handle);
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(DEVICE_USAGE)
            .sharing_mode(vk::SharingMode::EXCLUSIVE)
            .push_next(&mut external);
        let mut buffer = Buffer::unbound(device, &info, size)?;
        let raw = buffer.raw;
        // SAFETY: `raw` is a live buffer of this device.
        let requirements = unsafe { device.raw.get_buffer_memory_requirements(raw) };
        let mut host_props = vk::MemoryHostPointerPropertiesEXT::default();
        // SAFETY: `host` is an aligned host pointer (caller contract); the
        // extension is enabled on this device.
        // (ash 0.38 has no wrapper for this command: the raw function pointer.)
        let rc = unsafe {
            (ext.fp().get_memory_host_pointer_properties_ext)(ext.device(), handle, host.cast(), &mut host_props)
        };
        if rc != vk::Result::SUCCESS {
            return Err(Error::InvalidValue(format!(
                "host memory at {host:p} cannot be imported by this device ({rc})"
            )));
        }
        let types = requirements.memory_type_bits & host_props.memory_type_bits;
        // SAFETY: the physical device belongs to the instance.
        let mem = unsafe { device.instance.raw.get_physical_device_memory_properties(device.physical) };
        let index = (0..mem.memory_type_count)
            .filter(|&i| types & (1 << i) != 0)
            .max_by_key(|&i| {
                let f = mem.memory_types[i as usize].property_flags;
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
        buffer.imported = unsafe { device.raw.allocate_memory(&alloc, None) }.map_err(map_create)?;
        // SAFETY: the memory is new, large enough and of an allowed type.
        unsafe { device.raw.bind_buffer_memory(raw, buffer.imported, 0) }.map_err(map_create)?;
        // SAFETY: SHADER_DEVICE_ADDRESS usage, memory allocated with DEVICE_ADDRESS.
        buffer.address =
            unsafe { device.raw.get_buffer_device_address(&vk::BufferDeviceAddressInfo::default().buffer(raw)) };
        Ok(buffer)
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

/// Who owns a tracked address range.
enum Owner {
    /// A user allocation (`Context::alloc`), freed by `Context::free`.
    User(Arc<Buffer>),
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

/// Maps device addresses to the buffers that back them.
#[derive(Default)]
pub(crate) struct AllocationTable {
    regions: BTreeMap<u64, Region>,
    /// Bytes of user allocations (as created, rounded).
    pub(crate) user_bytes: u64,
}

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

    /// Removes the user allocation based at `addr`.
    pub(crate) fn remove_user(&mut self, addr: u64) -> Result<Arc<Buffer>> {
        match self.regions.get(&addr) {
            Some(Region { owner: Owner::User(_), .. }) => {}
            Some(Region { owner: Owner::Module(_), .. }) => {
                return Err(Error::InvalidValue(format!("{addr:#x} is a module's global data, not an allocation")))
            }
            None => return Err(Error::InvalidValue(format!("{addr:#x} is not the base of an allocation"))),
        }
        match self.regions.remove(&addr) {
            Some(Region { owner: Owner::User(b), .. }) => {
                self.user_bytes -= b.size;
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
                Owner::User(b) => b.clone(),
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
