//! The page's numbers: counters for the shift, the last 1000 seals and the
//! last 50 rejects, each camera's tally (`camera_tally::CameraTally`) and,
//! for a camera with a cavity layout, its cavities' (`cavity_tally`), kept
//! by the output thread and published as a snapshot.
//!
//! ```text
//! output thread: StatusBoard::record (arrays, no allocation once every camera was seen, no lock)
//!     --at most 4 times a second, try_lock (never waits)--> SnapshotSlot
//! HTTP thread:   SnapshotSlot::read (clone) -> /api/status JSON, the page
//! ```

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

pub use super::camera_tally::LastResult;
use super::camera_tally::{CameraTally, MAX_CAMERAS};
use super::cavity_tally::CavityTally;
use crate::config::CavityLayout;
use crate::cycle::CycleVerdicts;
use crate::decision::{Decision, Reason, Verdict};
use crate::frame::{CameraIndex, FrameMeta};
use crate::stats::{ResultCounters, percentile_of_sorted};

/// Seals in the rolling window (yield, fails per reason, p99).
pub const WINDOW: usize = 1000;
/// Rejects in the filmstrip.
pub const FILMSTRIP: usize = 50;
/// How often the output thread publishes.
const PUBLISH_EVERY: Duration = Duration::from_millis(250);

const REASONS: usize = Reason::ALL.len();

/// One reject in the filmstrip.
#[derive(Debug, Clone, Copy)]
pub struct Reject {
    pub camera: CameraIndex,
    pub seq: u64,
    /// `[trigger] mode = "plc"`: the part's id (`None` in free mode).
    pub part_id: Option<u64>,
    pub captured_at: SystemTime,
    pub reason: Reason,
    pub defect_prob: Option<f64>,
    /// Queued for the archive (its file may still be dropped: see metrics).
    pub archived: bool,
}

/// Everything the page shows, in fixed-size arrays (`clone_from` allocates
/// nothing: the output thread publishes into the same buffers every time).
#[derive(Debug)]
pub struct BoardState {
    pub shift_started: SystemTime,
    pub frames: u64,
    pub passed: u64,
    pub failed: u64,
    /// Indexed like `Reason::ALL`.
    pub by_reason: [u64; REASONS],
    /// Reason index of the last `WINDOW` results, a ring.
    window_reason: Box<[u8; WINDOW]>,
    /// Capture-to-verdict latency of those results (NaN: not inspected).
    window_latency_ms: Box<[f32; WINDOW]>,
    window_len: usize,
    window_next: usize,
    /// The last `FILMSTRIP` rejects, a ring.
    rejects: [Option<Reject>; FILMSTRIP],
    rejects_next: usize,
    pub last: Option<LastResult>,
    /// Each camera's tally, by `FrameMeta::camera` (grown when a camera's
    /// first result comes: once per camera, never per frame).
    pub cameras: Vec<CameraTally>,
    /// Each camera's cavities, by `FrameMeta::camera`; `None` for a camera
    /// without a cavity layout. Made at start from the layouts
    /// (`StatusBoard::prepare_cavities`), else at a camera's first cycle.
    pub cavities: Vec<Option<Box<CavityTally>>>,
    /// Increases with every publish: a reader sees whether it changed.
    pub version: u64,
}

impl BoardState {
    pub fn new() -> Self {
        BoardState {
            shift_started: SystemTime::now(),
            frames: 0,
            passed: 0,
            failed: 0,
            by_reason: [0; REASONS],
            window_reason: Box::new([0; WINDOW]),
            window_latency_ms: Box::new([f32::NAN; WINDOW]),
            window_len: 0,
            window_next: 0,
            rejects: [None; FILMSTRIP],
            rejects_next: 0,
            last: None,
            cameras: Vec::new(),
            cavities: Vec::new(),
            version: 0,
        }
    }

    /// Counts in the rolling window: (seals, passed, failed per reason).
    pub fn window_counts(&self) -> (usize, usize, [u64; REASONS]) {
        let mut by_reason = [0u64; REASONS];
        for &r in &self.window_reason[..self.window_len] {
            by_reason[usize::from(r)] += 1;
        }
        let ok = Reason::ALL
            .iter()
            .position(|r| *r == Reason::Ok)
            .map_or(0, |i| by_reason[i] as usize);
        (self.window_len, ok, by_reason)
    }

    /// Latency quantile (0..=1) over the window's inspected frames, in ms.
    pub fn window_latency_quantile(&self, q: f64) -> Option<f64> {
        let mut v: Vec<f32> = self.window_latency_ms[..self.window_len]
            .iter()
            .copied()
            .filter(|x| x.is_finite())
            .collect();
        v.sort_by(f32::total_cmp);
        percentile_of_sorted(&v, q).map(f64::from)
    }

    /// The filmstrip, newest first.
    pub fn rejects(&self) -> impl Iterator<Item = &Reject> {
        (0..FILMSTRIP)
            .map(move |i| &self.rejects[(self.rejects_next + FILMSTRIP - 1 - i) % FILMSTRIP])
            .filter_map(Option::as_ref)
    }
}

impl Clone for BoardState {
    fn clone(&self) -> Self {
        let mut copy = BoardState::new();
        copy.clone_from(self);
        copy
    }

    fn clone_from(&mut self, s: &Self) {
        self.shift_started = s.shift_started;
        self.frames = s.frames;
        self.passed = s.passed;
        self.failed = s.failed;
        self.by_reason = s.by_reason;
        self.window_reason.copy_from_slice(&s.window_reason[..]);
        self.window_latency_ms
            .copy_from_slice(&s.window_latency_ms[..]);
        self.window_len = s.window_len;
        self.window_next = s.window_next;
        self.rejects = s.rejects;
        self.rejects_next = s.rejects_next;
        self.last = s.last;
        // Reuses this copy's buffer: it only grows when a camera is added.
        self.cameras.clone_from(&s.cameras);
        // `Option<Box<_>>::clone_from` copies into the box already there.
        self.cavities.clone_from(&s.cavities);
        self.version = s.version;
    }
}

impl Default for BoardState {
    fn default() -> Self {
        BoardState::new()
    }
}

/// Where the output thread leaves the newest snapshot for the HTTP thread.
#[derive(Debug, Default)]
pub struct SnapshotSlot {
    state: Mutex<BoardState>,
}

impl SnapshotSlot {
    /// A copy of the newest snapshot (the HTTP side; may wait for the
    /// output thread's short copy, never the other way round).
    pub fn read(&self) -> BoardState {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The output thread's side.
pub struct StatusBoard {
    state: BoardState,
    /// The shift's totals are the output stage's counters, copied at each
    /// publish (counted once, for `/metrics`, the page and the summary).
    results: ResultCounters,
    slot: std::sync::Arc<SnapshotSlot>,
    last_publish: Instant,
}

impl StatusBoard {
    pub fn new(slot: std::sync::Arc<SnapshotSlot>, results: ResultCounters) -> Self {
        StatusBoard {
            state: BoardState::new(),
            results,
            slot,
            last_publish: Instant::now(),
        }
    }

    /// Makes the cavity tallies of the cameras with a layout (`layouts`
    /// by camera index), so that no cycle allocates one.
    pub fn prepare_cavities(&mut self, layouts: &[Option<std::sync::Arc<CavityLayout>>]) {
        let s = &mut self.state;
        for (camera, layout) in layouts.iter().enumerate().take(MAX_CAMERAS) {
            if let Some(layout) = layout {
                if camera >= s.cavities.len() {
                    s.cavities.resize_with(camera + 1, || None);
                }
                s.cavities[camera] = Some(Box::new(CavityTally::for_layout(
                    layout.count(),
                    layout.enabled_mask(),
                )));
            }
        }
    }

    /// Records one result (with a cavity layout, one cycle: `cycle` its
    /// cavities) and publishes now and then.
    pub fn record(
        &mut self,
        meta: &FrameMeta,
        d: &Decision,
        latency_ms: Option<f64>,
        archived: bool,
        cycle: Option<&CycleVerdicts>,
    ) {
        let s = &mut self.state;
        let reason_index = Reason::ALL.iter().position(|r| *r == d.reason).unwrap_or(0);
        s.window_reason[s.window_next] = reason_index as u8;
        s.window_latency_ms[s.window_next] = latency_ms.map_or(f32::NAN, |l| l as f32);
        s.window_next = (s.window_next + 1) % WINDOW;
        s.window_len = (s.window_len + 1).min(WINDOW);
        if d.verdict == Verdict::Fail {
            s.rejects[s.rejects_next] = Some(Reject {
                camera: meta.camera,
                seq: meta.seq,
                part_id: meta.part.triggered_id(),
                captured_at: meta.captured_at,
                reason: d.reason,
                defect_prob: d.defect_prob,
                archived,
            });
            s.rejects_next = (s.rejects_next + 1) % FILMSTRIP;
        }
        s.last = Some(LastResult {
            seq: meta.seq,
            part_id: meta.part.triggered_id(),
            captured_at: meta.captured_at,
            verdict: d.verdict,
            reason: d.reason,
            latency_ms,
        });
        let now = Instant::now();
        let camera = usize::from(meta.camera);
        if camera < MAX_CAMERAS {
            if camera >= s.cameras.len() {
                s.cameras.resize(camera + 1, CameraTally::default());
            }
            s.cameras[camera].record(meta, d, reason_index, latency_ms, now);
            if let Some(cycle) = cycle {
                if camera >= s.cavities.len() {
                    // A layout `prepare_cavities` was not told of: once per camera.
                    s.cavities.resize_with(camera + 1, || None);
                }
                s.cavities[camera]
                    .get_or_insert_with(Box::default)
                    .record(meta, cycle);
            }
        }
        if now.saturating_duration_since(self.last_publish) >= PUBLISH_EVERY {
            self.publish();
        }
    }

    /// Publishes unless the HTTP side is reading right now (then the next
    /// frame or the idle tick publishes).
    pub fn publish(&mut self) {
        if let Ok(mut slot) = self.slot.state.try_lock() {
            let totals = self.results.snapshot();
            self.state.frames = totals.frames;
            self.state.passed = totals.passed();
            self.state.failed = totals.failed();
            self.state.by_reason = totals.by_reason;
            self.state.version += 1;
            slot.clone_from(&self.state);
            self.last_publish = Instant::now();
        }
    }

    /// Called when no frame came for a while: what changed gets out.
    pub fn idle_tick(&mut self) {
        if self.state.version == 0 || self.last_publish.elapsed() >= PUBLISH_EVERY {
            self.publish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(reason: Reason) -> Decision {
        Decision {
            verdict: if reason == Reason::Ok {
                Verdict::Pass
            } else {
                Verdict::Fail
            },
            reason,
            defect_prob: None,
            seal_area: None,
        }
    }

    #[test]
    fn window_keeps_the_last_thousand_and_the_filmstrip_the_last_fifty_rejects() {
        let slot = std::sync::Arc::new(SnapshotSlot::default());
        let results = ResultCounters::default();
        let mut board = StatusBoard::new(std::sync::Arc::clone(&slot), results.clone());
        for seq in 0..1500u64 {
            let reason = if seq % 3 == 0 {
                Reason::Defect
            } else {
                Reason::Ok
            };
            // The output stage counts each result before the board sees it.
            results.record(reason);
            board.record(
                &FrameMeta::now(seq),
                &decision(reason),
                Some(seq as f64),
                false,
                None,
            );
        }
        board.publish();
        let s = slot.read();
        assert_eq!((s.frames, s.failed), (1500, 500));
        let (n, ok, _) = s.window_counts();
        // seq 500..1499: 333 multiples of 3 are defects.
        assert_eq!((n, ok), (1000, 667));
        let rejects: Vec<u64> = s.rejects().map(|r| r.seq).collect();
        assert_eq!(rejects.len(), FILMSTRIP);
        assert_eq!(rejects[0], 1497, "newest first");
        assert_eq!(s.window_latency_quantile(1.0), Some(1499.0));
        assert!(s.version > 0);
    }

    #[test]
    fn each_camera_is_tallied_apart_and_the_shift_is_their_sum() {
        let slot = std::sync::Arc::new(SnapshotSlot::default());
        let results = ResultCounters::default();
        let mut board = StatusBoard::new(std::sync::Arc::clone(&slot), results.clone());
        for seq in 0..30u64 {
            for camera in [0u16, 1] {
                // Camera 1 fails every other seal, camera 0 every fifth.
                let reason = if seq % [5, 2][usize::from(camera)] == 0 {
                    Reason::NoSeal
                } else {
                    Reason::Ok
                };
                results.record(reason);
                let meta = FrameMeta {
                    camera,
                    ..FrameMeta::now(seq)
                };
                board.record(&meta, &decision(reason), None, false, None);
            }
        }
        board.publish();
        let s = slot.read();
        assert_eq!(s.cameras.len(), 2);
        assert_eq!((s.cameras[0].passed, s.cameras[0].failed), (24, 6));
        assert_eq!((s.cameras[1].passed, s.cameras[1].failed), (15, 15));
        assert_eq!(s.cameras[1].last.unwrap().seq, 29);
        assert_eq!(
            s.cameras.iter().map(|c| c.passed + c.failed).sum::<u64>(),
            s.frames
        );
        let newest = s.rejects().next().unwrap();
        assert_eq!((newest.camera, newest.seq), (1, 28));
    }

    #[test]
    fn cavity_tallies_are_made_at_start_and_publishing_copies_into_the_same_boxes() {
        let rects =
            crate::config::CavityLayout::grid_rects(2, 3, (320, 180), (640, 360), (600, 340))
                .unwrap();
        let layout = std::sync::Arc::new(
            crate::config::CavityLayout::new(rects, &[], 0, Some((2, 3))).unwrap(),
        );
        let slot = std::sync::Arc::new(SnapshotSlot::default());
        let mut board = StatusBoard::new(std::sync::Arc::clone(&slot), ResultCounters::default());
        board.prepare_cavities(&[None, Some(std::sync::Arc::clone(&layout))]);
        assert!(board.state.cavities[0].is_none(), "camera 0 has no layout");
        let made: *const CavityTally = &**board.state.cavities[1].as_ref().unwrap();
        let mut published = BoardState::new();
        let mut cycle = CycleVerdicts::with_capacity(6);
        let mut boxed_at = None;
        for seq in 0..5u64 {
            cycle.fill_failed(&layout, Reason::Defect);
            let meta = FrameMeta {
                camera: 1,
                ..FrameMeta::now(seq)
            };
            board.record(&meta, &cycle.overall(), None, false, Some(&cycle));
            published.clone_from(&board.state);
            let at: *const CavityTally = &**published.cavities[1].as_ref().unwrap();
            assert_eq!(
                *boxed_at.get_or_insert(at),
                at,
                "publish {seq} made a new box"
            );
        }
        let tally = board.state.cavities[1].as_deref().unwrap();
        assert_eq!(tally as *const CavityTally, made, "no cycle made a tally");
        assert_eq!(tally.shift(3).failed, 5);
        assert_eq!(published.cavities[1].as_ref().unwrap().shift(3).failed, 5);
        // A cycle of a camera nobody said had a layout still counts (once made).
        board.record(
            &FrameMeta::now(9),
            &cycle.overall(),
            None,
            false,
            Some(&cycle),
        );
        assert_eq!(board.state.cavities[0].as_ref().unwrap().cycles(), (1, 1));
    }
}
