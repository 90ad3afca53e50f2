//! Running under systemd for months: readiness and watchdog (`notify`), signals
//! (`signals`), "is the pipeline moving" (`liveness`), structured logs for the journal
//! (`logging`) and keeping repeated errors from flooding it (`ratelimit`).
//!
//! How `sealcheck run` uses them, in order:
//!
//! ```text
//! init_logging(cfg.logging.format, &cfg.logging.level)
//! notifier = Arc::new(Notifier::from_env()); liveness = Liveness::new(cfg.service.stall_timeout)
//! WatchdogThread::spawn(notifier, liveness, ping interval, status text)   <- before loading models
//! (listener, signals) = SignalListener::start()
//! build pipeline (stages mark `liveness`) -> notifier.ready()
//! loop on `signals`:
//!     Reload    -> notifier.reloading(); load + apply or reject; notifier.ready()
//!     Stop      -> notifier.stopping(); drain up to drain_timeout (ForceStop cuts it short)
//! watchdog.stop(); exit 0
//! ```

pub mod liveness;
pub mod logging;
pub mod notify;
pub mod ratelimit;
pub mod signals;

pub use liveness::{
    Health, Liveness, SourceState, Stage, WatchdogThread, run_watchdog, status_line,
};
pub use logging::{LoggingError, format_record, init_logging, stderr_is_journal};
pub use notify::{Notifier, NotifyAddress, NotifyError};
pub use ratelimit::{Admission, Clock, MonotonicClock, RateLimiter, Suppressed};
pub use signals::{ServiceSignal, SignalError, SignalListener};

use std::time::Duration;

/// Ping interval when systemd set no watchdog (run by hand): STATUS lines and stall
/// warnings still come at this pace.
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(5);

/// How often the watchdog thread should run: half systemd's watchdog timeout, or
/// `DEFAULT_PING_INTERVAL` without one.
pub fn ping_interval(notifier: &Notifier) -> Duration {
    notifier.ping_interval().unwrap_or(DEFAULT_PING_INTERVAL)
}
