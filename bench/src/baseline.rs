//! The baseline: saxpy written directly as a Vulkan compute shader and
//! dispatched with plain `ash`, the way a hand-written Vulkan program would.
//!
//! The shader is what this GLSL compiles to (built here with rspirv, so no
//! shader compiler is needed at build or run time):
//!
//! ```glsl
//! #version 450
//! layout(local_size_x = 256) in;
//! layout(set = 0, binding = 0) readonly buffer X { float x[]; };
//! layout(set = 0, binding = 1) buffer Y { float y[]; };
//! layout(push_constant) uniform P { float a; uint n; };
//! void main() {
//!     // 2-D dispatch: 16M elements need 65536 workgroups of 256, one more
//!     // than the 65535 a dimension is guaranteed.
//!     uint i = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * 256) + gl_GlobalInvocationID.x;
//!     if (i < n) y[i] = fma(a, x[i], y[i]);
//! }
//! ```
//!
//! Buffers are device-local storage buffers bound through one descriptor set;
//! uploads and the read-back go through a host-visible staging buffer.

use std::error::Error;
use std::ffi::c_void;

use ash::vk;
use rspirv::dr::{Builder, Operand};
use rspirv::spirv;

/// Result type of the baseline: Vulkan and rspirv errors, boxed.
pub type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// Workgroup size of the baseline shader.
const LOCAL_SIZE: u32 = 256;

/// `GLSL.std.450` instruction number of `Fma`.
const GLSL_FMA: u32 = 50;

/// Push constants: `a`, then `n`.
const PUSH_BYTES: u32 = 8;

/// Builds the saxpy compute shader shown in the module documentation
/// (SPIR-V 1.3, entry point `main`).
pub fn saxpy_spirv() -> Result<Vec<u32>> {
    use spirv::{Decoration as D, StorageClass as S};
    let mut b = Builder::new();
    b.set_version(1, 3);
    b.capability(spirv::Capability::Shader);
    let glsl = b.ext_inst_import("GLSL.std.450");
    b.memory_model(spirv::AddressingModel::Logical, spirv::MemoryModel::GLSL450);

    // Types.
    let void = b.type_void();
    let fn_void = b.type_function(void, []);
    let u32_t = b.type_int(32, 0);
    let f32_t = b.type_float(32, None);
    let bool_t = b.type_bool();
    let uvec3 = b.type_vector(u32_t, 3);
    let f32_array = b.type_runtime_array(f32_t);
    b.decorate(f32_array, D::ArrayStride, [Operand::LiteralBit32(4)]);
    let buffer_block = b.type_struct([f32_array]);
    b.decorate(buffer_block, D::Block, []);
    b.member_decorate(buffer_block, 0, D::Offset, [Operand::LiteralBit32(0)]);
    let push_block = b.type_struct([f32_t, u32_t]);
    b.decorate(push_block, D::Block, []);
    b.member_decorate(push_block, 0, D::Offset, [Operand::LiteralBit32(0)]);
    b.member_decorate(push_block, 1, D::Offset, [Operand::LiteralBit32(4)]);
    let ptr_buffer = b.type_pointer(None, S::StorageBuffer, buffer_block);
    let ptr_buffer_f32 = b.type_pointer(None, S::StorageBuffer, f32_t);
    let ptr_push = b.type_pointer(None, S::PushConstant, push_block);
    let ptr_push_f32 = b.type_pointer(None, S::PushConstant, f32_t);
    let ptr_push_u32 = b.type_pointer(None, S::PushConstant, u32_t);
    let ptr_input_uvec3 = b.type_pointer(None, S::Input, uvec3);
    let c0 = b.constant_bit32(u32_t, 0);
    let c1 = b.constant_bit32(u32_t, 1);
    let c_local = b.constant_bit32(u32_t, LOCAL_SIZE);

    // Globals (created before any function, so they land in the global section).
    let x = b.variable(ptr_buffer, None, S::StorageBuffer, None);
    b.decorate(x, D::DescriptorSet, [Operand::LiteralBit32(0)]);
    b.decorate(x, D::Binding, [Operand::LiteralBit32(0)]);
    b.decorate(x, D::NonWritable, []);
    let y = b.variable(ptr_buffer, None, S::StorageBuffer, None);
    b.decorate(y, D::DescriptorSet, [Operand::LiteralBit32(0)]);
    b.decorate(y, D::Binding, [Operand::LiteralBit32(1)]);
    let push = b.variable(ptr_push, None, S::PushConstant, None);
    let global_id = b.variable(ptr_input_uvec3, None, S::Input, None);
    b.decorate(global_id, D::BuiltIn, [Operand::BuiltIn(spirv::BuiltIn::GlobalInvocationId)]);
    let num_groups = b.variable(ptr_input_uvec3, None, S::Input, None);
    b.decorate(num_groups, D::BuiltIn, [Operand::BuiltIn(spirv::BuiltIn::NumWorkgroups)]);

    // main()
    let main = b.begin_function(void, None, spirv::FunctionControl::NONE, fn_void)?;
    let body = b.id();
    let merge = b.id();
    b.begin_block(None)?;
    let gid = b.load(uvec3, None, global_id, None, [])?;
    let gid_x = b.composite_extract(u32_t, None, gid, [0])?;
    let gid_y = b.composite_extract(u32_t, None, gid, [1])?;
    let groups = b.load(uvec3, None, num_groups, None, [])?;
    let groups_x = b.composite_extract(u32_t, None, groups, [0])?;
    let row = b.i_mul(u32_t, None, groups_x, c_local)?;
    let row_start = b.i_mul(u32_t, None, gid_y, row)?;
    let i = b.i_add(u32_t, None, row_start, gid_x)?;
    let n_ptr = b.access_chain(ptr_push_u32, None, push, [c1])?;
    let n = b.load(u32_t, None, n_ptr, None, [])?;
    let in_range = b.u_less_than(bool_t, None, i, n)?;
    b.selection_merge(merge, spirv::SelectionControl::NONE)?;
    b.branch_conditional(in_range, body, merge, [])?;

    b.begin_block(Some(body))?;
    let a_ptr = b.access_chain(ptr_push_f32, None, push, [c0])?;
    let a = b.load(f32_t, None, a_ptr, None, [])?;
    let x_ptr = b.access_chain(ptr_buffer_f32, None, x, [c0, i])?;
    let xv = b.load(f32_t, None, x_ptr, None, [])?;
    let y_ptr = b.access_chain(ptr_buffer_f32, None, y, [c0, i])?;
    let yv = b.load(f32_t, None, y_ptr, None, [])?;
    let r = b.ext_inst(f32_t, None, glsl, GLSL_FMA, [Operand::IdRef(a), Operand::IdRef(xv), Operand::IdRef(yv)])?;
    b.store(y_ptr, r, None, [])?;
    b.branch(merge)?;

    b.begin_block(Some(merge))?;
    b.ret()?;
    b.end_function()?;

    // SPIR-V 1.3: the interface lists the Input/Output variables only.
    b.entry_point(spirv::ExecutionModel::GLCompute, main, "main", [global_id, num_groups]);
    b.execution_mode(main, spirv::ExecutionMode::LocalSize, [LOCAL_SIZE, 1, 1]);
    Ok(rspirv::binary::Assemble::assemble(&b.module()))
}

/// Owns the loader and the `VkInstance`; destroys the instance when dropped.
struct Instance {
    /// Keeps the Vulkan loader loaded while the instance lives.
    _entry: ash::Entry,
    raw: ash::Instance,
}

impl Drop for Instance {
    fn drop(&mut self) {
        // SAFETY: every object created from this instance (the device) is
        // destroyed before (`Baseline::drop` runs before its fields drop).
        unsafe { self.raw.destroy_instance(None) };
    }
}

/// A buffer and the memory bound to it.
#[derive(Default)]
struct BufferMemory {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
}

/// Everything the baseline needs, created once: device, buffers for `n`
/// floats, pipeline, descriptor set and a pre-recorded dispatch.
///
/// Handles start out null and are filled in as they are created, so a
/// failure half-way through still destroys what exists (`vkDestroy*` and
/// `vkFree*` accept `VK_NULL_HANDLE`).
pub struct Baseline {
    device: ash::Device,
    queue: vk::Queue,
    name: String,
    n: u32,
    x: BufferMemory,
    y: BufferMemory,
    /// Host-visible, `2 * n` floats (x then y when uploading; y when reading back).
    staging: BufferMemory,
    staging_ptr: *mut c_void,
    shader: vk::ShaderModule,
    set_layout: vk::DescriptorSetLayout,
    pipeline_layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    descriptor_pool: vk::DescriptorPool,
    command_pool: vk::CommandPool,
    /// The saxpy dispatch, recorded once.
    dispatch_cmd: vk::CommandBuffer,
    /// Re-recorded for each upload and read-back.
    transfer_cmd: vk::CommandBuffer,
    fence: vk::Fence,
    /// Declared last: destroyed after the device (in `Drop::drop`).
    _instance: Instance,
}

impl Drop for Baseline {
    fn drop(&mut self) {
        let d = &self.device;
        // SAFETY: all handles were created from `d` (or are null, which every
        // destroy/free call accepts); waiting for idle first means none is in
        // use. Command buffers and descriptor sets go with their pools, and
        // freeing the staging memory unmaps it.
        unsafe {
            let _ = d.device_wait_idle();
            d.destroy_fence(self.fence, None);
            d.destroy_command_pool(self.command_pool, None);
            d.destroy_descriptor_pool(self.descriptor_pool, None);
            d.destroy_pipeline(self.pipeline, None);
            d.destroy_pipeline_layout(self.pipeline_layout, None);
            d.destroy_descriptor_set_layout(self.set_layout, None);
            d.destroy_shader_module(self.shader, None);
            for bm in [&self.x, &self.y, &self.staging] {
                d.destroy_buffer(bm.buffer, None);
                d.free_memory(bm.memory, None);
            }
            d.destroy_device(None);
        }
    }
}

impl Baseline {
    /// Sets everything up on the device whose `deviceUUID` is `uuid` (the
    /// device the runtime picked), for `n` elements and the scalar `a`.
    pub fn new(uuid: [u8; 16], n: u32, a: f32) -> Result<Baseline> {
        // SAFETY: loading the system Vulkan loader runs its initialisers; we
        // trust the installed loader like any Vulkan application must.
        let entry = unsafe { ash::Entry::load() }?;
        let app = vk::ApplicationInfo::default().application_name(c"ptxvk-bench").api_version(vk::API_VERSION_1_2);
        let info = vk::InstanceCreateInfo::default().application_info(&app);
        // SAFETY: `info` and what it points to outlive the call.
        let raw = unsafe { entry.create_instance(&info, None) }?;
        let instance = Instance { _entry: entry, raw };

        // The physical device with the runtime's UUID, and a compute queue family on it.
        // SAFETY: plain queries on a live instance.
        let physical = unsafe { instance.raw.enumerate_physical_devices() }?
            .into_iter()
            .find(|&pd| {
                let mut id = vk::PhysicalDeviceIDProperties::default();
                let mut props = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
                // SAFETY: `pd` comes from this instance; `props` chains only `id`.
                unsafe { instance.raw.get_physical_device_properties2(pd, &mut props) };
                id.device_uuid == uuid
            })
            .ok_or("the runtime's device is not visible to a plain Vulkan instance")?;
        // SAFETY: `physical` belongs to this instance.
        let (props, families, memory) = unsafe {
            (
                instance.raw.get_physical_device_properties(physical),
                instance.raw.get_physical_device_queue_family_properties(physical),
                instance.raw.get_physical_device_memory_properties(physical),
            )
        };
        let family = families
            .iter()
            .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .ok_or("no compute queue family")? as u32;
        let priorities = [1.0];
        let queue_info =
            [vk::DeviceQueueCreateInfo::default().queue_family_index(family).queue_priorities(&priorities)];
        let device_info = vk::DeviceCreateInfo::default().queue_create_infos(&queue_info);
        // SAFETY: `device_info` and what it points to outlive the call.
        let device = unsafe { instance.raw.create_device(physical, &device_info, None) }?;
        // SAFETY: queue 0 of `family` was requested above.
        let queue = unsafe { device.get_device_queue(family, 0) };
        let name = props.device_name_as_c_str().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();

        // From here on, `base` owns every handle: an early return cleans up.
        let mut base = Baseline {
            device,
            queue,
            name,
            n,
            x: BufferMemory::default(),
            y: BufferMemory::default(),
            staging: BufferMemory::default(),
            staging_ptr: std::ptr::null_mut(),
            shader: vk::ShaderModule::null(),
            set_layout: vk::DescriptorSetLayout::null(),
            pipeline_layout: vk::PipelineLayout::null(),
            pipeline: vk::Pipeline::null(),
            descriptor_pool: vk::DescriptorPool::null(),
            command_pool: vk::CommandPool::null(),
            dispatch_cmd: vk::CommandBuffer::null(),
            transfer_cmd: vk::CommandBuffer::null(),
            fence: vk::Fence::null(),
            _instance: instance,
        };
        base.create_objects(&props.limits, &memory, family, a)?;
        Ok(base)
    }

    /// The device name.
    pub fn device_name(&self) -> &str {
        &self.name
    }

    /// Creates buffers, pipeline, descriptors and command buffers, and
    /// records the dispatch.
    fn create_objects(
        &mut self,
        limits: &vk::PhysicalDeviceLimits,
        memory: &vk::PhysicalDeviceMemoryProperties,
        family: u32,
        a: f32,
    ) -> Result<()> {
        let bytes = self.n as u64 * 4;
        let storage = vk::BufferUsageFlags::STORAGE_BUFFER
            | vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST;
        let host = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        self.create_buffer(Which::X, bytes, storage, vk::MemoryPropertyFlags::DEVICE_LOCAL, memory)?;
        self.create_buffer(Which::Y, bytes, storage, vk::MemoryPropertyFlags::DEVICE_LOCAL, memory)?;
        let transfer = vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST;
        self.create_buffer(Which::Staging, 2 * bytes, transfer, host, memory)?;
        let d = &self.device;
        // SAFETY: the staging memory is host-visible, not yet mapped, and
        // `2 * bytes` long.
        self.staging_ptr = unsafe { d.map_memory(self.staging.memory, 0, 2 * bytes, vk::MemoryMapFlags::empty()) }?;

        // Shader, layouts, pipeline.
        let code = saxpy_spirv()?;
        // SAFETY: `code` is a complete SPIR-V module that outlives the call.
        self.shader = unsafe { d.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None) }?;
        let bindings = [0, 1].map(|binding| {
            vk::DescriptorSetLayoutBinding::default()
                .binding(binding)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
        });
        let set_info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
        // SAFETY: `set_info` points to `bindings`, alive for the call.
        self.set_layout = unsafe { d.create_descriptor_set_layout(&set_info, None) }?;
        let set_layouts = [self.set_layout];
        let ranges = [vk::PushConstantRange::default().stage_flags(vk::ShaderStageFlags::COMPUTE).size(PUSH_BYTES)];
        let layout_info =
            vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts).push_constant_ranges(&ranges);
        // SAFETY: `layout_info` points to locals alive for the call.
        self.pipeline_layout = unsafe { d.create_pipeline_layout(&layout_info, None) }?;
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(self.shader)
            .name(c"main");
        let pipeline_info = [vk::ComputePipelineCreateInfo::default().stage(stage).layout(self.pipeline_layout)];
        // SAFETY: the create info refers to live objects and locals.
        self.pipeline = unsafe { d.create_compute_pipelines(vk::PipelineCache::null(), &pipeline_info, None) }
            .map_err(|(_, e)| e)?[0];

        // Descriptor set: x at binding 0, y at binding 1.
        let sizes = [vk::DescriptorPoolSize { ty: vk::DescriptorType::STORAGE_BUFFER, descriptor_count: 2 }];
        let pool_info = vk::DescriptorPoolCreateInfo::default().max_sets(1).pool_sizes(&sizes);
        // SAFETY: `pool_info` points to `sizes`, alive for the call.
        self.descriptor_pool = unsafe { d.create_descriptor_pool(&pool_info, None) }?;
        let alloc_info =
            vk::DescriptorSetAllocateInfo::default().descriptor_pool(self.descriptor_pool).set_layouts(&set_layouts);
        // SAFETY: the pool has room for this one set.
        let set = unsafe { d.allocate_descriptor_sets(&alloc_info) }?[0];
        let x_info = [vk::DescriptorBufferInfo { buffer: self.x.buffer, offset: 0, range: vk::WHOLE_SIZE }];
        let y_info = [vk::DescriptorBufferInfo { buffer: self.y.buffer, offset: 0, range: vk::WHOLE_SIZE }];
        let writes = [(0, &x_info), (1, &y_info)].map(|(binding, info)| {
            vk::WriteDescriptorSet::default()
                .dst_set(set)
                .dst_binding(binding)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .buffer_info(info)
        });
        // SAFETY: the set is not in use; the writes refer to live buffers.
        unsafe { d.update_descriptor_sets(&writes, &[]) };

        // Command pool, two command buffers, a fence.
        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: plain object creation.
        self.command_pool = unsafe { d.create_command_pool(&pool_info, None) }?;
        let cmd_info = vk::CommandBufferAllocateInfo::default()
            .command_pool(self.command_pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(2);
        // SAFETY: the pool is live.
        let cmds = unsafe { d.allocate_command_buffers(&cmd_info) }?;
        (self.dispatch_cmd, self.transfer_cmd) = (cmds[0], cmds[1]);
        // SAFETY: plain object creation.
        self.fence = unsafe { d.create_fence(&vk::FenceCreateInfo::default(), None) }?;

        // The dispatch: as many workgroups in x as allowed, the rest in y.
        let groups = self.n.div_ceil(LOCAL_SIZE);
        let rows = groups.div_ceil(limits.max_compute_work_group_count[0]);
        let columns = groups.div_ceil(rows);
        if rows > limits.max_compute_work_group_count[1] {
            return Err("too many elements for one dispatch".into());
        }
        let mut push = [0u8; PUSH_BYTES as usize];
        push[..4].copy_from_slice(&a.to_le_bytes());
        push[4..].copy_from_slice(&self.n.to_le_bytes());
        let cmd = self.dispatch_cmd;
        // SAFETY: `cmd` is in the initial state; every object recorded is live
        // and outlives the command buffer (destroyed after its pool).
        unsafe {
            d.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default())?;
            d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, self.pipeline);
            d.cmd_bind_descriptor_sets(cmd, vk::PipelineBindPoint::COMPUTE, self.pipeline_layout, 0, &[set], &[]);
            d.cmd_push_constants(cmd, self.pipeline_layout, vk::ShaderStageFlags::COMPUTE, 0, &push);
            d.cmd_dispatch(cmd, columns, rows, 1);
            // Make y's writes visible to the next dispatch and to the read-back copy.
            memory_barrier(
                d,
                cmd,
                (vk::PipelineStageFlags::COMPUTE_SHADER, vk::AccessFlags::SHADER_WRITE),
                (
                    vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER,
                    vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_READ,
                ),
            );
            d.end_command_buffer(cmd)?;
        }
        Ok(())
    }

    /// Creates one buffer of `bytes` with memory of the `preferred` kind when
    /// the device has one (else any memory type the buffer accepts).
    fn create_buffer(
        &mut self,
        which: Which,
        bytes: u64,
        usage: vk::BufferUsageFlags,
        preferred: vk::MemoryPropertyFlags,
        memory: &vk::PhysicalDeviceMemoryProperties,
    ) -> Result<()> {
        let d = &self.device;
        let slot = match which {
            Which::X => &mut self.x,
            Which::Y => &mut self.y,
            Which::Staging => &mut self.staging,
        };
        let info = vk::BufferCreateInfo::default().size(bytes).usage(usage).sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: plain object creation; the handle is stored for `Drop` at once.
        slot.buffer = unsafe { d.create_buffer(&info, None) }?;
        // SAFETY: the buffer is live.
        let req = unsafe { d.get_buffer_memory_requirements(slot.buffer) };
        let types = &memory.memory_types[..memory.memory_type_count as usize];
        let allowed = |i: usize| req.memory_type_bits & (1 << i) != 0;
        let host_needed = preferred.contains(vk::MemoryPropertyFlags::HOST_VISIBLE);
        let index = (0..types.len())
            .find(|&i| allowed(i) && types[i].property_flags.contains(preferred))
            .or_else(|| (0..types.len()).find(|&i| allowed(i) && !host_needed))
            .ok_or("no suitable memory type")?;
        let alloc = vk::MemoryAllocateInfo::default().allocation_size(req.size).memory_type_index(index as u32);
        // SAFETY: size and type index come from the buffer's requirements.
        slot.memory = unsafe { d.allocate_memory(&alloc, None) }?;
        // SAFETY: fresh memory of a type the buffer accepts, bound once at offset 0.
        unsafe { d.bind_buffer_memory(slot.buffer, slot.memory, 0) }?;
        Ok(())
    }

    /// Submits `cmd` and waits for it.
    fn submit_and_wait(&self, cmd: vk::CommandBuffer) -> Result<()> {
        let cmds = [cmd];
        let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
        // SAFETY: `cmd` is recorded and not pending (each submission is
        // waited for before the next); the fence is unsignalled.
        unsafe {
            self.device.queue_submit(self.queue, &submit, self.fence)?;
            self.device.wait_for_fences(&[self.fence], true, u64::MAX)?;
            self.device.reset_fences(&[self.fence])?;
        }
        Ok(())
    }

    /// Records and runs a copy between the staging buffer and x/y.
    fn transfer(&self, record: impl FnOnce(&ash::Device, vk::CommandBuffer)) -> Result<()> {
        let (d, cmd) = (&self.device, self.transfer_cmd);
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: `cmd` is not pending (every submission is waited for), so
        // it may be reset and re-recorded.
        unsafe {
            d.reset_command_buffer(cmd, vk::CommandBufferResetFlags::empty())?;
            d.begin_command_buffer(cmd, &begin)?;
            record(d, cmd);
            d.end_command_buffer(cmd)?;
        }
        self.submit_and_wait(cmd)
    }

    /// Copies `x` and `y` (each `n` floats) to the device.
    pub fn upload(&self, x: &[f32], y: &[f32]) -> Result<()> {
        let n = self.n as usize;
        if x.len() != n || y.len() != n {
            return Err("upload: wrong length".into());
        }
        // SAFETY: the staging memory is mapped, host-coherent, `2n` floats
        // long, 4-byte aligned, and no device work uses it now.
        let staging = unsafe { std::slice::from_raw_parts_mut(self.staging_ptr.cast::<f32>(), 2 * n) };
        staging[..n].copy_from_slice(x);
        staging[n..].copy_from_slice(y);
        let bytes = n as u64 * 4;
        self.transfer(|d, cmd| {
            // SAFETY: called while `cmd` is recording; the buffers are live and large enough.
            unsafe {
                d.cmd_copy_buffer(cmd, self.staging.buffer, self.x.buffer, &[vk::BufferCopy::default().size(bytes)]);
                let region = vk::BufferCopy::default().src_offset(bytes).size(bytes);
                d.cmd_copy_buffer(cmd, self.staging.buffer, self.y.buffer, &[region]);
                memory_barrier(
                    d,
                    cmd,
                    (vk::PipelineStageFlags::TRANSFER, vk::AccessFlags::TRANSFER_WRITE),
                    (
                        vk::PipelineStageFlags::COMPUTE_SHADER,
                        vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE,
                    ),
                );
            }
        })
    }

    /// Runs saxpy once (`y = a * x + y`) and waits for it.
    pub fn run(&self) -> Result<()> {
        self.submit_and_wait(self.dispatch_cmd)
    }

    /// Reads `y` back.
    pub fn download_y(&self) -> Result<Vec<f32>> {
        let bytes = self.n as u64 * 4;
        self.transfer(|d, cmd| {
            // SAFETY: called while `cmd` is recording; the buffers are live and large enough.
            unsafe {
                d.cmd_copy_buffer(cmd, self.y.buffer, self.staging.buffer, &[vk::BufferCopy::default().size(bytes)]);
                memory_barrier(
                    d,
                    cmd,
                    (vk::PipelineStageFlags::TRANSFER, vk::AccessFlags::TRANSFER_WRITE),
                    (vk::PipelineStageFlags::HOST, vk::AccessFlags::HOST_READ),
                );
            }
        })?;
        // SAFETY: as in `upload`; the copy has completed (waited for above).
        let staging = unsafe { std::slice::from_raw_parts(self.staging_ptr.cast::<f32>(), self.n as usize) };
        Ok(staging.to_vec())
    }
}

/// Which buffer [`Baseline::create_buffer`] fills in.
#[derive(Clone, Copy)]
enum Which {
    X,
    Y,
    Staging,
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

#[cfg(test)]
mod tests {
    /// The baseline shader passes `spirv-val` (skipped when it is not installed).
    #[test]
    fn baseline_shader_validates() {
        let words = super::saxpy_spirv().unwrap();
        let path = std::env::temp_dir().join(format!("ptxvk-bench-baseline-{}.spv", std::process::id()));
        std::fs::write(&path, words.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
        let out = std::process::Command::new("spirv-val").args(["--target-env", "vulkan1.2"]).arg(&path).output();
        let _ = std::fs::remove_file(&path);
        match out {
            Ok(out) => assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr)),
            Err(e) => eprintln!("spirv-val not run: {e}"),
        }
    }
}
