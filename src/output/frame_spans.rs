//! Where a frame's time goes on the host, over a run: the spans between the
//! hand-overs its path stamped (`frame::HostStamps`), logged once at the
//! end beside the device stage's GPU spans.
//!
//! ```text
//! copy     capture: the frame's arrival -> its bytes in the ring slot
//! ring     in the slot -> its stage took it (waits for the stage's thread)
//! staging  taken -> its batch put on the GPU (gathering the batch, queuing the upload)
//! gpu      put on the GPU -> results on the host (the GPU's work, the batches before it, the wait)
//! output   results on the host -> the output stage has it
//! total    arrival -> the output stage has it (the result line's latency_ms.total)
//! ```

use std::time::Instant;

use super::result_line::ms_between;
use crate::frame::{CameraIndex, FrameMeta, HostStamps};
use crate::stats::SpanHistogram;

const NAMES: [&str; 6] = ["copy", "ring", "staging", "gpu", "output", "total"];
/// The slowest frames kept whole, to say which span made them slow.
const WORST: usize = 5;

pub struct FrameSpans {
    spans: SpanHistogram<6>,
    /// The `WORST` frames of the longest total, slowest first: (camera, seq, spans).
    worst: [(CameraIndex, u64, [f64; 6]); WORST],
}

impl Default for FrameSpans {
    fn default() -> Self {
        FrameSpans {
            spans: SpanHistogram::new(NAMES),
            worst: [(0, 0, [0.0; 6]); WORST],
        }
    }
}

impl FrameSpans {
    /// A frame the output stage got at `now`; one whose path did not stamp
    /// every hand-over is left out.
    pub fn record(&mut self, meta: &FrameMeta, stamps: &HostStamps, now: Instant) {
        let (Some(in_slot), Some(taken), Some(launched), Some(done)) =
            (stamps.in_slot, stamps.taken, stamps.launched, stamps.done)
        else {
            return;
        };
        let ms = ms_between;
        let arrived = meta.captured_instant;
        let spans = [
            ms(arrived, in_slot),
            ms(in_slot, taken),
            ms(taken, launched),
            ms(launched, done),
            ms(done, now),
            ms(arrived, now),
        ];
        self.spans.record(spans);
        if let Some(at) = self.worst.iter().position(|(_, _, w)| spans[5] > w[5]) {
            self.worst[at..].rotate_right(1);
            self.worst[at] = (meta.camera, meta.seq, spans);
        }
    }

    pub fn log(&self) {
        let Some(spans) = self.spans.summary() else {
            return;
        };
        let mut worst = String::new();
        for (camera, seq, w) in self.worst.iter().filter(|(_, _, w)| w[5] > 0.0) {
            // The camera by index ([cameras.*] in file order): seq counts per camera.
            worst.push_str(&format!("camera {camera} seq {seq}:"));
            for (name, ms) in NAMES.iter().zip(w) {
                worst.push_str(&format!(" {name} {ms:.3}"));
            }
            worst.push_str("; ");
        }
        log::info!(target: "sealcheck::pipeline", spans = spans.as_str(), frames = self.spans.records(),
            slowest = worst.trim_end_matches("; ");
            "frame spans on the host, from its hand-overs (ms, p50/p99/max per frame)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_fully_stamped_frame_is_split_at_its_hand_overs_and_others_are_left_out() {
        let meta = FrameMeta::now(0);
        let at = |us: u64| meta.captured_instant + Duration::from_micros(us);
        let mut spans = FrameSpans::default();
        spans.record(&meta, &HostStamps::default(), at(10));
        assert!(spans.spans.summary().is_none());
        let stamps = HostStamps {
            in_slot: Some(at(302)),
            taken: Some(at(404)),
            launched: Some(at(506)),
            done: Some(at(1_008)),
        };
        spans.record(&meta, &stamps, at(1_110));
        let line = spans.spans.summary().unwrap();
        // One frame: p50, p99 and max are the span itself.
        for part in [
            "copy 0.302/0.302/0.302",
            "ring 0.102/0.102/0.102",
            "staging 0.102/0.102/0.102",
            "gpu 0.502/0.502/0.502",
            "output 0.102/0.102/0.102",
            "total 1.110/1.110/1.110",
        ] {
            assert!(line.contains(part), "{part} in {line}");
        }
        assert_eq!(spans.worst[0].1, 0);
        assert!((spans.worst[0].2[5] - 1.110).abs() < 1e-9);
        // A slower frame goes first, a faster one after it.
        let later = FrameMeta::now(7);
        spans.record(
            &later,
            &stamps,
            later.captured_instant + Duration::from_millis(5),
        );
        assert_eq!(spans.worst[0].1, 7);
        assert_eq!(spans.worst[1].1, 0);
    }
}
