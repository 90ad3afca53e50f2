//! The handles a genicam capture gives the rest of the program.
//!
//! `SoftwareTrigger::fire` executes the camera's `TriggerSoftware` command
//! through the camera object of the `aravissrc` now running; the one frame the
//! camera takes comes down the same capture as every frame. `GenicamCounters`
//! reads the camera's frame counts (whole and incomplete frames) for the
//! logs, the run summary and `/metrics`. With `trigger = "lineN"` under `[trigger] mode = "camera"` each frame
//! is a part whose id is sealcheck's count, `seq` + 1 (`frame::Part::counted`).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::link::GenicamLink;
use crate::config::GenicamTrigger;

/// Why a software trigger did not fire.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TriggerError {
    /// The camera is lost (unplugged, rebooting) and being reopened.
    #[error(
        "{origin}: software trigger not fired: the camera is not open (lost, and being reopened)"
    )]
    CameraLost { origin: String },
    /// The camera refused the command.
    #[error("{origin}: the camera refused TriggerSoftware: {reason}")]
    Refused { origin: String, reason: String },
}

/// Sets a GenICam camera's exposure and gain at run time (a recipe
/// switch, `crate::recipe`), through the camera object of the `aravissrc`
/// now running; kept for every reopen. Cheap to clone; `Send + Sync`.
/// Obtained from `Capture::camera_settings()` for a `kind = "genicam"` camera.
#[derive(Debug, Clone)]
pub struct CameraSettingsHandle {
    link: Arc<GenicamLink>,
}

impl CameraSettingsHandle {
    pub(crate) fn new(link: Arc<GenicamLink>) -> CameraSettingsHandle {
        CameraSettingsHandle { link }
    }

    /// Whose camera this is (its source's name).
    pub fn origin(&self) -> &str {
        &self.link.origin
    }

    /// Applies exposure (µs) and gain (dB), each `None` left as it is;
    /// returns the values the camera reads back (`None` while it is not
    /// open: the reopen applies them). A refusal names the value and the
    /// camera's range.
    pub fn apply(
        &self,
        exposure_us: Option<f64>,
        gain_db: Option<f64>,
    ) -> Result<(Option<f64>, Option<f64>), String> {
        self.link.set_settings(exposure_us, gain_db)
    }
}

/// Fires one camera's software trigger. Cheap to clone; `Send + Sync`: any
/// thread may fire, e.g. the PLC trigger's. Obtained from
/// `Capture::software_trigger()` for a `trigger = "software"` camera.
#[derive(Debug, Clone)]
pub struct SoftwareTrigger {
    link: Arc<GenicamLink>,
}

impl SoftwareTrigger {
    pub(crate) fn new(link: Arc<GenicamLink>) -> Option<SoftwareTrigger> {
        (link.trigger == GenicamTrigger::Software).then_some(SoftwareTrigger { link })
    }

    /// Executes TriggerSoftware once: the camera takes one picture, which
    /// arrives as the capture's next frame. Returns this fire's number (1 for
    /// the first since start). Never waits for the frame; the GigE Vision
    /// command itself takes a round trip to the camera (about a millisecond,
    /// at most Aravis' control timeout when the camera does not answer).
    pub fn fire(&self) -> Result<u64, TriggerError> {
        self.link
            .with_camera(|camera| camera.execute("TriggerSoftware"))
            .ok_or_else(|| TriggerError::CameraLost {
                origin: self.link.origin.clone(),
            })?
            .map_err(|reason| TriggerError::Refused {
                origin: self.link.origin.clone(),
                reason,
            })?;
        Ok(self.link.fired.fetch_add(1, Ordering::AcqRel) + 1)
    }

    /// Fires that succeeded since start.
    pub fn fired(&self) -> u64 {
        self.link.fired.load(Ordering::Acquire)
    }
}

/// A genicam camera's frame counts since start, over every reopen.
#[derive(Debug, Clone)]
pub struct GenicamCounters {
    link: Arc<GenicamLink>,
}

impl GenicamCounters {
    pub(crate) fn new(link: Arc<GenicamLink>) -> GenicamCounters {
        GenicamCounters { link }
    }

    /// Whole frames `aravissrc` delivered, over every reopen (for the logs;
    /// a part's id in `camera` mode is sealcheck's own count, `seq` + 1).
    pub fn frames(&self) -> u64 {
        self.link.frames()
    }

    /// Frames that did not arrive whole and were dropped (never judged).
    /// Counted in free run from the gaps in the camera's timestamps; with a
    /// software trigger, compare `SoftwareTrigger::fired` with `frames`.
    pub fn incomplete(&self) -> u64 {
        self.link.incomplete()
    }

    /// The trigger the camera runs with.
    pub fn trigger(&self) -> GenicamTrigger {
        self.link.trigger
    }
}
