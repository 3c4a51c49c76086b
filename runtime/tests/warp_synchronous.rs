//! Legacy warp-synchronous code (issue 21, item 2): nvcc's
//! `tests/fixtures/warp_synchronous.cu`, where the lanes of a warp exchange
//! values through `volatile` shared memory without `__syncwarp()` and rely
//! on running in lock step (the CUDA samples' reduction, GPU Gems' warp
//! scan, a block maximum as in CuPy's partition). On the emulated warp path
//! (lavapipe: a warp is four 8-lane subgroups) each `volatile` shared access
//! is a point where the warp's lanes meet, so they see each other's shared
//! stores in program order, as on NVIDIA's GPUs. Random inputs, poisoned
//! outputs, the host model exactly.

mod common;

use common::{assert_clean, context, download_u32, poisoned, upload_u32, Lcg, POISON};
use ptxvk_runtime::Context;

const PTX: &str = include_str!("../../tests/fixtures/warp_synchronous.ptx");
const BLOCK: usize = 256;
const BLOCKS: usize = 24;

fn run(ctx: &Context, kernel: &str, input: &[i32], outputs: usize) -> Vec<i32> {
    let m = ctx.load_module(PTX, "warp_synchronous.ptx").expect("load warp_synchronous.ptx");
    let f = m.function(kernel).unwrap();
    let words: Vec<u32> = input.iter().map(|&x| x as u32).collect();
    let din = upload_u32(ctx, &words);
    let dout = poisoned(ctx, outputs + 8);
    let params = f.pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes()]).unwrap();
    ctx.launch(&f, [BLOCKS as u32, 1, 1], [BLOCK as u32, 1, 1], 0, &params).unwrap();
    let got = download_u32(ctx, dout, outputs + 8);
    assert!(got[outputs..].iter().all(|&w| w == POISON), "{kernel} wrote past its output");
    got[..outputs].iter().map(|&w| w as i32).collect()
}

fn random(seed: u64) -> Vec<i32> {
    let mut g = Lcg(seed);
    (0..BLOCK * BLOCKS).map(|_| g.next_u32() as i32 >> 8).collect()
}

#[test]
fn reduction_through_volatile_shared_memory() {
    let ctx = context();
    let input = random(1);
    let got = run(&ctx, "reduce_volatile", &input, BLOCKS);
    for (b, g) in got.iter().enumerate() {
        let want = input[b * BLOCK..(b + 1) * BLOCK].iter().fold(0i32, |a, &x| a.wrapping_add(x));
        assert_eq!(*g, want, "block {b}");
    }
    assert_clean(&ctx);
}

#[test]
fn warp_scan_through_volatile_shared_memory() {
    let ctx = context();
    let input = random(2);
    let got = run(&ctx, "scan_warps", &input, BLOCK * BLOCKS);
    for (w, chunk) in input.chunks(32).enumerate() {
        let mut acc = 0i32;
        for (l, &x) in chunk.iter().enumerate() {
            acc = acc.wrapping_add(x);
            assert_eq!(got[w * 32 + l], acc, "warp {w} lane {l}");
        }
    }
    assert_clean(&ctx);
}

#[test]
fn block_maximum_with_a_lock_step_warp_part() {
    let ctx = context();
    let input = random(3);
    let got = run(&ctx, "max_volatile", &input, BLOCKS);
    for (b, g) in got.iter().enumerate() {
        let want = *input[b * BLOCK..(b + 1) * BLOCK].iter().max().unwrap();
        assert_eq!(*g, want, "block {b}");
    }
    assert_clean(&ctx);
}

// Through global memory (`tests/fixtures/warp_synchronous_global.cu`):
// plain loads and stores, no `volatile`, as CuPy's partition kernels.

const GLOBAL_PTX: &str = include_str!("../../tests/fixtures/warp_synchronous_global.ptx");

/// Runs `kernel` of the global fixture over `data` in place (with poisoned
/// words after it) on `blocks` x 256 threads, with `extra` parameters after
/// the array and its length, and returns the array.
fn run_in_place(ctx: &Context, kernel: &str, data: &[i32], blocks: u32, extra: &[&[u8]]) -> Vec<i32> {
    let m = ctx.load_module(GLOBAL_PTX, "warp_synchronous_global.ptx").expect("load warp_synchronous_global.ptx");
    let f = m.function(kernel).unwrap();
    let mut words: Vec<u32> = data.iter().map(|&x| x as u32).collect();
    words.extend([POISON; 8]);
    let d = upload_u32(ctx, &words);
    let n = data.len() as u64;
    let mut params: Vec<&[u8]> = Vec::new();
    let (db, nb) = (d.to_le_bytes(), n.to_le_bytes());
    params.push(&db);
    params.push(&nb);
    params.extend_from_slice(extra);
    let packed = f.pack_params(&params).unwrap();
    ctx.launch(&f, [blocks, 1, 1], [BLOCK as u32, 1, 1], 0, &packed).unwrap();
    let got = download_u32(ctx, d, data.len() + 8);
    assert!(got[data.len()..].iter().all(|&w| w == POISON), "{kernel} wrote past its array");
    got[..data.len()].iter().map(|&w| w as i32).collect()
}

#[test]
fn warp_bitonic_sort_through_global_memory() {
    let ctx = context();
    // Each warp sorts 256 elements: 8 blocks of 8 warps; the last block's
    // last two warps find no segment and return at once.
    let seg = 256usize;
    let mut input = random(4);
    input.truncate(seg * (8 * 8 - 2));
    let got = run_in_place(&ctx, "sort_segments", &input, 8, &[&(seg as u64).to_le_bytes()]);
    for (s, (g, x)) in got.chunks(seg).zip(input.chunks(seg)).enumerate() {
        let mut want = x.to_vec();
        want.sort_unstable();
        assert_eq!(g, &want[..], "segment {s}");
    }
    assert_clean(&ctx);
}

#[test]
fn warp_scan_in_place_through_global_memory() {
    let ctx = context();
    // 3,000 elements on 12 blocks of 256 threads: a partial last warp, and
    // threads past the end that return at once.
    let mut input = random(5);
    input.truncate(3000);
    let got = run_in_place(&ctx, "scan_in_place", &input, 12, &[]);
    for (w, (g, x)) in got.chunks(32).zip(input.chunks(32)).enumerate() {
        let mut acc = 0i32;
        for (l, (&g, &x)) in g.iter().zip(x).enumerate() {
            acc = acc.wrapping_add(x);
            assert_eq!(g, acc, "warp {w} lane {l}");
        }
    }
    assert_clean(&ctx);
}

// Write after read through plain shared memory, as Warp's tiled GMRES
// (`libcuda/tests/clients/warp/gmres_least_squares.py`): after a barrier the
// lanes of each warp read the warp's first element (a broadcast) and their
// right neighbour's, then each overwrites its own, with no barrier between.
// In lock step every lane reads before any lane writes. Hand-written (no
// nvcc here): NVRTC's code for Warp's kernel has this shape (`bar.sync`,
// `ld.shared` of the pivot, `st.shared` of the lane's element, `bar.sync`).

const WAR_PTX: &str = r#"
.version 7.0
.target sm_70
.address_size 64

.visible .entry broadcast_then_overwrite(.param .u64 in, .param .u64 out)
{
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    .shared .align 4 .b32 tile[256];
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd3, %r4, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r5, [%rd4];
    mov.u32 %r6, tile;
    shl.b32 %r7, %r1, 2;
    add.s32 %r8, %r6, %r7;
    st.shared.u32 [%r8], %r5;
    bar.sync 0;
    and.b32 %r9, %r1, -32;
    shl.b32 %r10, %r9, 2;
    add.s32 %r11, %r6, %r10;
    ld.shared.u32 %r12, [%r11];
    add.s32 %r13, %r1, 1;
    and.b32 %r14, %r13, 31;
    shl.b32 %r15, %r14, 2;
    add.s32 %r16, %r11, %r15;
    ld.shared.u32 %r17, [%r16];
    mad.lo.s32 %r18, %r12, 3, %r17;
    st.shared.u32 [%r8], %r18;
    bar.sync 0;
    ld.shared.u32 %r19, [%r8];
    add.s64 %rd5, %rd2, %rd3;
    st.global.u32 [%rd5], %r19;
    ret;
}
"#;

#[test]
fn shared_store_after_other_lanes_loads() {
    let ctx = context();
    let m = ctx.load_module(WAR_PTX, "war.ptx").expect("load war.ptx");
    let f = m.function("broadcast_then_overwrite").unwrap();
    let input = random(6);
    let words: Vec<u32> = input.iter().map(|&x| x as u32).collect();
    let din = upload_u32(&ctx, &words);
    let dout = poisoned(&ctx, input.len() + 8);
    let params = f.pack_params(&[&din.to_le_bytes(), &dout.to_le_bytes()]).unwrap();
    ctx.launch(&f, [BLOCKS as u32, 1, 1], [BLOCK as u32, 1, 1], 0, &params).unwrap();
    let got = download_u32(&ctx, dout, input.len() + 8);
    assert!(got[input.len()..].iter().all(|&w| w == POISON), "wrote past its output");
    for (w, (g, x)) in got.chunks(32).zip(input.chunks(32)).enumerate() {
        for (l, &g) in g.iter().enumerate() {
            let want = x[0].wrapping_mul(3).wrapping_add(x[(l + 1) % 32]);
            assert_eq!(g as i32, want, "warp {w} lane {l}");
        }
    }
    assert_clean(&ctx);
}
