//! `ptxas` stand-in for clients that assemble PTX themselves and hand the
//! driver the result (Triton's launcher loads whatever its `ptxas` wrote).
//! Point the client at it (`TRITON_PTXAS_PATH=target/release/ptxas`, and
//! `TRITON_PTXAS_BLACKWELL_PATH` for sm_90 and newer); it
//!
//! - answers `--version` like NVIDIA's ptxas 12.9 (clients pick the PTX ISA
//!   version they emit from it);
//! - translates the input with ptxvk's translator, so a kernel ptxvk cannot
//!   run fails here, with ptxas-style diagnostics and exit status 255, as
//!   with NVIDIA's assembler;
//! - writes the PTX itself as the "cubin", behind a first line
//!   (`ptxvk_translator::PTXAS_STANDIN_MARK`) that records the options that
//!   change results (`--fmad=false`); ptxvk's `libcuda.so.1` loads it as PTX
//!   and honours them.
//!
//! Other options (`-v`, `-lineinfo`, `--opt-level`, `--regAllocOptLevel`,
//! `--maxrregcount`, ...) are accepted and have no effect.

use ptxvk_translator::{Options, PTXAS_STANDIN_MARK};
use std::process::ExitCode;

const VERSION: &str = "ptxas: NVIDIA (R) Ptx optimizing assembler\n\
Copyright (c) 2005-2025 NVIDIA Corporation\n\
Built on Tue_May_27_02:18:05_PDT_2025\n\
Cuda compilation tools, release 12.9, V12.9.86\n\
Build cuda_12.9.r12.9/ptxvk (ptxvk stand-in: writes PTX for ptxvk's libcuda.so.1)\n";

/// Options that take their value as the next argument.
const WITH_VALUE: [&str; 12] = [
    "-o",
    "--output-file",
    "-arch",
    "--gpu-name",
    "--opt-level",
    "-O",
    "--maxrregcount",
    "-maxrregcount",
    "--entry",
    "-e",
    "--regAllocOptLevel",
    "-m",
];

struct Args {
    input: Option<String>,
    output: Option<String>,
    fmad: bool,
    version: bool,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut a = Args { input: None, output: None, fmad: true, version: false };
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with('-') => (n, Some(v)),
            _ => (arg, None),
        };
        let value = |i: &mut usize| -> Result<String, String> {
            if let Some(v) = inline {
                return Ok(v.to_string());
            }
            *i += 1;
            args.get(*i).cloned().ok_or_else(|| format!("ptxas fatal   : option '{name}' needs a value"))
        };
        match name {
            "--version" | "-V" => a.version = true,
            "-o" | "--output-file" => a.output = Some(value(&mut i)?),
            "--fmad" | "-fmad" => {
                let v = value(&mut i)?;
                a.fmad = match v.as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(format!("ptxas fatal   : bad value '{v}' for option '{name}'")),
                };
            }
            n if WITH_VALUE.contains(&n) => {
                value(&mut i)?;
            }
            n if n.starts_with('-') => {}
            _ => {
                if a.input.replace(arg.to_string()).is_some() {
                    return Err("ptxas fatal   : more than one input file".into());
                }
            }
        }
        i += 1;
    }
    Ok(a)
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a = parse(&args)?;
    if a.version {
        print!("{VERSION}");
        return Ok(());
    }
    let input = a.input.ok_or("ptxas fatal   : no input file")?;
    let ptx = std::fs::read_to_string(&input).map_err(|e| format!("ptxas fatal   : cannot read '{input}': {e}"))?;
    let opts = Options { contract: a.fmad, ..Options::default() };
    ptxvk_translator::translate(&ptx, &input, &opts).map_err(|d| d.to_string())?;
    let output = a.output.unwrap_or_else(|| "elf.o".to_string());
    let mark = if a.fmad { String::new() } else { " --fmad=false".to_string() };
    let text = format!("{PTXAS_STANDIN_MARK}{mark}\n{ptx}");
    std::fs::write(&output, text).map_err(|e| format!("ptxas fatal   : cannot write '{output}': {e}"))
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(255)
        }
    }
}
