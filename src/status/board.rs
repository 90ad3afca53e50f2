//! The page's numbers: counters for the shift, the last 1000 seals and the
//! last 50 rejects, and each camera's tally (`camera_tally::CameraTally`), kept
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

    /// Records one result and publishes now and then.
    pub fn record(
        &mut self,
        meta: &FrameMeta,
        d: &Decision,
        latency_ms: Option<f64>,
        archived: bool,
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
                board.record(&meta, &decision(reason), None, false);
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
}
