//! What can go wrong getting frames out of GStreamer, worded for the technician
//! who has to fix it: which source, what GStreamer said, and what to check.

use crate::ring::StreamEnd;

/// Errors from capture. Every variant names the source (as `SourceKind` is
/// described in messages, e.g. "v4l2 device /dev/video9") and says what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CaptureError {
    /// `gst::init` failed: the GStreamer installation itself is broken.
    #[error(
        "GStreamer cannot be initialised: {message} — check the GStreamer installation \
         (`gst-inspect-1.0 --version`; on Debian/JetPack the gstreamer1.0-tools and \
         gstreamer1.0-plugins-base packages)"
    )]
    Init { message: String },

    /// An element of the launch description does not exist: its plugin is not installed.
    #[error(
        "{origin} needs the GStreamer element `{element}`, which is not installed — \
         install {package} (check with `gst-inspect-1.0 {element}`)"
    )]
    MissingElement {
        origin: String,
        element: String,
        package: &'static str,
    },

    /// The launch description cannot be parsed or built.
    #[error("{origin}: the GStreamer pipeline cannot be built: {message} — {hint}")]
    Launch {
        origin: String,
        message: String,
        hint: &'static str,
    },

    /// A `[source] pipeline` description without an `appsink` named `sink`.
    #[error(
        "the [source] pipeline has {found}: it must end in `appsink name=sink` \
         (e.g. \"... ! videoconvert ! video/x-raw,format=RGB ! appsink name=sink\")"
    )]
    NoAppsink { found: String },

    /// The pipeline did not start (PLAYING refused, or an error while prerolling).
    #[error("{origin} cannot be {verb}: {reason} — {hint}")]
    Start {
        origin: String,
        verb: &'static str,
        reason: String,
        hint: &'static str,
    },

    /// An error message on the bus while running.
    #[error("{origin}: error from GStreamer element {element}: {message}{} — {hint}", debug_suffix(.debug))]
    Bus {
        origin: String,
        element: String,
        message: String,
        debug: Option<String>,
        hint: &'static str,
    },

    /// A GenICam camera refused a setting of the config (`kind = "genicam"`):
    /// a person has to change the config or the camera; no retry fixes it.
    #[error(
        "{origin}: the camera refuses {feature} = {value}: {reason}{} — change `{key}` in the \
         camera's config section (`arv-tool-0.8 -n CAMERA description` describes the camera's features)",
        accepts_suffix(.accepts)
    )]
    CameraRefused {
        origin: String,
        /// The GenICam feature, e.g. "ExposureTime" or "Width".
        feature: String,
        /// The config key that asked for it, e.g. "exposure_us" or "features".
        key: &'static str,
        value: String,
        reason: String,
        /// What the camera accepts: its range or its list of values.
        accepts: Option<String>,
    },

    /// A GenICam camera left to its own pixel format (no `pixel_format` in
    /// the config) sends one that sealcheck cannot convert to RGB: a person
    /// has to set `pixel_format`; no retry fixes it.
    #[error(
        "{origin}: the camera sends PixelFormat {current}, which sealcheck cannot convert (it reads \
         Mono8, RGB8 and 8-bit Bayer) — set `pixel_format` in the camera's config section{}",
        readable_suffix(.readable)
    )]
    PixelFormatUnread {
        origin: String,
        /// The camera's PixelFormat now, e.g. "Mono12".
        current: String,
        /// The camera's own entries that sealcheck reads.
        readable: Vec<String>,
    },

    /// The Aravis library (`libaravis-0.8.so.0`) cannot be loaded.
    #[error(
        "{origin} needs the Aravis library, which cannot be loaded: {reason} — install \
         libaravis-0.8-0 (Debian/Ubuntu: `sudo apt-get install libaravis-0.8-0 aravis-tools`)"
    )]
    Aravis { origin: String, reason: String },

    /// The capture thread watching the bus could not be started.
    #[error("{origin}: cannot start the capture thread: {reason}")]
    Thread { origin: String, reason: String },

    /// `decode_image_file` could not read or decode an image.
    #[error("image {} cannot be decoded: {reason}", path.display())]
    Image {
        path: std::path::PathBuf,
        reason: String,
    },
}

/// Why a source's stream of frames ended: the ring's `End` event as capture
/// sends it (`CaptureEvent::End`).
#[derive(Debug, Clone, PartialEq)]
pub enum EndOfStream {
    /// The source reached its end (EOS): a clip or an image sequence ran out.
    Finished,
    /// We asked the source to stop.
    Stopped,
    /// The source failed.
    Error(CaptureError),
}

impl StreamEnd for EndOfStream {
    fn stopped() -> Self {
        EndOfStream::Stopped
    }

    /// A failed camera stands for a run of several; then a stopped one.
    fn severity(&self) -> u8 {
        match self {
            EndOfStream::Finished => 0,
            EndOfStream::Stopped => 1,
            EndOfStream::Error(_) => 2,
        }
    }
}

fn accepts_suffix(accepts: &Option<String>) -> String {
    accepts
        .as_ref()
        .map_or_else(String::new, |a| format!("; the camera accepts {a}"))
}

/// The camera's entries sealcheck reads, and the `pixel_format` values for them.
fn readable_suffix(readable: &[String]) -> String {
    if readable.is_empty() {
        return " (the camera offers none of those: it cannot be used as it is)".to_string();
    }
    let mut keys: Vec<&str> = Vec::new();
    for entry in readable {
        let key = if entry.starts_with("Bayer") {
            "Bayer"
        } else {
            entry.as_str()
        };
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    let keys: Vec<String> = keys.iter().map(|k| format!("\"{k}\"")).collect();
    format!(
        " (the camera offers {}: pixel_format = {})",
        readable.join(", "),
        keys.join(" or ")
    )
}

fn debug_suffix(debug: &Option<String>) -> String {
    match debug {
        Some(debug) if !debug.is_empty() => format!(" (debug: {debug})"),
        _ => String::new(),
    }
}

/// The package that provides a GStreamer element, on Debian and JetPack.
pub(crate) fn package_for(element: &str) -> &'static str {
    match element {
        "filesrc" | "fakesink" | "queue" | "capsfilter" | "identity" | "tee" => {
            "gstreamer1.0 (core)"
        }
        "videotestsrc" | "videoconvert" | "videoscale" | "decodebin" | "uridecodebin"
        | "appsink" | "appsrc" | "playbin" => "gstreamer1.0-plugins-base",
        "v4l2src" | "rtspsrc" | "multifilesrc" | "multifilesink" | "jpegdec" | "jpegenc"
        | "pngdec" | "pngenc" | "qtdemux" | "matroskademux" | "rtph264depay" | "rtph265depay" => {
            "gstreamer1.0-plugins-good"
        }
        "h264parse" | "h265parse" | "jpegparse" | "pngparse" | "bayer2rgb" => {
            "gstreamer1.0-plugins-bad"
        }
        "aravissrc" => "libaravis-0.8-0 (Aravis and its GStreamer element)",
        e if e.starts_with("avdec_") => "gstreamer1.0-libav",
        e if e.starts_with("nv") => "the NVIDIA GStreamer plugins (JetPack nvidia-l4t-gstreamer)",
        _ => "the GStreamer plugin package that provides it",
    }
}
