//! Which kernels get the block order of `emit/block_order.rs`
//! (`Options::block_order_threads`): only modules with an instruction
//! through which a block could wait for another (a strong or volatile
//! load, an atomic, a fence, an mbarrier operation, `nanosleep`). A kernel
//! that cannot wait is translated exactly as with the option off, since
//! the ticket and its integer divisions cost it time and cannot change its
//! results. Running a waiting kernel is `runtime/tests/block_order.rs`.

use ptxvk_translator::{translate, Options};

/// A kernel writing `%ctaid.x` at its block's slot, with `poll` before
/// the store (an instruction or nothing).
fn kernel(poll: &str) -> String {
    format!(
        ".version 8.0\n.target sm_80\n.address_size 64\n\
         .visible .entry k(.param .u64 out)\n{{\n\
         .reg .b32 %r<4>;\n.reg .b64 %rd<4>;\n\
         ld.param.u64 %rd1, [out];\n\
         cvta.to.global.u64 %rd2, %rd1;\n\
         mov.u32 %r1, %ctaid.x;\n\
         mul.wide.u32 %rd3, %r1, 4;\n\
         add.s64 %rd2, %rd2, %rd3;\n\
         {poll}\n\
         st.global.u32 [%rd2], %r1;\n\
         ret;\n}}\n"
    )
}

fn spirv(ptx: &str, threads: u32) -> Vec<u32> {
    let options = Options { block_order_threads: threads, ..Options::default() };
    translate(ptx, "k.ptx", &options).unwrap_or_else(|d| panic!("{d}")).spirv
}

#[test]
fn kernels_that_cannot_wait_keep_the_workgroup_order() {
    for poll in [
        "",
        "ld.global.u32 %r2, [%rd2];",
        "ld.global.nc.u32 %r2, [%rd2];",
        "st.global.u32 [%rd2+4], %r1;",
        // The block's own shared memory: no other block writes it.
        ".shared .align 4 .u32 s;\natom.shared.add.u32 %r2, [s], 1;\nld.volatile.shared.u32 %r3, [s];",
    ] {
        let ptx = kernel(poll);
        assert_eq!(spirv(&ptx, 4), spirv(&ptx, 0), "{poll:?}: translated as without the order");
    }
}

#[test]
fn kernels_that_may_wait_get_it() {
    for poll in [
        "ld.volatile.global.u32 %r2, [%rd2];",
        "ld.relaxed.gpu.global.u32 %r2, [%rd2];",
        "ld.acquire.gpu.global.u32 %r2, [%rd2];",
        "ld.global.cg.u32 %r2, [%rd2];",
        "ld.global.cv.u32 %r2, [%rd2];",
        "atom.global.add.u32 %r2, [%rd2], 1;",
        "membar.gl;",
        "fence.acq_rel.gpu;",
        "nanosleep.u32 100;",
    ] {
        let ptx = kernel(poll);
        assert_ne!(spirv(&ptx, 4), spirv(&ptx, 0), "{poll:?}: permuted");
    }
}
