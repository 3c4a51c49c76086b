//! The runtime's error type and the mapping of Vulkan result codes onto it.
//!
//! User errors (bad arguments, bad PTX) and device failures are different
//! variants, so the libcuda shim can map each onto the matching `CUresult`.

use ash::vk;

/// Everything that can go wrong in the runtime.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Error {
    /// An argument is invalid (bad address, size out of range, bad launch shape...).
    #[error("invalid value: {0}")]
    InvalidValue(String),
    /// Device or host memory is exhausted.
    #[error("out of memory")]
    OutOfMemory,
    /// The PTX could not be translated; holds the rendered diagnostics.
    #[error("invalid PTX:\n{0}")]
    InvalidPtx(String),
    /// A named object (entry, global, device) does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// A launch asks for more threads, shared memory or registers than the device has.
    #[error("launch out of resources: {0}")]
    LaunchOutOfResources(String),
    /// A cooperative launch has more blocks than can run at once.
    #[error("cooperative launch too large: {0}")]
    CooperativeLaunchTooLarge(String),
    /// The device or the runtime lacks a feature the request needs.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// No usable Vulkan device (Vulkan 1.2+ with buffer device address) exists.
    #[error("no usable Vulkan device (Vulkan 1.2+ with bufferDeviceAddress)")]
    NoDevice,
    /// A Vulkan call failed with a code not covered by the other variants.
    #[error("Vulkan error: {0}")]
    Vulkan(vk::Result),
    /// Submitted work failed (device lost); the context cannot be used anymore.
    #[error("launch failed: {0}")]
    LaunchFailed(String),
    /// A kernel accessed memory outside every allocation, or outside its
    /// block's shared or its thread's local memory (fault checks, see
    /// `PTXVK_FAULT_CHECKS`); the context cannot be used anymore.
    #[error("illegal address: {0}")]
    IllegalAddress(String),
    /// A kernel accessed memory at an address not aligned to the access
    /// size (fault checks); the context cannot be used anymore.
    #[error("misaligned address: {0}")]
    MisalignedAddress(String),
    /// A kernel's `assert` failed (the message went to standard output); the
    /// context cannot be used anymore.
    #[error("device-side assert triggered: {0}")]
    Assert(String),
}

/// Result alias used throughout the runtime.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Maps the result of an object-creation call (`vkCreate*`, `vkAllocate*`,
/// `vkBegin/EndCommandBuffer`).
///
/// The spec lists `VK_ERROR_OUT_OF_HOST_MEMORY` and
/// `VK_ERROR_OUT_OF_DEVICE_MEMORY` for these (plus call-specific codes such as
/// `VK_ERROR_INVALID_SHADER_NV`), which all become [`Error::OutOfMemory`] or
/// [`Error::Vulkan`].
pub(crate) fn map_create(result: vk::Result) -> Error {
    match result {
        vk::Result::ERROR_OUT_OF_HOST_MEMORY | vk::Result::ERROR_OUT_OF_DEVICE_MEMORY => Error::OutOfMemory,
        other => Error::Vulkan(other),
    }
}

/// Maps the result of a queue operation (`vkQueueSubmit`, `vkWaitForFences`,
/// `vkResetFences`, `vkDeviceWaitIdle`).
///
/// Besides the out-of-memory codes the spec lists `VK_ERROR_DEVICE_LOST`,
/// which means submitted work failed: [`Error::LaunchFailed`].
pub(crate) fn map_queue(result: vk::Result) -> Error {
    match result {
        vk::Result::ERROR_DEVICE_LOST => {
            Error::LaunchFailed("the Vulkan device was lost while running submitted work".into())
        }
        other => map_create(other),
    }
}

/// Maps a gpu-allocator error.
pub(crate) fn map_allocator(err: gpu_allocator::AllocationError) -> Error {
    use gpu_allocator::AllocationError as A;
    match err {
        A::OutOfMemory => Error::OutOfMemory,
        A::NoCompatibleMemoryTypeFound => {
            Error::Unsupported("no compatible Vulkan memory type for this allocation".into())
        }
        A::FailedToMap(_) => Error::OutOfMemory,
        other => Error::Unsupported(format!("memory allocation failed: {other}")),
    }
}
