//! A camera with a cavity layout: its frame's cavities come as work
//! records of their own (`frame::CavityTag`), one after another; they are
//! gathered here into the cycle, each decided on its own, and the cycle
//! goes out as one result (`crate::cycle`). A cycle cut short (which the
//! stages before never make: a frame's records travel together) fails its
//! missing cavities with `error`, so no cavity is passed unjudged.

use std::sync::Arc;
use std::time::Instant;

use super::frame_spans::FrameSpans;
use super::pending::PendingLines;
use super::results_file::OutputError;
use super::stage::{OutputCamera, OutputStage};
use crate::cycle::CycleVerdicts;
use crate::decision::{self, Decision, Reason};
use crate::frame::{CameraIndex, FrameWork};

/// The cycle being gathered and the verdicts it is decided into, both
/// reused: a cycle allocates nothing once the first has grown them (the
/// verdicts again only while an output still holds the last cycle's).
#[derive(Default)]
pub struct CycleGather {
    // The records travel boxed through the stage channels and go back so.
    #[allow(clippy::vec_box)]
    records: Vec<Box<FrameWork>>,
    verdicts: Arc<CycleVerdicts>,
}

impl CycleGather {
    /// Room for cycles of up to `cavities` judged cavities.
    pub fn with_capacity(cavities: usize) -> CycleGather {
        CycleGather {
            records: Vec::with_capacity(cavities),
            verdicts: Arc::new(CycleVerdicts::with_capacity(cavities)),
        }
    }

    /// The verdicts to fill for the next cycle: the last ones' when no
    /// output holds them any more.
    fn fresh(&mut self) -> &mut CycleVerdicts {
        if Arc::get_mut(&mut self.verdicts).is_none() {
            let room = self.verdicts.cavities().len();
            self.verdicts = Arc::new(CycleVerdicts::with_capacity(room));
        }
        Arc::get_mut(&mut self.verdicts).expect("a fresh Arc has one owner")
    }

    /// A cycle of `camera` that no model judged: every judged cavity fails
    /// with `reason`. `None` for a camera without a layout.
    pub fn failed(
        &mut self,
        cameras: &[OutputCamera],
        camera: CameraIndex,
        reason: Reason,
    ) -> Option<Arc<CycleVerdicts>> {
        let layout = cameras.get(usize::from(camera))?.layout.as_ref()?;
        self.fresh().fill_failed(layout, reason);
        Some(Arc::clone(&self.verdicts))
    }
}

impl OutputStage {
    /// Takes one cavity's record; at the cycle's last, decides and writes
    /// the cycle. Returns the result lines written (0 or 1, 2 after a
    /// cycle cut short).
    pub(super) fn gather_cavity(
        &mut self,
        work: Box<FrameWork>,
        line: &mut String,
        pending: &mut PendingLines,
        frame_spans: &mut FrameSpans,
    ) -> Result<u64, OutputError> {
        let mut written = 0;
        let same_frame =
            |w: &FrameWork| (w.meta.camera, w.meta.seq) == (work.meta.camera, work.meta.seq);
        if self.cycles.records.first().is_some_and(|w| !same_frame(w)) {
            written += self.end_cut_cycle(line, pending, frame_spans)?;
        }
        let last = work.cavity.is_some_and(|t| t.is_last());
        self.cycles.records.push(work);
        if last {
            self.finish_cycle(line, pending, frame_spans)?;
            written += 1;
        }
        Ok(written)
    }

    /// Writes a cycle still gathered (before a message of another frame,
    /// and at the end): its missing cavities fail with `error`.
    pub(super) fn end_cut_cycle(
        &mut self,
        line: &mut String,
        pending: &mut PendingLines,
        frame_spans: &mut FrameSpans,
    ) -> Result<u64, OutputError> {
        let Some(first) = self.cycles.records.first() else {
            return Ok(0);
        };
        log::error!(target: "sealcheck::verdict", camera = self.camera_label(first.meta.camera), seq = first.meta.seq, cavities = self.cycles.records.len();
            "a cycle's cavities did not all arrive: the missing ones fail with error");
        self.finish_cycle(line, pending, frame_spans)?;
        Ok(1)
    }

    /// Decides each gathered cavity, writes the cycle as one result and
    /// sends the records back.
    fn finish_cycle(
        &mut self,
        line: &mut String,
        pending: &mut PendingLines,
        frame_spans: &mut FrameSpans,
    ) -> Result<(), OutputError> {
        let mut records = std::mem::take(&mut self.cycles.records);
        let meta = records[0].meta;
        let camera = usize::from(meta.camera);
        let Some(layout) = self.cameras.get(camera).and_then(|c| c.layout.clone()) else {
            // A tagged record of a camera without a layout: never made.
            unreachable!("cavity records come only from cameras with a layout");
        };
        let thresholds = *self.settings.decision_of(meta.camera);
        let defect_class = self.defect_class;
        let verdicts = self.cycles.fresh();
        verdicts.start(&layout);
        let mut timings = [0.0f64; 3];
        for number in layout.enabled() {
            let record = records
                .iter()
                .find(|w| w.cavity.is_some_and(|t| t.number == number));
            let decision = match record {
                Some(w) => {
                    let t = &w.timings;
                    // Crops are preprocessed one after another, then run in
                    // one batch: the cycle waited for their sum and the batch.
                    timings[0] += t.preprocess_ms;
                    timings[1] = timings[1].max(t.segment_ms);
                    timings[2] = timings[2].max(t.classify_ms);
                    decision::decide(w, defect_class, &thresholds)
                }
                None => Decision::error(),
            };
            verdicts.push(number, decision);
        }
        let overall = verdicts.overall();
        let verdicts = Arc::clone(&self.cycles.verdicts);
        let failed = records.iter().find_map(|w| {
            let cavity = w.cavity.map_or(0, |t| t.number);
            w.error
                .as_ref()
                .map(|(stage, message)| (cavity, *stage, message))
        });
        if let Some((cavity, stage, message)) = failed {
            log::warn!(target: "sealcheck::verdict", camera = self.camera_label(meta.camera), seq = meta.seq, cavity = cavity, stage = stage.as_str(), error = message.as_str();
                "cavity {cavity} failed in {}: {message}", stage.as_str());
        }
        if let Some(models) = records.iter().find_map(|w| w.models.as_ref()) {
            self.models = Some(Arc::clone(models));
        }
        let now = Instant::now();
        if meta.seq >= self.measure_from_seq {
            frame_spans.record(&meta, &records[0].timings.stamps, now);
        }
        let total = now.duration_since(meta.captured_instant).as_secs_f64() * 1e3;
        let latencies = [timings[0], timings[1], timings[2], total];
        self.emit(
            line,
            pending,
            &meta,
            &overall,
            Some(&latencies),
            Some(&mut records[0]),
            Some(&verdicts),
        )?;
        for record in records.drain(..) {
            // The preprocess stage may already be gone at the end of a run.
            let _ = self.recycle.send(record);
        }
        self.cycles.records = records;
        Ok(())
    }
}
