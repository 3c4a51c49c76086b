//! Loaded modules ([`Module`]) and their kernels ([`Function`]): the shader
//! module, one pipeline layout per entry, the pipelines
//! built so far, and the module data buffer holding `.global`/`.const` variables.

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use ptxvk_translator::{EntryInfo, ModuleInfo, WarpPath};

use crate::device::Device;
use crate::error::{Error, Result};
use crate::memory::Buffer;
use crate::pipeline::{Pipeline, PipelineKey, PipelineLayout, PipelineSource, ShaderModule};

/// The shared state of a [`Module`].
pub(crate) struct ModuleInner {
    /// Pipelines built so far (dropped first).
    pipelines: Mutex<HashMap<PipelineKey, Arc<Pipeline>>>,
    layouts: Vec<PipelineLayout>,
    /// The shader modules pipelines are built from (see [`Shaders`]).
    shaders: Shaders,
    entry_names: Vec<CString>,
    /// The module data buffer, when the module has variables.
    pub(crate) data: Option<Arc<Buffer>>,
    pub(crate) info: ModuleInfo,
    /// Entries of both `.shared` word widths, and so two `.shared`
    /// variables (see the ABI's "Shared memory variables").
    pub(crate) two_shared_variables: bool,
    pub(crate) device: Arc<Device>,
    /// The warp path the module was translated for.
    pub(crate) warp_path: WarpPath,
    /// Entries that did not translate, with the diagnostic: left out so
    /// that the module's other entries load (as NVIDIA's lazy loading
    /// fails only the kernel that does not compile); getting one fails.
    pub(crate) deferred: Vec<(String, String)>,
    /// The printf FIFO address last written to the module data (see
    /// [`ModuleInfo::printf_offset`]); 0 before the first launch.
    pub(crate) printf_slot: AtomicU64,
    /// The device heap address last written to the module data (see
    /// [`ModuleInfo::heap_offset`]); 0 before the first launch.
    pub(crate) heap_slot: AtomicU64,
    /// The grid workspace address last written to the module data (see
    /// [`ModuleInfo::grid_offset`]); 0 before the first launch and after a
    /// launch that is not cooperative.
    pub(crate) grid_slot: AtomicU64,
    /// The resume area address last written to the module data (see
    /// [`ModuleInfo::resume_offset`]); 0 before the first launch that resumes.
    pub(crate) resume_slot: AtomicU64,
    /// [`ModuleInfo::fault_sites`] and [`ModuleInfo::source_name`], shared
    /// with the context's fault reports.
    pub(crate) fault_sites: (Arc<[ptxvk_translator::abi::fault::FaultSite]>, Arc<str>),
}

impl ModuleInner {
    /// Creates the Vulkan objects of a translated module. `data` is the
    /// already-initialised module data buffer, if any.
    pub(crate) fn new(
        device: &Arc<Device>,
        spirv: &[Vec<u32>],
        info: ModuleInfo,
        data: Option<Arc<Buffer>>,
        warp_path: WarpPath,
    ) -> Result<ModuleInner> {
        let shaders = match spirv {
            // Several entries in one SPIR-V module: each gets a slice.
            [one] if info.entries.len() > 1 => Shaders::Sliced {
                words: one.clone(),
                index: std::sync::OnceLock::new(),
                slices: Mutex::new((0..info.entries.len()).map(|_| None).collect()),
                whole: Mutex::new(None),
            },
            _ => Shaders::Ready(
                spirv.iter().map(|words| ShaderModule::new(device, words).map(Arc::new)).collect::<Result<Vec<_>>>()?,
            ),
        };
        let mut layouts = Vec::with_capacity(info.entries.len());
        let mut entry_names = Vec::with_capacity(info.entries.len());
        for e in &info.entries {
            layouts.push(PipelineLayout::new(device, e.push_constant_bytes)?);
            entry_names.push(
                CString::new(e.name.as_str())
                    .map_err(|_| Error::InvalidValue(format!("entry name {:?} contains a NUL byte", e.name)))?,
            );
        }
        let uses_shared = |e: &&ptxvk_translator::EntryInfo| e.static_shared_bytes > 0 || e.uses_dynamic_shared;
        let mut with_shared = info.entries.iter().filter(uses_shared);
        let two_shared_variables = with_shared.clone().any(|e| e.shared_wide) && with_shared.any(|e| !e.shared_wide);
        let fault_sites = (info.fault_sites.clone().into(), info.source_name.as_str().into());
        Ok(ModuleInner {
            pipelines: Mutex::new(HashMap::new()),
            two_shared_variables,
            layouts,
            shaders,
            entry_names,
            data,
            info,
            device: device.clone(),
            warp_path,
            deferred: Vec::new(),
            printf_slot: AtomicU64::new(0),
            heap_slot: AtomicU64::new(0),
            grid_slot: AtomicU64::new(0),
            resume_slot: AtomicU64::new(0),
            fault_sites,
        })
    }

    /// Device address of the module data buffer (0 when there is none).
    pub(crate) fn data_address(&self) -> u64 {
        self.data.as_ref().map_or(0, |b| b.address)
    }

    /// The pipeline for `key`, built on first use.
    pub(crate) fn pipeline(&self, key: &PipelineKey) -> Result<(Arc<Pipeline>, ash::vk::PipelineLayout)> {
        let layout =
            self.layouts.get(key.entry).ok_or_else(|| Error::InvalidValue("entry index out of range".into()))?;
        let mut map = self.pipelines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = map.get(key) {
            return Ok((p.clone(), layout.raw));
        }
        let shader = self.shader(key.entry)?;
        let src = PipelineSource {
            shader: &shader,
            layout,
            entry_name: &self.entry_names[key.entry],
            warp_path: self.warp_path,
        };
        let trace = crate::instance::trace_level();
        let name = self.entry_names[key.entry].to_string_lossy();
        if trace >= 2 {
            eprintln!("ptxvk: compiling the pipeline of {name} ({} bytes of SPIR-V)", shader.bytes);
        }
        let started = std::time::Instant::now();
        let p = Arc::new(Pipeline::new(&self.device, &src, key)?);
        let took = started.elapsed().as_secs_f64();
        if trace >= 2 || (trace >= 1 && took > 1.0) {
            eprintln!("ptxvk: compiled the pipeline of {name} in {took:.1} s");
        }
        map.insert(*key, p.clone());
        drop(map);
        self.device.save_pipeline_cache(false);
        Ok((p, layout.raw))
    }

    /// The shader module that entry `entry`'s pipelines are built from.
    fn shader(&self, entry: usize) -> Result<Arc<ShaderModule>> {
        match &self.shaders {
            Shaders::Ready(all) => {
                all.get(entry).or(all.first()).cloned().ok_or_else(|| Error::InvalidValue("no shader module".into()))
            }
            Shaders::Sliced { words, index, slices, whole } => {
                let mut slices = slices.lock().unwrap_or_else(|p| p.into_inner());
                let slot =
                    slices.get_mut(entry).ok_or_else(|| Error::InvalidValue("entry index out of range".into()))?;
                if let Some(s) = slot {
                    return Ok(s.clone());
                }
                let name = &self.info.entries[entry].name;
                let index = index.get_or_init(|| ptxvk_translator::entry_slice::Index::new(words));
                let shader = match index.as_ref().and_then(|i| i.slice(words, name)) {
                    Some(slice) => {
                        if std::env::var(crate::instance::SPIRV_VAL_ENV).is_ok_and(|v| v == "1") {
                            crate::context::spirv_val(&slice, self.device.info.target_env, name)?;
                        }
                        Arc::new(ShaderModule::new(&self.device, &slice)?)
                    }
                    // A module the slicing does not read: the whole one.
                    None => {
                        let mut whole = whole.lock().unwrap_or_else(|p| p.into_inner());
                        match &*whole {
                            Some(w) => w.clone(),
                            None => whole.insert(Arc::new(ShaderModule::new(&self.device, words)?)).clone(),
                        }
                    }
                };
                *slot = Some(shader.clone());
                Ok(shader)
            }
        }
    }
}

/// A module's shader modules.
enum Shaders {
    /// One for all entries (a module of one entry), or one per entry (a
    /// module over SPIR-V's id limit, split by `Context::load_module`).
    Ready(Vec<Arc<ShaderModule>>),
    /// One SPIR-V module for several entries: each entry's pipelines are
    /// built from a module of that entry and the functions it calls
    /// ([`ptxvk_translator::entry_slice`]), made at its first pipeline, so
    /// that the driver does not read every other entry's code for each
    /// pipeline (lavapipe: 0.2 s a pipeline in a 71 MB module of NVIDIA
    /// Warp's). Where slicing does not apply, the whole module.
    Sliced {
        words: Vec<u32>,
        /// Where its functions are, found at the first slice.
        index: std::sync::OnceLock<Option<ptxvk_translator::entry_slice::Index>>,
        slices: Mutex<Vec<Option<Arc<ShaderModule>>>>,
        whole: Mutex<Option<Arc<ShaderModule>>>,
    },
}

/// A loaded PTX module. Cheap to clone; the Vulkan objects live until the last
/// clone (and the last batch using it) is gone.
#[derive(Clone)]
pub struct Module(pub(crate) Arc<ModuleInner>);

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module").field("entries", &self.entry_names()).finish_non_exhaustive()
    }
}

impl Module {
    /// The kernel named `name` (a `.entry`).
    pub fn function(&self, name: &str) -> Option<Function> {
        let index = self.0.info.entries.iter().position(|e| e.name == name)?;
        Some(Function { module: self.0.clone(), index })
    }

    /// `(device address, size)` of the module-scope `.global` or `.const` variable `name`.
    pub fn global(&self, name: &str) -> Option<(u64, u64)> {
        let g = self.0.info.globals.iter().find(|g| g.name == name)?;
        Some((self.0.data_address() + g.offset, g.size))
    }

    /// How many SPIR-V modules the module became: 1, or one per entry for a
    /// module over SPIR-V's id limit.
    pub fn spirv_module_count(&self) -> usize {
        match &self.0.shaders {
            Shaders::Ready(all) => all.len(),
            Shaders::Sliced { .. } => 1,
        }
    }

    /// The bytes of SPIR-V the pipelines of entry `name` are built from,
    /// once one was: a slice of the module for an entry of a module with
    /// several (see [`ptxvk_translator::entry_slice`]), else the module
    /// (or the entry's own module, when split). `None` before its first
    /// pipeline.
    pub fn entry_spirv_bytes(&self, name: &str) -> Option<usize> {
        let index = self.0.info.entries.iter().position(|e| e.name == name)?;
        match &self.0.shaders {
            Shaders::Ready(all) => all.get(index).or(all.first()).map(|s| s.bytes),
            Shaders::Sliced { slices, .. } => {
                let slices = slices.lock().unwrap_or_else(|p| p.into_inner());
                slices.get(index)?.as_ref().map(|s| s.bytes)
            }
        }
    }

    /// The bytes of SPIR-V of the whole module (all its SPIR-V modules).
    pub fn spirv_bytes(&self) -> usize {
        match &self.0.shaders {
            Shaders::Ready(all) => all.iter().map(|s| s.bytes).sum(),
            Shaders::Sliced { words, .. } => words.len() * 4,
        }
    }

    /// The translator's launch metadata.
    pub fn info(&self) -> &ModuleInfo {
        &self.0.info
    }

    /// The warp path the module was translated for.
    pub fn warp_path(&self) -> WarpPath {
        self.0.warp_path
    }

    /// Names of the entries, in PTX order.
    pub fn entry_names(&self) -> Vec<String> {
        let deferred = self.0.deferred.iter().map(|(n, _)| n.clone());
        self.0.info.entries.iter().map(|e| e.name.clone()).chain(deferred).collect()
    }

    /// The diagnostic of entry `name` when it did not translate (the
    /// module loaded without it; [`Module::function`] gives `None`).
    pub fn deferred_error(&self, name: &str) -> Option<&str> {
        self.0.deferred.iter().find(|(n, _)| n == name).map(|(_, d)| d.as_str())
    }
}

/// A kernel of a loaded [`Module`]; keeps the module alive.
#[derive(Clone)]
pub struct Function {
    pub(crate) module: Arc<ModuleInner>,
    pub(crate) index: usize,
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function").field("name", &self.name()).finish_non_exhaustive()
    }
}

impl Function {
    /// The entry's launch metadata (parameter layout, shared memory, ...).
    pub fn info(&self) -> &EntryInfo {
        &self.module.info.entries[self.index]
    }

    /// The PTX name of the entry.
    pub fn name(&self) -> &str {
        &self.info().name
    }

    /// The module this kernel belongs to.
    pub fn module(&self) -> Module {
        Module(self.module.clone())
    }

    /// Packs CUDA-style kernel arguments (one byte slice per parameter, each
    /// exactly the parameter's size) into the parameter block
    /// [`crate::Context::launch`] takes.
    pub fn pack_params(&self, args: &[&[u8]]) -> Result<Vec<u8>> {
        let info = self.info();
        if args.len() != info.params.len() {
            return Err(Error::InvalidValue(format!(
                "{} takes {} parameters, got {}",
                info.name,
                info.params.len(),
                args.len()
            )));
        }
        let mut block = vec![0u8; info.param_bytes as usize];
        for (p, a) in info.params.iter().zip(args) {
            if a.len() != p.size as usize {
                return Err(Error::InvalidValue(format!(
                    "parameter {} of {} is {} bytes, got {}",
                    p.name,
                    info.name,
                    p.size,
                    a.len()
                )));
            }
            let start = p.offset as usize;
            let slot = block
                .get_mut(start..start + a.len())
                .ok_or_else(|| Error::InvalidValue(format!("parameter {} lies outside the parameter block", p.name)))?;
            slot.copy_from_slice(a);
        }
        Ok(block)
    }
}
