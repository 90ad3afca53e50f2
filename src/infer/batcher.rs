//! The one frame loop: every path that judges frames (the host infer thread,
//! the device thread, the shadow) takes its frames through `Batcher::run`,
//! and supplies only what it does with a batch (`BatchPath`).
//!
//! ```text
//!   FrameSource ──next(wait)──▶ Batcher::run ──▶ BatchPath
//!   (RingSet of the cameras,     gather a batch:     begin (swap models here)
//!    the stage channel,          the first frame,    add, add, ...
//!    the shadow's hand-over)     those already       run (one engine run)
//!                                waiting, up to      pass_on (marker / end)
//!                                max_batch           idle (nothing came)
//! ```
//!
//! Invariants (tested below, and by each path's tests):
//! - nothing waits for a camera with no frame: after a batch's first frame
//!   the batcher takes only what is already waiting, waiting at most
//!   `BatchPolicy::wait` (`[inference] batch_wait_us`, default 0) for more;
//! - a batch holds at most `min(policy.max_batch, path.capacity())` frames;
//! - a marker or the end that stops the gathering goes out after the batch
//!   (`pass_on`), so every camera's messages keep their order;
//! - models change only between batches, so no batch is judged by two
//!   engines: in `begin`, before a batch's first frame (host and device
//!   paths, whose swaps wait on a channel of their own), or in `pass_on`
//!   (the shadow, whose changes come through its source as messages);
//! - every frame taken from the source is handed to the path exactly once
//!   (`add`), and every batch begun is run once (`run`), even when the
//!   source closes while it is gathered; only a path that ends the loop
//!   itself (its output is gone) leaves what it was not handed;
//! - a path that keeps part of a frame after `add` (the device path keeps a
//!   ring slot until the GPU has read it) gets the source back in
//!   `hand_back` after every `idle`, `run` and `pass_on`, so nothing is kept
//!   longer than the next of those.
//!
//! The batch sizes a path must warm up before its first camera frame are
//! `warm_up_sizes`: one list for every path.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};

use super::batch::{BatchCounts, BatchPolicy, BatchRuns};
use crate::capture::EndOfStream;
use crate::frame::{FrameSlot, FrameWork, StageMessage};
use crate::ring::Popped;
use crate::trigger::PartRings;

/// Longest the batcher waits for a batch's first frame before it asks the
/// path what to do meanwhile (`BatchPath::idle`), unless the path says
/// otherwise (`BatchPath::first_wait`).
pub const IDLE_WAIT: Duration = Duration::from_millis(200);

/// What a source gives the batcher.
#[derive(Debug)]
pub enum Next<Frame, Other> {
    /// A frame to judge.
    Frame(Frame),
    /// Not a frame: a marker, a change, the end; passed on in its place.
    Other(Other),
    /// Nothing came within the wait.
    Idle,
    /// Nothing will ever come again (the sending side is gone).
    Closed,
}

/// Where a path's frames come from, in the order they are to be judged.
pub trait FrameSource {
    type Frame;
    type Other;

    /// The next message, waiting up to `wait` (zero: only one already
    /// waiting).
    fn next(&mut self, wait: Duration) -> Next<Self::Frame, Self::Other>;
}

/// What one path does with the frames the batcher gathers. `S` is its
/// source (the device path gives its ring slots back to it in `add`).
pub trait BatchPath<S: FrameSource> {
    /// How the path's loop ends (a capture end, or nothing).
    type End;

    /// Most frames the path takes in one batch now (its engine's batch).
    fn capacity(&self) -> usize;

    /// How long to wait for a batch's first frame: `IDLE_WAIT`, or zero
    /// while the path has work to finish (`idle` does it).
    fn first_wait(&self) -> Duration {
        IDLE_WAIT
    }

    /// No frame came within `first_wait`.
    fn idle(&mut self) -> ControlFlow<Self::End> {
        ControlFlow::Continue(())
    }

    /// A batch begins with `first`: the moment a path swaps in new models
    /// waiting beside its source.
    fn begin(&mut self, first: &S::Frame) -> ControlFlow<Self::End>;

    /// `frame` joins the batch being gathered (the `gathered()`-th).
    fn add(&mut self, source: &mut S, frame: S::Frame) -> ControlFlow<Self::End>;

    /// Frames in the batch being gathered.
    fn gathered(&self) -> usize;

    /// Judges (or launches) the batch gathered; returns the engine runs made.
    fn run(&mut self) -> Result<BatchRuns, Self::End>;

    /// A message that is not a frame, once every frame before it was run.
    fn pass_on(&mut self, other: S::Other) -> ControlFlow<Self::End>;

    /// The source closed: how the loop ends.
    fn closed(&mut self) -> Self::End;

    /// Gives back to `source` what the path kept of frames it was handed
    /// and no longer needs (the device path's ring slots, once the GPU has
    /// read them). Called after `idle`, `run` and `pass_on`; never waits.
    fn hand_back(&mut self, source: &mut S) {
        let _ = source;
    }
}

/// Gathers frames into batches for one path, and counts the batches.
pub struct Batcher {
    policy: BatchPolicy,
    counts: Arc<BatchCounts>,
}

impl Batcher {
    pub fn new(policy: BatchPolicy, counts: Arc<BatchCounts>) -> Self {
        Batcher { policy, counts }
    }

    /// Runs `path` on every message of `source` until the path or the
    /// source ends it.
    pub fn run<S: FrameSource, P: BatchPath<S>>(&self, source: &mut S, path: &mut P) -> P::End {
        loop {
            let first = match source.next(path.first_wait()) {
                Next::Frame(frame) => frame,
                Next::Other(other) => {
                    if let ControlFlow::Break(end) = path.pass_on(other) {
                        return end;
                    }
                    path.hand_back(source);
                    continue;
                }
                Next::Idle => {
                    if let ControlFlow::Break(end) = path.idle() {
                        return end;
                    }
                    path.hand_back(source);
                    continue;
                }
                Next::Closed => return path.closed(),
            };
            if let ControlFlow::Break(end) = path.begin(&first) {
                return end;
            }
            let most = self.policy.max_batch.min(path.capacity()).max(1);
            let until = Instant::now() + self.policy.wait;
            let (mut next, mut after, mut closed) = (Some(first), None, false);
            while let Some(frame) = next.take() {
                if let ControlFlow::Break(end) = path.add(source, frame) {
                    return end;
                }
                if path.gathered() >= most {
                    break;
                }
                match source.next(until.saturating_duration_since(Instant::now())) {
                    Next::Frame(frame) => next = Some(frame),
                    Next::Other(other) => after = Some(other),
                    Next::Idle => {}
                    Next::Closed => closed = true,
                }
            }
            match path.run() {
                Ok(made) => self.counts.record(made),
                Err(end) => return end,
            }
            path.hand_back(source);
            // What stopped the gathering keeps its place behind the batch.
            if let Some(other) = after {
                if let ControlFlow::Break(end) = path.pass_on(other) {
                    return end;
                }
                path.hand_back(source);
            }
            if closed {
                return path.closed();
            }
        }
    }
}

/// The batch sizes every warm-up walks (defined beside the warm-ups).
pub use super::warm_up::warm_up_sizes;

/// The host infer thread's source: preprocessed frames and the markers
/// between them, in capture order per camera.
impl FrameSource for Receiver<StageMessage> {
    type Frame = Box<FrameWork>;
    type Other = StageMessage;

    fn next(&mut self, wait: Duration) -> Next<Box<FrameWork>, StageMessage> {
        // A zero wait takes only a message already there.
        let message = match self.recv_timeout(wait) {
            Ok(message) => message,
            Err(RecvTimeoutError::Timeout) => return Next::Idle,
            Err(RecvTimeoutError::Disconnected) => return Next::Closed,
        };
        match message {
            StageMessage::Inspect(work) => Next::Frame(work),
            other => Next::Other(other),
        }
    }
}

/// A ring's message that is not a frame.
#[derive(Debug)]
pub enum NotAFrame<End> {
    /// `NotInspected` or `CaptureFailed`, in the place of its frames.
    Marker(StageMessage),
    /// Every camera's stream ended; the most severe end stands for all.
    End(End),
}

/// The device thread's source: every camera's ring, read fairly
/// (`ring::RingSet`), with parts made (`trigger::PartRings`); the end comes
/// once every camera ended.
impl FrameSource for PartRings {
    type Frame = Box<FrameSlot>;
    type Other = NotAFrame<EndOfStream>;

    fn next(&mut self, wait: Duration) -> Next<Box<FrameSlot>, NotAFrame<EndOfStream>> {
        match self.pop(wait) {
            Some(Popped::Frame(slot)) => Next::Frame(slot),
            Some(Popped::Marker(message)) => Next::Other(NotAFrame::Marker(message)),
            Some(Popped::End(end)) => Next::Other(NotAFrame::End(end)),
            None => Next::Idle,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;

    /// Test double: a source that hands out a script, one step per call,
    /// and records the wait each call was given.
    struct Script {
        steps: VecDeque<Next<u32, char>>,
        waits: Vec<Duration>,
    }

    impl Script {
        fn of(steps: impl IntoIterator<Item = Next<u32, char>>) -> Self {
            Script {
                steps: steps.into_iter().collect(),
                waits: Vec::new(),
            }
        }
    }

    impl FrameSource for Script {
        type Frame = u32;
        type Other = char;
        fn next(&mut self, wait: Duration) -> Next<u32, char> {
            self.waits.push(wait);
            self.steps.pop_front().unwrap_or(Next::Closed)
        }
    }

    /// Test double: a path that writes down what it was asked to do.
    #[derive(Default)]
    struct Log {
        capacity: usize,
        batch: Vec<u32>,
        events: Vec<String>,
        /// `pass_on` of this marker ends the loop.
        stop_at: Option<char>,
    }

    impl BatchPath<Script> for Log {
        type End = &'static str;
        fn capacity(&self) -> usize {
            self.capacity
        }
        fn idle(&mut self) -> ControlFlow<&'static str> {
            self.events.push("idle".into());
            ControlFlow::Continue(())
        }
        fn begin(&mut self, first: &u32) -> ControlFlow<&'static str> {
            self.events.push(format!("begin {first}"));
            ControlFlow::Continue(())
        }
        fn add(&mut self, _: &mut Script, frame: u32) -> ControlFlow<&'static str> {
            self.batch.push(frame);
            ControlFlow::Continue(())
        }
        fn gathered(&self) -> usize {
            self.batch.len()
        }
        fn run(&mut self) -> Result<BatchRuns, &'static str> {
            self.events.push(format!("run {:?}", self.batch));
            let frames = std::mem::take(&mut self.batch).len();
            Ok(BatchRuns { runs: 1, frames })
        }
        fn pass_on(&mut self, other: char) -> ControlFlow<&'static str> {
            self.events.push(format!("pass {other}"));
            match self.stop_at == Some(other) {
                true => ControlFlow::Break("stopped"),
                false => ControlFlow::Continue(()),
            }
        }
        fn closed(&mut self) -> &'static str {
            self.events.push("closed".into());
            "closed"
        }
    }

    fn batcher(max_batch: usize) -> Batcher {
        let policy = BatchPolicy {
            max_batch,
            wait: Duration::ZERO,
        };
        Batcher::new(policy, Arc::default())
    }

    #[test]
    fn frames_waiting_together_make_one_batch_and_a_marker_goes_out_after_it() {
        use Next::*;
        let mut source = Script::of([Frame(1), Frame(2), Other('m'), Frame(3), Idle, Frame(4)]);
        let mut path = Log {
            capacity: 8,
            ..Log::default()
        };
        let b = batcher(4);
        assert_eq!(b.run(&mut source, &mut path), "closed");
        assert_eq!(
            path.events,
            [
                "begin 1",
                "run [1, 2]",
                "pass m",
                "begin 3",
                "run [3]",
                "begin 4",
                "run [4]",
                "closed"
            ]
        );
        assert_eq!(b.counts.snapshot(), (3, 4));
    }

    #[test]
    fn a_batch_never_holds_more_than_the_policy_or_the_path_takes() {
        use Next::*;
        for (max_batch, capacity, expected) in [
            (2, 8, vec!["run [1, 2]", "run [3, 4]", "run [5]"]),
            (8, 3, vec!["run [1, 2, 3]", "run [4, 5]"]),
            (
                1,
                8,
                vec!["run [1]", "run [2]", "run [3]", "run [4]", "run [5]"],
            ),
        ] {
            let mut source = Script::of((1..=5).map(Frame));
            let mut path = Log {
                capacity,
                ..Log::default()
            };
            batcher(max_batch).run(&mut source, &mut path);
            let runs: Vec<_> = path
                .events
                .iter()
                .filter(|e| e.starts_with("run"))
                .collect();
            assert_eq!(runs, expected, "max_batch {max_batch}, capacity {capacity}");
        }
    }

    #[test]
    fn nothing_waits_for_a_frame_that_is_not_there_and_idle_is_the_paths() {
        use Next::*;
        let mut source = Script::of([Idle, Frame(1), Idle, Other('e')]);
        let mut path = Log {
            capacity: 4,
            stop_at: Some('e'),
            ..Log::default()
        };
        assert_eq!(batcher(4).run(&mut source, &mut path), "stopped");
        assert_eq!(path.events, ["idle", "begin 1", "run [1]", "pass e"]);
        // The first frame of a batch is waited for; the rest of the batch
        // only as long as the policy's wait (zero here).
        assert_eq!(
            source.waits,
            [IDLE_WAIT, IDLE_WAIT, Duration::ZERO, IDLE_WAIT]
        );
    }

    #[test]
    fn a_source_closing_mid_batch_still_runs_the_batch_it_gave() {
        use Next::*;
        let mut source = Script::of([Frame(1), Frame(2), Closed]);
        let mut path = Log {
            capacity: 8,
            ..Log::default()
        };
        assert_eq!(batcher(8).run(&mut source, &mut path), "closed");
        assert_eq!(path.events, ["begin 1", "run [1, 2]", "closed"]);
    }

    #[test]
    fn a_channel_source_gives_frames_and_markers_and_says_when_it_closed() {
        let (tx, mut rx) = crossbeam_channel::bounded(4);
        assert!(matches!(rx.next(Duration::ZERO), Next::Idle));
        assert!(matches!(rx.next(Duration::from_millis(5)), Next::Idle));
        let geometry = crate::frame::TensorGeometry {
            seg_hw: (2, 2),
            seg_classes: 2,
            cls_hw: (2, 2),
            cls_classes: 2,
        };
        tx.send(StageMessage::Inspect(Box::new(FrameWork::new(&geometry))))
            .unwrap();
        tx.send(StageMessage::End).unwrap();
        drop(tx);
        assert!(matches!(rx.next(Duration::ZERO), Next::Frame(_)));
        assert!(matches!(
            rx.next(Duration::ZERO),
            Next::Other(StageMessage::End)
        ));
        assert!(matches!(rx.next(IDLE_WAIT), Next::Closed));
    }

    #[test]
    fn every_batch_size_up_to_the_largest_is_warmed_up() {
        assert_eq!(warm_up_sizes(4).collect::<Vec<_>>(), [1, 2, 3, 4]);
        assert_eq!(warm_up_sizes(0).collect::<Vec<_>>(), [1]);
    }
}
