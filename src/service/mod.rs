//! Running under systemd for months: readiness and watchdog (`notify`), signals
//! (`signals`), "is the pipeline moving" (`liveness`), structured logs for the journal
//! (`logging`) and keeping repeated errors from flooding it (`ratelimit`).
//!
//! How `sealcheck run` uses them, in order:
//!
//! ```text
//! init_logging(cfg.logging.format, &cfg.logging.level)
//! signals = watch_signals()?; notifier = Notifier::from_env(); liveness = Liveness::new()
//! load models, start stages (each marks `liveness`), notifier.ready()
//! watchdog = spawn_watchdog(notifier.clone(), liveness.clone(), stall_timeout, source probe, status text)
//! loop on `signals`:
//!     Reload -> notifier.reloading(); load + apply, or reject and keep the old; notifier.ready()
//!     Stop   -> notifier.stopping(); drain up to drain_timeout (ForceStop cuts it short)
//! watchdog.stop(); exit 0
//! ```

pub mod liveness;
pub mod logging;
pub mod notify;
pub mod ratelimit;
pub mod signals;
pub mod stop_guard;

pub use liveness::{
    DEFAULT_PING_INTERVAL, Health, Liveness, MAX_ABANDONED_IN_A_ROW, Stage, WatchdogThread,
    run_watchdog, spawn_watchdog, status_line, stuck_source_reason, unhealthy_remedy,
};
pub use logging::{LogFormat, format_record, init_logging, stderr_is_journal};
pub use notify::{Notifier, NotifyAddress, NotifyError};
pub use ratelimit::{Admission, Clock, MonotonicClock, RateLimiter, Suppressed};
pub use signals::{ServiceSignal, SignalError, watch_signals};
pub use stop_guard::{STOP_GRACE, StopGuard, threads_left_behind};
