//! What the host path does with a batch the batcher (`batcher.rs`) gathered:
//! both models on every frame of it, in one engine run per model where the
//! engine batches, else frame by frame; and the counts of batches made.
//!
//! Invariants:
//! - a batch of one runs exactly as before batching (`infer_frame`), and a
//!   batch of N gives every frame the logits its own run would give (the
//!   parity tests check it per backend);
//! - a frame that already failed is skipped, and a failed run marks every
//!   frame of it (each then fails with `error`): one result per frame;
//! - the batch buffers grow to the largest batch once and are reused.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::backend::InferenceBackend;
use super::model_role::ModelRole;
use crate::frame::{FailedStage, FrameWork};
use crate::preprocess::{Preprocessor, logits_to_mask};

/// How the infer thread gathers frames into one engine run.
#[derive(Debug, Clone, Copy)]
pub struct BatchPolicy {
    /// Most frames per run (1: no batching).
    pub max_batch: usize,
    /// Longest to wait for more frames once one is taken (zero: never wait).
    pub wait: std::time::Duration,
}

/// Runs both models on a preprocessed frame. Skips frames that already failed;
/// a failure here marks the frame so it fails with reason `error`.
pub fn infer_frame(
    backend: &mut dyn InferenceBackend,
    preprocessor: &Preprocessor,
    mask_class: usize,
    work: &mut FrameWork,
) {
    if work.error.is_some() {
        return;
    }
    let started = Instant::now();
    if let Err(e) = backend.run(
        ModelRole::Segmentation,
        1,
        &work.seg_input,
        &mut work.seg_logits,
    ) {
        work.error = Some((FailedStage::Segment, e.to_string()));
        return;
    }
    let classes = work.seg_logits.len() / work.mask.len().max(1);
    work.mask_pixels = logits_to_mask(&work.seg_logits, classes, mask_class, &mut work.mask);
    preprocessor.mask_to_classifier_channel(&work.mask, &mut work.cls_input);
    let segmented = Instant::now();
    work.timings.segment_ms = (segmented - started).as_secs_f64() * 1e3;
    if let Err(e) = backend
        .run(
            ModelRole::Classifier,
            1,
            &work.cls_input,
            &mut work.cls_logits,
        )
        .and_then(|()| super::model_io::check_classifier_output(&work.cls_logits))
    {
        work.error = Some((FailedStage::Classify, e.to_string()));
    }
    work.timings.classify_ms = segmented.elapsed().as_secs_f64() * 1e3;
}

/// How the infer thread batched: engine runs and the frames in them
/// (the run summary and `bench` report the mean batch).
#[derive(Debug, Default)]
pub struct BatchCounts {
    runs: AtomicU64,
    frames: AtomicU64,
}

impl BatchCounts {
    pub fn record(&self, made: BatchRuns) {
        self.runs.fetch_add(made.runs as u64, Ordering::Relaxed);
        self.frames.fetch_add(made.frames as u64, Ordering::Relaxed);
    }

    /// (engine runs, frames judged in them).
    pub fn snapshot(&self) -> (u64, u64) {
        (
            self.runs.load(Ordering::Relaxed),
            self.frames.load(Ordering::Relaxed),
        )
    }
}

/// Host buffers for a batch's inputs and logits, back to back.
#[derive(Default)]
pub struct BatchBuffers {
    input: Vec<f32>,
    logits: Vec<f32>,
    /// Indices of a batch's frames that have not failed.
    ready: Vec<usize>,
}

impl BatchBuffers {
    /// The buffers sized for `frames` frames of `input_len` in and
    /// `output_len` out (grown once, never shrunk).
    fn sized(
        &mut self,
        frames: usize,
        input_len: usize,
        output_len: usize,
    ) -> (&mut [f32], &mut [f32]) {
        let (i, o) = (frames * input_len, frames * output_len);
        if self.input.len() < i {
            self.input.resize(i, 0.0);
        }
        if self.logits.len() < o {
            self.logits.resize(o, 0.0);
        }
        (&mut self.input[..i], &mut self.logits[..o])
    }
}

/// Runs both models on every frame of `works` that has not failed: in one
/// run per model where the engine batches, else one frame after another.
/// A failed run marks every frame of it (each then fails with `error`).
/// Returns the sizes of the engine runs made (one per frame without batching).
pub fn infer_batch<W: AsMut<FrameWork>>(
    backend: &mut dyn InferenceBackend,
    preprocessor: &Preprocessor,
    mask_class: usize,
    works: &mut [W],
    buffers: &mut BatchBuffers,
) -> BatchRuns {
    // The index list is the buffers' own: no allocation per frame.
    let mut ready = std::mem::take(&mut buffers.ready);
    ready.clear();
    ready.extend((0..works.len()).filter(|&i| works[i].as_mut().error.is_none()));
    let mut made = BatchRuns::default();
    if ready.len() <= 1 || backend.max_batch() <= 1 {
        for work in works.iter_mut() {
            infer_frame(backend, preprocessor, mask_class, work.as_mut());
        }
        made = BatchRuns {
            runs: ready.len(),
            frames: ready.len(),
        };
    } else {
        for chunk in ready.chunks(backend.max_batch()) {
            run_chunk(backend, preprocessor, mask_class, works, chunk, buffers);
            made.runs += 1;
            made.frames += chunk.len();
        }
    }
    buffers.ready = ready;
    made
}

/// Engine runs made for a batch, and the frames in them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BatchRuns {
    pub runs: usize,
    pub frames: usize,
}

/// One engine run per model for the frames `chunk` (indices into `works`).
fn run_chunk<W: AsMut<FrameWork>>(
    backend: &mut dyn InferenceBackend,
    preprocessor: &Preprocessor,
    mask_class: usize,
    works: &mut [W],
    chunk: &[usize],
    buffers: &mut BatchBuffers,
) {
    let frames = chunk.len();
    let started = Instant::now();
    let first = works[chunk[0]].as_mut();
    let (seg_in, seg_out) = (first.seg_input.len(), first.seg_logits.len());
    let (cls_in, cls_out) = (first.cls_input.len(), first.cls_logits.len());
    let (input, logits) = buffers.sized(frames, seg_in, seg_out);
    for (slot, &i) in input.chunks_exact_mut(seg_in).zip(chunk) {
        slot.copy_from_slice(&works[i].as_mut().seg_input);
    }
    if let Err(e) = backend.run(ModelRole::Segmentation, frames, input, logits) {
        mark(works, chunk, FailedStage::Segment, &e.to_string());
        return;
    }
    for (out, &i) in logits.chunks_exact(seg_out).zip(chunk) {
        let work = works[i].as_mut();
        work.seg_logits.copy_from_slice(out);
        let classes = work.seg_logits.len() / work.mask.len().max(1);
        work.mask_pixels = logits_to_mask(&work.seg_logits, classes, mask_class, &mut work.mask);
        preprocessor.mask_to_classifier_channel(&work.mask, &mut work.cls_input);
    }
    let segmented = Instant::now();
    let (input, logits) = buffers.sized(frames, cls_in, cls_out);
    for (slot, &i) in input.chunks_exact_mut(cls_in).zip(chunk) {
        slot.copy_from_slice(&works[i].as_mut().cls_input);
    }
    let classified = backend.run(ModelRole::Classifier, frames, input, logits);
    let (segment_ms, classify_ms) = (
        (segmented - started).as_secs_f64() * 1e3,
        segmented.elapsed().as_secs_f64() * 1e3,
    );
    // Each frame's stage times are its batch's: what the frame waited.
    for (out, &i) in logits.chunks_exact(cls_out).zip(chunk) {
        let work = works[i].as_mut();
        work.timings.segment_ms = segment_ms;
        work.timings.classify_ms = classify_ms;
        let checked = classified
            .as_ref()
            .map_err(ToString::to_string)
            .and_then(|()| {
                work.cls_logits.copy_from_slice(out);
                super::model_io::check_classifier_output(&work.cls_logits)
                    .map_err(|e| e.to_string())
            });
        if let Err(message) = checked {
            work.error = Some((FailedStage::Classify, message));
        }
    }
}

fn mark<W: AsMut<FrameWork>>(works: &mut [W], chunk: &[usize], stage: FailedStage, message: &str) {
    for &i in chunk {
        works[i].as_mut().error = Some((stage, message.to_string()));
    }
}
