//! CUDA graphs: `CUgraph`, `CUgraphNode`, `CUgraphExec`.
//!
//! A graph is a list of nodes (in creation order) and a set of edges. A node
//! owns copies of everything it needs (kernel parameter values are copied
//! when the node is added or its parameters are set), so a graph can be
//! launched any number of times after the caller's buffers are gone.
//!
//! `cuGraphInstantiate` deep-clones the graph into the executable graph:
//! later changes to the graph do not reach it, the `cuGraphExec*SetParams`
//! calls change only it. `cuGraphLaunch` runs the nodes one after another in
//! a topological order (creation order among the ready ones) on the
//! device's single in-order queue, which is also the order of every stream
//! here, so the launch is ordered after the work queued before it and
//! before the work queued after it. Child graphs run in place of their node.
//!
//! Stream capture (see [`crate::capture`]) builds graphs with the same node
//! kinds.

use std::collections::BTreeSet;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::capture;
use crate::context;
use crate::driver;
use crate::ffi::{read_in, write_opt, write_out, CUdeviceptr, Handle};
use crate::graph_cond::{self as cond, CondHandle, ConditionalNodeParams};
use crate::graph_mem;
use crate::handles::{handle_of, Registry};
use crate::launch;
use crate::library::resolve_function;
use crate::memory::{self as mem, Memcpy3D};
use crate::module::FunctionObj;
use crate::result::{CuError, CuResult};
use crate::stream::{self, HostFn};

/// `CU_GRAPH_NODE_TYPE_KERNEL`.
pub const NODE_KERNEL: c_int = 0;
/// `CU_GRAPH_NODE_TYPE_MEMCPY`.
pub const NODE_MEMCPY: c_int = 1;
/// `CU_GRAPH_NODE_TYPE_MEMSET`.
pub const NODE_MEMSET: c_int = 2;
/// `CU_GRAPH_NODE_TYPE_HOST`.
pub const NODE_HOST: c_int = 3;
/// `CU_GRAPH_NODE_TYPE_GRAPH`.
pub const NODE_GRAPH: c_int = 4;
/// `CU_GRAPH_NODE_TYPE_EMPTY`.
pub const NODE_EMPTY: c_int = 5;
/// `CU_GRAPH_NODE_TYPE_WAIT_EVENT`.
pub const NODE_WAIT_EVENT: c_int = 6;
/// `CU_GRAPH_NODE_TYPE_EVENT_RECORD`.
pub const NODE_EVENT_RECORD: c_int = 7;
/// `CU_GRAPH_NODE_TYPE_MEM_ALLOC`.
pub const NODE_MEM_ALLOC: c_int = 10;
/// `CU_GRAPH_NODE_TYPE_MEM_FREE`.
pub const NODE_MEM_FREE: c_int = 11;
/// `CU_GRAPH_NODE_TYPE_CONDITIONAL`.
pub const NODE_CONDITIONAL: c_int = 13;

/// `CUDA_KERNEL_NODE_PARAMS_v1`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct KernelNodeParamsV1 {
    func: Handle,
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared_mem_bytes: c_uint,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
}

/// `CUDA_KERNEL_NODE_PARAMS_v2` (`CUDA_KERNEL_NODE_PARAMS` of CUDA 12 and 13).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct KernelNodeParams {
    func: Handle,
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared_mem_bytes: c_uint,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
    kern: Handle,
    ctx: Handle,
}

impl From<KernelNodeParamsV1> for KernelNodeParams {
    fn from(p: KernelNodeParamsV1) -> Self {
        KernelNodeParams {
            func: p.func,
            grid: p.grid,
            block: p.block,
            shared_mem_bytes: p.shared_mem_bytes,
            kernel_params: p.kernel_params,
            extra: p.extra,
            kern: std::ptr::null_mut(),
            ctx: std::ptr::null_mut(),
        }
    }
}

/// `CUDA_MEMSET_NODE_PARAMS` (v1).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct MemsetNodeParams {
    dst: CUdeviceptr,
    pitch: usize,
    value: c_uint,
    element_size: c_uint,
    width: usize,
    height: usize,
}

/// `CUDA_HOST_NODE_PARAMS` (v1).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct HostNodeParams {
    f: HostFn,
    user_data: *mut c_void,
}

/// `CUgraphEdgeData`.
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct EdgeData {
    from_port: u8,
    to_port: u8,
    kind: u8,
    reserved: [u8; 5],
}

/// `CUDA_GRAPH_INSTANTIATE_PARAMS`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct InstantiateParams {
    flags: u64,
    upload_stream: Handle,
    err_node_out: Handle,
    result_out: c_int,
}

/// `CUgraphExecUpdateResultInfo`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UpdateResultInfo {
    result: c_int,
    error_node: Handle,
    error_from_node: Handle,
}

/// A kernel node: the function and copies of its parameter values.
pub struct KernelNode {
    function: Arc<FunctionObj>,
    /// The `func` handle given (NULL when a `CUkernel` was given).
    func: usize,
    /// The `kern` handle given (NULL when a `CUfunction` was given).
    kern: usize,
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared_mem_bytes: c_uint,
    args: Vec<Vec<u8>>,
    /// Address of each copy in `args`: the `kernelParams` array handed out
    /// by `cuGraphKernelNodeGetParams`.
    arg_ptrs: Vec<usize>,
}

impl KernelNode {
    /// A kernel node from the launch arguments, checked as a launch is and
    /// with the parameter values copied.
    ///
    /// # Safety
    /// `kernel_params` / `extra` as `cuLaunchKernel` documents them.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn new(
        function: Arc<FunctionObj>,
        func: usize,
        kern: usize,
        grid: [c_uint; 3],
        block: [c_uint; 3],
        shared_mem_bytes: c_uint,
        kernel_params: *mut *mut c_void,
        extra: *mut *mut c_void,
    ) -> CuResult<KernelNode> {
        launch::check_config(&function, grid, block, shared_mem_bytes)?;
        // SAFETY: forwarded caller contract.
        let args = unsafe { launch::collect_args(&function, kernel_params, extra) }?;
        Ok(KernelNode::with_args(function, func, kern, grid, block, shared_mem_bytes, args))
    }

    fn with_args(
        function: Arc<FunctionObj>,
        func: usize,
        kern: usize,
        grid: [c_uint; 3],
        block: [c_uint; 3],
        shared_mem_bytes: c_uint,
        args: Vec<Vec<u8>>,
    ) -> KernelNode {
        let arg_ptrs = args.iter().map(|a| a.as_ptr() as usize).collect();
        KernelNode { function, func, kern, grid, block, shared_mem_bytes, args, arg_ptrs }
    }

    /// Reads `CUDA_KERNEL_NODE_PARAMS`: `func`, or `kern` when `func` is NULL.
    ///
    /// # Safety
    /// The parameter pointers of `p` as `cuLaunchKernel` documents them.
    unsafe fn from_params(p: &KernelNodeParams) -> CuResult<KernelNode> {
        let handle = if p.func.is_null() { p.kern } else { p.func };
        if handle.is_null() {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("both func and kern are NULL"));
        }
        let function = resolve_function(handle)?;
        let (func, kern) = if p.func.is_null() { (0, p.kern as usize) } else { (p.func as usize, 0) };
        // SAFETY: forwarded caller contract.
        unsafe { KernelNode::new(function, func, kern, p.grid, p.block, p.shared_mem_bytes, p.kernel_params, p.extra) }
    }

    fn params(&self) -> KernelNodeParams {
        KernelNodeParams {
            func: if self.func != 0 { self.func as Handle } else { std::ptr::null_mut() },
            grid: self.grid,
            block: self.block,
            shared_mem_bytes: self.shared_mem_bytes,
            kernel_params: if self.arg_ptrs.is_empty() {
                std::ptr::null_mut()
            } else {
                self.arg_ptrs.as_ptr() as *mut *mut c_void
            },
            extra: std::ptr::null_mut(),
            kern: self.kern as Handle,
            ctx: handle_of(&self.function.context),
        }
    }
}

impl Clone for KernelNode {
    fn clone(&self) -> Self {
        KernelNode::with_args(
            self.function.clone(),
            self.func,
            self.kern,
            self.grid,
            self.block,
            self.shared_mem_bytes,
            self.args.clone(),
        )
    }
}

/// A memcpy node: the copy as `cuMemcpy3D` takes it.
#[derive(Clone, Copy)]
pub struct CopyNode(pub Memcpy3D);
// SAFETY: the host pointers in the copy are addresses the caller handed to
// the driver API, which may use them from any thread; they are only
// dereferenced when the node runs, under the caller's contract.
unsafe impl Send for CopyNode {}
// SAFETY: as for `Send`; the value is never mutated through a shared reference.
unsafe impl Sync for CopyNode {}

/// A memset node.
#[derive(Clone, Copy)]
pub struct MemsetNode(MemsetNodeParams);

impl MemsetNode {
    /// A checked memset: "elementSize must be 1, 2, or 4"; the destination
    /// aligned to it; a pitch covering a row when there is more than one.
    pub fn new(
        dst: CUdeviceptr,
        pitch: usize,
        value: u32,
        element_size: u32,
        width: usize,
        height: usize,
    ) -> CuResult<Self> {
        if ![1, 2, 4].contains(&element_size) {
            return Err(
                CuError::CUDA_ERROR_INVALID_VALUE.because(format!("elementSize {element_size} is not 1, 2 or 4"))
            );
        }
        if dst == 0 || !dst.is_multiple_of(u64::from(element_size)) {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("dst is NULL or not aligned to elementSize"));
        }
        if height > 1 && pitch < width.saturating_mul(element_size as usize) {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pitch is smaller than a row"));
        }
        Ok(MemsetNode(MemsetNodeParams { dst, pitch, value, element_size, width, height }))
    }

    fn run(&self) -> CuResult<()> {
        let p = self.0;
        let pitch = if p.height > 1 { p.pitch } else { 0 };
        match p.element_size {
            1 => mem::memset_d2d8_impl(p.dst, pitch, p.value as u8, p.width, p.height),
            2 => mem::memset_d2d16_impl(p.dst, pitch, p.value as u16, p.width, p.height),
            _ => mem::memset_d2d32_impl(p.dst, pitch, p.value, p.width, p.height),
        }
    }
}

/// A host node.
#[derive(Clone, Copy)]
pub struct HostNode {
    f: unsafe extern "C" fn(*mut c_void),
    user_data: usize,
}

impl HostNode {
    /// "CUDA_ERROR_INVALID_VALUE" for a NULL function.
    pub fn new(f: HostFn, user_data: *mut c_void) -> CuResult<Self> {
        let f = f.ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because("fn is NULL"))?;
        Ok(HostNode { f, user_data: user_data as usize })
    }
}

/// A conditional node: its handle, type and body graphs (owned by the node).
#[derive(Clone)]
pub struct ConditionalNode {
    handle: Arc<CondHandle>,
    /// `CUgraphConditionalNodeType`.
    ty: c_int,
    bodies: Vec<Arc<GraphObj>>,
    /// The bodies' handles: the array `phGraph_out` points to.
    body_handles: Arc<Vec<usize>>,
}

impl ConditionalNode {
    /// A node testing `handle` with `size` new, empty, registered body graphs.
    fn new(handle: Arc<CondHandle>, ty: c_int, size: u32) -> ConditionalNode {
        let bodies: Vec<Arc<GraphObj>> = (0..size).map(|_| new_graph(true, true)).collect();
        let body_handles = bodies.iter().map(|b| GRAPHS.insert(b.clone()) as usize).collect();
        ConditionalNode { handle, ty, bodies, body_handles: Arc::new(body_handles) }
    }

    /// The node with its bodies cloned (registered or not).
    fn deep_clone(&self, register: bool) -> ConditionalNode {
        let bodies: Vec<Arc<GraphObj>> = self.bodies.iter().map(|b| clone_graph(b, register, true)).collect();
        let body_handles = bodies.iter().map(|b| handle_of(b) as usize).collect();
        ConditionalNode { handle: self.handle.clone(), ty: self.ty, bodies, body_handles: Arc::new(body_handles) }
    }

    /// `CUDA_CONDITIONAL_NODE_PARAMS` describing it.
    fn params(&self) -> ConditionalNodeParams {
        ConditionalNodeParams {
            handle: self.handle.addr,
            ty: self.ty,
            size: self.bodies.len() as c_uint,
            ph_graph_out: self.body_handles.as_ptr() as *mut Handle,
            ctx: std::ptr::null_mut(),
        }
    }

    /// Runs the body graphs the handle's value chooses, after the work
    /// queued before the node (see [`crate::graph_cond`]).
    fn run(&self, stream: Handle) -> CuResult<()> {
        match self.ty {
            cond::TYPE_WHILE => {
                while self.handle.read()? != 0 {
                    run_graph(&self.bodies[0], stream)?;
                }
                Ok(())
            }
            cond::TYPE_IF => {
                let v = self.handle.read()?;
                match (v != 0, self.bodies.get(1)) {
                    (true, _) => run_graph(&self.bodies[0], stream),
                    (false, Some(otherwise)) => run_graph(otherwise, stream),
                    (false, None) => Ok(()),
                }
            }
            _ => match self.bodies.get(self.handle.read()? as usize) {
                Some(b) => run_graph(b, stream),
                None => Ok(()),
            },
        }
    }
}

/// What a node does.
#[derive(Clone)]
pub enum NodeKind {
    /// `CU_GRAPH_NODE_TYPE_KERNEL`.
    Kernel(KernelNode),
    /// `CU_GRAPH_NODE_TYPE_MEMCPY`.
    Memcpy(CopyNode),
    /// `CU_GRAPH_NODE_TYPE_MEMSET`.
    Memset(MemsetNode),
    /// `CU_GRAPH_NODE_TYPE_HOST`.
    Host(HostNode),
    /// `CU_GRAPH_NODE_TYPE_GRAPH`: the embedded graph (owned by the node).
    Child(Arc<GraphObj>),
    /// `CU_GRAPH_NODE_TYPE_EMPTY`.
    Empty,
    /// `CU_GRAPH_NODE_TYPE_EVENT_RECORD`: the event's handle.
    EventRecord(usize),
    /// `CU_GRAPH_NODE_TYPE_WAIT_EVENT`: the event's handle.
    EventWait(usize),
    /// `CU_GRAPH_NODE_TYPE_MEM_ALLOC`: the memory (shared by the graph's
    /// instantiation, whose node allocates at the same address).
    MemAlloc(Arc<graph_mem::GraphAlloc>),
    /// `CU_GRAPH_NODE_TYPE_MEM_FREE`: the address it frees.
    MemFree(CUdeviceptr),
    /// `CU_GRAPH_NODE_TYPE_CONDITIONAL`.
    Conditional(ConditionalNode),
}

impl NodeKind {
    /// The `CUgraphNodeType`.
    pub fn type_code(&self) -> c_int {
        match self {
            NodeKind::Kernel(_) => NODE_KERNEL,
            NodeKind::Memcpy(_) => NODE_MEMCPY,
            NodeKind::Memset(_) => NODE_MEMSET,
            NodeKind::Host(_) => NODE_HOST,
            NodeKind::Child(_) => NODE_GRAPH,
            NodeKind::Empty => NODE_EMPTY,
            NodeKind::EventWait(_) => NODE_WAIT_EVENT,
            NodeKind::EventRecord(_) => NODE_EVENT_RECORD,
            NodeKind::MemAlloc(_) => NODE_MEM_ALLOC,
            NodeKind::MemFree(_) => NODE_MEM_FREE,
            NodeKind::Conditional(_) => NODE_CONDITIONAL,
        }
    }

    /// The graphs the node owns: a child graph, a conditional's bodies.
    fn embedded(&self) -> Vec<Arc<GraphObj>> {
        match self {
            NodeKind::Child(c) => vec![c.clone()],
            NodeKind::Conditional(c) => c.bodies.clone(),
            _ => Vec::new(),
        }
    }
}

/// A `CUgraphNode`.
pub struct NodeObj {
    /// The graph it belongs to (its handle).
    graph: usize,
    kind: Mutex<NodeKind>,
    /// The node this one was cloned from (`cuGraphClone`, instantiation); 0 if none.
    origin: usize,
    /// `cuGraphNodeSetEnabled` (nodes of executable graphs).
    enabled: AtomicBool,
    /// Kernel node attributes (`cuGraphKernelNodeSetAttribute`): id and value.
    attrs: Mutex<std::collections::BTreeMap<c_int, [u64; 8]>>,
}

impl NodeObj {
    fn kind(&self) -> MutexGuard<'_, NodeKind> {
        self.kind.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn attrs(&self) -> MutexGuard<'_, std::collections::BTreeMap<c_int, [u64; 8]>> {
        self.attrs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Default)]
struct GraphData {
    /// In creation order.
    nodes: Vec<Arc<NodeObj>>,
    /// `(from, to)` node handles, in creation order.
    edges: Vec<(usize, usize)>,
    /// References held on user objects: handle and count.
    user_refs: std::collections::BTreeMap<usize, u32>,
    /// Conditional handles created for the graph (`cuGraphConditionalHandleCreate`).
    cond_handles: Vec<Arc<CondHandle>>,
}

/// A `CUgraph`.
pub struct GraphObj {
    data: Mutex<GraphData>,
    /// Owned by a child graph node (`cuGraphChildGraphNodeGetGraph`): not destroyable on its own.
    embedded: bool,
    /// Whether its nodes are in [`NODES`] (graphs the caller can see).
    registered: bool,
    id: u32,
}

impl GraphObj {
    fn data(&self) -> MutexGuard<'_, GraphData> {
        self.data.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `cuGraphGetId`'s number.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The memory of its allocation nodes.
    fn allocations(&self) -> Vec<Arc<graph_mem::GraphAlloc>> {
        let d = self.data();
        d.nodes
            .iter()
            .filter_map(|n| match &*n.kind() {
                NodeKind::MemAlloc(a) => Some(a.clone()),
                _ => None,
            })
            .collect()
    }

    /// "CUDA_ERROR_NOT_SUPPORTED" when the graph has allocation or free
    /// nodes, for what such graphs do not allow (`what`): deleting nodes
    /// and edges, cloning, embedding as a child graph.
    fn refuse_memory_nodes(&self, what: &str) -> CuResult<()> {
        let has = self.data().nodes.iter().any(|n| matches!(&*n.kind(), NodeKind::MemAlloc(_) | NodeKind::MemFree(_)));
        if has {
            return Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because(format!("{what} a graph with memory nodes")));
        }
        Ok(())
    }
}

/// Live graphs the caller can name.
pub static GRAPHS: Registry<GraphObj> = Registry::new();
/// Live nodes of those graphs.
pub static NODES: Registry<NodeObj> = Registry::new();

/// A `CUgraphExec`: a private clone of the graph it was instantiated from.
pub struct ExecObj {
    graph: Arc<GraphObj>,
    flags: u64,
    /// Serialises launches and updates of this executable graph.
    lock: Mutex<()>,
}

/// Live executable graphs.
pub static EXECS: Registry<ExecObj> = Registry::new();

static NEXT_GRAPH_ID: AtomicU64 = AtomicU64::new(1);

fn new_graph(embedded: bool, registered: bool) -> Arc<GraphObj> {
    let id = NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed) as u32;
    Arc::new(GraphObj { data: Mutex::new(GraphData::default()), embedded, registered, id })
}

/// A new, empty graph, registered; returns its handle.
pub fn create_graph() -> (Handle, Arc<GraphObj>) {
    let g = new_graph(false, true);
    (GRAPHS.insert(g.clone()), g)
}

/// The live graph `h`; `CUDA_ERROR_INVALID_VALUE` otherwise (as the driver
/// reports bad graph handles).
pub fn lookup_graph(h: Handle) -> CuResult<Arc<GraphObj>> {
    driver::driver()?;
    GRAPHS.get(h).ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{h:p} is not a live graph")))
}

/// The live node `h`; `CUDA_ERROR_INVALID_VALUE` otherwise.
pub fn lookup_node(h: Handle) -> CuResult<Arc<NodeObj>> {
    driver::driver()?;
    NODES.get(h).ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{h:p} is not a live graph node")))
}

fn lookup_exec(h: Handle) -> CuResult<Arc<ExecObj>> {
    driver::driver()?;
    EXECS.get(h).ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{h:p} is not a live graph exec")))
}

/// Reads a dependency list: "CUDA_ERROR_INVALID_VALUE" for NULL with a
/// non-zero count, nodes of other graphs and duplicates.
///
/// # Safety
/// `deps` is NULL or readable for `n` handles.
unsafe fn read_deps(graph: Handle, deps: *const Handle, n: usize) -> CuResult<Vec<usize>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if deps.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("dependencies is NULL with numDependencies > 0"));
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: readable for `n` handles per the caller.
        let h = unsafe { deps.add(i).read_unaligned() };
        let node = lookup_node(h)?;
        if node.graph != graph as usize {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("dependency {h:p} is in another graph")));
        }
        if out.contains(&(h as usize)) {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("dependency {h:p} is listed twice")));
        }
        out.push(h as usize);
    }
    Ok(out)
}

/// Adds a node with edges from `deps` (already checked to be nodes of
/// `graph`) to graph `graph`; returns the node's handle.
pub fn add_node(graph_handle: Handle, graph: &GraphObj, deps: &[usize], kind: NodeKind) -> Handle {
    let node = Arc::new(NodeObj {
        graph: graph_handle as usize,
        kind: Mutex::new(kind),
        origin: 0,
        enabled: AtomicBool::new(true),
        attrs: Mutex::new(std::collections::BTreeMap::new()),
    });
    let h = if graph.registered { NODES.insert(node.clone()) } else { handle_of(&node) };
    let mut data = graph.data();
    data.nodes.push(node);
    for &d in deps {
        data.edges.push((d, h as usize));
    }
    h
}

/// Whether node `n` belongs to graph `graph`.
pub fn node_in_graph(n: &NodeObj, graph: Handle) -> bool {
    n.graph == graph as usize
}

/// Checks the graph and dependencies, then adds a node and writes its handle.
///
/// # Safety
/// `ph` is NULL or writable; `deps` is NULL or readable for `n` handles.
unsafe fn add(ph: *mut Handle, graph: Handle, deps: *const Handle, n: usize, kind: NodeKind) -> CuResult<()> {
    let g = lookup_graph(graph)?;
    if ph.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("phGraphNode is NULL"));
    }
    // SAFETY: forwarded caller contract.
    let deps = unsafe { read_deps(graph, deps, n) }?;
    let h = add_node(graph, &g, &deps, kind);
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(ph, h) }
}

/// `cuGraphCreate(CUgraph *phGraph, unsigned int flags)`: "flags must be 0".
///
/// # Safety
/// `ph` is NULL or writable.
pub unsafe fn graph_create(ph: *mut Handle, flags: c_uint) -> CuResult<()> {
    context::current()?;
    if ph.is_null() || flags != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("phGraph is NULL or flags are not 0"));
    }
    let (h, _) = create_graph();
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(ph, h) }
}

/// Unregisters a graph's nodes and its embedded graphs and drops its
/// references to user objects.
fn forget_graph(g: &GraphObj) {
    let refs = std::mem::take(&mut g.data().user_refs);
    for (h, n) in refs {
        let _ = user_object_release(h as Handle, n);
    }
    let nodes = std::mem::take(&mut g.data().nodes);
    for n in nodes {
        if g.registered {
            NODES.remove(handle_of(&n));
        }
        forget_node_contents(&n);
    }
}

/// Unregisters what a node owns (its embedded graph).
fn forget_node_contents(n: &NodeObj) {
    let embedded = {
        let kind = n.kind();
        if let NodeKind::MemFree(d) = &*kind {
            graph_mem::release_free(*d);
        }
        kind.embedded()
    };
    for c in embedded {
        if c.registered {
            GRAPHS.remove(handle_of(&c));
        }
        forget_graph(&c);
    }
}

/// `cuGraphDestroy(CUgraph hGraph)`.
pub fn graph_destroy(graph: Handle) -> CuResult<()> {
    let g = lookup_graph(graph)?;
    if g.embedded {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("the graph belongs to a child graph node"));
    }
    capture::check_graph_not_capturing(graph)?;
    GRAPHS.remove(graph);
    forget_graph(&g);
    drop(g);
    graph_mem::sweep();
    Ok(())
}

/// `cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const
/// CUgraphNode *dependencies, size_t numDependencies,
/// CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)`: the memory is allocated now,
/// at the address written to `nodeParams->dptr` (see `graph_mem.rs`).
///
/// # Safety
/// Pointers as the driver API documents them.
pub unsafe fn add_mem_alloc_node(
    ph: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    n: usize,
    params: *mut graph_mem::MemAllocNodeParams,
) -> CuResult<()> {
    let g = lookup_graph(graph)?;
    // SAFETY: forwarded caller contract.
    let mut p = unsafe { read_in(params) }?;
    if ph.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("phGraphNode is NULL"));
    }
    // SAFETY: forwarded caller contract (checked before allocating).
    let deps = unsafe { read_deps(graph, deps, n) }?;
    // SAFETY: forwarded caller contract.
    let a = unsafe { graph_mem::new_allocation(&p, g.id) }?;
    p.dptr = a.dptr;
    let h = add_node(graph, &g, &deps, NodeKind::MemAlloc(a));
    // SAFETY: both checked; writable per the caller.
    unsafe {
        params.write_unaligned(p);
        write_out(ph, h)
    }
}

/// `cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph, const
/// CUgraphNode *dependencies, size_t numDependencies, CUdeviceptr dptr)`.
///
/// # Safety
/// Pointers as the driver API documents them.
pub unsafe fn add_mem_free_node(
    ph: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    n: usize,
    dptr: CUdeviceptr,
) -> CuResult<()> {
    let g = lookup_graph(graph)?;
    if ph.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("phGraphNode is NULL"));
    }
    // SAFETY: forwarded caller contract.
    let deps = unsafe { read_deps(graph, deps, n) }?;
    let d = graph_mem::new_free(dptr, g.id)?;
    let h = add_node(graph, &g, &deps, NodeKind::MemFree(d));
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(ph, h) }
}

/// `cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS
/// *params_out)`: `accessDescs` points to the node's own copy.
///
/// # Safety
/// `out` is NULL or writable.
pub unsafe fn mem_alloc_node_get_params(node: Handle, out: *mut graph_mem::MemAllocNodeParams) -> CuResult<()> {
    let n = node_of_type(node, NODE_MEM_ALLOC)?;
    let p = match &*n.kind() {
        NodeKind::MemAlloc(a) => graph_mem::params_of(a),
        _ => return Err(CuError::CUDA_ERROR_INVALID_VALUE),
    };
    // SAFETY: forwarded caller contract.
    unsafe { write_out(out, p) }
}

/// `cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr *dptr_out)`.
///
/// # Safety
/// `out` is NULL or writable.
pub unsafe fn mem_free_node_get_params(node: Handle, out: *mut CUdeviceptr) -> CuResult<()> {
    let n = node_of_type(node, NODE_MEM_FREE)?;
    let d = match &*n.kind() {
        NodeKind::MemFree(d) => *d,
        _ => return Err(CuError::CUDA_ERROR_INVALID_VALUE),
    };
    // SAFETY: forwarded caller contract.
    unsafe { write_out(out, d) }
}

/// A node made while `stream` captures (`cuMemAllocAsync`, `cuMemFreeAsync`):
/// its kind from `make`, which gets the id of the graph being captured.
pub fn captured_memory_node(stream: Handle, make: impl FnOnce(u32) -> CuResult<NodeKind>) -> CuResult<bool> {
    capture::capture_node_in(stream, |g| make(g.id))
}

/// `cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const
/// CUgraphNode *dependencies, size_t numDependencies, const
/// CUDA_KERNEL_NODE_PARAMS *nodeParams)`: the parameter values are copied.
///
/// # Safety
/// Pointers as the driver API documents them.
pub unsafe fn add_kernel_node(
    ph: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    n: usize,
    params: *const KernelNodeParams,
) -> CuResult<()> {
    lookup_graph(graph)?;
    // SAFETY: forwarded caller contract.
    let p = unsafe { read_in(params) }?;
    // SAFETY: forwarded caller contract.
    let k = unsafe { KernelNode::from_params(&p) }?;
    // SAFETY: forwarded caller contract.
    unsafe { add(ph, graph, deps, n, NodeKind::Kernel(k)) }
}

/// `cuGraphAddKernelNode` (CUDA 10 `CUDA_KERNEL_NODE_PARAMS_v1`).
///
/// # Safety
/// As [`add_kernel_node`].
pub unsafe fn add_kernel_node_v1(
    ph: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    n: usize,
    params: *const KernelNodeParamsV1,
) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    let p: KernelNodeParams = unsafe { read_in(params) }?.into();
    // SAFETY: forwarded caller contract; `p` is a local copy.
    unsafe { add_kernel_node(ph, graph, deps, n, &p) }
}

/// `cuGraphAddMemcpyNode(..., const CUDA_MEMCPY3D *copyParams, CUcontext ctx)`.
///
/// # Safety
/// Pointers as the driver API documents them; the copy's host memory must
/// be valid whenever the graph runs.
pub unsafe fn add_memcpy_node(
    ph: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    n: usize,
    copy: *const Memcpy3D,
    ctx: Handle,
) -> CuResult<()> {
    lookup_graph(graph)?;
    context::given_or_current(ctx)?;
    // SAFETY: forwarded caller contract.
    let c = unsafe { read_in(copy) }?;
    mem::check_memcpy_3d(&c)?;
    // SAFETY: forwarded caller contract.
    unsafe { add(ph, graph, deps, n, NodeKind::Memcpy(CopyNode(c))) }
}

/// `cuGraphAddMemsetNode(..., const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)`.
///
/// # Safety
/// Pointers as the driver API documents them.
pub unsafe fn add_memset_node(
    ph: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    n: usize,
    params: *const MemsetNodeParams,
    ctx: Handle,
) -> CuResult<()> {
    lookup_graph(graph)?;
    context::given_or_current(ctx)?;
    // SAFETY: forwarded caller contract.
    let p = unsafe { read_in(params) }?;
    let m = MemsetNode::new(p.dst, p.pitch, p.value, p.element_size, p.width, p.height)?;
    // SAFETY: forwarded caller contract.
    unsafe { add(ph, graph, deps, n, NodeKind::Memset(m)) }
}

/// `cuGraphAddHostNode(..., const CUDA_HOST_NODE_PARAMS *nodeParams)`.
///
/// # Safety
/// Pointers as the driver API documents them.
pub unsafe fn add_host_node(
    ph: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    n: usize,
    params: *const HostNodeParams,
) -> CuResult<()> {
    lookup_graph(graph)?;
    // SAFETY: forwarded caller contract.
    let p = unsafe { read_in(params) }?;
    let h = HostNode::new(p.f, p.user_data)?;
    // SAFETY: forwarded caller contract.
    unsafe { add(ph, graph, deps, n, NodeKind::Host(h)) }
}

/// `cuGraphAddEmptyNode(...)`.
///
/// # Safety
/// Pointers as the driver API documents them.
pub unsafe fn add_empty_node(ph: *mut Handle, graph: Handle, deps: *const Handle, n: usize) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe { add(ph, graph, deps, n, NodeKind::Empty) }
}

/// `cuGraphAddEventRecordNode(..., CUevent event)`.
///
/// # Safety
/// Pointers as the driver API documents them.
pub unsafe fn add_event_record_node(
    ph: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    n: usize,
    event: Handle,
) -> CuResult<()> {
    stream::lookup_event(event)?;
    // SAFETY: forwarded caller contract.
    unsafe { add(ph, graph, deps, n, NodeKind::EventRecord(event as usize)) }
}

/// `cuGraphAddEventWaitNode(..., CUevent event)`.
///
/// # Safety
/// Pointers as the driver API documents them.
pub unsafe fn add_event_wait_node(
    ph: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    n: usize,
    event: Handle,
) -> CuResult<()> {
    stream::lookup_event(event)?;
    // SAFETY: forwarded caller contract.
    unsafe { add(ph, graph, deps, n, NodeKind::EventWait(event as usize)) }
}

/// `cuGraphAddChildGraphNode(..., CUgraph childGraph)`: the child graph is cloned.
///
/// # Safety
/// Pointers as the driver API documents them.
pub unsafe fn add_child_graph_node(
    ph: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    n: usize,
    child: Handle,
) -> CuResult<()> {
    let c = lookup_graph(child)?;
    if child == graph {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("a graph cannot contain itself"));
    }
    lookup_graph(graph)?;
    c.refuse_memory_nodes("embedding")?;
    let copy = clone_graph(&c, true, true);
    // SAFETY: forwarded caller contract.
    let r = unsafe { add(ph, graph, deps, n, NodeKind::Child(copy.clone())) };
    if r.is_err() {
        GRAPHS.remove(handle_of(&copy));
        forget_graph(&copy);
    }
    r
}

/// A deep copy of `src`: each node remembers the node it was copied from.
/// `register` makes the copy (and its embedded graphs) nameable by handle.
pub fn clone_graph(src: &GraphObj, register: bool, embedded: bool) -> Arc<GraphObj> {
    let g = new_graph(embedded, register);
    let gh = if register { GRAPHS.insert(g.clone()) } else { handle_of(&g) };
    let (nodes, edges, user_refs, cond_handles) = {
        let d = src.data();
        (d.nodes.clone(), d.edges.clone(), d.user_refs.clone(), d.cond_handles.clone())
    };
    let mut map = std::collections::HashMap::new();
    let mut data = GraphData::default();
    // The copy holds its own references to the user objects.
    for (&h, &n) in &user_refs {
        if let Some(u) = USER_OBJECTS.get(h as Handle) {
            *u.refs() += u64::from(n);
        }
    }
    data.user_refs = user_refs;
    data.cond_handles = cond_handles;
    for n in &nodes {
        let kind = match &*n.kind() {
            NodeKind::Child(c) => NodeKind::Child(clone_graph(c, register, true)),
            NodeKind::Conditional(c) => NodeKind::Conditional(c.deep_clone(register)),
            NodeKind::MemFree(d) => {
                graph_mem::retain_free(*d);
                NodeKind::MemFree(*d)
            }
            other => other.clone(),
        };
        let copy = Arc::new(NodeObj {
            graph: gh as usize,
            kind: Mutex::new(kind),
            origin: handle_of(n) as usize,
            enabled: AtomicBool::new(true),
            attrs: Mutex::new(n.attrs().clone()),
        });
        let h = if register { NODES.insert(copy.clone()) } else { handle_of(&copy) };
        map.insert(handle_of(n) as usize, h as usize);
        data.nodes.push(copy);
    }
    data.edges = edges.iter().filter_map(|(a, b)| Some((*map.get(a)?, *map.get(b)?))).collect();
    *g.data() = data;
    g
}

/// Reads edge data: only default edges (all zero) are supported.
///
/// # Safety
/// `edge_data` is NULL or readable for `n` entries.
unsafe fn check_edge_data(edge_data: *const EdgeData, n: usize) -> CuResult<()> {
    if edge_data.is_null() {
        return Ok(());
    }
    for i in 0..n {
        // SAFETY: readable for `n` entries per the caller.
        let e = unsafe { edge_data.add(i).read_unaligned() };
        if e != EdgeData::default() {
            return Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because("only default graph edges are supported"));
        }
    }
    Ok(())
}

/// Reads `n` `(from, to)` pairs of nodes of `graph`.
///
/// # Safety
/// `from` and `to` are NULL or readable for `n` handles.
unsafe fn read_pairs(graph: Handle, from: *const Handle, to: *const Handle, n: usize) -> CuResult<Vec<(usize, usize)>> {
    if n > 0 && (from.is_null() || to.is_null()) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("from or to is NULL"));
    }
    let mut pairs = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: readable for `n` handles per the caller.
        let (a, b) = unsafe { (from.add(i).read_unaligned(), to.add(i).read_unaligned()) };
        for h in [a, b] {
            if lookup_node(h)?.graph != graph as usize {
                return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{h:p} is in another graph")));
            }
        }
        if a == b {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("a node cannot depend on itself"));
        }
        pairs.push((a as usize, b as usize));
    }
    Ok(pairs)
}

/// `cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode *from, const
/// CUgraphNode *to, const CUgraphEdgeData *edgeData, size_t numDependencies)`:
/// "CUDA_ERROR_INVALID_VALUE" for an edge that exists already. Cycles are
/// reported by instantiation (`CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE`).
///
/// # Safety
/// Arrays readable for `n` entries (or NULL when `n` is 0; `edge_data` may be NULL).
pub unsafe fn add_dependencies(
    graph: Handle,
    from: *const Handle,
    to: *const Handle,
    edge_data: *const EdgeData,
    n: usize,
) -> CuResult<()> {
    let g = lookup_graph(graph)?;
    // SAFETY: forwarded caller contract.
    unsafe { check_edge_data(edge_data, n) }?;
    // SAFETY: forwarded caller contract.
    let pairs = unsafe { read_pairs(graph, from, to, n) }?;
    let mut data = g.data();
    let mut edges = data.edges.clone();
    for p in pairs {
        if edges.contains(&p) {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("the dependency exists already"));
        }
        edges.push(p);
    }
    data.edges = edges;
    Ok(())
}

/// Whether `to` is reachable from `from` along `edges`.
fn reaches(edges: &[(usize, usize)], from: usize, to: usize) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from];
    while let Some(n) = stack.pop() {
        if n == to {
            return true;
        }
        if seen.insert(n) {
            stack.extend(edges.iter().filter(|e| e.0 == n).map(|e| e.1));
        }
    }
    false
}

/// Whether every node of `from` reaches some node of `to` (or is one).
pub fn all_reach(graph: &GraphObj, from: &[usize], to: &[usize]) -> bool {
    let edges = graph.data().edges.clone();
    from.iter().all(|&f| to.iter().any(|&t| reaches(&edges, f, t)))
}

/// `cuGraphAddDependencies` (CUDA 10, no edge data).
///
/// # Safety
/// As [`add_dependencies`].
pub unsafe fn add_dependencies_v1(graph: Handle, from: *const Handle, to: *const Handle, n: usize) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe { add_dependencies(graph, from, to, std::ptr::null(), n) }
}

/// `cuGraphRemoveDependencies_v2(...)`: "CUDA_ERROR_INVALID_VALUE" for an
/// edge that does not exist.
///
/// # Safety
/// As [`add_dependencies`].
pub unsafe fn remove_dependencies(
    graph: Handle,
    from: *const Handle,
    to: *const Handle,
    edge_data: *const EdgeData,
    n: usize,
) -> CuResult<()> {
    let g = lookup_graph(graph)?;
    // SAFETY: forwarded caller contract.
    unsafe { check_edge_data(edge_data, n) }?;
    // SAFETY: forwarded caller contract.
    let pairs = unsafe { read_pairs(graph, from, to, n) }?;
    g.refuse_memory_nodes("removing edges of")?;
    let mut data = g.data();
    if let Some(p) = pairs.iter().find(|p| !data.edges.contains(p)) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("no edge {:#x} -> {:#x}", p.0, p.1)));
    }
    data.edges.retain(|e| !pairs.contains(e));
    Ok(())
}

/// `cuGraphRemoveDependencies` (CUDA 10).
///
/// # Safety
/// As [`add_dependencies`].
pub unsafe fn remove_dependencies_v1(graph: Handle, from: *const Handle, to: *const Handle, n: usize) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe { remove_dependencies(graph, from, to, std::ptr::null(), n) }
}

/// Writes a node list the way the driver's enumeration calls do: with a NULL
/// array only the count; otherwise up to `*count` entries, NULL past the
/// end, and the number written back to `*count`.
///
/// # Safety
/// `count` is NULL or readable and writable; `out` is NULL or writable for `*count` handles.
unsafe fn write_list(out: *mut Handle, edge_out: *mut EdgeData, count: *mut usize, items: &[usize]) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    let cap = unsafe { read_in(count) }?;
    if out.is_null() {
        if !edge_out.is_null() {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("edgeData without the node array"));
        }
        // SAFETY: checked readable above, hence non-null and writable per the caller.
        return unsafe { write_out(count, items.len()) };
    }
    for i in 0..cap {
        let v = items.get(i).map_or(std::ptr::null_mut(), |&h| h as Handle);
        // SAFETY: writable for `cap` entries per the caller.
        unsafe {
            out.add(i).write_unaligned(v);
            if !edge_out.is_null() {
                edge_out.add(i).write_unaligned(EdgeData::default());
            }
        }
    }
    // SAFETY: as above.
    unsafe { write_out(count, cap.min(items.len())) }
}

/// `cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)`.
///
/// # Safety
/// As `write_list`.
pub unsafe fn get_nodes(graph: Handle, nodes: *mut Handle, count: *mut usize) -> CuResult<()> {
    let g = lookup_graph(graph)?;
    let items: Vec<usize> = g.data().nodes.iter().map(|n| handle_of(n) as usize).collect();
    // SAFETY: forwarded caller contract.
    unsafe { write_list(nodes, std::ptr::null_mut(), count, &items) }
}

/// `cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *rootNodes, size_t *numRootNodes)`.
///
/// # Safety
/// As `write_list`.
pub unsafe fn get_root_nodes(graph: Handle, nodes: *mut Handle, count: *mut usize) -> CuResult<()> {
    let g = lookup_graph(graph)?;
    let items: Vec<usize> = {
        let d = g.data();
        d.nodes.iter().map(|n| handle_of(n) as usize).filter(|h| !d.edges.iter().any(|e| e.1 == *h)).collect()
    };
    // SAFETY: forwarded caller contract.
    unsafe { write_list(nodes, std::ptr::null_mut(), count, &items) }
}

/// `cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
/// CUgraphEdgeData *edgeData, size_t *numEdges)`: as the node lists, with
/// `from` and `to` given together.
///
/// # Safety
/// `count` readable and writable; the arrays NULL or writable for `*count` entries.
pub unsafe fn get_edges(
    graph: Handle,
    from: *mut Handle,
    to: *mut Handle,
    edge_data: *mut EdgeData,
    count: *mut usize,
) -> CuResult<()> {
    let g = lookup_graph(graph)?;
    let edges = g.data().edges.clone();
    if from.is_null() != to.is_null() || (from.is_null() && !edge_data.is_null()) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("from, to and edgeData must be given together"));
    }
    // SAFETY: forwarded caller contract.
    let cap = unsafe { read_in(count) }?;
    if from.is_null() {
        // SAFETY: readable above, hence non-null; writable per the caller.
        return unsafe { write_out(count, edges.len()) };
    }
    for i in 0..cap {
        let (a, b) = edges.get(i).map_or((0, 0), |e| *e);
        // SAFETY: the arrays are writable for `cap` entries per the caller.
        unsafe {
            from.add(i).write_unaligned(a as Handle);
            to.add(i).write_unaligned(b as Handle);
            if !edge_data.is_null() {
                edge_data.add(i).write_unaligned(EdgeData::default());
            }
        }
    }
    // SAFETY: as above.
    unsafe { write_out(count, cap.min(edges.len())) }
}

/// `cuGraphGetEdges` (CUDA 10, no edge data).
///
/// # Safety
/// As [`get_edges`].
pub unsafe fn get_edges_v1(graph: Handle, from: *mut Handle, to: *mut Handle, count: *mut usize) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe { get_edges(graph, from, to, std::ptr::null_mut(), count) }
}

/// `cuGraphNodeGetDependencies_v2(CUgraphNode hNode, CUgraphNode
/// *dependencies, CUgraphEdgeData *edgeData, size_t *numDependencies)`.
///
/// # Safety
/// As `write_list`.
pub unsafe fn node_get_dependencies(
    node: Handle,
    out: *mut Handle,
    edge_data: *mut EdgeData,
    count: *mut usize,
) -> CuResult<()> {
    let n = lookup_node(node)?;
    let g = lookup_graph(n.graph as Handle)?;
    let items: Vec<usize> = g.data().edges.iter().filter(|e| e.1 == node as usize).map(|e| e.0).collect();
    // SAFETY: forwarded caller contract.
    unsafe { write_list(out, edge_data, count, &items) }
}

/// `cuGraphNodeGetDependencies` (CUDA 10).
///
/// # Safety
/// As `write_list`.
pub unsafe fn node_get_dependencies_v1(node: Handle, out: *mut Handle, count: *mut usize) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe { node_get_dependencies(node, out, std::ptr::null_mut(), count) }
}

/// `cuGraphNodeGetDependentNodes_v2(...)`.
///
/// # Safety
/// As `write_list`.
pub unsafe fn node_get_dependent_nodes(
    node: Handle,
    out: *mut Handle,
    edge_data: *mut EdgeData,
    count: *mut usize,
) -> CuResult<()> {
    let n = lookup_node(node)?;
    let g = lookup_graph(n.graph as Handle)?;
    let items: Vec<usize> = g.data().edges.iter().filter(|e| e.0 == node as usize).map(|e| e.1).collect();
    // SAFETY: forwarded caller contract.
    unsafe { write_list(out, edge_data, count, &items) }
}

/// `cuGraphNodeGetDependentNodes` (CUDA 10).
///
/// # Safety
/// As `write_list`.
pub unsafe fn node_get_dependent_nodes_v1(node: Handle, out: *mut Handle, count: *mut usize) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe { node_get_dependent_nodes(node, out, std::ptr::null_mut(), count) }
}

/// `cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)`.
///
/// # Safety
/// `ty` is NULL or writable.
pub unsafe fn node_get_type(node: Handle, ty: *mut c_int) -> CuResult<()> {
    let n = lookup_node(node)?;
    let code = n.kind().type_code();
    // SAFETY: forwarded caller contract.
    unsafe { write_out(ty, code) }
}

/// `cuGraphDestroyNode(CUgraphNode hNode)`: removes the node and its edges.
pub fn destroy_node(node: Handle) -> CuResult<()> {
    let n = lookup_node(node)?;
    let g = lookup_graph(n.graph as Handle)?;
    capture::check_graph_not_capturing(n.graph as Handle)?;
    g.refuse_memory_nodes("deleting nodes of")?;
    {
        let mut d = g.data();
        d.nodes.retain(|x| handle_of(x) != node);
        d.edges.retain(|e| e.0 != node as usize && e.1 != node as usize);
    }
    NODES.remove(node);
    forget_node_contents(&n);
    Ok(())
}

/// The node `node`, which must be of type `ty`.
fn node_of_type(node: Handle, ty: c_int) -> CuResult<Arc<NodeObj>> {
    let n = lookup_node(node)?;
    if n.kind().type_code() != ty {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{node:p} is not a node of type {ty}")));
    }
    Ok(n)
}

/// `cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS
/// *nodeParams)`: `kernelParams` points to the node's copies, valid until
/// its parameters change or it is destroyed.
///
/// # Safety
/// `params` is NULL or writable.
pub unsafe fn kernel_node_get_params(node: Handle, params: *mut KernelNodeParams) -> CuResult<()> {
    let n = node_of_type(node, NODE_KERNEL)?;
    let p = match &*n.kind() {
        NodeKind::Kernel(k) => k.params(),
        _ => return Err(CuError::CUDA_ERROR_INVALID_VALUE),
    };
    // SAFETY: forwarded caller contract.
    unsafe { write_out(params, p) }
}

/// `cuGraphKernelNodeGetParams` (CUDA 10 layout).
///
/// # Safety
/// `params` is NULL or writable.
pub unsafe fn kernel_node_get_params_v1(node: Handle, params: *mut KernelNodeParamsV1) -> CuResult<()> {
    let n = node_of_type(node, NODE_KERNEL)?;
    let p = match &*n.kind() {
        NodeKind::Kernel(k) => k.params(),
        _ => return Err(CuError::CUDA_ERROR_INVALID_VALUE),
    };
    let v1 = KernelNodeParamsV1 {
        func: if p.func.is_null() { p.kern } else { p.func },
        grid: p.grid,
        block: p.block,
        shared_mem_bytes: p.shared_mem_bytes,
        kernel_params: p.kernel_params,
        extra: p.extra,
    };
    // SAFETY: forwarded caller contract.
    unsafe { write_out(params, v1) }
}

/// Replaces the kind of a node with one of the same type.
fn set_kind(n: &NodeObj, kind: NodeKind) -> CuResult<()> {
    let mut k = n.kind();
    if k.type_code() != kind.type_code() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("the node is of another type"));
    }
    *k = kind;
    Ok(())
}

/// `cuGraphKernelNodeSetParams_v2(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *nodeParams)`.
///
/// # Safety
/// `params` is NULL or readable, with parameter pointers as `cuLaunchKernel` documents.
pub unsafe fn kernel_node_set_params(node: Handle, params: *const KernelNodeParams) -> CuResult<()> {
    let n = node_of_type(node, NODE_KERNEL)?;
    // SAFETY: forwarded caller contract.
    let p = unsafe { read_in(params) }?;
    // SAFETY: forwarded caller contract.
    let k = unsafe { KernelNode::from_params(&p) }?;
    set_kind(&n, NodeKind::Kernel(k))
}

/// `cuGraphKernelNodeSetParams` (CUDA 10 layout).
///
/// # Safety
/// As [`kernel_node_set_params`].
pub unsafe fn kernel_node_set_params_v1(node: Handle, params: *const KernelNodeParamsV1) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    let p: KernelNodeParams = unsafe { read_in(params) }?.into();
    // SAFETY: `p` is a local copy; its pointers as the caller's.
    unsafe { kernel_node_set_params(node, &p) }
}

/// `cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams)`.
///
/// # Safety
/// `params` is NULL or writable.
pub unsafe fn memcpy_node_get_params(node: Handle, params: *mut Memcpy3D) -> CuResult<()> {
    let n = node_of_type(node, NODE_MEMCPY)?;
    let c = match &*n.kind() {
        NodeKind::Memcpy(c) => c.0,
        _ => return Err(CuError::CUDA_ERROR_INVALID_VALUE),
    };
    // SAFETY: forwarded caller contract.
    unsafe { write_out(params, c) }
}

/// `cuGraphMemcpyNodeSetParams(CUgraphNode hNode, const CUDA_MEMCPY3D *nodeParams)`.
///
/// # Safety
/// `params` is NULL or readable.
pub unsafe fn memcpy_node_set_params(node: Handle, params: *const Memcpy3D) -> CuResult<()> {
    let n = node_of_type(node, NODE_MEMCPY)?;
    // SAFETY: forwarded caller contract.
    let c = unsafe { read_in(params) }?;
    mem::check_memcpy_3d(&c)?;
    set_kind(&n, NodeKind::Memcpy(CopyNode(c)))
}

/// `cuGraphMemsetNodeGetParams(CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *nodeParams)`.
///
/// # Safety
/// `params` is NULL or writable.
pub unsafe fn memset_node_get_params(node: Handle, params: *mut MemsetNodeParams) -> CuResult<()> {
    let n = node_of_type(node, NODE_MEMSET)?;
    let p = match &*n.kind() {
        NodeKind::Memset(m) => m.0,
        _ => return Err(CuError::CUDA_ERROR_INVALID_VALUE),
    };
    // SAFETY: forwarded caller contract.
    unsafe { write_out(params, p) }
}

/// `cuGraphMemsetNodeSetParams(CUgraphNode hNode, const CUDA_MEMSET_NODE_PARAMS *nodeParams)`.
///
/// # Safety
/// `params` is NULL or readable.
pub unsafe fn memset_node_set_params(node: Handle, params: *const MemsetNodeParams) -> CuResult<()> {
    let n = node_of_type(node, NODE_MEMSET)?;
    // SAFETY: forwarded caller contract.
    let p = unsafe { read_in(params) }?;
    set_kind(&n, NodeKind::Memset(MemsetNode::new(p.dst, p.pitch, p.value, p.element_size, p.width, p.height)?))
}

/// `cuGraphHostNodeGetParams(CUgraphNode hNode, CUDA_HOST_NODE_PARAMS *nodeParams)`.
///
/// # Safety
/// `params` is NULL or writable.
pub unsafe fn host_node_get_params(node: Handle, params: *mut HostNodeParams) -> CuResult<()> {
    let n = node_of_type(node, NODE_HOST)?;
    let p = match &*n.kind() {
        NodeKind::Host(h) => HostNodeParams { f: Some(h.f), user_data: h.user_data as *mut c_void },
        _ => return Err(CuError::CUDA_ERROR_INVALID_VALUE),
    };
    // SAFETY: forwarded caller contract.
    unsafe { write_out(params, p) }
}

/// `cuGraphHostNodeSetParams(CUgraphNode hNode, const CUDA_HOST_NODE_PARAMS *nodeParams)`.
///
/// # Safety
/// `params` is NULL or readable.
pub unsafe fn host_node_set_params(node: Handle, params: *const HostNodeParams) -> CuResult<()> {
    let n = node_of_type(node, NODE_HOST)?;
    // SAFETY: forwarded caller contract.
    let p = unsafe { read_in(params) }?;
    set_kind(&n, NodeKind::Host(HostNode::new(p.f, p.user_data)?))
}

/// `cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph *phGraph)`:
/// the embedded graph itself (not a copy), owned by the node.
///
/// # Safety
/// `ph` is NULL or writable.
pub unsafe fn child_graph_node_get_graph(node: Handle, ph: *mut Handle) -> CuResult<()> {
    let n = node_of_type(node, NODE_GRAPH)?;
    let h = match &*n.kind() {
        NodeKind::Child(c) => handle_of(c),
        _ => return Err(CuError::CUDA_ERROR_INVALID_VALUE),
    };
    // SAFETY: forwarded caller contract.
    unsafe { write_out(ph, h) }
}

/// The event of an event record or wait node.
fn node_event(node: Handle, ty: c_int) -> CuResult<usize> {
    let n = node_of_type(node, ty)?;
    let e = match &*n.kind() {
        NodeKind::EventRecord(e) | NodeKind::EventWait(e) => *e,
        _ => return Err(CuError::CUDA_ERROR_INVALID_VALUE),
    };
    Ok(e)
}

/// `cuGraphEventRecordNodeGetEvent(CUgraphNode hNode, CUevent *event_out)`.
///
/// # Safety
/// `out` is NULL or writable.
pub unsafe fn event_record_node_get_event(node: Handle, out: *mut Handle) -> CuResult<()> {
    let e = node_event(node, NODE_EVENT_RECORD)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(out, e as Handle) }
}

/// `cuGraphEventWaitNodeGetEvent(CUgraphNode hNode, CUevent *event_out)`.
///
/// # Safety
/// `out` is NULL or writable.
pub unsafe fn event_wait_node_get_event(node: Handle, out: *mut Handle) -> CuResult<()> {
    let e = node_event(node, NODE_WAIT_EVENT)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(out, e as Handle) }
}

/// `cuGraphEventRecordNodeSetEvent(CUgraphNode hNode, CUevent event)`.
pub fn event_record_node_set_event(node: Handle, event: Handle) -> CuResult<()> {
    let n = node_of_type(node, NODE_EVENT_RECORD)?;
    stream::lookup_event(event)?;
    set_kind(&n, NodeKind::EventRecord(event as usize))
}

/// `cuGraphEventWaitNodeSetEvent(CUgraphNode hNode, CUevent event)`.
pub fn event_wait_node_set_event(node: Handle, event: Handle) -> CuResult<()> {
    let n = node_of_type(node, NODE_WAIT_EVENT)?;
    stream::lookup_event(event)?;
    set_kind(&n, NodeKind::EventWait(event as usize))
}

/// `cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)`.
///
/// # Safety
/// `ph` is NULL or writable.
pub unsafe fn graph_clone(ph: *mut Handle, graph: Handle) -> CuResult<()> {
    let g = lookup_graph(graph)?;
    if ph.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("phGraphClone is NULL"));
    }
    g.refuse_memory_nodes("cloning")?;
    let c = clone_graph(&g, true, false);
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(ph, handle_of(&c)) }
}

/// `cuGraphNodeFindInClone(CUgraphNode *phNode, CUgraphNode hOriginalNode,
/// CUgraph hClonedGraph)`: "CUDA_ERROR_INVALID_VALUE" if the graph is not a
/// clone of the node's graph.
///
/// # Safety
/// `ph` is NULL or writable.
pub unsafe fn node_find_in_clone(ph: *mut Handle, original: Handle, clone: Handle) -> CuResult<()> {
    let g = lookup_graph(clone)?;
    lookup_node(original)?;
    let found = g.data().nodes.iter().find(|n| n.origin == original as usize).map(handle_of);
    let h =
        found.ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because("the node has no counterpart in that graph"))?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(ph, h) }
}

/// The nodes of `g` in a topological order (creation order among the ready
/// ones), or a node on a cycle.
fn topological(g: &GraphObj) -> Result<Vec<Arc<NodeObj>>, usize> {
    let d = g.data();
    let mut indegree: Vec<usize> = d
        .nodes
        .iter()
        .map(|n| {
            let h = handle_of(n) as usize;
            d.edges.iter().filter(|e| e.1 == h).count()
        })
        .collect();
    let mut done = vec![false; d.nodes.len()];
    let mut order = Vec::with_capacity(d.nodes.len());
    while order.len() < d.nodes.len() {
        let Some(i) = (0..d.nodes.len()).find(|&i| !done[i] && indegree[i] == 0) else {
            let stuck = (0..d.nodes.len()).find(|&i| !done[i]).unwrap_or(0);
            return Err(handle_of(&d.nodes[stuck]) as usize);
        };
        done[i] = true;
        let h = handle_of(&d.nodes[i]) as usize;
        for e in d.edges.iter().filter(|e| e.0 == h) {
            if let Some(j) = d.nodes.iter().position(|n| handle_of(n) as usize == e.1) {
                indegree[j] = indegree[j].saturating_sub(1);
            }
        }
        order.push(d.nodes[i].clone());
    }
    Ok(order)
}

/// Checks that `g` and its embedded graphs have no cycles; the node on one otherwise.
fn check_acyclic(g: &GraphObj) -> Result<(), usize> {
    for n in topological(g)? {
        let embedded = n.kind().embedded();
        for c in embedded {
            check_acyclic(&c).map_err(|_| handle_of(&n) as usize)?;
        }
    }
    Ok(())
}

/// `CUDA_GRAPH_INSTANTIATE_FLAG_*` this library accepts: auto-free (of
/// allocations still live from the last launch), upload, device launch
/// (refused), node priority.
const INSTANTIATE_FLAGS: u64 = 0xf;
/// `CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH`.
const INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH: u64 = 1;
/// `CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD`.
const INSTANTIATE_FLAG_UPLOAD: u64 = 2;
/// `CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH`.
const INSTANTIATE_FLAG_DEVICE_LAUNCH: u64 = 4;
/// `CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE`.
const INSTANTIATE_INVALID_STRUCTURE: c_int = 2;
/// `CUDA_GRAPH_INSTANTIATE_ERROR`.
const INSTANTIATE_ERROR: c_int = 1;

/// Instantiates `graph`: the executable graph's handle, or the error, the
/// `CUgraphInstantiateResult` and the node at fault.
fn instantiate(graph: Handle, flags: u64) -> Result<Handle, (CuError, c_int, usize)> {
    let g = lookup_graph(graph).map_err(|e| (e, INSTANTIATE_ERROR, 0))?;
    if flags & !INSTANTIATE_FLAGS != 0 {
        return Err((
            CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown flags {flags:#x}")),
            INSTANTIATE_ERROR,
            0,
        ));
    }
    if flags & INSTANTIATE_FLAG_DEVICE_LAUNCH != 0 {
        let e = CuError::CUDA_ERROR_NOT_SUPPORTED.because("device-launchable graphs are not supported");
        return Err((e, INSTANTIATE_ERROR, 0));
    }
    if let Err(node) = check_acyclic(&g) {
        let e = CuError::CUDA_ERROR_INVALID_VALUE.because("the graph has a cycle");
        return Err((e, INSTANTIATE_INVALID_STRUCTURE, node));
    }
    // "Only one instantiation of the graph may exist at any point in time"
    // when it has allocation nodes (their memory is the instantiation's);
    // checked and registered under one lock, so two threads cannot both pass.
    static INSTANTIATING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = INSTANTIATING.lock().unwrap_or_else(|p| p.into_inner());
    let allocs = g.allocations();
    if let Some(first) = allocs.first() {
        let taken = EXECS.all().iter().any(|(_, e)| e.graph.allocations().iter().any(|a| Arc::ptr_eq(a, first)));
        if taken {
            let e = CuError::CUDA_ERROR_NOT_SUPPORTED
                .because("a graph with allocation nodes can have one executable graph at a time");
            return Err((e, INSTANTIATE_ERROR, 0));
        }
    }
    let copy = clone_graph(&g, false, false);
    Ok(EXECS.insert(Arc::new(ExecObj { graph: copy, flags, lock: Mutex::new(()) })))
}

/// `cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
/// unsigned long long flags)`: "CUDA_ERROR_INVALID_VALUE" for a graph with a cycle.
///
/// # Safety
/// `ph` is NULL or writable.
pub unsafe fn instantiate_with_flags(ph: *mut Handle, graph: Handle, flags: u64) -> CuResult<()> {
    context::current()?;
    if ph.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("phGraphExec is NULL"));
    }
    if flags & INSTANTIATE_FLAG_UPLOAD != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("the upload flag needs cuGraphInstantiateWithParams"));
    }
    let h = instantiate(graph, flags).map_err(|e| e.0)?;
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(ph, h) }
}

/// `cuGraphInstantiate` / `cuGraphInstantiate_v2` (CUDA 10/11: `CUgraphExec
/// *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
/// size_t bufferSize`): the log gets the reason of a failure.
///
/// # Safety
/// `ph` is NULL or writable; `err_node` NULL or writable; `log` NULL or writable for `size` bytes.
pub unsafe fn instantiate_v1(
    ph: *mut Handle,
    graph: Handle,
    err_node: *mut Handle,
    log: *mut c_char,
    size: usize,
) -> CuResult<()> {
    context::current()?;
    if ph.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("phGraphExec is NULL"));
    }
    match instantiate(graph, 0) {
        Ok(h) => {
            // SAFETY: forwarded caller contract.
            unsafe {
                write_opt(err_node, std::ptr::null_mut());
                crate::ffi::copy_c_string(log, size, b"");
                write_out(ph, h)
            }
        }
        Err((e, _, node)) => {
            let why = crate::result::take_detail().unwrap_or_default();
            // SAFETY: forwarded caller contract.
            unsafe {
                write_opt(err_node, node as Handle);
                crate::ffi::copy_c_string(log, size, why.as_bytes());
            }
            Err(e.because(why))
        }
    }
}

/// `cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
/// CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)`: sets `result_out`
/// and `hErrNode_out`; uploads to `hUploadStream` with the upload flag.
///
/// # Safety
/// `ph` is NULL or writable; `params` NULL or readable and writable.
pub unsafe fn instantiate_with_params(ph: *mut Handle, graph: Handle, params: *mut InstantiateParams) -> CuResult<()> {
    context::current()?;
    // SAFETY: forwarded caller contract.
    let mut p = unsafe { read_in(params) }?;
    if ph.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("phGraphExec is NULL"));
    }
    if p.flags & INSTANTIATE_FLAG_UPLOAD != 0 {
        stream::check(p.upload_stream)?;
    }
    let r = instantiate(graph, p.flags);
    let out = match r {
        Ok(h) => {
            p.result_out = 0;
            p.err_node_out = std::ptr::null_mut();
            // SAFETY: checked non-null; writable per the caller.
            unsafe { write_out(ph, h) }
        }
        Err((e, result, node)) => {
            p.result_out = result;
            p.err_node_out = node as Handle;
            Err(e)
        }
    };
    // SAFETY: checked readable above; writable per the caller.
    unsafe { params.write_unaligned(p) };
    out
}

/// `cuGraphExecDestroy(CUgraphExec hGraphExec)`.
pub fn exec_destroy(exec: Handle) -> CuResult<()> {
    let e = lookup_exec(exec)?;
    EXECS.remove(exec);
    forget_graph(&e.graph);
    drop(e);
    graph_mem::sweep();
    Ok(())
}

/// `cuGraphExecGetFlags(CUgraphExec hGraphExec, cuuint64_t *flags)`.
///
/// # Safety
/// `flags` is NULL or writable.
pub unsafe fn exec_get_flags(exec: Handle, flags: *mut u64) -> CuResult<()> {
    let e = lookup_exec(exec)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(flags, e.flags) }
}

/// Runs one node on `stream` (not capturing).
fn run_node(kind: &NodeKind, stream: Handle) -> CuResult<()> {
    match kind {
        NodeKind::Kernel(k) => launch::launch_copied(&k.function, k.grid, k.block, k.shared_mem_bytes, &k.args),
        // SAFETY: the host memory of a memcpy node must be valid whenever
        // the graph runs, which the caller promised when adding it.
        NodeKind::Memcpy(c) => unsafe { mem::run_memcpy_3d(&c.0) },
        NodeKind::Memset(m) => m.run(),
        NodeKind::Host(h) => {
            stream::context_of(stream)?.runtime.synchronize()?;
            // SAFETY: the caller's host function, called as the driver API documents.
            unsafe { (h.f)(h.user_data as *mut c_void) };
            Ok(())
        }
        NodeKind::Child(c) => run_graph(c, stream),
        NodeKind::Empty => Ok(()),
        NodeKind::EventRecord(e) => stream::record_now(*e as Handle, stream),
        NodeKind::EventWait(e) => {
            let ev = stream::lookup_event(*e as Handle)?;
            // The graph's later work waits for the event's (for all work
            // queued so far), as after cuStreamWaitEvent.
            stream::context_of(stream)?.runtime.order_next();
            if let Some(shared) = &ev.ipc {
                // Recorded by another process, maybe: wait as cuStreamWaitEvent does.
                shared.wait()?;
            }
            Ok(())
        }
        NodeKind::MemAlloc(a) => {
            graph_mem::run_alloc(a);
            Ok(())
        }
        NodeKind::MemFree(d) => {
            graph_mem::run_free(*d);
            Ok(())
        }
        NodeKind::Conditional(c) => c.run(stream),
    }
}

/// Runs the enabled nodes of `g` in a topological order.
fn run_graph(g: &GraphObj, stream: Handle) -> CuResult<()> {
    let order = topological(g).map_err(|_| CuError::CUDA_ERROR_INVALID_VALUE.because("the graph has a cycle"))?;
    let handles = g.data().cond_handles.clone();
    for h in handles {
        h.assign_default()?;
    }
    for n in order {
        if !n.enabled.load(Ordering::Relaxed) {
            continue;
        }
        let kind = n.kind().clone();
        run_node(&kind, stream)?;
    }
    Ok(())
}

/// `cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)`: on a
/// capturing stream the graph becomes a child graph node of the capture.
pub fn graph_launch(exec: Handle, hstream: Handle) -> CuResult<()> {
    let e = lookup_exec(exec)?;
    stream::check(hstream)?;
    let _serial = e.lock.lock().unwrap_or_else(|p| p.into_inner());
    let captured = capture::capture_node(hstream, || {
        e.graph.refuse_memory_nodes("capturing the launch of")?;
        Ok(NodeKind::Child(clone_graph(&e.graph, true, true)))
    })?;
    if captured {
        return Ok(());
    }
    graph_mem::before_launch(&e.graph.allocations(), e.flags & INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH != 0)?;
    stream::note_work(hstream, || run_graph(&e.graph, hstream))
}

/// `cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)`: nothing to
/// upload ahead; checks the handles.
pub fn graph_upload(exec: Handle, hstream: Handle) -> CuResult<()> {
    lookup_exec(exec)?;
    stream::check(hstream)
}

/// The node of `exec` instantiated from `node` (a node of the original graph).
fn exec_node(exec: &ExecObj, node: Handle, ty: c_int) -> CuResult<Arc<NodeObj>> {
    let n = lookup_node(node)?;
    if n.kind().type_code() != ty {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{node:p} is not a node of type {ty}")));
    }
    exec.graph
        .data()
        .nodes
        .iter()
        .find(|x| x.origin == node as usize)
        .cloned()
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because("the node is not part of the executable graph"))
}

/// `cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode
/// hNode, const CUDA_KERNEL_NODE_PARAMS *nodeParams)`: the function must
/// stay in the same context.
///
/// # Safety
/// `params` as [`kernel_node_set_params`].
pub unsafe fn exec_kernel_node_set_params(exec: Handle, node: Handle, params: *const KernelNodeParams) -> CuResult<()> {
    let e = lookup_exec(exec)?;
    let n = exec_node(&e, node, NODE_KERNEL)?;
    // SAFETY: forwarded caller contract.
    let p = unsafe { read_in(params) }?;
    // SAFETY: forwarded caller contract.
    let k = unsafe { KernelNode::from_params(&p) }?;
    let same_context = match &*n.kind() {
        NodeKind::Kernel(old) => Arc::ptr_eq(&old.function.context, &k.function.context),
        _ => false,
    };
    if !same_context {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("the new function is in another context"));
    }
    let _serial = e.lock.lock().unwrap_or_else(|p| p.into_inner());
    set_kind(&n, NodeKind::Kernel(k))
}

/// `cuGraphExecKernelNodeSetParams` (CUDA 10 layout).
///
/// # Safety
/// As [`exec_kernel_node_set_params`].
pub unsafe fn exec_kernel_node_set_params_v1(
    exec: Handle,
    node: Handle,
    params: *const KernelNodeParamsV1,
) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    let p: KernelNodeParams = unsafe { read_in(params) }?.into();
    // SAFETY: `p` is a local copy; its pointers as the caller's.
    unsafe { exec_kernel_node_set_params(exec, node, &p) }
}

/// `cuGraphExecMemcpyNodeSetParams(CUgraphExec, CUgraphNode, const CUDA_MEMCPY3D *, CUcontext)`.
///
/// # Safety
/// `params` is NULL or readable.
pub unsafe fn exec_memcpy_node_set_params(
    exec: Handle,
    node: Handle,
    params: *const Memcpy3D,
    ctx: Handle,
) -> CuResult<()> {
    let e = lookup_exec(exec)?;
    let n = exec_node(&e, node, NODE_MEMCPY)?;
    context::given_or_current(ctx)?;
    // SAFETY: forwarded caller contract.
    let c = unsafe { read_in(params) }?;
    mem::check_memcpy_3d(&c)?;
    let _serial = e.lock.lock().unwrap_or_else(|p| p.into_inner());
    set_kind(&n, NodeKind::Memcpy(CopyNode(c)))
}

/// `cuGraphExecMemsetNodeSetParams(CUgraphExec, CUgraphNode, const CUDA_MEMSET_NODE_PARAMS *, CUcontext)`.
///
/// # Safety
/// `params` is NULL or readable.
pub unsafe fn exec_memset_node_set_params(
    exec: Handle,
    node: Handle,
    params: *const MemsetNodeParams,
    ctx: Handle,
) -> CuResult<()> {
    let e = lookup_exec(exec)?;
    let n = exec_node(&e, node, NODE_MEMSET)?;
    context::given_or_current(ctx)?;
    // SAFETY: forwarded caller contract.
    let p = unsafe { read_in(params) }?;
    let m = MemsetNode::new(p.dst, p.pitch, p.value, p.element_size, p.width, p.height)?;
    let _serial = e.lock.lock().unwrap_or_else(|p| p.into_inner());
    set_kind(&n, NodeKind::Memset(m))
}

/// `cuGraphExecHostNodeSetParams(CUgraphExec, CUgraphNode, const CUDA_HOST_NODE_PARAMS *)`.
///
/// # Safety
/// `params` is NULL or readable.
pub unsafe fn exec_host_node_set_params(exec: Handle, node: Handle, params: *const HostNodeParams) -> CuResult<()> {
    let e = lookup_exec(exec)?;
    let n = exec_node(&e, node, NODE_HOST)?;
    // SAFETY: forwarded caller contract.
    let p = unsafe { read_in(params) }?;
    let h = HostNode::new(p.f, p.user_data)?;
    let _serial = e.lock.lock().unwrap_or_else(|p| p.into_inner());
    set_kind(&n, NodeKind::Host(h))
}

/// `cuGraphExecEventRecordNodeSetEvent(CUgraphExec, CUgraphNode, CUevent)`.
pub fn exec_event_record_node_set_event(exec: Handle, node: Handle, event: Handle) -> CuResult<()> {
    let e = lookup_exec(exec)?;
    let n = exec_node(&e, node, NODE_EVENT_RECORD)?;
    stream::lookup_event(event)?;
    let _serial = e.lock.lock().unwrap_or_else(|p| p.into_inner());
    set_kind(&n, NodeKind::EventRecord(event as usize))
}

/// `cuGraphExecEventWaitNodeSetEvent(CUgraphExec, CUgraphNode, CUevent)`.
pub fn exec_event_wait_node_set_event(exec: Handle, node: Handle, event: Handle) -> CuResult<()> {
    let e = lookup_exec(exec)?;
    let n = exec_node(&e, node, NODE_WAIT_EVENT)?;
    stream::lookup_event(event)?;
    let _serial = e.lock.lock().unwrap_or_else(|p| p.into_inner());
    set_kind(&n, NodeKind::EventWait(event as usize))
}

/// `cuGraphNodeSetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned int isEnabled)`:
/// kernel, memcpy and memset nodes only, as the driver documents.
pub fn node_set_enabled(exec: Handle, node: Handle, enabled: c_uint) -> CuResult<()> {
    let e = lookup_exec(exec)?;
    let n = lookup_node(node)?;
    let ty = n.kind().type_code();
    if ![NODE_KERNEL, NODE_MEMCPY, NODE_MEMSET].contains(&ty) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("only kernel, memcpy and memset nodes can be disabled"));
    }
    let x = exec_node(&e, node, ty)?;
    x.enabled.store(enabled != 0, Ordering::Relaxed);
    Ok(())
}

/// `cuGraphNodeGetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned int *isEnabled)`.
///
/// # Safety
/// `out` is NULL or writable.
pub unsafe fn node_get_enabled(exec: Handle, node: Handle, out: *mut c_uint) -> CuResult<()> {
    let e = lookup_exec(exec)?;
    let n = lookup_node(node)?;
    let ty = n.kind().type_code();
    let x = exec_node(&e, node, ty)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(out, c_uint::from(x.enabled.load(Ordering::Relaxed))) }
}

/// `CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED`.
const UPDATE_TOPOLOGY_CHANGED: c_int = 2;
/// `CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED`.
const UPDATE_NODE_TYPE_CHANGED: c_int = 3;
/// `CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED`.
const UPDATE_NOT_SUPPORTED: c_int = 6;
/// `CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE`.
const UPDATE_UNSUPPORTED_FUNCTION_CHANGE: c_int = 7;

/// Takes the parameters of `graph` into `exec` when both have the same
/// topology (nodes paired in creation order, the same types and edges);
/// the `CUgraphExecUpdateResult` and the node at fault otherwise.
fn update(exec: Handle, graph: Handle) -> Result<(), (CuError, c_int, usize)> {
    let e = lookup_exec(exec).map_err(|e| (e, 1, 0))?;
    let g = lookup_graph(graph).map_err(|e| (e, 1, 0))?;
    let _serial = e.lock.lock().unwrap_or_else(|p| p.into_inner());
    let mut plan = Vec::new();
    plan_update(&e.graph, &g, &mut plan).map_err(|(code, node)| {
        let err = CuError::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE.because("the graph cannot update the executable graph");
        (err, code, node)
    })?;
    apply_update(plan);
    Ok(())
}

/// New parameters for nodes of an executable graph: the node, its new kind and attributes.
type UpdatePlan = Vec<(Arc<NodeObj>, NodeKind, std::collections::BTreeMap<c_int, [u64; 8]>)>;

/// Pairs the nodes of `old` (part of an executable graph) with those of
/// `new` in creation order and checks that the topology, node types and
/// kernel contexts agree (child graphs recursively); the
/// `CUgraphExecUpdateResult` and the node of `new` at fault otherwise.
fn plan_update(old: &GraphObj, new: &GraphObj, plan: &mut UpdatePlan) -> Result<(), (c_int, usize)> {
    let (new_nodes, new_edges) = {
        let d = new.data();
        (d.nodes.clone(), d.edges.clone())
    };
    let (old_nodes, old_edges) = {
        let d = old.data();
        (d.nodes.clone(), d.edges.clone())
    };
    if new_nodes.len() != old_nodes.len() {
        return Err((UPDATE_TOPOLOGY_CHANGED, 0));
    }
    let index = |nodes: &[Arc<NodeObj>], h: usize| nodes.iter().position(|n| handle_of(n) as usize == h);
    let mut a: Vec<(Option<usize>, Option<usize>)> =
        old_edges.iter().map(|e| (index(&old_nodes, e.0), index(&old_nodes, e.1))).collect();
    let mut b: Vec<(Option<usize>, Option<usize>)> =
        new_edges.iter().map(|e| (index(&new_nodes, e.0), index(&new_nodes, e.1))).collect();
    a.sort();
    b.sort();
    if a != b {
        return Err((UPDATE_TOPOLOGY_CHANGED, 0));
    }
    for (o, n) in old_nodes.iter().zip(&new_nodes) {
        let (ok, nk) = (o.kind().clone(), n.kind().clone());
        let at = handle_of(n) as usize;
        if ok.type_code() != nk.type_code() {
            return Err((UPDATE_NODE_TYPE_CHANGED, at));
        }
        match (&ok, &nk) {
            (NodeKind::Kernel(x), NodeKind::Kernel(y)) if !Arc::ptr_eq(&x.function.context, &y.function.context) => {
                return Err((UPDATE_UNSUPPORTED_FUNCTION_CHANGE, at));
            }
            (NodeKind::Child(x), NodeKind::Child(y)) => plan_update(x, y, plan)?,
            // The bodies update in place; the handle, type and count stay.
            (NodeKind::Conditional(x), NodeKind::Conditional(y)) => {
                if !Arc::ptr_eq(&x.handle, &y.handle) || x.ty != y.ty || x.bodies.len() != y.bodies.len() {
                    return Err((UPDATE_NOT_SUPPORTED, at));
                }
                for (xb, yb) in x.bodies.iter().zip(&y.bodies) {
                    plan_update(xb, yb, plan)?;
                }
            }
            // Memory nodes keep their allocation: updating cannot change them.
            (NodeKind::MemAlloc(x), NodeKind::MemAlloc(y)) if !Arc::ptr_eq(x, y) => {
                return Err((UPDATE_NOT_SUPPORTED, at));
            }
            (NodeKind::MemFree(x), NodeKind::MemFree(y)) if x != y => return Err((UPDATE_NOT_SUPPORTED, at)),
            _ => plan.push((o.clone(), nk, n.attrs().clone())),
        }
    }
    Ok(())
}

fn apply_update(plan: UpdatePlan) {
    for (node, kind, attrs) in plan {
        *node.kind() = kind;
        *node.attrs() = attrs;
    }
}

/// `cuGraphExecChildGraphNodeSetParams(CUgraphExec hGraphExec, CUgraphNode
/// hNode, CUgraph childGraph)`: the executable child graph takes the
/// parameters of `childGraph`, whose topology and node order must match
/// ("CUDA_ERROR_INVALID_VALUE" otherwise).
pub fn exec_child_graph_node_set_params(exec: Handle, node: Handle, child: Handle) -> CuResult<()> {
    let e = lookup_exec(exec)?;
    let x = exec_node(&e, node, NODE_GRAPH)?;
    let new = lookup_graph(child)?;
    let old = match &*x.kind() {
        NodeKind::Child(c) => c.clone(),
        _ => return Err(CuError::CUDA_ERROR_INVALID_VALUE),
    };
    let _serial = e.lock.lock().unwrap_or_else(|p| p.into_inner());
    let mut plan = Vec::new();
    plan_update(&old, &new, &mut plan)
        .map_err(|_| CuError::CUDA_ERROR_INVALID_VALUE.because("the child graph's topology differs"))?;
    apply_update(plan);
    Ok(())
}

/// `cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
/// CUgraphExecUpdateResultInfo *resultInfo)`.
///
/// # Safety
/// `info` is NULL or writable.
pub unsafe fn exec_update(exec: Handle, graph: Handle, info: *mut UpdateResultInfo) -> CuResult<()> {
    if info.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("resultInfo is NULL"));
    }
    let (r, code, node) = match update(exec, graph) {
        Ok(()) => (Ok(()), 0, 0),
        Err((e, code, node)) => (Err(e), code, node),
    };
    let out = UpdateResultInfo { result: code, error_node: node as Handle, error_from_node: std::ptr::null_mut() };
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(info, out) }?;
    r
}

/// `cuGraphExecUpdate` (CUDA 10.2: `CUgraphNode *hErrorNode_out,
/// CUgraphExecUpdateResult *updateResult_out`).
///
/// # Safety
/// Both outputs are NULL or writable.
pub unsafe fn exec_update_v1(exec: Handle, graph: Handle, err_node: *mut Handle, result: *mut c_int) -> CuResult<()> {
    if err_node.is_null() || result.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("hErrorNode_out or updateResult_out is NULL"));
    }
    let (r, code, node) = match update(exec, graph) {
        Ok(()) => (Ok(()), 0, 0),
        Err((e, code, node)) => (Err(e), code, node),
    };
    // SAFETY: both checked non-null; writable per the caller.
    unsafe {
        write_out(err_node, node as Handle)?;
        write_out(result, code)?;
    }
    r
}

/// `cuGraphGetId(CUgraph hGraph, unsigned int *graphId)`.
///
/// # Safety
/// `id` is NULL or writable.
pub unsafe fn graph_get_id(graph: Handle, id: *mut c_uint) -> CuResult<()> {
    let g = lookup_graph(graph)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(id, g.id) }
}

/// A `CUuserObject`: a reference-counted destructor callback.
pub struct UserObj {
    ptr: usize,
    destroy: unsafe extern "C" fn(*mut c_void),
    refs: Mutex<u64>,
}

impl UserObj {
    fn refs(&self) -> MutexGuard<'_, u64> {
        self.refs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Live user objects.
pub static USER_OBJECTS: Registry<UserObj> = Registry::new();

/// `CU_USER_OBJECT_NO_DESTRUCTOR_SYNC`.
const USER_OBJECT_NO_DESTRUCTOR_SYNC: c_uint = 1;
/// `CU_GRAPH_USER_OBJECT_MOVE`.
const GRAPH_USER_OBJECT_MOVE: c_uint = 1;

fn lookup_user_object(h: Handle) -> CuResult<Arc<UserObj>> {
    driver::driver()?;
    USER_OBJECTS
        .get(h)
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{h:p} is not a live user object")))
}

/// `cuUserObjectCreate(CUuserObject *object_out, void *ptr, CUhostFn
/// destroy, unsigned int initialRefcount, unsigned int flags)`: flags must
/// be `CU_USER_OBJECT_NO_DESTRUCTOR_SYNC`; the destructor runs on a thread
/// of its own when the last reference goes.
///
/// # Safety
/// `out` is NULL or writable; `destroy` may be called with `ptr` from another thread.
pub unsafe fn user_object_create(
    out: *mut Handle,
    ptr: *mut c_void,
    destroy: HostFn,
    initial: c_uint,
    flags: c_uint,
) -> CuResult<()> {
    driver::driver()?;
    let destroy = destroy.ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because("destroy is NULL"))?;
    if out.is_null() || initial == 0 || flags != USER_OBJECT_NO_DESTRUCTOR_SYNC {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE
            .because("object_out is NULL, initialRefcount is 0 or flags are not CU_USER_OBJECT_NO_DESTRUCTOR_SYNC"));
    }
    let obj = Arc::new(UserObj { ptr: ptr as usize, destroy, refs: Mutex::new(u64::from(initial)) });
    let h = USER_OBJECTS.insert(obj);
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(out, h) }
}

/// `cuUserObjectRetain(CUuserObject object, unsigned int count)`.
pub fn user_object_retain(obj: Handle, count: c_uint) -> CuResult<()> {
    let u = lookup_user_object(obj)?;
    if count == 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("count is 0"));
    }
    *u.refs() += u64::from(count);
    Ok(())
}

/// `cuUserObjectRelease(CUuserObject object, unsigned int count)`: the
/// destructor runs (on another thread) when no reference is left.
pub fn user_object_release(obj: Handle, count: c_uint) -> CuResult<()> {
    let u = lookup_user_object(obj)?;
    if count == 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("count is 0"));
    }
    let last = {
        let mut r = u.refs();
        *r = r.saturating_sub(u64::from(count));
        *r == 0
    };
    if last && USER_OBJECTS.remove(obj).is_some() {
        let (f, ptr) = (u.destroy, u.ptr);
        // The driver runs destructors on an internal thread; they must not
        // call the API, and the caller may hold locks the destructor needs.
        std::thread::spawn(move || {
            // SAFETY: the caller's destructor, called once with its pointer
            // as cuUserObjectCreate documents.
            unsafe { f(ptr as *mut c_void) }
        });
    }
    Ok(())
}

/// `cuGraphRetainUserObject(CUgraph graph, CUuserObject object, unsigned
/// int count, unsigned int flags)`: with `CU_GRAPH_USER_OBJECT_MOVE` the
/// caller's references move to the graph.
pub fn graph_retain_user_object(graph: Handle, obj: Handle, count: c_uint, flags: c_uint) -> CuResult<()> {
    let g = lookup_graph(graph)?;
    let u = lookup_user_object(obj)?;
    if count == 0 || flags & !GRAPH_USER_OBJECT_MOVE != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("count is 0 or unknown flags"));
    }
    if flags & GRAPH_USER_OBJECT_MOVE == 0 {
        *u.refs() += u64::from(count);
    }
    *g.data().user_refs.entry(obj as usize).or_insert(0) += count;
    Ok(())
}

/// `cuGraphReleaseUserObject(CUgraph graph, CUuserObject object, unsigned
/// int count)`: "CUDA_ERROR_INVALID_VALUE" for more references than the graph holds.
pub fn graph_release_user_object(graph: Handle, obj: Handle, count: c_uint) -> CuResult<()> {
    let g = lookup_graph(graph)?;
    lookup_user_object(obj)?;
    {
        let mut d = g.data();
        let held = d.user_refs.get(&(obj as usize)).copied().unwrap_or(0);
        if count == 0 || count > held {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("the graph does not hold that many references"));
        }
        if held == count {
            d.user_refs.remove(&(obj as usize));
        } else {
            d.user_refs.insert(obj as usize, held - count);
        }
    }
    user_object_release(obj, count)
}

/// `cuGraphDebugDotPrint(CUgraph hGraph, const char *path, unsigned int
/// flags)`: writes the graph in Graphviz DOT (node types, kernel names and
/// launch shapes, edges; child graphs as clusters); the flags' extra
/// details are not written. "CUDA_ERROR_OPERATING_SYSTEM" if the file
/// cannot be written.
///
/// # Safety
/// `path` is NULL or NUL-terminated.
pub unsafe fn debug_dot_print(graph: Handle, path: *const c_char, _flags: c_uint) -> CuResult<()> {
    let g = lookup_graph(graph)?;
    // SAFETY: forwarded caller contract.
    let path = unsafe { crate::ffi::c_str(path) }?;
    let mut out = format!("digraph ptxvk_graph_{} {{\n", g.id);
    dot_body(&g, &mut out, "  ");
    out.push_str("}\n");
    std::fs::write(path, out)
        .map_err(|e| CuError::CUDA_ERROR_OPERATING_SYSTEM.because(format!("cannot write {path}: {e}")))
}

fn dot_body(g: &GraphObj, out: &mut String, indent: &str) {
    use std::fmt::Write as _;
    let (nodes, edges) = {
        let d = g.data();
        (d.nodes.clone(), d.edges.clone())
    };
    for n in &nodes {
        let h = handle_of(n) as usize;
        let kind = n.kind().clone();
        let label = match &kind {
            NodeKind::Kernel(k) => {
                format!("KERNEL\\n{}\\ngrid {:?} block {:?}", k.function.name.to_string_lossy(), k.grid, k.block)
            }
            NodeKind::Memcpy(_) => "MEMCPY".to_string(),
            NodeKind::Memset(m) => format!("MEMSET\\n{} x {} x {} bytes", m.0.height, m.0.width, m.0.element_size),
            NodeKind::Host(_) => "HOST".to_string(),
            NodeKind::Child(_) => "GRAPH".to_string(),
            NodeKind::Empty => "EMPTY".to_string(),
            NodeKind::EventRecord(e) => format!("EVENT_RECORD\\n{e:#x}"),
            NodeKind::EventWait(e) => format!("WAIT_EVENT\\n{e:#x}"),
            NodeKind::MemAlloc(a) => format!("MEM_ALLOC\\n{} bytes at {:#x}", a.bytesize, a.dptr),
            NodeKind::MemFree(d) => format!("MEM_FREE\\n{d:#x}"),
            NodeKind::Conditional(c) => {
                let ty = ["IF", "WHILE", "SWITCH"].get(c.ty as usize).copied().unwrap_or("?");
                format!("CONDITIONAL {ty}\\nhandle {:#x}", c.handle.addr)
            }
        };
        let _ = writeln!(out, "{indent}n{h:x} [shape=box label=\"{label}\"];");
        for (i, c) in kind.embedded().iter().enumerate() {
            let _ = writeln!(out, "{indent}subgraph cluster_{h:x}_{i} {{");
            dot_body(c, out, &format!("{indent}  "));
            let _ = writeln!(out, "{indent}}}");
        }
    }
    for (a, b) in edges {
        let _ = writeln!(out, "{indent}n{a:x} -> n{b:x};");
    }
}

/// `CUgraphNodeParams`: the node type, then a 232-byte union of the
/// per-type parameters.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct GraphNodeParams {
    ty: c_int,
    reserved0: [c_int; 3],
    body: [u64; 29],
    reserved2: i64,
}

/// `CUDA_MEMCPY_NODE_PARAMS`.
#[repr(C)]
#[derive(Clone, Copy)]
struct MemcpyNodeParamsV2 {
    flags: c_int,
    reserved: c_int,
    ctx: Handle,
    copy: Memcpy3D,
}

/// `CUDA_MEMSET_NODE_PARAMS_v2`.
#[repr(C)]
#[derive(Clone, Copy)]
struct MemsetNodeParamsV2 {
    p: MemsetNodeParams,
    ctx: Handle,
}

/// `CUDA_HOST_NODE_PARAMS_v2`.
#[repr(C)]
#[derive(Clone, Copy)]
struct HostNodeParamsV2 {
    f: HostFn,
    user_data: *mut c_void,
    sync_mode: c_uint,
    ctx: Handle,
}

/// `CUDA_CHILD_GRAPH_NODE_PARAMS`.
#[repr(C)]
#[derive(Clone, Copy)]
struct ChildGraphNodeParams {
    graph: Handle,
    ownership: c_int,
}

/// `CUDA_EVENT_WAIT_NODE_PARAMS` / `CUDA_EVENT_RECORD_NODE_PARAMS`.
#[repr(C)]
#[derive(Clone, Copy)]
struct EventNodeParams {
    event: Handle,
    ctx: Handle,
}

/// `CU_GRAPH_CHILD_GRAPH_OWNERSHIP_INVALID`: what a query reports.
const CHILD_OWNERSHIP_INVALID: c_int = -1;

impl GraphNodeParams {
    /// The union read as `T`.
    ///
    /// # Safety
    /// `T` is one of the `#[repr(C)]` parameter structs above (at most 232
    /// bytes, every field a C scalar or pointer).
    unsafe fn get<T: Copy>(&self) -> T {
        const { assert!(std::mem::size_of::<T>() <= 232) };
        // SAFETY: the union has 232 readable bytes; `T` fits and has no
        // invalid bit patterns (see the function's contract).
        unsafe { self.body.as_ptr().cast::<T>().read_unaligned() }
    }

    /// A description of `ty` with `v` in the union, the rest zero.
    fn with<T: Copy>(ty: c_int, v: T) -> GraphNodeParams {
        const { assert!(std::mem::size_of::<T>() <= 232) };
        let mut p = GraphNodeParams { ty, reserved0: [0; 3], body: [0; 29], reserved2: 0 };
        // SAFETY: `T` fits in the 232 bytes of the union.
        unsafe { p.body.as_mut_ptr().cast::<T>().write_unaligned(v) };
        p
    }
}

/// The node a `CUgraphNodeParams` describes. "CUDA_ERROR_NOT_SUPPORTED" for
/// the node types this library has no nodes for.
///
/// # Safety
/// The pointers in `p` as the per-type `cuGraphAdd*Node` calls document them.
unsafe fn kind_from_params(p: &GraphNodeParams) -> CuResult<NodeKind> {
    if p.reserved0 != [0; 3] || p.reserved2 != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("reserved fields of CUgraphNodeParams must be zero"));
    }
    Ok(match p.ty {
        NODE_KERNEL => {
            // SAFETY: the type field says the union holds this struct.
            let k: KernelNodeParams = unsafe { p.get() };
            // SAFETY: forwarded caller contract.
            let node = unsafe { KernelNode::from_params(&k) }?;
            if !k.ctx.is_null() && !k.func.is_null() && !Arc::ptr_eq(&context::lookup(k.ctx)?, &node.function.context) {
                return Err(CuError::CUDA_ERROR_INVALID_CONTEXT.because("ctx is not the function's context"));
            }
            NodeKind::Kernel(node)
        }
        NODE_MEMCPY => {
            // SAFETY: the type field says the union holds this struct.
            let m: MemcpyNodeParamsV2 = unsafe { p.get() };
            if m.flags != 0 || m.reserved != 0 {
                return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("memcpy flags and reserved must be zero"));
            }
            context::given_or_current(m.ctx)?;
            mem::check_memcpy_3d(&m.copy)?;
            NodeKind::Memcpy(CopyNode(m.copy))
        }
        NODE_MEMSET => {
            // SAFETY: the type field says the union holds this struct.
            let m: MemsetNodeParamsV2 = unsafe { p.get() };
            context::given_or_current(m.ctx)?;
            let q = m.p;
            NodeKind::Memset(MemsetNode::new(q.dst, q.pitch, q.value, q.element_size, q.width, q.height)?)
        }
        NODE_HOST => {
            // SAFETY: the type field says the union holds this struct.
            let h: HostNodeParamsV2 = unsafe { p.get() };
            NodeKind::Host(HostNode::new(h.f, h.user_data)?)
        }
        NODE_GRAPH => {
            // SAFETY: the type field says the union holds this struct.
            let c: ChildGraphNodeParams = unsafe { p.get() };
            if c.ownership != 0 {
                return Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because("only cloned child graphs are supported"));
            }
            let g = lookup_graph(c.graph)?;
            NodeKind::Child(clone_graph(&g, true, true))
        }
        NODE_EMPTY => NodeKind::Empty,
        NODE_WAIT_EVENT | NODE_EVENT_RECORD => {
            // SAFETY: the type field says the union holds this struct.
            let e: EventNodeParams = unsafe { p.get() };
            stream::lookup_event(e.event)?;
            if p.ty == NODE_WAIT_EVENT {
                NodeKind::EventWait(e.event as usize)
            } else {
                NodeKind::EventRecord(e.event as usize)
            }
        }
        NODE_MEM_ALLOC | NODE_MEM_FREE => {
            return Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because("a memory node's parameters cannot be changed"))
        }
        NODE_CONDITIONAL => {
            return Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because("a conditional node's parameters cannot be changed"))
        }
        other => {
            return Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because(format!("graph node type {other} is not supported")))
        }
    })
}

/// Drops what a node kind built for a failed call registered (an embedded graph).
fn discard(kind: &NodeKind) {
    for c in kind.embedded() {
        GRAPHS.remove(handle_of(&c));
        forget_graph(&c);
    }
}

/// `cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const
/// CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData, size_t
/// numDependencies, CUgraphNodeParams *nodeParams)` (and `_v3`).
///
/// # Safety
/// Pointers as the driver API documents them.
pub unsafe fn add_node_params(
    ph: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    edge_data: *const EdgeData,
    n: usize,
    params: *mut GraphNodeParams,
) -> CuResult<()> {
    lookup_graph(graph)?;
    // SAFETY: forwarded caller contract.
    unsafe { check_edge_data(edge_data, n) }?;
    // SAFETY: forwarded caller contract.
    let mut p = unsafe { read_in(params) }?;
    if p.ty == NODE_GRAPH {
        // SAFETY: the type says the union holds child graph parameters.
        let c: ChildGraphNodeParams = unsafe { p.get() };
        if c.graph == graph {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("a graph cannot contain itself"));
        }
        lookup_graph(c.graph)?.refuse_memory_nodes("embedding")?;
    }
    if p.ty == NODE_MEM_ALLOC || p.ty == NODE_MEM_FREE {
        if p.reserved0 != [0; 3] || p.reserved2 != 0 {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("reserved fields of CUgraphNodeParams must be zero"));
        }
        if p.ty == NODE_MEM_FREE {
            // SAFETY: the type says the union holds the address.
            let d: CUdeviceptr = unsafe { p.get() };
            // SAFETY: forwarded caller contract.
            return unsafe { add_mem_free_node(ph, graph, deps, n, d) };
        }
        // SAFETY: the type says the union holds allocation parameters.
        let mut a: graph_mem::MemAllocNodeParams = unsafe { p.get() };
        // SAFETY: forwarded caller contract.
        unsafe { add_mem_alloc_node(ph, graph, deps, n, &mut a) }?;
        p = GraphNodeParams::with(NODE_MEM_ALLOC, a);
        // SAFETY: readable above; writable per the caller (dptr is an output).
        unsafe { params.write_unaligned(p) };
        return Ok(());
    }
    if p.ty == NODE_CONDITIONAL {
        if p.reserved0 != [0; 3] || p.reserved2 != 0 {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("reserved fields of CUgraphNodeParams must be zero"));
        }
        // SAFETY: the type says the union holds conditional parameters.
        let c: ConditionalNodeParams = unsafe { p.get() };
        let handle = cond::check(&c)?;
        let node = ConditionalNode::new(handle, c.ty, c.size);
        let out = node.params();
        let kind = NodeKind::Conditional(node);
        let keep = kind.clone();
        // SAFETY: forwarded caller contract.
        if let Err(e) = unsafe { add(ph, graph, deps, n, kind) } {
            discard(&keep);
            return Err(e);
        }
        // The body graphs go back in `phGraph_out` (the rest as given).
        let c = ConditionalNodeParams { ph_graph_out: out.ph_graph_out, ..c };
        // SAFETY: readable above; writable per the caller (phGraph_out is an output).
        unsafe { params.write_unaligned(GraphNodeParams::with(NODE_CONDITIONAL, c)) };
        return Ok(());
    }
    // SAFETY: forwarded caller contract.
    let kind = unsafe { kind_from_params(&p) }?;
    let keep = kind.clone();
    // SAFETY: forwarded caller contract.
    let r = unsafe { add(ph, graph, deps, n, kind) };
    if r.is_err() {
        discard(&keep);
    }
    r
}

/// Keeps conditional handle `h` alive with graph `g` (and its clones and
/// instantiations), which assign its default value when they start.
pub fn own_cond_handle(g: &GraphObj, h: Arc<CondHandle>) {
    g.data().cond_handles.push(h);
}

/// `cuGraphAddNode` (CUDA 12.2, no edge data).
///
/// # Safety
/// As [`add_node_params`].
pub unsafe fn add_node_params_v1(
    ph: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    n: usize,
    params: *mut GraphNodeParams,
) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe { add_node_params(ph, graph, deps, std::ptr::null(), n, params) }
}

/// `cuGraphNodeSetParams(CUgraphNode hNode, CUgraphNodeParams *nodeParams)`
/// (and `_v2`): the type must be the node's; child graphs cannot be replaced.
///
/// # Safety
/// `params` is NULL or readable, its pointers as for [`add_node_params`].
pub unsafe fn node_set_params(node: Handle, params: *mut GraphNodeParams) -> CuResult<()> {
    let n = lookup_node(node)?;
    // SAFETY: forwarded caller contract.
    let p = unsafe { read_in(params) }?;
    if p.ty != n.kind().type_code() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("the parameters are of another node type"));
    }
    if p.ty == NODE_GRAPH {
        return Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because("a child graph node's graph cannot be replaced"));
    }
    // SAFETY: forwarded caller contract.
    let kind = unsafe { kind_from_params(&p) }?;
    set_kind(&n, kind)
}

/// `cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
/// CUgraphNodeParams *nodeParams)`: kernels must stay in their context.
///
/// # Safety
/// As [`node_set_params`].
pub unsafe fn exec_node_set_params(exec: Handle, node: Handle, params: *mut GraphNodeParams) -> CuResult<()> {
    let e = lookup_exec(exec)?;
    // SAFETY: forwarded caller contract.
    let p = unsafe { read_in(params) }?;
    let x = exec_node(&e, node, p.ty)?;
    if p.ty == NODE_GRAPH {
        return Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because("a child graph node's graph cannot be replaced"));
    }
    // SAFETY: forwarded caller contract.
    let kind = unsafe { kind_from_params(&p) }?;
    if let (NodeKind::Kernel(old), NodeKind::Kernel(new)) = (&*x.kind(), &kind) {
        if !Arc::ptr_eq(&old.function.context, &new.function.context) {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("the new function is in another context"));
        }
    }
    let _serial = e.lock.lock().unwrap_or_else(|p| p.into_inner());
    set_kind(&x, kind)
}

/// `cuGraphNodeGetParams(CUgraphNode hNode, CUgraphNodeParams *nodeParams)`:
/// pointers in the answer (kernel parameters, the child graph) belong to the node.
///
/// # Safety
/// `params` is NULL or writable.
pub unsafe fn node_get_params(node: Handle, params: *mut GraphNodeParams) -> CuResult<()> {
    let n = lookup_node(node)?;
    let ctx = context::current().map_or(std::ptr::null_mut(), |c| handle_of(&c));
    let p = match &*n.kind() {
        NodeKind::Kernel(k) => GraphNodeParams::with(NODE_KERNEL, k.params()),
        NodeKind::Memcpy(c) => {
            GraphNodeParams::with(NODE_MEMCPY, MemcpyNodeParamsV2 { flags: 0, reserved: 0, ctx, copy: c.0 })
        }
        NodeKind::Memset(m) => GraphNodeParams::with(NODE_MEMSET, MemsetNodeParamsV2 { p: m.0, ctx }),
        NodeKind::Host(h) => GraphNodeParams::with(
            NODE_HOST,
            HostNodeParamsV2 { f: Some(h.f), user_data: h.user_data as *mut c_void, sync_mode: 0, ctx },
        ),
        NodeKind::Child(c) => GraphNodeParams::with(
            NODE_GRAPH,
            ChildGraphNodeParams { graph: handle_of(c), ownership: CHILD_OWNERSHIP_INVALID },
        ),
        NodeKind::Empty => GraphNodeParams::with(NODE_EMPTY, 0u64),
        NodeKind::EventWait(e) => {
            GraphNodeParams::with(NODE_WAIT_EVENT, EventNodeParams { event: *e as Handle, ctx: std::ptr::null_mut() })
        }
        NodeKind::EventRecord(e) => {
            GraphNodeParams::with(NODE_EVENT_RECORD, EventNodeParams { event: *e as Handle, ctx })
        }
        NodeKind::MemAlloc(a) => GraphNodeParams::with(NODE_MEM_ALLOC, graph_mem::params_of(a)),
        NodeKind::MemFree(d) => GraphNodeParams::with(NODE_MEM_FREE, *d),
        NodeKind::Conditional(c) => GraphNodeParams::with(NODE_CONDITIONAL, c.params()),
    };
    // SAFETY: forwarded caller contract.
    unsafe { write_out(params, p) }
}

/// `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`.
const ATTRIBUTE_CLUSTER_DIMENSION: c_int = 4;
/// Largest `CUlaunchAttributeID` of CUDA 13.
const LAST_ATTRIBUTE: c_int = 32;

/// `cuGraphKernelNodeSetAttribute(CUgraphNode hNode, CUkernelNodeAttrID
/// attr, const CUkernelNodeAttrValue *value)`: recorded and reported back
/// (launches here need none of them); a cluster of more than one block is
/// `CUDA_ERROR_NOT_SUPPORTED`, as for `cuLaunchKernelEx`.
///
/// # Safety
/// `value` is NULL or readable for 64 bytes.
pub unsafe fn kernel_node_set_attribute(node: Handle, attr: c_int, value: *const [u64; 8]) -> CuResult<()> {
    let n = node_of_type(node, NODE_KERNEL)?;
    if !(1..=LAST_ATTRIBUTE).contains(&attr) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown kernel node attribute {attr}")));
    }
    // SAFETY: forwarded caller contract.
    let v = unsafe { read_in(value) }?;
    if attr == ATTRIBUTE_CLUSTER_DIMENSION {
        let dims = [v[0] as u32, (v[0] >> 32) as u32, v[1] as u32];
        if dims.iter().any(|&d| d > 1) {
            return Err(CuError::CUDA_ERROR_NOT_SUPPORTED
                .because(format!("thread block clusters ({dims:?}) are not supported")));
        }
    }
    n.attrs().insert(attr, v);
    Ok(())
}

/// `cuGraphKernelNodeGetAttribute(CUgraphNode hNode, CUkernelNodeAttrID
/// attr, CUkernelNodeAttrValue *value_out)`: what was set, zero otherwise.
///
/// # Safety
/// `value` is NULL or writable for 64 bytes.
pub unsafe fn kernel_node_get_attribute(node: Handle, attr: c_int, value: *mut [u64; 8]) -> CuResult<()> {
    let n = node_of_type(node, NODE_KERNEL)?;
    if !(1..=LAST_ATTRIBUTE).contains(&attr) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown kernel node attribute {attr}")));
    }
    let v = n.attrs().get(&attr).copied().unwrap_or([0; 8]);
    // SAFETY: forwarded caller contract.
    unsafe { write_out(value, v) }
}

/// `cuGraphKernelNodeCopyAttributes(CUgraphNode dst, CUgraphNode src)`.
pub fn kernel_node_copy_attributes(dst: Handle, src: Handle) -> CuResult<()> {
    let d = node_of_type(dst, NODE_KERNEL)?;
    let s = node_of_type(src, NODE_KERNEL)?;
    let attrs = s.attrs().clone();
    *d.attrs() = attrs;
    Ok(())
}
