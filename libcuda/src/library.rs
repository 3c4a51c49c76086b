//! Context-independent loading: `CUlibrary` and `CUkernel` (CUDA 12).
//!
//! A library keeps its PTX and is loaded as a module into each context that
//! uses it, on first use (and right away into the context current when it
//! is loaded, so translation errors reach the JIT error log). A `CUkernel`
//! names an entry of a library; wherever a `CUfunction` is expected a
//! `CUkernel` is accepted too (numba launches them that way) and stands for
//! its function in the current context.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CString};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

use crate::context::{self, ContextObj};
use crate::driver;
use crate::ffi::{c_str, write_opt, write_out, CUdevice, CUdeviceptr, Handle};
use crate::handles::{handle_of, Registry};
use crate::jit::JitOptions;
use crate::launch;
use crate::module::{self, FunctionObj};
use crate::result::{CuError, CuResult};

/// A `CUlibrary`.
pub struct LibraryObj {
    /// Its code: PTX text, or machine code only (each kernel then fails
    /// at launch with `CUDA_ERROR_NO_BINARY_FOR_GPU`).
    code: module::Code,
    /// Name used in diagnostics (file name or `<ptx>`).
    name: String,
    /// Entry names, in module order.
    entries: Vec<String>,
    /// The library's module in each context, keyed by the context's handle.
    modules: Mutex<BTreeMap<usize, LoadedIn>>,
    /// Kernel handle per entry name.
    kernels: Mutex<BTreeMap<String, usize>>,
}

/// A library's module in one context.
///
/// Handles are addresses, and an address is reused once its object is
/// freed: after a primary-context reset frees the library's module, another
/// module (of the same entry names, say) may be loaded at the same address.
/// The weak references keep both allocations, so while this record exists
/// no other context or module can take their addresses, and they tell
/// whether the module this record names is still the one registered under
/// its handle.
struct LoadedIn {
    context: Weak<ContextObj>,
    handle: usize,
    module: Weak<module::ModuleObj>,
}

impl LoadedIn {
    fn new(ctx: &Arc<ContextObj>, handle: Handle, module: &Arc<module::ModuleObj>) -> Self {
        LoadedIn { context: Arc::downgrade(ctx), handle: handle as usize, module: Arc::downgrade(module) }
    }

    /// The module, while it is the live module registered under its handle
    /// (neither unloaded nor freed by a context reset or destruction).
    fn live(&self) -> Option<Arc<module::ModuleObj>> {
        let registered = module::MODULES.get(self.handle as Handle)?;
        let ours = self.module.upgrade()?;
        Arc::ptr_eq(&registered, &ours).then_some(ours)
    }
}

/// A `CUkernel`.
pub struct KernelObj {
    /// The library handle.
    pub library: usize,
    /// The entry name.
    pub name: CString,
}

/// Live libraries.
pub static LIBRARIES: Registry<LibraryObj> = Registry::new();
/// Live kernels.
pub static KERNELS: Registry<KernelObj> = Registry::new();

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The live library `lib`; `CUDA_ERROR_INVALID_HANDLE` otherwise.
pub fn lookup(lib: Handle) -> CuResult<Arc<LibraryObj>> {
    driver::driver()?;
    LIBRARIES
        .get(lib)
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_HANDLE.because(format!("{lib:p} is not a live library")))
}

/// The live kernel `kernel`; `CUDA_ERROR_INVALID_HANDLE` otherwise.
pub fn lookup_kernel(kernel: Handle) -> CuResult<Arc<KernelObj>> {
    driver::driver()?;
    KERNELS
        .get(kernel)
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_HANDLE.because(format!("{kernel:p} is not a live kernel")))
}

impl LibraryObj {
    /// The library's module in `ctx`, loading it there if needed.
    fn module_in(&self, ctx: &Arc<ContextObj>) -> CuResult<(Handle, Arc<module::ModuleObj>)> {
        let key = handle_of(ctx) as usize;
        let mut modules = lock(&self.modules);
        if let Some(loaded) = modules.get(&key) {
            let same_context = loaded.context.upgrade().is_some_and(|c| Arc::ptr_eq(&c, ctx));
            if let (true, Some(m)) = (same_context, loaded.live()) {
                return Ok((loaded.handle as Handle, m));
            }
        }
        let h = module::load_code(ctx, &self.code, &self.name).map_err(|(code, _)| code)?;
        let m = module::lookup(h)?;
        modules.insert(key, LoadedIn::new(ctx, h, &m));
        Ok((h, m))
    }

    /// The library's module in the current context.
    fn current_module(&self) -> CuResult<(Handle, Arc<module::ModuleObj>)> {
        let ctx = context::current()?;
        self.module_in(&ctx)
    }
}

/// The function `kernel` stands for in the current context.
pub fn kernel_function(kernel: &KernelObj) -> CuResult<Arc<FunctionObj>> {
    let lib = lookup(kernel.library as Handle)?;
    let (hmod, m) = lib.current_module()?;
    let name = kernel.name.to_str().map_err(|_| CuError::CUDA_ERROR_INVALID_VALUE)?;
    let h = module::function_handle(&m, hmod, name)?;
    module::lookup_function(h)
}

/// A `CUfunction` or a `CUkernel` (as its function in the current context);
/// `CUDA_ERROR_INVALID_HANDLE` for anything else.
pub fn resolve_function(h: Handle) -> CuResult<Arc<FunctionObj>> {
    driver::driver()?;
    if let Some(f) = module::FUNCTIONS.get(h) {
        return Ok(f);
    }
    match KERNELS.get(h) {
        Some(k) => kernel_function(&k),
        None => Err(CuError::CUDA_ERROR_INVALID_HANDLE.because(format!("{h:p} is not a live function or kernel"))),
    }
}

/// What loading a library found: its code, its entries, and the module
/// loaded into the current context (if one was current).
type Loaded = (module::Code, Vec<String>, Option<(Arc<ContextObj>, Handle)>);

/// Loads `image` as a library, with JIT options.
///
/// # Safety
/// `library` is NULL or writable; the option arrays as [`JitOptions::parse`].
unsafe fn load_library(
    library: *mut Handle,
    image: &[u8],
    name: &str,
    jit_options: *const c_int,
    jit_values: *mut *mut c_void,
    num_jit: c_uint,
) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    let jit = unsafe { JitOptions::parse(num_jit, jit_options, jit_values) }?;
    let start = Instant::now();
    let result = (|| -> Result<Loaded, (CuError, String)> {
        let code = module::image_code(image, name)?;
        let ptx = match &code {
            // Machine code only: its kernels fail where they are used.
            module::Code::NoBinary(nb) => {
                let entries = nb.kernels.clone().unwrap_or_default();
                return Ok((code, entries, None));
            }
            // A program's or library's fat binary: translated in a context
            // where one of its kernels or variables is first used.
            module::Code::Ptx(text) if module::lazy_loading() && module::is_fat_binary(image) => {
                let entries = module::scan_entry_names(text);
                return Ok((code, entries, None));
            }
            module::Code::Ptx(text) => text.clone(),
        };
        match context::current() {
            Ok(ctx) => {
                let h = module::load_code(&ctx, &code, name)?;
                let m = module::lookup(h).map_err(|e| (e, String::new()))?;
                let entries = m.runtime.entry_names();
                Ok((code, entries, Some((ctx, h))))
            }
            Err(_) => {
                // No context yet: translate on device 0 to check the PTX and
                // learn its entries; contexts load it when they use it.
                let dev = driver::device(0).map_err(|e| (e, "no device".to_string()))?;
                let rt = dev.runtime().map_err(|e| (e, "device unavailable".to_string()))?;
                let m = rt.load_module(&ptx, name).map_err(|e| match e {
                    ptxvk_runtime::Error::InvalidPtx(d) => (CuError::CUDA_ERROR_INVALID_PTX.because(d.clone()), d),
                    other => {
                        let msg = other.to_string();
                        (CuError::from(other), msg)
                    }
                })?;
                let entries = m.entry_names();
                Ok((code, entries, None))
            }
        }
    })();
    let ms = start.elapsed().as_secs_f32() * 1000.0;
    let (error_log, outcome) = match result {
        Ok(v) => (String::new(), Ok(v)),
        Err((code, log)) => (log, Err(code)),
    };
    let info = if jit.verbose && outcome.is_ok() {
        format!("ptxvk: translated PTX to SPIR-V in {ms:.3} ms")
    } else {
        String::new()
    };
    // SAFETY: forwarded caller contract.
    unsafe { jit.finish(&error_log, &info, ms) };
    let (code, entries, loaded) = outcome?;
    let mut modules = BTreeMap::new();
    if let Some((ctx, h)) = &loaded {
        let m = module::lookup(*h)?;
        modules.insert(handle_of(ctx) as usize, LoadedIn::new(ctx, *h, &m));
    }
    let obj = LibraryObj {
        code,
        name: name.to_string(),
        entries,
        modules: Mutex::new(modules),
        kernels: Mutex::new(BTreeMap::new()),
    };
    let handle = LIBRARIES.insert(Arc::new(obj));
    // SAFETY: checked non-null by the callers; writable per the caller.
    unsafe { write_out(library, handle) }
}

/// `cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option
/// *jitOptions, void **jitOptionsValues, unsigned int numJitOptions,
/// CUlibraryOption *libraryOptions, void **libraryOptionValues, unsigned int
/// numLibraryOptions)`: `code` is PTX or a fat binary carrying PTX; library
/// options are accepted and ignored.
///
/// # Safety
/// `library` is NULL or writable; `code` is NULL or a NUL-terminated or
/// complete binary image; the JIT option arrays as [`JitOptions::parse`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn library_load_data(
    library: *mut Handle,
    code: *const c_void,
    jit_options: *const c_int,
    jit_values: *mut *mut c_void,
    num_jit: c_uint,
    _library_options: *const c_int,
    _library_values: *mut *mut c_void,
    _num_library: c_uint,
) -> CuResult<()> {
    driver::driver()?;
    if library.is_null() || code.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("library or code is NULL"));
    }
    // SAFETY: non-null; an image per the caller.
    let image = unsafe { module::image_bytes(code) };
    // SAFETY: forwarded caller contract.
    unsafe { load_library(library, &image, module::IN_MEMORY_PTX_NAME, jit_options, jit_values, num_jit) }
}

/// `cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, ...)`:
/// as [`library_load_data`]; `CUDA_ERROR_FILE_NOT_FOUND` if unreadable.
///
/// # Safety
/// `file_name` is NULL or NUL-terminated; otherwise as [`library_load_data`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn library_load_from_file(
    library: *mut Handle,
    file_name: *const c_char,
    jit_options: *const c_int,
    jit_values: *mut *mut c_void,
    num_jit: c_uint,
    _library_options: *const c_int,
    _library_values: *mut *mut c_void,
    _num_library: c_uint,
) -> CuResult<()> {
    driver::driver()?;
    if library.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("library is NULL"));
    }
    // SAFETY: NUL-terminated per the caller.
    let path = unsafe { c_str(file_name) }?;
    let data = std::fs::read(path)
        .map_err(|e| CuError::CUDA_ERROR_FILE_NOT_FOUND.because(format!("cannot read {path}: {e}")))?;
    // SAFETY: forwarded caller contract.
    unsafe { load_library(library, &data, path, jit_options, jit_values, num_jit) }
}

/// `cuLibraryUnload(CUlibrary library)`: unloads its modules from every
/// context and invalidates its kernels.
pub fn library_unload(library: Handle) -> CuResult<()> {
    driver::driver()?;
    let lib = LIBRARIES
        .remove(library)
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_HANDLE.because(format!("{library:p} is not a live library")))?;
    for (_, loaded) in std::mem::take(&mut *lock(&lib.modules)) {
        // Only the library's own module: one freed by a context reset may
        // have left its handle to another module.
        if loaded.live().is_some() {
            let _ = module::module_unload(loaded.handle as Handle);
        }
    }
    for (_, k) in std::mem::take(&mut *lock(&lib.kernels)) {
        KERNELS.remove(k as Handle);
    }
    Ok(())
}

/// `cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char
/// *name)`: `CUDA_ERROR_NOT_FOUND` if the library has no such entry.
///
/// # Safety
/// `kernel` is NULL or writable; `name` is NULL or NUL-terminated.
pub unsafe fn library_get_kernel(kernel: *mut Handle, library: Handle, name: *const c_char) -> CuResult<()> {
    let lib = lookup(library)?;
    if kernel.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pKernel is NULL"));
    }
    // SAFETY: NUL-terminated per the caller.
    let name = unsafe { c_str(name) }?;
    let h = kernel_handle(&lib, library, name)?;
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(kernel, h) }
}

fn kernel_handle(lib: &LibraryObj, library: Handle, name: &str) -> CuResult<Handle> {
    if !lib.entries.iter().any(|e| e == name) {
        return Err(CuError::CUDA_ERROR_NOT_FOUND.because(format!("the library has no entry named {name:?}")));
    }
    let mut kernels = lock(&lib.kernels);
    if let Some(&h) = kernels.get(name) {
        return Ok(h as Handle);
    }
    let obj = KernelObj {
        library: library as usize,
        name: CString::new(name).map_err(|_| CuError::CUDA_ERROR_INVALID_VALUE)?,
    };
    let h = KERNELS.insert(Arc::new(obj));
    kernels.insert(name.to_string(), h as usize);
    Ok(h)
}

/// `cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib)`.
///
/// # Safety
/// `count` is NULL or writable.
pub unsafe fn library_get_kernel_count(count: *mut c_uint, library: Handle) -> CuResult<()> {
    let lib = lookup(library)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(count, lib.entries.len() as c_uint) }
}

/// `cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels,
/// CUlibrary lib)`: the first `numKernels` kernels.
///
/// # Safety
/// `kernels` is NULL or writable for `num` handles.
pub unsafe fn library_enumerate_kernels(kernels: *mut Handle, num: c_uint, library: Handle) -> CuResult<()> {
    let lib = lookup(library)?;
    if kernels.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("kernels is NULL"));
    }
    for (i, name) in lib.entries.iter().take(num as usize).enumerate() {
        let h = kernel_handle(&lib, library, name)?;
        // SAFETY: `i < num`; writable per the caller.
        unsafe { kernels.add(i).write_unaligned(h) };
    }
    Ok(())
}

/// `cuLibraryGetModule(CUmodule *pMod, CUlibrary library)`: the library's
/// module in the current context.
///
/// # Safety
/// `pmod` is NULL or writable.
pub unsafe fn library_get_module(pmod: *mut Handle, library: Handle) -> CuResult<()> {
    let lib = lookup(library)?;
    if pmod.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pMod is NULL"));
    }
    let (h, _) = lib.current_module()?;
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(pmod, h) }
}

/// `cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library,
/// const char *name)`: in the current context; outputs optional.
///
/// # Safety
/// `dptr` and `bytes` are NULL or writable; `name` is NULL or NUL-terminated.
pub unsafe fn library_get_global(
    dptr: *mut CUdeviceptr,
    bytes: *mut usize,
    library: Handle,
    name: *const c_char,
) -> CuResult<()> {
    let lib = lookup(library)?;
    // SAFETY: NUL-terminated per the caller.
    let name = unsafe { c_str(name) }?;
    let (_, m) = lib.current_module()?;
    let (addr, size) = m
        .runtime
        .global(name)
        .ok_or_else(|| CuError::CUDA_ERROR_NOT_FOUND.because(format!("the library has no variable named {name:?}")))?;
    // SAFETY: optional outputs, writable per the caller.
    unsafe {
        write_opt(dptr, addr);
        write_opt(bytes, usize::try_from(size).unwrap_or(usize::MAX));
    }
    Ok(())
}

/// `cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)`: the kernel's
/// function in the current context.
///
/// # Safety
/// `pfunc` is NULL or writable.
pub unsafe fn kernel_get_function(pfunc: *mut Handle, kernel: Handle) -> CuResult<()> {
    let k = lookup_kernel(kernel)?;
    if pfunc.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pFunc is NULL"));
    }
    let f = kernel_function(&k)?;
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(pfunc, handle_of(&f)) }
}

/// `cuKernelGetName(const char **name, CUkernel hfunc)`.
///
/// # Safety
/// `name` is NULL or writable.
pub unsafe fn kernel_get_name(name: *mut *const c_char, kernel: Handle) -> CuResult<()> {
    let k = lookup_kernel(kernel)?;
    // SAFETY: forwarded caller contract; the string lives as long as the kernel.
    unsafe { write_out(name, k.name.as_ptr()) }
}

/// `cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel)`.
///
/// # Safety
/// `plib` is NULL or writable.
pub unsafe fn kernel_get_library(plib: *mut Handle, kernel: Handle) -> CuResult<()> {
    let k = lookup_kernel(kernel)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(plib, k.library as Handle) }
}

/// The kernel's function for device `dev` (which must be the current
/// context's device: `CUDA_ERROR_INVALID_DEVICE` otherwise).
fn kernel_function_on(kernel: Handle, dev: CUdevice) -> CuResult<Arc<FunctionObj>> {
    let k = lookup_kernel(kernel)?;
    driver::device(dev)?;
    let ctx = context::current()?;
    if ctx.device.ordinal != dev {
        return Err(CuError::CUDA_ERROR_INVALID_DEVICE
            .because(format!("device {dev} is not the current context's device {}", ctx.device.ordinal)));
    }
    kernel_function(&k)
}

/// `cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel
/// kernel, CUdevice dev)`: as `cuFuncGetAttribute` on its function.
///
/// # Safety
/// `pi` is NULL or writable.
pub unsafe fn kernel_get_attribute(pi: *mut c_int, attrib: c_int, kernel: Handle, dev: CUdevice) -> CuResult<()> {
    let f = kernel_function_on(kernel, dev)?;
    // SAFETY: forwarded caller contract.
    unsafe { launch::function_attribute(pi, attrib, &f) }
}

/// `cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel
/// kernel, CUdevice dev)`: as `cuFuncSetAttribute` on its function.
pub fn kernel_set_attribute(attrib: c_int, value: c_int, kernel: Handle, dev: CUdevice) -> CuResult<()> {
    let f = kernel_function_on(kernel, dev)?;
    launch::set_function_attribute(&f, attrib, value)
}

/// `cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice
/// dev)`: checked, nothing to configure.
pub fn kernel_set_cache_config(kernel: Handle, config: c_int, dev: CUdevice) -> CuResult<()> {
    lookup_kernel(kernel)?;
    driver::device(dev)?;
    launch::check_cache_config(config)
}

/// `cuKernelGetParamCount(CUkernel kernel, size_t *paramCount)`.
///
/// # Safety
/// `count` is NULL or writable.
pub unsafe fn kernel_get_param_count(kernel: Handle, count: *mut usize) -> CuResult<()> {
    let k = lookup_kernel(kernel)?;
    let f = kernel_function(&k)?;
    // SAFETY: forwarded caller contract.
    unsafe { launch::param_count(&f, count) }
}

/// `cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t
/// *paramOffset, size_t *paramSize)`.
///
/// # Safety
/// `offset` and `size` are NULL or writable.
pub unsafe fn kernel_get_param_info(
    kernel: Handle,
    index: usize,
    offset: *mut usize,
    size: *mut usize,
) -> CuResult<()> {
    let k = lookup_kernel(kernel)?;
    let f = kernel_function(&k)?;
    // SAFETY: forwarded caller contract.
    unsafe { launch::param_info(&f, index, offset, size) }
}
