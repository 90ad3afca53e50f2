//! The one frame loop: every path that judges frames (the host infer thread,
//! the device thread, the shadow) takes its frames through `Batcher::run`,
//! and supplies only what it does with a batch (`BatchPath`).
//!
//! ```text
//!   FrameSource ──next(wait)──▶ Batcher::run ──▶ BatchPath (each hook: when the batcher calls it)
//!   (frame::FrameSource:         gather a batch:     first_wait  before waiting for a batch's first frame
//!    the stage channel,          the first frame,    idle        nothing came within first_wait
//!    trigger::PartRings,         those already       begin       a batch's first frame came (swap models here)
//!    the shadow's Inbox)         waiting, up to      add         each frame of the batch, in order
//!                                max_batch           run         the batch is gathered (one engine run)
//!                                                    pass_on     a marker / change / end, after the batch before it
//!                                                    hand_back   after each idle, add, run and pass_on that goes on
//! ```
//!
//! Invariants (tested below, and by each path's tests):
//! - nothing waits for a camera with no frame: after a batch's first frame
//!   the batcher takes only what is already waiting, waiting at most
//!   `BatchPolicy::wait` (`[inference] batch_wait_us`, default 0) for more;
//! - a batch holds at most `policy.max_batch` frames, and at most what the
//!   path's `begin` says it takes now;
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
//! - frames go back to the source at one point only: `hand_back`, which
//!   the batcher calls after every `idle`, `add`, `run` and `pass_on` that
//!   lets the loop go on (`then_hand_back`), and never otherwise; it is the
//!   only hook given the source. A path that keeps part of a frame after
//!   `add` (the device path keeps a ring slot until the GPU has read it)
//!   keeps it no longer than the next of those steps, unless the GPU still
//!   reads it; what it still keeps when the loop ends is its own to give
//!   back;
//! - the loop ends when a hook breaks (`Batcher::run` returns `Some(end)`)
//!   or when the source closes (`None`), after the batch it gave was run.
//!
//! The batch sizes a path must warm up before its first camera frame are
//! `warm_up::warm_up_sizes`: one list for every path.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::batch::{BatchCounts, BatchPolicy, BatchRuns};
use crate::frame::{FrameSource, Next};

/// Longest the batcher waits for a batch's first frame before it asks the
/// path what to do meanwhile (`BatchPath::idle`), unless the path says
/// otherwise (`BatchPath::first_wait`).
pub const IDLE_WAIT: Duration = Duration::from_millis(200);

/// What one path does with the frames the batcher gathers from its source
/// `S`. Each hook says when `Batcher::run` calls it; a hook that answers
/// `Break` ends the loop with the path's `End`.
pub trait BatchPath<S: FrameSource> {
    /// How the path's loop ends (a capture end, or nothing).
    type End;

    /// Called before each wait for a batch's first frame: how long to
    /// wait. `IDLE_WAIT`, or zero while the path has work to finish
    /// (`idle` does it).
    fn first_wait(&self) -> Duration {
        IDLE_WAIT
    }

    /// Called when no frame came within `first_wait`.
    fn idle(&mut self) -> ControlFlow<Self::End> {
        ControlFlow::Continue(())
    }

    /// Called when a batch's first frame came, before it is added: the
    /// moment a path swaps in new models waiting beside its source. Returns
    /// the most frames the path takes in this batch (its engine's batch;
    /// the batcher holds it to `BatchPolicy::max_batch` too).
    fn begin(&mut self, first: &S::Frame) -> ControlFlow<Self::End, usize>;

    /// Called for each frame of the batch being gathered, the first one
    /// included, in the source's order: it joins the batch.
    fn add(&mut self, frame: S::Frame) -> ControlFlow<Self::End>;

    /// Called once a batch is gathered (it is full, nothing more was
    /// waiting, or a message that is not a frame came): judges or launches
    /// it; returns the engine runs made.
    fn run(&mut self) -> Result<BatchRuns, Self::End>;

    /// Called with a message that is not a frame, once every frame the
    /// source gave before it was run.
    fn pass_on(&mut self, other: S::Other) -> ControlFlow<Self::End>;

    /// The one point where a path gives back to `source` what it kept of
    /// frames it was handed and no longer needs (the device path's ring
    /// slots, once the GPU has read them). Called after every `idle`,
    /// `add`, `run` and `pass_on` that lets the loop go on, and only then;
    /// never waits. A path that keeps nothing needs none.
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

    /// Runs `path` on every message of `source` until the path ends it
    /// (`Some(end)`) or the source closes (`None`: every frame it gave was
    /// run).
    pub fn run<S: FrameSource, P: BatchPath<S>>(
        &self,
        source: &mut S,
        path: &mut P,
    ) -> Option<P::End> {
        match self.batches(source, path) {
            ControlFlow::Break(end) => Some(end),
            ControlFlow::Continue(SourceClosed) => None,
        }
    }

    /// Batch after batch, until a hook breaks or the source closes.
    fn batches<S: FrameSource, P: BatchPath<S>>(
        &self,
        source: &mut S,
        path: &mut P,
    ) -> ControlFlow<P::End, SourceClosed> {
        loop {
            let first = match source.next(path.first_wait()) {
                Next::Frame(frame) => frame,
                Next::Other(other) => {
                    let step = path.pass_on(other);
                    then_hand_back(step, path, source)?;
                    continue;
                }
                Next::Idle => {
                    let step = path.idle();
                    then_hand_back(step, path, source)?;
                    continue;
                }
                Next::Closed => return ControlFlow::Continue(SourceClosed),
            };
            let takes = path.begin(&first)?;
            let most = self.policy.max_batch.min(takes).max(1);
            let until = Instant::now() + self.policy.wait;
            let (mut next, mut after, mut closed) = (Some(first), None, false);
            let mut gathered = 0;
            while let Some(frame) = next.take() {
                let step = path.add(frame);
                then_hand_back(step, path, source)?;
                gathered += 1;
                if gathered >= most {
                    break;
                }
                match source.next(until.saturating_duration_since(Instant::now())) {
                    Next::Frame(frame) => next = Some(frame),
                    Next::Other(other) => after = Some(other),
                    Next::Idle => {}
                    Next::Closed => closed = true,
                }
            }
            let step = match path.run() {
                Ok(made) => {
                    self.counts.record(made);
                    ControlFlow::Continue(())
                }
                Err(end) => ControlFlow::Break(end),
            };
            then_hand_back(step, path, source)?;
            // What stopped the gathering keeps its place behind the batch.
            if let Some(other) = after {
                let step = path.pass_on(other);
                then_hand_back(step, path, source)?;
            }
            if closed {
                return ControlFlow::Continue(SourceClosed);
            }
        }
    }
}

/// The source said nothing will come again.
struct SourceClosed;

/// The one point where frames go back to the source: after a step of the
/// loop (`idle`, `add`, `run`, `pass_on`) that lets it go on, the path's
/// `hand_back`; a step that ends the loop is passed on as it is.
fn then_hand_back<S: FrameSource, P: BatchPath<S>>(
    step: ControlFlow<P::End>,
    path: &mut P,
    source: &mut S,
) -> ControlFlow<P::End> {
    if step.is_continue() {
        path.hand_back(source);
    }
    step
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
        fn idle(&mut self) -> ControlFlow<&'static str> {
            self.events.push("idle".into());
            ControlFlow::Continue(())
        }
        fn begin(&mut self, first: &u32) -> ControlFlow<&'static str, usize> {
            self.events.push(format!("begin {first}"));
            ControlFlow::Continue(self.capacity)
        }
        fn add(&mut self, frame: u32) -> ControlFlow<&'static str> {
            self.batch.push(frame);
            self.events.push(format!("add {frame}"));
            ControlFlow::Continue(())
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
        fn hand_back(&mut self, _: &mut Script) {
            self.events.push("back".into());
        }
    }

    /// The events of `path` without its hand-backs and adds: what ran and
    /// what was passed on.
    fn steps(path: &Log) -> Vec<&str> {
        path.events
            .iter()
            .map(String::as_str)
            .filter(|e| *e != "back" && !e.starts_with("add"))
            .collect()
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
        assert_eq!(b.run(&mut source, &mut path), None, "the source closed");
        assert_eq!(
            steps(&path),
            [
                "begin 1",
                "run [1, 2]",
                "pass m",
                "begin 3",
                "run [3]",
                "begin 4",
                "run [4]",
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
        assert_eq!(batcher(4).run(&mut source, &mut path), Some("stopped"));
        assert_eq!(steps(&path), ["idle", "begin 1", "run [1]", "pass e"]);
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
        assert_eq!(batcher(8).run(&mut source, &mut path), None);
        assert_eq!(steps(&path), ["begin 1", "run [1, 2]"]);
    }

    #[test]
    fn frames_go_back_after_every_step_that_goes_on_and_at_no_other_point() {
        use Next::*;
        let mut source = Script::of([Idle, Frame(1), Frame(2), Other('m'), Other('e')]);
        let mut path = Log {
            capacity: 8,
            stop_at: Some('e'),
            ..Log::default()
        };
        assert_eq!(batcher(8).run(&mut source, &mut path), Some("stopped"));
        assert_eq!(
            path.events,
            [
                "idle",
                "back",
                "begin 1",
                "add 1",
                "back",
                "add 2",
                "back",
                "run [1, 2]",
                "back",
                "pass m",
                "back",
                // The step that ends the loop is not followed by a hand-back.
                "pass e",
            ]
        );
    }
}
