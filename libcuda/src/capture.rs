//! Stream capture: `cuStreamBeginCapture` .. `cuStreamEndCapture`.
//!
//! While a stream captures, the work queued on it (launches, async copies
//! and memsets, host functions, graph launches) becomes nodes of the
//! capture's graph instead of running, each depending on the stream's
//! current dependency set (the last node, or the nodes joined by an event
//! wait). Other streams join a capture by waiting on an event recorded in a
//! capturing stream (fork) and must be joined back into the origin stream
//! before `cuStreamEndCapture` (`CUDA_ERROR_STREAM_CAPTURE_UNJOINED`).
//!
//! Calls that cannot be captured fail with the documented errors and
//! invalidate the capture: synchronising or querying a capturing stream,
//! "potentially unsafe" calls (synchronous copies and memsets, allocation,
//! context synchronisation) under the capture modes of
//! `cuThreadExchangeStreamCaptureMode`, and work on the legacy stream while
//! a blocking stream of its context captures
//! (`CUDA_ERROR_STREAM_CAPTURE_IMPLICIT`). `CU_STREAM_PER_THREAD` names
//! each thread's own stream; the `_ptsz` entry points take a NULL stream as
//! the legacy stream here (they share the default-stream implementations).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::ffi::{c_int, c_uint};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::ThreadId;

use crate::context;
use crate::driver;
use crate::ffi::{read_in, write_opt, write_out, Handle};
use crate::graph::{self, EdgeData, GraphObj, NodeKind};
use crate::handles::handle_of;
use crate::result::{CuError, CuResult};
use crate::stream::{self, CU_STREAM_LEGACY, CU_STREAM_NON_BLOCKING, CU_STREAM_PER_THREAD};

/// `CU_STREAM_CAPTURE_MODE_GLOBAL`.
pub const MODE_GLOBAL: c_int = 0;
/// `CU_STREAM_CAPTURE_MODE_THREAD_LOCAL`.
pub const MODE_THREAD_LOCAL: c_int = 1;
/// `CU_STREAM_CAPTURE_MODE_RELAXED`.
pub const MODE_RELAXED: c_int = 2;

/// `CU_STREAM_CAPTURE_STATUS_NONE`.
const STATUS_NONE: c_int = 0;
/// `CU_STREAM_CAPTURE_STATUS_ACTIVE`.
const STATUS_ACTIVE: c_int = 1;
/// `CU_STREAM_CAPTURE_STATUS_INVALIDATED`.
const STATUS_INVALIDATED: c_int = 2;

/// `CU_EVENT_RECORD_EXTERNAL` / `CU_EVENT_WAIT_EXTERNAL`.
pub const EVENT_EXTERNAL: c_uint = 1;

/// One capture sequence.
struct Seq {
    graph: Arc<GraphObj>,
    graph_handle: usize,
    mode: c_int,
    thread: ThreadId,
    /// The stream it began on (where it must end).
    origin: usize,
    invalidated: bool,
    /// Whether the graph was created by the capture (not `cuStreamBeginCaptureToGraph`).
    owns_graph: bool,
    /// Dependency sets of joined streams destroyed during the capture: they
    /// must still be joined into the origin stream by the end.
    left: Vec<Vec<usize>>,
}

/// A stream taking part in a capture.
struct StreamCapture {
    seq: u64,
    /// The nodes the next captured node depends on.
    deps: Vec<usize>,
    /// Default edge data parallel to `deps` (for `cuStreamGetCaptureInfo_v3`).
    edges: Vec<EdgeData>,
    /// Whether the stream is a blocking one (not `CU_STREAM_NON_BLOCKING`).
    blocking: bool,
    context: usize,
}

impl StreamCapture {
    fn set_deps(&mut self, deps: Vec<usize>) {
        self.edges = vec![EdgeData::default(); deps.len()];
        self.deps = deps;
    }
}

struct Table {
    seqs: BTreeMap<u64, Seq>,
    streams: BTreeMap<usize, StreamCapture>,
    /// Events last recorded in a capturing stream: their sequence and dependency set.
    events: BTreeMap<usize, (u64, Vec<usize>)>,
}

static TABLE: Mutex<Table> =
    Mutex::new(Table { seqs: BTreeMap::new(), streams: BTreeMap::new(), events: BTreeMap::new() });
/// Live capture sequences (a fast path for the common case of none).
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// Capture sequence ids, unique over the process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's `CUstreamCaptureMode` (`cuThreadExchangeStreamCaptureMode`).
    static THREAD_MODE: Cell<c_int> = const { Cell::new(MODE_GLOBAL) };
}

fn table() -> MutexGuard<'static, Table> {
    TABLE.lock().unwrap_or_else(|p| p.into_inner())
}

thread_local! {
    /// This thread's per-thread default stream, as a capture table key.
    static PER_THREAD_KEY: usize = {
        static NEXT: AtomicUsize = AtomicUsize::new(1);
        (1 << 63) | NEXT.fetch_add(1, Ordering::Relaxed)
    };
}

/// The capture table key of `stream`: its handle, or for
/// `CU_STREAM_PER_THREAD` a key of the calling thread's own stream.
fn key(stream: Handle) -> usize {
    if stream as usize == CU_STREAM_PER_THREAD {
        PER_THREAD_KEY.with(|k| *k)
    } else {
        stream as usize
    }
}

fn is_legacy(stream: Handle) -> bool {
    matches!(stream as usize, 0 | CU_STREAM_LEGACY)
}

/// Invalidates sequence `id`.
fn invalidate(t: &mut Table, id: u64) {
    if let Some(s) = t.seqs.get_mut(&id) {
        s.invalidated = true;
    }
}

/// Work on the legacy stream: "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT" while a
/// blocking stream of the current context captures (that capture is
/// invalidated: the legacy stream would have to wait for it).
fn check_legacy(t: &mut Table) -> CuResult<()> {
    let Ok(ctx) = context::current() else { return Ok(()) };
    let ctx = handle_of(&ctx) as usize;
    let seqs: Vec<u64> = t.streams.values().filter(|s| s.blocking && s.context == ctx).map(|s| s.seq).collect();
    if seqs.is_empty() {
        return Ok(());
    }
    for id in seqs {
        invalidate(t, id);
    }
    Err(CuError::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
        .because("the legacy stream cannot be used while a blocking stream of its context is capturing"))
}

/// Queues work on `stream`: when it captures, adds the node `make` builds
/// (depending on the stream's dependency set, which becomes that node) and
/// returns `true`; `false` when the work should run now.
/// "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED" on an invalidated capture.
pub fn capture_node(stream: Handle, make: impl FnOnce() -> CuResult<NodeKind>) -> CuResult<bool> {
    capture_node_in(stream, |_| make())
}

/// As [`capture_node`], with `make` given the graph being captured into.
pub fn capture_node_in(stream: Handle, make: impl FnOnce(&GraphObj) -> CuResult<NodeKind>) -> CuResult<bool> {
    if ACTIVE.load(Ordering::Acquire) == 0 {
        return Ok(false);
    }
    let mut t = table();
    if is_legacy(stream) {
        check_legacy(&mut t)?;
        return Ok(false);
    }
    let Some(sc) = t.streams.get(&(key(stream))) else { return Ok(false) };
    let id = sc.seq;
    let deps = sc.deps.clone();
    let Some(seq) = t.seqs.get(&id) else { return Ok(false) };
    if seq.invalidated {
        return Err(CuError::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.because("the capture sequence was invalidated"));
    }
    let (gh, g) = (seq.graph_handle, seq.graph.clone());
    let kind = make(&g)?;
    let h = graph::add_node(gh as Handle, &g, &deps, kind);
    if let Some(sc) = t.streams.get_mut(&(key(stream))) {
        sc.set_deps(vec![h as usize]);
    }
    Ok(true)
}

/// Synchronising or querying `stream`: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"
/// when it captures (and the capture is invalidated); the legacy stream
/// as `check_legacy`.
pub fn check_sync(stream: Handle) -> CuResult<()> {
    if ACTIVE.load(Ordering::Acquire) == 0 {
        return Ok(());
    }
    let mut t = table();
    if is_legacy(stream) {
        return check_legacy(&mut t);
    }
    if let Some(id) = t.streams.get(&(key(stream))).map(|s| s.seq) {
        invalidate(&mut t, id);
        return Err(CuError::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
            .because("a capturing stream cannot be synchronised or queried"));
    }
    Ok(())
}

/// A "potentially unsafe" call (synchronous copy or memset, allocation,
/// context synchronisation): "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED" when
/// this thread's capture mode prohibits it (the conflicting captures are
/// invalidated), then as work on the legacy stream.
pub fn check_unsafe_call() -> CuResult<()> {
    if ACTIVE.load(Ordering::Acquire) == 0 {
        return Ok(());
    }
    let mode = THREAD_MODE.with(Cell::get);
    let me = std::thread::current().id();
    let mut t = table();
    if mode != MODE_RELAXED {
        let bad: Vec<u64> = t
            .seqs
            .iter()
            .filter(|(_, s)| {
                (s.thread == me && s.mode != MODE_RELAXED)
                    || (mode == MODE_GLOBAL && s.thread != me && s.mode == MODE_GLOBAL)
            })
            .map(|(id, _)| *id)
            .collect();
        if !bad.is_empty() {
            for id in bad {
                invalidate(&mut t, id);
            }
            return Err(CuError::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
                .because("this call is not permitted while a stream capture is in progress (capture mode)"));
        }
    }
    check_legacy(&mut t)
}

/// `cuCtxRecordEvent` / `cuCtxWaitEvent`: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"
/// if a stream of `ctx` captures or the event is part of a capture; the
/// conflicting captures are invalidated.
pub fn check_context_event(ctx: Handle, event: Handle) -> CuResult<()> {
    if ACTIVE.load(Ordering::Acquire) == 0 {
        return Ok(());
    }
    let mut t = table();
    let mut bad: Vec<u64> = t.streams.values().filter(|s| s.context == ctx as usize).map(|s| s.seq).collect();
    if let Some((id, _)) = t.events.get(&(event as usize)) {
        bad.push(*id);
    }
    if bad.is_empty() {
        return Ok(());
    }
    for id in bad {
        invalidate(&mut t, id);
    }
    Err(CuError::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED.because("the context has a capturing stream"))
}

/// "CUDA_ERROR_CAPTURED_EVENT" for an event last recorded in a capture
/// (it cannot be queried or waited for from the host).
pub fn check_event_not_captured(event: Handle) -> CuResult<()> {
    if ACTIVE.load(Ordering::Acquire) == 0 {
        return Ok(());
    }
    if table().events.contains_key(&(event as usize)) {
        return Err(CuError::CUDA_ERROR_CAPTURED_EVENT.because("the event was last recorded in a capturing stream"));
    }
    Ok(())
}

/// "CUDA_ERROR_INVALID_VALUE" for a graph that a capture is building
/// (it cannot be destroyed or have nodes removed meanwhile).
pub fn check_graph_not_capturing(graph: Handle) -> CuResult<()> {
    if ACTIVE.load(Ordering::Acquire) == 0 {
        return Ok(());
    }
    if table().seqs.values().any(|s| s.graph_handle == graph as usize) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("a stream capture is building this graph"));
    }
    Ok(())
}

/// `cuEventRecord` on `stream`: in a capture the event marks the stream's
/// dependency set (or, with `CU_EVENT_RECORD_EXTERNAL`, becomes an event
/// record node) and `true` is returned; otherwise the event stops being a
/// captured one and `false` says to record it now.
pub fn record_event(event: Handle, stream: Handle, flags: c_uint) -> CuResult<bool> {
    if ACTIVE.load(Ordering::Acquire) == 0 {
        return Ok(false);
    }
    let mut t = table();
    if is_legacy(stream) {
        check_legacy(&mut t)?;
    }
    let Some(sc) = t.streams.get(&(key(stream))) else {
        t.events.remove(&(event as usize));
        return Ok(false);
    };
    let (id, deps) = (sc.seq, sc.deps.clone());
    let Some(seq) = t.seqs.get(&id) else { return Ok(false) };
    if seq.invalidated {
        return Err(CuError::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.because("the capture sequence was invalidated"));
    }
    if flags & EVENT_EXTERNAL != 0 {
        let (gh, g) = (seq.graph_handle, seq.graph.clone());
        let h = graph::add_node(gh as Handle, &g, &deps, NodeKind::EventRecord(event as usize));
        if let Some(sc) = t.streams.get_mut(&(key(stream))) {
            sc.set_deps(vec![h as usize]);
        }
        t.events.remove(&(event as usize));
    } else {
        t.events.insert(event as usize, (id, deps));
    }
    Ok(true)
}

/// `cuStreamWaitEvent(stream, event)` in the presence of captures: joins
/// the event's capture (fork, or join back into a stream of the same
/// capture: the dependency sets merge); with `CU_EVENT_WAIT_EXTERNAL` a
/// capturing stream gets an event wait node. Returns whether it was
/// handled here. "CUDA_ERROR_STREAM_CAPTURE_MERGE" for an event of another
/// capture, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION" for an uncaptured event
/// (both invalidate).
pub fn wait_event(stream: Handle, event: Handle, flags: c_uint) -> CuResult<bool> {
    if ACTIVE.load(Ordering::Acquire) == 0 {
        return Ok(false);
    }
    let mut t = table();
    let ev = t.events.get(&(event as usize)).cloned();
    let sc = t.streams.get(&(key(stream))).map(|s| s.seq);
    match (ev, sc) {
        (Some((eseq, edeps)), Some(sseq)) => {
            if eseq != sseq {
                invalidate(&mut t, eseq);
                invalidate(&mut t, sseq);
                return Err(CuError::CUDA_ERROR_STREAM_CAPTURE_MERGE.because("the event belongs to another capture"));
            }
            if t.seqs.get(&sseq).is_some_and(|s| s.invalidated) {
                return Err(CuError::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
            }
            if let Some(s) = t.streams.get_mut(&(key(stream))) {
                let mut deps = s.deps.clone();
                for d in edeps {
                    if !deps.contains(&d) {
                        deps.push(d);
                    }
                }
                s.set_deps(deps);
            }
            Ok(true)
        }
        (Some((eseq, edeps)), None) => {
            if is_legacy(stream) {
                invalidate(&mut t, eseq);
                return Err(CuError::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
                    .because("the legacy stream cannot join a stream capture"));
            }
            let Some(seq) = t.seqs.get(&eseq) else { return Ok(false) };
            if seq.invalidated {
                return Err(CuError::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
            }
            let (context, blocking) = match stream::STREAMS.get(stream) {
                Some(obj) => (handle_of(&obj.context) as usize, obj.flags & CU_STREAM_NON_BLOCKING == 0),
                // The per-thread default stream.
                None => (context::current().map_or(0, |c| handle_of(&c) as usize), true),
            };
            let mut cap = StreamCapture { seq: eseq, deps: Vec::new(), edges: Vec::new(), blocking, context };
            cap.set_deps(edeps);
            t.streams.insert(key(stream), cap);
            Ok(true)
        }
        (None, Some(sseq)) => {
            let Some(seq) = t.seqs.get(&sseq) else { return Ok(false) };
            if seq.invalidated {
                return Err(CuError::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
            }
            if flags & EVENT_EXTERNAL == 0 {
                invalidate(&mut t, sseq);
                return Err(CuError::CUDA_ERROR_STREAM_CAPTURE_ISOLATION
                    .because("a capturing stream cannot wait for an event recorded outside the capture"));
            }
            let (gh, g) = (seq.graph_handle, seq.graph.clone());
            let deps = t.streams.get(&(key(stream))).map(|s| s.deps.clone()).unwrap_or_default();
            let h = graph::add_node(gh as Handle, &g, &deps, NodeKind::EventWait(event as usize));
            if let Some(s) = t.streams.get_mut(&(key(stream))) {
                s.set_deps(vec![h as usize]);
            }
            Ok(true)
        }
        (None, None) => {
            if is_legacy(stream) {
                check_legacy(&mut t)?;
            }
            Ok(false)
        }
    }
}

/// A stream or event goes away: it leaves any capture. A joined stream's
/// work stays in the capture (and must still be joined by the end); the
/// origin stream ends the capture (its graph is destroyed: nobody can end
/// the capture any more).
pub fn forget(stream: Handle, event: Handle) {
    if ACTIVE.load(Ordering::Acquire) == 0 {
        return;
    }
    let mut t = table();
    t.events.remove(&(event as usize));
    let Some(sc) = t.streams.remove(&(key(stream))) else { return };
    let id = sc.seq;
    if t.seqs.get(&id).is_some_and(|s| s.origin == key(stream)) {
        let Some(seq) = t.seqs.remove(&id) else { return };
        ACTIVE.fetch_sub(1, Ordering::AcqRel);
        t.streams.retain(|_, s| s.seq != id);
        t.events.retain(|_, (s, _)| *s != id);
        drop(t);
        if seq.owns_graph {
            let _ = graph::graph_destroy(seq.graph_handle as Handle);
        }
    } else if let Some(seq) = t.seqs.get_mut(&id) {
        seq.left.push(sc.deps);
    }
}

/// Starts a capture on `stream` into `graph` with the initial dependency set `deps`.
fn begin(stream: Handle, mode: c_int, target: Option<(Handle, Arc<GraphObj>)>, deps: Vec<usize>) -> CuResult<()> {
    if !(MODE_GLOBAL..=MODE_RELAXED).contains(&mode) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown capture mode {mode}")));
    }
    if is_legacy(stream) {
        return Err(CuError::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED.because("the legacy stream cannot be captured"));
    }
    // The per-thread default stream synchronises with the legacy stream
    // like a blocking stream; its context is the current one.
    let (context, blocking) = if stream as usize == CU_STREAM_PER_THREAD {
        (handle_of(&context::current()?) as usize, true)
    } else {
        let obj = stream::STREAMS
            .get(stream)
            .ok_or_else(|| CuError::CUDA_ERROR_INVALID_HANDLE.because(format!("{stream:p} is not a live stream")))?;
        (handle_of(&obj.context) as usize, obj.flags & CU_STREAM_NON_BLOCKING == 0)
    };
    let mut t = table();
    if t.streams.contains_key(&(key(stream))) {
        return Err(CuError::CUDA_ERROR_ILLEGAL_STATE.because("the stream is already capturing"));
    }
    let owns_graph = target.is_none();
    let (gh, g) = match target {
        Some(x) => x,
        None => graph::create_graph(),
    };
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    t.seqs.insert(
        id,
        Seq {
            graph: g,
            graph_handle: gh as usize,
            mode,
            thread: std::thread::current().id(),
            origin: key(stream),
            invalidated: false,
            owns_graph,
            left: Vec::new(),
        },
    );
    let mut cap = StreamCapture { seq: id, deps: Vec::new(), edges: Vec::new(), blocking, context };
    cap.set_deps(deps);
    t.streams.insert(key(stream), cap);
    ACTIVE.fetch_add(1, Ordering::AcqRel);
    Ok(())
}

/// `cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)`:
/// "Capture may not be initiated if stream is CU_STREAM_LEGACY"
/// (`CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`); `CUDA_ERROR_ILLEGAL_STATE`
/// if it captures already.
pub fn begin_capture(stream: Handle, mode: c_int) -> CuResult<()> {
    stream::context_of(stream)?;
    begin(stream, mode, None, Vec::new())
}

/// `cuStreamBeginCapture` (CUDA 10.0, no mode): global mode.
pub fn begin_capture_v1(stream: Handle) -> CuResult<()> {
    begin_capture(stream, MODE_GLOBAL)
}

/// `cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const
/// CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData, size_t
/// numDependencies, CUstreamCaptureMode mode)`: captures into an existing
/// graph, after the given nodes.
///
/// # Safety
/// `deps` is NULL or readable for `n` handles; `edge_data` NULL or readable for `n` entries.
pub unsafe fn begin_capture_to_graph(
    stream: Handle,
    graph: Handle,
    deps: *const Handle,
    edge_data: *const EdgeData,
    n: usize,
    mode: c_int,
) -> CuResult<()> {
    stream::context_of(stream)?;
    let g = graph::lookup_graph(graph)?;
    // SAFETY: forwarded caller contract.
    let deps = unsafe { read_capture_deps(graph, deps, edge_data, n) }?;
    begin(stream, mode, Some((graph, g)), deps)
}

/// Reads a dependency list of nodes of `graph` with optional (default-only) edge data.
///
/// # Safety
/// As [`begin_capture_to_graph`].
unsafe fn read_capture_deps(
    graph: Handle,
    deps: *const Handle,
    edge_data: *const EdgeData,
    n: usize,
) -> CuResult<Vec<usize>> {
    if n > 0 && deps.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("dependencies is NULL with a non-zero count"));
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: readable for `n` entries per the caller.
        let (h, e) = unsafe {
            let e = if edge_data.is_null() { EdgeData::default() } else { edge_data.add(i).read_unaligned() };
            (deps.add(i).read_unaligned(), e)
        };
        if e != EdgeData::default() {
            return Err(CuError::CUDA_ERROR_NOT_SUPPORTED.because("only default graph edges are supported"));
        }
        let node = graph::lookup_node(h)?;
        if !graph::node_in_graph(&node, graph) {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("{h:p} is not a node of the capture graph")));
        }
        if !out.contains(&(h as usize)) {
            out.push(h as usize);
        }
    }
    Ok(out)
}

/// `cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)`: the captured
/// graph, or NULL and "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED" if the capture
/// was invalidated. `CUDA_ERROR_ILLEGAL_STATE` on a stream that does not
/// capture, `CUDA_ERROR_STREAM_CAPTURE_UNMATCHED` on a stream that joined a
/// capture begun elsewhere, `CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD` from
/// another thread (unless relaxed), `CUDA_ERROR_STREAM_CAPTURE_UNJOINED` if
/// a forked stream's work was not joined back.
///
/// # Safety
/// `ph` is NULL or writable.
pub unsafe fn end_capture(stream: Handle, ph: *mut Handle) -> CuResult<()> {
    driver::driver()?;
    if ph.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("phGraph is NULL"));
    }
    if !is_legacy(stream) {
        stream::check(stream)?;
    }
    let mut t = table();
    let Some(id) = t.streams.get(&(key(stream))).map(|s| s.seq) else {
        return Err(CuError::CUDA_ERROR_ILLEGAL_STATE.because("the stream is not capturing"));
    };
    let Some(seq) = t.seqs.get(&id) else {
        return Err(CuError::CUDA_ERROR_ILLEGAL_STATE.because("the stream is not capturing"));
    };
    if seq.origin != key(stream) {
        return Err(CuError::CUDA_ERROR_STREAM_CAPTURE_UNMATCHED.because("the capture began on another stream"));
    }
    if seq.mode != MODE_RELAXED && seq.thread != std::thread::current().id() {
        return Err(CuError::CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD.because("the capture began on another thread"));
    }
    let Some(seq) = t.seqs.remove(&id) else { return Err(CuError::CUDA_ERROR_ILLEGAL_STATE) };
    ACTIVE.fetch_sub(1, Ordering::AcqRel);
    let members: Vec<(usize, Vec<usize>)> =
        t.streams.iter().filter(|(_, s)| s.seq == id).map(|(k, s)| (*k, s.deps.clone())).collect();
    for (k, _) in &members {
        t.streams.remove(k);
    }
    t.events.retain(|_, (s, _)| *s != id);
    drop(t);
    let origin_deps = members.iter().find(|(k, _)| *k == key(stream)).map(|m| m.1.clone()).unwrap_or_default();
    let unjoined = members
        .iter()
        .filter(|(k, _)| *k != key(stream))
        .map(|(_, deps)| deps)
        .chain(seq.left.iter())
        .any(|deps| !graph::all_reach(&seq.graph, deps, &origin_deps));
    if seq.invalidated || unjoined {
        if seq.owns_graph {
            let _ = graph::graph_destroy(seq.graph_handle as Handle);
        }
        // SAFETY: checked non-null; writable per the caller.
        unsafe { write_out(ph, std::ptr::null_mut()) }?;
        return Err(if unjoined {
            CuError::CUDA_ERROR_STREAM_CAPTURE_UNJOINED.because("a forked stream was not joined into the origin stream")
        } else {
            CuError::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.because("the capture sequence was invalidated")
        });
    }
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(ph, seq.graph_handle as Handle) }
}

/// The capture status of `stream`; "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"
/// for the legacy stream while a blocking stream of its context captures.
fn status(t: &Table, stream: Handle) -> CuResult<c_int> {
    if is_legacy(stream) {
        if let Ok(ctx) = context::current() {
            let ctx = handle_of(&ctx) as usize;
            if t.streams.values().any(|s| s.blocking && s.context == ctx) {
                return Err(CuError::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
                    .because("a blocking stream is capturing; the legacy stream is unusable"));
            }
        }
        return Ok(STATUS_NONE);
    }
    Ok(match t.streams.get(&(key(stream))).and_then(|s| t.seqs.get(&s.seq)) {
        None => STATUS_NONE,
        Some(seq) if seq.invalidated => STATUS_INVALIDATED,
        Some(_) => STATUS_ACTIVE,
    })
}

/// `cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)`.
///
/// # Safety
/// `out` is NULL or writable.
pub unsafe fn is_capturing(stream: Handle, out: *mut c_int) -> CuResult<()> {
    stream::context_of(stream)?;
    if out.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("captureStatus is NULL"));
    }
    let s = status(&table(), stream)?;
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(out, s) }
}

/// `cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus
/// *captureStatus_out, cuuint64_t *id_out, CUgraph *graph_out, const
/// CUgraphNode **dependencies_out, const CUgraphEdgeData **edgeData_out,
/// size_t *numDependencies_out)`: the arrays stay valid until the next
/// call that works on the stream.
///
/// # Safety
/// `status_out` writable; the other outputs NULL or writable.
pub unsafe fn get_capture_info(
    stream: Handle,
    status_out: *mut c_int,
    id_out: *mut u64,
    graph_out: *mut Handle,
    deps_out: *mut *const Handle,
    edges_out: *mut *const EdgeData,
    num_out: *mut usize,
) -> CuResult<()> {
    stream::context_of(stream)?;
    if status_out.is_null() || (!edges_out.is_null() && deps_out.is_null()) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE
            .because("captureStatus_out is NULL, or edgeData_out without dependencies_out"));
    }
    let t = table();
    let s = status(&t, stream)?;
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(status_out, s) }?;
    if s != STATUS_ACTIVE {
        return Ok(());
    }
    let Some(sc) = t.streams.get(&(key(stream))) else { return Ok(()) };
    let Some(seq) = t.seqs.get(&sc.seq) else { return Ok(()) };
    let (deps, edges) = if sc.deps.is_empty() {
        (std::ptr::null(), std::ptr::null())
    } else {
        (sc.deps.as_ptr() as *const Handle, sc.edges.as_ptr())
    };
    // SAFETY: optional outputs, writable per the caller. The arrays live in
    // the capture table until the stream's dependency set changes.
    unsafe {
        write_opt(id_out, sc.seq);
        write_opt(graph_out, seq.graph_handle as Handle);
        write_opt(deps_out, deps);
        write_opt(edges_out, edges);
        write_opt(num_out, sc.deps.len());
    }
    Ok(())
}

/// `cuStreamGetCaptureInfo_v2` (no edge data).
///
/// # Safety
/// As [`get_capture_info`].
pub unsafe fn get_capture_info_v2(
    stream: Handle,
    status_out: *mut c_int,
    id_out: *mut u64,
    graph_out: *mut Handle,
    deps_out: *mut *const Handle,
    num_out: *mut usize,
) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe { get_capture_info(stream, status_out, id_out, graph_out, deps_out, std::ptr::null_mut(), num_out) }
}

/// `cuStreamGetCaptureInfo` (CUDA 10.1: status and id).
///
/// # Safety
/// As [`get_capture_info`].
pub unsafe fn get_capture_info_v1(stream: Handle, status_out: *mut c_int, id_out: *mut u64) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe {
        get_capture_info(
            stream,
            status_out,
            id_out,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    }
}

/// `CU_STREAM_SET_CAPTURE_DEPENDENCIES`.
const SET_CAPTURE_DEPENDENCIES: c_uint = 1;

/// `cuStreamUpdateCaptureDependencies_v2(CUstream hStream, CUgraphNode
/// *dependencies, const CUgraphEdgeData *dependencyData, size_t
/// numDependencies, unsigned int flags)`: adds to (flags 0) or replaces
/// (`CU_STREAM_SET_CAPTURE_DEPENDENCIES`) the stream's dependency set;
/// `CUDA_ERROR_ILLEGAL_STATE` if it does not capture.
///
/// # Safety
/// `deps` NULL or readable for `n` handles; `edge_data` NULL or readable for `n` entries.
pub unsafe fn update_capture_dependencies(
    stream: Handle,
    deps: *const Handle,
    edge_data: *const EdgeData,
    n: usize,
    flags: c_uint,
) -> CuResult<()> {
    stream::context_of(stream)?;
    if flags > SET_CAPTURE_DEPENDENCIES {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown flags {flags:#x}")));
    }
    let mut t = table();
    let Some(id) = t.streams.get(&(key(stream))).map(|s| s.seq) else {
        return Err(CuError::CUDA_ERROR_ILLEGAL_STATE.because("the stream is not capturing"));
    };
    let gh = t.seqs.get(&id).map_or(0, |s| s.graph_handle);
    // SAFETY: forwarded caller contract.
    let new = unsafe { read_capture_deps(gh as Handle, deps, edge_data, n) }?;
    if let Some(s) = t.streams.get_mut(&(key(stream))) {
        let mut d = if flags == SET_CAPTURE_DEPENDENCIES { Vec::new() } else { s.deps.clone() };
        for x in new {
            if !d.contains(&x) {
                d.push(x);
            }
        }
        s.set_deps(d);
    }
    Ok(())
}

/// `cuStreamUpdateCaptureDependencies` (CUDA 11.3, no edge data).
///
/// # Safety
/// As [`update_capture_dependencies`].
pub unsafe fn update_capture_dependencies_v1(
    stream: Handle,
    deps: *const Handle,
    n: usize,
    flags: c_uint,
) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe { update_capture_dependencies(stream, deps, std::ptr::null(), n, flags) }
}

/// `cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)`: swaps
/// this thread's mode with `*mode`.
///
/// # Safety
/// `mode` is NULL or readable and writable.
pub unsafe fn thread_exchange_mode(mode: *mut c_int) -> CuResult<()> {
    driver::driver()?;
    // SAFETY: forwarded caller contract.
    let new = unsafe { read_in(mode) }?;
    if !(MODE_GLOBAL..=MODE_RELAXED).contains(&new) {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown capture mode {new}")));
    }
    let old = THREAD_MODE.with(|m| m.replace(new));
    // SAFETY: readable above, hence non-null; writable per the caller.
    unsafe { write_out(mode, old) }
}
