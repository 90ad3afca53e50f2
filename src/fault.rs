//! Test-only fault hooks, compiled in only with the `fault-injection` feature
//! (never in a production build). The service tests use them to prove that a
//! stalled inference thread, or one whose engine fails every frame, stops the
//! watchdog pings.
//!
//! Without the feature, `fault_stub.rs` takes this file's place: the same
//! names, doing nothing, so the inference loop and the stop carry no `cfg`.

/// The inference thread's faults, read from the environment once at its start.
#[derive(Debug, Clone, Copy)]
pub struct InferFaults {
    stall_after: Option<u64>,
    delay: Option<std::time::Duration>,
    fail_after: Option<u64>,
}

impl InferFaults {
    pub fn from_env() -> Self {
        InferFaults {
            stall_after: stall_infer_after(),
            delay: infer_delay(),
            fail_after: fail_infer_after(),
        }
    }

    /// Before frame `seq` is taken: a stall or a delay, when asked for.
    pub fn hold(&self, seq: u64) {
        maybe_stall(self.stall_after, seq);
        maybe_delay(self.delay);
    }

    /// Whether `work` fails instead of running the models (marked so).
    pub fn fail(&self, work: &mut crate::frame::FrameWork) -> bool {
        maybe_fail(self.fail_after, work)
    }
}

/// `SEALCHECK_FAULT_STALL_INFER_AFTER=N`: the inference thread hangs forever
/// when it reaches frame `N`.
fn stall_infer_after() -> Option<u64> {
    std::env::var("SEALCHECK_FAULT_STALL_INFER_AFTER")
        .ok()?
        .parse()
        .ok()
}

fn maybe_stall(after: Option<u64>, seq: u64) {
    if after.is_some_and(|n| seq >= n) {
        log::warn!(target: "sealcheck::fault", seq = seq; "fault injection: inference thread stalls now");
        loop {
            std::thread::park();
        }
    }
}

/// `SEALCHECK_FAULT_DELAY_INFER_MS=N`: the inference thread takes N ms longer
/// for every frame (a slow model), so parts miss a short deadline.
fn infer_delay() -> Option<std::time::Duration> {
    let ms: u64 = std::env::var("SEALCHECK_FAULT_DELAY_INFER_MS")
        .ok()?
        .parse()
        .ok()?;
    Some(std::time::Duration::from_millis(ms))
}

fn maybe_delay(delay: Option<std::time::Duration>) {
    if let Some(delay) = delay
        && delays_left()
    {
        std::thread::sleep(delay);
    }
}

/// `SEALCHECK_FAULT_DELAY_INFER_FIRST=N` (with `SEALCHECK_FAULT_DELAY_INFER_MS`):
/// only the first N frames the inference thread takes are slowed, as a cold
/// engine's are; `sealcheck bench`'s tests make its warm-up slow with it.
fn delay_infer_first() -> Option<u64> {
    static FIRST: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *FIRST.get_or_init(|| {
        std::env::var("SEALCHECK_FAULT_DELAY_INFER_FIRST")
            .ok()?
            .parse()
            .ok()
    })
}

/// Whether this frame is still to be delayed. One inference thread runs per
/// process, so counting the calls counts its frames.
fn delays_left() -> bool {
    static DELAYED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    delay_infer_first()
        .is_none_or(|first| DELAYED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < first)
}

/// `SEALCHECK_FAULT_FAIL_INFER_AFTER=N`: from frame `N` on, the engine fails
/// every frame at once, as a CUDA context does after a sticky error.
fn fail_infer_after() -> Option<u64> {
    std::env::var("SEALCHECK_FAULT_FAIL_INFER_AFTER")
        .ok()?
        .parse()
        .ok()
}

/// Whether frame `seq` fails instead of running the models; it is marked so.
fn maybe_fail(after: Option<u64>, work: &mut crate::frame::FrameWork) -> bool {
    if after.is_none_or(|n| work.meta.seq < n) {
        return false;
    }
    work.error = Some((
        crate::frame::FailedStage::Segment,
        "fault injection: the engine fails every frame".into(),
    ));
    true
}

/// `SEALCHECK_FAULT_HANG_AFTER_STOP=1`: once a stop request ended the run's
/// loop, the main thread hangs for ever instead of shutting down, as it would
/// in an exit handler waiting for a thread stuck in a GPU driver: only the
/// stop guard (`service::StopGuard`) can end the process.
pub fn maybe_hang_after_stop(stopped_by_signal: bool) {
    if stopped_by_signal && std::env::var_os("SEALCHECK_FAULT_HANG_AFTER_STOP").is_some() {
        log::warn!(target: "sealcheck::fault", "fault injection: the main thread hangs after the stop request");
        loop {
            std::thread::park();
        }
    }
}
