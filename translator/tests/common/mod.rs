//! Helpers shared by the translator's integration tests (each test binary
//! uses some of them).
#![allow(dead_code)]

use std::process::Command;

/// Runs `spirv-val --target-env vulkan1.2` on `words` (written to a
/// temporary file named after `what`); its report on failure. Panics when
/// spirv-val cannot run (install spirv-tools; CI has it).
pub fn spirv_val(words: &[u32], what: &str) -> Result<(), String> {
    let clean: String = what.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    let file = std::env::temp_dir().join(format!("ptxvk-test-{}-{clean}.spv", std::process::id()));
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    std::fs::write(&file, bytes).unwrap_or_else(|e| panic!("cannot write {}: {e}", file.display()));
    let out = Command::new("spirv-val").args(["--target-env", "vulkan1.2"]).arg(&file).output();
    let _ = std::fs::remove_file(&file);
    let out = match out {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            panic!("spirv-val not found: install spirv-tools (e.g. `apt-get install spirv-tools`); CI has it")
        }
        Err(e) => panic!("cannot run spirv-val: {e}"),
    };
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }
}

/// Opcode and the words of each instruction of a SPIR-V module, after its
/// header.
pub fn instructions(words: &[u32]) -> Vec<(u32, &[u32])> {
    let mut out = Vec::new();
    let mut at = 5;
    while at < words.len() {
        let len = (words[at] >> 16) as usize;
        assert!(len > 0 && at + len <= words.len(), "malformed SPIR-V at word {at}");
        out.push((words[at] & 0xffff, &words[at..at + len]));
        at += len;
    }
    out
}

/// How many instructions with opcode `op` the module has.
pub fn count_op(words: &[u32], op: rspirv::spirv::Op) -> usize {
    instructions(words).iter().filter(|(o, _)| *o == op as u32).count()
}
