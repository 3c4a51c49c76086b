//! Modules and functions: loading PTX (`cuModuleLoad*`), looking up
//! entries and variables, unloading.
//!
//! Only PTX text can be loaded: the runtime translates it to SPIR-V. NVIDIA
//! binaries (cubin ELF, fat binaries) are refused with
//! `CUDA_ERROR_INVALID_IMAGE` and a message in the JIT error log.

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
    /// `.version` of the PTX as `10 * major + minor`.
    pub ptx_version: c_int,
    /// Bytes of `.const` variables.
    pub const_bytes: u64,
    /// Function handles handed out so far, by entry name.
    functions: Mutex<BTreeMap<String, usize>>,
}

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
    /// `.version` of the PTX as `10 * major + minor`.
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
    FatBinary,
    Empty,
}

/// Looks at the first bytes of an image.
fn classify(image: &[u8]) -> ImageKind {
    const ELF: &[u8] = b"\x7fELF";
    // Fat binary header (0xBA55ED50) and the `__fatBinC_Wrapper_t` (0x466243B1), little-endian.
    const FATBIN: &[u8] = &[0x50, 0xED, 0x55, 0xBA];
    const FATBIN_WRAPPER: &[u8] = &[0xB1, 0x43, 0x62, 0x46];
    if image.starts_with(ELF) {
        ImageKind::Elf
    } else if image.starts_with(FATBIN) || image.starts_with(FATBIN_WRAPPER) {
        ImageKind::FatBinary
    } else if image.iter().all(|b| b.is_ascii_whitespace()) {
        ImageKind::Empty
    } else {
        ImageKind::Ptx
    }
}

/// `.version` of a PTX text as `10 * major + minor` (0 if absent).
fn ptx_version(text: &str) -> c_int {
    text.lines()
        .map(str::trim_start)
        .find_map(|l| l.strip_prefix(".version"))
        .and_then(|rest| {
            let (major, minor) = rest.trim().split_once('.')?;
            let minor: String = minor.chars().take_while(|c| c.is_ascii_digit()).collect();
            Some(major.trim().parse::<c_int>().ok()? * 10 + minor.parse::<c_int>().ok()?)
        })
        .unwrap_or(0)
}

/// Translates and registers a module; on failure returns the error and the
/// text for the JIT error log.
fn load(ctx: &Arc<ContextObj>, image: &[u8], file_name: &str) -> Result<Handle, (CuError, String)> {
    let only_ptx = "this driver (ptxvk) runs PTX only, translated to SPIR-V for Vulkan; \
                    give it PTX text (e.g. `nvcc -ptx`, or numba without pynvjitlink)";
    let text = match classify(image) {
        ImageKind::Ptx => std::str::from_utf8(image).map_err(|e| {
            let msg = format!("{file_name}: error: PTX is not valid UTF-8 text ({e})");
            (CuError::CUDA_ERROR_INVALID_PTX.because(msg.clone()), msg)
        })?,
        ImageKind::Elf => {
            let msg = format!("{file_name}: error: the image is an ELF (cubin) file, NVIDIA machine code; {only_ptx}");
            return Err((CuError::CUDA_ERROR_INVALID_IMAGE.because(msg.clone()), msg));
        }
        ImageKind::FatBinary => {
            let msg = format!("{file_name}: error: the image is an NVIDIA fat binary; {only_ptx}");
            return Err((CuError::CUDA_ERROR_INVALID_IMAGE.because(msg.clone()), msg));
        }
        ImageKind::Empty => {
            let msg = format!("{file_name}: error: the image is empty");
            return Err((CuError::CUDA_ERROR_INVALID_IMAGE.because(msg.clone()), msg));
        }
    };
    let module = ctx.runtime.load_module(text, file_name).map_err(|e| match e {
        ptxvk_runtime::Error::InvalidPtx(diag) => (CuError::CUDA_ERROR_INVALID_PTX.because(diag.clone()), diag),
        other => {
            let msg = other.to_string();
            (CuError::from(other), msg)
        }
    })?;
    let const_bytes = module.info().globals.iter().filter(|g| g.space == GlobalSpace::Const).map(|g| g.size).sum();
    let obj = Arc::new(ModuleObj {
        context: ctx.clone(),
        runtime: module,
        ptx_version: ptx_version(text),
        const_bytes,
        functions: Mutex::new(BTreeMap::new()),
    });
    let handle = MODULES.insert(obj);
    ctx.owned().modules.insert(handle as usize);
    Ok(handle)
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
    // SAFETY: `image` is non-null and NUL-terminated per the caller. Binary
    // images (ELF, fat binaries) have a zero byte within their first 8 bytes,
    // so this reads no further than their header.
    let image = unsafe { CStr::from_ptr(image.cast::<c_char>()) }.to_bytes();
    let result = load(&ctx, image, IN_MEMORY_PTX_NAME);
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
    let data = match data.iter().position(|&b| b == 0) {
        Some(end) if classify(&data) == ImageKind::Ptx => &data[..end],
        _ => &data[..],
    };
    let handle = load(&ctx, data, path).map_err(|(code, _)| code)?;
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(module, handle) }
}

/// `cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)`: fat
/// binaries hold NVIDIA machine code or compressed PTX, neither of which this
/// driver loads: `CUDA_ERROR_INVALID_IMAGE` (after the usual argument checks).
pub fn module_load_fat_binary(module: Handle, fat_cubin: *const c_void) -> CuResult<()> {
    context::current()?;
    if module.is_null() || fat_cubin.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("module or fatCubin is NULL"));
    }
    Err(CuError::CUDA_ERROR_INVALID_IMAGE.because("fat binaries cannot be loaded; this driver runs PTX text only"))
}

/// `cuModuleUnload(CUmodule hmod)`.
pub fn module_unload(hmod: Handle) -> CuResult<()> {
    let module = lookup(hmod)?;
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
    let mut functions = module.functions.lock().unwrap_or_else(|p| p.into_inner());
    let handle = match functions.get(name) {
        Some(&h) => h as Handle,
        None => {
            let function = module.runtime.function(name).ok_or_else(|| {
                CuError::CUDA_ERROR_NOT_FOUND.because(format!("the module has no entry named {name:?}"))
            })?;
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
            h
        }
    };
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(hfunc, handle) }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_images() {
        assert_eq!(classify(b"\x7fELF\x02\x01\x01"), ImageKind::Elf);
        assert_eq!(classify(&[0x50, 0xED, 0x55, 0xBA, 1]), ImageKind::FatBinary);
        assert_eq!(classify(&[0xB1, 0x43, 0x62, 0x46, 1]), ImageKind::FatBinary);
        assert_eq!(classify(b" \n"), ImageKind::Empty);
        assert_eq!(classify(b".version 9.5\n.target sm_80\n"), ImageKind::Ptx);
    }

    #[test]
    fn reads_ptx_version() {
        assert_eq!(ptx_version("//\n.version 9.5\n.target sm_80"), 95);
        assert_eq!(ptx_version("  .version 7.0 // c\n"), 70);
        assert_eq!(ptx_version(".target sm_80"), 0);
    }
}
