//! The forward-progress pass (`progress.rs`) on nvcc's
//! `tests/fixtures/forward_progress.cu`, without a device: it rewrites the
//! kernels whose lanes spin on each other (locks, a flag) and leaves
//! lock-free compare-and-swap loops and code without spin loops as they
//! are; whatever it rewrites (every loop of every fixture, with
//! `interleave_every_loop`) passes `spirv-val` on every warp path. Running
//! the kernels is `runtime/tests/forward_progress.rs`.

use ptxvk_translator::{translate, Options, WarpPath};
use std::path::Path;

const PTX: &str = include_str!("../../tests/fixtures/forward_progress.ptx");

fn words(src: &str, entry: &str, forward_progress: bool) -> Vec<u32> {
    let opts = Options { entry: Some(entry.into()), forward_progress, ..Options::default() };
    translate(src, "forward_progress.ptx", &opts).unwrap_or_else(|d| panic!("{d}")).spirv
}

#[test]
fn spin_loops_are_interleaved_and_lock_free_loops_are_not() {
    for entry in [
        "locked_append",
        "shared_locked_histogram",
        "activate_cells",
        "activate_cells_with_calls",
        "flag_handoff",
        "two_handoffs",
        "tickets_from_a_callee",
        "bounded_wait",
    ] {
        assert_ne!(words(PTX, entry, true), words(PTX, entry, false), "{entry} should be rewritten");
    }
    for entry in ["cas_float_max", "cas_double_add"] {
        assert_eq!(words(PTX, entry, true), words(PTX, entry, false), "{entry} should be left alone");
    }
}

/// `spirv-val` on the words, or `None` when it is not installed.
fn spirv_val(words: &[u32]) -> Option<Result<(), String>> {
    let file = std::env::temp_dir().join(format!("ptxvk-progress-{}.spv", std::process::id()));
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    std::fs::write(&file, bytes).ok()?;
    let out = std::process::Command::new("spirv-val").arg("--target-env").arg("vulkan1.2").arg(&file).output().ok()?;
    let _ = std::fs::remove_file(&file);
    Some(if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) })
}

#[test]
fn every_loop_interleaved_still_validates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/fixtures")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ptx"))
        .collect();
    files.sort();
    let mut checked = 0;
    for file in files {
        let src = std::fs::read_to_string(&file).expect("read fixture");
        for warp_path in [WarpPath::Emulated, WarpPath::Native] {
            let opts = Options { interleave_every_loop: true, warp_path, ..Options::default() };
            // Fixtures that do not translate on their own (diagnostic
            // tests) are someone else's business.
            let Ok(t) = translate(&src, "fixture.ptx", &opts) else { continue };
            match spirv_val(&t.spirv) {
                Some(Ok(())) => checked += 1,
                Some(Err(e)) => panic!("{} ({warp_path:?}): spirv-val: {e}", file.display()),
                None => {
                    eprintln!("skipping SPIR-V validation: spirv-val is not installed");
                    return;
                }
            }
        }
    }
    assert!(checked >= 40, "expected the fixtures, validated {checked} modules");
}

/// The dispatch loop is a chain (`progress.rs`): a lane that goes forward
/// through the region runs every block it reaches in one iteration, so
/// only the latch goes back to the loop's head; a lane goes round again
/// only where the region's own code goes back (a spin loop's back-edge).
/// With one test tree per iteration every edge went back to the head, and
/// a thread whose wait was over at its first poll still took one iteration
/// per block of its path, each running every block of the region (on
/// llvmpipe, which runs the arms no lane takes).
#[test]
fn the_dispatch_loop_goes_round_only_where_the_region_goes_back() {
    use ptxvk_translator::ast::ModuleItem;
    use ptxvk_translator::progress::{self, SpinTest};
    use ptxvk_translator::structurize::{self, Region, Target};
    let module = ptxvk_translator::parse::run(PTX).unwrap_or_else(|d| panic!("{d:?}"));
    let polling = std::collections::BTreeSet::new();
    let spin = SpinTest { every_loop: false, polling: &polling };
    fn continues(regions: &[Region], header: usize) -> usize {
        regions
            .iter()
            .map(|r| match r {
                Region::Br(Target::Continue(h)) => usize::from(*h == header),
                Region::Block { body, .. } | Region::Loop { body, .. } => continues(body, header),
                Region::If { then_body, else_body, .. } => continues(then_body, header) + continues(else_body, header),
                _ => 0,
            })
            .sum()
    }
    fn loops(regions: &[Region], out: &mut Vec<(usize, usize)>) {
        for r in regions {
            match r {
                Region::Loop { header, body } => {
                    out.push((*header, continues(body, *header)));
                    loops(body, out);
                }
                Region::Block { body, .. } => loops(body, out),
                Region::If { then_body, else_body, .. } => {
                    loops(then_body, out);
                    loops(else_body, out);
                }
                _ => {}
            }
        }
    }
    for entry in ["bounded_wait", "flag_handoff", "locked_append"] {
        let Some(f) = module.items.iter().find_map(|i| match i {
            ModuleItem::Function(f) if f.name == entry => Some(f),
            _ => None,
        }) else {
            panic!("no {entry}")
        };
        let body = f.body.as_deref().unwrap_or_default();
        let mut cfg = ptxvk_translator::cfg::run(body, false).unwrap_or_else(|d| panic!("{d:?}"));
        let before = cfg.blocks.len();
        let regs = progress::run(&mut cfg, &|_| false, &spin, None);
        assert_eq!(regs.len(), 1, "{entry}: one spin region");
        let regions = structurize::run(&cfg, &|_| Default::default()).unwrap_or_else(|d| panic!("{d:?}"));
        let mut found = Vec::new();
        loops(&regions, &mut found);
        // The dispatch loop's head is a block the pass added.
        let dispatch: Vec<_> = found.iter().filter(|(h, _)| *h >= before).collect();
        assert_eq!(dispatch.len(), 1, "{entry}: one dispatch loop in {found:?}");
        assert_eq!(dispatch[0].1, 1, "{entry}: the dispatch loop goes round from its latch alone");
    }
}

/// The interleaved region leaves out the code before a wait that the wait
/// cannot reach (it runs before the dispatch loop's head, where the lanes
/// meet, and each pass of the chain would otherwise run it again, masked),
/// unless that code holds another wait: `crossed_handoff`'s two arms each
/// wait for the other and stay in one region.
#[test]
fn the_code_before_a_wait_stays_out_of_its_region() {
    use ptxvk_translator::ast::ModuleItem;
    use ptxvk_translator::progress::{self, SpinTest};
    let module = ptxvk_translator::parse::run(PTX).unwrap_or_else(|d| panic!("{d:?}"));
    let polling = std::collections::BTreeSet::new();
    let spin = SpinTest { every_loop: false, polling: &polling };
    let cfg_of = |entry: &str| {
        let Some(f) = module.items.iter().find_map(|i| match i {
            ModuleItem::Function(f) if f.name == entry => Some(f),
            _ => None,
        }) else {
            panic!("no {entry}")
        };
        ptxvk_translator::cfg::run(f.body.as_deref().unwrap_or_default(), false).unwrap_or_else(|d| panic!("{d:?}"))
    };
    // A block is in a loop when it reaches itself.
    let cyclic = |cfg: &ptxvk_translator::cfg::Cfg, b: usize| {
        let mut seen = std::collections::BTreeSet::new();
        let mut stack: Vec<usize> = cfg.successors(b).iter().copied().collect();
        while let Some(v) = stack.pop() {
            if v == b {
                return true;
            }
            if seen.insert(v) {
                stack.extend(cfg.successors(v).iter().copied());
            }
        }
        false
    };
    for entry in ["bounded_wait", "flag_handoff", "locked_append"] {
        let cfg = cfg_of(entry);
        let regions = progress::regions(&cfg, &|_| false, &spin);
        assert_eq!(regions.len(), 1, "{entry}");
        // The entry block computes the thread's index and tests it.
        assert!(!regions[0].contains(&0), "{entry}: the entry block is in the region {:?}", regions[0]);
        let spin_block = (0..cfg.blocks.len()).find(|&b| cyclic(&cfg, b)).expect("a loop");
        assert!(regions[0].contains(&spin_block), "{entry}");
    }
    let cfg = cfg_of("crossed_handoff");
    let regions = progress::regions(&cfg, &|_| false, &spin);
    assert_eq!(regions.len(), 1, "crossed_handoff: one region");
    let waits: Vec<usize> = (0..cfg.blocks.len()).filter(|&b| cyclic(&cfg, b)).collect();
    assert_eq!(waits.len(), 2, "crossed_handoff: two spin blocks");
    assert!(waits.iter().all(|b| regions[0].contains(b)), "both waits in the region {:?}", regions[0]);
}
