//! Which kernels get the block order of `emit/block_order.rs`
//! (`Options::block_order_threads`): only modules with a loop holding an
//! instruction through which a block could wait for another (a strong or
//! volatile load, an atomic, a fence, an mbarrier operation, `nanosleep`),
//! itself or in a function it calls. A kernel
//! that cannot wait is translated exactly as with the option off, since
//! the ticket and its integer divisions cost it time and cannot change its
//! results. Running a waiting kernel is `runtime/tests/block_order.rs`.

use ptxvk_translator::{translate, Options};

/// A kernel writing `%ctaid.x` at its block's slot, with `poll` before
/// the store (instructions or nothing), run once or, `looped`, in a loop
/// of four iterations; `funcs` come before the kernel.
fn kernel_with(funcs: &str, poll: &str, looped: bool) -> String {
    let (head, tail) = if looped {
        ("mov.u32 %r3, 0;\n$L:\n", "\nadd.u32 %r3, %r3, 1;\nsetp.lt.u32 %p1, %r3, 4;\n@%p1 bra $L;")
    } else {
        ("", "")
    };
    format!(
        ".version 8.0\n.target sm_80\n.address_size 64\n{funcs}\n\
         .visible .entry k(.param .u64 out)\n{{\n\
         .reg .b32 %r<4>;\n.reg .b64 %rd<4>;\n.reg .pred %p<2>;\n\
         ld.param.u64 %rd1, [out];\n\
         cvta.to.global.u64 %rd2, %rd1;\n\
         mov.u32 %r1, %ctaid.x;\n\
         mul.wide.u32 %rd3, %r1, 4;\n\
         add.s64 %rd2, %rd2, %rd3;\n\
         {head}{poll}{tail}\n\
         st.global.u32 [%rd2], %r1;\n\
         ret;\n}}\n"
    )
}

fn kernel(poll: &str, looped: bool) -> String {
    kernel_with("", poll, looped)
}

fn spirv(ptx: &str, threads: u32) -> Vec<u32> {
    let options = Options { block_order_threads: threads, ..Options::default() };
    translate(ptx, "k.ptx", &options).unwrap_or_else(|d| panic!("{d}")).spirv
}

/// Instructions through which a block could wait for another, in a loop.
const POLLS: [&str; 9] = [
    "ld.volatile.global.u32 %r2, [%rd2];",
    "ld.relaxed.gpu.global.u32 %r2, [%rd2];",
    "ld.acquire.gpu.global.u32 %r2, [%rd2];",
    "ld.global.cg.u32 %r2, [%rd2];",
    "ld.global.cv.u32 %r2, [%rd2];",
    "atom.global.add.u32 %r2, [%rd2], 1;",
    "membar.gl;",
    "fence.acq_rel.gpu;",
    "nanosleep.u32 100;",
];

/// A function that takes a ticket with an atomic, and one that only adds.
const FUNCS: &str = ".func (.reg .b32 r) take(.reg .b64 a)\n{\natom.global.add.u32 r, [a], 1;\nret;\n}\n\
                     .func (.reg .b32 r) plus(.reg .b32 x)\n{\nadd.u32 r, x, 1;\nret;\n}\n";

#[test]
fn kernels_that_cannot_wait_keep_the_workgroup_order() {
    let mut cases: Vec<String> = [
        "",
        "ld.global.u32 %r2, [%rd2];",
        "ld.global.nc.u32 %r2, [%rd2];",
        "st.global.u32 [%rd2+4], %r1;",
        // The block's own shared memory: no other block writes it.
        ".shared .align 4 .u32 s;\natom.shared.add.u32 %r2, [s], 1;\nld.volatile.shared.u32 %r3, [s];",
    ]
    .into_iter()
    .flat_map(|p| [kernel(p, false), kernel(p, true)])
    .collect();
    // A poll outside any loop waits for nothing: an atomic counter, a
    // fence before the store.
    cases.extend(POLLS.iter().map(|p| kernel(p, false)));
    // Nor does a call of a polling function outside a loop, or a loop that
    // calls a function that does not poll.
    cases.push(kernel_with(FUNCS, "call (%r2), take, (%rd2);", false));
    cases.push(kernel_with(FUNCS, "call (%r2), plus, (%r3);", true));
    for ptx in cases {
        assert_eq!(spirv(&ptx, 4), spirv(&ptx, 0), "{ptx}\ntranslated as without the order");
    }
}

#[test]
fn kernels_that_may_wait_get_it() {
    let mut cases: Vec<String> = POLLS.iter().map(|p| kernel(p, true)).collect();
    // A loop that calls a function that polls.
    cases.push(kernel_with(FUNCS, "call (%r2), take, (%rd2);", true));
    for ptx in cases {
        assert_ne!(spirv(&ptx, 4), spirv(&ptx, 0), "{ptx}\nordered");
    }
}
