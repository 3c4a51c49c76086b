//! Run PTX kernels on any Vulkan 1.2+ device with buffer device address.
//!
//! A [`Context`] owns one device: it allocates memory (a device address is a
//! `CUdeviceptr`), loads PTX through [`ptxvk_translator`], and queues launches
//! and copies in order, like one CUDA stream, submitting them at
//! synchronisation points. The launch ABI the kernels expect is
//! [`ptxvk_translator::abi`].
//!
//! Modules: [`instance`] (loader, validation, device discovery), `device`
//! (capabilities, logical device, allocator, pipeline cache), `disk_cache`
//! (the persistent cache of translations and pipeline cache data), `memory` (buffers, address
//! table, staging), `pipeline` (shader modules and specialised pipelines),
//! `stream` (command batching), `module` ([`Module`], [`Function`]),
//! `context` ([`Context`]), `probe` (the fma probe), `warp` (the warp path,
//! [`WarpPath`], for the device).

#![warn(missing_docs)]

mod context;
mod device;
mod disk_cache;
mod error;
pub mod fault;
pub mod instance;
mod memory;
mod module;
mod pipeline;
mod printf;
mod probe;
mod stream;
mod warp;

pub use context::{Context, Timestamp};
pub use device::{DeviceInfo, PciBusInfo, IPC_ENV};
pub use disk_cache::{CACHE_DIR_ENV, CACHE_ENV, CACHE_MAX_SIZE_ENV};
pub use error::{Error, Result};
pub use fault::{FaultMode, RaceHazard, RaceKind};
pub use instance::{enumerate_devices, DeviceDesc, DeviceSelector, DeviceType};
pub use memory::ExportedMemory;
pub use module::{Function, Module};
pub use ptxvk_translator::{
    EntryInfo, GlobalInfo, GlobalSpace, ModuleInfo, ParamInfo, ParamPassing, TargetEnv, WarpPath,
};
pub use stream::with_stream_tag;
pub use warp::WARP_PATH_ENV;
