//! The output thread's end of the shadow: after production's verdict went
//! to the line, a frame due to the shadow is handed over in a free
//! `ShadowRecord` (never waiting: no free record is a skipped frame), and
//! the shadow's verdict comes back for the frame's result line.
//!
//! What moves, per frame handed over:
//! - host path: the preprocessed tensors, swapped with the record's (equal
//!   sizes, so the work record goes back to preprocess with buffers it
//!   overwrites anyway): no copy;
//! - device path (the tensors are on the GPU): the frame's pixels, copied
//!   on the host by the device thread for frames due to the shadow only
//!   (`PixelDemand::set_shadow_every`), preprocessed again on the CPU by
//!   the shadow thread;
//! - both: production's mask (copied: the archive may keep the original)
//!   and, when there are any, the frame's pixels (for archiving a
//!   disagreement).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_channel::{Receiver, Sender};
use serde::Serialize;

use super::agreement::ShadowAgreement;
use crate::config::DecisionConfig;
use crate::decision::{Decision, Reason};
use crate::frame::{FramePixels, FrameWork, TensorGeometry};
use crate::json_line;
use crate::model_id::ModelIds;

/// One frame on its way to the shadow, and the shadow's own work record.
pub struct ShadowRecord {
    /// The shadow's work record: its tensors, logits, mask and decision inputs.
    pub(super) work: Box<FrameWork>,
    pub(super) production: Decision,
    pub(super) production_mask: Vec<f32>,
    pub(super) production_mask_valid: bool,
    /// Production's result line, for the archive of a disagreement.
    pub(super) production_line: String,
    pub(super) settings: DecisionConfig,
    /// Whether `work`'s tensors hold the frame (host path) or the shadow
    /// preprocesses `pixels` (device path).
    pub(super) tensors_ready: bool,
    pub(super) pixels: FramePixels,
}

impl ShadowRecord {
    pub(super) fn new(geometry: &TensorGeometry, settings: DecisionConfig) -> Box<Self> {
        Box::new(ShadowRecord {
            work: Box::new(FrameWork::new(geometry)),
            production: Decision::error(),
            production_mask: vec![0.0; geometry.mask_len()],
            production_mask_valid: false,
            production_line: String::with_capacity(512),
            settings,
            tensors_ready: false,
            pixels: FramePixels::default(),
        })
    }
}

/// The shadow's batches run on the records' own work records
/// (`infer::infer_batch` takes anything that lends one).
impl AsMut<FrameWork> for Box<ShadowRecord> {
    fn as_mut(&mut self) -> &mut FrameWork {
        &mut self.work
    }
}

/// What the shadow made of one frame.
#[derive(Debug, Clone)]
pub struct ShadowVerdict {
    pub seq: u64,
    /// Whose frame (`FrameMeta::camera`): with several cameras, `seq` alone
    /// names no frame.
    pub camera: crate::frame::CameraIndex,
    pub outcome: ShadowOutcome,
    pub models: Arc<ModelIds>,
}

#[derive(Debug, Clone)]
pub enum ShadowOutcome {
    Judged {
        decision: Decision,
        mask_iou: Option<f64>,
    },
    /// The shadow's engine failed on this frame.
    Failed(String),
}

/// The `"shadow"` object of a result line.
#[derive(Serialize)]
struct ShadowFields<'a> {
    shadow: ShadowObject<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum ShadowObject<'a> {
    Judged {
        verdict: &'static str,
        reason: &'static str,
        #[serde(serialize_with = "json_line::six_decimals")]
        defect_prob: Option<f64>,
        #[serde(serialize_with = "json_line::six_decimals")]
        mask_iou: Option<f64>,
        models: &'a ModelIds,
    },
    Failed {
        error: &'a str,
        models: &'a ModelIds,
    },
}

impl ShadowVerdict {
    /// The line's `"shadow":{...}`, appended to a finished result line.
    pub fn append_to(&self, line: &mut String) {
        let models = &self.models;
        let shadow = match &self.outcome {
            ShadowOutcome::Judged { decision, mask_iou } => ShadowObject::Judged {
                verdict: decision.verdict.as_str(),
                reason: decision.reason.as_str(),
                defect_prob: decision.defect_prob,
                mask_iou: *mask_iou,
                models,
            },
            ShadowOutcome::Failed(message) => ShadowObject::Failed {
                error: message,
                models,
            },
        };
        json_line::merge_into(line, &ShadowFields { shadow });
    }
}

/// What the shadow thread and the output thread share about whether frames
/// go to the shadow: `every` (0 while no shadow runs).
#[derive(Debug, Default)]
pub struct ShadowGate {
    every: AtomicU64,
}

impl ShadowGate {
    /// Frames whose `seq` is a multiple of `every` are due; 0 = none.
    pub fn set_every(&self, every: u64) {
        self.every.store(every, Ordering::Relaxed);
    }

    pub fn due(&self, seq: u64) -> bool {
        let every = self.every.load(Ordering::Relaxed);
        every > 0 && seq.is_multiple_of(every)
    }
}

/// The output thread's end.
pub struct ShadowHandoff {
    pub(super) gate: Arc<ShadowGate>,
    pub(super) free: Receiver<Box<ShadowRecord>>,
    pub(super) frames: Sender<Box<ShadowRecord>>,
    pub(super) verdicts: Receiver<ShadowVerdict>,
    pub(super) agreement: Arc<ShadowAgreement>,
    /// Host path: the work records carry the preprocessed tensors.
    pub(super) host_tensors: bool,
}

impl ShadowHandoff {
    /// Hands `work` to the shadow when it is due and production inspected
    /// it; `true` when handed (a verdict will come back for `work.meta.seq`).
    /// A due frame the shadow cannot take now is counted as skipped.
    pub fn offer(
        &self,
        work: &mut FrameWork,
        production: &Decision,
        settings: &DecisionConfig,
        line: &str,
    ) -> bool {
        if !self.gate.due(work.meta.seq) {
            return false;
        }
        // Only frames production judged are compared; a failed, dropped or
        // late frame has nothing to compare with.
        if work.error.is_some()
            || matches!(
                production.reason,
                Reason::Error | Reason::NotInspected | Reason::Late
            )
        {
            return false;
        }
        if !self.host_tensors && !work.pixels.valid {
            self.agreement.skipped();
            return false;
        }
        let Ok(mut record) = self.free.try_recv() else {
            self.agreement.skipped();
            return false;
        };
        let shadow = &mut record.work;
        shadow.reset(work.meta);
        if self.host_tensors {
            std::mem::swap(&mut shadow.seg_input, &mut work.seg_input);
            std::mem::swap(&mut shadow.cls_input, &mut work.cls_input);
        }
        record.tensors_ready = self.host_tensors;
        record.production_mask_valid = work.mask.len() == record.production_mask.len();
        if record.production_mask_valid {
            record.production_mask.copy_from_slice(&work.mask);
        }
        if work.pixels.valid {
            record.pixels.clone_from_pixels(&work.pixels);
        } else {
            record.pixels.valid = false;
        }
        record.production = *production;
        record.settings = *settings;
        record.production_line.clear();
        record.production_line.push_str(line);
        match self.frames.try_send(record) {
            Ok(()) => true,
            Err(_) => {
                // The shadow thread is gone (it ended with the run).
                self.agreement.skipped();
                false
            }
        }
    }

    /// The shadow's verdicts, in the order it judged (the order handed over).
    pub fn verdicts(&self) -> &Receiver<ShadowVerdict> {
        &self.verdicts
    }
}
