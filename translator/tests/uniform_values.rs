//! What the driver's compiler gets told about values that are the same in
//! every thread, for llvmpipe (lavapipe), which takes a 64-bit pointer
//! apart lane by lane at every access through it where it does not see
//! that: `Options::uniform_params` (each 64-bit kernel parameter through
//! `OpGroupNonUniformBroadcastFirst`); the resume pass's entries, which run
//! the parameters' loads on both of their paths instead of restoring them
//! from a thread's record; and the unrolled copies of a loop in such an
//! entry, which leave out the pass's check of the loop count (the first
//! copy keeps it). Running these kernels is `runtime/tests/long_loops.rs`
//! (resumed grid-stride loops, results against the host's); the fault
//! checks' addresses of their log and range table get the same hint.

use ptxvk_translator::{translate, Options};
use rspirv::binary::Parser;
use rspirv::dr::Operand;
use rspirv::dr::{Loader, Module};
use rspirv::spirv::{Op, StorageClass};

/// nvcc's shape of a grid-stride sum: `out[i] = sum of x[i + k * stride]`.
const GRID_STRIDE_SUM: &str = ".version 8.0\n.target sm_80\n.address_size 64\n\
.visible .entry gsum(.param .u32 n, .param .u64 x, .param .u64 out)\n{\n\
.reg .pred %p<3>;\n.reg .b32 %r<10>;\n.reg .f32 %f<4>;\n.reg .b64 %rd<8>;\n\
ld.param.u32 %r1, [n];\nld.param.u64 %rd1, [x];\nld.param.u64 %rd2, [out];\n\
cvta.to.global.u64 %rd3, %rd1;\nmov.u32 %r2, %ctaid.x;\nmov.u32 %r3, %ntid.x;\nmov.u32 %r4, %tid.x;\n\
mad.lo.s32 %r5, %r2, %r3, %r4;\nmov.u32 %r6, %nctaid.x;\nmul.lo.s32 %r7, %r6, %r3;\n\
mov.f32 %f1, 0f00000000;\nsetp.ge.s32 %p1, %r5, %r1;\nmov.u32 %r8, %r5;\n@%p1 bra DONE;\n\
LOOP:\nmul.wide.s32 %rd4, %r8, 4;\nadd.s64 %rd5, %rd3, %rd4;\nld.global.nc.f32 %f2, [%rd5];\n\
add.f32 %f1, %f1, %f2;\nadd.s32 %r8, %r8, %r7;\nsetp.lt.s32 %p2, %r8, %r1;\n@%p2 bra LOOP;\n\
DONE:\ncvta.to.global.u64 %rd6, %rd2;\nmul.wide.s32 %rd7, %r5, 4;\nadd.s64 %rd6, %rd6, %rd7;\n\
st.global.f32 [%rd6], %f1;\nret;\n}\n";

/// The runtime's options for llvmpipe that matter here.
fn llvmpipe() -> Options {
    Options {
        zero_operand_workaround: true,
        memory_semantics: false,
        unroll_loops: 8,
        loop_limit: true,
        resume_loops: true,
        loop_live_outs_in_memory: true,
        uniform_params: true,
        ..Options::default()
    }
}

fn module(ptx: &str, options: &Options) -> Module {
    let t = translate(ptx, "gsum.ptx", options).unwrap_or_else(|d| panic!("{d}"));
    let mut l = Loader::new();
    let bytes: Vec<u8> = t.spirv.iter().flat_map(|w| w.to_le_bytes()).collect();
    Parser::new(&bytes, &mut l).parse().expect("the translation parses");
    l.module()
}

/// The ids of `m`'s 64-bit integer types.
fn u64_types(m: &Module) -> Vec<u32> {
    m.types_global_values
        .iter()
        .filter(|i| i.class.opcode == Op::TypeInt && i.operands.first() == Some(&Operand::LiteralBit32(64)))
        .filter_map(|i| i.result_id)
        .collect()
}

/// How many `OpGroupNonUniformBroadcastFirst` of `m`'s functions give a
/// 64-bit value (pointers; the loop count's are 32-bit).
fn broadcasts_64(m: &Module) -> usize {
    let u64s = u64_types(m);
    m.functions
        .iter()
        .flat_map(|f| &f.blocks)
        .flat_map(|b| &b.instructions)
        .filter(|i| i.class.opcode == Op::GroupNonUniformBroadcastFirst)
        .filter(|i| i.result_type.is_some_and(|t| u64s.contains(&t)))
        .count()
}

/// How many instructions of `m`'s functions have opcode `op`.
fn count(m: &Module, op: Op) -> usize {
    m.functions.iter().flat_map(|f| &f.blocks).flat_map(|b| &b.instructions).filter(|i| i.class.opcode == op).count()
}

/// How many device-memory accesses of `m` are 64-bit integers (their
/// addresses converted to a `PhysicalStorageBuffer` pointer to one).
fn u64_accesses(m: &Module) -> usize {
    let u64s = u64_types(m);
    let pointers: Vec<u32> = m
        .types_global_values
        .iter()
        .filter(|i| i.class.opcode == Op::TypePointer)
        .filter(|i| match i.operands.as_slice() {
            [Operand::StorageClass(StorageClass::PhysicalStorageBuffer), Operand::IdRef(t)] => u64s.contains(t),
            _ => false,
        })
        .filter_map(|i| i.result_id)
        .collect();
    m.functions
        .iter()
        .flat_map(|f| &f.blocks)
        .flat_map(|b| &b.instructions)
        .filter(|i| i.class.opcode == Op::ConvertUToPtr && i.result_type.is_some_and(|t| pointers.contains(&t)))
        .count()
}

#[test]
fn pointer_parameters_are_broadcast_from_the_first_lane_where_asked() {
    let plain = Options { resume_loops: false, ..llvmpipe() };
    // `x`, `out` (the 32-bit `n` needs no hint) and the module data's
    // address (the loop-limit trap word).
    assert_eq!(count(&module(GRID_STRIDE_SUM, &plain), Op::GroupNonUniformBroadcastFirst), 3);
    let off = Options { uniform_params: false, ..plain };
    assert_eq!(count(&module(GRID_STRIDE_SUM, &off), Op::GroupNonUniformBroadcastFirst), 0);
}

#[test]
fn a_resumable_entry_loads_its_parameters_on_both_paths_and_checks_the_count_once_per_iteration() {
    // Counting (by default only entries with loops of the translator's own
    // count, see the last test).
    let counted = Options { resume_count: true, ..llvmpipe() };
    let m = module(GRID_STRIDE_SUM, &counted);
    // The parameters' loads run once, in the new entry block, before the
    // round's test: the restore path loads no pointer from a record (and
    // the pass's own reads of the resume slot are no parameters).
    let plain = module(GRID_STRIDE_SUM, &Options { resume_loops: false, ..llvmpipe() });
    assert_eq!(broadcasts_64(&m), broadcasts_64(&plain));
    // The 64-bit registers live at the loop's header are the two pointers,
    // which no record holds: the pass's only 64-bit accesses are its reads
    // of the resume area's address, on the resume path and the save path
    // (twice: at the header's check and at the loop's merge).
    assert_eq!(u64_accesses(&m), u64_accesses(&plain) + 3);
    // The loop count is read once per counted iteration (the first of the
    // unrolled copies), not in each copy; each read is one subgroup
    // maximum, and the loop's merge takes one more (the count the lanes
    // leave with).
    assert_eq!(count(&m, Op::GroupNonUniformUMax), 2);
    // One loop construct for the loop (the copies add none), against the
    // same entry translated without unrolling.
    let once = module(GRID_STRIDE_SUM, &Options { unroll_loops: 0, ..counted });
    assert_eq!(count(&m, Op::LoopMerge), count(&once, Op::LoopMerge));
    assert_eq!(count(&once, Op::GroupNonUniformUMax), 2);
}

#[test]
fn the_fault_checks_addresses_of_their_log_and_range_table_are_broadcast() {
    let plain = Options { resume_loops: false, ..llvmpipe() };
    let checked = Options { fault_checks: true, ..plain.clone() };
    // The log's address (read once, at the entry) and the range table's
    // (read to copy a small table to the thread's cache, and by the binary
    // search of a large one: a specialization constant picks one), on top
    // of the parameters and the module data's address.
    let base = count(&module(GRID_STRIDE_SUM, &plain), Op::GroupNonUniformBroadcastFirst);
    assert_eq!(count(&module(GRID_STRIDE_SUM, &checked), Op::GroupNonUniformBroadcastFirst), base + 3);
    let off = Options { uniform_params: false, ..checked };
    assert_eq!(count(&module(GRID_STRIDE_SUM, &off), Op::GroupNonUniformBroadcastFirst), 0);
}

#[test]
fn the_loop_count_in_workgroup_memory_is_accessed_by_one_lane() {
    // llvmpipe runs a Workgroup atomic lane by lane (a compare-and-swap
    // loop each for the read-modify-writes): the count's three accesses
    // around the loop (its reset at the entry, the read before the loop,
    // the maximum at its merge) are each made by the subgroup's elected
    // lane, in the arm of a branch on `OpGroupNonUniformElect`, and the
    // other lanes take the result through `OpGroupNonUniformBroadcastFirst`.
    let m = module(GRID_STRIDE_SUM, &Options { resume_count: true, ..llvmpipe() });
    let f = &m.functions[0];
    let elected: Vec<u32> = f
        .blocks
        .iter()
        .flat_map(|b| &b.instructions)
        .filter(|i| i.class.opcode == Op::GroupNonUniformElect)
        .filter_map(|i| i.result_id)
        .collect();
    // The blocks each branch on an election goes to when it holds.
    let arms: Vec<u32> = f
        .blocks
        .iter()
        .filter_map(|b| b.instructions.last())
        .filter(|i| i.class.opcode == Op::BranchConditional)
        .filter(|i| matches!(i.operands.first(), Some(Operand::IdRef(c)) if elected.contains(c)))
        .filter_map(|i| match i.operands.get(1) {
            Some(Operand::IdRef(t)) => Some(*t),
            _ => None,
        })
        .collect();
    // Pointers into Workgroup variables (the resume pass's own atomics
    // are on its area in device memory).
    let workgroup: Vec<u32> = m
        .types_global_values
        .iter()
        .filter(|i| {
            i.class.opcode == Op::Variable
                && i.operands.first() == Some(&Operand::StorageClass(StorageClass::Workgroup))
        })
        .filter_map(|i| i.result_id)
        .collect();
    let into_workgroup: Vec<u32> = f
        .blocks
        .iter()
        .flat_map(|b| &b.instructions)
        .filter(|i| i.class.opcode == Op::AccessChain)
        .filter(|i| matches!(i.operands.first(), Some(Operand::IdRef(v)) if workgroup.contains(v)))
        .filter_map(|i| i.result_id)
        .collect();
    let atomics = [Op::AtomicStore, Op::AtomicOr, Op::AtomicUMax];
    let on_count = |i: &&rspirv::dr::Instruction| {
        atomics.contains(&i.class.opcode)
            && matches!(i.operands.first(), Some(Operand::IdRef(p)) if into_workgroup.contains(p))
    };
    let mut in_arms = 0;
    for b in &f.blocks {
        let n = b.instructions.iter().filter(on_count).count();
        let label = b.label.as_ref().and_then(|l| l.result_id);
        if label.is_some_and(|l| arms.contains(&l)) {
            in_arms += n;
        } else {
            assert_eq!(n, 0, "a loop-count atomic outside an elected lane's arm");
        }
    }
    assert_eq!(in_arms, 3);
    assert_eq!(elected.len(), 3);
}

#[test]
fn a_resumable_entry_without_loops_of_its_own_does_not_count() {
    // The grid-stride sum has no `printf`, no compare-and-swap atomic and no
    // loop other than its own: a cut of llvmpipe's limiter lands at that
    // loop's back-edge, where the thread saves itself at the loop's merge.
    // So no count (no subgroup maximum, no Workgroup counter) and no check
    // at the header; the save code is there twice (the header's check, whose
    // branch the driver's compiler removes, and the merge), each with its
    // atomic on the round's record count.
    let m = module(GRID_STRIDE_SUM, &llvmpipe());
    assert_eq!(count(&m, Op::GroupNonUniformUMax), 0);
    assert_eq!(count(&m, Op::GroupNonUniformElect), 0);
    assert_eq!(count(&m, Op::AtomicIAdd), 2);
    let counted = module(GRID_STRIDE_SUM, &Options { resume_count: true, ..llvmpipe() });
    assert_eq!(count(&counted, Op::AtomicIAdd), 2);
    assert_eq!(count(&counted, Op::GroupNonUniformUMax), 2);
    // With a `printf` in the loop it counts: `vprintf`'s own loops (copying
    // the arguments, counting the conversions) could be cut half way.
    let with_printf = GRID_STRIDE_SUM.replace(
        "add.f32 %f1, %f1, %f2;",
        "add.f32 %f1, %f1, %f2;\n{\n.param .b64 fmt;\n.param .b64 args;\n.param .b32 rv;\nst.param.b64 [fmt], %rd1;\nst.param.b64 [args], 0;\ncall.uni (rv), vprintf, (fmt, args);\n}",
    );
    let with_printf = with_printf.replace(
        ".visible .entry gsum",
        ".extern .func (.param .b32 r) vprintf(.param .b64 f, .param .b64 a);\n.visible .entry gsum",
    );
    assert_eq!(count(&module(&with_printf, &llvmpipe()), Op::GroupNonUniformUMax), 2);
}
