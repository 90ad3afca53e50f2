//! Test-only fault hooks, compiled in only with the `fault-injection` feature
//! (never in a production build). The service tests use them to prove that a
//! stalled inference thread stops the watchdog pings.

/// `SEALCHECK_FAULT_STALL_INFER_AFTER=N`: the inference thread hangs forever
/// when it reaches frame `N`.
pub fn stall_infer_after() -> Option<u64> {
    std::env::var("SEALCHECK_FAULT_STALL_INFER_AFTER")
        .ok()?
        .parse()
        .ok()
}

pub fn maybe_stall(after: Option<u64>, seq: u64) {
    if after.is_some_and(|n| seq >= n) {
        log::warn!(target: "sealcheck::fault", seq = seq; "fault injection: inference thread stalls now");
        loop {
            std::thread::park();
        }
    }
}

/// `SEALCHECK_FAULT_DELAY_INFER_MS=N`: the inference thread takes N ms longer
/// for every frame (a slow model), so parts miss a short deadline.
pub fn infer_delay() -> Option<std::time::Duration> {
    let ms: u64 = std::env::var("SEALCHECK_FAULT_DELAY_INFER_MS").ok()?.parse().ok()?;
    Some(std::time::Duration::from_millis(ms))
}

pub fn maybe_delay(delay: Option<std::time::Duration>) {
    if let Some(delay) = delay {
        std::thread::sleep(delay);
    }
}
