//! Stream tags (`with_stream_tag`): commands of different streams share
//! epochs between barriers (so they may run concurrently on the device),
//! commands of one stream are ordered by a barrier, untagged work is
//! ordered against everything, and `order_next` orders the next command
//! behind all earlier ones. Counted with `Context::barriers_recorded`, and
//! checked on data: read-modify-write kernels on per-stream buffers
//! interleaved across streams.

mod common;

use common::{assert_clean, context, download_u32, upload_u32, Lcg};
use ptxvk_runtime::{with_stream_tag, Context};

const ADD: &str = r#"
.version 8.0
.target sm_80
.address_size 64
.visible .entry add_scaled(.param .u64 buf, .param .u64 src, .param .u32 k, .param .u32 n)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<6>;
    .reg .pred %p1;
    ld.param.u64 %rd1, [buf];
    ld.param.u64 %rd2, [src];
    ld.param.u32 %r1, [k];
    ld.param.u32 %r2, [n];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.u32 %r6, %r3, %r4, %r5;
    setp.ge.u32 %p1, %r6, %r2;
    @%p1 ret;
    mul.wide.u32 %rd3, %r6, 4;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    ld.global.u32 %r7, [%rd4];
    ld.global.u32 %r3, [%rd5];
    mad.lo.u32 %r7, %r3, %r1, %r7;
    st.global.u32 [%rd4], %r7;
    ret;
}
"#;

/// Barriers recorded by `f`, which starts a fresh batch.
fn barriers_of(ctx: &Context, f: impl FnOnce()) -> u64 {
    ctx.synchronize().unwrap();
    let before = ctx.barriers_recorded();
    f();
    ctx.synchronize().unwrap();
    ctx.barriers_recorded() - before
}

#[test]
fn barriers_only_behind_a_streams_own_work() {
    let ctx = context();
    let d = ctx.alloc(4096).unwrap();
    let fill = |tag: Option<u64>, i: u64| with_stream_tag(tag, || ctx.memset_d32(d + 64 * i, i as u32, 16).unwrap());
    let (a, b, c) = (Some(1), Some(2), Some(3));
    // One command per stream: one epoch.
    assert_eq!(barriers_of(&ctx, || [a, b, c].iter().enumerate().for_each(|(i, &t)| fill(t, i as u64))), 0);
    // A B A B: a barrier before the second A only (the second B is behind it too).
    assert_eq!(barriers_of(&ctx, || [a, b, a, b].iter().enumerate().for_each(|(i, &t)| fill(t, i as u64))), 1);
    // A A A: ordered one behind the other.
    assert_eq!(barriers_of(&ctx, || (0..3).for_each(|i| fill(a, i))), 2);
    // A, untagged, B: the untagged command is ordered both ways.
    assert_eq!(barriers_of(&ctx, || [a, None, b].iter().enumerate().for_each(|(i, &t)| fill(t, i as u64))), 2);
    // Untagged work is ordered as before tags existed: a barrier between each.
    assert_eq!(barriers_of(&ctx, || (0..4).for_each(|i| fill(None, i))), 3);
    // order_next: B after A waits for it.
    assert_eq!(
        barriers_of(&ctx, || {
            fill(a, 0);
            ctx.order_next();
            fill(b, 1);
            fill(c, 2);
        }),
        1
    );
    let mut out = vec![0u8; 192];
    ctx.copy_dtoh(&mut out, d).unwrap();
    let words: Vec<u32> = out.chunks_exact(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect();
    assert!(words[..16].iter().all(|&w| w == 0) && words[16..32].iter().all(|&w| w == 1), "{words:?}");
    assert_clean(&ctx);
}

/// Four streams, each a chain of read-modify-write launches and copies on
/// its own buffers, queued round robin (every stream's launch, then every
/// stream's copy); a last untagged launch reads one stream's copy. Every
/// result is the chain's, in order.
#[test]
fn interleaved_stream_chains_keep_their_order() {
    let ctx = context();
    let m = ctx.load_module(ADD, "add.ptx").unwrap();
    let f = m.function("add_scaled").unwrap();
    let n = 1000u32;
    let bytes = u64::from(n) * 4;
    let mut rng = Lcg(42);
    let streams = 4usize;
    let init: Vec<Vec<u32>> = (0..streams).map(|_| (0..n).map(|_| rng.next_u32()).collect()).collect();
    let src: Vec<Vec<u32>> = (0..streams).map(|_| (0..n).map(|_| rng.next_u32()).collect()).collect();
    let bufs: Vec<u64> = init.iter().map(|v| upload_u32(&ctx, v)).collect();
    let srcs: Vec<u64> = src.iter().map(|v| upload_u32(&ctx, v)).collect();
    let copies: Vec<u64> = (0..streams).map(|_| ctx.alloc(bytes).unwrap()).collect();
    ctx.synchronize().unwrap();
    let before = ctx.barriers_recorded();
    let steps = 5u32;
    for step in 0..steps {
        for s in 0..streams {
            with_stream_tag(Some(100 + s as u64), || {
                let k = step * 7 + s as u32 + 1;
                let p = f
                    .pack_params(&[&bufs[s].to_le_bytes(), &srcs[s].to_le_bytes(), &k.to_le_bytes(), &n.to_le_bytes()])
                    .unwrap();
                ctx.launch(&f, [n.div_ceil(128), 1, 1], [128, 1, 1], 0, &p).unwrap();
            });
        }
        for s in 0..streams {
            // The copy sees this stream's launch.
            with_stream_tag(Some(100 + s as u64), || ctx.copy_dtod(copies[s], bufs[s], bytes).unwrap());
        }
    }
    // Untagged: after every stream's chain. buf0 += 1000 * copy1.
    let k = 1000u32;
    let p =
        f.pack_params(&[&bufs[0].to_le_bytes(), &copies[1].to_le_bytes(), &k.to_le_bytes(), &n.to_le_bytes()]).unwrap();
    ctx.launch(&f, [n.div_ceil(128), 1, 1], [128, 1, 1], 0, &p).unwrap();
    // Counted before the synchronisation, which appends a copy of the
    // module's trap word (where it has one) behind a barrier of its own.
    let recorded = ctx.barriers_recorded() - before;
    ctx.synchronize().unwrap();
    // Per step, the four launches share an epoch, then the four copies:
    // 2 * steps epochs, and one more for the untagged launch.
    assert_eq!(recorded, u64::from(2 * steps), "barriers");
    let down = |d: u64| download_u32(&ctx, d, n as usize);
    let mut want: Vec<Vec<u32>> = init.clone();
    for step in 0..steps {
        for s in 0..streams {
            let k = step * 7 + s as u32 + 1;
            for i in 0..n as usize {
                want[s][i] = want[s][i].wrapping_add(src[s][i].wrapping_mul(k));
            }
        }
    }
    for s in 0..streams {
        assert_eq!(down(copies[s]), want[s], "stream {s}'s last copy");
    }
    let chain1 = want[1].clone();
    for i in 0..n as usize {
        want[0][i] = want[0][i].wrapping_add(chain1[i].wrapping_mul(k));
    }
    for s in 0..streams {
        assert_eq!(down(bufs[s]), want[s], "stream {s}'s buffer");
    }
    assert_clean(&ctx);
}
