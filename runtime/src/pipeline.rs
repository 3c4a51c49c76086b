//! Shader modules, pipeline layouts, the pipeline cache and compute pipelines
//! specialised per launch shape (see the specialization constants in
//! [`ptxvk_translator::abi`]).

use std::ffi::CStr;
use std::sync::Arc;

use ash::vk;
use ptxvk_translator::abi;

use crate::device::Device;
use crate::error::{map_create, Result};

/// A `VkShaderModule`.
pub(crate) struct ShaderModule {
    device: Arc<Device>,
    pub(crate) raw: vk::ShaderModule,
    /// Its size in bytes (for traces).
    pub(crate) bytes: usize,
}

impl ShaderModule {
    pub(crate) fn new(device: &Arc<Device>, spirv: &[u32]) -> Result<Self> {
        let info = vk::ShaderModuleCreateInfo::default().code(spirv);
        // SAFETY: `spirv` is a complete SPIR-V module from the translator.
        let raw = unsafe { device.raw.create_shader_module(&info, None) }.map_err(map_create)?;
        Ok(ShaderModule { device: device.clone(), raw, bytes: spirv.len() * 4 })
    }
}

impl Drop for ShaderModule {
    fn drop(&mut self) {
        // SAFETY: created by this object; pipelines built from it do not need it anymore.
        unsafe { self.device.raw.destroy_shader_module(self.raw, None) };
    }
}

/// A `VkPipelineLayout` with one push-constant range and no descriptor sets.
pub(crate) struct PipelineLayout {
    device: Arc<Device>,
    pub(crate) raw: vk::PipelineLayout,
}

impl PipelineLayout {
    pub(crate) fn new(device: &Arc<Device>, push_constant_bytes: u32) -> Result<Self> {
        let ranges = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .offset(0)
            .size(push_constant_bytes)];
        let ranges: &[vk::PushConstantRange] = if push_constant_bytes == 0 { &[] } else { &ranges };
        let info = vk::PipelineLayoutCreateInfo::default().push_constant_ranges(ranges);
        // SAFETY: valid create info; destroyed in Drop after every pipeline using it.
        let raw = unsafe { device.raw.create_pipeline_layout(&info, None) }.map_err(map_create)?;
        Ok(PipelineLayout { device: device.clone(), raw })
    }
}

impl Drop for PipelineLayout {
    fn drop(&mut self) {
        // SAFETY: created by this object; command buffers using it have completed
        // (their batch holds the owning module alive).
        unsafe { self.device.raw.destroy_pipeline_layout(self.raw, None) };
    }
}

/// What a compute pipeline is specialised for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PipelineKey {
    /// Index of the entry in the module.
    pub(crate) entry: usize,
    /// Padded workgroup size ([`abi::workgroup_size`]).
    pub(crate) workgroup_size: u32,
    /// The CUDA block shape.
    pub(crate) ntid: [u32; 3],
    /// [`abi::SPEC_SHARED_WORDS`]: the launch's 32-bit `.shared` words in
    /// Workgroup memory (1 for entries with 64-bit shared words).
    pub(crate) shared_words: u32,
    /// [`abi::SPEC_SHARED_WIDE_WORDS`]: the same in 64-bit words for
    /// entries with them (1 for others).
    pub(crate) shared_wide_words: u32,
    /// The launch's dynamic shared memory in bytes (`%dynamic_smem_size`).
    pub(crate) dynamic_shared_bytes: u32,
    /// [`abi::SPEC_SHARED_SPILL_ADDRESS`] (0: the launch does not spill).
    pub(crate) spill_address: u64,
    /// [`abi::SPEC_SHARED_SPILL_STRIDE`].
    pub(crate) spill_stride: u32,
    /// [`abi::SPEC_SHARED_HOT_BYTES`].
    pub(crate) spill_hot_bytes: u32,
    /// [`abi::SPEC_FAULT_DEPTH`]: the fault checks' range table holds
    /// `2^fault_depth` ranges (0 without fault checks).
    pub(crate) fault_depth: u32,
}

/// A compute `VkPipeline`.
pub(crate) struct Pipeline {
    device: Arc<Device>,
    pub(crate) raw: vk::Pipeline,
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        // SAFETY: created by this object; batches using it keep its module alive.
        unsafe { self.device.raw.destroy_pipeline(self.raw, None) };
    }
}

/// Everything a pipeline is built from.
pub(crate) struct PipelineSource<'a> {
    pub(crate) shader: &'a ShaderModule,
    pub(crate) layout: &'a PipelineLayout,
    pub(crate) entry_name: &'a CStr,
    /// The module's warp path (native and slice need full subgroups).
    pub(crate) warp_path: ptxvk_translator::WarpPath,
}

/// Byte layout of the specialization data: six u32, 8 unused bytes (the
/// module data address was there; it is in the push constants now), the
/// spill address (u64) at 32, the spill stride at 40, the wide shared
/// words at 44, the hot bytes at 48, the fault depth at 52.
const SPEC_DATA_BYTES: usize = 56;
const SPEC_SPILL_ADDRESS_OFFSET: u32 = 32;
const SPEC_SPILL_STRIDE_OFFSET: u32 = 40;
const SPEC_WIDE_WORDS_OFFSET: u32 = 44;
const SPEC_HOT_BYTES_OFFSET: u32 = 48;
const SPEC_FAULT_DEPTH_OFFSET: u32 = 52;

impl Pipeline {
    pub(crate) fn new(device: &Arc<Device>, src: &PipelineSource<'_>, key: &PipelineKey) -> Result<Self> {
        let mut data = [0u8; SPEC_DATA_BYTES];
        let words =
            [key.workgroup_size, key.ntid[0], key.ntid[1], key.ntid[2], key.shared_words, key.dynamic_shared_bytes];
        for (i, w) in words.iter().enumerate() {
            data[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
        }
        let a = SPEC_SPILL_ADDRESS_OFFSET as usize;
        data[a..a + 8].copy_from_slice(&key.spill_address.to_le_bytes());
        let a = SPEC_SPILL_STRIDE_OFFSET as usize;
        data[a..a + 4].copy_from_slice(&key.spill_stride.to_le_bytes());
        let a = SPEC_WIDE_WORDS_OFFSET as usize;
        data[a..a + 4].copy_from_slice(&key.shared_wide_words.to_le_bytes());
        let a = SPEC_HOT_BYTES_OFFSET as usize;
        data[a..a + 4].copy_from_slice(&key.spill_hot_bytes.to_le_bytes());
        let a = SPEC_FAULT_DEPTH_OFFSET as usize;
        data[a..a + 4].copy_from_slice(&key.fault_depth.to_le_bytes());
        let u32_entry =
            |id: u32, offset: u32| vk::SpecializationMapEntry::default().constant_id(id).offset(offset).size(4);
        let entries = [
            u32_entry(abi::SPEC_WORKGROUP_SIZE_X, 0),
            u32_entry(abi::SPEC_NTID_X, 4),
            u32_entry(abi::SPEC_NTID_Y, 8),
            u32_entry(abi::SPEC_NTID_Z, 12),
            u32_entry(abi::SPEC_SHARED_WORDS, 16),
            u32_entry(abi::SPEC_DYNAMIC_SHARED_BYTES, 20),
            vk::SpecializationMapEntry::default()
                .constant_id(abi::SPEC_SHARED_SPILL_ADDRESS)
                .offset(SPEC_SPILL_ADDRESS_OFFSET)
                .size(8),
            u32_entry(abi::SPEC_SHARED_SPILL_STRIDE, SPEC_SPILL_STRIDE_OFFSET),
            u32_entry(abi::SPEC_SHARED_WIDE_WORDS, SPEC_WIDE_WORDS_OFFSET),
            u32_entry(abi::SPEC_SHARED_HOT_BYTES, SPEC_HOT_BYTES_OFFSET),
            u32_entry(abi::SPEC_FAULT_DEPTH, SPEC_FAULT_DEPTH_OFFSET),
        ];
        let spec = vk::SpecializationInfo::default().map_entries(&entries).data(&data);
        let mut required = vk::PipelineShaderStageRequiredSubgroupSizeCreateInfo::default();
        let mut stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(src.shader.raw)
            .name(src.entry_name)
            .specialization_info(&spec);
        let info = &device.info;
        if let Some(size) = info.required_subgroup_size {
            if key.workgroup_size as u64 <= size as u64 * info.max_compute_workgroup_subgroups as u64 {
                required = required.required_subgroup_size(size);
                if info.supports_compute_full_subgroups && key.workgroup_size.is_multiple_of(size) {
                    stage = stage.flags(vk::PipelineShaderStageCreateFlags::REQUIRE_FULL_SUBGROUPS);
                }
                stage = stage.push_next(&mut required);
            }
        } else if src.warp_path != ptxvk_translator::WarpPath::Emulated
            && info.supports_compute_full_subgroups
            && key.workgroup_size.is_multiple_of(info.subgroup_size.max(1))
        {
            // The native and slice warp paths take warps from full subgroups.
            stage = stage.flags(vk::PipelineShaderStageCreateFlags::REQUIRE_FULL_SUBGROUPS);
        }
        let info = [vk::ComputePipelineCreateInfo::default().stage(stage).layout(src.layout.raw)];
        // SAFETY: every handle in `info` is live; the specialization data
        // matches the map entries; the entry point exists in the module.
        let raw = unsafe { device.raw.create_compute_pipelines(device.pipeline_cache, &info, None) }
            .map_err(|(_, e)| map_create(e))?;
        let raw = raw.first().copied().unwrap_or_default();
        Ok(Pipeline { device: device.clone(), raw })
    }
}
