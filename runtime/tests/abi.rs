//! The launch path against hand-written SPIR-V that follows the launch ABI
//! (`tests/spirv/abi_ids.spvasm`), independent of the translator: push
//! constants, parameter buffers, specialization constants and grid splitting.

mod common;

use common::{assert_clean, context};
use ptxvk_runtime::{Context, EntryInfo, Error, Module, ModuleInfo, ParamInfo, ParamPassing};

fn words(bytes: &[u8]) -> Vec<u32> {
    bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn entry(name: &str, passing: ParamPassing) -> EntryInfo {
    EntryInfo {
        name: name.into(),
        params: vec![ParamInfo { name: "out".into(), offset: 0, size: 8, align: 8 }],
        param_bytes: 8,
        param_passing: passing,
        push_constant_bytes: if passing == ParamPassing::PushConstants { 48 } else { 40 },
        static_shared_bytes: 0,
        uses_dynamic_shared: false,
        reqntid: None,
        maxntid: None,
        local_bytes: 0,
        scratch_words_per_invocation: 0,
        scratch_words_fixed: 0,
        loop_counter_words: 0,
        block_ticket_words: 0,
        shared_spill: false,
        shared_wide: false,
        resumable: false,
    }
}

fn load(ctx: &Context) -> Module {
    let spirv = words(include_bytes!("spirv/abi_ids.spv"));
    let info = ModuleInfo {
        entries: vec![entry("ids", ParamPassing::PushConstants), entry("ids_buf", ParamPassing::Buffer)],
        globals: vec![],
        global_data_bytes: 0,
        trap_offset: None,
        printf_offset: None,
        heap_offset: None,
        grid_offset: None,
        ..Default::default()
    };
    ctx.load_spirv(&spirv, info).unwrap()
}

fn run(ctx: &Context, m: &Module, name: &str, blocks: u32, block: u32) {
    let f = m.function(name).unwrap();
    let n = (blocks * block) as usize + 1;
    let d = ctx.alloc(n as u64 * 4).unwrap();
    ctx.memset_d32(d, u32::MAX, n as u64).unwrap();
    let params = f.pack_params(&[&d.to_le_bytes()]).unwrap();
    ctx.launch(&f, [blocks, 1, 1], [block, 1, 1], 0, &params).unwrap();
    let mut bytes = vec![0u8; n * 4];
    ctx.copy_dtoh(&mut bytes, d).unwrap();
    let out = words(&bytes);
    for (i, &v) in out[..n - 1].iter().enumerate() {
        assert_eq!(v, i as u32 / block, "{name}: element {i} of {blocks}x{block}");
    }
    assert_eq!(out[n - 1], blocks, "{name}: nctaid.x");
    ctx.free(d).unwrap();
}

#[test]
fn grid_split_with_push_constants_and_param_buffer() {
    let ctx = context();
    let m = load(&ctx);
    // 70000 blocks: two dispatches on a device limited to 65535 (lavapipe).
    run(&ctx, &m, "ids", 70000, 32);
    run(&ctx, &m, "ids_buf", 70000, 32);
    run(&ctx, &m, "ids", 3, 64);
    run(&ctx, &m, "ids_buf", 200_000, 32);
    assert_clean(&ctx);
}

#[test]
fn load_spirv_checks_entry_points() {
    let ctx = context();
    let spirv = words(include_bytes!("spirv/abi_ids.spv"));
    let info = ModuleInfo { entries: vec![entry("nope", ParamPassing::PushConstants)], ..Default::default() };
    assert!(matches!(ctx.load_spirv(&spirv, info), Err(Error::NotFound(_))));
    assert!(matches!(ctx.load_spirv(&[1, 2, 3], ModuleInfo::default()), Err(Error::InvalidValue(_))));
}

/// The validation messenger counts what the layer reports: a SPIR-V module
/// with an unknown version (1.99) is invalid usage of `vkCreateShaderModule`.
#[test]
fn validation_messages_are_counted() {
    let ctx = context();
    assert!(ctx.info().validation);
    assert_eq!(ctx.validation_messages(), 0);
    let mut spirv = words(include_bytes!("spirv/abi_ids.spv"));
    spirv[1] = 0x0001_6300;
    let info = ModuleInfo { entries: vec![entry("ids", ParamPassing::PushConstants)], ..Default::default() };
    let _ = ctx.load_spirv(&spirv, info);
    assert!(ctx.validation_messages() > 0);
}

/// Dropping the context with work queued finishes that work first; a module
/// may outlive its context.
#[test]
fn drop_context_with_queued_work() {
    let ctx = context();
    let m = load(&ctx);
    let f = m.function("ids").unwrap();
    let d = ctx.alloc(64 * 4 + 4).unwrap();
    let params = f.pack_params(&[&d.to_le_bytes()]).unwrap();
    ctx.launch(&f, [2, 1, 1], [32, 1, 1], 0, &params).unwrap();
    assert_clean(&ctx);
    drop(ctx);
    drop(f);
    drop(m);
}
