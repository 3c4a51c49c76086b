//! Warp operations and barriers in divergent code (issue 7; issue 4 item 5),
//! run on every warp path the device offers: the nvcc kernels of
//! `tests/fixtures/warp/warp_divergence.cu` and a hand-written PTX kernel
//! for the forms nvcc does not emit for sm_80 (legacy `vote`/`shfl`,
//! `elect.sync`, named barriers with thread counts, `bar.arrive`).
//!
//! Inputs are random with fixed seeds, outputs are poisoned before each
//! launch, and each result is compared with a CPU reference. A path the
//! device does not offer is skipped with a message (lavapipe offers only
//! the emulated path; a GPU with 32-wide subgroups also runs native).

mod common;

use common::{assert_clean, context, Lcg};
use ptxvk_runtime::{Context, Function, Module, WarpPath};

const DIVERGENCE: &str = include_str!("../../tests/fixtures/warp/warp_divergence.ptx");
/// The same kernels from `nvcc -G -O0`: branchier control flow, `bra.uni`, debug sections.
const DIVERGENCE_DEBUG: &str = include_str!("../../tests/fixtures/warp/warp_divergence_debug.ptx");
/// nvcc's 40 rounds of votes (`tests/fixtures/warp/vote_rotation.cu`).
const VOTE_ROTATION: &str = include_str!("../../tests/fixtures/warp/vote_rotation.ptx");
const POISON: u32 = 0xDEAD_BEEF;

/// Runs `body` once per warp path the device offers, saying which are skipped.
fn on_every_path(name: &str, ptx: &str, body: impl Fn(&Context, &Module)) {
    let ctx = context();
    for path in [WarpPath::Native, WarpPath::Slice, WarpPath::Emulated] {
        if !ctx.info().warp_paths.contains(&path) {
            eprintln!(
                "{name}: skipping the {} warp path: {} (subgroup size {}) does not offer it",
                path.name(),
                ctx.info().name,
                ctx.info().subgroup_size
            );
            continue;
        }
        let m = ctx.load_module_with_warp_path(ptx, "warp.ptx", path).expect("translate and load");
        assert_eq!(m.warp_path(), path);
        body(&ctx, &m);
    }
    assert_clean(&ctx);
}

/// [`on_every_path`] for the `-O3` and the `-G` build of the nvcc kernels.
fn on_every_fixture(name: &str, body: impl Fn(&Context, &Module)) {
    on_every_path(name, DIVERGENCE, &body);
    on_every_path(&format!("{name} (-G)"), DIVERGENCE_DEBUG, &body);
}

fn upload(ctx: &Context, data: &[u32]) -> u64 {
    let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
    let d = ctx.alloc(bytes.len() as u64).unwrap();
    ctx.copy_htod(d, &bytes).unwrap();
    d
}

fn poisoned(ctx: &Context, n: usize) -> u64 {
    let d = ctx.alloc(n as u64 * 4).unwrap();
    ctx.memset_d32(d, POISON, n as u64).unwrap();
    d
}

fn download(ctx: &Context, d: u64, n: usize) -> Vec<u32> {
    let mut bytes = vec![0u8; n * 4];
    ctx.copy_dtoh(&mut bytes, d).unwrap();
    bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn launch(ctx: &Context, f: &Function, grid: u32, block: u32, args: &[&[u8]]) {
    let params = f.pack_params(args).unwrap();
    ctx.launch(f, [grid, 1, 1], [block, 1, 1], 0, &params).unwrap();
}

/// `n` random values in `lo..=hi`.
fn random(seed: u64, n: usize, lo: i32, hi: i32) -> Vec<i32> {
    let mut rng = Lcg(seed);
    let span = (hi as i64 - lo as i64 + 1) as u64;
    (0..n).map(|_| (lo as i64 + (rng.next_u32() as u64 % span) as i64) as i32).collect()
}

fn as_u32(v: &[i32]) -> Vec<u32> {
    v.iter().map(|&x| x as u32).collect()
}

/// Mask of the lanes of warp `w` (of a block of `block` threads) that exist.
fn existing(block: usize, w: usize) -> u32 {
    let n = block.saturating_sub(w * 32).min(32);
    if n == 32 {
        u32::MAX
    } else {
        (1u32 << n) - 1
    }
}

fn check(what: &str, got: &[u32], want: &[u32]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g, w, "{what}: element {i}: got {g:#x}, expected {w:#x}");
    }
}

#[test]
fn warp0_reduce() {
    on_every_fixture("warp0_reduce", |ctx, m| {
        let f = m.function("warp0_reduce").unwrap();
        let n = 5000usize;
        let grid = n.div_ceil(256);
        let x = random(11, grid * 256, -1000, 1000);
        let din = upload(ctx, &as_u32(&x));
        let dout = poisoned(ctx, grid);
        launch(ctx, &f, grid as u32, 256, &[&din.to_le_bytes(), &dout.to_le_bytes(), &(n as i32).to_le_bytes()]);
        let want: Vec<u32> = (0..grid)
            .map(|b| x[b * 256..((b + 1) * 256).min(n)].iter().fold(0i32, |a, &v| a.wrapping_add(v)) as u32)
            .collect();
        check("warp0_reduce", &download(ctx, dout, grid), &want);
        ctx.free(din).unwrap();
        ctx.free(dout).unwrap();
    });
}

/// Many votes in a row reuse the emulated path's vote and ballot slots
/// (each one- and two-condition kind in its own rotation): every result
/// must be the vote of its own round.
#[test]
fn vote_rotation() {
    on_every_path("vote_rotation", VOTE_ROTATION, |ctx, m| {
        let f = m.function("vote_rotation").unwrap();
        let (grid, block, rounds) = (3usize, 96usize, 40i32);
        let total = grid * block;
        let x = as_u32(&random(41, total, i32::MIN, i32::MAX));
        let din = upload(ctx, &x);
        let dout = poisoned(ctx, total);
        launch(ctx, &f, grid as u32, block as u32, &[&din.to_le_bytes(), &dout.to_le_bytes(), &rounds.to_le_bytes()]);
        let mut want = vec![0u32; total];
        for w in 0..total / 32 {
            let mut v: Vec<u32> = x[w * 32..w * 32 + 32].to_vec();
            let mut acc = [0u32; 32];
            let mask = |v: &[u32], p: &dyn Fn(u32) -> bool| (0..32).filter(|&l| p(v[l])).fold(0u32, |m, l| m | 1 << l);
            for r in 0..rounds as u32 {
                let b = mask(&v, &|x| (x >> (r & 31)) & 1 != 0);
                let all = mask(&v, &|x| (x >> ((r + 3) & 31)) & 1 != 0) == u32::MAX;
                let any = mask(&v, &|x| (x >> ((r + 5) & 31)) & 3 == 3) != 0;
                let taken = mask(&v, &|x| x & (1 << ((r + 1) & 31)) != 0);
                let b2 = mask(&v, &|x| (x >> ((r + 7) & 31)) & 1 != 0) & taken;
                let all2 = mask(&v, &|x| (x >> ((r + 11) & 31)) & 1 != 0) & taken == taken;
                for l in 0..32 {
                    acc[l] = acc[l]
                        .wrapping_mul(31)
                        .wrapping_add(b)
                        .wrapping_add((all as u32) << 1)
                        .wrapping_add(any as u32);
                    if taken & 1 << l != 0 {
                        acc[l] ^= b2.wrapping_add(taken.wrapping_mul(3)).wrapping_add(all2 as u32);
                    }
                    v[l] = v[l].wrapping_mul(1664525).wrapping_add(1013904223);
                }
            }
            want[w * 32..w * 32 + 32].copy_from_slice(&acc);
        }
        check("vote_rotation", &download(ctx, dout, total), &want);
        ctx.free(din).unwrap();
        ctx.free(dout).unwrap();
    });
}

#[test]
fn ballot_in_if() {
    on_every_fixture("ballot_in_if", |ctx, m| {
        let f = m.function("ballot_in_if").unwrap();
        let (grid, block) = (4usize, 128usize);
        let total = grid * block;
        let x = random(12, total, 0, 255);
        let din = upload(ctx, &as_u32(&x));
        let dout = poisoned(ctx, 2 * total);
        launch(ctx, &f, grid as u32, block as u32, &[&din.to_le_bytes(), &dout.to_le_bytes()]);
        let mut want = vec![0u32; 2 * total];
        for w in 0..total / 32 {
            let lanes = &x[w * 32..w * 32 + 32];
            let mask = |p: &dyn Fn(i32) -> bool| (0..32).filter(|&l| p(lanes[l])).fold(0u32, |m, l| m | 1 << l);
            let odd = mask(&|v| v & 1 != 0);
            let even = !odd;
            for (l, &v) in lanes.iter().enumerate() {
                let i = w * 32 + l;
                if v & 1 != 0 {
                    want[2 * i] = mask(&|v| v & 1 != 0 && v & 2 != 0);
                    want[2 * i + 1] = odd;
                } else {
                    want[2 * i] = even.count_ones() | 0x100;
                    want[2 * i + 1] = if mask(&|v| v & 1 == 0 && v & 4 != 0) != 0 { 7 } else { 9 };
                }
            }
        }
        check("ballot_in_if", &download(ctx, dout, 2 * total), &want);
        ctx.free(din).unwrap();
        ctx.free(dout).unwrap();
    });
}

#[test]
fn early_exit_sync() {
    on_every_fixture("early_exit_sync", |ctx, m| {
        let f = m.function("early_exit_sync").unwrap();
        let (n, block) = (1000usize, 256usize);
        let grid = n.div_ceil(block);
        let x = random(13, grid * block, -100000, 100000);
        let din = upload(ctx, &as_u32(&x));
        let dout = poisoned(ctx, grid * block);
        launch(
            ctx,
            &f,
            grid as u32,
            block as u32,
            &[&din.to_le_bytes(), &dout.to_le_bytes(), &(n as i32).to_le_bytes()],
        );
        let mut want = vec![POISON; grid * block];
        for (i, w) in want.iter_mut().enumerate().take(n) {
            let (b, t) = (i / block, i % block);
            let valid = block.min(n - b * block);
            let s = |t: usize| x[b * block + t].wrapping_mul(3);
            *w = s(t).wrapping_add(s((t + 1) % valid)) as u32;
        }
        check("early_exit_sync", &download(ctx, dout, grid * block), &want);
        ctx.free(din).unwrap();
        ctx.free(dout).unwrap();
    });
}

#[test]
fn syncwarp_activemask() {
    on_every_fixture("syncwarp_activemask", |ctx, m| {
        let f = m.function("syncwarp_activemask").unwrap();
        let (grid, block) = (3usize, 48usize);
        let total = grid * block;
        let x = random(14, total, -50, 50);
        let din = upload(ctx, &as_u32(&x));
        let dout = poisoned(ctx, 2 * total);
        launch(ctx, &f, grid as u32, block as u32, &[&din.to_le_bytes(), &dout.to_le_bytes()]);
        let mut want = vec![0u32; 2 * total];
        for b in 0..grid {
            for t in 0..block {
                let (w, i) = (t / 32, b * block + t);
                let lanes = (w * 32..(w * 32 + 32).min(block)).map(|t| x[b * block + t]);
                let threes = lanes.enumerate().filter(|(_, v)| v % 3 == 0).fold(0u32, |m, (l, _)| m | 1 << l);
                want[2 * i] = if x[i] % 3 == 0 { threes } else { 0 };
                want[2 * i + 1] = existing(block, w);
            }
        }
        check("syncwarp_activemask", &download(ctx, dout, 2 * total), &want);
        ctx.free(din).unwrap();
        ctx.free(dout).unwrap();
    });
}

#[test]
fn partial_warp_vote() {
    on_every_fixture("partial_warp_vote", |ctx, m| {
        let f = m.function("partial_warp_vote").unwrap();
        let (grid, block) = (2usize, 50usize);
        let total = grid * block;
        let x = random(15, total, -1200, 1200);
        let din = upload(ctx, &as_u32(&x));
        let dout = poisoned(ctx, 4 * total);
        launch(ctx, &f, grid as u32, block as u32, &[&din.to_le_bytes(), &dout.to_le_bytes()]);
        let mut want = vec![0u32; 4 * total];
        for b in 0..grid {
            for t in 0..block {
                let (w, i) = (t / 32, b * block + t);
                let lanes: Vec<i32> = (w * 32..(w * 32 + 32).min(block)).map(|t| x[b * block + t]).collect();
                want[4 * i] = existing(block, w);
                want[4 * i + 1] = lanes.iter().enumerate().filter(|(_, &v)| v > 0).fold(0, |m, (l, _)| m | 1 << l);
                want[4 * i + 2] = lanes.iter().all(|&v| v > -1000) as u32;
                want[4 * i + 3] = lanes.iter().fold(0u32, |a, &v| a.wrapping_add(v as u32));
            }
        }
        check("partial_warp_vote", &download(ctx, dout, 4 * total), &want);
        ctx.free(din).unwrap();
        ctx.free(dout).unwrap();
    });
}

#[test]
fn noinline_collectives() {
    on_every_fixture("noinline_collectives", |ctx, m| {
        let f = m.function("noinline_collectives").unwrap();
        let (grid, block) = (3usize, 128usize);
        let total = grid * block;
        let x = random(16, total, -1 << 20, 1 << 20);
        let din = upload(ctx, &as_u32(&x));
        let dout = poisoned(ctx, 2 * total);
        launch(ctx, &f, grid as u32, block as u32, &[&din.to_le_bytes(), &dout.to_le_bytes()]);
        let mut want = vec![0u32; 2 * total];
        for i in 0..total {
            let (b, t) = (i / block, i % block);
            let w0 = b * block + t / 32 * 32;
            want[2 * i] = if t < 64 { x[w0..w0 + 32].iter().fold(0i32, |a, &v| a.wrapping_add(v)) as u32 } else { 0 };
            want[2 * i + 1] = x[b * block + 127 - t].wrapping_mul(3) as u32;
        }
        check("noinline_collectives", &download(ctx, dout, 2 * total), &want);
        ctx.free(din).unwrap();
        ctx.free(dout).unwrap();
    });
}

#[test]
fn sync_count() {
    on_every_fixture("sync_count", |ctx, m| {
        let f = m.function("sync_count").unwrap();
        let (grid, block) = (3usize, 100usize);
        let total = grid * block;
        let mut x = random(17, total, -1000, 1000);
        // Block 1: all above -500 (and is true); block 2: none above 900 (or is false).
        for v in &mut x[block..2 * block] {
            *v = v.abs() - 400;
        }
        for v in &mut x[2 * block..] {
            *v = (*v).min(900);
        }
        let din = upload(ctx, &as_u32(&x));
        let dout = poisoned(ctx, 3 * total);
        launch(ctx, &f, grid as u32, block as u32, &[&din.to_le_bytes(), &dout.to_le_bytes()]);
        let mut want = vec![0u32; 3 * total];
        for b in 0..grid {
            let xs = &x[b * block..(b + 1) * block];
            let c = xs.iter().filter(|&&v| v > 0).count() as u32;
            let a = xs.iter().all(|&v| v > -500) as u32;
            let o = xs.iter().any(|&v| v > 900) as u32;
            for t in 0..block {
                let i = b * block + t;
                want[3 * i..3 * i + 3].copy_from_slice(&[c, a, o]);
            }
        }
        check("sync_count", &download(ctx, dout, 3 * total), &want);
        ctx.free(din).unwrap();
        ctx.free(dout).unwrap();
    });
}

#[test]
fn warp_aggregate() {
    on_every_fixture("warp_aggregate", |ctx, m| {
        let f = m.function("warp_aggregate").unwrap();
        let (n, block) = (1000usize, 128usize);
        let grid = n.div_ceil(block);
        let x = random(18, grid * block, 0, 1 << 20);
        let din = upload(ctx, &as_u32(&x));
        let dh = ctx.alloc(64).unwrap();
        ctx.memset_d32(dh, 0, 16).unwrap();
        launch(ctx, &f, grid as u32, block as u32, &[&din.to_le_bytes(), &dh.to_le_bytes(), &(n as i32).to_le_bytes()]);
        let mut want = vec![0u32; 16];
        for &v in &x[..n] {
            want[(v & 15) as usize] += 1;
        }
        check("warp_aggregate", &download(ctx, dh, 16), &want);
        ctx.free(din).unwrap();
        ctx.free(dh).unwrap();
    });
}

#[test]
fn leader_loop() {
    on_every_fixture("leader_loop", |ctx, m| {
        let f = m.function("leader_loop").unwrap();
        let (grid, block) = (4usize, 64usize);
        let total = grid * block;
        let mut x: Vec<i32> = random(19, total, -20, 20).into_iter().map(|v| if v % 2 == 0 { 0 } else { v }).collect();
        // One warp has nothing to do: its loop runs zero times.
        for v in &mut x[96..128] {
            *v = 0;
        }
        let din = upload(ctx, &as_u32(&x));
        let dout = poisoned(ctx, total);
        launch(ctx, &f, grid as u32, block as u32, &[&din.to_le_bytes(), &dout.to_le_bytes()]);
        let mut want = vec![0u32; total];
        for w in 0..total / 32 {
            let s = (0..32)
                .filter(|&l| x[w * 32 + l] != 0)
                .fold(0i32, |a, l| a.wrapping_add(x[w * 32 + l] * (l as i32 + 1)));
            for v in &mut want[w * 32..w * 32 + 32] {
                *v = s as u32;
            }
        }
        check("leader_loop", &download(ctx, dout, total), &want);
        ctx.free(din).unwrap();
        ctx.free(dout).unwrap();
    });
}

#[test]
fn loop_then_sync() {
    on_every_fixture("loop_then_sync", |ctx, m| {
        let f = m.function("loop_then_sync").unwrap();
        let (grid, block) = (2usize, 128usize);
        let total = grid * block;
        let x: Vec<u32> = as_u32(&random(20, total, 0, 100000));
        let din = upload(ctx, &x);
        let dout = poisoned(ctx, total);
        launch(ctx, &f, grid as u32, block as u32, &[&din.to_le_bytes(), &dout.to_le_bytes()]);
        let steps: Vec<u32> = x
            .iter()
            .map(|&v| {
                let (mut v, mut s) = (v, 0u32);
                while v > 1 && s < 200 {
                    v = if v & 1 == 1 { v.wrapping_mul(3).wrapping_add(1) } else { v / 2 };
                    s += 1;
                    if v == 16 {
                        break;
                    }
                }
                s
            })
            .collect();
        let want: Vec<u32> = (0..total).map(|i| steps[i].wrapping_add(1000u32.wrapping_mul(steps[i ^ 1]))).collect();
        check("loop_then_sync", &download(ctx, dout, total), &want);
        ctx.free(din).unwrap();
        ctx.free(dout).unwrap();
    });
}

#[test]
fn sync_in_if() {
    on_every_fixture("sync_in_if", |ctx, m| {
        let f = m.function("sync_in_if").unwrap();
        let (grid, block) = (2usize, 128usize);
        let total = grid * block;
        let x = random(21, total, -1 << 20, 1 << 20);
        let din = upload(ctx, &as_u32(&x));
        for flag in [0i32, 1] {
            let dout = poisoned(ctx, total);
            launch(ctx, &f, grid as u32, block as u32, &[&din.to_le_bytes(), &dout.to_le_bytes(), &flag.to_le_bytes()]);
            let want: Vec<u32> = (0..total)
                .map(|i| {
                    let (b, t) = (i / block, i % block);
                    let v =
                        if flag != 0 { x[b * block + 127 - t] } else { x[b * block + ((t + 1) & 127)].wrapping_mul(2) };
                    v as u32
                })
                .collect();
            check("sync_in_if", &download(ctx, dout, total), &want);
            ctx.free(dout).unwrap();
        }
        ctx.free(din).unwrap();
    });
}

/// Forms nvcc does not emit for sm_80, one block of 64 threads; eight words
/// per thread.
const MISC: &str = r#"
.version 8.0
.target sm_90
.address_size 64
.visible .entry misc(.param .u64 out)
{
    .reg .pred %p<8>;
    .reg .b32 %r<24>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %laneid;
    mul.wide.u32 %rd2, %r1, 32;
    add.s64 %rd3, %rd1, %rd2;
    and.b32 %r3, %r1, 1;
    setp.eq.u32 %p1, %r3, 1;
    @!%p1 bra EVEN;
    elect.sync %r4|%p2, 0xaaaaaaaa;
    selp.u32 %r5, 1, 0, %p2;
    bra.uni DONE;
EVEN:
    mov.u32 %r4, 99;
    mov.u32 %r5, 7;
DONE:
    st.global.u32 [%rd3], %r4;
    st.global.u32 [%rd3+4], %r5;
    setp.gt.u32 %p3, %r2, 20;
    vote.ballot.b32 %r6, %p3;
    st.global.u32 [%rd3+8], %r6;
    setp.lt.u32 %p4, %r2, 40;
    vote.uni.pred %p5, %p4;
    selp.u32 %r7, 1, 0, %p5;
    st.global.u32 [%rd3+12], %r7;
    mul.lo.u32 %r8, %r2, 3;
    sub.u32 %r9, 31, %r2;
    shfl.idx.b32 %r10, %r8, %r9, 31;
    st.global.u32 [%rd3+16], %r10;
    bar.arrive 2, 64;
    bar.sync 2, 64;
    bar.red.popc.u32 %r11, 1, 64, %p3;
    st.global.u32 [%rd3+20], %r11;
    barrier.sync.aligned 3;
    shfl.sync.up.b32 %r12|%p6, %r8, 5, 0, -1;
    selp.u32 %r13, 1000, 0, %p6;
    add.u32 %r14, %r12, %r13;
    st.global.u32 [%rd3+24], %r14;
    cvt.u64.u32 %rd4, %r2;
    shr.u64 %rd5, %rd4, 4;
    match.all.sync.b64 %r15|%p7, %rd5, -1;
    selp.u32 %r16, 1, 0, %p7;
    add.u32 %r17, %r15, %r16;
    st.global.u32 [%rd3+28], %r17;
    ret;
}
"#;

#[test]
fn legacy_elect_named_barriers() {
    on_every_path("legacy_elect_named_barriers", MISC, |ctx, m| {
        let f = m.function("misc").unwrap();
        let threads = 64usize;
        let dout = poisoned(ctx, 8 * threads);
        launch(ctx, &f, 1, threads as u32, &[&dout.to_le_bytes()]);
        let mut want = vec![0u32; 8 * threads];
        for t in 0..threads {
            let lane = (t % 32) as u32;
            let o = &mut want[8 * t..8 * t + 8];
            if t % 2 == 1 {
                o[0] = 1;
                o[1] = (lane == 1) as u32;
            } else {
                o[0] = 99;
                o[1] = 7;
            }
            o[2] = 0xFFE0_0000;
            o[3] = 1;
            o[4] = (31 - lane) * 3;
            o[5] = 22;
            o[6] = if lane >= 5 { (lane - 5) * 3 + 1000 } else { lane * 3 };
            // Keys lane >> 4 differ within a warp: match.all gives 0 and false.
            o[7] = 0;
        }
        check("misc", &download(ctx, dout, 8 * threads), &want);
        ctx.free(dout).unwrap();
    });
}

/// Launch checks count the translator's scratch memory.
#[test]
fn scratch_is_reported() {
    let ctx = context();
    let m = ctx.load_module_with_warp_path(DIVERGENCE, "warp.ptx", WarpPath::Emulated).unwrap();
    let info = m.function("ballot_in_if").unwrap().info().clone();
    // Two exchange buffers of a word per invocation; 2 vote slots and 2
    // slots of 2 ballot regions, a word for each of 32 warps.
    assert_eq!((info.scratch_words_per_invocation, info.scratch_words_fixed), (2, 2 + 2 * 2 * 32));
    // Plus the loop counters on llvmpipe (`Options::loop_limit`).
    // And the block ticket where the block order is on.
    let own = info.loop_counter_words + info.block_ticket_words;
    assert_eq!(info.scratch_bytes(128), (2 * 128 + 2 + 128 + own as u64) * 4);
    // One scratch array serves every entry of a module: an entry that needs
    // only the vote slots reports the module's size.
    let info = m.function("sync_count").unwrap().info().clone();
    assert_eq!((info.scratch_words_per_invocation, info.scratch_words_fixed), (2, 2 + 128));
    assert!(
        matches!(
            ctx.load_module_with_warp_path(DIVERGENCE, "warp.ptx", WarpPath::Slice),
            Err(ptxvk_runtime::Error::Unsupported(_))
        ) || ctx.info().warp_paths.contains(&WarpPath::Slice)
    );
    assert_clean(&ctx);
}

/// `exit` inside a `.func` before `bar.sync`: exited threads no longer take
/// part (blocks of 64; threads above 40 exit).
const EXIT_IN_FUNC: &str = r#"
.version 8.0
.target sm_80
.address_size 64
.func maybe_exit(.reg .b32 %x)
{
    .reg .pred %p;
    setp.gt.u32 %p, %x, 40;
    @%p exit;
    ret;
}
.visible .entry k(.param .u64 out)
{
    .shared .align 4 .b32 s[64];
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], 1;
    call maybe_exit, (%r1);
    shl.b32 %r2, %r1, 2;
    mov.u32 %r3, s;
    add.u32 %r4, %r3, %r2;
    st.shared.u32 [%r4], %r1;
    bar.sync 0;
    shr.u32 %r5, %r1, 1;
    shl.b32 %r5, %r5, 2;
    add.u32 %r5, %r3, %r5;
    ld.shared.u32 %r6, [%r5];
    add.u32 %r6, %r6, 100;
    st.global.u32 [%rd3], %r6;
    ret;
}
"#;

#[test]
fn exit_in_func_before_barrier() {
    on_every_path("exit_in_func_before_barrier", EXIT_IN_FUNC, |ctx, m| {
        let f = m.function("k").unwrap();
        let dout = poisoned(ctx, 64);
        launch(ctx, &f, 1, 64, &[&dout.to_le_bytes()]);
        let want: Vec<u32> = (0..64u32).map(|t| if t > 40 { 1 } else { t / 2 + 100 }).collect();
        check("exit_in_func", &download(ctx, dout, 64), &want);
        ctx.free(dout).unwrap();
    });
    // The same with a barrier in the function: it runs in uniform mode too.
    let uniform = EXIT_IN_FUNC.replace("    setp.gt.u32 %p, %x, 40;", "    bar.sync 0;\n    setp.gt.u32 %p, %x, 40;");
    on_every_path("exit_in_uniform_func_before_barrier", &uniform, |ctx, m| {
        let f = m.function("k").unwrap();
        let dout = poisoned(ctx, 64);
        launch(ctx, &f, 1, 64, &[&dout.to_le_bytes()]);
        let want: Vec<u32> = (0..64u32).map(|t| if t > 40 { 1 } else { t / 2 + 100 }).collect();
        check("exit_in_uniform_func", &download(ctx, dout, 64), &want);
        ctx.free(dout).unwrap();
    });
}

/// An irreducible loop (entered at A or B by thread parity) before
/// `bar.sync` (blocks of 64).
const IRREDUCIBLE_THEN_SYNC: &str = r#"
.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 out)
{
    .shared .align 4 .b32 s[64];
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %r1;
    mov.u32 %r3, 0;
    and.b32 %r4, %r1, 7;
    add.u32 %r4, %r4, 3;
    and.b32 %r5, %r1, 1;
    setp.eq.u32 %p1, %r5, 1;
    @%p1 bra B;
A:
    shl.b32 %r2, %r2, 1;
    add.u32 %r2, %r2, 1;
    add.u32 %r3, %r3, 1;
    setp.ge.u32 %p2, %r3, %r4;
    @%p2 bra DONE;
B:
    add.u32 %r2, %r2, 3;
    add.u32 %r3, %r3, 1;
    setp.lt.u32 %p3, %r3, %r4;
    @%p3 bra A;
DONE:
    shl.b32 %r6, %r1, 2;
    mov.u32 %r7, s;
    add.u32 %r8, %r7, %r6;
    st.shared.u32 [%r8], %r2;
    bar.sync 0;
    xor.b32 %r9, %r6, 4;
    add.u32 %r9, %r7, %r9;
    ld.shared.u32 %r10, [%r9];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r10;
    ret;
}
"#;

#[test]
fn irreducible_loop_before_barrier() {
    on_every_path("irreducible_loop_before_barrier", IRREDUCIBLE_THEN_SYNC, |ctx, m| {
        let f = m.function("k").unwrap();
        let dout = poisoned(ctx, 64);
        launch(ctx, &f, 1, 64, &[&dout.to_le_bytes()]);
        let run = |t: u32| {
            let (mut x, mut c, lim) = (t, 0u32, (t & 7) + 3);
            let mut at_a = t & 1 == 0;
            loop {
                if at_a {
                    x = x.wrapping_mul(2).wrapping_add(1);
                    c += 1;
                    if c >= lim {
                        return x;
                    }
                }
                x = x.wrapping_add(3);
                c += 1;
                if c >= lim {
                    return x;
                }
                at_a = true;
            }
        };
        let want: Vec<u32> = (0..64u32).map(|t| run(t ^ 1)).collect();
        check("irreducible", &download(ctx, dout, 64), &want);
        ctx.free(dout).unwrap();
    });
}
