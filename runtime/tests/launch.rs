//! Kernel launches through the translator: parameters (push constants and
//! parameter buffers), grid splitting, block shapes, module variables,
//! dynamic shared memory, launch validation and the fma probe.

mod common;

use common::{assert_clean, context, download_u32, upload_u32, Lcg};
use ptxvk_runtime::{Error, ParamPassing};

const VADD: &str = include_str!("ptx/vadd_f32.ptx");
const BIG_GRID: &str = include_str!("ptx/big_grid.ptx");

#[test]
fn vadd_f32() {
    let ctx = context();
    let m = ctx.load_module(VADD, "vadd_f32.ptx").unwrap();
    assert_eq!(m.entry_names(), vec!["vadd_f32".to_string()]);
    let f = m.function("vadd_f32").unwrap();
    assert!(m.function("nope").is_none());
    let n = 50003usize;
    let mut rng = Lcg(7);
    let a: Vec<f32> = (0..n).map(|_| rng.next_u32() as f32 / 1e6).collect();
    let b: Vec<f32> = (0..n).map(|_| rng.next_u32() as f32 / 3e5).collect();
    let da = upload_u32(&ctx, &a.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    let db = upload_u32(&ctx, &b.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    let dc = ctx.alloc(n as u64 * 4).unwrap();
    ctx.memset_d32(dc, 0xdead_beef, n as u64).unwrap();
    let params =
        f.pack_params(&[&da.to_le_bytes(), &db.to_le_bytes(), &dc.to_le_bytes(), &(n as i32).to_le_bytes()]).unwrap();
    ctx.launch(&f, [n.div_ceil(256) as u32, 1, 1], [256, 1, 1], 0, &params).unwrap();
    let c = download_u32(&ctx, dc, n);
    for i in 0..n {
        assert_eq!(c[i], (a[i] + b[i]).to_bits(), "element {i}");
    }
    // Wrong argument sizes are rejected.
    assert!(matches!(f.pack_params(&[&[0u8; 8], &[0u8; 8], &[0u8; 8]]), Err(Error::InvalidValue(_))));
    assert!(matches!(f.pack_params(&[&[0u8; 8], &[0u8; 8], &[0u8; 8], &[0u8; 8]]), Err(Error::InvalidValue(_))));
    for d in [da, db, dc] {
        ctx.free(d).unwrap();
    }
    assert_clean(&ctx);
}

/// 70000 blocks in x: more than one dispatch on devices limited to 65535.
#[test]
fn big_grid_is_split() {
    let ctx = context();
    let m = ctx.load_module(BIG_GRID, "big_grid.ptx").unwrap();
    let f = m.function("big_grid").unwrap();
    let blocks = 70000u32;
    let n = (blocks * 32 - 5) as usize;
    let d = ctx.alloc((blocks * 32) as u64 * 4).unwrap();
    ctx.memset_d32(d, 0x5555_5555, (blocks * 32) as u64).unwrap();
    let params = f.pack_params(&[&d.to_le_bytes(), &(n as i32).to_le_bytes()]).unwrap();
    ctx.launch(&f, [blocks, 1, 1], [32, 1, 1], 0, &params).unwrap();
    let out = download_u32(&ctx, d, (blocks * 32) as usize);
    for (i, &v) in out.iter().enumerate() {
        let expect = if i < n { (i as u32 / 32).wrapping_mul(7) + i as u32 % 32 } else { 0x5555_5555 };
        assert_eq!(v, expect, "element {i}");
    }
    assert!(ctx.info().max_dispatch[0] < blocks || ctx.info().max_dispatch[0] >= blocks);
    ctx.free(d).unwrap();
    assert_clean(&ctx);
}

const IDS: &str = r#"
.version 7.0
.target sm_80
.address_size 64
.visible .entry ids(.param .u64 out)
{
    .reg .b32 %r<20>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %tid.y;
    mov.u32 %r3, %tid.z;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %ntid.y;
    mov.u32 %r6, %ntid.z;
    mov.u32 %r7, %ctaid.x;
    mov.u32 %r8, %ctaid.y;
    mov.u32 %r9, %ctaid.z;
    mov.u32 %r10, %nctaid.x;
    mov.u32 %r11, %nctaid.y;
    // block linear = (ctaid.z * nctaid.y + ctaid.y) * nctaid.x + ctaid.x
    mad.lo.u32 %r12, %r9, %r11, %r8;
    mad.lo.u32 %r12, %r12, %r10, %r7;
    // thread linear = (tid.z * ntid.y + tid.y) * ntid.x + tid.x
    mad.lo.u32 %r13, %r3, %r5, %r2;
    mad.lo.u32 %r13, %r13, %r4, %r1;
    mul.lo.u32 %r14, %r4, %r5;
    mul.lo.u32 %r14, %r14, %r6;
    mad.lo.u32 %r15, %r12, %r14, %r13;
    // value = tid.x | tid.y << 8 | tid.z << 16 | ctaid.x << 20 | ctaid.y << 24 | ctaid.z << 28
    shl.b32 %r16, %r2, 8;
    or.b32 %r16, %r16, %r1;
    shl.b32 %r17, %r3, 16;
    or.b32 %r16, %r16, %r17;
    shl.b32 %r17, %r7, 20;
    or.b32 %r16, %r16, %r17;
    shl.b32 %r17, %r8, 24;
    or.b32 %r16, %r16, %r17;
    shl.b32 %r17, %r9, 28;
    or.b32 %r16, %r16, %r17;
    mul.wide.u32 %rd2, %r15, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r16;
    ret;
}
"#;

#[test]
fn block_and_grid_shapes() {
    let ctx = context();
    let m = ctx.load_module(IDS, "ids.ptx").unwrap();
    let f = m.function("ids").unwrap();
    for (grid, block) in [([3u32, 2, 2], [5u32, 3, 2]), ([2, 3, 4], [4, 2, 2]), ([1, 1, 1], [33, 1, 1])] {
        let threads = (block[0] * block[1] * block[2]) as usize;
        let blocks = (grid[0] * grid[1] * grid[2]) as usize;
        let d = ctx.alloc((threads * blocks * 4) as u64).unwrap();
        let params = f.pack_params(&[&d.to_le_bytes()]).unwrap();
        ctx.launch(&f, grid, block, 0, &params).unwrap();
        let out = download_u32(&ctx, d, threads * blocks);
        let mut i = 0;
        for cz in 0..grid[2] {
            for cy in 0..grid[1] {
                for cx in 0..grid[0] {
                    for tz in 0..block[2] {
                        for ty in 0..block[1] {
                            for tx in 0..block[0] {
                                let v = tx | ty << 8 | tz << 16 | cx << 20 | cy << 24 | cz << 28;
                                assert_eq!(out[i], v, "grid {grid:?} block {block:?} index {i}");
                                i += 1;
                            }
                        }
                    }
                }
            }
        }
        ctx.free(d).unwrap();
    }
    assert_clean(&ctx);
}

/// 16 u64 parameters (128 bytes) do not fit lavapipe's 128-byte push
/// constants after the 32-byte header: they go through a parameter buffer.
#[test]
fn many_params_use_a_buffer() {
    let ctx = context();
    let mut ptx = String::from(".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry sum16(\n");
    for i in 0..16 {
        ptx += &format!("    .param .u64 p{i},\n");
    }
    ptx += "    .param .u64 out\n)\n{\n    .reg .b64 %rd<40>;\n    mov.u64 %rd30, 0;\n";
    for i in 0..16 {
        ptx += &format!("    ld.param.u64 %rd{i}, [p{i}];\n    add.s64 %rd30, %rd30, %rd{i};\n");
    }
    ptx += "    ld.param.u64 %rd31, [out];\n    st.global.u64 [%rd31], %rd30;\n    ret;\n}\n";
    let m = ctx.load_module(&ptx, "sum16.ptx").unwrap();
    let f = m.function("sum16").unwrap();
    let info = f.info();
    assert_eq!(info.param_bytes, 136);
    if ctx.info().max_push_constant_bytes < 32 + 136 {
        assert_eq!(info.param_passing, ParamPassing::Buffer);
    }
    let d = ctx.alloc(8).unwrap();
    let vals: Vec<[u8; 8]> = (0..16u64).map(|i| (i * 1_000_000_007 + (i << 40)).to_le_bytes()).collect();
    let mut args: Vec<&[u8]> = vals.iter().map(|v| v.as_slice()).collect();
    let out = d.to_le_bytes();
    args.push(&out);
    let params = f.pack_params(&args).unwrap();
    // Two launches in one batch: each keeps its own parameter buffer.
    ctx.launch(&f, [1, 1, 1], [1, 1, 1], 0, &params).unwrap();
    let d2 = ctx.alloc(8).unwrap();
    let mut params2 = params.clone();
    params2[128..136].copy_from_slice(&d2.to_le_bytes());
    ctx.launch(&f, [1, 1, 1], [1, 1, 1], 0, &params2).unwrap();
    let expect: u64 = (0..16u64).map(|i| i * 1_000_000_007 + (i << 40)).fold(0, u64::wrapping_add);
    let mut back = [0u8; 8];
    ctx.copy_dtoh(&mut back, d).unwrap();
    assert_eq!(u64::from_le_bytes(back), expect);
    ctx.copy_dtoh(&mut back, d2).unwrap();
    assert_eq!(u64::from_le_bytes(back), expect);
    ctx.free(d).unwrap();
    ctx.free(d2).unwrap();
    assert_clean(&ctx);
}

const GLOBALS: &str = r#"
.version 7.0
.target sm_80
.address_size 64
.global .align 4 .u32 table[4] = {10, 20, 30, 40};
.const .align 4 .u32 scale = 3;
.global .align 4 .u32 counter;
.visible .entry use_globals(.param .u64 out)
{
    .reg .b32 %r<10>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u64 %rd2, table;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.u32 %r2, [%rd4];
    ld.const.u32 %r3, [scale];
    mul.lo.u32 %r4, %r2, %r3;
    add.s64 %rd5, %rd1, %rd3;
    st.global.u32 [%rd5], %r4;
    atom.global.add.u32 %r5, [counter], 1;
    ret;
}
"#;

#[test]
fn module_globals() {
    let ctx = context();
    let m = ctx.load_module(GLOBALS, "globals.ptx").unwrap();
    let f = m.function("use_globals").unwrap();
    let (table, size) = m.global("table").unwrap();
    assert_eq!(size, 16);
    assert_eq!(ctx.allocation_of(table + 4).map(|(_, s)| s >= 16), Some(true));
    let (counter, _) = m.global("counter").unwrap();
    assert!(m.global("missing").is_none());
    assert!(matches!(ctx.free(table), Err(Error::InvalidValue(_))));
    let out = ctx.alloc(16).unwrap();
    let params = f.pack_params(&[&out.to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [4, 1, 1], 0, &params).unwrap();
    assert_eq!(download_u32(&ctx, out, 4), vec![30, 60, 90, 120]);
    assert_eq!(download_u32(&ctx, counter, 1), vec![4]);
    // The host can rewrite a variable (cuMemcpyHtoD to cuModuleGetGlobal's address).
    let (scale, _) = m.global("scale").unwrap();
    ctx.copy_htod(scale, &5u32.to_le_bytes()).unwrap();
    ctx.launch(&f, [1, 1, 1], [4, 1, 1], 0, &params).unwrap();
    assert_eq!(download_u32(&ctx, out, 4), vec![50, 100, 150, 200]);
    assert_eq!(download_u32(&ctx, table, 4), vec![10, 20, 30, 40]);
    drop(f);
    drop(m);
    // The module's range is gone with it.
    assert_eq!(ctx.allocation_of(table), None);
    ctx.free(out).unwrap();
    assert_clean(&ctx);
}

const DYN_SHARED: &str = r#"
.version 7.0
.target sm_80
.address_size 64
.extern .shared .align 16 .b8 smem[];
.visible .entry reverse(.param .u64 data)
{
    .reg .b32 %r<10>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [data];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ntid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r3, [%rd3];
    shl.b32 %r4, %r1, 2;
    mov.u32 %r5, smem;
    add.u32 %r6, %r5, %r4;
    st.shared.u32 [%r6], %r3;
    bar.sync 0;
    sub.u32 %r7, %r2, %r1;
    sub.u32 %r7, %r7, 1;
    shl.b32 %r8, %r7, 2;
    add.u32 %r9, %r5, %r8;
    ld.shared.u32 %r3, [%r9];
    st.global.u32 [%rd3], %r3;
    ret;
}
"#;

#[test]
fn dynamic_shared_and_launch_checks() {
    let ctx = context();
    let m = ctx.load_module(DYN_SHARED, "dyn.ptx").unwrap();
    let f = m.function("reverse").unwrap();
    let n = 256u32;
    let data: Vec<u32> = (0..n).map(|i| i * 3 + 1).collect();
    let d = upload_u32(&ctx, &data);
    let params = f.pack_params(&[&d.to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [n, 1, 1], n * 4, &params).unwrap();
    let out = download_u32(&ctx, d, n as usize);
    let expect: Vec<u32> = data.iter().rev().copied().collect();
    assert_eq!(out, expect);

    let info = ctx.info().clone();
    let bad = |r: Result<(), Error>| r.unwrap_err();
    assert!(matches!(bad(ctx.launch(&f, [0, 1, 1], [1, 1, 1], 0, &params)), Error::InvalidValue(_)));
    assert!(matches!(bad(ctx.launch(&f, [1, 1, 1], [1, 0, 1], 0, &params)), Error::InvalidValue(_)));
    assert!(matches!(
        bad(ctx.launch(&f, [1, 1, 1], [info.max_threads_per_block + 32, 1, 1], 0, &params)),
        Error::InvalidValue(_)
    ));
    assert!(matches!(bad(ctx.launch(&f, [1, 1, 1], [32, 32, 32], 0, &params)), Error::InvalidValue(_)));
    assert!(matches!(bad(ctx.launch(&f, [1, 65536, 1], [1, 1, 1], 0, &params)), Error::InvalidValue(_)));
    // Beyond the device's Workgroup memory shared memory spills to device
    // memory (`shared_spill.rs`), up to the runtime's 1 GiB per block.
    assert!(matches!(
        bad(ctx.launch(&f, [1, 1, 1], [32, 1, 1], (1 << 30) + 4, &params)),
        Error::LaunchOutOfResources(_)
    ));
    assert!(matches!(bad(ctx.launch(&f, [1, 1, 1], [32, 1, 1], 0, &params[..4])), Error::InvalidValue(_)));
    // The largest dynamic shared block still works.
    ctx.launch(&f, [1, 1, 1], [n, 1, 1], info.max_shared_bytes, &params).unwrap();
    assert_eq!(download_u32(&ctx, d, n as usize), data);
    ctx.free(d).unwrap();
    assert_clean(&ctx);
}

#[test]
fn invalid_ptx_is_reported() {
    let ctx = context();
    let err = ctx.load_module(".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k( {\n", "bad.ptx");
    match err {
        Err(Error::InvalidPtx(text)) => assert!(text.contains("bad.ptx:"), "{text}"),
        other => panic!("expected InvalidPtx, got {other:?}"),
    }
}

/// `fma.rn.f32` is fused whatever the driver does (emulated where it does not fuse).
#[test]
fn fma_is_fused() {
    let ctx = context();
    let ptx = ".version 7.0\n.target sm_80\n.address_size 64\n\
        .visible .entry probe(.param .u64 out, .param .f32 a, .param .f32 c){ .reg .b64 %rd<2>; .reg .f32 %f<4>; \
        ld.param.u64 %rd1,[out]; ld.param.f32 %f1,[a]; ld.param.f32 %f2,[c]; fma.rn.f32 %f3,%f1,%f1,%f2; \
        st.global.f32 [%rd1],%f3; ret; }";
    let m = ctx.load_module(ptx, "fma.ptx").unwrap();
    let f = m.function("probe").unwrap();
    let d = ctx.alloc(4).unwrap();
    let params = f.pack_params(&[&d.to_le_bytes(), &0x3F80_0800u32.to_le_bytes(), &(-1.0f32).to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [1, 1, 1], 0, &params).unwrap();
    assert_eq!(download_u32(&ctx, d, 1), vec![0x3A00_0400]);
    if ctx.info().driver_name.contains("llvmpipe") {
        assert!(ctx.info().emulate_fma, "lavapipe does not fuse Fma");
    }
    ctx.free(d).unwrap();
    assert_clean(&ctx);
}

/// Freeing memory and dropping a module while work that uses them is queued.
#[test]
fn free_and_drop_while_queued() {
    let ctx = context();
    let m = ctx.load_module(BIG_GRID, "big_grid.ptx").unwrap();
    let f = m.function("big_grid").unwrap();
    let d = ctx.alloc(4096 * 4).unwrap();
    let params = f.pack_params(&[&d.to_le_bytes(), &4096i32.to_le_bytes()]).unwrap();
    ctx.launch(&f, [128, 1, 1], [32, 1, 1], 0, &params).unwrap();
    drop(f);
    drop(m);
    ctx.free(d).unwrap();
    ctx.synchronize().unwrap();
    assert_clean(&ctx);
}

/// Every thread adds 1 to a counter and writes its linear index to
/// `out[%ctaid.x * ntid + linear]`; no guard on the thread count.
const COUNT_THREADS: &str = r#"
.version 7.0
.target sm_80
.address_size 64
.visible .entry count_threads(.param .u64 counter, .param .u64 out)
{
    .reg .b32 %r<10>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [counter];
    ld.param.u64 %rd2, [out];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    atom.global.add.u32 %r1, [%rd1], 1;
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %tid.y;
    mov.u32 %r4, %tid.z;
    mov.u32 %r5, %ntid.x;
    mov.u32 %r6, %ntid.y;
    mad.lo.u32 %r7, %r4, %r6, %r3;
    mad.lo.u32 %r7, %r7, %r5, %r2;
    mul.lo.u32 %r8, %r5, %r6;
    mov.u32 %r9, %ntid.z;
    mul.lo.u32 %r8, %r8, %r9;
    mov.u32 %r9, %ctaid.x;
    mad.lo.u32 %r9, %r9, %r8, %r7;
    mul.wide.u32 %rd3, %r9, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r7;
    ret;
}
"#;

/// Workgroups are padded to whole warps; the padding invocations run no
/// PTX. Blocks of 32, 64 and 96 threads have no padding (the translator's
/// test of it then folds away when the pipeline is made, see
/// `Emitter::padding_invocation`), blocks of 30, 33 and 1 thread have.
#[test]
fn padding_invocations_run_nothing() {
    let ctx = context();
    let m = ctx.load_module(COUNT_THREADS, "count_threads.ptx").unwrap();
    let f = m.function("count_threads").unwrap();
    for block in [[32u32, 1, 1], [33, 1, 1], [5, 3, 2], [1, 1, 1], [8, 4, 2], [96, 1, 1]] {
        let threads = (block[0] * block[1] * block[2]) as usize;
        let blocks = 3usize;
        let counter = upload_u32(&ctx, &[0]);
        // Room for a whole padded warp more per block, poisoned.
        let words = blocks * threads.div_ceil(32) * 32 + 64;
        let out = upload_u32(&ctx, &vec![0xdead_beef; words]);
        let params = f.pack_params(&[&counter.to_le_bytes(), &out.to_le_bytes()]).unwrap();
        ctx.launch(&f, [blocks as u32, 1, 1], block, 0, &params).unwrap();
        assert_eq!(download_u32(&ctx, counter, 1)[0] as usize, threads * blocks, "block {block:?}");
        let got = download_u32(&ctx, out, words);
        for (i, &v) in got.iter().enumerate() {
            let want = if i < threads * blocks { (i % threads) as u32 } else { 0xdead_beef };
            assert_eq!(v, want, "block {block:?} word {i}");
        }
    }
    assert_clean(&ctx);
}

/// The cluster special registers of a launch without clusters: each block
/// is a cluster of one (cuSOLVER's and CUTLASS's kernels read them).
const CLUSTER_REGS: &str = r#"
.version 8.0
.target sm_90
.address_size 64
.visible .entry cluster_regs(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ctaid.y;
    mad.lo.u32 %r1, %r2, 3, %r1;
    mov.u32 %r3, %tid.x;
    mad.lo.u32 %r1, %r1, 2, %r3;
    mul.lo.u32 %r1, %r1, 12;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    mov.u32 %r4, %cluster_ctarank;
    mov.u32 %r5, %cluster_nctarank;
    mov.u32 %r6, %cluster_ctaid.x;
    mov.u32 %r7, %cluster_nctaid.y;
    mov.u32 %r8, %clusterid.x;
    mov.u32 %r9, %clusterid.y;
    mov.u32 %r10, %nclusterid.x;
    mov.u32 %r11, %nclusterid.y;
    mov.pred %p1, %is_explicit_cluster;
    selp.u32 %r12, 1, 0, %p1;
    mov.u32 %r13, %cluster_ctaid.z;
    st.global.v4.u32 [%rd3], {%r4, %r5, %r6, %r7};
    st.global.v4.u32 [%rd3+16], {%r8, %r9, %r10, %r11};
    st.global.v2.u32 [%rd3+32], {%r12, %r13};
    ret;
}
"#;

/// Without `.explicitcluster`, and with it (`%is_explicit_cluster` true:
/// such an entry is launched with clusters of one block).
#[test]
fn cluster_registers_without_clusters() {
    let ctx = context();
    let explicit = CLUSTER_REGS.replace("(.param .u64 out)", "(.param .u64 out) .explicitcluster");
    for (src, flag) in [(CLUSTER_REGS.to_string(), 0), (explicit, 1)] {
        let m = ctx.load_module(&src, "cluster_regs.ptx").unwrap();
        let f = m.function("cluster_regs").unwrap();
        let threads = 3 * 2 * 2;
        let out = upload_u32(&ctx, &vec![0xdead_beef; threads * 12]);
        let params = f.pack_params(&[&out.to_le_bytes()]).unwrap();
        ctx.launch(&f, [3, 2, 1], [2, 1, 1], 0, &params).unwrap();
        let got = download_u32(&ctx, out, threads * 12);
        for (b, (cx, cy)) in (0..2u32).flat_map(|y| (0..3u32).map(move |x| (x, y))).enumerate() {
            for t in 0..2usize {
                let i = (b * 2 + t) * 12;
                let want = [0, 1, 0, 1, cx, cy, 3, 2, flag, 0, 0xdead_beef, 0xdead_beef];
                assert_eq!(&got[i..i + 12], &want, "block ({cx}, {cy}) thread {t}, explicit {flag}");
            }
        }
    }
    assert_clean(&ctx);
}

/// `createpolicy` and the `.L2::cache_hint` forms of `ld` and `st` (their
/// last operand, the policy, is a hint): cuBLAS's and cuSPARSE's kernels
/// use them.
const CACHE_HINTS: &str = r#"
.version 8.0
.target sm_80
.address_size 64
.visible .entry cache_hints(.param .u64 x, .param .u64 y)
{
    .reg .b32 %r<3>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [y];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    createpolicy.fractional.L2::evict_last.b64 %rd7, 1.0;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 8;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    ld.global.L2::cache_hint.v2.f32 {%f1, %f2}, [%rd4], %rd7;
    add.f32 %f3, %f1, %f2;
    st.global.L2::cache_hint.f32 [%rd5], %f3, %rd7;
    ld.global.nc.L2::cache_hint.f32 %f1, [%rd4+4], %rd7;
    st.global.L2::cache_hint.f32 [%rd5+4], %f1, %rd7;
    ret;
}
"#;

#[test]
fn cache_hint_loads_and_stores() {
    let ctx = context();
    let m = ctx.load_module(CACHE_HINTS, "cache_hints.ptx").unwrap();
    let f = m.function("cache_hints").unwrap();
    let mut rng = Lcg(5);
    let x: Vec<f32> = (0..128).map(|_| rng.next_u32() as f32 / 7e5).collect();
    let dx = upload_u32(&ctx, &x.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    let dy = upload_u32(&ctx, &[0xdead_beef; 128]);
    let params = f.pack_params(&[&dx.to_le_bytes(), &dy.to_le_bytes()]).unwrap();
    ctx.launch(&f, [1, 1, 1], [64, 1, 1], 0, &params).unwrap();
    let y = download_u32(&ctx, dy, 128);
    for t in 0..64 {
        assert_eq!(y[2 * t], (x[2 * t] + x[2 * t + 1]).to_bits(), "thread {t}");
        assert_eq!(y[2 * t + 1], x[2 * t + 1].to_bits(), "thread {t}");
    }
    assert_clean(&ctx);
}
