//! Industrial cameras (GigE Vision, USB3 Vision) through Aravis 0.8:
//! `kind = "genicam"` sources, their software trigger, and the camera list.
//!
//! ```text
//! {aravissrc name=src camera-name=ID} - {capsfilter camera_caps} - [{bayer2rgb}] - {videoconvert} - RGB - {appsink}
//!        │ camera object (opened when camera-name is set, before PLAYING)
//!        ▼
//!   setup::prepare: features, exposure, gain, pixel format checked against the
//!   camera and applied (a refused one is named with the camera's range);
//!   format: the config's pixel format, or (left out) the camera's own; the
//!   caps for it, bayer2rgb put in for Bayer;
//!   trigger features → the element's `features` (applied after its frame rate)
//!        │
//!        ▼
//!   link::GenicamLink: current camera (dropped at a loss), frame counts (probe on src),
//!        │             the socket buffer checked once (buffer: a frame larger than
//!        │             net.core.rmem_default is warned of at start)
//!        ├── SoftwareTrigger::fire() → camera TriggerSoftware (any thread)
//!        └── GenicamCounters: frames, incomplete (for the logs)
//! ```
//!
//! `sys` is every raw call into `libaravis-0.8.so.0` (opened at run time, as
//! ONNX Runtime is); `setup` applies the config at each open, `format` its
//! pixel format; `link` is the state shared with the handles; `trigger` the
//! handles; `list` what `sealcheck cameras` shows; `buffer` the socket
//! buffer rule both of them apply.
//!
//! # The software trigger, for the rest of the program
//!
//! ```ignore
//! let capture = Capture::start_camera(Some("side"), &source, producer, liveness)?;
//! // Some(..) only for `kind = "genicam"` with `trigger = "software"`.
//! let trigger: SoftwareTrigger = capture.software_trigger().expect("software-triggered camera");
//! // From any thread, as often as the camera can take pictures:
//! let n: u64 = trigger.fire()?;       // n-th fire since start; the frame follows in the ring
//! // Err(TriggerError::CameraLost) while the camera is being reopened: that part gets no frame.
//! let counts = capture.genicam_counters().unwrap(); // frames(), incomplete()
//! ```
//!
//! A fire and its frame are paired by order: the camera takes one picture per
//! TriggerSoftware, in order; a frame that does not arrive whole is dropped by
//! Aravis (never judged), so a fire without a frame within the wait the caller
//! chooses is that part's `no_frame`.

mod buffer;
mod format;
mod link;
mod list;
mod setup;
mod sys;
mod trigger;

pub(crate) use link::GenicamLink;
pub use list::{GenicamCameraInfo, GenicamSettings, list_genicam_cameras};
pub(crate) use setup::prepare;
pub(crate) use sys::{Camera, LIBRARY, available};
pub use trigger::{CameraSettingsHandle, GenicamCounters, SoftwareTrigger, TriggerError};
