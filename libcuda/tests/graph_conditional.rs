//! Conditional graph nodes (`cuGraphConditionalHandleCreate`,
//! `CU_GRAPH_NODE_TYPE_CONDITIONAL` through `cuGraphAddNode`, bodies filled
//! by `cuStreamBeginCaptureToGraph`) with kernels that set the condition
//! with `cudaGraphSetConditional` (`tests/data/graph_conditional.cu`, nvcc
//! 13.5): `while` loops, `if`/`else` and `switch`, checked against the same
//! steps on the host, with the documented errors.

mod common;

use std::ffi::{c_int, c_uint, c_void};

use common::{check, code, init, ptx_image, Api, Ctx, Handle, Lcg};

/// `CU_GRAPH_NODE_TYPE_CONDITIONAL`.
const NODE_CONDITIONAL: c_int = 13;
/// `CU_GRAPH_NODE_TYPE_KERNEL`.
const NODE_KERNEL: c_int = 0;
/// `CU_GRAPH_COND_ASSIGN_DEFAULT`.
const ASSIGN_DEFAULT: c_uint = 1;
/// `CUgraphConditionalNodeType`.
const IF: c_int = 0;
const WHILE: c_int = 1;
const SWITCH: c_int = 2;
/// `CU_STREAM_CAPTURE_MODE_RELAXED`.
const RELAXED: c_int = 2;

/// `CUgraphNodeParams`: type, reserved, a 232-byte union, reserved.
#[repr(C)]
struct NodeParams {
    ty: c_int,
    reserved0: [c_int; 3],
    union: [u64; 29],
    reserved2: i64,
}

impl NodeParams {
    /// `CUDA_CONDITIONAL_NODE_PARAMS` { handle, type, size, phGraph_out, ctx }.
    fn conditional(handle: u64, ty: c_int, size: c_uint) -> NodeParams {
        let mut union = [0u64; 29];
        union[0] = handle;
        union[1] = u64::from(ty as u32) | (u64::from(size) << 32);
        NodeParams { ty: NODE_CONDITIONAL, reserved0: [0; 3], union, reserved2: 0 }
    }

    /// The body graphs the driver wrote to `phGraph_out`.
    fn bodies(&self) -> Vec<Handle> {
        let size = (self.union[1] >> 32) as usize;
        let out = self.union[2] as *const Handle;
        assert!(!out.is_null(), "phGraph_out was not set");
        // SAFETY: the driver's array of `size` graph handles.
        (0..size).map(|i| unsafe { out.add(i).read() }).collect()
    }
}

struct Kernels {
    api: &'static Api,
    module: Handle,
}

impl Kernels {
    fn load(api: &'static Api) -> Kernels {
        let image = ptx_image("graph_conditional.ptx");
        let mut module: Handle = std::ptr::null_mut();
        check(api, cu!(api.cuModuleLoadData(&mut module, image.as_ptr().cast())), "load");
        Kernels { api, module }
    }

    fn get(&self, name: &str) -> Handle {
        let api = self.api;
        let cname = format!("{name}\0");
        let mut f: Handle = std::ptr::null_mut();
        check(api, cu!(api.cuModuleGetFunction(&mut f, self.module, cname.as_ptr().cast())), name);
        f
    }

    /// Launches `name` on `stream` with `args` (each a pointer to its value).
    fn launch(&self, name: &str, blocks: u32, threads: u32, args: &mut [*mut c_void], stream: Handle) {
        let api = self.api;
        let f = self.get(name);
        let no_extra: *mut *mut c_void = std::ptr::null_mut();
        let rc = cu!(api.cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, 0, stream, args.as_mut_ptr(), no_extra));
        check(api, rc, name);
    }

    /// `step(data, salt, n)` over all of `data`.
    fn step(&self, data: u64, salt: u32, n: usize, stream: Handle) {
        let (mut d, mut s, mut n32) = (data, salt, n as i32);
        let mut args = [ptr(&mut d), ptr(&mut s), ptr(&mut n32)];
        self.launch("step", n.div_ceil(128) as u32, 128, &mut args, stream);
    }
}

fn ptr<T>(v: &mut T) -> *mut c_void {
    (v as *mut T).cast()
}

fn alloc_with(api: &Api, data: &[u32]) -> u64 {
    let mut d = 0u64;
    check(api, cu!(api.cuMemAlloc_v2(&mut d, data.len() * 4)), "alloc");
    check(api, cu!(api.cuMemcpyHtoD_v2(d, data.as_ptr().cast(), data.len() * 4)), "upload");
    d
}

fn download(api: &Api, d: u64, n: usize) -> Vec<u32> {
    let mut out = vec![0xDEAD_BEEFu32; n];
    check(api, cu!(api.cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), d, n * 4)), "download");
    out
}

/// The host's `step`.
fn step(data: &mut [u32], salt: u32) {
    for x in data {
        *x = x.wrapping_mul(3).wrapping_add(salt);
    }
}

/// Captures what `work` launches on `s` into the existing graph `g`.
fn capture_into(api: &Api, s: Handle, g: Handle, work: impl FnOnce()) {
    check(api, cu!(api.cuStreamBeginCaptureToGraph(s, g, std::ptr::null(), std::ptr::null(), 0, RELAXED)), "capture");
    work();
    let mut out: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuStreamEndCapture(s, &mut out)), "end capture");
    assert_eq!(out, g, "the capture ends in the graph it was given");
}

fn add_conditional(
    api: &Api,
    g: Handle,
    deps: &[Handle],
    handle: u64,
    ty: c_int,
    size: c_uint,
) -> (Handle, Vec<Handle>) {
    let mut p = NodeParams::conditional(handle, ty, size);
    let mut node: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuGraphAddNode(&mut node, g, deps.as_ptr(), deps.len(), ptr(&mut p))), "conditional node");
    let bodies = p.bodies();
    assert_eq!(bodies.len(), size as usize);
    (node, bodies)
}

fn instantiate_and_launch(api: &Api, g: Handle, s: Handle) -> Handle {
    let mut exec: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuGraphInstantiateWithFlags(&mut exec, g, 0)), "instantiate");
    check(api, cu!(api.cuGraphLaunch(exec, s)), "launch");
    check(api, cu!(api.cuStreamSynchronize(s)), "sync");
    exec
}

/// A `while` node whose body runs a data step and a kernel that counts an
/// iteration budget down and sets the condition: the body runs exactly as
/// many times as the budget says, the default value (1) is assigned at
/// every launch, and a handle without `CU_GRAPH_COND_ASSIGN_DEFAULT` keeps
/// the value the last launch left (0), so its loop does not run again.
#[test]
fn while_node_runs_its_body_until_a_kernel_clears_the_condition() {
    let api = init();
    let _ctx = Ctx::new(api);
    let k = Kernels::load(api);
    let mut s: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuStreamCreate(&mut s, 1)), "stream");
    let n = 1000usize;
    let mut rng = Lcg(0x51d3);
    let mut host: Vec<u32> = (0..n).map(|_| rng.next_u32()).collect();
    let data = alloc_with(api, &host);
    let left = alloc_with(api, &[0]);

    for assign_default in [true, false] {
        let mut g: Handle = std::ptr::null_mut();
        check(api, cu!(api.cuGraphCreate(&mut g, 0)), "graph");
        let mut h = 0u64;
        let flags = if assign_default { ASSIGN_DEFAULT } else { 0 };
        check(api, cu!(api.cuGraphConditionalHandleCreate(&mut h, g, std::ptr::null_mut(), 1, flags)), "handle");
        assert_ne!(h, 0);
        let (node, bodies) = add_conditional(api, g, &[], h, WHILE, 1);
        let mut ty = -1;
        check(api, cu!(api.cuGraphNodeGetType(node, &mut ty)), "type");
        assert_eq!(ty, NODE_CONDITIONAL);
        capture_into(api, s, bodies[0], || {
            k.step(data, 7, n, s);
            let (mut hh, mut l) = (h, left);
            k.launch("count_down", 1, 32, &mut [ptr(&mut hh), ptr(&mut l)], s);
        });
        let mut exec: Handle = std::ptr::null_mut();
        check(api, cu!(api.cuGraphInstantiateWithFlags(&mut exec, g, 0)), "instantiate");
        for (launch, budget) in [5i32, 3].into_iter().enumerate() {
            check(api, cu!(api.cuMemcpyHtoD_v2(left, (&budget as *const i32).cast(), 4)), "budget");
            check(api, cu!(api.cuGraphLaunch(exec, s)), "launch");
            check(api, cu!(api.cuStreamSynchronize(s)), "sync");
            let runs = if assign_default || launch == 0 { budget } else { 0 };
            for _ in 0..runs {
                step(&mut host, 7);
            }
            let expect_left = if runs > 0 { 0 } else { budget };
            assert_eq!(
                download(api, left, 1)[0] as i32,
                expect_left,
                "budget left (default {assign_default}, launch {launch})"
            );
            let got = download(api, data, n);
            for i in 0..n {
                assert_eq!(got[i], host[i], "data[{i}] after launch {launch} (default {assign_default})");
            }
        }
        check(api, cu!(api.cuGraphExecDestroy(exec)), "destroy exec");
        check(api, cu!(api.cuGraphDestroy(g)), "destroy graph");
    }
    check(api, cu!(api.cuMemFree_v2(data)), "free");
    check(api, cu!(api.cuMemFree_v2(left)), "free");
    check(api, cu!(api.cuStreamDestroy_v2(s)), "destroy stream");
}

/// Warp's `capture_if` with both branches: a kernel node sets the `if`
/// handle from a flag in device memory, and the node runs body 0 when it
/// is non-zero, body 1 otherwise; the executable graph of a clone of the
/// graph behaves the same, and the node reports its parameters back.
#[test]
fn if_else_node_runs_the_branch_a_kernel_chose() {
    let api = init();
    let _ctx = Ctx::new(api);
    let k = Kernels::load(api);
    let mut s: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuStreamCreate(&mut s, 1)), "stream");
    let n = 777usize;
    let mut rng = Lcg(0x1f2e);
    let mut host: Vec<u32> = (0..n).map(|_| rng.next_u32()).collect();
    let data = alloc_with(api, &host);
    let flag = alloc_with(api, &[0]);

    let mut g: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuGraphCreate(&mut g, 0)), "graph");
    let mut h = 0u64;
    check(api, cu!(api.cuGraphConditionalHandleCreate(&mut h, g, std::ptr::null_mut(), 0, 0)), "handle");
    capture_into(api, s, g, || {
        let (mut hh, mut other, mut f) = (h, 0u64, flag);
        k.launch("set_if_else", 2, 64, &mut [ptr(&mut hh), ptr(&mut other), ptr(&mut f)], s);
    });
    let mut count = 1usize;
    let mut setter: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuGraphGetNodes(g, &mut setter, &mut count)), "nodes");
    assert_eq!(count, 1);
    let mut ty = -1;
    check(api, cu!(api.cuGraphNodeGetType(setter, &mut ty)), "type");
    assert_eq!(ty, NODE_KERNEL);
    let (node, bodies) = add_conditional(api, g, &[setter], h, IF, 2);
    capture_into(api, s, bodies[0], || k.step(data, 1, n, s));
    capture_into(api, s, bodies[1], || k.step(data, 2, n, s));

    let mut back = NodeParams::conditional(0, 0, 0);
    check(api, cu!(api.cuGraphNodeGetParams(node, ptr(&mut back))), "get params");
    assert_eq!(back.ty, NODE_CONDITIONAL);
    assert_eq!(back.union[0], h);
    assert_eq!(back.bodies(), bodies);

    let mut clone: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuGraphClone(&mut clone, g)), "clone");
    for graph in [g, clone] {
        let mut exec: Handle = std::ptr::null_mut();
        check(api, cu!(api.cuGraphInstantiateWithFlags(&mut exec, graph, 0)), "instantiate");
        for f in [1i32, 0, -5, 0] {
            check(api, cu!(api.cuMemcpyHtoD_v2(flag, (&f as *const i32).cast(), 4)), "flag");
            check(api, cu!(api.cuGraphLaunch(exec, s)), "launch");
            check(api, cu!(api.cuStreamSynchronize(s)), "sync");
            step(&mut host, if f != 0 { 1 } else { 2 });
            let got = download(api, data, n);
            for i in 0..n {
                assert_eq!(got[i], host[i], "data[{i}] with flag {f}");
            }
        }
        check(api, cu!(api.cuGraphExecDestroy(exec)), "destroy exec");
    }
    check(api, cu!(api.cuGraphDestroy(clone)), "destroy clone");
    check(api, cu!(api.cuGraphDestroy(g)), "destroy graph");
    check(api, cu!(api.cuMemFree_v2(data)), "free");
    check(api, cu!(api.cuMemFree_v2(flag)), "free");
    check(api, cu!(api.cuStreamDestroy_v2(s)), "destroy stream");
}

/// A `switch` node with three bodies runs the one the value names and none
/// for a value past them; an `if` node with one body runs it or nothing.
#[test]
fn switch_node_runs_the_body_the_value_names() {
    let api = init();
    let _ctx = Ctx::new(api);
    let k = Kernels::load(api);
    let mut s: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuStreamCreate(&mut s, 1)), "stream");
    let n = 300usize;
    let mut rng = Lcg(0x7781);
    let mut host: Vec<u32> = (0..n).map(|_| rng.next_u32()).collect();
    let data = alloc_with(api, &host);
    let value = alloc_with(api, &[0]);

    let mut g: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuGraphCreate(&mut g, 0)), "graph");
    let mut h = 0u64;
    check(api, cu!(api.cuGraphConditionalHandleCreate(&mut h, g, std::ptr::null_mut(), 0, ASSIGN_DEFAULT)), "handle");
    capture_into(api, s, g, || {
        let (mut hh, mut v) = (h, value);
        k.launch("set_value", 1, 32, &mut [ptr(&mut hh), ptr(&mut v)], s);
    });
    let mut count = 1usize;
    let mut setter: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuGraphGetNodes(g, &mut setter, &mut count)), "nodes");
    let (_, bodies) = add_conditional(api, g, &[setter], h, SWITCH, 3);
    for (i, &b) in bodies.iter().enumerate() {
        capture_into(api, s, b, || k.step(data, 10 + i as u32, n, s));
    }
    let exec = instantiate_and_launch(api, g, s);
    step(&mut host, 10);
    for v in [2u32, 7, 1, 3, 0] {
        check(api, cu!(api.cuMemcpyHtoD_v2(value, (&v as *const u32).cast(), 4)), "value");
        check(api, cu!(api.cuGraphLaunch(exec, s)), "launch");
        check(api, cu!(api.cuStreamSynchronize(s)), "sync");
        if v < 3 {
            step(&mut host, 10 + v);
        }
    }
    let got = download(api, data, n);
    for i in 0..n {
        assert_eq!(got[i], host[i], "data[{i}]");
    }
    check(api, cu!(api.cuGraphExecDestroy(exec)), "destroy exec");
    check(api, cu!(api.cuGraphDestroy(g)), "destroy graph");
    check(api, cu!(api.cuMemFree_v2(data)), "free");
    check(api, cu!(api.cuMemFree_v2(value)), "free");
    check(api, cu!(api.cuStreamDestroy_v2(s)), "destroy stream");
}

/// The documented `CUDA_ERROR_INVALID_VALUE`s: unknown flags, a NULL
/// output, a handle that is not one, a body count the type does not allow.
#[test]
fn bad_conditional_arguments_are_refused() {
    let api = init();
    let _ctx = Ctx::new(api);
    let mut g: Handle = std::ptr::null_mut();
    check(api, cu!(api.cuGraphCreate(&mut g, 0)), "graph");
    let mut h = 0u64;
    let null = std::ptr::null_mut();
    assert_eq!(cu!(api.cuGraphConditionalHandleCreate(&mut h, g, null, 0, 2)), code::INVALID_VALUE, "flags");
    assert_eq!(
        cu!(api.cuGraphConditionalHandleCreate(std::ptr::null_mut(), g, null, 0, 0)),
        code::INVALID_VALUE,
        "NULL output"
    );
    check(api, cu!(api.cuGraphConditionalHandleCreate(&mut h, g, null, 0, 0)), "handle");
    let mut node: Handle = std::ptr::null_mut();
    for (handle, ty, size) in [(h, WHILE, 2), (h, IF, 3), (h, SWITCH, 0), (h, 3, 1), (h + 1, IF, 1), (0, IF, 1)] {
        let mut p = NodeParams::conditional(handle, ty, size);
        let rc = cu!(api.cuGraphAddNode(&mut node, g, std::ptr::null(), 0, ptr(&mut p)));
        assert_eq!(rc, code::INVALID_VALUE, "type {ty} with {size} bodies, handle {handle:#x}");
    }
    let mut count = 0usize;
    check(api, cu!(api.cuGraphGetNodes(g, std::ptr::null_mut(), &mut count)), "nodes");
    assert_eq!(count, 0, "no node was added by a refused call");
    check(api, cu!(api.cuGraphDestroy(g)), "destroy graph");
}
