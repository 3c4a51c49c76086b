//! Process-wide driver state: whether `cuInit` ran, the device list, and the
//! one runtime context each device gets.
//!
//! Every `CUcontext` of a device shares that device's
//! [`ptxvk_runtime::Context`] (one Vulkan device, queue and allocator);
//! contexts differ only in what they own (allocations, modules), which is
//! released when they are destroyed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use ptxvk_runtime::{Context, DeviceDesc, DeviceSelector};

use crate::ffi::CUdevice;
use crate::result::{CuError, CuResult};

/// The version `cuDriverGetVersion` reports: CUDA 13.5 (`1000 * major + 10 *
/// minor`), the toolkit whose PTX ISA (9.5) the translator accepts.
pub const DRIVER_VERSION: i32 = 13050;

/// Compute capability reported when `PTXVK_CC` is not set.
pub const DEFAULT_COMPUTE_CAPABILITY: (i32, i32) = (8, 0);

/// Compute capability reported to NVIDIA's libraries when
/// `PTXVK_LIBRARY_CC` is not set: newer than every cubin CUDA 13's libraries
/// ship (`sm_121` is the newest), so that they choose their PTX (see
/// [`reported_compute_capability`]).
pub const DEFAULT_LIBRARY_COMPUTE_CAPABILITY: (i32, i32) = (13, 0);

/// State created by `cuInit`.
pub struct Driver {
    /// Usable devices; the position is the `CUdevice` ordinal.
    pub devices: Vec<Device>,
    /// Compute capability reported to applications for every device
    /// (`PTXVK_CC`, default 8.0); also the one fat binaries are chosen by.
    pub compute_capability: (i32, i32),
    /// Compute capability reported to NVIDIA's libraries (`PTXVK_LIBRARY_CC`,
    /// default 13.0).
    pub library_compute_capability: (i32, i32),
}

/// One device.
pub struct Device {
    /// The `CUdevice` ordinal.
    pub ordinal: CUdevice,
    /// What enumeration said about it.
    pub desc: DeviceDesc,
    /// The runtime context, created on first use.
    runtime: OnceLock<Result<Context, (CuError, String)>>,
    /// The primary context's state (see `context.rs`).
    pub primary: Mutex<crate::context::PrimaryState>,
}

impl Device {
    /// The device's runtime context, created on first use (a failure is
    /// remembered and reported again on every later call).
    pub fn runtime(&self) -> CuResult<&Context> {
        let slot = self.runtime.get_or_init(|| {
            Context::new(DeviceSelector::Index(self.desc.index)).map_err(|e| {
                let msg = e.to_string();
                (CuError::from(e), msg)
            })
        });
        match slot {
            Ok(ctx) => Ok(ctx),
            Err((code, msg)) => Err(code.because(msg.clone())),
        }
    }
}

static DRIVER: OnceLock<Result<Driver, (CuError, String)>> = OnceLock::new();

/// Set in a child process forked after `cuInit` ran in its parent.
static FORKED: AtomicBool = AtomicBool::new(false);

extern "C" {
    /// POSIX `pthread_atfork` (glibc).
    fn pthread_atfork(
        prepare: Option<unsafe extern "C" fn()>,
        parent: Option<unsafe extern "C" fn()>,
        child: Option<unsafe extern "C" fn()>,
    ) -> i32;
}

/// Runs in the child after `fork`: only an atomic store (async-signal-safe).
unsafe extern "C" fn forked_child() {
    FORKED.store(true, Ordering::Relaxed);
}

/// The error of every call in a child forked after `cuInit`, as NVIDIA's
/// driver answers there (`cuInit` included): the child has copies of the
/// parent's device objects but not the driver threads behind them (on
/// lavapipe, llvmpipe's worker threads), so nothing of them may be used.
/// Clients rely on it (numba reports "CUDA initialized before forking").
fn forked_error() -> CuError {
    CuError::CUDA_ERROR_NOT_INITIALIZED.because("the process was forked after cuInit: CUDA cannot be used in the child")
}

/// `cuInit`: enumerates devices once; later calls return the first answer.
pub fn init() -> CuResult<()> {
    if FORKED.load(Ordering::Relaxed) {
        return Err(forked_error());
    }
    let state = DRIVER.get_or_init(|| {
        // SAFETY: registers a handler that only stores an atomic; called once.
        // It fails only without memory (ENOMEM), when a child would just not
        // be told; nothing else depends on it.
        let _ = unsafe { pthread_atfork(None, None, Some(forked_child)) };
        let descs = ptxvk_runtime::enumerate_devices().map_err(|e| {
            let msg = e.to_string();
            (CuError::from(e), msg)
        })?;
        if descs.is_empty() {
            return Err((
                CuError::CUDA_ERROR_NO_DEVICE,
                "no usable Vulkan device (Vulkan 1.2+ with bufferDeviceAddress)".to_string(),
            ));
        }
        let devices = descs
            .into_iter()
            .enumerate()
            .map(|(i, desc)| Device {
                ordinal: i as CUdevice,
                desc,
                runtime: OnceLock::new(),
                primary: Mutex::new(Default::default()),
            })
            .collect();
        Ok(Driver {
            devices,
            compute_capability: compute_capability_from_env("PTXVK_CC", DEFAULT_COMPUTE_CAPABILITY),
            library_compute_capability: compute_capability_from_env(
                "PTXVK_LIBRARY_CC",
                DEFAULT_LIBRARY_COMPUTE_CAPABILITY,
            ),
        })
    });
    match state {
        Ok(_) => Ok(()),
        Err((code, msg)) => Err(code.because(msg.clone())),
    }
}

/// The driver state; `CUDA_ERROR_NOT_INITIALIZED` before a successful `cuInit`.
pub fn driver() -> CuResult<&'static Driver> {
    if FORKED.load(Ordering::Relaxed) {
        return Err(forked_error());
    }
    match DRIVER.get() {
        Some(Ok(d)) => Ok(d),
        Some(Err(_)) => Err(CuError::CUDA_ERROR_NOT_INITIALIZED.because("cuInit failed")),
        None => Err(CuError::CUDA_ERROR_NOT_INITIALIZED.because("cuInit has not been called")),
    }
}

/// The reported compute capability as an SM number (`80` for 8.0).
pub fn sm_version() -> CuResult<u32> {
    let (major, minor) = driver()?.compute_capability;
    Ok((major * 10 + minor) as u32)
}

/// The device with ordinal `dev`; `CUDA_ERROR_INVALID_DEVICE` if there is none.
pub fn device(dev: CUdevice) -> CuResult<&'static Device> {
    let d = driver()?;
    usize::try_from(dev)
        .ok()
        .and_then(|i| d.devices.get(i))
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_DEVICE.because(format!("no device {dev}")))
}

/// The compute capability reported to whoever is calling the driver now:
/// `PTXVK_LIBRARY_CC` (default 13.0) to NVIDIA's libraries and the shared
/// CUDA runtime, `PTXVK_CC` (default 8.0) to everything else
/// ([`crate::caller`]).
///
/// Why two: cuRAND, cuSOLVER and the other math libraries pick the code
/// they load by the capability (cuRAND loads its `sm_80` cubin on an 8.0
/// device, its PTX on a device newer than any cubin it has), and this
/// driver runs PTX only; so they are told a capability newer than their
/// cubins, which NVIDIA's rule (a device runs PTX of its capability or
/// lower) lets them load their `compute_120` PTX on. Programs that generate
/// PTX (numba, Triton, Warp, NVRTC users) are told the capability whose
/// features the translator covers, 8.0 by default. The shared runtime
/// (`libcudart.so`) asks once, at its start, for every user it serves, so
/// programs on it (PyTorch, programs built with `-cudart shared`) see
/// the libraries' capability through `cudaGetDeviceProperties`; programs
/// with the runtime linked in statically (nvcc's default) see `PTXVK_CC`.
pub fn reported_compute_capability() -> CuResult<(i32, i32)> {
    let d = driver()?;
    if d.library_compute_capability == d.compute_capability {
        return Ok(d.compute_capability);
    }
    Ok(match crate::caller::caller() {
        crate::caller::Caller::NvidiaLibrary => d.library_compute_capability,
        crate::caller::Caller::Application => d.compute_capability,
    })
}

/// Reads a compute capability ("8.6", "86" or "sm_86") from the environment
/// variable `var`; `default` when unset or malformed (a malformed value is
/// reported on stderr).
fn compute_capability_from_env(var: &str, default: (i32, i32)) -> (i32, i32) {
    let Some(raw) = std::env::var_os(var) else {
        return default;
    };
    let text = raw.to_string_lossy();
    match parse_compute_capability(&text) {
        Some(cc) => cc,
        None => {
            let (ma, mi) = default;
            eprintln!("ptxvk: ignoring {var}={text:?} (expected MAJOR.MINOR such as 8.6); using {ma}.{mi}");
            default
        }
    }
}

/// Parses "8.6", "86" or "sm_86" into (8, 6).
pub fn parse_compute_capability(text: &str) -> Option<(i32, i32)> {
    let t = text.trim();
    let t = t.strip_prefix("sm_").unwrap_or(t);
    let (major, minor) = match t.split_once('.') {
        Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
        None if t.len() >= 2 && t.bytes().all(|b| b.is_ascii_digit()) => {
            let (a, b) = t.split_at(t.len() - 1);
            (a.parse().ok()?, b.parse().ok()?)
        }
        None => return None,
    };
    ((1..=99).contains(&major) && (0..=9).contains(&minor)).then_some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::parse_compute_capability as parse;

    #[test]
    fn compute_capability_forms() {
        assert_eq!(parse("8.6"), Some((8, 6)));
        assert_eq!(parse("86"), Some((8, 6)));
        assert_eq!(parse("sm_90"), Some((9, 0)));
        assert_eq!(parse("100"), Some((10, 0)));
        assert_eq!(parse("8.x"), None);
        assert_eq!(parse(""), None);
        assert_eq!(parse("7"), None);
    }
}
