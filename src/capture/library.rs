//! GStreamer itself: initialised once per process, and its version.

use gstreamer as gst;

use super::error::CaptureError;

/// Initialises GStreamer once per process.
pub(crate) fn init() -> Result<(), CaptureError> {
    gst::init().map_err(|e| CaptureError::Init {
        message: e.to_string(),
    })
}

/// The GStreamer library version in use, e.g. "GStreamer 1.22.0", for `--version`.
pub fn gstreamer_version() -> String {
    gst::version_string().to_string()
}
