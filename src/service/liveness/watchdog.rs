//! The watchdog thread: every ping interval it reads the verdict, pings systemd's watchdog
//! while the pipeline is alive, logs (rate limited) when it is not, and sends the STATUS line.

use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};

use super::health::Health;
use super::record::Liveness;
use super::text::{status_line, stuck_source_reason, unhealthy_remedy};
use crate::service::notify::Notifier;
use crate::service::ratelimit::{Admission, RateLimiter};

/// Watchdog loop interval when systemd set no watchdog (run by hand): STATUS lines and
/// stall warnings still come at this pace.
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(5);

/// Runs until `stop` receives or disconnects: every `interval`, asks `source_streaming()`,
/// pings the watchdog if the pipeline is alive and sends a STATUS line built from
/// `status_text()`. While stalled it logs (at most once a minute) and sends no ping, so
/// systemd's `WatchdogSec=` expires and the service is restarted.
pub fn run_watchdog(
    notifier: &Notifier,
    liveness: &Liveness,
    interval: Duration,
    stall_timeout: Duration,
    stop: Receiver<()>,
    source_streaming: impl Fn() -> bool,
    status_text: impl Fn() -> String,
) {
    let mut stall_log = RateLimiter::new(Duration::from_secs(60));
    let mut was_alive = true;
    let remedy = unhealthy_remedy(notifier.ping_interval().is_some());
    loop {
        let health = liveness.is_alive(Instant::now(), stall_timeout, source_streaming());
        let alive = health.is_alive();
        if alive {
            notifier.watchdog();
            if !was_alive {
                log::info!(target: "sealcheck::service", "pipeline is moving again; watchdog pings resumed");
            }
        } else if let Admission::Log(repeats) = stall_log.admit() {
            let repeated = repeats.map(|r| r.count).unwrap_or(0);
            match health {
                Health::Stalled {
                    stage,
                    for_,
                    in_flight,
                } => log::error!(target: "sealcheck::service",
                    stage = stage.name(), stalled_s = for_.as_secs_f64(), in_flight = in_flight, repeated = repeated;
                    "pipeline stalled at {}: no inspected result for {:.1} s with {in_flight} frames in flight; {remedy}",
                    stage.name(), for_.as_secs_f64()),
                Health::SourceStuck {
                    in_a_row,
                    still_stuck,
                    ref camera,
                    ..
                } => log::error!(target: "sealcheck::service",
                    source = camera.as_deref().unwrap_or(liveness.source_name()), abandoned_in_a_row = in_a_row, still_stuck = still_stuck, repeated = repeated;
                    "{}; {remedy}", stuck_source_reason(&health, Some(liveness.source_name())).unwrap_or_default()),
                Health::Failing { stage, for_ } => log::error!(target: "sealcheck::service",
                    stage = stage.as_str(), failing_s = for_.as_secs_f64(), repeated = repeated;
                    "every frame has failed in {} for {:.1} s (each got its `error` result): the engine looks broken, \
                     for example a GPU error that sticks until the process ends; {remedy}",
                    stage.as_str(), for_.as_secs_f64()),
                _ => {}
            }
        }
        was_alive = alive;
        let line = match stuck_source_reason(&health, Some(liveness.source_name())) {
            Some(reason) => format!(
                "SOURCE STUCK: {reason}, watchdog pings stopped; {}",
                status_text()
            ),
            None => status_line(&health, &status_text()),
        };
        notifier.status(&line);
        match stop.recv_timeout(interval) {
            Err(RecvTimeoutError::Timeout) => continue,
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// Starts `run_watchdog` on its own thread, pinging at `notifier`'s ping interval (half
/// `WatchdogSec=`), or every `DEFAULT_PING_INTERVAL` when systemd set no watchdog.
/// Dropping (or `stop`ping) the handle ends the thread. Start it right after READY=1 and
/// keep it until the drain is over: systemd watches from READY=1 on.
pub fn spawn_watchdog(
    notifier: Notifier,
    liveness: Liveness,
    stall_timeout: Duration,
    source_streaming: impl Fn() -> bool + Send + 'static,
    status_text: impl Fn() -> String + Send + 'static,
) -> std::io::Result<WatchdogThread> {
    let interval = notifier.ping_interval().unwrap_or(DEFAULT_PING_INTERVAL);
    WatchdogThread::spawn_with_interval(
        notifier,
        liveness,
        interval,
        stall_timeout,
        source_streaming,
        status_text,
    )
}

/// The watchdog thread; stopping (or dropping) the handle ends it.
pub struct WatchdogThread {
    stop: Option<crossbeam_channel::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl WatchdogThread {
    /// As `spawn_watchdog`, with an explicit interval.
    pub fn spawn_with_interval(
        notifier: Notifier,
        liveness: Liveness,
        interval: Duration,
        stall_timeout: Duration,
        source_streaming: impl Fn() -> bool + Send + 'static,
        status_text: impl Fn() -> String + Send + 'static,
    ) -> std::io::Result<WatchdogThread> {
        let (stop_tx, stop_rx) = crossbeam_channel::bounded(1);
        let thread = std::thread::Builder::new()
            .name("watchdog".into())
            .spawn(move || {
                run_watchdog(
                    &notifier,
                    &liveness,
                    interval,
                    stall_timeout,
                    stop_rx,
                    source_streaming,
                    status_text,
                )
            })?;
        Ok(WatchdogThread {
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// Ends the loop and waits for the thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            // The thread may already have ended; then there is nobody to tell.
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            // A panic in the loop has nothing left to clean up.
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
    use crate::service::liveness::health::MAX_ABANDONED_IN_A_ROW;
    use crate::service::liveness::testing::{
        FRONT, SIDE, full_frame, live_camera, lost_with_pipelines_abandoned, streaming,
    };
    use crate::service::notify::NotifyAddress;
    use std::os::unix::net::UnixDatagram;
    use std::sync::Arc;

    #[test]
    fn watchdog_names_another_camera_whose_source_is_stuck() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let systemd = ListenerForTest::bind(&path);
        let notifier = Notifier::connect(NotifyAddress::Path(path), None).unwrap();
        let front = streaming();
        front.set_source_name(FRONT);
        let side = live_camera(&front, SIDE);
        lost_with_pipelines_abandoned(&side, MAX_ABANDONED_IN_A_ROW);
        let watchdog = WatchdogThread::spawn_with_interval(
            notifier,
            front.clone(),
            Duration::from_millis(20),
            Duration::from_millis(150),
            || true,
            || "30.0 fps".to_string(),
        )
        .unwrap();
        // The first camera inspects all along.
        for _ in 0..10 {
            full_frame(&front);
            std::thread::sleep(Duration::from_millis(10));
        }
        watchdog.stop();
        let sent = systemd.take();
        assert!(!sent.iter().any(|m| m == "WATCHDOG=1"), "{sent:?}");
        assert!(
            sent.iter().any(|m| m.starts_with(
                "STATUS=SOURCE STUCK: the source (camera side: RTSP camera rtsp://side) is stuck: 3 of its"
            )),
            "{sent:?}"
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
        let notifier = Notifier::connect(NotifyAddress::Path(path), None).unwrap();
        let liveness = Liveness::new();
        full_frame(&liveness);

        let watchdog = WatchdogThread::spawn_with_interval(
            notifier,
            liveness.clone(),
            Duration::from_millis(20),
            Duration::from_millis(150),
            || true,
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
        // interval (and slack for a busy machine), no more pings.
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
        liveness.frame_finished();
        std::thread::sleep(Duration::from_millis(100));
        assert!(systemd.take().iter().any(|m| m == "WATCHDOG=1"));
        watchdog.stop();
    }
}
