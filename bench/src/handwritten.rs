//! Hand-written compute shaders dispatched with plain `ash`, the way a
//! Vulkan program would run them: storage buffers bound through one
//! descriptor set (binding `i` is the `i`-th buffer), parameters in push
//! constants, one pre-recorded command buffer per dispatch, submitted and
//! waited for with a fence. [`crate::twins`] runs the shaders of
//! `bench/twins/*.comp` (checked in as SPIR-V) against their CUDA twins.
//!
//! Every Vulkan object is owned by a Rust value that destroys it on drop;
//! buffers and kernels keep the device alive through an `Rc`.

use std::error::Error;
use std::rc::Rc;

use ash::vk;

/// Result type of the hand-written path: Vulkan errors, boxed.
pub type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// The instance and device, destroyed when the last user is dropped.
struct Shared {
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    queue: vk::Queue,
    memory: vk::PhysicalDeviceMemoryProperties,
    command_pool: vk::CommandPool,
    fence: vk::Fence,
    /// The device's name and `maxComputeWorkGroupCount`.
    name: String,
    max_workgroups: [u32; 3],
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: every buffer and kernel holds an `Rc` to this value, so
        // none is left; waiting for the device first makes the pool and
        // fence unused.
        unsafe {
            let _ = self.device.device_wait_idle();
            self.device.destroy_fence(self.fence, None);
            self.device.destroy_command_pool(self.command_pool, None);
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}

impl Shared {
    /// Submits `cmd` and waits for it.
    fn submit_and_wait(&self, cmd: vk::CommandBuffer) -> Result<()> {
        let cmds = [cmd];
        let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
        // SAFETY: `cmd` is recorded and not pending (every submission is
        // waited for before the next); the fence is unsignalled.
        unsafe {
            self.device.queue_submit(self.queue, &submit, self.fence)?;
            self.device.wait_for_fences(&[self.fence], true, u64::MAX)?;
            self.device.reset_fences(&[self.fence])?;
        }
        Ok(())
    }

    /// Allocates a primary command buffer from the pool.
    fn command_buffer(&self) -> Result<vk::CommandBuffer> {
        let info = vk::CommandBufferAllocateInfo::default()
            .command_pool(self.command_pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        // SAFETY: the pool is live; the buffer is freed with it.
        Ok(unsafe { self.device.allocate_command_buffers(&info) }?[0])
    }

    /// Records a one-time command buffer with `record`, runs it and waits.
    fn one_time(&self, record: impl FnOnce(&ash::Device, vk::CommandBuffer)) -> Result<()> {
        let cmd = self.command_buffer()?;
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        let run = || -> Result<()> {
            // SAFETY: `cmd` is fresh and recorded only here.
            unsafe {
                self.device.begin_command_buffer(cmd, &begin)?;
                record(&self.device, cmd);
                self.device.end_command_buffer(cmd)?;
            }
            self.submit_and_wait(cmd)
        };
        let outcome = run();
        // SAFETY: the submission was waited for (or never made).
        unsafe { self.device.free_command_buffers(self.command_pool, &[cmd]) };
        outcome
    }
}

/// A Vulkan device of its own (separate from the runtime's), found by UUID.
pub struct Gpu(Rc<Shared>);

impl Gpu {
    /// Opens the device whose `VkPhysicalDeviceIDProperties::deviceUUID` is `uuid`.
    pub fn new(uuid: [u8; 16]) -> Result<Gpu> {
        // SAFETY: loads the system's Vulkan loader.
        let entry = unsafe { ash::Entry::load() }?;
        let app = vk::ApplicationInfo::default().application_name(c"ptxvk-bench").api_version(vk::API_VERSION_1_2);
        let info = vk::InstanceCreateInfo::default().application_info(&app);
        // SAFETY: valid create info; destroyed in `Shared::drop` (or below on error).
        let instance = unsafe { entry.create_instance(&info, None) }?;
        type Opened = (ash::Device, vk::Queue, vk::PhysicalDeviceMemoryProperties, u32, vk::PhysicalDeviceProperties);
        let open = || -> Result<Opened> {
            // SAFETY: the instance is live.
            let physical = unsafe { instance.enumerate_physical_devices() }?
                .into_iter()
                .find(|&pd| {
                    let mut id = vk::PhysicalDeviceIDProperties::default();
                    let mut props = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
                    // SAFETY: `pd` comes from this instance.
                    unsafe { instance.get_physical_device_properties2(pd, &mut props) };
                    id.device_uuid == uuid
                })
                .ok_or("the runtime's device is not visible to a plain Vulkan instance")?;
            // SAFETY: `physical` comes from this instance.
            let (families, memory, props) = unsafe {
                (
                    instance.get_physical_device_queue_family_properties(physical),
                    instance.get_physical_device_memory_properties(physical),
                    instance.get_physical_device_properties(physical),
                )
            };
            let family = families
                .iter()
                .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
                .ok_or("no compute queue family")? as u32;
            let priorities = [1.0];
            let queues =
                [vk::DeviceQueueCreateInfo::default().queue_family_index(family).queue_priorities(&priorities)];
            // Buffer device addresses, for the shaders that take pointers in
            // push constants as ptxvk's translations do (Vulkan 1.2 core,
            // required by ptxvk's runtime too).
            let mut v12 = vk::PhysicalDeviceVulkan12Features::default().buffer_device_address(true);
            let info = vk::DeviceCreateInfo::default().queue_create_infos(&queues).push_next(&mut v12);
            // SAFETY: one queue of a family the device has.
            let device = unsafe { instance.create_device(physical, &info, None) }?;
            // SAFETY: queue 0 of the family created above.
            let queue = unsafe { device.get_device_queue(family, 0) };
            Ok((device, queue, memory, family, props))
        };
        let (device, queue, memory, family, props) = match open() {
            Ok(v) => v,
            Err(e) => {
                // SAFETY: nothing was created from the instance.
                unsafe { instance.destroy_instance(None) };
                return Err(e);
            }
        };
        let pool_info = vk::CommandPoolCreateInfo::default().queue_family_index(family);
        // SAFETY: the device is live; a pool or fence that fails to be made
        // leaves the other objects to `Shared::drop` with null handles,
        // which Vulkan's destroy functions ignore.
        let (command_pool, fence) = unsafe {
            (
                device.create_command_pool(&pool_info, None).unwrap_or(vk::CommandPool::null()),
                device.create_fence(&vk::FenceCreateInfo::default(), None).unwrap_or(vk::Fence::null()),
            )
        };
        let name = props.device_name_as_c_str().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let max_workgroups = props.limits.max_compute_work_group_count;
        let shared =
            Shared { _entry: entry, instance, device, queue, memory, command_pool, fence, name, max_workgroups };
        if command_pool == vk::CommandPool::null() || fence == vk::Fence::null() {
            return Err("could not create a command pool and fence".into());
        }
        Ok(Gpu(Rc::new(shared)))
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// `maxComputeWorkGroupCount`.
    pub fn max_workgroups(&self) -> [u32; 3] {
        self.0.max_workgroups
    }

    /// A device-local storage buffer of `bytes` (transfer source and target too).
    pub fn buffer(&self, bytes: u64) -> Result<Buffer> {
        let usage = vk::BufferUsageFlags::STORAGE_BUFFER
            | vk::BufferUsageFlags::SHADER_DEVICE_ADDRESS
            | vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST;
        Buffer::new(&self.0, bytes, usage, vk::MemoryPropertyFlags::DEVICE_LOCAL)
    }

    /// Copies `data` into `buffer` through a host-visible staging buffer.
    pub fn upload(&self, buffer: &Buffer, data: &[u8]) -> Result<()> {
        let staging = self.staging(data.len() as u64)?;
        // SAFETY: the staging memory is mapped, host-coherent and `data.len()`
        // bytes long; no device work uses it yet.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), staging.mapped.cast::<u8>(), data.len()) };
        let after =
            (vk::PipelineStageFlags::COMPUTE_SHADER, vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE);
        self.copy(&staging, buffer, data.len() as u64, after)
    }

    /// Reads the first `bytes` of `buffer` back.
    pub fn download(&self, buffer: &Buffer, bytes: usize) -> Result<Vec<u8>> {
        let staging = self.staging(bytes as u64)?;
        self.copy(buffer, &staging, bytes as u64, (vk::PipelineStageFlags::HOST, vk::AccessFlags::HOST_READ))?;
        let mut out = vec![0u8; bytes];
        // SAFETY: the copy has completed (waited for above); the mapping is
        // `bytes` long.
        unsafe { std::ptr::copy_nonoverlapping(staging.mapped.cast::<u8>(), out.as_mut_ptr(), bytes) };
        Ok(out)
    }

    /// Copies the first `bytes` of `src` to `dst`, made visible to `after`
    /// (stages, accesses), and waits.
    fn copy(
        &self,
        src: &Buffer,
        dst: &Buffer,
        bytes: u64,
        after: (vk::PipelineStageFlags, vk::AccessFlags),
    ) -> Result<()> {
        let region = [vk::BufferCopy::default().size(bytes)];
        self.0.one_time(|d, cmd| {
            // SAFETY: `cmd` is recording; both buffers are live and large enough.
            unsafe {
                d.cmd_copy_buffer(cmd, src.buffer, dst.buffer, &region);
                memory_barrier(d, cmd, (vk::PipelineStageFlags::TRANSFER, vk::AccessFlags::TRANSFER_WRITE), after);
            }
        })
    }

    /// A mapped host-visible buffer of `bytes`.
    fn staging(&self, bytes: u64) -> Result<Buffer> {
        let usage = vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST;
        let host = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let mut b = Buffer::new(&self.0, bytes.max(4), usage, host)?;
        // SAFETY: host-visible memory bound to `b`, not mapped yet.
        b.mapped = unsafe { self.0.device.map_memory(b.memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }?;
        Ok(b)
    }

    /// A compute pipeline from `spirv` (entry point `main`) with `buffers`
    /// bound at bindings 0, 1, ..., `push` as its push constants, and one
    /// recorded dispatch of `groups` workgroups.
    pub fn kernel(&self, spirv: &[u8], buffers: &[&Buffer], push: &[u8], groups: [u32; 3]) -> Result<Kernel> {
        Kernel::new(&self.0, spirv, buffers, push, groups)
    }
}

/// A buffer with its own memory; freed on drop.
pub struct Buffer {
    shared: Rc<Shared>,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    mapped: *mut std::ffi::c_void,
}

impl Buffer {
    fn new(
        shared: &Rc<Shared>,
        bytes: u64,
        usage: vk::BufferUsageFlags,
        preferred: vk::MemoryPropertyFlags,
    ) -> Result<Buffer> {
        let d = &shared.device;
        let mut b = Buffer {
            shared: shared.clone(),
            buffer: vk::Buffer::null(),
            memory: vk::DeviceMemory::null(),
            mapped: std::ptr::null_mut(),
        };
        let info = vk::BufferCreateInfo::default().size(bytes).usage(usage).sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: plain object creation; `b` destroys it on drop.
        b.buffer = unsafe { d.create_buffer(&info, None) }?;
        // SAFETY: the buffer is live.
        let req = unsafe { d.get_buffer_memory_requirements(b.buffer) };
        let types = &shared.memory.memory_types[..shared.memory.memory_type_count as usize];
        let allowed = |i: usize| req.memory_type_bits & (1 << i) != 0;
        let host_needed = preferred.contains(vk::MemoryPropertyFlags::HOST_VISIBLE);
        let index = (0..types.len())
            .find(|&i| allowed(i) && types[i].property_flags.contains(preferred))
            .or_else(|| (0..types.len()).find(|&i| allowed(i) && !host_needed))
            .ok_or("no suitable memory type")?;
        let mut flags = vk::MemoryAllocateFlagsInfo::default();
        if usage.contains(vk::BufferUsageFlags::SHADER_DEVICE_ADDRESS) {
            flags = flags.flags(vk::MemoryAllocateFlags::DEVICE_ADDRESS);
        }
        let alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(index as u32)
            .push_next(&mut flags);
        // SAFETY: size and type index come from the buffer's requirements.
        b.memory = unsafe { d.allocate_memory(&alloc, None) }?;
        // SAFETY: fresh memory of a type the buffer accepts, bound once at offset 0.
        unsafe { d.bind_buffer_memory(b.buffer, b.memory, 0) }?;
        Ok(b)
    }
}

impl Buffer {
    /// The buffer's device address (`vkGetBufferDeviceAddress`).
    pub fn address(&self) -> u64 {
        let info = vk::BufferDeviceAddressInfo::default().buffer(self.buffer);
        // SAFETY: the buffer was made with `SHADER_DEVICE_ADDRESS` usage
        // (device-local buffers only) and its memory is bound.
        unsafe { self.shared.device.get_buffer_device_address(&info) }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: every use of the buffer was waited for (submissions are
        // synchronous); freeing the memory unmaps it.
        unsafe {
            self.shared.device.destroy_buffer(self.buffer, None);
            self.shared.device.free_memory(self.memory, None);
        }
    }
}

/// A pipeline, its layouts and descriptor set, and a command buffer with
/// one dispatch recorded; destroyed on drop.
pub struct Kernel {
    shared: Rc<Shared>,
    shader: vk::ShaderModule,
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    pool: vk::DescriptorPool,
    cmd: vk::CommandBuffer,
}

impl Kernel {
    fn new(shared: &Rc<Shared>, spirv: &[u8], buffers: &[&Buffer], push: &[u8], groups: [u32; 3]) -> Result<Kernel> {
        let d = &shared.device;
        let mut k = Kernel {
            shared: shared.clone(),
            shader: vk::ShaderModule::null(),
            set_layout: vk::DescriptorSetLayout::null(),
            layout: vk::PipelineLayout::null(),
            pipeline: vk::Pipeline::null(),
            pool: vk::DescriptorPool::null(),
            cmd: vk::CommandBuffer::null(),
        };
        let words: Vec<u32> = spirv.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        // SAFETY: SPIR-V words checked in from glslang (and validated by
        // `spirv-val` in this crate's tests); `k` destroys the module.
        k.shader = unsafe { d.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None) }?;
        let bindings: Vec<_> = (0..buffers.len() as u32)
            .map(|binding| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(binding)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        // SAFETY: valid create infos; every object is destroyed by `k`.
        k.set_layout = unsafe {
            d.create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings), None)
        }?;
        let set_layouts = [k.set_layout];
        let ranges =
            [vk::PushConstantRange::default().stage_flags(vk::ShaderStageFlags::COMPUTE).size(push.len() as u32)];
        let mut layout_info = vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts);
        if !push.is_empty() {
            layout_info = layout_info.push_constant_ranges(&ranges);
        }
        // SAFETY: as above.
        k.layout = unsafe { d.create_pipeline_layout(&layout_info, None) }?;
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(k.shader)
            .name(c"main");
        let info = [vk::ComputePipelineCreateInfo::default().stage(stage).layout(k.layout)];
        // SAFETY: as above.
        k.pipeline =
            unsafe { d.create_compute_pipelines(vk::PipelineCache::null(), &info, None) }.map_err(|(_, e)| e)?[0];

        let set = if buffers.is_empty() {
            None
        } else {
            let sizes = [vk::DescriptorPoolSize {
                ty: vk::DescriptorType::STORAGE_BUFFER,
                descriptor_count: buffers.len() as u32,
            }];
            // SAFETY: as above.
            k.pool = unsafe {
                d.create_descriptor_pool(&vk::DescriptorPoolCreateInfo::default().max_sets(1).pool_sizes(&sizes), None)
            }?;
            let alloc = vk::DescriptorSetAllocateInfo::default().descriptor_pool(k.pool).set_layouts(&set_layouts);
            // SAFETY: one set of the layout the pool was sized for.
            let set = unsafe { d.allocate_descriptor_sets(&alloc) }?[0];
            let infos: Vec<[vk::DescriptorBufferInfo; 1]> = buffers
                .iter()
                .map(|b| [vk::DescriptorBufferInfo { buffer: b.buffer, offset: 0, range: vk::WHOLE_SIZE }])
                .collect();
            let writes: Vec<_> = infos
                .iter()
                .enumerate()
                .map(|(binding, info)| {
                    vk::WriteDescriptorSet::default()
                        .dst_set(set)
                        .dst_binding(binding as u32)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .buffer_info(info)
                })
                .collect();
            // SAFETY: the set and buffers are live; the buffers outlive the
            // kernel's use of them (the caller keeps them while it runs).
            unsafe { d.update_descriptor_sets(&writes, &[]) };
            Some(set)
        };

        k.cmd = shared.command_buffer()?;
        // SAFETY: `k.cmd` is fresh; everything recorded is live.
        unsafe {
            d.begin_command_buffer(k.cmd, &vk::CommandBufferBeginInfo::default())?;
            d.cmd_bind_pipeline(k.cmd, vk::PipelineBindPoint::COMPUTE, k.pipeline);
            if let Some(set) = set {
                d.cmd_bind_descriptor_sets(k.cmd, vk::PipelineBindPoint::COMPUTE, k.layout, 0, &[set], &[]);
            }
            if !push.is_empty() {
                d.cmd_push_constants(k.cmd, k.layout, vk::ShaderStageFlags::COMPUTE, 0, push);
            }
            d.cmd_dispatch(k.cmd, groups[0], groups[1], groups[2]);
            memory_barrier(
                d,
                k.cmd,
                (vk::PipelineStageFlags::COMPUTE_SHADER, vk::AccessFlags::SHADER_WRITE),
                (
                    vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER,
                    vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_READ,
                ),
            );
            d.end_command_buffer(k.cmd)?;
        }
        Ok(k)
    }

    /// Runs the recorded dispatch and waits for it.
    pub fn run(&self) -> Result<()> {
        self.shared.submit_and_wait(self.cmd)
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        let d = &self.shared.device;
        // SAFETY: every submission of `cmd` was waited for; null handles
        // (objects never made) are ignored by Vulkan's destroy functions.
        unsafe {
            if self.cmd != vk::CommandBuffer::null() {
                d.free_command_buffers(self.shared.command_pool, &[self.cmd]);
            }
            d.destroy_descriptor_pool(self.pool, None);
            d.destroy_pipeline(self.pipeline, None);
            d.destroy_pipeline_layout(self.layout, None);
            d.destroy_descriptor_set_layout(self.set_layout, None);
            d.destroy_shader_module(self.shader, None);
        }
    }
}

/// Records a global memory barrier from `(stages, accesses)` to `(stages, accesses)`.
///
/// # Safety
/// `cmd` must be a command buffer of `d` in the recording state.
unsafe fn memory_barrier(
    d: &ash::Device,
    cmd: vk::CommandBuffer,
    src: (vk::PipelineStageFlags, vk::AccessFlags),
    dst: (vk::PipelineStageFlags, vk::AccessFlags),
) {
    let barrier = [vk::MemoryBarrier::default().src_access_mask(src.1).dst_access_mask(dst.1)];
    // SAFETY: the caller guarantees `cmd` is recording.
    unsafe { d.cmd_pipeline_barrier(cmd, src.0, dst.0, vk::DependencyFlags::empty(), &barrier, &[], &[]) };
}
