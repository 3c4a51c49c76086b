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

/// Launch shapes (grid, block): the two, grids that cover the array
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
