//! Generic accesses through registers that cannot hold a `.shared` or
//! `.local` address go to global memory without a test of their window
//! (`emit/windowed.rs`). In `tests/fixtures/generic_windows.cu` only the
//! load through a kernel parameter plus arithmetic qualifies: the shared
//! address plus a parameter's integer, the local address, the pointer
//! chosen between shared and global and the one loaded back from memory
//! keep their tests. Their results on a device, with and without the
//! analysis: `runtime/tests/generic_windows.rs`.

use ptxvk_translator::{disassemble, translate, Options};

const PTX: &str = include_str!("../../tests/fixtures/generic_windows.ptx");

fn selections(generic_to_global: bool) -> usize {
    // Without the shared-memory spill's split (one more selection in the
    // shared arm of every generic access).
    let o = Options { generic_to_global, shared_spill: false, ..Options::default() };
    let t = translate(PTX, "generic_windows.ptx", &o).unwrap_or_else(|d| panic!("{d}"));
    disassemble(&t.spirv).lines().filter(|l| l.contains("OpSelectionMerge")).count()
}

#[test]
fn only_the_parameter_pointer_skips_its_window_test() {
    // A generic access in a function with .shared and .local variables
    // tests two windows: one selection each.
    assert_eq!(selections(false) - selections(true), 2);
}
