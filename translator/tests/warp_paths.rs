//! Warp paths and workgroup-uniform emission, checked without a device:
//! every warp fixture translates on every path into SPIR-V that `spirv-val`
//! accepts, deterministically; scratch metadata; diagnostics; loop exits.

mod common;

use ptxvk_translator::structurize::LoopExits;
use ptxvk_translator::{translate, Options, TargetEnv, Translation, WarpPath};
use std::path::{Path, PathBuf};

const PATHS: [WarpPath; 3] = [WarpPath::Native, WarpPath::Slice, WarpPath::Emulated];

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/warp");
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/fixtures/warp exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ptx"))
        .collect();
    v.sort();
    v
}

fn options(path: WarpPath, env: TargetEnv) -> Options {
    Options { warp_path: path, target_env: env, ..Options::default() }
}

fn translated(src: &str, path: WarpPath) -> Translation {
    translate(src, "warp.ptx", &options(path, TargetEnv::Vulkan1_2)).unwrap_or_else(|d| panic!("{d}"))
}

/// `spirv-val` on the words, or `None` when it is not installed.
fn spirv_val(words: &[u32], env: &str) -> Option<Result<(), String>> {
    // Tests run on several threads: a file of each call's own.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = std::env::temp_dir().join(format!("ptxvk-warp-{}-{call}-{env}.spv", std::process::id()));
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    std::fs::write(&file, bytes).ok()?;
    let out = std::process::Command::new("spirv-val").arg("--target-env").arg(env).arg(&file).output().ok()?;
    let _ = std::fs::remove_file(&file);
    Some(if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) })
}

#[test]
fn every_path_validates() {
    let mut checked = 0;
    for fixture in fixtures() {
        let src = std::fs::read_to_string(&fixture).expect("read fixture");
        for path in PATHS {
            for (env, name) in [(TargetEnv::Vulkan1_2, "vulkan1.2"), (TargetEnv::Vulkan1_3, "vulkan1.3")] {
                let t = translate(&src, "warp.ptx", &options(path, env)).unwrap_or_else(|d| panic!("{d}"));
                match spirv_val(&t.spirv, name) {
                    Some(Ok(())) => checked += 1,
                    Some(Err(e)) => panic!("{} ({}, {name}): spirv-val: {e}", fixture.display(), path.name()),
                    None => {
                        eprintln!("skipping SPIR-V validation: spirv-val is not installed");
                        return;
                    }
                }
            }
        }
    }
    assert!(checked >= 6, "expected the warp fixtures, validated {checked} modules");
}

#[test]
fn translation_is_deterministic() {
    for fixture in fixtures() {
        let src = std::fs::read_to_string(&fixture).expect("read fixture");
        for path in PATHS {
            assert_eq!(translated(&src, path).spirv, translated(&src, path).spirv, "{}", fixture.display());
        }
    }
}

fn scratch(t: &Translation, entry: &str) -> (u32, u32) {
    let e = t.info.entries.iter().find(|e| e.name == entry).unwrap_or_else(|| panic!("no entry {entry}"));
    (e.scratch_words_per_invocation, e.scratch_words_fixed)
}

#[test]
fn scratch_follows_the_path() {
    let src = include_str!("../../tests/fixtures/warp/warp_divergence.ptx");
    let emulated = translated(src, WarpPath::Emulated);
    let native = translated(src, WarpPath::Native);
    // Warp operations: exchange buffers, vote slots (2) and ballot slots (2
    // slots of 2 regions, a word for each of 32 warps) when emulated,
    // nothing natively.
    const FIXED: u32 = 2 + 2 * 2 * 32;
    assert_eq!(scratch(&emulated, "ballot_in_if"), (2, FIXED));
    assert_eq!(scratch(&native, "ballot_in_if"), (0, 0));
    // Barriers in straight-line code and conditionals: uniform mode without scratch.
    assert_eq!(scratch(&emulated, "early_exit_sync"), (0, 0));
    assert_eq!(scratch(&native, "early_exit_sync"), (0, 0));
    // bar.red takes a workgroup vote on every path.
    assert_eq!(scratch(&native, "sync_count"), (0, 2));
    // A loop of warp operations: its condition is a workgroup vote.
    assert_eq!(scratch(&emulated, "leader_loop"), (2, FIXED));
    // A warp function called from the entry.
    assert_eq!(scratch(&emulated, "noinline_collectives"), (2, FIXED));
    assert_eq!(scratch(&native, "noinline_collectives"), (0, 0));
}

const HEAD: &str = ".version 8.0\n.target sm_90\n.address_size 64\n";

fn err(body: &str) -> String {
    let src = format!("{HEAD}.visible .entry k()\n{{\n  .reg .b32 %r<4>;\n  .reg .pred %p<2>;\n{body}}}\n");
    match translate(&src, "k.ptx", &Options::default()) {
        Ok(_) => panic!("expected an error for {body}"),
        Err(d) => d.to_string(),
    }
}

#[test]
fn diagnostics_name_the_instruction() {
    let t = err("  redux.sync.min.f32 %r1, %r2, -1;\n");
    assert!(t.starts_with("k.ptx:8:3: error: unsupported instruction 'redux.sync.min.f32'"), "{t}");
    let t = err("  bar.sync 16;\n");
    assert!(t.contains("k.ptx:8:12: error: barrier number 16 is out of range (0 to 15)"), "{t}");
    let t = err("  shfl.sync.b32 %r1, %r2, 1, 31, -1;\n");
    assert!(t.contains("k.ptx:8:3: error: 'shfl.sync.b32' lacks .mode (one of .up, .down, .bfly, .idx;"), "{t}");
    let t = err("  vote.sync.all.pred %p1, %p0;\n");
    assert!(t.contains("k.ptx:8:3: error: 'vote.sync.all.pred' expects 3 operands, found 2"), "{t}");
}

/// The translator keeps the code after a loop out of the loop region
/// (Ramsey's placement puts it inside).
#[test]
fn loop_exits_outside() {
    let src = include_str!("../../tests/fixtures/data_loop.ptx");
    let inside =
        ptxvk_translator::structure_dump_with(src, "data_loop", LoopExits::Inside).unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(
        ptxvk_translator::structure_dump(src, "data_loop").unwrap_or_else(|d| panic!("{d}")),
        ptxvk_translator::structure_dump_with(src, "data_loop", LoopExits::Outside).unwrap_or_else(|d| panic!("{d}"))
    );
    let outside =
        ptxvk_translator::structure_dump_with(src, "data_loop", LoopExits::Outside).unwrap_or_else(|d| panic!("{d}"));
    assert!(
        inside.contains("          else\n            code b4 (0 insts)\n            break $L__BB0_4\n"),
        "{inside}"
    );
    let want = "\
function collatz_steps
block -> $L__BB0_5
  code b0 (8 insts)
  if b0
    break $L__BB0_5
  else
    block -> $L__BB0_4
      code b1 (7 insts)
      if b1
        break $L__BB0_4
      else
        code b2 (2 insts)
        block -> b4
          loop $L__BB0_3
            code $L__BB0_3 (11 insts)
            if $L__BB0_3
              continue $L__BB0_3
            else
              break b4
        code b4 (0 insts)
        break $L__BB0_4
    code $L__BB0_4 (4 insts)
    break $L__BB0_5
code $L__BB0_5 (0 insts)
return
";
    assert_eq!(outside, want);
}

/// The emulated votes touch the scratch array as little as they can
/// (llvmpipe compiles every access as a loop over the lanes, and a kernel's
/// compile time grows with the square of their number): one XOR per
/// condition and one barrier per vote, no clears after the entry's start.
#[test]
fn emulated_votes_cost_one_update_per_condition() {
    use rspirv::spirv::Op;
    let src = include_str!("../../tests/fixtures/warp/vote_rotation.ptx");
    let t = translated(src, WarpPath::Emulated);
    // Three copies of the loop body (nvcc unrolls it twice and keeps a
    // remainder), each with two ballots, any and activemask (one condition)
    // and two `all` (two conditions: the lanes that vote and the active ones).
    let (one, two) = (3 * 4, 3 * 2);
    assert_eq!(common::count_op(&t.spirv, Op::AtomicXor), one + 2 * two);
    // The entry clears the 2 vote slots and 2 slots of both ballot regions.
    assert_eq!(common::count_op(&t.spirv, Op::AtomicStore), 2 + 2 * 2);
    // A barrier per vote, per `__syncthreads` (3), per loop vote (1) and
    // after the entry's clears (1).
    assert_eq!(common::count_op(&t.spirv, Op::ControlBarrier), one + two + 3 + 1 + 1);
}

/// The workgroup barriers of `src` translated with `opts`, after `spirv-val`
/// accepted the module.
fn validated_barriers(src: &str, opts: &Options) -> usize {
    let t = translate(src, "warp.ptx", opts).unwrap_or_else(|d| panic!("{d}\n{src}"));
    if let Some(r) = spirv_val(&t.spirv, "vulkan1.2") {
        r.unwrap_or_else(|e| panic!("{:?}: {e}", opts.entry));
    }
    common::count_op(&t.spirv, rspirv::spirv::Op::ControlBarrier)
}

/// Lock step through global memory (`emit/lockstep.rs`): on the emulated
/// path, kernels that split their threads into warps and exchange values
/// through global memory without barriers (CuPy's partition) meet before
/// their global loads and stores; a grid-stride loop over the same array,
/// whose threads touch only their own elements, gets no meeting at all.
#[test]
fn global_lock_step_points_only_where_warps_exchange() {
    let src = include_str!("../../tests/fixtures/warp_synchronous_global.ptx");
    let barriers = |entry: &str, path: WarpPath| {
        let opts = Options { entry: Some(entry.into()), ..options(path, TargetEnv::Vulkan1_2) };
        validated_barriers(src, &opts)
    };
    assert_eq!(barriers("scale_in_place", WarpPath::Emulated), 0);
    // scan_in_place: nvcc unrolls the 5 steps; each step's store follows its
    // loads, and each later step's load of another lane's element follows
    // the previous step's store: 5 + 4 meetings.
    assert_eq!(barriers("scan_in_place", WarpPath::Emulated), 9);
    // `lockstep: false` (PTXVK_LOCKSTEP=0, for measurements) drops them.
    let opts = Options { entry: Some("scan_in_place".into()), lockstep: false, ..Options::default() };
    assert_eq!(validated_barriers(src, &opts), 0);
    assert!(barriers("sort_segments", WarpPath::Emulated) > 0);
    // Only the emulated path splits a warp across subgroups.
    for path in [WarpPath::Native, WarpPath::Slice] {
        for entry in ["scale_in_place", "scan_in_place", "sort_segments"] {
            assert_eq!(barriers(entry, path), 0, "{entry} on {path:?}");
        }
    }
}

/// A function with a spin loop gets no global lock-step points: its
/// accesses are ordered by its locks, and a meeting inside a critical
/// section (here after the call, beyond the interleaved region) livelocks or
/// lets lanes read what the holder has not written yet (Taichi's pointer
/// activation read a null child pointer). The same kernel without the lock
/// gets its points.
#[test]
fn no_global_lock_step_points_where_a_lock_orders_the_accesses() {
    let kernel = |lock: bool| {
        let (take, release) = if lock {
            (
                "SPIN:\n  atom.global.exch.b32 %r9, [%rd9], 1;\n  setp.ne.s32 %p9, %r9, 0;\n  @%p9 bra SPIN;\n",
                "  atom.global.exch.b32 %r9, [%rd9], 0;\n",
            )
        } else {
            ("", "")
        };
        format!(
            ".version 8.0\n.target sm_80\n.address_size 64\n\
             .func (.param .u32 r) bump(.param .u32 a)\n{{\n  .reg .b32 %r<2>;\n  \
             ld.param.u32 %r1, [a];\n  add.s32 %r1, %r1, 1;\n  st.param.u32 [r], %r1;\n  ret;\n}}\n\
             .visible .entry k(.param .u64 a, .param .u64 l)\n{{\n  .reg .pred %p<10>;\n  .reg .b32 %r<10>;\n  \
             .reg .b64 %rd<10>;\n  ld.param.u64 %rd1, [a];\n  ld.param.u64 %rd9, [l];\n  mov.u32 %r1, %tid.x;\n  \
             and.b32 %r2, %r1, 31;\n  mul.wide.u32 %rd2, %r2, 4;\n  add.s64 %rd3, %rd1, %rd2;\n{take}  \
             st.global.u32 [%rd3], %r1;\n  {{\n  .param .u32 pa;\n  .param .u32 pr;\n  st.param.u32 [pa], %r1;\n  \
             call (pr), bump, (pa);\n  ld.param.u32 %r3, [pr];\n  }}\n  ld.global.u32 %r4, [%rd3+4];\n  \
             add.s32 %r4, %r4, %r3;\n  st.global.u32 [%rd3], %r4;\n{release}  ret;\n}}\n"
        )
    };
    let barriers = |src: &str| validated_barriers(src, &options(WarpPath::Emulated, TargetEnv::Vulkan1_2));
    assert!(barriers(&kernel(false)) > 0);
    assert_eq!(barriers(&kernel(true)), 0);
}
