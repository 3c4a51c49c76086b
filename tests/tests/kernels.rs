//! Every fixture kernel of `tests/fixtures/` on random (fixed-seed) inputs,
//! compared exactly with a CPU reference, twice: through the Rust runtime API
//! (with the Khronos validation layer, which must stay quiet) and through the
//! C ABI of `libcuda.so`.
//!
//! Output buffers are filled with [`ptxvk_tests::POISON`] before each launch and are
//! larger than what the kernel may write, so both missing writes and writes
//! out of range show. Test names are `<kernel>::runtime` and `<kernel>::driver`.

use ptxvk_tests::{
    arg, assert_bits_eq, assert_poisoned, from_bytes, on_driver, on_runtime, ptx_entry_names, to_bytes, Gpu, Result,
    Scalar, SplitMix64,
};

/// Bytes of guard area past the end of every output buffer.
const GUARD: usize = 64;

/// `mod $name { #[test] fn runtime(); #[test] fn driver(); }`, both running `$body`.
macro_rules! on_both_apis {
    ($($(#[$attr:meta])* $name:ident => $body:expr;)*) => {$(
        mod $name {
            use super::*;

            /// Through the Rust runtime API, with the validation layer.
            $(#[$attr])*
            #[test]
            fn runtime() {
                on_runtime($body)
            }

            /// Through the C ABI of `libcuda.so`.
            $(#[$attr])*
            #[test]
            fn driver() {
                on_driver($body)
            }
        }
    )*};
}

on_both_apis! {
    vector_add => run_vector_add;
    saxpy_f64 => run_saxpy_f64;
    collatz_steps => |gpu| run_collatz(gpu, "data_loop.ptx");
    collatz_steps_debug => |gpu| run_collatz(gpu, "data_loop_debug.ptx");
    reduce_sum_shared => run_reduce_sum_shared;
    histogram_shared => run_histogram_shared;
    big_grid => run_big_grid;
    types_mix => run_types_mix;
    numba_saxpy => run_numba_saxpy;
    numba_signed_zero => run_numba_signed_zero;
    array_elements => run_array_elements;
    scope_shadow => run_scope_shadow;
}

/// Reads back an output buffer of `count` elements plus [`GUARD`] bytes and
/// checks the elements against `want` (first `want.len()` of them) and that
/// everything after `want` is still poison.
fn check_output<T: Scalar>(gpu: &mut dyn Gpu, what: &str, buffer: u64, count: usize, want: &[T]) -> Result<()> {
    let bytes = gpu.copy_dtoh(buffer, count * T::SIZE + GUARD)?;
    let split = want.len() * T::SIZE;
    let got: Vec<T> = from_bytes(&bytes[..split]);
    let what = format!("{} API: {what}", gpu.api());
    assert_bits_eq(&what, &got, want);
    assert_poisoned(&what, &bytes[split..]);
    Ok(())
}

/// `c[i] = a[i] + b[i]` (f32, exact) for `i < n`, with a partial last block.
fn run_vector_add(gpu: &mut dyn Gpu) -> Result<()> {
    let mut rng = SplitMix64(0x5EED_0001);
    let n = 65_537usize;
    let block = 256u32;
    let grid = n.div_ceil(block as usize) as u32;
    let threads = grid as usize * block as usize;
    let a: Vec<f32> = (0..n).map(|_| rng.f32_normal(-20, 20)).collect();
    let b: Vec<f32> = (0..n).map(|_| rng.f32_normal(-20, 20)).collect();
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();

    let k = gpu.load_fixture("vector_add.ptx", "vector_add")?;
    let da = gpu.upload(&a)?;
    let db = gpu.upload(&b)?;
    let dc = gpu.alloc_poisoned(threads * 4 + GUARD)?;
    gpu.launch(k, [grid, 1, 1], [block, 1, 1], 0, &[&arg(da), &arg(db), &arg(dc), &arg(n as i32)])?;
    gpu.synchronize()?;
    check_output(gpu, "vector_add c", dc, threads, &want)
}

/// `y[i] = a.mul_add(x[i], y[i])` (f64, single rounding) for `i < n`.
fn run_saxpy_f64(gpu: &mut dyn Gpu) -> Result<()> {
    let mut rng = SplitMix64(0x5EED_0002);
    let n = 10_007usize;
    let block = 256u32;
    let grid = n.div_ceil(block as usize) as u32;
    let threads = grid as usize * block as usize;
    let a = rng.f64_normal(-8, 8);
    let x: Vec<f64> = (0..n).map(|_| rng.f64_normal(-30, 30)).collect();
    let y: Vec<f64> = (0..n).map(|_| rng.f64_normal(-30, 30)).collect();
    let want: Vec<f64> = x.iter().zip(&y).map(|(&x, &y)| a.mul_add(x, y)).collect();

    let k = gpu.load_fixture("saxpy_f64.ptx", "saxpy_f64")?;
    let dx = gpu.upload(&x)?;
    // y is read and written: upload it into a poisoned buffer with room for every thread.
    let dy = gpu.alloc_poisoned(threads * 8 + GUARD)?;
    gpu.copy_htod(dy, &to_bytes(&y))?;
    gpu.launch(k, [grid, 1, 1], [block, 1, 1], 0, &[&arg(n as i32), &arg(a), &arg(dx), &arg(dy)])?;
    gpu.synchronize()?;
    check_output(gpu, "saxpy_f64 y", dy, threads, &want)
}

/// Collatz step count, capped at 1000 iterations, with u32 wrap-around.
fn collatz_reference(mut x: u32) -> u32 {
    let mut steps = 0;
    for _ in 0..1000 {
        if x <= 1 {
            break;
        }
        x = if x & 1 == 1 { x.wrapping_mul(3).wrapping_add(1) } else { x / 2 };
        steps += 1;
    }
    steps
}

/// `collatz_steps(in, out, n)` from the optimised or the `-G -O0` build.
fn run_collatz(gpu: &mut dyn Gpu, file: &str) -> Result<()> {
    assert_eq!(
        [27, 0, 1, 2, 0xFFFF_FFFF].map(collatz_reference),
        [111, 0, 0, 1, 228],
        "CPU reference disagrees with the fixture README"
    );
    let mut rng = SplitMix64(0x5EED_0003);
    let n = 1000usize;
    let block = 256u32;
    let grid = n.div_ceil(block as usize) as u32;
    let threads = grid as usize * block as usize;
    let mut input: Vec<u32> = (0..n)
        .map(|i| match i % 4 {
            // Small values (short chains), full-range values (some wrap), and in between.
            0 => rng.next_u32() % 10_000,
            1 => rng.next_u32(),
            _ => rng.next_u32() >> (rng.next_u32() % 32),
        })
        .collect();
    input[..4].copy_from_slice(&[27, 0, 1, 2]);
    input[n - 1] = 0xFFFF_FFFF;
    let want: Vec<u32> = input.iter().map(|&x| collatz_reference(x)).collect();

    let k = gpu.load_fixture(file, "collatz_steps")?;
    let din = gpu.upload(&input)?;
    let dout = gpu.alloc_poisoned(threads * 4 + GUARD)?;
    gpu.launch(k, [grid, 1, 1], [block, 1, 1], 0, &[&arg(din), &arg(dout), &arg(n as i32)])?;
    gpu.synchronize()?;
    check_output(gpu, &format!("{file} collatz_steps out"), dout, threads, &want)
}

/// `*out = sum(in[..n])` (wrapping i32) via shared-memory tree and global atomics.
fn run_reduce_sum_shared(gpu: &mut dyn Gpu) -> Result<()> {
    let mut rng = SplitMix64(0x5EED_0004);
    let n = 100_003usize;
    let block = 256u32;
    let grid = n.div_ceil(block as usize) as u32;
    let input: Vec<i32> = (0..n).map(|_| rng.next_u32() as i32).collect();
    let want = input.iter().fold(0i32, |s, &v| s.wrapping_add(v));

    let k = gpu.load_fixture("reduce_shared.ptx", "reduce_sum_shared")?;
    let din = gpu.upload(&input)?;
    // One zeroed counter followed by the poisoned guard.
    let dout = gpu.alloc_poisoned(4 + GUARD)?;
    gpu.copy_htod(dout, &[0; 4])?;
    gpu.launch(k, [grid, 1, 1], [block, 1, 1], 0, &[&arg(din), &arg(dout), &arg(n as i32)])?;
    gpu.synchronize()?;
    check_output(gpu, "reduce_sum_shared out", dout, 1, &[want])
}

/// 64-bin histogram of `in[i] & 63` with shared atomics and a grid-stride loop.
fn run_histogram_shared(gpu: &mut dyn Gpu) -> Result<()> {
    let mut rng = SplitMix64(0x5EED_0005);
    let n = 50_000usize;
    let (grid, block) = (3u32, 256u32);
    // Skewed towards a few bins so that shared atomics collide.
    let input: Vec<u32> =
        (0..n).map(|_| if rng.next_u32() & 3 == 0 { rng.next_u32() & !7 } else { rng.next_u32() }).collect();
    let mut want = vec![0u32; 64];
    for v in &input {
        want[(v & 63) as usize] += 1;
    }

    let k = gpu.load_fixture("reduce_shared.ptx", "histogram_shared")?;
    let din = gpu.upload(&input)?;
    let dbins = gpu.alloc_poisoned(64 * 4 + GUARD)?;
    gpu.copy_htod(dbins, &[0; 64 * 4])?;
    gpu.launch(k, [grid, 1, 1], [block, 1, 1], 0, &[&arg(din), &arg(dbins), &arg(n as i32)])?;
    gpu.synchronize()?;
    check_output(gpu, "histogram_shared bins", dbins, 64, &want)
}

/// 70000 blocks in x (more than the 65535 a Vulkan dispatch guarantees).
fn run_big_grid(gpu: &mut dyn Gpu) -> Result<()> {
    let mut rng = SplitMix64(0x5EED_0006);
    let (grid, block) = (70_000u32, 32u32);
    let threads = grid as usize * block as usize;
    let n = threads - 1 - (rng.next_u32() % 31) as usize;
    let want: Vec<u32> = (0..n as u32).map(|i| (i / 32) * 7 + i % 32).collect();

    let k = gpu.load_fixture("big_grid.ptx", "big_grid")?;
    let dout = gpu.alloc_poisoned(threads * 4 + GUARD)?;
    gpu.launch(k, [grid, 1, 1], [block, 1, 1], 0, &[&arg(dout), &arg(n as i32)])?;
    gpu.synchronize()?;
    check_output(gpu, "big_grid out", dout, threads, &want)
}

/// `x` (an i32) converted to f32 rounding toward zero (`cvt.rz.f32.s32`).
fn i32_to_f32_rz(x: i32) -> f32 {
    let r = x as f32;
    if (r as i64).abs() > (x as i64).abs() {
        // One ulp toward zero: the magnitude bits of a nonzero float step down by one.
        f32::from_bits(r.to_bits() - 1)
    } else {
        r
    }
}

/// Integer/float conversions, min/max, division, shifts, 8/16-bit loads and stores.
fn run_types_mix(gpu: &mut dyn Gpu) -> Result<()> {
    let mut rng = SplitMix64(0x5EED_0007);
    let n = 1000usize;
    let block = 256u32;
    let grid = n.div_ceil(block as usize) as u32;
    let threads = grid as usize * block as usize;
    let a: Vec<i32> = (0..n).map(|_| rng.next_u32() as i32).collect();
    let b: Vec<i32> = (0..n)
        .map(|i| {
            let v = if i % 3 == 0 { rng.range_i64(-30, 30) as i32 } else { rng.next_u32() as i32 };
            if v == 0 || (a[i] == i32::MIN && v == -1) {
                1
            } else {
                v
            }
        })
        .collect();
    // Quarter steps hit the .5 ties; the rest spans |f| < 2^31.
    let f: Vec<f32> = (0..n)
        .map(|i| if i % 2 == 0 { rng.range_i64(-4000, 4000) as f32 * 0.25 } else { rng.f32_normal(-10, 30) })
        .collect();
    let d: Vec<f64> = (0..n).map(|_| rng.f64_normal(-100, 100)).collect();
    let u8in: Vec<u8> = (0..n).map(|_| rng.next_u32() as u8).collect();
    let u16in: Vec<u16> = (0..n).map(|_| rng.next_u32() as u16).collect();

    let mut oi = vec![0i32; 16 * n];
    let mut of = vec![0f32; 4 * n];
    let mut ol = vec![0i64; 2 * n];
    let mut o8 = vec![0u8; n];
    let mut o16 = vec![0u16; n];
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        let (ux, uy) = (x as u32, y as u32);
        let (fv, dv) = (f[i], d[i]);
        let (w8, w16) = (u8in[i] as u32, u16in[i] as u32);
        let o = &mut oi[16 * i..16 * i + 16];
        o[0] = fv.round_ties_even() as i32;
        o[1] = fv.trunc() as i32;
        o[2] = fv.abs().round_ties_even() as u32 as i32;
        o[3] = x.min(y);
        o[4] = ux.min(uy) as i32;
        o[5] = x.max(y);
        o[6] = ux.max(uy) as i32;
        o[7] = x.wrapping_abs();
        o[8] = x / y;
        o[9] = x % y;
        o[10] = (ux / uy) as i32;
        o[11] = (ux % uy) as i32;
        o[12] = (ux << (uy & 31)) as i32;
        o[13] = x >> (y & 31);
        o[14] = (ux >> (uy & 31)) as i32;
        o[15] = if x > y { x.wrapping_sub(y) } else { w8 as i32 + (w16 as u16 as i16) as i32 };
        of[4 * i..4 * i + 4].copy_from_slice(&[x as f32, ux as f32, dv as f32, i32_to_f32_rz(x)]);
        ol[2 * i] = x as i64 * y as i64;
        ol[2 * i + 1] = (ux as u64 * uy as u64) as i64;
        o8[i] = w8.wrapping_add(ux) as u8;
        o16[i] = w16.wrapping_mul(3).wrapping_add(uy) as u16;
    }

    let k = gpu.load_fixture("types_mix.ptx", "types_mix")?;
    let inputs =
        [gpu.upload(&a)?, gpu.upload(&b)?, gpu.upload(&f)?, gpu.upload(&d)?, gpu.upload(&u8in)?, gpu.upload(&u16in)?];
    let doi = gpu.alloc_poisoned(16 * threads * 4 + GUARD)?;
    let dof = gpu.alloc_poisoned(4 * threads * 4 + GUARD)?;
    let dol = gpu.alloc_poisoned(2 * threads * 8 + GUARD)?;
    let do8 = gpu.alloc_poisoned(threads + GUARD)?;
    let do16 = gpu.alloc_poisoned(threads * 2 + GUARD)?;
    let mut args: Vec<Vec<u8>> = inputs.iter().map(|&p| arg(p)).collect();
    args.extend([doi, dof, dol, do8, do16].map(arg));
    args.push(arg(n as i32));
    let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    gpu.launch(k, [grid, 1, 1], [block, 1, 1], 0, &args)?;
    gpu.synchronize()?;
    check_output(gpu, "types_mix oi", doi, 16 * threads, &oi)?;
    check_output(gpu, "types_mix of", dof, 4 * threads, &of)?;
    check_output(gpu, "types_mix ol", dol, 2 * threads, &ol)?;
    check_output(gpu, "types_mix o8", do8, threads, &o8)?;
    check_output(gpu, "types_mix o16", do16, threads, &o16)
}

/// numba's `signed_zero(out, x)`: `v * 0.0`, `v + 0.0`, `0.0 - v` and
/// `math.sin(v)` (libdevice, which adds a literal `+0.0`) on signed zeros,
/// infinities, NaN and random values. llvmpipe folds `x + 0.0` to `x` and
/// `x * 0.0` to `0.0` unless the translator hides the constant.
fn run_numba_signed_zero(gpu: &mut dyn Gpu) -> Result<()> {
    let mut rng = SplitMix64(0x5EED_0009);
    let mut x = vec![-0.0f32, 0.0, -1.0, 1.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e-30, -1e-30, -1e-40];
    x.extend((0..990).map(|_| rng.f32_normal(-10, 10)));
    let n = x.len();
    let canon = |v: f32| if v.is_nan() { f32::from_bits(0x7fff_ffff) } else { v };
    let want: Vec<f32> = x.iter().flat_map(|&v| [canon(v * 0.0), canon(v + 0.0), canon(0.0 - v)]).collect();

    let ptx = ptxvk_tests::fixture("numba_signed_zero.ptx")?;
    let entries = ptx_entry_names(&ptx);
    assert_eq!(entries.len(), 1, "numba_signed_zero.ptx entries: {entries:?}");
    let k = gpu.load_kernel(&ptx, "numba_signed_zero.ptx", &entries[0])?;
    let dx = gpu.upload(&x)?;
    let dout = gpu.alloc_poisoned(4 * n * 4 + GUARD)?;
    // meminfo, parent, nitems, itemsize, data, shape[0], strides[0]
    let array = |data: u64, len: usize| -> Vec<Vec<u8>> {
        vec![arg(0u64), arg(0u64), arg(len as i64), arg(4i64), arg(data), arg(len as i64), arg(4i64)]
    };
    let mut args = array(dout, 4 * n);
    args.extend(array(dx, n));
    let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    gpu.launch(k, [(n as u32).div_ceil(128), 1, 1], [128, 1, 1], 0, &args)?;
    gpu.synchronize()?;
    let bytes = gpu.copy_dtoh(dout, 4 * n * 4 + GUARD)?;
    let got: Vec<f32> = from_bytes(&bytes[..4 * n * 4]);
    let what = format!("{} API: numba signed_zero", gpu.api());
    let arith: Vec<f32> = got.chunks(4).flat_map(|c| [c[0], c[1], c[2]]).collect();
    assert_bits_eq(&format!("{what} (v*0, v+0, 0-v)"), &arith, &want);
    // sin: exact where libdevice is (zeros, tiny values, inf, NaN), else
    // within 2 ulp of the correctly rounded value.
    for (i, &v) in x.iter().enumerate() {
        let s = got[4 * i + 3];
        let r = (v as f64).sin() as f32;
        if !v.is_finite() || v.abs() < 1e-20 {
            assert_eq!(s.to_bits(), canon(r).to_bits(), "{what}: sin({v:e}) = {s:e}, expected {r:e}");
        } else {
            let ulp = (s.to_bits() as i64 - r.to_bits() as i64).abs();
            assert!(s.signum() == r.signum() && ulp <= 2, "{what}: sin({v:e}) = {s:e}, expected {r:e}");
        }
    }
    assert_poisoned(&what, &bytes[4 * n * 4..]);
    Ok(())
}

/// numba's `saxpy(out, a, x, y)`: `out[i] = a.mul_add(x[i], y[i])` (f32), each
/// array passed as numba's 7-parameter descriptor.
fn run_numba_saxpy(gpu: &mut dyn Gpu) -> Result<()> {
    let mut rng = SplitMix64(0x5EED_0008);
    let n = 10_000usize;
    let block = 256u32;
    let grid = n.div_ceil(block as usize) as u32;
    let threads = grid as usize * block as usize;
    let a = rng.f32_normal(-4, 4);
    let x: Vec<f32> = (0..n).map(|_| rng.f32_normal(-20, 20)).collect();
    let y: Vec<f32> = (0..n).map(|_| rng.f32_normal(-20, 20)).collect();
    let want: Vec<f32> = x.iter().zip(&y).map(|(&x, &y)| a.mul_add(x, y)).collect();

    let ptx = ptxvk_tests::fixture("numba_saxpy.ptx")?;
    let entries = ptx_entry_names(&ptx);
    assert_eq!(entries.len(), 1, "numba_saxpy.ptx entries: {entries:?}");
    let k = gpu.load_kernel(&ptx, "numba_saxpy.ptx", &entries[0])?;
    let dx = gpu.upload(&x)?;
    let dy = gpu.upload(&y)?;
    let dout = gpu.alloc_poisoned(threads * 4 + GUARD)?;
    // meminfo, parent, nitems, itemsize, data, shape[0], strides[0]
    let array = |data: u64| -> Vec<Vec<u8>> {
        vec![arg(0u64), arg(0u64), arg(n as i64), arg(4i64), arg(data), arg(n as i64), arg(4i64)]
    };
    let mut args = array(dout);
    args.push(arg(a));
    args.extend(array(dx));
    args.extend(array(dy));
    let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    assert_eq!(args.len(), 22);
    gpu.launch(k, [grid, 1, 1], [block, 1, 1], 0, &args)?;
    gpu.synchronize()?;
    check_output(gpu, "numba saxpy out", dout, threads, &want)
}

/// The CPU reference of `cvt.rz.f32.s32` itself.
#[test]
fn rz_reference() {
    assert_eq!(i32_to_f32_rz(16_777_217), 16_777_216.0);
    assert_eq!(i32_to_f32_rz(16_777_219), 16_777_218.0); // `as` rounds this one up to ...220
    assert_eq!(i32_to_f32_rz(-16_777_219), -16_777_218.0);
    assert_eq!(i32_to_f32_rz(i32::MAX), 2_147_483_520.0);
    assert_eq!(i32_to_f32_rz(i32::MIN), -2_147_483_648.0);
    assert_eq!(i32_to_f32_rz(0).to_bits(), 0);
    assert_eq!(i32_to_f32_rz(-5), -5.0);
}

/// `var[imm]` array-element operands (hand-written `array_elements.ptx`):
/// loads of `.global`/`.const` arrays of 8, 4, 2 and 1-byte elements, a
/// store, and element addresses taken with `mov`; the index counts elements.
fn run_array_elements(gpu: &mut dyn Gpu) -> Result<()> {
    let k = gpu.load_fixture("array_elements.ptx", "array_elements")?;
    let count = 10;
    let out = gpu.alloc_poisoned(count * 8 + GUARD)?;
    gpu.launch(k, [1, 1, 1], [32, 1, 1], 0, &[&arg(out)])?;
    gpu.synchronize()?;
    // big[2], words[7], halves[3], bytes[5], words[1] after the store of 77,
    // *(&big[3]), words[3], big[0] after the store of big[3], *(&bytes[2]+1),
    // &big[3] - &big[0].
    let want: [u64; 10] = [30, 8, 400, 16, 77, 40, 4, 40, 14, 24];
    check_output(gpu, "array_elements out", out, count, &want)
}

/// A `.local` array in a nested block that shadows the function's array of
/// the same name (hand-written `scope_shadow.ptx`): inside the block,
/// `buf+4`, `buf[2]` and `buf+12` (addresses taken with `mov`) are the
/// inner array's elements, outside it the outer array's.
fn run_scope_shadow(gpu: &mut dyn Gpu) -> Result<()> {
    let k = gpu.load_fixture("scope_shadow.ptx", "scope_shadow")?;
    let count = 6;
    let out = gpu.alloc_poisoned(count * 4 + GUARD)?;
    gpu.launch(k, [1, 1, 1], [32, 1, 1], 0, &[&arg(out)])?;
    gpu.synchronize()?;
    // Inner buf[1], buf[2], buf[3] after the store of 99 through `buf+12`;
    // outer buf[1], buf[2], buf[3] (the inner stores did not reach them).
    let want: [u32; 6] = [21, 22, 99, 11, 12, 13];
    check_output(gpu, "scope_shadow out", out, count, &want)
}
