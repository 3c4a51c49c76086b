//! Support code for the end-to-end tests in `tests/tests/`.
//!
//! The fixture kernels in `tests/fixtures/` are run twice: through the Rust
//! runtime ([`RuntimeGpu`], on a [`ptxvk_runtime::Context`]) and through the C
//! ABI of the `libcuda.so` cdylib that Cargo builds for the `ptxvk-cuda`
//! dev-dependency ([`DriverGpu`], loaded with `libloading` as a CUDA program
//! would). Both implement [`Gpu`], so each test body is written once.
//!
//! Also here: a fixed-seed generator ([`SplitMix64`]), little-endian
//! conversion of element slices ([`Scalar`], [`to_bytes`], [`from_bytes`]),
//! exact comparison helpers ([`assert_bits_eq`], [`assert_poisoned`]) and
//! process setup ([`setup`]: lavapipe, the validation layer, a logger).

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Once, OnceLock};

use libloading::Library;
use ptxvk_runtime::{Context, DeviceSelector, Function};

/// Byte written over output buffers before a launch, so that elements a kernel
/// should have written but did not (or should not have written but did) show.
pub const POISON: u8 = 0xAB;

/// The Vulkan ICD manifest of lavapipe, Mesa's CPU implementation.
pub const LAVAPIPE_ICD: &str = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json";

/// A test-support failure: what went wrong, readable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl From<ptxvk_runtime::Error> for Error {
    fn from(e: ptxvk_runtime::Error) -> Self {
        Error(e.to_string())
    }
}

/// Result of the support functions.
pub type Result<T> = std::result::Result<T, Error>;

// ---------------------------------------------------------------------------
// Process setup
// ---------------------------------------------------------------------------

/// Prepares the test process, once, before any Vulkan object exists:
///
/// * selects lavapipe (`VK_ICD_FILENAMES`) when it is installed and neither
///   `VK_ICD_FILENAMES` nor `PTXVK_DEVICE` chooses a device already;
/// * sets `PTXVK_VALIDATION=1`, so every context (the runtime's, and the one
///   inside `libcuda.so`) enables the Khronos validation layer;
/// * installs a logger that prints warnings and errors (validation messages
///   among them) to standard error.
///
/// Every test calls this first. The environment is written only by the first
/// call, while every other test thread that has started is waiting in this
/// function, so no thread reads the environment while it changes.
pub fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("VK_ICD_FILENAMES").is_none()
            && std::env::var_os(ptxvk_runtime::instance::DEVICE_ENV).is_none()
            && Path::new(LAVAPIPE_ICD).exists()
        {
            std::env::set_var("VK_ICD_FILENAMES", LAVAPIPE_ICD);
        }
        std::env::set_var(ptxvk_runtime::instance::VALIDATION_ENV, "1");
        std::env::set_var(ptxvk_runtime::instance::SPIRV_VAL_ENV, "1");
        // Another logger may already be installed; then that one prints.
        let _ = log::set_logger(&STDERR_LOGGER);
        log::set_max_level(log::LevelFilter::Warn);
    });
}

/// Prints `warn!` and `error!` records to standard error.
struct StderrLogger;

static STDERR_LOGGER: StderrLogger = StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Warn
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            eprintln!("[{} {}] {}", record.level(), record.target(), record.args());
        }
    }

    fn flush(&self) {}
}

// ---------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------

/// The folder holding the PTX fixtures.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Reads the fixture `name` (for example `"vector_add.ptx"`).
pub fn fixture(name: &str) -> Result<String> {
    let path = fixtures_dir().join(name);
    std::fs::read_to_string(&path).map_err(|e| Error(format!("cannot read {}: {e}", path.display())))
}

/// Every `.ptx` file in [`fixtures_dir`] and its subfolders, sorted by path.
pub fn fixture_ptx_files() -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut dirs = vec![fixtures_dir()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| Error(format!("cannot list {}: {e}", dir.display())))?;
        for entry in entries {
            let path = entry.map_err(|e| Error(format!("cannot list {}: {e}", dir.display())))?.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "ptx") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The names of the `.entry` directives of a PTX text, in order (a plain
/// textual scan, enough for compiler output).
pub fn ptx_entry_names(ptx: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = ptx;
    while let Some(pos) = rest.find(".entry") {
        rest = &rest[pos + ".entry".len()..];
        if !rest.starts_with(char::is_whitespace) {
            continue;
        }
        let name: String =
            rest.trim_start().chars().take_while(|c| c.is_ascii_alphanumeric() || "_$.%".contains(*c)).collect();
        if !name.is_empty() {
            names.push(name);
        }
    }
    names
}

// ---------------------------------------------------------------------------
// Random numbers
// ---------------------------------------------------------------------------

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny generator with a fixed seed,
/// so every run of a test sees the same "random" inputs.
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// The next 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// A uniformly distributed value in `lo..=hi` (`lo <= hi`).
    pub fn range_i64(&mut self, lo: i64, hi: i64) -> i64 {
        let span = hi.wrapping_sub(lo) as u64;
        if span == u64::MAX {
            return self.next_u64() as i64;
        }
        lo.wrapping_add((self.next_u64() % (span + 1)) as i64)
    }

    /// A random normal `f32` with a random sign, a random 23-bit mantissa and
    /// an unbiased exponent in `min_exp..=max_exp` (clamped to the normal range).
    pub fn f32_normal(&mut self, min_exp: i32, max_exp: i32) -> f32 {
        let e = self.range_i64(min_exp.max(-126) as i64, max_exp.min(127) as i64) as u32;
        let bits = (self.next_u32() & 0x8000_0000) | (e.wrapping_add(127) << 23) | (self.next_u32() & 0x007F_FFFF);
        f32::from_bits(bits)
    }

    /// A random normal `f64` with a random sign, a random 52-bit mantissa and
    /// an unbiased exponent in `min_exp..=max_exp` (clamped to the normal range).
    pub fn f64_normal(&mut self, min_exp: i32, max_exp: i32) -> f64 {
        let e = self.range_i64(min_exp.max(-1022) as i64, max_exp.min(1023) as i64) as u64;
        let bits = (self.next_u64() & (1 << 63)) | (e.wrapping_add(1023) << 52) | (self.next_u64() & ((1 << 52) - 1));
        f64::from_bits(bits)
    }
}

// ---------------------------------------------------------------------------
// Element conversion and comparison
// ---------------------------------------------------------------------------

/// A plain number type kernels read and write, stored little-endian.
pub trait Scalar: Copy + fmt::Debug {
    /// Size in bytes.
    const SIZE: usize;
    /// Appends the little-endian bytes.
    fn put(self, out: &mut Vec<u8>);
    /// Reads from exactly [`Self::SIZE`] little-endian bytes (shorter input is
    /// zero-extended, longer input truncated).
    fn get(bytes: &[u8]) -> Self;
    /// The bit pattern, zero-extended (exact comparison; `-0.0 != 0.0`, NaN payloads count).
    fn bits(self) -> u64;
}

macro_rules! scalar {
    ($($t:ty => $bits:expr),* $(,)?) => {$(
        impl Scalar for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn get(bytes: &[u8]) -> Self {
                let mut raw = [0u8; std::mem::size_of::<$t>()];
                let n = raw.len().min(bytes.len());
                raw[..n].copy_from_slice(&bytes[..n]);
                <$t>::from_le_bytes(raw)
            }
            fn bits(self) -> u64 {
                let f: fn($t) -> u64 = $bits;
                f(self)
            }
        }
    )*};
}

scalar! {
    u8 => |v| v as u64,
    u16 => |v| v as u64,
    u32 => |v| v as u64,
    u64 => |v| v,
    i32 => |v| v as u32 as u64,
    i64 => |v| v as u64,
    f32 => |v| v.to_bits() as u64,
    f64 => |v| v.to_bits(),
}

/// The little-endian bytes of `values`.
pub fn to_bytes<T: Scalar>(values: &[T]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * T::SIZE);
    for v in values {
        v.put(&mut out);
    }
    out
}

/// The elements stored little-endian in `bytes` (a trailing partial element is ignored).
pub fn from_bytes<T: Scalar>(bytes: &[u8]) -> Vec<T> {
    bytes.chunks_exact(T::SIZE).map(T::get).collect()
}

/// One kernel argument: the value's bytes, as `cuLaunchKernel`'s
/// `kernelParams` entry points at them.
pub fn arg<T: Scalar>(value: T) -> Vec<u8> {
    to_bytes(&[value])
}

/// Asserts `got == want` bit for bit, listing the first mismatches.
///
/// # Panics
/// When the lengths or any element differ.
#[track_caller]
pub fn assert_bits_eq<T: Scalar>(what: &str, got: &[T], want: &[T]) {
    assert_eq!(got.len(), want.len(), "{what}: {} elements, expected {}", got.len(), want.len());
    let bad: Vec<usize> = (0..got.len()).filter(|&i| got[i].bits() != want[i].bits()).collect();
    if !bad.is_empty() {
        let first: Vec<String> =
            bad.iter().take(8).map(|&i| format!("[{i}] = {:?}, expected {:?}", got[i], want[i])).collect();
        panic!("{what}: {} of {} elements differ; first: {}", bad.len(), got.len(), first.join("; "));
    }
}

/// Asserts every byte of `bytes` still holds [`POISON`] (nothing wrote there).
///
/// # Panics
/// When a byte differs.
#[track_caller]
pub fn assert_poisoned(what: &str, bytes: &[u8]) {
    if let Some(i) = bytes.iter().position(|&b| b != POISON) {
        panic!(
            "{what}: byte {i} of the guard area was overwritten (0x{:02x}); the kernel wrote out of range",
            bytes[i]
        );
    }
}

// ---------------------------------------------------------------------------
// The two ways to run a kernel
// ---------------------------------------------------------------------------

/// A kernel loaded into a [`Gpu`] (an index into its table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kernel(pub usize);

/// What a test needs from a device: the driver API subset both the runtime
/// and `libcuda.so` provide. Device pointers are `CUdeviceptr`s.
pub trait Gpu {
    /// `"runtime"` or `"driver"`, for messages.
    fn api(&self) -> &'static str;
    /// Loads PTX text and looks up the entry `entry`.
    fn load_kernel(&mut self, ptx: &str, file_name: &str, entry: &str) -> Result<Kernel>;
    /// Allocates device memory.
    fn alloc(&mut self, bytes: usize) -> Result<u64>;
    /// Copies host bytes to `dst`.
    fn copy_htod(&mut self, dst: u64, src: &[u8]) -> Result<()>;
    /// Copies `bytes` bytes from `src` to the host.
    fn copy_dtoh(&mut self, src: u64, bytes: usize) -> Result<Vec<u8>>;
    /// Sets `bytes` bytes at `dst` to `value`.
    fn memset_d8(&mut self, dst: u64, value: u8, bytes: usize) -> Result<()>;
    /// Launches `kernel` with one byte slice per parameter (each exactly the
    /// parameter's size).
    fn launch(&mut self, kernel: Kernel, grid: [u32; 3], block: [u32; 3], shared: u32, args: &[&[u8]]) -> Result<()>;
    /// Waits for all queued work.
    fn synchronize(&mut self) -> Result<()>;
}

impl dyn Gpu + '_ {
    /// Loads the fixture `file` and looks up `entry`.
    pub fn load_fixture(&mut self, file: &str, entry: &str) -> Result<Kernel> {
        let ptx = fixture(file)?;
        self.load_kernel(&ptx, file, entry)
    }

    /// Allocates device memory holding `values`.
    pub fn upload<T: Scalar>(&mut self, values: &[T]) -> Result<u64> {
        let bytes = to_bytes(values);
        let d = self.alloc(bytes.len().max(1))?;
        self.copy_htod(d, &bytes)?;
        Ok(d)
    }

    /// Allocates `bytes` of device memory filled with [`POISON`].
    pub fn alloc_poisoned(&mut self, bytes: usize) -> Result<u64> {
        let d = self.alloc(bytes.max(1))?;
        self.memset_d8(d, POISON, bytes)?;
        Ok(d)
    }

    /// Reads `count` elements at `src`.
    pub fn download<T: Scalar>(&mut self, src: u64, count: usize) -> Result<Vec<T>> {
        Ok(from_bytes(&self.copy_dtoh(src, count * T::SIZE)?))
    }
}

/// [`Gpu`] on the Rust runtime API.
pub struct RuntimeGpu {
    /// The context everything runs in.
    pub ctx: Context,
    kernels: Vec<Function>,
    allocations: Vec<u64>,
}

impl RuntimeGpu {
    /// A context on the default device (call [`setup`] first).
    pub fn new() -> Result<RuntimeGpu> {
        let ctx = Context::new(DeviceSelector::Default)?;
        Ok(RuntimeGpu { ctx, kernels: Vec::new(), allocations: Vec::new() })
    }
}

impl RuntimeGpu {
    /// Frees every allocation made through [`Gpu::alloc`] so far.
    pub fn free_all(&mut self) -> Result<()> {
        for d in std::mem::take(&mut self.allocations) {
            self.ctx.free(d)?;
        }
        Ok(())
    }
}

impl Drop for RuntimeGpu {
    fn drop(&mut self) {
        for d in self.allocations.drain(..) {
            let _ = self.ctx.free(d);
        }
    }
}

impl Gpu for RuntimeGpu {
    fn api(&self) -> &'static str {
        "runtime"
    }

    fn load_kernel(&mut self, ptx: &str, file_name: &str, entry: &str) -> Result<Kernel> {
        let module = self.ctx.load_module(ptx, file_name)?;
        let f = module
            .function(entry)
            .ok_or_else(|| Error(format!("{file_name} has no entry {entry} (has {:?})", module.entry_names())))?;
        self.kernels.push(f);
        Ok(Kernel(self.kernels.len() - 1))
    }

    fn alloc(&mut self, bytes: usize) -> Result<u64> {
        let d = self.ctx.alloc(bytes as u64)?;
        self.allocations.push(d);
        Ok(d)
    }

    fn copy_htod(&mut self, dst: u64, src: &[u8]) -> Result<()> {
        Ok(self.ctx.copy_htod(dst, src)?)
    }

    fn copy_dtoh(&mut self, src: u64, bytes: usize) -> Result<Vec<u8>> {
        let mut out = vec![0u8; bytes];
        self.ctx.copy_dtoh(&mut out, src)?;
        Ok(out)
    }

    fn memset_d8(&mut self, dst: u64, value: u8, bytes: usize) -> Result<()> {
        Ok(self.ctx.memset_d8(dst, value, bytes as u64)?)
    }

    fn launch(&mut self, kernel: Kernel, grid: [u32; 3], block: [u32; 3], shared: u32, args: &[&[u8]]) -> Result<()> {
        let f = self.kernels.get(kernel.0).ok_or_else(|| Error(format!("no kernel {}", kernel.0)))?;
        let params = f.pack_params(args)?;
        Ok(self.ctx.launch(f, grid, block, shared, &params)?)
    }

    fn synchronize(&mut self) -> Result<()> {
        Ok(self.ctx.synchronize()?)
    }
}

// ---------------------------------------------------------------------------
// libcuda.so through its C ABI
// ---------------------------------------------------------------------------

/// An opaque driver handle (`CUcontext`, `CUmodule`, `CUfunction`, `CUstream`).
pub type Handle = *mut c_void;

/// `CU_JIT_ERROR_LOG_BUFFER`.
const CU_JIT_ERROR_LOG_BUFFER: c_int = 5;
/// `CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES`.
const CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: c_int = 6;

macro_rules! driver_api {
    ($( $name:ident: fn($($t:ty),* $(,)?); )*) => {
        /// The driver API entry points the tests call, resolved from `libcuda.so`.
        #[allow(non_snake_case)]
        pub struct DriverApi {
            _lib: Library,
            $(
                #[doc = concat!("`", stringify!($name), "`")]
                pub $name: unsafe extern "C" fn($($t),*) -> u32,
            )*
        }

        impl DriverApi {
            /// Opens the library at `path` and resolves every entry point.
            pub fn open(path: &Path) -> Result<DriverApi> {
                // SAFETY: this is our own library; its initialisers have no preconditions.
                let lib = unsafe { Library::new(path) }
                    .map_err(|e| Error(format!("cannot load {}: {e}", path.display())))?;
                $(
                    // SAFETY: the symbol is the driver API function of that name,
                    // whose C signature the type spells out.
                    #[allow(non_snake_case)]
                    let $name = unsafe {
                        *lib.get::<unsafe extern "C" fn($($t),*) -> u32>(concat!(stringify!($name), "\0").as_bytes())
                            .map_err(|e| Error(format!("{} does not export {}: {e}", path.display(), stringify!($name))))?
                    };
                )*
                Ok(DriverApi { _lib: lib, $( $name, )* })
            }
        }
    };
}

driver_api! {
    cuInit: fn(c_uint);
    cuGetErrorName: fn(u32, *mut *const c_char);
    cuDeviceGet: fn(*mut c_int, c_int);
    cuCtxCreate_v2: fn(*mut Handle, c_uint, c_int);
    cuCtxDestroy_v2: fn(Handle);
    cuCtxSetCurrent: fn(Handle);
    cuCtxSynchronize: fn();
    cuModuleLoadDataEx: fn(*mut Handle, *const c_void, c_uint, *const c_int, *mut *mut c_void);
    cuModuleUnload: fn(Handle);
    cuModuleGetFunction: fn(*mut Handle, Handle, *const c_char);
    cuMemAlloc_v2: fn(*mut u64, usize);
    cuMemFree_v2: fn(u64);
    cuMemcpyHtoD_v2: fn(u64, *const c_void, usize);
    cuMemcpyDtoH_v2: fn(*mut c_void, u64, usize);
    cuMemsetD8_v2: fn(u64, u8, usize);
    cuLaunchKernel: fn(Handle, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, Handle, *mut *mut c_void, *mut *mut c_void);
}

/// Where Cargo put the `ptxvk-cuda` cdylib for this build: the first
/// `libcuda.so` (platform naming) in the test executable's folder
/// (`target/<profile>/deps`, where dependency cdylibs land) or up to two
/// folders above it. `PTXVK_TEST_LIBCUDA` overrides the search.
pub fn libcuda_path() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("PTXVK_TEST_LIBCUDA") {
        return Ok(PathBuf::from(p));
    }
    let file = format!("{}cuda{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    let exe = std::env::current_exe().map_err(|e| Error(format!("cannot find the test executable: {e}")))?;
    for dir in exe.ancestors().skip(1).take(3) {
        let candidate = dir.join(&file);
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    Err(Error(format!(
        "{file} not found next to {} (ptxvk-cuda is a dev-dependency of ptxvk-tests, so `cargo test -p ptxvk-tests` builds it)",
        exe.display()
    )))
}

/// The driver library, loaded once per process (call [`setup`] first).
pub fn driver_api() -> Result<&'static DriverApi> {
    static API: OnceLock<Result<DriverApi>> = OnceLock::new();
    API.get_or_init(|| DriverApi::open(&libcuda_path()?)).as_ref().map_err(Clone::clone)
}

impl DriverApi {
    /// The name of a `CUresult`.
    pub fn error_name(&self, rc: u32) -> String {
        let mut s: *const c_char = std::ptr::null();
        // SAFETY: `s` is a live local the library writes a static string pointer to.
        let got = unsafe { (self.cuGetErrorName)(rc, &mut s) };
        if got != 0 || s.is_null() {
            return format!("CUresult {rc}");
        }
        // SAFETY: the library returned a static NUL-terminated string.
        unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
    }

    /// `Ok` for `CUDA_SUCCESS`, else an error naming the call and the code.
    pub fn check(&self, rc: u32, what: &str) -> Result<()> {
        if rc == 0 {
            Ok(())
        } else {
            Err(Error(format!("{what} failed: {} ({rc})", self.error_name(rc))))
        }
    }
}

/// [`Gpu`] on `libcuda.so`'s C ABI: a context created with `cuCtxCreate_v2`
/// on device 0, current on the creating thread, destroyed on drop together
/// with its modules and allocations.
pub struct DriverGpu {
    api: &'static DriverApi,
    ctx: Handle,
    modules: Vec<Handle>,
    kernels: Vec<Handle>,
    allocations: Vec<u64>,
}

impl DriverGpu {
    /// `cuInit`, `cuDeviceGet(0)`, `cuCtxCreate_v2` (call [`setup`] first).
    pub fn new() -> Result<DriverGpu> {
        let api = driver_api()?;
        // SAFETY (all calls below): pointer arguments are live locals of the right type.
        api.check(unsafe { (api.cuInit)(0) }, "cuInit")?;
        let mut dev: c_int = -1;
        api.check(unsafe { (api.cuDeviceGet)(&mut dev, 0) }, "cuDeviceGet")?;
        let mut ctx: Handle = std::ptr::null_mut();
        api.check(unsafe { (api.cuCtxCreate_v2)(&mut ctx, 0, dev) }, "cuCtxCreate_v2")?;
        Ok(DriverGpu { api, ctx, modules: Vec::new(), kernels: Vec::new(), allocations: Vec::new() })
    }
}

impl Drop for DriverGpu {
    fn drop(&mut self) {
        let api = self.api;
        // SAFETY: every handle and pointer was created by this object in this
        // context, which is made current first.
        unsafe {
            (api.cuCtxSetCurrent)(self.ctx);
            for d in self.allocations.drain(..) {
                (api.cuMemFree_v2)(d);
            }
            for m in self.modules.drain(..) {
                (api.cuModuleUnload)(m);
            }
            (api.cuCtxDestroy_v2)(self.ctx);
        }
    }
}

impl Gpu for DriverGpu {
    fn api(&self) -> &'static str {
        "driver"
    }

    fn load_kernel(&mut self, ptx: &str, file_name: &str, entry: &str) -> Result<Kernel> {
        let api = self.api;
        let mut image = ptx.as_bytes().to_vec();
        image.push(0);
        let mut log = vec![0u8; 16 * 1024];
        let options = [CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
        let mut values: [*mut c_void; 2] = [log.as_mut_ptr().cast(), log.len() as *mut c_void];
        let mut module: Handle = std::ptr::null_mut();
        // SAFETY: the image is NUL-terminated; the option arrays have two
        // elements; the log buffer holds as many bytes as its size option says.
        let rc = unsafe {
            (api.cuModuleLoadDataEx)(&mut module, image.as_ptr().cast(), 2, options.as_ptr(), values.as_mut_ptr())
        };
        if rc != 0 {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            return Err(Error(format!(
                "cuModuleLoadDataEx({file_name}) failed: {}\n{}",
                api.error_name(rc),
                String::from_utf8_lossy(&log[..end])
            )));
        }
        self.modules.push(module);
        let name = std::ffi::CString::new(entry).map_err(|_| Error(format!("entry name {entry:?} contains NUL")))?;
        let mut f: Handle = std::ptr::null_mut();
        // SAFETY: `module` is live; `name` is NUL-terminated; `f` is a live local.
        api.check(
            unsafe { (api.cuModuleGetFunction)(&mut f, module, name.as_ptr()) },
            &format!("cuModuleGetFunction({entry})"),
        )?;
        self.kernels.push(f);
        Ok(Kernel(self.kernels.len() - 1))
    }

    fn alloc(&mut self, bytes: usize) -> Result<u64> {
        let mut d = 0u64;
        // SAFETY: `d` is a live local.
        self.api.check(unsafe { (self.api.cuMemAlloc_v2)(&mut d, bytes) }, "cuMemAlloc_v2")?;
        self.allocations.push(d);
        Ok(d)
    }

    fn copy_htod(&mut self, dst: u64, src: &[u8]) -> Result<()> {
        // SAFETY: `src` holds `src.len()` readable bytes.
        self.api.check(unsafe { (self.api.cuMemcpyHtoD_v2)(dst, src.as_ptr().cast(), src.len()) }, "cuMemcpyHtoD_v2")
    }

    fn copy_dtoh(&mut self, src: u64, bytes: usize) -> Result<Vec<u8>> {
        let mut out = vec![0u8; bytes];
        // SAFETY: `out` holds `bytes` writable bytes.
        self.api
            .check(unsafe { (self.api.cuMemcpyDtoH_v2)(out.as_mut_ptr().cast(), src, bytes) }, "cuMemcpyDtoH_v2")?;
        Ok(out)
    }

    fn memset_d8(&mut self, dst: u64, value: u8, bytes: usize) -> Result<()> {
        // SAFETY: no host pointers.
        self.api.check(unsafe { (self.api.cuMemsetD8_v2)(dst, value, bytes) }, "cuMemsetD8_v2")
    }

    fn launch(&mut self, kernel: Kernel, grid: [u32; 3], block: [u32; 3], shared: u32, args: &[&[u8]]) -> Result<()> {
        let f = *self.kernels.get(kernel.0).ok_or_else(|| Error(format!("no kernel {}", kernel.0)))?;
        // Each parameter in its own 8-byte aligned buffer, like a C variable.
        let mut storage: Vec<Vec<u64>> = args
            .iter()
            .map(|a| {
                let mut words: Vec<u64> = a
                    .chunks(8)
                    .map(|c| {
                        let mut raw = [0u8; 8];
                        raw[..c.len()].copy_from_slice(c);
                        u64::from_ne_bytes(raw)
                    })
                    .collect();
                if words.is_empty() {
                    words.push(0);
                }
                words
            })
            .collect();
        let mut params: Vec<*mut c_void> = storage.iter_mut().map(|w| w.as_mut_ptr().cast()).collect();
        // SAFETY: `f` is live; `params` has one pointer per kernel parameter,
        // each to at least the parameter's size of readable bytes (the
        // bytes exactly as given); the default stream is NULL; `extra` is NULL.
        let rc = unsafe {
            (self.api.cuLaunchKernel)(
                f,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                shared,
                std::ptr::null_mut(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        self.api.check(rc, "cuLaunchKernel")
    }

    fn synchronize(&mut self) -> Result<()> {
        // SAFETY: no arguments.
        self.api.check(unsafe { (self.api.cuCtxSynchronize)() }, "cuCtxSynchronize")
    }
}

/// Runs `body` on a runtime [`ptxvk_runtime::Context`] with validation on,
/// then frees everything and asserts the validation layer reported nothing.
pub fn on_runtime(body: impl FnOnce(&mut dyn Gpu) -> Result<()>) {
    setup();
    let mut gpu = RuntimeGpu::new().unwrap_or_else(|e| panic!("Context::new: {e}"));
    assert!(
        gpu.ctx.info().validation,
        "PTXVK_VALIDATION=1 but the Khronos validation layer is not active (install the Vulkan validation layers)"
    );
    if let Err(e) = body(&mut gpu) {
        panic!("runtime API: {e}");
    }
    gpu.free_all().unwrap_or_else(|e| panic!("free: {e}"));
    gpu.ctx.synchronize().unwrap_or_else(|e| panic!("synchronize: {e}"));
    assert_eq!(gpu.ctx.validation_messages(), 0, "the validation layer reported problems (printed above)");
}

/// Runs `body` on a `libcuda.so` context made through the C ABI.
pub fn on_driver(body: impl FnOnce(&mut dyn Gpu) -> Result<()>) {
    setup();
    let mut gpu = DriverGpu::new().unwrap_or_else(|e| panic!("driver API: {e}"));
    if let Err(e) = body(&mut gpu) {
        panic!("driver API: {e}");
    }
}
