//! Modules and functions: loading PTX (`cuModuleLoad*`), looking up
//! entries and variables, unloading.
//!
//! Only PTX text runs: the runtime translates it to SPIR-V. A cubin (ELF,
//! NVIDIA machine code) is refused with `CUDA_ERROR_INVALID_IMAGE` and a
//! message in the JIT error log. A fat binary runs its PTX; one that holds
//! cubins and no PTX loads as NVIDIA's driver would load it, and each of
//! its kernels fails where it is looked up or launched, with
//! `CUDA_ERROR_NO_BINARY_FOR_GPU` (cudart: "no kernel image is available
//! for execution on the device"): the CUDA runtime registers every fat
//! binary of a program or library at start, and cuBLAS or PyTorch carry
//! many that hold only machine code next to the ones with PTX.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::sync::atomic::{AtomicI32, AtomicU32};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ptxvk_translator::GlobalSpace;

use crate::context::{self, ContextObj};
use crate::driver;
use crate::ffi::{c_str, write_opt, write_out, CUdeviceptr, Handle};
use crate::handles::Registry;
use crate::jit::JitOptions;
use crate::result::{CuError, CuResult};

/// File name used in diagnostics for PTX that comes from memory.
pub const IN_MEMORY_PTX_NAME: &str = "<ptx>";

/// A `CUmodule`.
pub struct ModuleObj {
    /// The context it was loaded in.
    pub context: Arc<ContextObj>,
    /// The translated module.
    pub runtime: ptxvk_runtime::Module,
    /// `CU_FUNC_ATTRIBUTE_PTX_VERSION` of its functions (see `ptx_version`).
    pub ptx_version: c_int,
    /// Bytes of `.const` variables.
    pub const_bytes: u64,
    /// Function handles handed out so far, by entry name.
    functions: Mutex<BTreeMap<String, usize>>,
    /// Set when the image held NVIDIA machine code only (the module then
    /// has no entries of its own).
    pub no_binary: Option<Arc<NoBinary>>,
}

/// An image with cubins and no PTX: why its kernels cannot run, and which
/// kernels it has.
#[derive(Debug)]
pub struct NoBinary {
    /// The explanation, for error messages.
    pub reason: String,
    /// The kernels of its cubin (`None` if the cubin could not be read:
    /// then every name looked up gets the reason).
    pub kernels: Option<Vec<String>>,
}

/// What an image gives this driver to load.
#[derive(Debug, Clone)]
pub enum Code {
    /// PTX text.
    Ptx(String),
    /// Machine code only (see [`NoBinary`]).
    NoBinary(Arc<NoBinary>),
}

/// The module a machine-code-only image loads as: no entries.
const EMPTY_PTX: &str = ".version 7.0\n.target sm_50\n.address_size 64\n";

/// A `CUfunction`.
pub struct FunctionObj {
    /// The module it belongs to (a handle, so unloading is not prevented).
    pub module: usize,
    /// The module's context.
    pub context: Arc<ContextObj>,
    /// The runtime's entry.
    pub function: ptxvk_runtime::Function,
    /// The entry name, NUL-terminated (for `cuFuncGetName`).
    pub name: CString,
    /// `CU_FUNC_ATTRIBUTE_PTX_VERSION` (see `ptx_version`).
    pub ptx_version: c_int,
    /// Bytes of the module's `.const` variables.
    pub const_bytes: u64,
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
    pub max_dynamic_shared: AtomicU32,
    /// `CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT` (-1: no preference).
    pub carveout: AtomicI32,
}

/// Live modules.
pub static MODULES: Registry<ModuleObj> = Registry::new();
/// Live functions.
pub static FUNCTIONS: Registry<FunctionObj> = Registry::new();

/// The live module `hmod`; `CUDA_ERROR_INVALID_HANDLE` otherwise.
pub fn lookup(hmod: Handle) -> CuResult<Arc<ModuleObj>> {
    driver::driver()?;
    MODULES
        .get(hmod)
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_HANDLE.because(format!("{hmod:p} is not a live module")))
}

/// The live function `hfunc`; `CUDA_ERROR_INVALID_HANDLE` otherwise.
pub fn lookup_function(hfunc: Handle) -> CuResult<Arc<FunctionObj>> {
    driver::driver()?;
    FUNCTIONS
        .get(hfunc)
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_HANDLE.because(format!("{hfunc:p} is not a live function")))
}

/// Unregisters module `hmod` and its functions (the owner's bookkeeping is
/// the caller's business).
pub fn forget(hmod: Handle) {
    if let Some(module) = MODULES.remove(hmod) {
        let functions = std::mem::take(&mut *module.functions.lock().unwrap_or_else(|p| p.into_inner()));
        for handle in functions.into_values() {
            FUNCTIONS.remove(handle as Handle);
        }
    }
}

/// What kind of image a `cuModuleLoad*` call got.
#[derive(Debug, PartialEq, Eq)]
enum ImageKind {
    Ptx,
    Elf,
    /// CUDA Tile IR bytecode (magic `\x7fTileIR\0`), which NVIDIA's driver
    /// compiles for Blackwell GPUs; cuBLASLt hands it over for some GEMMs
    /// on devices of capability 10.0 and newer.
    TileIr,
    FatBinary,
    Empty,
}

/// Whether `image` is a fat binary (or its wrapper's bytes).
pub fn is_fat_binary(image: &[u8]) -> bool {
    classify(image) == ImageKind::FatBinary
}

/// Whether libraries of fat binaries load lazily: translated in a context
/// on the first use of one of their kernels or variables, as NVIDIA's
/// driver does by default since CUDA 12.2 (`CUDA_MODULE_LOADING=EAGER`
/// translates at load instead).
pub fn lazy_loading() -> bool {
    static LAZY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LAZY.get_or_init(|| !std::env::var("CUDA_MODULE_LOADING").is_ok_and(|v| v.trim().eq_ignore_ascii_case("EAGER")))
}

/// The names of the `.entry` directives of a PTX text, in order, found
/// without parsing it (comments and strings skipped).
pub fn scan_entry_names(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut names = Vec::new();
    let mut i = 0;
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c == b'%';
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i = b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |p| i + p);
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = text[i + 2..].find("*/").map_or(b.len(), |p| i + 2 + p + 2);
            }
            b'"' => {
                i = b[i + 1..].iter().position(|&c| c == b'"').map_or(b.len(), |p| i + 1 + p + 1);
            }
            b'.' if b[i..].starts_with(b".entry") && !b.get(i + 6).copied().is_some_and(ident) => {
                let mut j = i + 6;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                let start = j;
                while j < b.len() && ident(b[j]) {
                    j += 1;
                }
                if j > start {
                    names.push(text[start..j].to_string());
                }
                i = j;
            }
            c if ident(c) || c == b'.' => {
                // Skip the rest of a word, so that `x.entry` is not a directive.
                i += 1;
                while i < b.len() && (ident(b[i]) || b[i] == b'.') {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    names
}

/// Looks at the first bytes of an image.
fn classify(image: &[u8]) -> ImageKind {
    const ELF: &[u8] = b"\x7fELF";
    // Fat binary header (0xBA55ED50) and the `__fatBinC_Wrapper_t` (0x466243B1), little-endian.
    const FATBIN: &[u8] = &[0x50, 0xED, 0x55, 0xBA];
    const FATBIN_WRAPPER: &[u8] = &[0xB1, 0x43, 0x62, 0x46];
    const TILE_IR: &[u8] = b"\x7fTileIR";
    if image.starts_with(ELF) {
        ImageKind::Elf
    } else if image.starts_with(TILE_IR) {
        ImageKind::TileIr
    } else if image.starts_with(FATBIN) || image.starts_with(FATBIN_WRAPPER) {
        ImageKind::FatBinary
    } else if image.iter().all(|b| b.is_ascii_whitespace()) {
        ImageKind::Empty
    } else {
        ImageKind::Ptx
    }
}

/// `CU_FUNC_ATTRIBUTE_PTX_VERSION` of a PTX text: the virtual architecture
/// it targets, `.target sm_80` (or `sm_90a`) giving 80 (90). That is what
/// NVIDIA's driver reports, whatever `cuda.h`'s "PTX version" suggests, and
/// what CUB (Thrust) reads through `cudaFuncGetAttributes` to choose its
/// tuning (`ptxVersion * 10`); the ISA `.version` instead (9.5 giving 95)
/// makes it pick kernels the program was not built with. 0 if absent.
fn ptx_version(text: &str) -> c_int {
    text.lines()
        .map(|l| l.split("//").next().unwrap_or("").trim())
        .find_map(|l| l.strip_prefix(".target"))
        .and_then(|rest| {
            let sm = rest.split(',').map(str::trim).find_map(|t| t.strip_prefix("sm_"))?;
            let digits: String = sm.chars().take_while(|c| c.is_ascii_digit()).collect();
            digits.parse::<c_int>().ok()
        })
        .unwrap_or(0)
}

/// Translations made ahead of a load (by `cuLinkComplete`), by device
/// ordinal and PTX text; a load of the same text on the same device takes it.
static PRETRANSLATED: Mutex<Vec<(c_int, String, ptxvk_runtime::Module)>> = Mutex::new(Vec::new());
/// How many ahead-of-time translations are kept.
const PRETRANSLATED_KEEP: usize = 8;

fn translate(ctx: &ContextObj, text: &str, file_name: &str) -> Result<ptxvk_runtime::Module, (CuError, String)> {
    ctx.runtime.load_module(text, file_name).map_err(|e| match e {
        ptxvk_runtime::Error::InvalidPtx(diag) => (CuError::CUDA_ERROR_INVALID_PTX.because(diag.clone()), diag),
        other => {
            let msg = other.to_string();
            (CuError::from(other), msg)
        }
    })
}

/// Translates `text` now and keeps the result for the next load of the
/// same text on the same device (see `cuLinkComplete`).
pub fn pretranslate(ctx: &ContextObj, text: &str, file_name: &str) -> Result<(), (CuError, String)> {
    let module = translate(ctx, text, file_name)?;
    let mut cache = PRETRANSLATED.lock().unwrap_or_else(|p| p.into_inner());
    if cache.len() >= PRETRANSLATED_KEEP {
        cache.remove(0);
    }
    cache.push((ctx.device.ordinal, text.to_string(), module));
    Ok(())
}

/// A kept translation of `text` for `ctx`'s device, removed from the cache.
fn take_pretranslated(ctx: &ContextObj, text: &str) -> Option<ptxvk_runtime::Module> {
    let mut cache = PRETRANSLATED.lock().unwrap_or_else(|p| p.into_inner());
    let i = cache.iter().position(|(d, t, _)| *d == ctx.device.ordinal && t == text)?;
    Some(cache.remove(i).2)
}

/// Explains why an image is not loadable, or gives its code.
pub fn image_code(image: &[u8], file_name: &str) -> Result<Code, (CuError, String)> {
    let only_ptx = "this driver (ptxvk) runs PTX only, translated to SPIR-V for Vulkan; \
                    give it PTX text (e.g. `nvcc -ptx`, or numba without nvjitlink)";
    let fail = |code: CuError, msg: String| Err((code.because(msg.clone()), msg));
    match classify(image) {
        ImageKind::Ptx => {
            let end = image.iter().position(|&b| b == 0).unwrap_or(image.len());
            match std::str::from_utf8(&image[..end]) {
                Ok(t) => Ok(Code::Ptx(t.to_string())),
                Err(e) => fail(
                    CuError::CUDA_ERROR_INVALID_PTX,
                    format!("{file_name}: error: PTX is not valid UTF-8 text ({e})"),
                ),
            }
        }
        ImageKind::Elf => fail(
            CuError::CUDA_ERROR_INVALID_IMAGE,
            format!("{file_name}: error: the image is an ELF (cubin) file, NVIDIA machine code; {only_ptx}"),
        ),
        ImageKind::TileIr => fail(
            CuError::CUDA_ERROR_INVALID_IMAGE,
            format!(
                "{file_name}: error: the image is CUDA Tile IR bytecode, which NVIDIA's driver compiles for \
                 Blackwell GPUs; {only_ptx}"
            ),
        ),
        ImageKind::FatBinary => {
            let sm = driver::sm_version().map_err(|e| (e, "cuInit has not been called".to_string()))?;
            match crate::fatbin::select(image, sm) {
                Ok(crate::fatbin::Code::Ptx(ptx)) => image_code(&ptx, file_name),
                Ok(crate::fatbin::Code::CubinsOnly { sms, kernels }) => {
                    let reason = format!("{file_name}: {}; {only_ptx}", crate::fatbin::cubins_only(&sms));
                    if crate::result::trace_level() > 0 {
                        let n = kernels.as_ref().map_or("unknown".to_string(), |k| k.len().to_string());
                        eprintln!("ptxvk: loading without code ({n} kernels): {reason}");
                    }
                    Ok(Code::NoBinary(Arc::new(NoBinary { reason, kernels })))
                }
                Err(why) => fail(CuError::CUDA_ERROR_INVALID_IMAGE, format!("{file_name}: error: {why}; {only_ptx}")),
            }
        }
        ImageKind::Empty => fail(CuError::CUDA_ERROR_INVALID_IMAGE, format!("{file_name}: error: the image is empty")),
    }
}

/// Translates and registers a module; on failure returns the error and the
/// text for the JIT error log.
pub fn load(ctx: &Arc<ContextObj>, image: &[u8], file_name: &str) -> Result<Handle, (CuError, String)> {
    let code = image_code(image, file_name)?;
    load_code(ctx, &code, file_name)
}

/// Registers a module of `code` (translated now, or taken from
/// `cuLinkComplete`'s translation).
pub fn load_code(ctx: &Arc<ContextObj>, code: &Code, file_name: &str) -> Result<Handle, (CuError, String)> {
    let (text, no_binary) = match code {
        Code::Ptx(text) => (text.as_str(), None),
        Code::NoBinary(nb) => (EMPTY_PTX, Some(nb.clone())),
    };
    let module = match take_pretranslated(ctx, text) {
        Some(m) => m,
        None => translate(ctx, text, file_name)?,
    };
    let const_bytes = module.info().globals.iter().filter(|g| g.space == GlobalSpace::Const).map(|g| g.size).sum();
    let obj = Arc::new(ModuleObj {
        context: ctx.clone(),
        runtime: module,
        ptx_version: ptx_version(text),
        const_bytes,
        functions: Mutex::new(BTreeMap::new()),
        no_binary,
    });
    let handle = MODULES.insert(obj);
    ctx.owned().modules.insert(handle as usize);
    Ok(handle)
}

/// The bytes of an in-memory image: a fat binary (or its wrapper) up to the
/// size its header gives, anything else up to its terminating NUL. For a
/// version 2 wrapper (`nvcc -rdc=true`) whose device-linked container holds
/// no PTX, the PTX of its pre-link containers, linked as `cuLink*` would
/// (see [`crate::fatbin::prelink_containers`]).
///
/// # Safety
/// `image` is non-null and points to a NUL-terminated image (PTX), or to a
/// complete fat binary, fat binary wrapper or ELF file.
pub unsafe fn image_bytes<'a>(image: *const c_void) -> Cow<'a, [u8]> {
    // SAFETY: forwarded caller contract.
    let bytes = unsafe { raw_image_bytes(image) };
    if classify(bytes) != ImageKind::FatBinary {
        return Cow::Borrowed(bytes);
    }
    // SAFETY: a fat binary or wrapper: complete, per the caller.
    let units = unsafe { crate::fatbin::prelink_containers(image) };
    if units.is_empty() {
        return Cow::Borrowed(bytes);
    }
    let Ok(sm) = driver::sm_version() else { return Cow::Borrowed(bytes) };
    if crate::fatbin::select_ptx(bytes, sm).is_ok() {
        return Cow::Borrowed(bytes);
    }
    let ptx: Vec<Option<(String, String)>> = units
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let text = crate::fatbin::select_ptx(c, sm).ok()?;
            Some((format!("<pre-link fat binary {i}>"), String::from_utf8(text).ok()?))
        })
        .collect();
    // nvcc links the device runtime (libcudadevrt's cuda_device_runtime.cu)
    // into every -rdc program; as for `cuLinkAddData` of that archive, the
    // translator provides what it offers (cooperative-groups grid sync)
    // itself. A unit without PTX leaves the image as it is (and refused
    // with the reason).
    let ptx: Option<Vec<(String, String)>> =
        ptx.into_iter().filter(|u| !u.as_ref().is_some_and(|(_, t)| t.contains(DEVICE_RUNTIME_MARK))).collect();
    match ptx.filter(|p| !p.is_empty()) {
        Some(ptx) => {
            let mut linked = crate::link::merge(&ptx).into_bytes();
            linked.push(0);
            Cow::Owned(linked)
        }
        None => Cow::Borrowed(bytes),
    }
}

/// Part of every symbol of the device runtime's PTX (`cuda_device_runtime.cu`
/// mangled into its static names).
const DEVICE_RUNTIME_MARK: &str = "_cuda_device_runtime_cu_";

/// [`image_bytes`] without the pre-link step.
///
/// # Safety
/// As [`image_bytes`].
unsafe fn raw_image_bytes<'a>(image: *const c_void) -> &'a [u8] {
    let p = image.cast::<u8>();
    // Read the first bytes one by one, stopping at a NUL, so that a short
    // NUL-terminated text is never read past its end.
    let mut head = [0u8; 4];
    let mut n = 0;
    while n < 4 {
        // SAFETY: bytes up to and including the first NUL are readable.
        let b = unsafe { p.add(n).read() };
        if b == 0 {
            break;
        }
        head[n] = b;
        n += 1;
    }
    if n == 4 {
        let magic = u32::from_le_bytes(head);
        if magic == crate::fatbin::FATBIN_MAGIC || magic == crate::fatbin::WRAPPER_MAGIC {
            // SAFETY: a complete container or wrapper, per the caller.
            if let Some(c) = unsafe { crate::fatbin::container_from_pointer(image) } {
                return c;
            }
        }
        if head == *b"\x7fELF" {
            // Only the magic matters: an ELF image is refused.
            // SAFETY: the four bytes were just read.
            return unsafe { std::slice::from_raw_parts(p, 4) };
        }
    }
    // SAFETY: NUL-terminated, per the caller.
    unsafe { CStr::from_ptr(image.cast::<c_char>()) }.to_bytes()
}

/// `cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int
/// numOptions, CUjit_option *options, void **optionValues)`: `image` is
/// NUL-terminated PTX. Translation errors are `CUDA_ERROR_INVALID_PTX` with
/// the rendered diagnostics (`file:line:col: error: ...`) in the error log.
///
/// # Safety
/// `module` is NULL or writable; `image` is NULL or NUL-terminated; the option
/// arrays are as [`JitOptions::parse`] requires.
pub unsafe fn module_load_data_ex(
    module: *mut Handle,
    image: *const c_void,
    num_options: c_uint,
    options: *const c_int,
    values: *mut *mut c_void,
) -> CuResult<()> {
    let ctx = context::current()?;
    if module.is_null() || image.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("module or image is NULL"));
    }
    // SAFETY: forwarded caller contract.
    let jit = unsafe { JitOptions::parse(num_options, options, values) }?;
    let start = Instant::now();
    // SAFETY: non-null; a NUL-terminated or complete binary image per the caller.
    let image = unsafe { image_bytes(image) };
    let result = load(&ctx, &image, IN_MEMORY_PTX_NAME);
    let ms = start.elapsed().as_secs_f32() * 1000.0;
    let (error_log, outcome) = match result {
        Ok(h) => (String::new(), Ok(h)),
        Err((code, log)) => (log, Err(code)),
    };
    let info_log = if jit.verbose && outcome.is_ok() {
        format!("ptxvk: translated PTX to SPIR-V in {ms:.3} ms")
    } else {
        String::new()
    };
    // SAFETY: forwarded caller contract.
    unsafe { jit.finish(&error_log, &info_log, ms) };
    let handle = outcome?;
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(module, handle) }
}

/// `cuModuleLoadData(CUmodule *module, const void *image)`.
///
/// # Safety
/// As [`module_load_data_ex`].
pub unsafe fn module_load_data(module: *mut Handle, image: *const c_void) -> CuResult<()> {
    // SAFETY: forwarded caller contract; no options.
    unsafe { module_load_data_ex(module, image, 0, std::ptr::null(), std::ptr::null_mut()) }
}

/// `cuModuleLoad(CUmodule *module, const char *fname)`: a PTX file;
/// diagnostics name the file. `CUDA_ERROR_FILE_NOT_FOUND` if it cannot be read.
///
/// # Safety
/// `module` is NULL or writable; `fname` is NULL or NUL-terminated.
pub unsafe fn module_load(module: *mut Handle, fname: *const c_char) -> CuResult<()> {
    let ctx = context::current()?;
    if module.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("module is NULL"));
    }
    // SAFETY: forwarded caller contract.
    let path = unsafe { c_str(fname) }?;
    let data = std::fs::read(path)
        .map_err(|e| CuError::CUDA_ERROR_FILE_NOT_FOUND.because(format!("cannot read {path}: {e}")))?;
    let handle = load(&ctx, &data, path).map_err(|(code, _)| code)?;
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(module, handle) }
}

/// `cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)`: loads the
/// PTX a fat binary (or `__fatBinC_Wrapper_t`) carries; one with cubins only
/// is `CUDA_ERROR_INVALID_IMAGE` (or `CUDA_ERROR_NO_BINARY_FOR_GPU` when the
/// bytes are not a fat binary at all).
///
/// # Safety
/// `module` is NULL or writable; `fat_cubin` is NULL or a complete fat binary.
pub unsafe fn module_load_fat_binary(module: *mut Handle, fat_cubin: *const c_void) -> CuResult<()> {
    let ctx = context::current()?;
    if module.is_null() || fat_cubin.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("module or fatCubin is NULL"));
    }
    // SAFETY: non-null and a complete image per the caller.
    let image = unsafe { image_bytes(fat_cubin) };
    if classify(&image) != ImageKind::FatBinary {
        return Err(CuError::CUDA_ERROR_NO_BINARY_FOR_GPU.because("fatCubin is not a fat binary"));
    }
    let handle = load(&ctx, &image, IN_MEMORY_PTX_NAME).map_err(|(code, _)| code)?;
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(module, handle) }
}

/// `cuModuleUnload(CUmodule hmod)`.
pub fn module_unload(hmod: Handle) -> CuResult<()> {
    let module = lookup(hmod)?;
    if module.runtime.info().printf_offset.is_some() {
        // CUDA prints pending kernel output at unload; a kernel failure is
        // reported by the next call that synchronises, not by the unload.
        let _ = module.context.runtime.synchronize();
    }
    module.context.owned().modules.remove(&(hmod as usize));
    forget(hmod);
    Ok(())
}

/// `cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)`:
/// the same handle every time for the same entry; `CUDA_ERROR_NOT_FOUND` if
/// the module has no such `.entry`.
///
/// # Safety
/// `hfunc` is NULL or writable; `name` is NULL or NUL-terminated.
pub unsafe fn module_get_function(hfunc: *mut Handle, hmod: Handle, name: *const c_char) -> CuResult<()> {
    driver::driver()?;
    if hfunc.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("hfunc is NULL"));
    }
    let module = lookup(hmod)?;
    // SAFETY: forwarded caller contract.
    let name = unsafe { c_str(name) }?;
    let handle = function_handle(&module, hmod, name)?;
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(hfunc, handle) }
}

/// The `CUfunction` of entry `name` in `module` (handle `hmod`): the same
/// handle every time; `CUDA_ERROR_NOT_FOUND` if there is no such `.entry`,
/// and `CUDA_ERROR_INVALID_PTX` with the diagnostic if the entry did not
/// translate (the module loaded without it, as with NVIDIA's lazy loading).
pub fn function_handle(module: &Arc<ModuleObj>, hmod: Handle, name: &str) -> CuResult<Handle> {
    let mut functions = module.functions.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&h) = functions.get(name) {
        return Ok(h as Handle);
    }
    if let Some(diag) = module.runtime.deferred_error(name) {
        return Err(CuError::CUDA_ERROR_INVALID_PTX.because(format!("kernel {name} did not translate: {diag}")));
    }
    let Some(function) = module.runtime.function(name) else {
        if let Some(nb) = &module.no_binary {
            if nb.kernels.as_ref().is_none_or(|k| k.iter().any(|k| k == name)) {
                return Err(CuError::CUDA_ERROR_NO_BINARY_FOR_GPU
                    .because(format!("kernel {name} has no code this driver runs: {}", nb.reason)));
            }
        }
        return Err(CuError::CUDA_ERROR_NOT_FOUND.because(format!("the module has no entry named {name:?}")));
    };
    let static_shared = function.info().static_shared_bytes;
    let info = module.context.runtime.info();
    let default_dynamic = crate::device::shared_per_block(info).saturating_sub(static_shared);
    let obj = Arc::new(FunctionObj {
        module: hmod as usize,
        context: module.context.clone(),
        function,
        name: CString::new(name).map_err(|_| CuError::CUDA_ERROR_INVALID_VALUE)?,
        ptx_version: module.ptx_version,
        const_bytes: module.const_bytes,
        max_dynamic_shared: AtomicU32::new(default_dynamic),
        carveout: AtomicI32::new(-1),
    });
    let h = FUNCTIONS.insert(obj);
    functions.insert(name.to_string(), h as usize);
    Ok(h)
}

/// `cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod,
/// const char *name)`: both outputs are optional; `CUDA_ERROR_NOT_FOUND` if
/// the module has no such `.global`/`.const` variable.
///
/// # Safety
/// `dptr` and `bytes` are NULL or writable; `name` is NULL or NUL-terminated.
pub unsafe fn module_get_global(
    dptr: *mut CUdeviceptr,
    bytes: *mut usize,
    hmod: Handle,
    name: *const c_char,
) -> CuResult<()> {
    let module = lookup(hmod)?;
    // SAFETY: forwarded caller contract.
    let name = unsafe { c_str(name) }?;
    let (addr, size) = module
        .runtime
        .global(name)
        .ok_or_else(|| CuError::CUDA_ERROR_NOT_FOUND.because(format!("the module has no variable named {name:?}")))?;
    // SAFETY: optional outputs, writable per the caller.
    unsafe {
        write_opt(dptr, addr);
        write_opt(bytes, usize::try_from(size).unwrap_or(usize::MAX));
    }
    Ok(())
}

/// `cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)`:
/// `CU_MODULE_LAZY_LOADING` (2) unless `CUDA_MODULE_LOADING=EAGER`
/// (`CU_MODULE_EAGER_LOADING`, 1); see [`lazy_loading`].
///
/// # Safety
/// `mode` is NULL or writable.
pub unsafe fn module_get_loading_mode(mode: *mut c_int) -> CuResult<()> {
    driver::driver()?;
    let value = if lazy_loading() { 2 } else { 1 };
    // SAFETY: forwarded caller contract.
    unsafe { write_out(mode, value) }
}

/// `cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)`.
///
/// # Safety
/// `count` is NULL or writable.
pub unsafe fn module_get_function_count(count: *mut c_uint, hmod: Handle) -> CuResult<()> {
    let module = lookup(hmod)?;
    let n = module.runtime.entry_names().len();
    // SAFETY: forwarded caller contract.
    unsafe { write_out(count, n as c_uint) }
}

/// `cuModuleEnumerateFunctions(CUfunction *functions, unsigned int
/// numFunctions, CUmodule mod)`: the first `numFunctions` entries.
///
/// # Safety
/// `functions` is NULL or writable for `num` handles.
pub unsafe fn module_enumerate_functions(functions: *mut Handle, num: c_uint, hmod: Handle) -> CuResult<()> {
    let module = lookup(hmod)?;
    if functions.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("functions is NULL"));
    }
    for (i, name) in module.runtime.entry_names().iter().take(num as usize).enumerate() {
        let h = function_handle(&module, hmod, name)?;
        // SAFETY: `i < num`; writable per the caller.
        unsafe { functions.add(i).write_unaligned(h) };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_images() {
        assert_eq!(classify(b"\x7fELF\x02\x01\x01"), ImageKind::Elf);
        assert_eq!(classify(b"\x7fTileIR\0\xff\xff"), ImageKind::TileIr);
        assert_eq!(classify(&[0x50, 0xED, 0x55, 0xBA, 1]), ImageKind::FatBinary);
        assert_eq!(classify(&[0xB1, 0x43, 0x62, 0x46, 1]), ImageKind::FatBinary);
        assert_eq!(classify(b" \n"), ImageKind::Empty);
        assert_eq!(classify(b".version 9.5\n.target sm_80\n"), ImageKind::Ptx);
    }

    #[test]
    fn scans_entry_names() {
        let text = "// .entry commented\n/* .entry block */ .file 1 \".entry s\"\n\
                    .visible .entry k1(\n .param .u64 p) {}\n.func f() {}\n.weak .entry\tk_2$x () {}\n\
                    .entry k3{}\n.global .u32 entry_count;";
        assert_eq!(scan_entry_names(text), vec!["k1", "k_2$x", "k3"]);
    }

    #[test]
    fn reads_ptx_version() {
        assert_eq!(ptx_version("//\n.version 9.5\n.target sm_80"), 80);
        assert_eq!(ptx_version(".version 8.0\n  .target sm_90a, texmode_independent // c\n"), 90);
        assert_eq!(ptx_version(".version 9.0\n.target sm_100f\n"), 100);
        assert_eq!(ptx_version("  .version 7.0 // c\n"), 0);
    }
}
