//! Streams, events and host callbacks.
//!
//! All work of a device is recorded in submission order for its one queue.
//! The work of a created `CUstream` carries the stream's id as its runtime
//! stream tag ([`note_work`]): it is ordered behind that stream's earlier
//! work only, and may overlap other streams' work on the device (between
//! two barriers each stream has at most one command; see the runtime's
//! `stream.rs`). The default streams' work is ordered against all work (the
//! legacy stream synchronises with every blocking stream; the per-thread
//! stream is treated the same, which is stricter than CUDA). Waiting on an
//! event (`cuStreamWaitEvent`, `cuCtxWaitEvent`) orders the next work
//! behind all work queued before (freed memory needs nothing: the runtime
//! keeps it until the work queued before the free has finished). Synchronising a stream
//! waits for all the device's work. A created stream remembers the
//! point in that order after its last work ([`note_work`]), so that
//! `cuStreamQuery` and an event recorded on it answer for that stream's
//! work only, not for what other streams queued later. Host callbacks
//! (`cuLaunchHostFunc`, `cuStreamAddCallback`) run on the calling thread
//! once the work queued before them has finished.
//!
//! An event records a device timestamp queued behind the work before it
//! (`vkCmdWriteTimestamp`, read back when `cuEventElapsedTime` needs it);
//! on devices whose queue has no timestamps, recording waits for that work
//! and reads the host clock instead.

use std::ffi::{c_float, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::capture;
use crate::context::{self, ContextObj};
use crate::driver;
use crate::ffi::{write_out, CUdevice, Handle};
use crate::graph::{HostNode, NodeKind};
use crate::handles::{handle_of, Registry};
use crate::result::{CUresult, CuError, CuResult};

/// `CU_STREAM_LEGACY`: the legacy default stream, as a handle value.
pub const CU_STREAM_LEGACY: usize = 0x1;
/// `CU_STREAM_PER_THREAD`: the per-thread default stream, as a handle value.
pub const CU_STREAM_PER_THREAD: usize = 0x2;
/// `CU_STREAM_NON_BLOCKING`.
pub const CU_STREAM_NON_BLOCKING: c_uint = 0x1;

/// A `CUstream` created by `cuStreamCreate`.
pub struct StreamObj {
    /// The context it was created in.
    pub context: Arc<ContextObj>,
    /// Creation flags (`CU_STREAM_DEFAULT` or `CU_STREAM_NON_BLOCKING`).
    pub flags: c_uint,
    /// The priority it was created with (clamped to the range, i.e. 0).
    pub priority: c_int,
    /// `cuStreamGetId`.
    pub id: u64,
    /// The context its last work was queued in and the runtime's work mark
    /// after it (`None`: no work yet).
    last: Mutex<Option<(Arc<ContextObj>, u64)>>,
}

impl StreamObj {
    /// The context and work mark after the stream's last work, if any.
    fn last_work(&self) -> Option<(Arc<ContextObj>, u64)> {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Moves the stream's last-work mark to at least `mark` (of `ctx`'s
    /// device), reading it under the lock: another thread may have noted
    /// later work on the stream first.
    fn advance(&self, ctx: &Arc<ContextObj>, mark: impl FnOnce() -> u64) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let mark = mark();
        match last.as_mut() {
            Some((c, m)) if c.device.ordinal == ctx.device.ordinal => *m = (*m).max(mark),
            _ => *last = Some((ctx.clone(), mark)),
        }
    }
}

/// Queues `op`'s work on `stream`: a created stream's commands carry its id
/// as their stream tag (`ptxvk_runtime::with_stream_tag`), so they are
/// ordered behind that stream's earlier work only and may run concurrently
/// with other streams' work; the default streams' work is ordered against
/// all work (the legacy stream synchronises with every blocking stream).
/// Then records that the work was queued: a created stream's query (and
/// events recorded on it) wait for the work up to here. Passes `op`'s
/// result on (also a failure, which may have queued part of its work). The
/// default streams need no mark (they answer for all the context's work,
/// which covers every stream that synchronises with them).
pub fn note_work<T>(stream: Handle, op: impl FnOnce() -> CuResult<T>) -> CuResult<T> {
    let created = if is_default(stream) { None } else { STREAMS.get(stream) };
    let result = ptxvk_runtime::with_stream_tag(created.as_ref().map(|s| s.id), op);
    if let (Some(s), Ok(ctx)) = (created, context::current()) {
        s.advance(&ctx, || ctx.runtime.work_mark());
    }
    result
}

/// The runtime's stream tag of `stream`'s work: a created stream's id; none
/// (ordered against all work) for the default streams.
fn tag_of(stream: Handle) -> Option<u64> {
    if is_default(stream) {
        None
    } else {
        STREAMS.get(stream).map(|s| s.id)
    }
}

/// The context and work mark that work queued on `stream` so far has
/// finished by: a created stream's last work, else (the default streams)
/// all work queued in `ctx`.
fn finish_mark(stream: Handle, ctx: &Arc<ContextObj>) -> (Arc<ContextObj>, u64) {
    if is_default(stream) {
        return (ctx.clone(), ctx.runtime.work_mark());
    }
    match STREAMS.get(stream).and_then(|s| s.last_work()) {
        Some(last) => last,
        // Nothing was ever queued on it: finished at once.
        None => (ctx.clone(), 0),
    }
}

/// Live streams.
pub static STREAMS: Registry<StreamObj> = Registry::new();

/// Stream ids; 0 and 1 are left for the default streams.
static NEXT_STREAM_ID: AtomicU64 = AtomicU64::new(16);

/// Whether `stream` is one of the default-stream handles (NULL,
/// `CU_STREAM_LEGACY`, `CU_STREAM_PER_THREAD`).
fn is_default(stream: Handle) -> bool {
    matches!(stream as usize, 0 | CU_STREAM_LEGACY | CU_STREAM_PER_THREAD)
}

/// Accepts the null stream, `CU_STREAM_LEGACY`, `CU_STREAM_PER_THREAD` and
/// live streams; anything else is `CUDA_ERROR_INVALID_HANDLE`.
pub fn check(stream: Handle) -> CuResult<()> {
    if is_default(stream) || STREAMS.get(stream).is_some() {
        Ok(())
    } else {
        Err(CuError::CUDA_ERROR_INVALID_HANDLE.because(format!("{stream:p} is not a live stream")))
    }
}

/// The context a stream's work goes to: its own, or the current one for
/// the default streams.
pub fn context_of(stream: Handle) -> CuResult<Arc<ContextObj>> {
    if is_default(stream) {
        return context::current();
    }
    driver::driver()?;
    STREAMS
        .get(stream)
        .map(|s| s.context.clone())
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_HANDLE.because(format!("{stream:p} is not a live stream")))
}

/// `cuStreamCreate(CUstream *phStream, unsigned int flags)`.
///
/// # Safety
/// `ph_stream` is NULL or writable.
pub unsafe fn stream_create(ph_stream: *mut Handle, flags: c_uint) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe { stream_create_with_priority(ph_stream, flags, 0) }
}

/// `cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)`:
/// the priority is clamped to the range `cuCtxGetStreamPriorityRange`
/// reports (0..=0), as the driver does.
///
/// # Safety
/// `ph_stream` is NULL or writable.
pub unsafe fn stream_create_with_priority(ph_stream: *mut Handle, flags: c_uint, _priority: c_int) -> CuResult<()> {
    let context = context::current()?;
    if ph_stream.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("phStream is NULL"));
    }
    if flags & !CU_STREAM_NON_BLOCKING != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown stream flags {flags:#x}")));
    }
    let id = NEXT_STREAM_ID.fetch_add(1, Ordering::Relaxed);
    let handle = STREAMS.insert(Arc::new(StreamObj { context, flags, priority: 0, id, last: Mutex::new(None) }));
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(ph_stream, handle) }
}

/// `cuStreamDestroy_v2(CUstream hStream)`: waits for the stream's work.
pub fn stream_destroy(stream: Handle) -> CuResult<()> {
    driver::driver()?;
    let obj = STREAMS
        .remove(stream)
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_HANDLE.because(format!("{stream:p} is not a live stream")))?;
    capture::forget(stream, std::ptr::null_mut());
    obj.context.runtime.synchronize()?;
    Ok(())
}

/// `cuStreamSynchronize(CUstream hStream)`: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"
/// on a capturing stream (the capture is invalidated).
pub fn stream_synchronize(stream: Handle) -> CuResult<()> {
    let ctx = context_of(stream)?;
    capture::check_sync(stream)?;
    ctx.runtime.synchronize()?;
    Ok(())
}

/// `cuStreamQuery(CUstream hStream)`: "CUDA_ERROR_NOT_READY" while work
/// queued on the stream has not finished (without waiting; the work is
/// submitted if it was still being batched). For a created stream that is
/// its own work up to its last command; for the default streams all work
/// queued in the context (the legacy stream waits for the others anyway).
pub fn stream_query(stream: Handle) -> CuResult<()> {
    let ctx = context_of(stream)?;
    capture::check_sync(stream)?;
    let (ctx, mark) = finish_mark(stream, &ctx);
    if ctx.runtime.is_done(mark)? {
        Ok(())
    } else {
        Err(CuError::CUDA_ERROR_NOT_READY.because("work queued on the stream has not finished"))
    }
}

/// `cuStreamGetFlags(CUstream hStream, unsigned int *flags)`: 0 for the
/// default streams.
///
/// # Safety
/// `flags` is NULL or writable.
pub unsafe fn stream_get_flags(stream: Handle, flags: *mut c_uint) -> CuResult<()> {
    context_of(stream)?;
    let f = STREAMS.get(stream).map_or(0, |s| s.flags);
    // SAFETY: forwarded caller contract.
    unsafe { write_out(flags, f) }
}

/// `cuStreamGetPriority(CUstream hStream, int *priority)`.
///
/// # Safety
/// `priority` is NULL or writable.
pub unsafe fn stream_get_priority(stream: Handle, priority: *mut c_int) -> CuResult<()> {
    context_of(stream)?;
    let p = STREAMS.get(stream).map_or(0, |s| s.priority);
    // SAFETY: forwarded caller contract.
    unsafe { write_out(priority, p) }
}

/// `cuStreamGetId(CUstream hStream, unsigned long long *streamId)`: 0 for
/// the legacy default stream, 1 for the per-thread one.
///
/// # Safety
/// `id` is NULL or writable.
pub unsafe fn stream_get_id(stream: Handle, id: *mut u64) -> CuResult<()> {
    context_of(stream)?;
    let v = match stream as usize {
        CU_STREAM_PER_THREAD => 1,
        _ => STREAMS.get(stream).map_or(0, |s| s.id),
    };
    // SAFETY: forwarded caller contract.
    unsafe { write_out(id, v) }
}

/// `cuStreamGetCtx(CUstream hStream, CUcontext *pctx)`.
///
/// # Safety
/// `pctx` is NULL or writable.
pub unsafe fn stream_get_ctx(stream: Handle, pctx: *mut Handle) -> CuResult<()> {
    let ctx = context_of(stream)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(pctx, handle_of(&ctx)) }
}

/// `cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx
/// *pGreenCtx)`: there are no green contexts, so `*pGreenCtx` is NULL.
///
/// # Safety
/// `pctx` and `green` are NULL or writable.
pub unsafe fn stream_get_ctx_v2(stream: Handle, pctx: *mut Handle, green: *mut Handle) -> CuResult<()> {
    let ctx = context_of(stream)?;
    if pctx.is_null() || green.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pCtx or pGreenCtx is NULL"));
    }
    // SAFETY: both checked non-null; writable per the caller.
    unsafe {
        write_out(pctx, handle_of(&ctx))?;
        write_out(green, std::ptr::null_mut())
    }
}

/// `cuStreamGetGreenCtx(CUstream hStream, CUgreenCtx *phCtx)`: there are no
/// green contexts, so `*phCtx` is NULL for every stream (cuBLAS 13 asks at
/// its first call on a stream).
///
/// # Safety
/// `phctx` is NULL or writable.
pub unsafe fn stream_get_green_ctx(stream: Handle, phctx: *mut Handle) -> CuResult<()> {
    context_of(stream)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(phctx, std::ptr::null_mut()) }
}

/// `cuStreamGetDevResource(CUstream hStream, CUdevResource *resource,
/// CUdevResourceType type)`: the stream's device's whole SM resource (no
/// green contexts; cuSOLVER 12 asks). See `device::write_sm_resource`.
///
/// # Safety
/// `resource` is NULL or writable for a `CUdevResource`.
pub unsafe fn stream_get_dev_resource(stream: Handle, resource: *mut c_void, kind: c_int) -> CuResult<()> {
    let ctx = context_of(stream)?;
    // SAFETY: forwarded caller contract.
    unsafe { crate::device::write_sm_resource(ctx.device, resource, kind) }
}

/// `cuStreamGetDevice(CUstream hStream, CUdevice *device)`.
///
/// # Safety
/// `device` is NULL or writable.
pub unsafe fn stream_get_device(stream: Handle, device: *mut CUdevice) -> CuResult<()> {
    let ctx = context_of(stream)?;
    // SAFETY: forwarded caller contract.
    unsafe { write_out(device, ctx.device.ordinal) }
}

/// `cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)`:
/// satisfied by the single in-order queue once both handles are checked;
/// the stream's query then also waits for the event's work.
pub fn stream_wait_event(stream: Handle, event: Handle, flags: c_uint) -> CuResult<()> {
    context_of(stream)?;
    lookup_event(event)?;
    if flags & !1 != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown wait flags {flags:#x}")));
    }
    if capture::wait_event(stream, event, flags)? {
        return Ok(());
    }
    let ev = lookup_event(event)?;
    if let Some(shared) = &ev.ipc {
        // Work queued after the wait must not start before the other
        // process's: the queue here is ordered, so wait on the host.
        shared.wait()?;
    }
    // The stream's later work waits for the event's (here: for all work
    // queued so far); until that finished, a query of the stream is not
    // ready either.
    context_of(stream)?.runtime.order_next();
    if ev.recorded.lock().unwrap_or_else(|p| p.into_inner()).is_some() {
        if let Some(s) = STREAMS.get(stream) {
            s.advance(&ev.context, || ev.mark.load(Ordering::Relaxed));
        }
    }
    Ok(())
}

/// `CUhostFn`.
pub type HostFn = Option<unsafe extern "C" fn(*mut c_void)>;
/// `CUstreamCallback`.
pub type StreamCallback = Option<unsafe extern "C" fn(Handle, CUresult, *mut c_void)>;

/// `cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)`: runs
/// `fn(userData)` once the work queued before it has finished.
///
/// # Safety
/// `f` is NULL or a function that may be called with `user_data`.
pub unsafe fn launch_host_func(stream: Handle, f: HostFn, user_data: *mut c_void) -> CuResult<()> {
    let ctx = context_of(stream)?;
    if capture::capture_node(stream, || Ok(NodeKind::Host(HostNode::new(f, user_data)?)))? {
        return Ok(());
    }
    let f = f.ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because("fn is NULL"))?;
    ctx.runtime.synchronize()?;
    // SAFETY: the caller's host function, called as the driver API documents.
    unsafe { f(user_data) };
    Ok(())
}

/// `cuLaunchHostFunc_v2(CUstream hStream, CUhostFn fn, void *userData,
/// unsigned int syncMode)`: as [`launch_host_func`].
///
/// # Safety
/// As [`launch_host_func`].
pub unsafe fn launch_host_func_v2(stream: Handle, f: HostFn, user_data: *mut c_void, _mode: c_uint) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    unsafe { launch_host_func(stream, f, user_data) }
}

/// `cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void
/// *userData, unsigned int flags)`: "flags must be 0"; the callback gets the
/// stream, the status of the preceding work and `userData`.
///
/// # Safety
/// `callback` is NULL or a function that may be called as documented.
pub unsafe fn stream_add_callback(
    stream: Handle,
    callback: StreamCallback,
    user_data: *mut c_void,
    flags: c_uint,
) -> CuResult<()> {
    let ctx = context_of(stream)?;
    // Stream callbacks cannot be captured (host functions can).
    capture::check_sync(stream)?;
    let cb = callback.ok_or_else(|| CuError::CUDA_ERROR_INVALID_VALUE.because("callback is NULL"))?;
    if flags != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("flags must be 0"));
    }
    let status = match ctx.runtime.synchronize() {
        Ok(()) => 0,
        Err(e) => CuError::from(e).code(),
    };
    // SAFETY: the caller's callback, called as the driver API documents.
    unsafe { cb(stream, status, user_data) };
    Ok(())
}

/// A `CUevent`.
pub struct EventObj {
    /// The context it was created in.
    pub context: Arc<ContextObj>,
    /// `CU_EVENT_*` creation flags.
    pub flags: c_uint,
    /// When the work before its last record finished.
    recorded: Mutex<Option<ptxvk_runtime::Timestamp>>,
    /// The runtime's work mark at the last record (see `Context::work_mark`).
    mark: AtomicU64,
    /// The state shared with other processes, for `CU_EVENT_INTERPROCESS`
    /// events and events opened with `cuIpcOpenEventHandle`.
    pub ipc: Option<Arc<crate::ipc::SharedEvent>>,
}

/// `CU_EVENT_DISABLE_TIMING`.
pub const CU_EVENT_DISABLE_TIMING: c_uint = 0x2;
/// `CU_EVENT_INTERPROCESS`.
pub const CU_EVENT_INTERPROCESS: c_uint = 0x4;
/// All `CU_EVENT_*` flags (`BLOCKING_SYNC`, `DISABLE_TIMING`, `INTERPROCESS`).
const EVENT_FLAGS: c_uint = 0x7;

/// Live events.
pub static EVENTS: Registry<EventObj> = Registry::new();

/// The live event `event`; `CUDA_ERROR_INVALID_HANDLE` otherwise.
pub fn lookup_event(event: Handle) -> CuResult<Arc<EventObj>> {
    driver::driver()?;
    EVENTS
        .get(event)
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_HANDLE.because(format!("{event:p} is not a live event")))
}

/// `cuEventCreate(CUevent *phEvent, unsigned int Flags)`.
///
/// # Safety
/// `ph_event` is NULL or writable.
pub unsafe fn event_create(ph_event: *mut Handle, flags: c_uint) -> CuResult<()> {
    let context = context::current()?;
    if ph_event.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("phEvent is NULL"));
    }
    if flags & !EVENT_FLAGS != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown event flags {flags:#x}")));
    }
    // "CU_EVENT_INTERPROCESS must be specified along with CU_EVENT_DISABLE_TIMING."
    let ipc = if flags & CU_EVENT_INTERPROCESS != 0 {
        if flags & CU_EVENT_DISABLE_TIMING == 0 {
            return Err(CuError::CUDA_ERROR_INVALID_VALUE
                .because("CU_EVENT_INTERPROCESS needs CU_EVENT_DISABLE_TIMING as well"));
        }
        Some(crate::ipc::SharedEvent::create()?)
    } else {
        None
    };
    let h = new_event(context, flags, ipc);
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(ph_event, h) }
}

/// Registers a new event and returns its handle.
pub fn new_event(context: Arc<ContextObj>, flags: c_uint, ipc: Option<Arc<crate::ipc::SharedEvent>>) -> Handle {
    EVENTS.insert(Arc::new(EventObj { context, flags, recorded: Mutex::new(None), mark: AtomicU64::new(0), ipc }))
}

/// `cuEventDestroy_v2(CUevent hEvent)`.
pub fn event_destroy(event: Handle) -> CuResult<()> {
    driver::driver()?;
    EVENTS
        .remove(event)
        .ok_or_else(|| CuError::CUDA_ERROR_INVALID_HANDLE.because(format!("{event:p} is not a live event")))?;
    capture::forget(std::ptr::null_mut(), event);
    Ok(())
}

/// `cuEventRecord(CUevent hEvent, CUstream hStream)`: "CUDA_ERROR_INVALID_HANDLE"
/// if the stream and event belong to different contexts. In a capturing
/// stream the event marks the capture point (see [`capture::record_event`]).
pub fn event_record(event: Handle, stream: Handle) -> CuResult<()> {
    event_record_with_flags(event, stream, 0)
}

/// Records `event` on `stream` now (no capture).
pub fn record_now(event: Handle, stream: Handle) -> CuResult<()> {
    let ev = lookup_event(event)?;
    let ctx = context_of(stream)?;
    if ctx.device.ordinal != ev.context.device.ordinal {
        return Err(CuError::CUDA_ERROR_INVALID_HANDLE.because("the event and the stream are on different devices"));
    }
    // The event completes with the stream's work before it; its timestamp
    // is written once all work queued before it has finished (a timestamp
    // command waits for every earlier command), and as the stream's work it
    // does not order other streams' later work behind it.
    let (owner, mark) = finish_mark(stream, &ctx);
    let t = ptxvk_runtime::with_stream_tag(tag_of(stream), || ctx.runtime.record_timestamp())?;
    let mark = if owner.device.ordinal == ev.context.device.ordinal { mark } else { ctx.runtime.work_mark() };
    ev.mark.store(mark, Ordering::Relaxed);
    *ev.recorded.lock().unwrap_or_else(|p| p.into_inner()) = Some(t);
    if let Some(shared) = &ev.ipc {
        shared.record_on(&ctx.runtime)?;
    }
    Ok(())
}

/// `cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)`.
pub fn event_record_with_flags(event: Handle, stream: Handle, flags: c_uint) -> CuResult<()> {
    lookup_event(event)?;
    context_of(stream)?;
    if flags & !1 != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because(format!("unknown record flags {flags:#x}")));
    }
    if capture::record_event(event, stream, flags)? {
        return Ok(());
    }
    record_now(event, stream)
}

/// `cuEventQuery(CUevent hEvent)`: "CUDA_ERROR_NOT_READY" while the work
/// recorded before the event has not finished (the query does not wait, but
/// submits that work if it was still being batched, so polling ends).
pub fn event_query(event: Handle) -> CuResult<()> {
    let ev = lookup_event(event)?;
    capture::check_event_not_captured(event)?;
    if let Some(shared) = &ev.ipc {
        // The latest record may come from another process.
        return if shared.is_complete() {
            Ok(())
        } else {
            Err(CuError::CUDA_ERROR_NOT_READY.because("the work recorded before the event has not finished"))
        };
    }
    if ev.recorded.lock().unwrap_or_else(|p| p.into_inner()).is_none() {
        return Ok(());
    }
    if ev.context.runtime.is_done(ev.mark.load(Ordering::Relaxed))? {
        Ok(())
    } else {
        Err(CuError::CUDA_ERROR_NOT_READY.because("the work recorded before the event has not finished"))
    }
}

/// `cuEventSynchronize(CUevent hEvent)`: waits for the context's queued work.
pub fn event_synchronize(event: Handle) -> CuResult<()> {
    let ev = lookup_event(event)?;
    capture::check_event_not_captured(event)?;
    if let Some(shared) = &ev.ipc {
        return shared.wait();
    }
    if ev.recorded.lock().unwrap_or_else(|p| p.into_inner()).is_some() {
        ev.context.runtime.synchronize()?;
    }
    Ok(())
}

/// `cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)`:
/// "CUDA_ERROR_INVALID_HANDLE" if either event was created with
/// `CU_EVENT_DISABLE_TIMING` or has not been recorded.
///
/// # Safety
/// `ms` is NULL or writable.
pub unsafe fn event_elapsed_time(ms: *mut c_float, start: Handle, end: Handle) -> CuResult<()> {
    let s = lookup_event(start)?;
    let e = lookup_event(end)?;
    if ms.is_null() {
        return Err(CuError::CUDA_ERROR_INVALID_VALUE.because("pMilliseconds is NULL"));
    }
    if (s.flags | e.flags) & CU_EVENT_DISABLE_TIMING != 0 {
        return Err(CuError::CUDA_ERROR_INVALID_HANDLE.because("an event was created with CU_EVENT_DISABLE_TIMING"));
    }
    let t0 = s.recorded.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let t1 = e.recorded.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let (Some(t0), Some(t1)) = (t0, t1) else {
        return Err(CuError::CUDA_ERROR_INVALID_HANDLE.because("an event has not been recorded"));
    };
    if !Arc::ptr_eq(&s.context, &e.context) {
        return Err(CuError::CUDA_ERROR_INVALID_HANDLE.because("the events are in different contexts"));
    }
    let v = s.context.runtime.elapsed_ms(&t0, &t1)?;
    // SAFETY: checked non-null; writable per the caller.
    unsafe { write_out(ms, v as c_float) }
}

/// `cuCtxRecordEvent(CUcontext hCtx, CUevent hEvent)`.
pub fn ctx_record_event(ctx: Handle, event: Handle) -> CuResult<()> {
    let c = context::lookup(ctx)?;
    let ev = lookup_event(event)?;
    capture::check_context_event(ctx, event)?;
    let t = c.runtime.record_timestamp()?;
    ev.mark.store(c.runtime.work_mark(), Ordering::Relaxed);
    *ev.recorded.lock().unwrap_or_else(|p| p.into_inner()) = Some(t);
    if let Some(shared) = &ev.ipc {
        shared.record_on(&c.runtime)?;
    }
    Ok(())
}

/// `cuCtxWaitEvent(CUcontext hCtx, CUevent hEvent)`: the context's next
/// work waits for all work queued before; an interprocess event recorded
/// by another process is waited for on the host.
pub fn ctx_wait_event(ctx: Handle, event: Handle) -> CuResult<()> {
    let c = context::lookup(ctx)?;
    let ev = lookup_event(event)?;
    capture::check_context_event(ctx, event)?;
    c.runtime.order_next();
    if let Some(shared) = &ev.ipc {
        shared.wait()?;
    }
    Ok(())
}
