//! Is the pipeline doing its job? The answer feeds systemd's watchdog.
//!
//! ```text
//! capture --frame_captured--> preprocess --frame_preprocessed--> infer --frame_inferred-->
//!     output --frame_finished--> Liveness <--is_alive()-- watchdog thread (+ source probe)
//! ```
//!
//! Each stage marks its frames on shared atomics (a few relaxed stores and one clock read
//! per frame, no lock, no allocation). The watchdog thread reads them every few seconds
//! and pings systemd only while results move. A pipeline wedged anywhere (a hung camera
//! driver, a deadlocked inference call, a blocked disk) stops the pings, and systemd
//! restarts the service: the one remedy an unattended machine has. So does an engine
//! that fails every frame for a stall timeout: results still move, but each is an
//! `error` (a CUDA context after a sticky error, such as an illegal address, fails
//! every call at once until the process ends).
//!
//! With several cameras (`Liveness::for_another_camera`) frames count together,
//! and each camera's source has a record of its own. A camera that is lost and
//! being rebuilt is capture's business, whichever it is; a camera whose source
//! capture can no longer bring back (`Health::SourceStuck`, named) stops the
//! pings, whichever it is.
//!
//! The record the stages mark is `record`, the verdict read from it `health`, the
//! operator's words for it `text`, and the thread that pings systemd `watchdog`.

pub mod health;
pub mod record;
pub mod text;
pub mod watchdog;

#[cfg(test)]
mod testing;

pub use health::{Health, MAX_ABANDONED_IN_A_ROW};
pub use record::{Liveness, Stage};
pub use text::{status_line, stuck_source_reason, unhealthy_remedy};
pub use watchdog::{DEFAULT_PING_INTERVAL, WatchdogThread, run_watchdog, spawn_watchdog};
