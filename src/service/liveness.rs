//! Is the pipeline doing its job? The answer feeds systemd's watchdog.
//!
//! ```text
//! capture --frame_captured--> preprocess --frame_preprocessed--> infer --frame_inferred-->
//!     output --frame_finished(inspected)--> Liveness <--health()-- watchdog thread
//! ```
//!
//! Each stage marks its frames on shared atomics (a few relaxed stores and one clock read
//! per frame, no lock, no allocation). The watchdog thread reads them every few seconds
//! and pings systemd only while results move. A pipeline wedged anywhere (a hung camera
//! driver, a deadlocked inference call, a blocked disk) stops the pings, and systemd
//! restarts the service: the one remedy an unattended machine has.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};

use super::notify::Notifier;
use super::ratelimit::{Admission, RateLimiter};

/// The stages in pipeline order; the order breaks ties when guessing where a stall is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Capture,
    Preprocess,
    Infer,
    Output,
}

impl Stage {
    const ALL: [Stage; 4] = [
        Stage::Capture,
        Stage::Preprocess,
        Stage::Infer,
        Stage::Output,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Capture => "capture",
            Stage::Preprocess => "preprocess",
            Stage::Infer => "infer",
            Stage::Output => "output",
        }
    }
}

/// What capture says about the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceState {
    /// Models loading, pipeline not built yet.
    NotStarted,
    /// Opening the camera, or reconnecting after a loss with capture's own backoff: alive.
    Connecting,
    /// PLAYING without error.
    Streaming,
    /// Capture gave up (or its thread died) and will not recover by itself.
    Failed,
}

impl SourceState {
    fn to_u8(self) -> u8 {
        match self {
            SourceState::NotStarted => 0,
            SourceState::Connecting => 1,
            SourceState::Streaming => 2,
            SourceState::Failed => 3,
        }
    }

    fn from_u8(v: u8) -> SourceState {
        match v {
            1 => SourceState::Connecting,
            2 => SourceState::Streaming,
            3 => SourceState::Failed,
            _ => SourceState::NotStarted,
        }
    }
}

/// The verdict on the pipeline at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Before the source was first started (models loading). systemd's start timeout,
    /// not the watchdog, bounds this phase.
    Starting,
    /// Inspected results moved within the stall timeout.
    Alive { in_flight: u64 },
    /// Nothing in flight and the source is streaming: waiting for frames (a triggered
    /// camera, a paused line).
    Idle,
    /// Nothing in flight and capture is (re)connecting on its own.
    WaitingForSource { for_: Duration },
    /// No inspected result for `for_` (longer than the stall timeout) while frames were in
    /// flight, or the source failed for good; `stage` is where frames most likely stopped.
    Stalled {
        stage: Stage,
        for_: Duration,
        in_flight: u64,
    },
}

impl Health {
    /// Whether the watchdog should be pinged.
    pub fn is_alive(&self) -> bool {
        !matches!(self, Health::Stalled { .. })
    }
}

/// Marks the stages set; cheap to clone (one `Arc`) and share with every stage thread.
#[derive(Debug, Clone)]
pub struct Liveness {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// Times below are nanoseconds since `origin` plus one, so 0 means "never".
    origin: Instant,
    captured: AtomicU64,
    finished: AtomicU64,
    /// Last time each stage handed a frame on, indexed by `Stage as usize`.
    last_advance: [AtomicU64; 4],
    /// Last time a frame finished with a real verdict from the models.
    last_inspected: AtomicU64,
    source: AtomicU8,
    /// When the source last changed state.
    source_since: AtomicU64,
    stall_timeout_ns: AtomicU64,
}

impl Liveness {
    pub fn new(stall_timeout: Duration) -> Liveness {
        let shared = Shared {
            origin: Instant::now(),
            captured: AtomicU64::new(0),
            finished: AtomicU64::new(0),
            last_advance: Default::default(),
            last_inspected: AtomicU64::new(0),
            source: AtomicU8::new(SourceState::NotStarted.to_u8()),
            source_since: AtomicU64::new(0),
            stall_timeout_ns: AtomicU64::new(duration_ns(stall_timeout)),
        };
        Liveness {
            shared: Arc::new(shared),
        }
    }

    /// Capture delivered a frame (including one it then drops under overflow=drop).
    pub fn frame_captured(&self) {
        self.shared.captured.fetch_add(1, Ordering::Relaxed);
        self.mark(Stage::Capture);
    }

    /// Preprocessing finished a frame.
    pub fn frame_preprocessed(&self) {
        self.mark(Stage::Preprocess);
    }

    /// Inference finished a frame.
    pub fn frame_inferred(&self) {
        self.mark(Stage::Infer);
    }

    /// Output wrote the frame's result. `inspected` is true when the verdict came from the
    /// models (reason ok, defect, no_seal, seal_area) and false for not_inspected and
    /// error results: a pipeline that only produces those is not doing its job, and a
    /// restart is the remedy worth trying.
    pub fn frame_finished(&self, inspected: bool) {
        self.shared.finished.fetch_add(1, Ordering::Relaxed);
        let now = self.mark(Stage::Output);
        if inspected {
            self.shared.last_inspected.store(now, Ordering::Relaxed);
        }
    }

    /// Capture reports the source's state; only changes are recorded.
    pub fn set_source(&self, state: SourceState) {
        let new = state.to_u8();
        if self.shared.source.swap(new, Ordering::Relaxed) != new {
            self.shared
                .source_since
                .store(self.stamp(Instant::now()), Ordering::Relaxed);
        }
    }

    pub fn source(&self) -> SourceState {
        SourceState::from_u8(self.shared.source.load(Ordering::Relaxed))
    }

    /// A reload may change `[service] stall_timeout_s`.
    pub fn set_stall_timeout(&self, stall_timeout: Duration) {
        self.shared
            .stall_timeout_ns
            .store(duration_ns(stall_timeout), Ordering::Relaxed);
    }

    pub fn stall_timeout(&self) -> Duration {
        Duration::from_nanos(self.shared.stall_timeout_ns.load(Ordering::Relaxed))
    }

    /// Frames capture delivered so far.
    pub fn captured(&self) -> u64 {
        self.shared.captured.load(Ordering::Relaxed)
    }

    /// Frames whose result was written so far.
    pub fn finished(&self) -> u64 {
        self.shared.finished.load(Ordering::Relaxed)
    }

    /// Health at `now` with the configured stall timeout.
    pub fn health(&self, now: Instant) -> Health {
        self.is_alive(now, self.stall_timeout())
    }

    /// Health at `now`: alive while inspected results moved within `stall_timeout`, or
    /// while nothing is in flight and the source is streaming or reconnecting.
    pub fn is_alive(&self, now: Instant, stall_timeout: Duration) -> Health {
        let s = &self.shared;
        // Read `finished` before `captured`: a frame captured in between then only looks
        // in flight, never the reverse (finished > captured).
        let finished = s.finished.load(Ordering::Relaxed);
        let captured = s.captured.load(Ordering::Relaxed);
        let in_flight = captured.saturating_sub(finished);
        let source = self.source();
        let source_since = s.source_since.load(Ordering::Relaxed);
        let last_inspected = s.last_inspected.load(Ordering::Relaxed);
        let now_stamp = self.stamp(now);

        if source == SourceState::NotStarted && captured == 0 {
            return Health::Starting;
        }
        // The stall clock runs from the last inspected result, or from when the source
        // last changed state (a fresh start or reconnect gets a full stall timeout).
        let since = now_stamp.saturating_sub(last_inspected.max(source_since));
        let quiet_for = Duration::from_nanos(since);
        if quiet_for <= stall_timeout {
            return Health::Alive { in_flight };
        }
        if in_flight > 0 {
            return Health::Stalled {
                stage: self.stuck_stage(),
                for_: quiet_for,
                in_flight,
            };
        }
        match source {
            SourceState::Streaming => Health::Idle,
            SourceState::Connecting | SourceState::NotStarted => Health::WaitingForSource {
                for_: Duration::from_nanos(now_stamp.saturating_sub(source_since)),
            },
            SourceState::Failed => Health::Stalled {
                stage: Stage::Capture,
                for_: quiet_for,
                in_flight,
            },
        }
    }

    /// The stage that stopped first: its last hand-off is the oldest. A stage that never
    /// handed a frame on is older than any that did; ties go to the earlier stage.
    fn stuck_stage(&self) -> Stage {
        let mut oldest = Stage::Capture;
        let mut oldest_time = u64::MAX;
        for stage in Stage::ALL {
            let t = self.shared.last_advance[stage as usize].load(Ordering::Relaxed);
            if t < oldest_time {
                oldest = stage;
                oldest_time = t;
            }
        }
        oldest
    }

    fn mark(&self, stage: Stage) -> u64 {
        let now = self.stamp(Instant::now());
        self.shared.last_advance[stage as usize].store(now, Ordering::Relaxed);
        now
    }

    fn stamp(&self, t: Instant) -> u64 {
        duration_ns(t.saturating_duration_since(self.shared.origin)).saturating_add(1)
    }
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The status line systemd shows: what `status_text` says (fps, verdict counts), and
/// what is wrong, when something is.
pub fn status_line(health: &Health, status_text: &str) -> String {
    match health {
        Health::Starting => format!("starting: loading models; {status_text}"),
        Health::Alive { .. } => status_text.to_string(),
        Health::Idle => format!("idle: source streaming, no frames; {status_text}"),
        Health::WaitingForSource { for_ } => {
            format!(
                "waiting for the camera for {:.0} s; {status_text}",
                for_.as_secs_f64()
            )
        }
        Health::Stalled {
            stage,
            for_,
            in_flight,
        } => format!(
            "STALLED at {} for {:.0} s ({in_flight} frames in flight), watchdog pings stopped; {status_text}",
            stage.name(),
            for_.as_secs_f64()
        ),
    }
}

/// Runs until `stop` receives or disconnects: every `interval`, pings the watchdog if the
/// pipeline is alive and sends a STATUS line built from `status_text()`. While stalled it
/// logs (at most once a minute) and sends no ping, so systemd's `WatchdogSec=` expires and
/// the service is restarted. Run it on its own thread from process start to exit; start
/// it before loading models so systemd hears from the process at once.
pub fn run_watchdog(
    notifier: &Notifier,
    liveness: &Liveness,
    interval: Duration,
    stop: Receiver<()>,
    status_text: impl Fn() -> String,
) {
    let mut stall_log = RateLimiter::new(Duration::from_secs(60));
    let mut was_alive = true;
    loop {
        let health = liveness.health(Instant::now());
        let alive = health.is_alive();
        if alive {
            notifier.watchdog();
            if !was_alive {
                log::info!(target: "sealcheck::service", "pipeline is moving again; watchdog pings resumed");
            }
        } else if let Health::Stalled {
            stage,
            for_,
            in_flight,
        } = health
            && let Admission::Log(repeats) = stall_log.admit()
        {
            let repeated = repeats.map(|r| r.count).unwrap_or(0);
            log::error!(target: "sealcheck::service",
                stage = stage.name(), stalled_s = for_.as_secs_f64(), in_flight = in_flight, repeated = repeated;
                "pipeline stalled at {}: no inspected result for {:.1} s with {in_flight} frames in flight; \
                 watchdog pings stopped, systemd will restart the service",
                stage.name(), for_.as_secs_f64());
        }
        was_alive = alive;
        notifier.status(&status_line(&health, &status_text()));
        match stop.recv_timeout(interval) {
            Err(RecvTimeoutError::Timeout) => continue,
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// `run_watchdog` on its own thread; stopping (or dropping) the handle ends it.
pub struct WatchdogThread {
    stop: Option<crossbeam_channel::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl WatchdogThread {
    pub fn spawn(
        notifier: Arc<Notifier>,
        liveness: Liveness,
        interval: Duration,
        status_text: impl Fn() -> String + Send + 'static,
    ) -> std::io::Result<WatchdogThread> {
        let (stop_tx, stop_rx) = crossbeam_channel::bounded(1);
        let thread = std::thread::Builder::new()
            .name("watchdog".into())
            .spawn(move || run_watchdog(&notifier, &liveness, interval, stop_rx, status_text))?;
        Ok(WatchdogThread {
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// Ends the loop and waits for the thread. Call it after the drain, just before exit:
    /// systemd may still watch the process while it stops.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for WatchdogThread {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::notify::NotifyAddress;
    use std::os::unix::net::UnixDatagram;

    const STALL: Duration = Duration::from_secs(5);

    fn streaming() -> Liveness {
        let l = Liveness::new(STALL);
        l.set_source(SourceState::Streaming);
        l
    }

    fn full_frame(l: &Liveness) {
        l.frame_captured();
        l.frame_preprocessed();
        l.frame_inferred();
        l.frame_finished(true);
    }

    #[test]
    fn starting_until_the_source_is_started() {
        let l = Liveness::new(STALL);
        let later = Instant::now() + Duration::from_secs(600);
        assert_eq!(l.is_alive(later, STALL), Health::Starting);
        assert!(Health::Starting.is_alive());
    }

    #[test]
    fn alive_while_results_move() {
        let l = streaming();
        full_frame(&l);
        l.frame_captured();
        let now = Instant::now();
        assert_eq!(l.is_alive(now, STALL), Health::Alive { in_flight: 1 });
        assert!(l.is_alive(now + Duration::from_secs(4), STALL).is_alive());
    }

    #[test]
    fn stalled_when_frames_in_flight_stop_finishing() {
        let l = streaming();
        full_frame(&l);
        // Two frames reach inference and never come out.
        l.frame_captured();
        l.frame_preprocessed();
        l.frame_captured();
        l.frame_preprocessed();
        let later = Instant::now() + Duration::from_secs(6);
        match l.is_alive(later, STALL) {
            Health::Stalled {
                stage,
                for_,
                in_flight,
            } => {
                assert_eq!(stage, Stage::Infer);
                assert_eq!(in_flight, 2);
                assert!(for_ > STALL, "{for_:?}");
            }
            other => panic!("expected a stall, got {other:?}"),
        }
    }

    #[test]
    fn stall_hint_names_the_first_stage_that_never_moved() {
        let l = streaming();
        l.frame_captured(); // stuck in preprocess from the very first frame
        let later = Instant::now() + Duration::from_secs(6);
        assert!(matches!(
            l.is_alive(later, STALL),
            Health::Stalled {
                stage: Stage::Preprocess,
                ..
            }
        ));
    }

    #[test]
    fn stall_hint_names_output_when_writing_blocks() {
        let l = streaming();
        full_frame(&l);
        std::thread::sleep(Duration::from_millis(5));
        // Later frames pass inference but output hangs (a blocked disk).
        l.frame_captured();
        l.frame_preprocessed();
        l.frame_inferred();
        let later = Instant::now() + Duration::from_secs(6);
        assert!(matches!(
            l.is_alive(later, STALL),
            Health::Stalled {
                stage: Stage::Output,
                ..
            }
        ));
    }

    #[test]
    fn only_uninspected_results_do_not_count_as_progress() {
        let l = streaming();
        full_frame(&l);
        // overflow=drop with inference hung: every new frame ends as not_inspected.
        l.frame_captured();
        l.frame_preprocessed(); // stuck in inference
        let later = Instant::now() + Duration::from_secs(6);
        for _ in 0..50 {
            l.frame_captured();
            l.frame_finished(false);
        }
        assert!(matches!(
            l.is_alive(later, STALL),
            Health::Stalled { in_flight: 1, .. }
        ));
    }

    #[test]
    fn idle_when_nothing_in_flight_and_source_streaming() {
        let l = streaming();
        full_frame(&l);
        let later = Instant::now() + Duration::from_secs(3600);
        assert_eq!(l.is_alive(later, STALL), Health::Idle);
        assert!(Health::Idle.is_alive());
    }

    #[test]
    fn reconnecting_source_is_waited_for_failed_one_is_a_stall() {
        let l = streaming();
        full_frame(&l);
        l.set_source(SourceState::Connecting);
        let later = Instant::now() + Duration::from_secs(60);
        assert!(matches!(
            l.is_alive(later, STALL),
            Health::WaitingForSource { .. }
        ));
        l.set_source(SourceState::Failed);
        // A fresh state change restarts the stall clock...
        assert!(l.is_alive(Instant::now(), STALL).is_alive());
        // ...which then runs out.
        let later = Instant::now() + Duration::from_secs(6);
        assert!(matches!(
            l.is_alive(later, STALL),
            Health::Stalled {
                stage: Stage::Capture,
                in_flight: 0,
                ..
            }
        ));
    }

    #[test]
    fn a_source_restart_gets_a_full_stall_timeout() {
        let l = streaming();
        l.frame_captured();
        let t0 = Instant::now();
        assert!(matches!(
            l.is_alive(t0 + Duration::from_secs(6), STALL),
            Health::Stalled { .. }
        ));
        std::thread::sleep(Duration::from_millis(20));
        l.set_source(SourceState::Connecting);
        l.set_source(SourceState::Streaming);
        assert!(
            l.is_alive(Instant::now() + Duration::from_secs(4), STALL)
                .is_alive()
        );
    }

    #[test]
    fn counters_and_stall_timeout_are_shared_between_clones() {
        let l = streaming();
        let other = l.clone();
        other.frame_captured();
        other.frame_finished(true);
        assert_eq!((l.captured(), l.finished()), (1, 1));
        other.set_stall_timeout(Duration::from_millis(250));
        assert_eq!(l.stall_timeout(), Duration::from_millis(250));
    }

    #[test]
    fn status_line_says_what_is_wrong() {
        let stalled = Health::Stalled {
            stage: Stage::Infer,
            for_: Duration::from_secs(7),
            in_flight: 3,
        };
        assert_eq!(
            status_line(&stalled, "29.8 fps"),
            "STALLED at infer for 7 s (3 frames in flight), watchdog pings stopped; 29.8 fps"
        );
        assert_eq!(
            status_line(&Health::Alive { in_flight: 2 }, "29.8 fps"),
            "29.8 fps"
        );
    }

    /// Test double for systemd: reads every datagram on its own thread (the kernel queue
    /// holds only a few) and keeps them for the test to inspect.
    struct ListenerForTest {
        received: Arc<std::sync::Mutex<Vec<String>>>,
    }

    impl ListenerForTest {
        fn bind(path: &std::path::Path) -> ListenerForTest {
            let socket = UnixDatagram::bind(path).unwrap();
            let received = Arc::new(std::sync::Mutex::new(Vec::new()));
            let sink = received.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = socket.recv(&mut buf) {
                    sink.lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&buf[..n]).into_owned());
                }
            });
            ListenerForTest { received }
        }

        fn take(&self) -> Vec<String> {
            std::mem::take(&mut *self.received.lock().unwrap())
        }
    }

    #[test]
    fn watchdog_loop_pings_while_alive_and_stops_when_stalled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let systemd = ListenerForTest::bind(&path);
        let notifier = Arc::new(Notifier::connect(NotifyAddress::Path(path), None).unwrap());
        let liveness = Liveness::new(Duration::from_millis(150));
        liveness.set_source(SourceState::Streaming);
        full_frame(&liveness);

        let watchdog = WatchdogThread::spawn(
            notifier,
            liveness.clone(),
            Duration::from_millis(20),
            || "30.0 fps".to_string(),
        )
        .unwrap();
        // Alive: frames keep finishing.
        for _ in 0..10 {
            full_frame(&liveness);
            std::thread::sleep(Duration::from_millis(10));
        }
        let alive = systemd.take();
        assert!(alive.iter().any(|m| m == "WATCHDOG=1"), "{alive:?}");
        assert!(alive.iter().any(|m| m == "STATUS=30.0 fps"), "{alive:?}");

        // Stalled: one frame enters and never finishes. After the stall timeout plus one
        // interval (and some slack for a busy machine), no more pings.
        liveness.frame_captured();
        std::thread::sleep(Duration::from_millis(300));
        systemd.take();
        std::thread::sleep(Duration::from_millis(200));
        let stalled = systemd.take();
        assert!(
            !stalled.iter().any(|m| m == "WATCHDOG=1"),
            "pinged while stalled: {stalled:?}"
        );
        assert!(
            stalled
                .iter()
                .any(|m| m.starts_with("STATUS=STALLED at preprocess")),
            "{stalled:?}"
        );

        // It recovers when results move again.
        liveness.frame_finished(true);
        std::thread::sleep(Duration::from_millis(100));
        assert!(systemd.take().iter().any(|m| m == "WATCHDOG=1"));
        watchdog.stop();
    }
}
