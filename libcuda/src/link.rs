//! The JIT linker: `cuLinkCreate`, `cuLinkAddData`, `cuLinkAddFile`,
//! `cuLinkComplete`, `cuLinkDestroy`.
//!
//! NVIDIA's device runtime library (`libcudadevrt.a`, see
//! [`is_device_runtime`]) is accepted and adds nothing.
//!
//! Inputs are PTX (or fat binaries carrying PTX). The "cubin" that
//! `cuLinkComplete` hands back is PTX text again: the inputs merged into one
//! module (the `.version`/`.target`/`.address_size` header of the input
//! with the newest `.version`,
//! every input's body, and no `.extern` declaration of a function or
//! variable another input defines; where such a declaration's return list
//! disagrees with the definition, see `Adapter`). It is translated right away, so errors
//! reach the link's error log, and the translation is kept for the
//! `cuModuleLoadData`/`cuLibraryLoadData` that loads the result. Cubins, ELF
//! objects and other libraries cannot be linked here: `CUDA_ERROR_INVALID_IMAGE`,
//! with the reason in the error log.

use std::collections::BTreeSet;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::context::{self, ContextObj};
use crate::driver;
use crate::fatbin;
use crate::ffi::{bytes, c_str, write_out, Handle};
use crate::handles::Registry;
use crate::jit::JitOptions;
use crate::module;
use crate::result::{CuError, CuResult};

/// `CUjitInputType`: `CU_JIT_INPUT_CUBIN`.
pub const CU_JIT_INPUT_CUBIN: c_int = 0;
/// `CU_JIT_INPUT_PTX`.
pub const CU_JIT_INPUT_PTX: c_int = 1;
/// `CU_JIT_INPUT_FATBINARY`.
pub const CU_JIT_INPUT_FATBINARY: c_int = 2;
/// `CU_JIT_INPUT_OBJECT`.
pub const CU_JIT_INPUT_OBJECT: c_int = 3;
/// `CU_JIT_INPUT_LIBRARY`.
pub const CU_JIT_INPUT_LIBRARY: c_int = 4;
/// `CU_JIT_INPUT_NVVM`.
pub const CU_JIT_INPUT_NVVM: c_int = 5;

/// A `CUlinkState`.
pub struct LinkObj {
    context: Arc<ContextObj>,
    jit: SendJit,
    state: Mutex<LinkState>,
}

/// The link's options: the log buffers stay the caller's until `cuLinkDestroy`.
struct SendJit(JitOptions);

// SAFETY: the raw pointers inside are the caller's log buffers and option
// slots, which the driver API documents as owned by the link state until
// `cuLinkDestroy`; they are only written under the link's state mutex
// (every use below holds it), so no two threads write them at once.
unsafe impl Send for SendJit {}
// SAFETY: as above.
unsafe impl Sync for SendJit {}

#[derive(Default)]
struct LinkState {
    /// (name, PTX text) of each input.
    inputs: Vec<(String, String)>,
    /// The merged PTX, NUL-terminated, once complete.
    output: Option<Vec<u8>>,
    info: String,
    started: Option<Instant>,
}

/// Live link states.
pub static LINKS: Registry<LinkObj> = Registry::new();

fn lookup(state: Handle) -> CuResult<Arc<LinkObj>> {
    driver::driver()?;
    LINKS
        .get(state)
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_HANDLE.because(format!("{state:p} is not a live link state")))
}

/// `cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options, void
/// **optionValues, CUlinkState *stateOut)`.
///
/// # Safety
/// As [`JitOptions::parse`]; the option arrays and log buffers stay valid
/// until `cuLinkDestroy`; `state_out` is NULL or writable.
pub unsafe fn link_create(
    num_options: c_uint,
    options: *const c_int,
    values: *mut *mut c_void,
    state_out: *mut Handle,
) -> CuResult<()> {
    let context = context::current()?;
    if state_out.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("stateOut is NULL"));
    }
    // SAFETY: forwarded caller contract.
    let jit = unsafe { JitOptions::parse(num_options, options, values) }?;
    let state = LinkState { started: Some(Instant::now()), ..Default::default() };
    let handle = LINKS.insert(Arc::new(LinkObj { context, jit: SendJit(jit), state: Mutex::new(state) }));
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(state_out, handle) }
}

impl LinkObj {
    fn lock(&self) -> std::sync::MutexGuard<'_, LinkState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a failure in the error log and returns `err`.
    fn fail(&self, st: &LinkState, err: CuError, log: &str) -> CuError {
        let ms = st.started.map_or(0.0, |s| s.elapsed().as_secs_f32() * 1000.0);
        // SAFETY: the buffers are valid until cuLinkDestroy (cuLinkCreate's
        // contract) and the state lock is held.
        unsafe { self.jit.0.finish(log, &st.info, ms) };
        err.because(log.to_string())
    }

    /// Adds one input's bytes.
    fn add(&self, kind: c_int, data: &[u8], name: &str) -> CuResult<()> {
        let mut st = self.lock();
        if st.output.is_some() {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("the link has already been completed"));
        }
        let only_ptx = "this driver (ptxvk) links PTX only (it translates PTX to SPIR-V for Vulkan); \
                        NVIDIA machine code cannot run here";
        let text = match kind {
            CU_JIT_INPUT_PTX => {
                let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
                match std::str::from_utf8(&data[..end]) {
                    Ok(t) => t.to_string(),
                    Err(e) => {
                        let log = format!("{name}: error: PTX input is not UTF-8 text ({e})");
                        return Err(self.fail(&st, CuError::CUDA_ERROR_INVALID_PTX, &log));
                    }
                }
            }
            CU_JIT_INPUT_FATBINARY => {
                let sm = driver::sm_version()?;
                match fatbin::select_ptx(data, sm) {
                    Ok(p) => String::from_utf8_lossy(&p).into_owned(),
                    Err(why) => {
                        let log = format!("{name}: error: {why}; {only_ptx}");
                        return Err(self.fail(&st, CuError::CUDA_ERROR_INVALID_IMAGE, &log));
                    }
                }
            }
            CU_JIT_INPUT_LIBRARY if is_device_runtime(data) => {
                // Its entry points that kernels may call are the translator's
                // own system calls; nothing to add.
                st.info.push_str(&format!(
                    "info: {name}: NVIDIA's device runtime; its grid-sync calls are translated directly, nothing \
                     linked\n"
                ));
                return Ok(());
            }
            CU_JIT_INPUT_CUBIN | CU_JIT_INPUT_OBJECT | CU_JIT_INPUT_LIBRARY => {
                let what = match kind {
                    CU_JIT_INPUT_CUBIN => "a cubin (ELF)",
                    CU_JIT_INPUT_OBJECT => "a relocatable object (ELF)",
                    _ => "a library archive of cubins",
                };
                let log = format!(
                    "{name}: error: input is {what}; {only_ptx}. Give the linker PTX instead \
                     (numba: uninstall nvidia-nvjitlink / pynvjitlink so it hands over PTX)"
                );
                return Err(self.fail(&st, CuError::CUDA_ERROR_INVALID_IMAGE, &log));
            }
            CU_JIT_INPUT_NVVM => {
                let log = format!("{name}: error: NVVM IR inputs are not supported; {only_ptx}");
                return Err(self.fail(&st, CuError::CUDA_ERROR_NOT_SUPPORTED, &log));
            }
            other => {
                return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown CUjitInputType {other}")));
            }
        };
        st.inputs.push((name.to_string(), text));
        Ok(())
    }
}

/// `cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data,
/// size_t size, const char *name, unsigned int numOptions, CUjit_option
/// *options, void **optionValues)`: the per-input options are accepted and
/// ignored.
///
/// # Safety
/// `data` is NULL or readable for `size` bytes; `name` is NULL or
/// NUL-terminated.
#[allow(clippy::too_many_arguments)]
pub unsafe fn link_add_data(
    state: Handle,
    kind: c_int,
    data: *mut c_void,
    size: usize,
    name: *const c_char,
    _num_options: c_uint,
    _options: *const c_int,
    _values: *mut *mut c_void,
) -> CuResult<()> {
    let link = lookup(state)?;
    if data.is_null() || size == 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("data is NULL or size is 0"));
    }
    // SAFETY: readable for `size` bytes per the caller.
    let data = unsafe { bytes(data, size) }?;
    let name = if name.is_null() {
        "<input>".to_string()
    } else {
        // SAFETY: NUL-terminated per the caller.
        unsafe { c_str(name) }?.to_string()
    };
    link.add(kind, data, &name)
}

/// `cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char
/// *path, unsigned int numOptions, CUjit_option *options, void
/// **optionValues)`: `CUDA_ERROR_FILE_NOT_FOUND` if the file cannot be read.
///
/// # Safety
/// `path` is NULL or NUL-terminated.
pub unsafe fn link_add_file(
    state: Handle,
    kind: c_int,
    path: *const c_char,
    _num_options: c_uint,
    _options: *const c_int,
    _values: *mut *mut c_void,
) -> CuResult<()> {
    let link = lookup(state)?;
    // SAFETY: NUL-terminated per the caller.
    let path = unsafe { c_str(path) }?;
    let data = std::fs::read(path)
        .map_err(|e| CuError::CUDA_ERROR_FILE_NOT_FOUND.because(format!("cannot read {path}: {e}")))?;
    link.add(kind, &data, path)
}

/// Member name of NVIDIA's device runtime object.
const DEVICE_RUNTIME_MEMBER: &str = "cuda_device_runtime.o";

/// Whether `data` is NVIDIA's device runtime library, `libcudadevrt.a`: a
/// Unix `ar` archive whose only member is `cuda_device_runtime.o` (besides
/// the archive's symbol and long-name tables). numba-cuda links it into every
/// kernel that synchronises its grid (for `cudaCGGetIntrinsicHandle` and
/// `cudaCGSynchronize`); the translator provides those calls itself, so the
/// linker accepts this archive and adds nothing. Any other archive is NVIDIA
/// machine code that cannot run here.
pub fn is_device_runtime(data: &[u8]) -> bool {
    let Some(mut rest) = data.strip_prefix(b"!<arch>\n") else {
        return false;
    };
    let mut long_names: &[u8] = &[];
    let mut members = 0;
    while !rest.is_empty() {
        if rest.len() < 60 || &rest[58..60] != b"`\n" {
            return false;
        }
        let name = &rest[..16];
        let Some(size) = std::str::from_utf8(&rest[48..58]).ok().and_then(|t| t.trim().parse::<usize>().ok()) else {
            return false;
        };
        let Some(body) = rest.get(60..60 + size) else {
            return false;
        };
        let name = String::from_utf8_lossy(name).trim_end().to_string();
        if name == "//" {
            long_names = body;
        } else if name != "/" && name != "/SYM64/" {
            // GNU names end with '/'; long ones are "/offset" into the "//" table.
            let full = match name.strip_prefix('/').and_then(|o| o.parse::<usize>().ok()) {
                Some(off) => {
                    let tail = long_names.get(off..).unwrap_or(&[]);
                    let end = tail.iter().position(|&b| b == b'\n').unwrap_or(tail.len());
                    String::from_utf8_lossy(&tail[..end]).to_string()
                }
                None => name.clone(),
            };
            if full.trim_end_matches('/') != DEVICE_RUNTIME_MEMBER {
                return false;
            }
            members += 1;
        }
        // Members are 2-byte aligned.
        let next = (60 + size + 1) & !1;
        rest = rest.get(next..).unwrap_or(&[]);
    }
    members > 0
}

/// Names a PTX body defines at module scope (functions and variables),
/// from the lines that declare them without `.extern`.
fn defined_names(ptx: &str) -> BTreeSet<String> {
    ptx.lines().filter(|l| !l.trim_start().starts_with(".extern")).filter_map(declared_name).collect()
}

/// The name a module-scope declaration line declares (`.entry`, `.func`,
/// `.global`, `.const`, `.shared`), if it is one.
fn declared_name(line: &str) -> Option<String> {
    let t = line.trim_start();
    if !t.starts_with('.') {
        return None;
    }
    let words: Vec<&str> = t.split_whitespace().collect();
    let kw = words.iter().position(|w| matches!(*w, ".entry" | ".func" | ".global" | ".const" | ".shared"))?;
    let rest = words[kw + 1..].join(" ");
    // `.func (.param .b32 r) name(` has a return list first.
    let rest = if rest.starts_with('(') {
        let close = rest.find(')')?;
        rest[close + 1..].trim_start().to_string()
    } else {
        rest
    };
    // For variables the name is the last word before `[`, `=` or `;`.
    let head: &str = rest.split(['(', '[', '=', ';']).next()?.trim();
    let name = head.split_whitespace().last()?;
    (!name.is_empty() && !name.starts_with('.')).then(|| name.to_string())
}

/// Whether `line` starts a module header directive.
fn is_header(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with(".version") || t.starts_with(".target") || t.starts_with(".address_size")
}

/// `.version` of a PTX text as (major, minor); (0, 0) if absent.
fn version_of(text: &str) -> (u32, u32) {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix(".version"))
        .and_then(|v| {
            let (a, b) = v.trim().split_once('.')?;
            let b: String = b.chars().take_while(char::is_ascii_digit).collect();
            Some((a.trim().parse().ok()?, b.parse().ok()?))
        })
        .unwrap_or((0, 0))
}

/// Merges the inputs into one PTX module (see the module docs): the header
/// of the input with the newest `.version`, then every body.
pub fn merge(inputs: &[(String, String)]) -> String {
    if inputs.len() == 1 {
        return inputs[0].1.clone();
    }
    let newest = (0..inputs.len()).max_by_key(|&i| version_of(&inputs[i].1)).unwrap_or(0);
    let defined: Vec<BTreeSet<String>> = inputs.iter().map(|(_, t)| defined_names(t)).collect();
    let mut out = String::new();
    for line in inputs[newest].1.lines().filter(|l| is_header(l)) {
        out.push_str(line.trim());
        out.push('\n');
    }
    for (i, (name, text)) in inputs.iter().enumerate() {
        out.push_str(&format!("// ---- {name}\n"));
        let mut body = String::new();
        let mut adapters = Vec::new();
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            if is_header(line) {
                continue;
            }
            if line.trim_start().starts_with(".extern") {
                let owner = declared_name(line).and_then(|n| {
                    let j = defined.iter().enumerate().position(|(j, names)| j != i && names.contains(&n))?;
                    Some((n, j))
                });
                if let Some((func, j)) = owner {
                    // Skip the whole declaration, which may span lines up to `;`.
                    let mut decl = line.to_string();
                    let mut cur = line.to_string();
                    while !cur.contains(';') {
                        match lines.next() {
                            Some(l) => {
                                decl.push('\n');
                                decl.push_str(l);
                                cur = l.to_string();
                            }
                            None => break,
                        }
                    }
                    adapters.extend(Adapter::new(&func, &decl, &inputs[j].1, i));
                    continue;
                }
            }
            body.push_str(line);
            body.push('\n');
        }
        for a in &adapters {
            body = rename_symbol(&body, &a.func, &a.name);
        }
        for a in &adapters {
            out.push_str(&a.text);
        }
        out.push_str(&body);
    }
    out
}

/// A function that stands between the calls of one input and a `.func`
/// another input defines with a different return list: separately
/// compiled modules are linked by symbol on NVIDIA's side, where nothing
/// compares the caller's declaration with the callee, while the merged PTX
/// is one module whose calls must match. numba-cuda, for one, declares C-ABI
/// functions returning `void` as `.extern .func (.param .b64 func_retval0)
/// f(...)`. The adapter has the caller's declared signature, passes its
/// parameters on, and leaves a return value the callee does not produce
/// unwritten (undefined, as it is on NVIDIA's hardware); a return value the
/// caller does not expect is dropped. Declarations that differ in their
/// parameters are left to the translator, which reports the mismatch.
struct Adapter {
    /// The callee's name.
    func: String,
    /// The adapter's name (the caller's calls are renamed to it).
    name: String,
    /// Its PTX definition.
    text: String,
}

impl Adapter {
    /// An adapter for input `input`'s declaration `decl` of `func`, which
    /// `definer` (another input's text) defines, or `None` when the return
    /// lists agree or the declaration is not one of a `.func`.
    fn new(func: &str, decl: &str, definer: &str, input: usize) -> Option<Adapter> {
        let (decl_rets, decl_params) = signature(decl, func)?;
        let def = definition_header(definer, func)?;
        let (def_rets, _) = signature(&def, func)?;
        if decl_rets.is_empty() == def_rets.is_empty() {
            return None;
        }
        let name = format!("{func}_ptxvk_link{input}");
        let formal = |d: &str| -> Option<String> {
            let head = d.split('[').next()?.trim();
            head.split_whitespace().last().map(str::to_string)
        };
        let args: Vec<String> = decl_params.iter().map(|d| formal(d)).collect::<Option<_>>()?;
        let mut text = String::new();
        text.push_str(&format!("// ptxvk: '{func}' as input {input} declares it\n"));
        let rets = if decl_rets.is_empty() { String::new() } else { format!(" ({})", decl_rets.join(", ")) };
        text.push_str(&format!(".func{rets} {name}({})\n{{\n", decl_params.join(", ")));
        if def_rets.is_empty() {
            text.push_str(&format!("\tcall.uni {func}, ({});\n", args.join(", ")));
        } else {
            let mut outs = Vec::new();
            for (k, d) in def_rets.iter().enumerate() {
                let n = format!("__ptxvk_ret{k}");
                let ty = d.rsplit_once(char::is_whitespace).map_or(d.as_str(), |(t, _)| t).trim();
                text.push_str(&format!("\t{ty} {n};\n"));
                outs.push(n);
            }
            text.push_str(&format!("\tcall.uni ({}), {func}, ({});\n", outs.join(", "), args.join(", ")));
        }
        text.push_str("\tret;\n}\n");
        Some(Adapter { func: func.to_string(), name, text })
    }
}

/// The return and parameter declarations (`.param .b32 x`, ...) of a
/// `.func` header naming `func`; `None` if it is no `.func` or unbalanced.
fn signature(header: &str, func: &str) -> Option<(Vec<String>, Vec<String>)> {
    let at = header.find(".func")?;
    let rest = header[at + ".func".len()..].trim_start();
    let (rets, rest) = if let Some(r) = rest.strip_prefix('(') {
        let close = r.find(')')?;
        (split_list(&r[..close]), r[close + 1..].trim_start())
    } else {
        (Vec::new(), rest)
    };
    let rest = rest.strip_prefix(func)?;
    if rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
        return None;
    }
    let rest = rest.trim_start();
    let params = match rest.strip_prefix('(') {
        Some(r) => split_list(&r[..r.find(')')?]),
        None => Vec::new(),
    };
    Some((rets, params))
}

fn split_list(s: &str) -> Vec<String> {
    s.split(',').map(|p| p.split_whitespace().collect::<Vec<_>>().join(" ")).filter(|p| !p.is_empty()).collect()
}

/// The header (up to the body's `{`) of `func`'s `.func` definition in `ptx`.
fn definition_header(ptx: &str, func: &str) -> Option<String> {
    let mut from = 0;
    while let Some(at) = ptx[from..].find(".func") {
        let start = from + at;
        let line_start = ptx[..start].rfind('\n').map_or(0, |n| n + 1);
        let end = start + ptx[start..].find(['{', ';'])?;
        let header = &ptx[line_start..end];
        if !header.trim_start().starts_with(".extern") && ptx[end..].starts_with('{') {
            if let Some((_, _)) = signature(header, func) {
                return Some(header.to_string());
            }
        }
        from = end;
    }
    None
}

/// `text` with every whole-identifier occurrence of `from` replaced by `to`
/// (PTX identifiers are `[A-Za-z0-9_$%]` runs).
fn rename_symbol(text: &str, from: &str, to: &str) -> String {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == '%';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(from) {
        let before = rest[..at].chars().next_back();
        let after = rest[at + from.len()..].chars().next();
        out.push_str(&rest[..at]);
        if before.is_some_and(ident) || after.is_some_and(ident) {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = &rest[at + from.len()..];
    }
    out.push_str(rest);
    out
}

/// `cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)`:
/// the output (merged PTX, NUL-terminated) lives until `cuLinkDestroy`.
///
/// # Safety
/// `cubin_out` and `size_out` are NULL or writable.
pub unsafe fn link_complete(state: Handle, cubin_out: *mut *mut c_void, size_out: *mut usize) -> CuResult<()> {
    let link = lookup(state)?;
    if cubin_out.is_null() || size_out.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("cubinOut or sizeOut is NULL"));
    }
    let mut st = link.lock();
    if st.output.is_none() {
        if st.inputs.is_empty() {
            let err = link.fail(&st, CuError::CUDA_ERROR_INVALID_VALUE, "error: nothing to link (no inputs added)");
            return Err(err);
        }
        let merged = merge(&st.inputs);
        let name = if st.inputs.len() == 1 { st.inputs[0].0.clone() } else { "<linked ptx>".to_string() };
        let started = Instant::now();
        match module::pretranslate(&link.context, &merged, &name) {
            Ok(()) => {}
            Err((code, log)) => return Err(link.fail(&st, code, &log)),
        }
        let line = format!(
            "ptxvk: linked {} PTX input(s); translated to SPIR-V in {:.3} ms",
            st.inputs.len(),
            started.elapsed().as_secs_f32() * 1000.0
        );
        st.info += &line;
        let mut bytes = merged.into_bytes();
        bytes.push(0);
        st.output = Some(bytes);
    }
    let ms = st.started.map_or(0.0, |s| s.elapsed().as_secs_f32() * 1000.0);
    // SAFETY: the buffers are valid until cuLinkDestroy; the lock is held.
    unsafe { link.jit.0.finish("", &st.info, ms) };
    let out = st.output.as_ref().map(|o| (o.as_ptr(), o.len())).unwrap_or((std::ptr::null(), 0));
    // SAFETY: both checked non-null; writable per the caller. The output
    // buffer is owned by the link state and is not moved until it is dropped.
    unsafe {
        write_out(cubin_out, out.0 as *mut c_void)?;
        write_out(size_out, out.1)
    }
}

/// `cuLinkDestroy(CUlinkState state)`.
pub fn link_destroy(state: Handle) -> CuResult<()> {
    driver::driver()?;
    LINKS
        .remove(state)
        .map(|_| ())
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_HANDLE.because(format!("{state:p} is not a live link state")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GNU `ar` archive: a symbol table, a long-name table, then members.
    fn archive(members: &[&str]) -> Vec<u8> {
        fn header(name: &str, size: usize) -> Vec<u8> {
            format!("{name:<16}{:<12}{:<6}{:<6}{:<8}{size:<10}`\n", 0, 0, 0, 644).into_bytes()
        }
        let mut out = b"!<arch>\n".to_vec();
        let symbols = b"\0\0\0\0";
        out.extend(header("/", symbols.len()));
        out.extend(symbols);
        let names: String = members.iter().map(|m| format!("{m}/\n")).collect();
        out.extend(header("//", names.len()));
        out.extend(names.as_bytes());
        if names.len() % 2 == 1 {
            out.push(b'\n');
        }
        let mut offset = 0;
        for m in members {
            let body = b"\x7fELF-ish";
            out.extend(header(&format!("/{offset}"), body.len()));
            out.extend(body);
            if body.len() % 2 == 1 {
                out.push(b'\n');
            }
            offset += m.len() + 2;
        }
        out
    }

    #[test]
    fn device_runtime_archive() {
        assert!(is_device_runtime(&archive(&["cuda_device_runtime.o"])));
        assert!(!is_device_runtime(&archive(&["cuda_device_runtime.o", "kernels.o"])));
        assert!(!is_device_runtime(&archive(&["libfoo_device.o"])));
        assert!(!is_device_runtime(&archive(&[])));
        assert!(!is_device_runtime(b"\x7fELF"));
        let mut cut = archive(&["cuda_device_runtime.o"]);
        cut.truncate(cut.len() - 3);
        assert!(!is_device_runtime(&cut));
    }

    #[test]
    fn declared_names() {
        assert_eq!(declared_name(".visible .entry k("), Some("k".into()));
        assert_eq!(declared_name(".extern .func (.param .b32 r) f("), Some("f".into()));
        assert_eq!(declared_name(".visible .func g(.param .u64 a)"), Some("g".into()));
        assert_eq!(declared_name(".global .align 4 .u32 counter = 0;"), Some("counter".into()));
        assert_eq!(declared_name(".global .align 1 .b8 buf[16];"), Some("buf".into()));
        assert_eq!(declared_name("\tadd.s32 %r1, %r2, %r3;"), None);
    }

    #[test]
    fn merges_inputs() {
        let a = ".version 8.0\n.target sm_80\n.address_size 64\n.extern .func (.param .b32 r) f\n(\n.param .b32 x\n);\n.visible .entry k()\n{\nret;\n}\n";
        let b = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .func (.param .b32 r) f(.param .b32 x)\n{\nret;\n}\n";
        let m = merge(&[("a".into(), a.into()), ("b".into(), b.into())]);
        assert_eq!(m.matches(".version").count(), 1, "{m}");
        assert!(!m.contains(".extern"), "{m}");
        assert!(m.contains(".visible .entry k()") && m.contains(".visible .func (.param .b32 r) f("));
        assert_eq!(merge(&[("a".into(), a.into())]), a);
    }

    #[test]
    fn adapts_return_lists() {
        // numba-cuda's declaration of a C-ABI `void consume(int)`.
        let a = ".version 8.0\n.target sm_80\n.address_size 64\n.extern .func  (.param .b64 func_retval0) consume\n(\n\t.param .b32 consume_param_0\n)\n;\n.visible .entry k()\n{\n\t.param .b32 param0;\n\t.param .b64 retval0;\n\tcall.uni (retval0), \n\tconsume, \n\t(\n\tparam0\n\t);\n\tret;\n}\n";
        let b = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .func consume(\n\t.param .b32 consume_param_0\n)\n{\n\tret;\n}\n";
        let m = merge(&[("a".into(), a.into()), ("b".into(), b.into())]);
        assert!(!m.contains(".extern"), "{m}");
        assert!(m.contains(".func (.param .b64 func_retval0) consume_ptxvk_link0(.param .b32 consume_param_0)"), "{m}");
        assert!(m.contains("call.uni consume, (consume_param_0);"), "{m}");
        assert!(m.contains("\tconsume_ptxvk_link0, \n") && m.contains(".visible .func consume(\n"), "{m}");
        // Matching return lists: no adapter.
        let c = b.replace(".func consume(", ".func (.param .b64 r) consume(");
        let m = merge(&[("a".into(), a.into()), ("c".into(), c)]);
        assert!(!m.contains("ptxvk_link"), "{m}");
        // The other way round: the caller expects nothing, the callee returns a value.
        let d = a.replace("(.param .b64 func_retval0) consume", "consume").replace("call.uni (retval0), ", "call.uni ");
        let e = b.replace(".func consume(", ".func (.param .b32 r) consume(");
        let m = merge(&[("d".into(), d), ("e".into(), e)]);
        assert!(m.contains(".func consume_ptxvk_link0(.param .b32 consume_param_0)"), "{m}");
        assert!(
            m.contains("\t.param .b32 __ptxvk_ret0;\n\tcall.uni (__ptxvk_ret0), consume, (consume_param_0);"),
            "{m}"
        );
        assert_eq!(rename_symbol("f(f_x, %f, f);", "f", "g"), "g(f_x, %f, g);");
    }
}
