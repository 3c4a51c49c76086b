//! Parse and translate arbitrary input: no panic, no hang, bounded memory.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let opts = ptxvk_translator::Options::default();
    if let Err(d) = ptxvk_translator::translate(src, "fuzz.ptx", &opts) {
        // Rendering the diagnostics must not panic either.
        let _ = d.to_string();
    }
    let _ = ptxvk_translator::check_syntax(src, "fuzz.ptx");
});
