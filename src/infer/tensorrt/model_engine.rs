//! One TensorRT model as the backend holds it: its engine, execution
//! context and IO, its own device buffers and page-locked staging (host
//! mode), and the batch its input shape is set to.

use std::path::PathBuf;

use super::engine::LoadedEngine;
use super::engine_cache::CacheOutcome;
use super::error::TrtError;
use crate::gpu::{DeviceBuffer, DeviceTensor, PinnedBuffer, Stream, TensorElement};
use crate::infer::error::InferError;
use crate::infer::model_io::{BatchDim, ModelIo, ModelRole};

/// The buffers of a host-mode batch: `frames` frames of the model's IO.
pub(super) fn check_batch_buffers(
    role: ModelRole,
    io: &ModelIo,
    frames: usize,
    input: &[f32],
    logits_out: &[f32],
) -> Result<(), InferError> {
    for (buffer, expected, actual) in [
        ("input", frames * io.input_len(), input.len()),
        ("logits", frames * io.output_len(), logits_out.len()),
    ] {
        if expected != actual {
            return Err(InferError::BufferLength {
                role,
                buffer,
                expected,
                actual,
            });
        }
    }
    Ok(())
}

/// One model's engine, context and buffers.
pub(super) struct ModelEngine {
    pub(super) role: ModelRole,
    pub(super) io: ModelIo,
    pub(super) engine_path: PathBuf,
    pub(super) outcome: CacheOutcome,
    pub(super) input_element: TensorElement,
    pub(super) output_element: TensorElement,
    pub(super) loaded: LoadedEngine,
    /// Most frames one run takes: the profile's maximum for a dynamic
    /// batch, else 1. The own buffers hold that many frames.
    pub(super) max_frames: usize,
    /// Frames the tensors the context points at hold (at most `max_frames`).
    pub(super) capacity: usize,
    /// The input shape handed to `setInputShape`, its batch the frames of
    /// the last run (dynamic batch only; reused, so a change allocates nothing).
    pub(super) batch_shape: Vec<i64>,
    /// Frames the context's input shape was last set to (0: not set yet).
    pub(super) shape_frames: usize,
    /// This backend's own device tensors (host mode), f32, `max_frames` frames.
    pub(super) input: DeviceBuffer<f32>,
    pub(super) output: DeviceBuffer<f32>,
    /// Page-locked staging, so copies are asynchronous and need no allocation.
    pub(super) host_input: PinnedBuffer<f32>,
    pub(super) host_output: PinnedBuffer<f32>,
    /// Whether the engine currently points at `input`/`output`.
    pub(super) bound_to_own: bool,
}

impl ModelEngine {
    /// # Safety
    /// `input` and `output` must hold `capacity` frames of the engine's input
    /// and output tensors and stay valid while work that uses them is queued.
    pub(super) unsafe fn bind(
        &mut self,
        input: u64,
        output: u64,
        capacity: usize,
    ) -> Result<(), TrtError> {
        // Until both addresses are set, no run may count on any capacity.
        self.capacity = 0;
        self.bound_to_own = false;
        // SAFETY: forwarded from this function's contract.
        unsafe {
            self.loaded.set_tensor_address(&self.io.input_name, input)?;
            self.loaded
                .set_tensor_address(&self.io.output_name, output)?;
        }
        self.capacity = capacity;
        Ok(())
    }

    pub(super) fn bind_own(&mut self) -> Result<(), TrtError> {
        if !self.bound_to_own {
            let (input, output) = (self.input.device_ptr(), self.output.device_ptr());
            // SAFETY: our own buffers, sized for `max_frames` frames of the
            // engine's IO at open, live as long as the context (same owner;
            // the backend's Drop waits for the stream first).
            unsafe { self.bind(input, output, self.max_frames)? };
            self.bound_to_own = true;
        }
        Ok(())
    }

    /// A device tensor for `frames` frames: exactly that many for a dynamic
    /// batch, at least one frame for a batch of one (it uses the first).
    pub(super) fn check_device_tensor(
        &self,
        which: &str,
        tensor: &DeviceTensor,
        element: TensorElement,
        frame_len: usize,
        frames: usize,
    ) -> Result<(), TrtError> {
        let (fits, wanted) = match self.io.batch {
            BatchDim::Dynamic => (
                tensor.len == frames * frame_len,
                format!("{frames} frame(s) of {frame_len}"),
            ),
            BatchDim::One => (
                tensor.len >= frame_len,
                format!("at least one frame of {frame_len}"),
            ),
        };
        if tensor.element != element || !fits {
            return Err(self.io_error(format!(
                "the engine's {which} wants {wanted} {element:?} values, the device tensor offered is {} {:?}",
                tensor.len, tensor.element
            )));
        }
        Ok(())
    }

    pub(super) fn io_error(&self, problem: String) -> TrtError {
        TrtError::EngineIo {
            role: self.role,
            engine: self.engine_path.clone(),
            problem,
        }
    }

    /// Makes the next enqueue run `frames` frames: checked against what the
    /// bound tensors hold, and for a dynamic batch the input shape set when
    /// it differs from the last run's (a per-frame path that keeps its
    /// batch size makes no TensorRT call here).
    pub(super) fn set_frames(&mut self, frames: usize) -> Result<(), TrtError> {
        if frames == 0 || frames > self.capacity {
            return Err(self.io_error(format!(
                "a run of {frames} frame(s) was asked for; the engine takes 1 to {} on the tensors it is bound to{}",
                self.capacity,
                match self.io.batch {
                    BatchDim::One => " (its model's batch is fixed at one)",
                    BatchDim::Dynamic => "",
                }
            )));
        }
        if self.io.batch == BatchDim::Dynamic && frames != self.shape_frames {
            // Unknown until TensorRT took the new shape.
            self.shape_frames = 0;
            self.batch_shape[0] = i64::try_from(frames).unwrap_or(i64::MAX);
            self.loaded
                .set_input_shape(&self.io.input_name, &self.batch_shape)?;
            self.shape_frames = frames;
        }
        Ok(())
    }

    /// Queues the engine for the first `frames` frames of the bound tensors.
    ///
    /// # Safety
    /// As `LoadedEngine::enqueue`: a live stream, and bound tensors valid
    /// until the stream has run this work (their size is checked here).
    pub(super) unsafe fn enqueue(&mut self, stream: usize, frames: usize) -> Result<(), TrtError> {
        self.set_frames(frames)?;
        // SAFETY: the bound tensors hold `frames` frames (set_frames checked
        // it against their capacity); the rest is the caller's contract.
        unsafe { self.loaded.enqueue(stream) }
    }

    /// Host mode: one synchronous run of `frames` frames (inputs and
    /// outputs back to back; lengths checked by the caller). No allocation:
    /// all buffers exist.
    pub(super) fn run_host(
        &mut self,
        stream: &Stream,
        frames: usize,
        input: &[f32],
        logits_out: &mut [f32],
    ) -> Result<(), TrtError> {
        self.bind_own()?;
        let (in_len, out_len) = (input.len(), logits_out.len());
        if frames == 0
            || frames > self.max_frames
            || in_len > self.host_input.len()
            || out_len > self.host_output.len()
        {
            return Err(self.io_error(format!(
                "a host run of {frames} frame(s) ({in_len} -> {out_len} values) does not fit the engine's \
                 buffers of {} frame(s)",
                self.max_frames
            )));
        }
        self.host_input.as_mut_slice()[..in_len].copy_from_slice(input);
        // SAFETY: the pinned and device buffers are owned by `self` and not
        // touched by the host until `synchronize` below returns; the context
        // is bound to `input`/`output` (bind_own), sized for `max_frames`
        // frames, of which `frames` are used (checked above and in enqueue).
        unsafe {
            stream
                .upload(&self.host_input.as_slice()[..in_len], &self.input, 0)
                .map_err(TrtError::gpu("copy the input to the GPU"))?;
            self.enqueue(stream.raw() as usize, frames)?;
            stream
                .download(&self.output, 0, out_len, &mut self.host_output)
                .map_err(TrtError::gpu("copy the output from the GPU"))?;
        }
        stream
            .synchronize()
            .map_err(TrtError::gpu("wait for the engine"))?;
        logits_out.copy_from_slice(&self.host_output.as_slice()[..out_len]);
        Ok(())
    }
}
