//! `Stream` (one non-default CUDA stream: work queued on it runs in order, and
//! concurrently with other streams) and `Event` (a marker in a stream that the
//! host can wait for, and that times the GPU).
//!
//! Queuing a copy or a memset is `unsafe`: the call returns before the GPU
//! touches the memory, so the caller must keep it alive (and host memory
//! untouched) until the stream has passed that point, which an `Event`
//! recorded after the work tells.

use std::sync::Arc;

use cudarc::driver::result::{self, stream::StreamKind};
use cudarc::driver::sys::{CUevent, CUevent_flags, CUstream};

use super::context::GpuContext;
use super::error::GpuError;
use super::memory::{DeviceBuffer, DeviceValue, PinnedBuffer};

#[derive(Debug)]
pub struct Stream {
    gpu: Arc<GpuContext>,
    raw: CUstream,
}

// SAFETY: a CUstream handle may be used from any thread once its context is
// current, which every method ensures (`bind`). Not Sync: two threads queuing
// on one stream would interleave their work unpredictably.
unsafe impl Send for Stream {}

impl Stream {
    /// A new stream that does not synchronize with the legacy default
    /// stream, at the context's greatest priority: every stream sealcheck
    /// makes carries the frame path, and a kernel of another stream in the
    /// process (a `[shadow]` engine's, made by its library at the default,
    /// least priority) then waits for free multiprocessors behind the
    /// frame's kernels instead of beside them.
    pub fn new(gpu: &Arc<GpuContext>) -> Result<Self, GpuError> {
        // Both calls need a current context.
        gpu.bind()?;
        let (_least, greatest) = result::stream::get_priority_range()
            .map_err(GpuError::driver("cuCtxGetStreamPriorityRange"))?;
        let raw = result::stream::create_with_priority(StreamKind::NonBlocking, greatest)
            .map_err(GpuError::driver("cuStreamCreateWithPriority"))?;
        Ok(Stream {
            gpu: Arc::clone(gpu),
            raw,
        })
    }

    pub fn gpu(&self) -> &Arc<GpuContext> {
        &self.gpu
    }

    /// The raw `CUstream`, for libraries that queue on the same stream
    /// (TensorRT's `enqueueV3` takes it as a `cudaStream_t`).
    pub fn raw(&self) -> CUstream {
        self.raw
    }

    /// Waits until everything queued so far has run.
    pub fn synchronize(&self) -> Result<(), GpuError> {
        self.gpu.bind()?;
        // SAFETY: the stream is live while `self` is.
        unsafe { result::stream::synchronize(self.raw) }
            .map_err(GpuError::driver("cuStreamSynchronize"))
    }

    /// Makes the work queued on this stream from now on wait until `event`'s
    /// last record has completed (on another stream, typically), without the
    /// host waiting.
    pub fn wait_for(&self, event: &Event) -> Result<(), GpuError> {
        self.gpu.bind()?;
        debug_assert!(
            Arc::ptr_eq(&self.gpu, &event.gpu),
            "event and stream of different contexts"
        );
        // SAFETY: both are live and of the same context (checked in debug
        // builds); an event never recorded counts as complete.
        unsafe {
            result::stream::wait_event(
                self.raw,
                event.raw,
                cudarc::driver::sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .map_err(GpuError::driver("cuStreamWaitEvent"))
    }

    /// Queues a copy of `src` (host memory) into `dst` starting at value `at`.
    ///
    /// # Safety
    /// `src` must stay valid and unwritten, and `dst` alive, until the stream
    /// has passed this copy. For the copy to be asynchronous, `src` must be
    /// page-locked (a `PinnedBuffer`'s slice).
    pub unsafe fn upload<T: DeviceValue>(
        &self,
        src: &[T],
        dst: &DeviceBuffer<T>,
        at: usize,
    ) -> Result<(), GpuError> {
        check_range("upload destination", at, src.len(), dst.len())?;
        self.gpu.bind()?;
        // SAFETY: the destination range lies inside `dst` (checked); the
        // caller keeps both sides alive and `src` unwritten until the stream
        // passes the copy.
        unsafe { result::memcpy_htod_async(dst.device_ptr_at(at), src, self.raw) }
            .map_err(GpuError::driver("cuMemcpyHtoDAsync"))
    }

    /// Queues a copy of `len` values of `src` from value `at` into the start of `dst`.
    ///
    /// # Safety
    /// `dst` must not be read or written by the host, and `src` must stay
    /// alive, until the stream has passed this copy.
    pub unsafe fn download<T: DeviceValue>(
        &self,
        src: &DeviceBuffer<T>,
        at: usize,
        len: usize,
        dst: &mut PinnedBuffer<T>,
    ) -> Result<(), GpuError> {
        check_range("download source", at, len, src.len())?;
        check_range("download destination", 0, len, dst.len())?;
        self.gpu.bind()?;
        // SAFETY: both ranges are inside their buffers (checked); the caller
        // keeps them alive and `dst` untouched until the stream passes the copy.
        unsafe {
            result::memcpy_dtoh_async(
                &mut dst.as_mut_slice()[..len],
                src.device_ptr_at(at),
                self.raw,
            )
        }
        .map_err(GpuError::driver("cuMemcpyDtoHAsync"))
    }

    /// Queues a copy of the first `len` values of `src` to the start of `dst`.
    ///
    /// # Safety
    /// Both buffers must stay alive until the stream has passed this copy.
    pub unsafe fn copy<T: DeviceValue>(
        &self,
        src: &DeviceBuffer<T>,
        dst: &DeviceBuffer<T>,
        len: usize,
    ) -> Result<(), GpuError> {
        check_range("copy source", 0, len, src.len())?;
        check_range("copy destination", 0, len, dst.len())?;
        self.gpu.bind()?;
        // SAFETY: both ranges are inside their buffers; the caller keeps them alive.
        unsafe {
            result::memcpy_dtod_async(
                dst.device_ptr(),
                src.device_ptr(),
                len * size_of::<T>(),
                self.raw,
            )
        }
        .map_err(GpuError::driver("cuMemcpyDtoDAsync"))
    }

    /// Queues filling every byte of `dst` with `value` (0xFF poisons f32 and
    /// f16 buffers with NaN).
    ///
    /// # Safety
    /// `dst` must stay alive until the stream has passed this fill.
    pub unsafe fn fill_bytes<T: DeviceValue>(
        &self,
        dst: &DeviceBuffer<T>,
        value: u8,
    ) -> Result<(), GpuError> {
        self.gpu.bind()?;
        // SAFETY: the whole allocation of `dst`; the caller keeps it alive.
        unsafe { result::memset_d8_async(dst.device_ptr(), value, dst.bytes(), self.raw) }
            .map_err(GpuError::driver("cuMemsetD8Async"))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Err(e) = self.gpu.bind() {
            self.gpu
                .record_drop_error("binding the context to destroy a stream", e);
            return;
        }
        // SAFETY: the stream is live and this is its last use. Work still
        // queued completes; the driver releases the stream afterwards.
        if let Err(e) = unsafe { result::stream::destroy(self.raw) } {
            self.gpu.record_drop_error("cuStreamDestroy", e);
        }
    }
}

fn check_range(what: &'static str, at: usize, len: usize, capacity: usize) -> Result<(), GpuError> {
    match at.checked_add(len) {
        Some(end) if end <= capacity => Ok(()),
        _ => Err(GpuError::BufferLength {
            buffer: what,
            len: capacity,
            expected: at.saturating_add(len),
        }),
    }
}

/// A point in a stream's work that the host can wait for.
#[derive(Debug)]
pub struct Event {
    gpu: Arc<GpuContext>,
    raw: CUevent,
}

// SAFETY: a CUevent handle may be used from any thread once its context is
// current, which every method ensures.
unsafe impl Send for Event {}

impl Event {
    /// `timing`: whether `elapsed_ms` will be asked of it (timing events cost
    /// a little more to record).
    pub fn new(gpu: &Arc<GpuContext>, timing: bool) -> Result<Self, GpuError> {
        let flags = if timing {
            CUevent_flags::CU_EVENT_DEFAULT
        } else {
            CUevent_flags::CU_EVENT_DISABLE_TIMING
        };
        // cuEventCreate needs a current context.
        gpu.bind()?;
        let raw = result::event::create(flags).map_err(GpuError::driver("cuEventCreate"))?;
        Ok(Event {
            gpu: Arc::clone(gpu),
            raw,
        })
    }

    /// Marks the current end of `stream`'s queued work.
    pub fn record(&mut self, stream: &Stream) -> Result<(), GpuError> {
        self.gpu.bind()?;
        debug_assert!(
            Arc::ptr_eq(&self.gpu, stream.gpu()),
            "event and stream of different contexts"
        );
        // SAFETY: both are live; the stream belongs to this event's context
        // (both were made from the same GpuContext, checked in debug builds).
        unsafe { result::event::record(self.raw, stream.raw()) }
            .map_err(GpuError::driver("cuEventRecord"))
    }

    /// Whether the work before the last `record` has run (`cuEventQuery`;
    /// an event never recorded is complete). Never blocks.
    pub fn is_complete(&self) -> Result<bool, GpuError> {
        self.gpu.bind()?;
        // SAFETY: the event is live.
        match unsafe { result::event::query(self.raw) } {
            Ok(()) => Ok(true),
            Err(e) if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            Err(e) => Err(GpuError::driver("cuEventQuery")(e)),
        }
    }

    /// Blocks until the work before the last `record` has run.
    pub fn synchronize(&self) -> Result<(), GpuError> {
        self.gpu.bind()?;
        // SAFETY: the event is live.
        unsafe { result::event::synchronize(self.raw) }
            .map_err(GpuError::driver("cuEventSynchronize"))
    }

    /// GPU milliseconds from `start` to `self`; both must be timing events,
    /// recorded and complete.
    pub fn elapsed_ms_since(&self, start: &Event) -> Result<f32, GpuError> {
        self.gpu.bind()?;
        // SAFETY: both events are live; the driver reports an error (not UB)
        // if either was not created with timing or has not completed.
        unsafe { result::event::elapsed(start.raw, self.raw) }
            .map_err(GpuError::driver("cuEventElapsedTime"))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if let Err(e) = self.gpu.bind() {
            self.gpu
                .record_drop_error("binding the context to destroy an event", e);
            return;
        }
        // SAFETY: the event is live and this is its last use; destroying an
        // incomplete event is allowed (released once complete).
        if let Err(e) = unsafe { result::event::destroy(self.raw) } {
            self.gpu.record_drop_error("cuEventDestroy", e);
        }
    }
}
