//! PTX → Vulkan SPIR-V translator.
//!
//! The pipeline is a flat list of passes (see [`translate`]):
//! `parse` (pest grammar → [`ast`]) → [`tma`] (asynchronous copies → calls
//! of the emulated copy engine) → `lower` (AST → [`ir`], state spaces
//! mapped as the launch ABI in [`abi`] says) → `structurize` (goto CFG →
//! structured regions) → `emit` (rspirv).
#![forbid(unsafe_code)]

pub mod abi;
pub mod ast;
pub mod cfg;
pub mod diag;
mod emit;
pub mod layout;
pub mod parse;
pub mod reducible;
pub mod scope;
pub mod structurize;
pub mod tma;

pub use abi::*;
pub use diag::{Diagnostic, Diagnostics, Span};

/// The Vulkan environment the SPIR-V targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TargetEnv {
    /// Vulkan 1.2: SPIR-V 1.5.
    #[default]
    Vulkan1_2,
    /// Vulkan 1.3: SPIR-V 1.6.
    Vulkan1_3,
}

/// Translation options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Target environment.
    pub target_env: TargetEnv,
    /// Translate only this entry (default: every `.entry`).
    pub entry: Option<String>,
    /// The device's `maxPushConstantsSize`; parameter blocks that do not fit
    /// after the header go to a parameter buffer.
    pub max_push_constant_bytes: u32,
    /// Emulate a correctly rounded fused multiply-add (for drivers whose
    /// `Fma` is not fused, such as lavapipe).
    pub emulate_fma: bool,
    /// The device has `shaderBufferFloat32AtomicAdd`
    /// (`VK_EXT_shader_atomic_float`); otherwise float atomics use
    /// compare-and-swap loops.
    pub float_atomics: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            target_env: TargetEnv::Vulkan1_2,
            entry: None,
            max_push_constant_bytes: 128,
            emulate_fma: true,
            float_atomics: false,
        }
    }
}

/// A translated module.
#[derive(Clone, Debug)]
pub struct Translation {
    /// SPIR-V words.
    pub spirv: Vec<u32>,
    /// Launch metadata.
    pub info: ModuleInfo,
}

/// Translate PTX source text to SPIR-V.
///
/// `file_name` is used only in diagnostics.
pub fn translate(source: &str, file_name: &str, options: &Options) -> Result<Translation, Diagnostics> {
    let mut module = parse::run(source).map_err(|d| Diagnostics::new(file_name, source, d))?;
    tma::run(&mut module).map_err(|d| Diagnostics::new(file_name, source, d))?;
    let (spirv, info) = emit::run(&module, options).map_err(|d| Diagnostics::new(file_name, source, d))?;
    Ok(Translation { spirv, info })
}

/// Check syntax (the grammar and declarations) without lowering.
pub fn check_syntax(source: &str, file_name: &str) -> Result<(), Diagnostics> {
    parse::run(source).map(|_| ()).map_err(|d| Diagnostics::new(file_name, source, d))
}

/// Disassemble SPIR-V words to text (rspirv's disassembler).
pub fn disassemble(words: &[u32]) -> String {
    use rspirv::binary::Disassemble;
    let mut loader = rspirv::dr::Loader::new();
    match rspirv::binary::parse_words(words, &mut loader) {
        Ok(()) => loader.module().disassemble(),
        Err(e) => format!("; cannot disassemble: {e}\n"),
    }
}

/// The structured control flow of every function with a body, as text
/// (one `function NAME` header per function, then its region tree).
pub fn structure_dump(source: &str, file_name: &str) -> Result<String, Diagnostics> {
    let module = parse::run(source).map_err(|d| Diagnostics::new(file_name, source, d))?;
    let mut out = String::new();
    for item in &module.items {
        let ast::ModuleItem::Function(f) = item else { continue };
        let Some(body) = &f.body else { continue };
        let wrap = |d: Diagnostic| Diagnostics::new(file_name, source, vec![d]);
        let mut cfg = cfg::run(body, f.kind == ast::FunctionKind::Func).map_err(wrap)?;
        reducible::run(&mut cfg);
        let span_of = |b: usize| cfg.blocks[b].term_span;
        let regions = structurize::run(&cfg, &span_of).map_err(wrap)?;
        out.push_str(&format!("function {}\n", f.name));
        out.push_str(&structurize::render(&cfg, &regions));
    }
    Ok(out)
}
