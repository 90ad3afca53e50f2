//! Result lines waiting for the shadow's verdict (`crate::shadow`): a line
//! of a frame handed to the shadow is written once the shadow's verdict is
//! in it, and the lines after it wait behind it, so the file stays in `seq`
//! order. Production's verdict already went to the line; only the file waits.
//!
//! Invariants:
//! - with no shadow, nothing is parked: every line is written at once;
//! - a parked line is written exactly once: with the shadow's verdict, or
//!   after `wait` without it (`"shadow":{"error":...}`), or at the end;
//! - the buffers are reused: parking allocates only until the queue has
//!   reached its longest.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::frame::{CameraIndex, FrameMeta};
use crate::json_line;
use crate::shadow::ShadowVerdict;

struct Pending {
    /// The frame: its camera and `seq`.
    frame: (CameraIndex, u64),
    line: String,
    /// Set while the shadow's verdict is still to come.
    awaiting_since: Option<Instant>,
}

#[derive(Default)]
pub struct PendingLines {
    queue: VecDeque<Pending>,
    spare: Vec<String>,
}

/// What a line gets when the shadow's verdict did not come in time.
#[derive(Serialize)]
struct NoVerdict<'a> {
    shadow: NoVerdictError<'a>,
}

#[derive(Serialize)]
struct NoVerdictError<'a> {
    error: &'a str,
}

impl PendingLines {
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Lines still waiting for a shadow verdict.
    pub fn awaiting(&self) -> usize {
        self.queue
            .iter()
            .filter(|p| p.awaiting_since.is_some())
            .count()
    }

    /// Queues `line` of frame `meta`; `awaiting`: a shadow verdict will come for it.
    pub fn park(&mut self, meta: &FrameMeta, line: &str, awaiting: bool) {
        let mut text = self.spare.pop().unwrap_or_default();
        text.clear();
        text.push_str(line);
        self.queue.push_back(Pending {
            frame: (meta.camera, meta.seq),
            line: text,
            awaiting_since: awaiting.then(Instant::now),
        });
    }

    /// Puts the shadow's verdict into its line; `false` when no line waits
    /// for it (it came after `wait`).
    pub fn attach(&mut self, verdict: &ShadowVerdict) -> bool {
        let Some(pending) = self
            .queue
            .iter_mut()
            .find(|p| p.frame == (verdict.camera, verdict.seq) && p.awaiting_since.is_some())
        else {
            return false;
        };
        verdict.append_to(&mut pending.line);
        pending.awaiting_since = None;
        true
    }

    /// Writes the lines at the front that are ready, in order, and those
    /// that waited `wait` or more for the shadow (`force`: all of them, at
    /// the end). Returns how many were written without a verdict.
    pub fn flush<E>(
        &mut self,
        wait: Duration,
        force: bool,
        mut write: impl FnMut(&str) -> Result<(), E>,
    ) -> Result<u64, E> {
        let mut gave_up = 0;
        while let Some(front) = self.queue.front_mut() {
            if let Some(since) = front.awaiting_since {
                if !force && since.elapsed() < wait {
                    break;
                }
                let error = format!(
                    "no shadow verdict within {} s; the shadow is far behind or stuck",
                    wait.as_secs()
                );
                json_line::merge_into(
                    &mut front.line,
                    &NoVerdict {
                        shadow: NoVerdictError { error: &error },
                    },
                );
                front.awaiting_since = None;
                gave_up += 1;
            }
            let Some(done) = self.queue.pop_front() else {
                break;
            };
            let written = write(&done.line);
            self.spare.push(done.line);
            written?;
        }
        Ok(gave_up)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Decision;
    use crate::model_id::ModelIds;
    use crate::shadow::ShadowOutcome;
    use std::sync::Arc;

    fn verdict(seq: u64) -> ShadowVerdict {
        ShadowVerdict {
            seq,
            camera: 0,
            outcome: ShadowOutcome::Judged {
                decision: Decision::error(),
                mask_iou: Some(1.0),
            },
            models: Arc::new(ModelIds {
                segmentation: "s".into(),
                classifier: "c".into(),
                recipe: None,
            }),
        }
    }

    fn park(p: &mut PendingLines, camera: CameraIndex, seq: u64, line: &str, awaiting: bool) {
        let meta = FrameMeta {
            camera,
            ..FrameMeta::now(seq)
        };
        p.park(&meta, line, awaiting);
    }

    fn written(p: &mut PendingLines, wait: Duration, force: bool) -> Vec<String> {
        let mut out = Vec::new();
        p.flush::<()>(wait, force, |l| {
            out.push(l.to_string());
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn lines_after_a_shadowed_frame_wait_and_leave_in_order_with_its_verdict() {
        let mut p = PendingLines::default();
        park(&mut p, 0, 0, "{\"seq\":0}", true);
        park(&mut p, 0, 1, "{\"seq\":1}", false);
        assert!(written(&mut p, Duration::from_secs(5), false).is_empty());
        assert_eq!(p.awaiting(), 1);
        assert!(!p.attach(&verdict(1)), "seq 1 awaits nothing");
        assert!(p.attach(&verdict(0)));
        let lines = written(&mut p, Duration::from_secs(5), false);
        assert_eq!(lines.len(), 2);
        let first: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(first["seq"], 0);
        assert_eq!(first["shadow"]["verdict"], "fail");
        assert_eq!(first["shadow"]["mask_iou"], 1.0);
        assert_eq!(first["shadow"]["models"]["classifier"], "c");
        assert_eq!(lines[1], "{\"seq\":1}");
        assert!(p.is_empty());
    }

    #[test]
    fn a_verdict_that_never_comes_leaves_the_line_written_once_with_an_error() {
        let mut p = PendingLines::default();
        park(&mut p, 0, 4, "{\"seq\":4}", true);
        let lines = written(&mut p, Duration::ZERO, false);
        assert_eq!(lines.len(), 1);
        let v: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        assert!(
            v["shadow"]["error"]
                .as_str()
                .unwrap()
                .contains("no shadow verdict")
        );
        assert!(!p.attach(&verdict(4)), "a late verdict finds no line");
        assert!(written(&mut p, Duration::ZERO, true).is_empty());
    }

    #[test]
    fn a_verdict_goes_to_its_own_cameras_frame_of_the_same_seq() {
        let mut p = PendingLines::default();
        park(&mut p, 0, 3, "{\"camera\":\"a\",\"seq\":3}", true);
        park(&mut p, 1, 3, "{\"camera\":\"b\",\"seq\":3}", true);
        let other = ShadowVerdict {
            camera: 1,
            ..verdict(3)
        };
        assert!(p.attach(&other));
        assert_eq!(p.awaiting(), 1, "camera a's line still waits");
        assert!(written(&mut p, Duration::from_secs(5), false).is_empty());
        assert!(p.attach(&verdict(3)));
        let lines = written(&mut p, Duration::from_secs(5), false);
        assert!(lines[0].starts_with("{\"camera\":\"a\"") && lines[0].contains("shadow"));
        assert!(lines[1].starts_with("{\"camera\":\"b\"") && lines[1].contains("shadow"));
    }
}
