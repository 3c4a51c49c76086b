//! Issue 16's silent miscompile: a 2-D grid-stride escape-time loop (nested
//! counted loops around a loop with two exits) lost the writes of the last
//! inner grid-stride iteration. The numba kernel and its nvcc twin run for
//! many launch shapes; every element is compared with a CPU reference that
//! follows the PTX's arithmetic (its `fma.rn.f64` evaluated exactly).

mod common;

use common::{assert_clean, context, poisoned, POISON};

const ROWS: usize = 120;
const COLS: usize = 160;
const RE0: f64 = -2.0;
const IM0: f64 = -1.2;
const STEP: f64 = 0.015;
const MAXIT: i32 = 200;

/// Launch shapes (grid, block): the issue's two, grids that cover the array
/// exactly (one element per thread), 1-D and odd shapes. Each thread's
/// loops stay under lavapipe's 65535 iterations per invocation (one thread
/// for the whole array would need about 1.3 million: the launch then fails
/// with a loop-limit error instead).
const SHAPES: [([u32; 3], [u32; 3]); 9] = [
    ([4, 4, 1], [8, 8, 1]),
    ([5, 4, 1], [8, 8, 1]),
    ([20, 15, 1], [8, 8, 1]),
    ([1, 1, 1], [8, 8, 1]),
    ([2, 2, 1], [32, 1, 1]),
    ([3, 7, 1], [16, 4, 1]),
    ([2, 1, 1], [7, 5, 1]),
    ([7, 2, 1], [32, 2, 1]),
    ([1, 3, 1], [64, 1, 1]),
];

/// The numba kernel's result for element (`y`, `x`), operation by operation
/// as NVVM compiled it (`c` by `fma`, `z*z + c` with one `fma` in the
/// imaginary part and one in the magnitude).
fn numba_count(y: usize, x: usize) -> u32 {
    let ci = (y as f64).mul_add(STEP, IM0);
    let cr = (x as f64).mul_add(STEP, RE0);
    let (mut zr, mut zi) = (0.0f64, 0.0f64);
    let mut k: i64 = 1;
    loop {
        let count = k as u32;
        let (b, ab) = (zi * zi, zr * zi);
        // ptxas fuses `zr*zr - zi*zi` (docs/contraction.md): zr*zr is the first
        // of two single-use products.
        let re = zr.mul_add(zr, -b);
        let im = zr.mul_add(zi, ab);
        if k >= MAXIT as i64 {
            return count;
        }
        zi = ci + im;
        let zi2 = zi * zi;
        zr = cr + re;
        let m = zr.mul_add(zr, zi2);
        k += 1;
        if m.is_nan() || m > 4.0 {
            return count;
        }
    }
}

/// The nvcc twin's result (`escape_time.cu`, built with `-fmad=false`:
/// every operation rounds on its own, as written).
fn nvcc_count(y: usize, x: usize) -> u32 {
    let cr = RE0 + x as f64 * STEP;
    let ci = IM0 + y as f64 * STEP;
    let (mut zr, mut zi) = (0.0f64, 0.0f64);
    let mut k = 0;
    while k < MAXIT && zr * zr + zi * zi <= 4.0 {
        let t = zr * zr - zi * zi + cr;
        zi = 2.0 * zr * zi + ci;
        zr = t;
        k += 1;
    }
    k as u32
}

fn check(out: &[u32], reference: fn(usize, usize) -> u32, what: &str) {
    let mut wrong = Vec::new();
    for y in 0..ROWS {
        for x in 0..COLS {
            let (got, want) = (out[y * COLS + x], reference(y, x));
            if got != want {
                wrong.push((y, x, got, want));
            }
        }
    }
    let unwritten = wrong.iter().filter(|w| w.2 == POISON).count();
    assert!(
        wrong.is_empty(),
        "{what}: {} wrong elements ({unwritten} never written), first: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    // The reference is not trivial: counts span the whole range.
    assert!(out.contains(&1) && out.contains(&(MAXIT as u32)));
}

fn download(ctx: &ptxvk_runtime::Context, d: u64) -> Vec<u32> {
    common::download_u32(ctx, d, ROWS * COLS + 64)
}

#[test]
fn numba_escape_time_every_launch_shape() {
    let ctx = context();
    let m = ctx.load_module(include_str!("../../tests/fixtures/numba_escape.ptx"), "numba_escape.ptx").unwrap();
    let name = m.entry_names().into_iter().next().expect("one entry");
    let f = m.function(&name).unwrap();
    for (grid, block) in SHAPES {
        let d = poisoned(&ctx, ROWS * COLS + 64);
        let (rows, cols) = (ROWS as i64, COLS as i64);
        let args: Vec<Vec<u8>> = vec![
            RE0.to_le_bytes().to_vec(),
            IM0.to_le_bytes().to_vec(),
            STEP.to_le_bytes().to_vec(),
            MAXIT.to_le_bytes().to_vec(),
            0u64.to_le_bytes().to_vec(),          // meminfo
            0u64.to_le_bytes().to_vec(),          // parent
            (rows * cols).to_le_bytes().to_vec(), // nitems
            4i64.to_le_bytes().to_vec(),          // itemsize
            d.to_le_bytes().to_vec(),             // data
            rows.to_le_bytes().to_vec(),          // shape[0]
            cols.to_le_bytes().to_vec(),          // shape[1]
            (cols * 4).to_le_bytes().to_vec(),    // strides[0] in bytes
            4i64.to_le_bytes().to_vec(),          // strides[1]
        ];
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        let params = f.pack_params(&refs).unwrap();
        ctx.launch(&f, grid, block, 0, &params).unwrap();
        let out = download(&ctx, d);
        check(&out, numba_count, &format!("numba, grid {grid:?} block {block:?}"));
        assert!(out[ROWS * COLS..].iter().all(|&v| v == POISON), "wrote past the array");
    }
    assert_clean(&ctx);
}

#[test]
fn nvcc_escape_time_every_launch_shape() {
    let ctx = context();
    for (ptx, file) in [
        (include_str!("../../tests/fixtures/escape_time.ptx"), "escape_time.ptx"),
        (include_str!("../../tests/fixtures/escape_time_debug.ptx"), "escape_time_debug.ptx"),
    ] {
        let m = ctx.load_module(ptx, file).unwrap();
        let f = m.function("escape_time").unwrap();
        for (grid, block) in SHAPES {
            let d = poisoned(&ctx, ROWS * COLS + 64);
            let params = f
                .pack_params(&[
                    &RE0.to_le_bytes(),
                    &IM0.to_le_bytes(),
                    &STEP.to_le_bytes(),
                    &MAXIT.to_le_bytes(),
                    &d.to_le_bytes(),
                    &(ROWS as i32).to_le_bytes(),
                    &(COLS as i32).to_le_bytes(),
                ])
                .unwrap();
            ctx.launch(&f, grid, block, 0, &params).unwrap();
            let out = download(&ctx, d);
            check(&out, nvcc_count, &format!("{file}, grid {grid:?} block {block:?}"));
            assert!(out[ROWS * COLS..].iter().all(|&v| v == POISON), "wrote past the array");
        }
    }
    assert_clean(&ctx);
}

/// The reduced kernel of the second miscompile of issue 16 (hand-written
/// PTX): `r = k; if (k >= n) break; k += 1; if (k < t) continue; break;`,
/// then `r` stored after the loop. Lanes leave in different iterations
/// and through either exit; on llvmpipe a lane that left early read `r`
/// as recomputed from a later iteration's `k` unless `r` lives in memory
/// (`emit/live_out.rs`).
const LIVE_OUT: &str = r#"
.version 7.0
.target sm_80
.address_size 64
.visible .entry live_out(.param .u64 out, .param .u32 seed)
{
    .reg .pred %p<3>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r9, [seed];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r10, %ctaid.x;
    mov.u32 %r11, %ntid.x;
    mad.lo.u32 %r1, %r10, %r11, %r1;
    xor.b32 %r6, %r1, %r9;
    rem.u32 %r2, %r6, 13;
    mul.lo.u32 %r3, %r6, 7;
    rem.u32 %r3, %r3, 17;
    mov.u32 %r4, 0;
$LOOP:
    mov.u32 %r5, %r4;
    setp.ge.u32 %p1, %r4, %r2;
    @%p1 bra $DONE;
    add.u32 %r4, %r4, 1;
    setp.lt.u32 %p2, %r4, %r3;
    @%p2 bra $LOOP;
$DONE:
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r5;
    ret;
}
"#;

#[test]
fn value_computed_in_a_loop_and_read_after_it() {
    let ctx = context();
    let m = ctx.load_module(LIVE_OUT, "live_out.ptx").unwrap();
    let f = m.function("live_out").unwrap();
    for seed in [0u32, 0x9e37_79b9, 12345] {
        let n = 4 * 128;
        let out = poisoned(&ctx, n);
        let params = f.pack_params(&[&out.to_le_bytes(), &seed.to_le_bytes()]).unwrap();
        ctx.launch(&f, [4, 1, 1], [128, 1, 1], 0, &params).unwrap();
        let got = common::download_u32(&ctx, out, n);
        for (i, &g) in got.iter().enumerate() {
            let v = i as u32 ^ seed;
            let (stop, t) = (v % 13, v.wrapping_mul(7) % 17);
            let mut k = 0u32;
            let r = loop {
                let r = k;
                if k >= stop {
                    break r;
                }
                k += 1;
                if k >= t {
                    break r;
                }
            };
            assert_eq!(g, r, "seed {seed:#x} thread {i}");
        }
    }
    assert_clean(&ctx);
}
