//! Choosing how warps run on a device ([`WarpPath`]).
//!
//! | path | when |
//! |---|---|
//! | native | subgroup operations (basic, ballot, shuffle) in compute shaders, and pipelines run with 32-wide subgroups: the device's only size, or a required size of 32 with full subgroups for blocks up to the device's limit |
//! | slice | as native, but the only subgroup size is 64 or 128, full subgroups can be required, and the block limit is a multiple of it (workgroups are padded to whole subgroups) |
//! | emulated | otherwise (lavapipe: 8-wide subgroups) |
//!
//! `PTXVK_WARP_PATH=native|slice|emulated` overrides the choice where the
//! device allows it (`emulated` always does), for tests and comparisons.

use ash::vk;
use ptxvk_translator::WarpPath;

/// Environment variable that overrides the warp path.
pub const WARP_PATH_ENV: &str = "PTXVK_WARP_PATH";

/// What the choice depends on.
pub(crate) struct SubgroupFacts {
    /// `VkPhysicalDeviceVulkan11Properties::subgroupSize`.
    pub default_size: u32,
    /// `subgroupSupportedStages`.
    pub stages: vk::ShaderStageFlags,
    /// `subgroupSupportedOperations`.
    pub operations: vk::SubgroupFeatureFlags,
    /// Size pipelines are created with, when it is required (varying sizes).
    pub required_size: Option<u32>,
    /// `minSubgroupSize`/`maxSubgroupSize` (0 when size control is missing).
    pub min_size: u32,
    /// See `min_size`.
    pub max_size: u32,
    /// `computeFullSubgroups` is enabled.
    pub full_subgroups: bool,
    /// `maxComputeWorkgroupSubgroups`.
    pub max_workgroup_subgroups: u32,
    /// The most threads in one block.
    pub max_threads: u32,
}

/// The paths the device can run, best first (always ending with emulated).
pub(crate) fn possible(f: &SubgroupFacts) -> Vec<WarpPath> {
    let ops = vk::SubgroupFeatureFlags::BASIC | vk::SubgroupFeatureFlags::BALLOT | vk::SubgroupFeatureFlags::SHUFFLE;
    let usable = f.stages.contains(vk::ShaderStageFlags::COMPUTE) && f.operations.contains(ops);
    let fixed = f.required_size.is_none() && (f.min_size == f.max_size || f.max_size == 0);
    let mut out = Vec::new();
    if usable {
        let required_32 = f.required_size == Some(32)
            && f.full_subgroups
            && f.max_workgroup_subgroups as u64 * 32 >= f.max_threads as u64;
        if required_32 || (fixed && f.default_size == 32) {
            out.push(WarpPath::Native);
        }
        let s = f.default_size;
        if fixed && s > 32 && s.is_multiple_of(32) && f.full_subgroups && f.max_threads.is_multiple_of(s) {
            out.push(WarpPath::Slice);
        }
    }
    out.push(WarpPath::Emulated);
    out
}

/// The warp path for a device that can run `paths` (see the module docs).
pub(crate) fn choose(paths: &[WarpPath]) -> WarpPath {
    if let Some(wanted) = std::env::var(WARP_PATH_ENV).ok().and_then(|v| WarpPath::from_name(v.trim())) {
        if paths.contains(&wanted) {
            return wanted;
        }
        log::warn!("ptxvk: {WARP_PATH_ENV}={} is not available on this device", wanted.name());
    }
    paths.first().copied().unwrap_or(WarpPath::Emulated)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(size: u32) -> SubgroupFacts {
        SubgroupFacts {
            default_size: size,
            stages: vk::ShaderStageFlags::COMPUTE,
            operations: vk::SubgroupFeatureFlags::BASIC
                | vk::SubgroupFeatureFlags::BALLOT
                | vk::SubgroupFeatureFlags::SHUFFLE,
            required_size: None,
            min_size: size,
            max_size: size,
            full_subgroups: true,
            max_workgroup_subgroups: 32,
            max_threads: 1024,
        }
    }

    #[test]
    fn paths_follow_the_subgroup_size() {
        assert_eq!(possible(&facts(32))[0], WarpPath::Native);
        assert_eq!(possible(&facts(64))[0], WarpPath::Slice);
        assert_eq!(possible(&facts(8))[0], WarpPath::Emulated);
        let mut amd = facts(64);
        amd.min_size = 32;
        amd.required_size = Some(32);
        assert_eq!(possible(&amd)[0], WarpPath::Native);
        let mut no_ballot = facts(32);
        no_ballot.operations = vk::SubgroupFeatureFlags::BASIC;
        assert_eq!(possible(&no_ballot), vec![WarpPath::Emulated]);
    }
}
