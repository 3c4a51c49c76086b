//! 16-byte vector accesses that order memory (`emit/vector16.rs`), without
//! a device: a load has no loop (a poll of CUB's look-back must cost no
//! iteration of llvmpipe's loop budget), a store waits for the slot in one,
//! accesses that order nothing stay element by element, and the module
//! gets its table of slots. Running them against each other is
//! `runtime/tests/vector_atomicity.rs`; a 16-byte wait past the limiter is
//! `runtime/tests/block_order.rs`.

use ptxvk_translator::{translate, Options, Translation};
use rspirv::binary::Parser;
use rspirv::dr::Loader;
use rspirv::spirv::Op;

fn kernel(body: &str) -> String {
    format!(
        ".version 8.0\n.target sm_80\n.address_size 64\n\
         .visible .entry k(.param .u64 p)\n{{\n.reg .b64 %rd<8>;\n.reg .b32 %r<8>;\n\
         ld.param.u64 %rd1, [p];\ncvta.to.global.u64 %rd1, %rd1;\n{body}\nret;\n}}\n"
    )
}

fn translated(body: &str, options: &Options) -> (Translation, Vec<Op>) {
    let src = kernel(body);
    let t = translate(&src, "vector16.ptx", options).unwrap_or_else(|d| panic!("{d}"));
    let mut loader = Loader::new();
    Parser::new(le_bytes(&t.spirv).as_slice(), &mut loader).parse().expect("parse SPIR-V");
    let m = loader.module();
    let ops = m
        .functions
        .iter()
        .flat_map(|f| f.blocks.iter())
        .flat_map(|b| b.instructions.iter())
        .map(|i| i.class.opcode)
        .collect();
    (t, ops)
}

fn le_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// The runtime's options for llvmpipe (loop limiting on) and for a GPU.
fn both() -> [Options; 2] {
    let llvmpipe = Options { loop_limit: true, unroll_loops: 8, resume_loops: true, ..Options::default() };
    [llvmpipe, Options::default()]
}

fn count(ops: &[Op], op: Op) -> usize {
    ops.iter().filter(|&&o| o == op).count()
}

#[test]
fn an_ordered_16_byte_load_has_no_loop_and_a_store_waits_in_one() {
    for options in both() {
        let (t, ops) =
            translated("ld.relaxed.gpu.global.v2.u64 {%rd2, %rd3}, [%rd1];\nst.global.u64 [%rd1+16], %rd3;", &options);
        assert_eq!(count(&ops, Op::LoopMerge), 0, "a load loops");
        // Two reads of the sequence word per try, and the waiting reader's
        // count in and out.
        let tries = ptxvk_translator::abi::printf::VECTOR_READ_TRIES as usize;
        assert_eq!(count(&ops, Op::AtomicIAdd), 2 * tries + 2);
        assert_eq!(count(&ops, Op::AtomicCompareExchange), 0);
        let off = t.info.vector_lock_offset.expect("a lock table");
        assert!(t.info.global_data_bytes >= off + 32 * 1024, "{:?}", t.info.global_data_bytes);

        let (_, ops) = translated("st.relaxed.gpu.global.v2.u64 [%rd1], {%rd1, %rd1};", &options);
        assert_eq!(count(&ops, Op::LoopMerge), 1, "a store waits for its slot");
        assert_eq!(count(&ops, Op::AtomicCompareExchange), 1);

        for form in [
            "ld.relaxed.gpu.global.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1];",
            "ld.volatile.global.v2.f64 {%rd2, %rd3}, [%rd1];",
        ] {
            let (_, ops) = translated(&format!("{form}\nst.global.u32 [%rd1+16], %r1;"), &options);
            assert_eq!(count(&ops, Op::LoopMerge), 0, "{form}");
            assert_eq!(count(&ops, Op::AtomicIAdd), 2 * tries + 2, "{form}");
        }
    }
}

#[test]
fn unordered_16_byte_accesses_stay_element_by_element() {
    for options in both() {
        for form in [
            "ld.global.v2.u64 {%rd2, %rd3}, [%rd1];\nst.global.u64 [%rd1+16], %rd3;",
            "ld.global.cg.v2.u64 {%rd2, %rd3}, [%rd1];\nst.global.u64 [%rd1+16], %rd3;",
            "st.global.v2.u64 [%rd1], {%rd1, %rd1};",
        ] {
            let (t, ops) = translated(form, &options);
            assert_eq!(count(&ops, Op::AtomicIAdd) + count(&ops, Op::AtomicCompareExchange), 0, "{form}");
            assert_eq!(t.info.vector_lock_offset, None, "{form}");
        }
    }
}
