//! The pixel format a `kind = "genicam"` camera streams, and what the
//! pipeline does with it.
//!
//! With `pixel_format` in the config, that format is set on the camera (a
//! Bayer choice takes the sensor's own pattern). Without it the camera keeps
//! the PixelFormat it has and the pipeline follows it. Either way the
//! capsfilter after `aravissrc` is set to that one format (`aravissrc` would
//! otherwise pick the first format the camera offers, and set it), and a Bayer
//! format gets `bayer2rgb` put in before `videoconvert`:
//!
//! ```text
//! Mono8:      aravissrc - camera_caps (GRAY8) -------------- videoconvert - RGB - appsink
//! RGB8:       aravissrc - camera_caps (RGB) ---------------- videoconvert - ...
//! BayerRG8..: aravissrc - camera_caps (x-bayer) - bayer2rgb - videoconvert - ...
//! ```

use gstreamer as gst;
use gstreamer::prelude::*;

use super::sys::Camera;
use crate::capture::error::{CaptureError, package_for};
use crate::config::GenicamPixelFormat;

/// Raw Bayer formats and their GStreamer names (`video/x-bayer,format=...`).
const BAYER_PATTERNS: [(&str, &str); 4] = [
    ("BayerRG8", "rggb"),
    ("BayerBG8", "bggr"),
    ("BayerGR8", "grbg"),
    ("BayerGB8", "gbrg"),
];

/// The element put in for a Bayer format.
const DEMOSAIC: &str = "bayer2rgb";

/// The format the camera will stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Streamed {
    /// The camera's PixelFormat entry, e.g. "BayerRG8".
    pub(super) name: String,
    /// The caps `aravissrc` is asked for.
    pub(super) caps: String,
    /// Raw Bayer: demosaiced by `bayer2rgb`.
    pub(super) bayer: bool,
    /// From the config (set on the camera), or the camera's own (left as it is).
    pub(super) from_config: bool,
}

/// Why no format could be chosen.
pub(super) enum FormatProblem {
    /// The config's choice is not among the camera's entries: (reason, what it offers).
    Refused(String, Option<String>),
    /// Left to the camera, which sends a format sealcheck cannot convert:
    /// (the camera's format, those of its entries sealcheck reads).
    Unreadable(String, Vec<String>),
    /// The camera did not answer.
    Io(String),
}

/// The caps for a PixelFormat entry sealcheck reads, and whether it is Bayer.
fn caps_of(name: &str) -> Option<(String, bool)> {
    match name {
        "Mono8" => Some(("video/x-raw,format=GRAY8".into(), false)),
        "RGB8" => Some(("video/x-raw,format=RGB".into(), false)),
        _ => BAYER_PATTERNS
            .iter()
            .find(|(entry, _)| *entry == name)
            .map(|(_, pattern)| (format!("video/x-bayer,format={pattern}"), true)),
    }
}

/// The format for the config's choice (`None`: the camera's current one).
pub(super) fn choose(
    camera: &Camera,
    wanted: Option<GenicamPixelFormat>,
) -> Result<Streamed, FormatProblem> {
    let entries = camera.enumeration("PixelFormat").ok_or_else(|| {
        FormatProblem::Refused("the camera has no PixelFormat enumeration".into(), None)
    })?;
    let current = camera.value("PixelFormat").map_err(FormatProblem::Io)?;
    let name = match wanted {
        None => {
            if caps_of(&current).is_none() {
                let readable = entries
                    .iter()
                    .filter(|e| caps_of(e).is_some())
                    .cloned()
                    .collect();
                return Err(FormatProblem::Unreadable(current, readable));
            }
            current
        }
        Some(wanted) => configured(&entries, &current, wanted)?,
    };
    let (caps, bayer) = caps_of(&name).expect("a format sealcheck reads");
    Ok(Streamed {
        name,
        caps,
        bayer,
        from_config: wanted.is_some(),
    })
}

/// The PixelFormat entry for the config's choice. Bayer takes the camera's
/// current Bayer pattern, else the first it offers.
fn configured(
    entries: &[String],
    current: &str,
    wanted: GenicamPixelFormat,
) -> Result<String, FormatProblem> {
    let offered = |name: &str| entries.iter().any(|e| e == name);
    let refused = |reason: &str| FormatProblem::Refused(reason.into(), Some(entries.join(", ")));
    match wanted {
        GenicamPixelFormat::Mono8 if offered("Mono8") => Ok("Mono8".into()),
        GenicamPixelFormat::Rgb8 if offered("RGB8") => Ok("RGB8".into()),
        GenicamPixelFormat::Bayer => BAYER_PATTERNS
            .iter()
            .map(|(name, _)| *name)
            .find(|name| *name == current)
            .or_else(|| {
                BAYER_PATTERNS
                    .iter()
                    .map(|(name, _)| *name)
                    .find(|name| offered(name))
            })
            .map(str::to_string)
            .ok_or_else(|| refused("the camera offers no 8-bit Bayer format")),
        _ => Err(refused("the camera does not offer it")),
    }
}

/// Puts `bayer2rgb` between the capsfilter `camera_caps` and the element
/// after it (`videoconvert`), in a pipeline not yet started.
pub(super) fn insert_demosaic(pipeline: &gst::Pipeline, origin: &str) -> Result<(), CaptureError> {
    let broken = |what: String| CaptureError::Launch {
        origin: origin.to_string(),
        message: what,
        hint: "report this: the genicam pipeline could not take bayer2rgb",
    };
    let filter = pipeline
        .by_name("camera_caps")
        .ok_or_else(|| broken("the pipeline has no element named camera_caps".into()))?;
    let out = filter
        .static_pad("src")
        .ok_or_else(|| broken("camera_caps has no src pad".into()))?;
    let next = out
        .peer()
        .ok_or_else(|| broken("camera_caps is not linked".into()))?;
    let demosaic = gst::ElementFactory::make(DEMOSAIC)
        .name("demosaic")
        .build()
        .map_err(|_| CaptureError::MissingElement {
            origin: origin.to_string(),
            element: DEMOSAIC.into(),
            package: package_for(DEMOSAIC),
        })?;
    pipeline.add(&demosaic).map_err(|e| broken(e.to_string()))?;
    out.unlink(&next).map_err(|e| broken(e.to_string()))?;
    filter.link(&demosaic).map_err(|e| broken(e.to_string()))?;
    demosaic
        .static_pad("src")
        .ok_or_else(|| broken("bayer2rgb has no src pad".into()))?
        .link(&next)
        .map_err(|e| broken(e.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn the_formats_sealcheck_reads_have_caps_and_bayer_is_demosaiced() {
        assert_eq!(
            caps_of("Mono8"),
            Some(("video/x-raw,format=GRAY8".into(), false))
        );
        assert_eq!(
            caps_of("RGB8"),
            Some(("video/x-raw,format=RGB".into(), false))
        );
        assert_eq!(
            caps_of("BayerGR8"),
            Some(("video/x-bayer,format=grbg".into(), true))
        );
        for unread in ["Mono12", "BayerRG12", "YUV422Packed", ""] {
            assert_eq!(caps_of(unread), None, "{unread}");
        }
    }

    #[test]
    fn a_configured_bayer_takes_the_sensors_pattern() {
        let offered = entries(&["Mono8", "BayerGB8", "BayerRG8"]);
        let chosen = |current: &str, wanted| match configured(&offered, current, wanted) {
            Ok(name) => name,
            Err(_) => "refused".into(),
        };
        assert_eq!(chosen("BayerRG8", GenicamPixelFormat::Bayer), "BayerRG8");
        // Not Bayer now: the first pattern (in our order) the camera offers.
        assert_eq!(chosen("Mono8", GenicamPixelFormat::Bayer), "BayerRG8");
        assert_eq!(chosen("BayerRG8", GenicamPixelFormat::Mono8), "Mono8");
        assert_eq!(chosen("Mono8", GenicamPixelFormat::Rgb8), "refused");
    }
}
