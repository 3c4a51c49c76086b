//! The command stream: commands are recorded into one command buffer and
//! submitted at synchronisation points, with memory barriers that order
//! each command behind the earlier ones it must see (CUDA's stream
//! semantics).
//!
//! Commands carry the *stream tag* of the thread that queues them
//! ([`with_stream_tag`]; libcuda tags the work of each created `CUstream`).
//! Untagged work (the default, and every synchronous or context-wide
//! operation) is ordered against everything: a barrier before it and one
//! before the next command. Tagged work needs a barrier only behind its own
//! stream's earlier commands: between two barriers (an *epoch*) each stream
//! has at most one command, and commands of different streams in one epoch
//! may run concurrently on the device. [`Stream::order_next`] makes the
//! next command wait for all earlier ones (an event wait).

use std::any::Any;
use std::cell::Cell;
use std::sync::Arc;

use ash::vk;

use crate::device::Device;
use crate::error::{map_create, map_queue, Error, Result};
use crate::memory::{UploadArena, ARENA_FLUSH_BYTES};

/// Commands recorded before a batch is submitted even without a sync point.
const MAX_BATCH_COMMANDS: u32 = 4096;

thread_local! {
    /// The stream tag of the commands this thread queues (`None`: ordered
    /// against all work).
    static STREAM_TAG: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Runs `f` with the commands it queues on this thread tagged as work of
/// stream `tag` (`None`: ordered against all work, the default).
pub fn with_stream_tag<R>(tag: Option<u64>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<u64>);
    impl Drop for Restore {
        fn drop(&mut self) {
            STREAM_TAG.with(|t| t.set(self.0));
        }
    }
    let _restore = Restore(STREAM_TAG.with(|t| t.replace(tag)));
    f()
}

/// Anything that must outlive the batch that uses it.
pub(crate) type KeepAlive = Arc<dyn Any + Send + Sync>;

/// One queue's worth of batched work.
pub(crate) struct Stream {
    device: Arc<Device>,
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
    recording: bool,
    /// A batch was submitted without waiting for it ([`Stream::submit`]).
    in_flight: bool,
    /// Batches submitted and batches completed so far.
    submitted: u64,
    completed: u64,
    commands: u32,
    /// Stream tags with a command since the last barrier.
    epoch: Vec<u64>,
    /// The next command waits for all earlier ones.
    ordered_next: bool,
    /// Barriers recorded between commands so far (statistics).
    barriers: u64,
    keep_alive: Vec<KeepAlive>,
    /// Staging memory used by the batch being recorded.
    pub(crate) arena: UploadArena,
    /// Set once submitted work failed; every later call fails.
    failed: Option<Error>,
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Err(e) = self.flush() {
            log::error!("finishing queued work failed: {e}");
        }
        // SAFETY: the batch has completed (or the device is lost, when waiting
        // idle is all that can be done); the pool and fence belong to us.
        unsafe {
            let _ = self.device.raw.queue_wait_idle(self.device.queue);
            self.device.raw.destroy_fence(self.fence, None);
            self.device.raw.destroy_command_pool(self.pool, None);
        }
    }
}

impl Stream {
    pub(crate) fn new(device: &Arc<Device>) -> Result<Stream> {
        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(device.queue_family)
            .flags(vk::CommandPoolCreateFlags::TRANSIENT);
        // SAFETY: valid create info for a queue family of this device.
        let pool = unsafe { device.raw.create_command_pool(&pool_info, None) }.map_err(map_create)?;
        let alloc_info = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        // SAFETY: `pool` is live.
        let cmd = match unsafe { device.raw.allocate_command_buffers(&alloc_info) } {
            Ok(v) => v.first().copied().unwrap_or_default(),
            Err(e) => {
                // SAFETY: nothing else uses the pool.
                unsafe { device.raw.destroy_command_pool(pool, None) };
                return Err(map_create(e));
            }
        };
        // SAFETY: valid create info.
        let fence = match unsafe { device.raw.create_fence(&vk::FenceCreateInfo::default(), None) } {
            Ok(f) => f,
            Err(e) => {
                // SAFETY: nothing else uses the pool.
                unsafe { device.raw.destroy_command_pool(pool, None) };
                return Err(map_create(e));
            }
        };
        Ok(Stream {
            device: device.clone(),
            pool,
            cmd,
            fence,
            recording: false,
            in_flight: false,
            submitted: 0,
            completed: 0,
            commands: 0,
            epoch: Vec::new(),
            ordered_next: false,
            barriers: 0,
            keep_alive: Vec::new(),
            arena: UploadArena::default(),
            failed: None,
        })
    }

    /// Fails if earlier work failed.
    pub(crate) fn check(&self) -> Result<()> {
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Whether commands are recorded but not yet completed.
    pub(crate) fn has_pending(&self) -> bool {
        self.recording || self.in_flight
    }

    /// The batch the work queued so far belongs to: that work has finished
    /// once [`Stream::completed`] reaches it.
    pub(crate) fn mark(&self) -> u64 {
        if self.recording {
            self.submitted + 1
        } else {
            self.submitted
        }
    }

    /// Whether the work up to `mark` has finished, without waiting: a batch
    /// in flight is checked, and a batch still being recorded is submitted
    /// so that the work makes progress (it is not finished at this call).
    pub(crate) fn poll(&mut self, mark: u64) -> Result<bool> {
        self.check()?;
        if self.completed >= mark {
            return Ok(true);
        }
        if self.in_flight {
            // SAFETY: the fence belongs to this stream.
            let signaled = unsafe { self.device.raw.get_fence_status(self.fence) }.map_err(map_queue)?;
            if signaled {
                self.wait_in_flight()?;
                return Ok(self.completed >= mark);
            }
            return Ok(false);
        }
        if self.recording {
            self.submit()?;
        }
        Ok(false)
    }

    /// Submits early when the batch is large; call before staging memory for a command.
    pub(crate) fn maybe_flush(&mut self) -> Result<()> {
        if self.commands >= MAX_BATCH_COMMANDS || self.arena.used >= ARENA_FLUSH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// The next command waits for every command queued before it, whatever
    /// its stream tag.
    pub(crate) fn order_next(&mut self) {
        self.ordered_next = true;
    }

    /// Barriers recorded between commands so far.
    pub(crate) fn barriers(&self) -> u64 {
        self.barriers
    }

    /// Starts a command: the command buffer to record it into, after a
    /// barrier when it must see earlier commands (see the module docs).
    pub(crate) fn begin_command(&mut self) -> Result<vk::CommandBuffer> {
        let tag = STREAM_TAG.with(Cell::get);
        self.check()?;
        if !self.recording && self.in_flight {
            // The command buffer is still in use by the batch in flight.
            self.wait_in_flight()?;
        }
        let d = &self.device.raw;
        if !self.recording {
            // SAFETY: the previous batch has completed (flush or wait_in_flight waited for it),
            // so the pool's command buffer may be reset and re-recorded.
            unsafe {
                d.reset_command_pool(self.pool, vk::CommandPoolResetFlags::empty()).map_err(map_create)?;
                d.begin_command_buffer(
                    self.cmd,
                    &vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
                )
                .map_err(map_create)?;
            }
            self.recording = true;
            // The batch before has completed (the host waited for it).
            self.epoch.clear();
            self.ordered_next = false;
        } else if self.commands > 0 && (self.ordered_next || tag.is_none_or(|t| self.epoch.contains(&t))) {
            let barrier = vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
                .dst_access_mask(
                    vk::AccessFlags::SHADER_READ
                        | vk::AccessFlags::SHADER_WRITE
                        | vk::AccessFlags::TRANSFER_READ
                        | vk::AccessFlags::TRANSFER_WRITE,
                );
            let stages = vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER;
            // SAFETY: `cmd` is recording.
            unsafe {
                d.cmd_pipeline_barrier(self.cmd, stages, stages, vk::DependencyFlags::empty(), &[barrier], &[], &[])
            };
            self.barriers += 1;
            self.epoch.clear();
            self.ordered_next = false;
        }
        match tag {
            Some(t) => self.epoch.push(t),
            None => self.ordered_next = true,
        }
        self.commands += 1;
        Ok(self.cmd)
    }

    /// Whether no work is recorded or in flight (all queued work has completed).
    pub(crate) fn is_idle(&self) -> bool {
        !self.recording && !self.in_flight
    }

    /// Keeps `object` alive until the current batch completes.
    pub(crate) fn keep(&mut self, object: KeepAlive) {
        self.keep_alive.push(object);
    }

    /// Marks the stream failed: every later call fails with `err`.
    pub(crate) fn fail(&mut self, err: Error) {
        self.failed = Some(err);
    }

    /// Forgets a failure (see `Context::clear_failure`); the error it was.
    pub(crate) fn clear_failure(&mut self) -> Option<Error> {
        self.failed.take()
    }

    /// Submits the recorded batch and waits for it.
    pub(crate) fn flush(&mut self) -> Result<()> {
        self.check()?;
        if self.recording {
            self.submit()?;
        }
        if !self.in_flight {
            return Ok(());
        }
        let result = self.wait_in_flight();
        // Nothing is queued or in flight now: the staging memory is free.
        self.arena.reset();
        result
    }

    /// Submits the recorded batch without waiting for it.
    fn submit(&mut self) -> Result<()> {
        self.recording = false;
        self.commands = 0;
        let result = self.submit_batch();
        match &result {
            Ok(()) => {
                self.in_flight = true;
                self.submitted += 1;
            }
            Err(e) => {
                // Not submitted: the batch is lost; release what it used.
                self.keep_alive.clear();
                self.arena.reset();
                self.fail_if_launch(e);
            }
        }
        result
    }

    /// Waits for the batch in flight and releases what it used (but not
    /// the staging arena, which a batch being prepared may already use).
    fn wait_in_flight(&mut self) -> Result<()> {
        self.in_flight = false;
        let result = self.wait_batch();
        self.completed = self.submitted;
        self.keep_alive.clear();
        if let Err(e) = &result {
            self.fail_if_launch(e);
        }
        result
    }

    fn fail_if_launch(&mut self, e: &Error) {
        if matches!(e, Error::LaunchFailed(_)) {
            self.failed = Some(e.clone());
        }
    }

    fn submit_batch(&mut self) -> Result<()> {
        let d = &self.device.raw;
        let to_host = vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(vk::AccessFlags::HOST_READ);
        let cmds = [self.cmd];
        let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
        // SAFETY: `cmd` is recording and owned by us; the queue is used only
        // under the context lock that guards this stream; the fence is unsignaled.
        unsafe {
            d.cmd_pipeline_barrier(
                self.cmd,
                vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                &[to_host],
                &[],
                &[],
            );
            d.end_command_buffer(self.cmd).map_err(map_create)?;
            d.queue_submit(self.device.queue, &submit, self.fence).map_err(map_queue)?;
        }
        Ok(())
    }

    fn wait_batch(&mut self) -> Result<()> {
        let d = &self.device.raw;
        // SAFETY: the fence belongs to this stream and was submitted with
        // the batch in flight; the queue is used only under the context lock.
        unsafe {
            let waited = d.wait_for_fences(&[self.fence], true, u64::MAX).map_err(map_queue);
            if let Err(e) = waited {
                // Do not reuse resources the device may still touch.
                let _ = d.queue_wait_idle(self.device.queue);
                return Err(match e {
                    Error::LaunchFailed(m) => Error::LaunchFailed(m),
                    other => other,
                });
            }
            d.reset_fences(&[self.fence]).map_err(map_queue)?;
        }
        Ok(())
    }
}
