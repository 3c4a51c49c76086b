//! The persistent cache (`PTXVK_CACHE_DIR`, issue 20 item 3): a module
//! translated by one context (or process) is loaded by the next without
//! translating, and runs the same; anything its translation depends on (the
//! PTX, the file name, an option) makes a new entry; a damaged entry is
//! translated again; `PTXVK_CACHE=0` writes nothing; contexts and processes
//! loading one module at once agree.
//!
//! The fixture is nvcc's `tests/fixtures/split_module.cu`: kernels sharing
//! device functions, a `__constant__` table, a `__device__` counter and a
//! table of function pointers (module data with relocations), checked
//! against a host model on random inputs with poisoned tails.
//!
//! The tests set environment variables: they run one at a time.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use common::split_module::{model, run, PTX, TABLE};
use common::{assert_clean, Lcg};
use ptxvk_runtime::{Context, Module};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs every kernel of `m` on random inputs against the model (with
/// `table` as the `__constant__` table), and checks the module's counter.
fn check_module(ctx: &Context, m: &Module, table: &[u32; 16], seed: u64) {
    let mut rng = Lcg(seed);
    let block = 128u32;
    let mut want_calls = 0;
    for kernel in ["first", "second", "third"] {
        let n = 700 + (rng.next_u32() % 700) as usize;
        let input: Vec<u32> = (0..n).map(|_| rng.next_u32()).collect();
        let (want, add) = model(kernel, &input, block as usize, table);
        want_calls += add;
        let got = run(ctx, m, kernel, &input, block);
        let bad = (0..n).find(|&i| got[i] != want[i]);
        assert!(bad.is_none(), "{kernel}: first difference at {bad:?}");
    }
    let (addr, _) = m.global("calls").expect("calls");
    assert_eq!(common::download_u32(ctx, addr, 1)[0], want_calls, "the module's counter");
}

/// A fresh, empty cache directory for one test, set as `PTXVK_CACHE_DIR`.
fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ptxvk-cache-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("cache dir");
    std::env::set_var("PTXVK_CACHE_DIR", &dir);
    std::env::remove_var("PTXVK_CACHE");
    dir
}

/// The names in `dir` that start with `prefix`.
fn files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(prefix)))
        .collect();
    v.sort();
    v
}

/// A context, and its cache counts and translation entries once it is
/// created (it loads probe kernels of its own).
fn context_in(dir: &Path) -> (Context, (u64, u64), usize) {
    let ctx = common::context();
    let counts = ctx.cache_counts();
    (ctx, counts, files(dir, "t-").len())
}

/// `ctx`'s cache counts since `base`.
fn since(ctx: &Context, base: (u64, u64)) -> (u64, u64) {
    let (h, s) = ctx.cache_counts();
    (h - base.0, s - base.1)
}

fn lock() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

#[test]
fn a_second_context_runs_the_cached_translation_without_translating() {
    let _one = lock();
    let dir = fresh_dir("second");
    let (ctx, base, probes) = context_in(&dir);
    assert_eq!(ctx.cache_dir(), Some(dir.as_path()));
    let m = ctx.load_module(PTX, "split_module.ptx").expect("load");
    assert_eq!(since(&ctx, base), (0, 1), "translated and stored");
    assert_eq!(files(&dir, "t-").len(), probes + 1);
    check_module(&ctx, &m, &TABLE, 1);
    // The same context loading it again finds it too.
    let again = ctx.load_module(PTX, "split_module.ptx").expect("load again");
    assert_eq!(since(&ctx, base), (1, 1));
    check_module(&ctx, &again, &TABLE, 2);
    assert_clean(&ctx);
    drop((m, again, ctx));
    // The device's pipeline cache data went to the cache as well.
    assert_eq!(files(&dir, "p-").len(), 1, "pipeline cache data written at the device's end");

    let (ctx, base, _) = context_in(&dir);
    assert_eq!(base.1, 0, "the context's own probes came from the cache");
    let m = ctx.load_module(PTX, "split_module.ptx").expect("load from the cache");
    assert_eq!(since(&ctx, base), (1, 0), "a hit, nothing translated");
    assert_eq!(m.entry_names(), ["first", "second", "third"]);
    check_module(&ctx, &m, &TABLE, 3);
    assert_clean(&ctx);
    drop((m, ctx));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_changed_input_or_option_is_translated_anew() {
    let _one = lock();
    let dir = fresh_dir("changed");
    let (ctx, base, probes) = context_in(&dir);
    let m = ctx.load_module(PTX, "split_module.ptx").expect("load");
    check_module(&ctx, &m, &TABLE, 4);
    // Another file name (it is in diagnostics and fault reports).
    let _ = ctx.load_module(PTX, "other_name.ptx").expect("load");
    assert_eq!(since(&ctx, base), (0, 2));
    // Other PTX: the `__constant__` table's first value 3 becomes 7; a stale
    // hit would compute with 3.
    assert!(PTX.contains("table[64] = {3, 0, 0, 0, 1,"), "the fixture's table initializer");
    let changed = PTX.replacen("table[64] = {3, 0, 0, 0, 1,", "table[64] = {7, 0, 0, 0, 1,", 1);
    let m2 = ctx.load_module(&changed, "split_module.ptx").expect("load changed");
    assert_eq!(since(&ctx, base), (0, 3));
    let mut table = TABLE;
    table[0] = 7;
    check_module(&ctx, &m2, &table, 5);
    // Another translator option (taken when a module is loaded).
    std::env::set_var("PTXVK_LOCKSTEP", "0");
    let m3 = ctx.load_module(PTX, "split_module.ptx");
    std::env::remove_var("PTXVK_LOCKSTEP");
    let m3 = m3.expect("load with another option");
    assert_eq!(since(&ctx, base), (0, 4));
    check_module(&ctx, &m3, &TABLE, 6);
    assert_eq!(files(&dir, "t-").len(), probes + 4);
    // And each of them is found again.
    let _ = ctx.load_module(&changed, "split_module.ptx").expect("load changed again");
    let _ = ctx.load_module(PTX, "other_name.ptx").expect("load again");
    assert_eq!(since(&ctx, base), (2, 4));
    assert_clean(&ctx);
    drop((m, m2, m3, ctx));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_damaged_entry_is_translated_again_and_replaced() {
    let _one = lock();
    let dir = fresh_dir("damaged");
    let (ctx, base, _) = context_in(&dir);
    let before = files(&dir, "t-");
    drop(ctx.load_module(PTX, "split_module.ptx").expect("load"));
    let new: Vec<PathBuf> = files(&dir, "t-").into_iter().filter(|f| !before.contains(f)).collect();
    let [entry] = new.try_into().expect("one new entry");
    let whole = std::fs::read(&entry).expect("read");
    let mut rng = Lcg(7);
    // A byte flipped inside the SPIR-V, then a file cut short.
    let mut bad = whole.clone();
    let at = whole.len() / 2 + (rng.next_u32() as usize % (whole.len() / 4));
    bad[at] ^= 0x5a;
    for damaged in [bad, whole[..whole.len() - 100].to_vec()] {
        std::fs::write(&entry, &damaged).expect("damage");
        let before = ctx.cache_counts();
        let m = ctx.load_module(PTX, "split_module.ptx").expect("load over a damaged entry");
        assert_eq!(ctx.cache_counts(), (before.0, before.1 + 1), "translated again and stored");
        check_module(&ctx, &m, &TABLE, 8);
        assert_eq!(std::fs::read(&entry).expect("read"), whole, "the entry is whole again");
    }
    let m = ctx.load_module(PTX, "split_module.ptx").expect("load");
    assert_eq!(since(&ctx, base), (1, 3));
    check_module(&ctx, &m, &TABLE, 9);
    assert_clean(&ctx);
    drop((m, ctx));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nothing_is_cached_with_ptxvk_cache_0() {
    let _one = lock();
    let dir = fresh_dir("off");
    std::env::set_var("PTXVK_CACHE", "0");
    let ctx = common::context();
    std::env::remove_var("PTXVK_CACHE");
    assert_eq!(ctx.cache_dir(), None);
    assert_eq!(ctx.cache_counts(), (0, 0), "not even the probes");
    let m = ctx.load_module(PTX, "split_module.ptx").expect("load");
    let again = ctx.load_module(PTX, "split_module.ptx").expect("load");
    assert_eq!(ctx.cache_counts(), (0, 0));
    check_module(&ctx, &again, &TABLE, 10);
    drop((m, again, ctx));
    assert!(files(&dir, "").is_empty(), "nothing written");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn threads_of_one_context_loading_at_once_agree() {
    let _one = lock();
    let dir = fresh_dir("threads");
    let (ctx, base, probes) = context_in(&dir);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let ctx = &ctx;
            s.spawn(move || {
                for k in 0..3 {
                    let m = ctx.load_module(PTX, "split_module.ptx").expect("load");
                    check_module(ctx, &m, &TABLE, 100 + t * 10 + k);
                }
            });
        }
    });
    let (hits, stores) = since(&ctx, base);
    assert_eq!(hits + stores, 12);
    assert!(stores >= 1 && hits >= 8, "{hits} hits, {stores} stores");
    assert_eq!(files(&dir, "t-").len(), probes + 1);
    assert!(files(&dir, ".tmp-").is_empty(), "no temporary file left");
    assert_clean(&ctx);
    drop(ctx);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The child of [`processes_loading_at_once_agree`]: loads and checks the
/// module in the cache directory its parent gave.
#[test]
#[ignore = "run by processes_loading_at_once_agree"]
fn child_process_loads_and_checks() {
    let seed: u64 = std::env::var("PTXVK_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(11);
    let ctx = common::context();
    let base = ctx.cache_counts();
    for k in 0..2 {
        let m = ctx.load_module(PTX, "split_module.ptx").expect("load");
        check_module(&ctx, &m, &TABLE, seed + k);
    }
    let (hits, stores) = since(&ctx, base);
    assert_eq!(hits + stores, 2);
    assert_clean(&ctx);
    println!("child counts: {hits} {stores}");
}

#[test]
fn processes_loading_at_once_agree() {
    let _one = lock();
    let dir = fresh_dir("processes");
    let exe = std::env::current_exe().expect("test binary");
    let children: Vec<_> = (0..3u64)
        .map(|i| {
            std::process::Command::new(&exe)
                .args(["--exact", "child_process_loads_and_checks", "--ignored", "--nocapture", "--test-threads=1"])
                .env("PTXVK_CACHE_DIR", &dir)
                .env("PTXVK_TEST_SEED", (200 + i * 10).to_string())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    let mut stores = 0;
    for c in children {
        let out = c.wait_with_output().expect("wait");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "child failed:\n{text}\n{}", String::from_utf8_lossy(&out.stderr));
        let counts =
            text.lines().find_map(|l| l.split_once("child counts: ").map(|(_, c)| c)).expect("the child's counts");
        let (_, s) = counts.split_once(' ').expect("two counts");
        stores += s.trim().parse::<u64>().expect("a count");
    }
    assert!(stores >= 1, "some process translated and stored it");
    // The module's entry and the probes' (as many as one context makes).
    let probe_dir = fresh_dir("processes-probes");
    let (_, _, probes) = context_in(&probe_dir);
    let _ = std::fs::remove_dir_all(&probe_dir);
    assert_eq!(files(&dir, "t-").len(), probes + 1);
    assert!(files(&dir, ".tmp-").is_empty(), "no temporary file left");
    let _ = std::fs::remove_dir_all(&dir);
}
