//! The first-launch cost of warp votes: kernels of `n` `vote.sync.ballot`
//! instructions against kernels of `n` `shfl.sync.idx` (the baseline), for
//! `n` = 25 to 200. On a device whose subgroups are narrower than a warp
//! (lavapipe: 8 lanes) both are emulated through workgroup memory with one
//! barrier each, and llvmpipe compiles a kernel's barriers as coroutine
//! suspension points, so what each costs to compile decides whether real
//! kernels with hundreds of votes (CUB's radix sort) load at all. Each
//! kernel's first launch (pipeline compile included) is timed, and its
//! output checked against the host: every thread folds the votes' ballots
//! (or the shuffled values) into one word.

use std::error::Error;
use std::fmt::Write as _;
use std::time::Instant;

use ptxvk_runtime::Context;

/// Threads of the single block (8 warps).
const THREADS: u32 = 256;

/// Odd multiplier of vote `i`'s predicate.
fn multiplier(i: u32) -> u32 {
    (i.wrapping_mul(0x9E37_79B9) | 1).wrapping_add(2 * i)
}

/// The kernel `k` with `n` votes (`shfl` false) or shuffles.
fn kernel(n: u32, shfl: bool) -> String {
    let mut s = String::from(
        ".version 8.0\n.target sm_80\n.address_size 64\n\n.visible .entry k(.param .u64 out)\n{\n\
         .reg .b32 %r<8>;\n.reg .pred %p<2>;\n.reg .b64 %rd<4>;\n\
         ld.param.u64 %rd1, [out];\ncvta.to.global.u64 %rd1, %rd1;\nmov.u32 %r1, %tid.x;\nmov.u32 %r5, 0;\n",
    );
    for i in 0..n {
        let m = multiplier(i);
        let _ = writeln!(s, "mul.lo.u32 %r2, %r1, {m};");
        if shfl {
            let _ = writeln!(s, "shfl.sync.idx.b32 %r4, %r2, {}, 31, -1;", (i * 7) % 32);
        } else {
            let _ = writeln!(s, "shr.u32 %r3, %r2, 7;\nand.b32 %r3, %r3, 1;\nsetp.ne.u32 %p1, %r3, 0;");
            let _ = writeln!(s, "vote.sync.ballot.b32 %r4, %p1, -1;");
        }
        let _ = writeln!(s, "mul.lo.u32 %r5, %r5, 3;\nxor.b32 %r5, %r5, %r4;");
    }
    s.push_str("mul.wide.u32 %rd2, %r1, 4;\nadd.s64 %rd3, %rd1, %rd2;\nst.global.u32 [%rd3], %r5;\nret;\n}\n");
    s
}

/// What thread `t` stores.
fn expected(t: u32, n: u32, shfl: bool) -> u32 {
    let warp = t & !31;
    let mut acc = 0u32;
    for i in 0..n {
        let m = multiplier(i);
        let v = if shfl {
            (warp + (i * 7) % 32).wrapping_mul(m)
        } else {
            (0..32).filter(|l| ((warp + l).wrapping_mul(m) >> 7) & 1 != 0).fold(0, |b, l| b | 1 << l)
        };
        acc = acc.wrapping_mul(3) ^ v;
    }
    acc
}

/// First launch (seconds) of one kernel, and whether its output is right.
fn first_launch(ctx: &Context, n: u32, shfl: bool) -> Result<(f64, bool), Box<dyn Error>> {
    let m = ctx.load_module(&kernel(n, shfl), "votes.ptx")?;
    let f = m.function("k").ok_or("missing kernel")?;
    let out = ctx.alloc(u64::from(THREADS) * 4)?;
    ctx.memset_d32(out, 0xABAB_ABAB, u64::from(THREADS))?;
    let params = f.pack_params(&[&out.to_le_bytes()])?;
    let start = Instant::now();
    ctx.launch(&f, [1, 1, 1], [THREADS, 1, 1], 0, &params)?;
    ctx.synchronize()?;
    let secs = start.elapsed().as_secs_f64();
    let mut bytes = vec![0u8; THREADS as usize * 4];
    ctx.copy_dtoh(&mut bytes, out)?;
    ctx.free(out)?;
    let ok = bytes
        .chunks_exact(4)
        .enumerate()
        .all(|(t, c)| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) == expected(t as u32, n, shfl));
    Ok((secs, ok))
}

/// Runs the kernels; `Ok(false)` when an output is wrong.
pub fn run(ctx: &Context) -> Result<bool, Box<dyn Error>> {
    println!("warp votes: first launch (compile included) of n ballots, ratio to n shuffles");
    let mut ok = true;
    for n in [25, 50, 100, 200] {
        let (votes, good_votes) = first_launch(ctx, n, false)?;
        let (shuffles, good_shuffles) = first_launch(ctx, n, true)?;
        ok &= good_votes && good_shuffles;
        println!(
            "  n = {n:3}: ballots {votes:6.2} s, shuffles {shuffles:6.2} s, ratio {:5.2}{}",
            votes / shuffles,
            if good_votes && good_shuffles { "" } else { "  WRONG RESULTS" }
        );
    }
    Ok(ok)
}
