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
