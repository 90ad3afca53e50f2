//! At every open of a `kind = "genicam"` pipeline, between `aravissrc` opening
//! the camera (setting `camera-name` does) and PLAYING: the config's settings
//! are checked against what the camera offers and applied, so a refused
//! setting is named with its value and the camera's range before any frame.
//!
//! What `aravissrc` itself does at caps negotiation shapes the order: it sets
//! the pixel format from the caps, sets the frame rate (which clears every
//! trigger: `arv_camera_set_frame_rate`), then applies its `features` string.
//! So exposure, gain and the config's `features` are set here, once; the
//! trigger goes into the element's `features` string, applied after. The
//! pixel format (`format`) is pinned in the capsfilter; one the config names
//! is also set here, so that the camera's PayloadSize is the streamed frame's
//! when the socket buffer is checked (`link::GenicamLink::check_socket_buffer`).

use std::str::FromStr;

use gstreamer as gst;
use gstreamer::prelude::*;

use super::format::{self, FormatProblem};
use super::sys::Camera;
use crate::capture::error::CaptureError;
use crate::config::{CameraValue, GenicamSource, GenicamTrigger};

/// Checks and applies `config` to the camera `aravissrc` opened; sets the
/// capsfilter `camera_caps` and the element's `features`. `origin` names the
/// source. Returns the camera, set up.
pub(crate) fn prepare(
    config: &GenicamSource,
    pipeline: &gst::Pipeline,
    camera: Camera,
    origin: &str,
) -> Result<Camera, CaptureError> {
    let refused = |key: &'static str,
                   feature: &str,
                   value: String,
                   reason: String,
                   accepts: Option<String>| {
        CaptureError::CameraRefused {
            origin: origin.to_string(),
            feature: feature.to_string(),
            key,
            value,
            reason,
            accepts,
        }
    };
    for (name, value) in &config.features {
        apply_feature(&camera, name, value).map_err(|refusal| match refusal {
            Failure::Refused(reason, accepts) => {
                refused("features", name, value.clone(), reason, accepts)
            }
            Failure::Io(reason) => unreachable_camera(origin, name, &reason),
        })?;
    }
    let setting_failed = |key, feature, (value, failure): (String, Failure)| match failure {
        Failure::Refused(reason, accepts) => refused(key, feature, value, reason, accepts),
        Failure::Io(reason) => unreachable_camera(origin, feature, &reason),
    };
    let exposure_us = apply_value(&camera, &config.exposure_us, Setting::Exposure)
        .map_err(|f| setting_failed("exposure_us", "ExposureTime", f))?;
    let gain_db = apply_value(&camera, &config.gain_db, Setting::Gain)
        .map_err(|f| setting_failed("gain_db", "Gain", f))?;
    let format = format::choose(&camera, config.pixel_format).map_err(|problem| match problem {
        FormatProblem::Refused(reason, accepts) => refused(
            "pixel_format",
            "PixelFormat",
            config
                .pixel_format
                .map_or("(left to the camera)", |f| f.name())
                .into(),
            reason,
            accepts,
        ),
        FormatProblem::Unreadable(current, readable) => CaptureError::PixelFormatUnread {
            origin: origin.to_string(),
            current,
            readable,
        },
        FormatProblem::Io(reason) => unreachable_camera(origin, "PixelFormat", &reason),
    })?;
    if format.from_config {
        // Set here (aravissrc sets it again from the caps) so that the
        // camera's PayloadSize is the streamed frame's from now on.
        camera
            .set_features(&format!("PixelFormat={}", format.name))
            .map_err(|reason| unreachable_camera(origin, "PixelFormat", &reason))?;
    }
    let trigger = trigger_features(&camera, config.trigger).map_err(|(reason, accepts)| {
        refused(
            "trigger",
            "TriggerSource",
            config.trigger.name(),
            reason,
            accepts,
        )
    })?;
    let mut caps = format.caps.clone();
    if config.trigger != GenicamTrigger::Off
        && let Ok((min, _)) = camera.frame_rate_bounds()
        && min > 0.0
    {
        // Triggered: frames come only when triggered, and `aravissrc` ends its
        // stream after 3 frame intervals of the caps' rate without a frame. The
        // camera's lowest rate gives the longest wait the element allows.
        let (n, d) = fraction(min);
        caps = format!("{caps},framerate={n}/{d}");
    }
    let caps = gst::Caps::from_str(&caps).map_err(|e| CaptureError::Launch {
        origin: origin.to_string(),
        message: format!("caps \"{caps}\": {e}"),
        hint: "report this: the caps for the camera's pixel format do not parse",
    })?;
    let filter = pipeline
        .by_name("camera_caps")
        .ok_or_else(|| CaptureError::Launch {
            origin: origin.to_string(),
            message: "the pipeline has no element named camera_caps".into(),
            hint: "report this: the genicam pipeline lost its capsfilter",
        })?;
    filter.set_property("caps", caps);
    if format.bayer {
        format::insert_demosaic(pipeline, origin)?;
    }
    if let Some(src) = pipeline.by_name("src") {
        src.set_property("features", trigger.as_str());
    }
    let pixel_format_from = if format.from_config {
        "config"
    } else {
        "camera"
    };
    log::info!(target: "sealcheck::capture", source = origin, pixel_format = format.name.as_str(),
        pixel_format_from = pixel_format_from,
        exposure_us = exposure_us.unwrap_or(f64::NAN), gain_db = gain_db.unwrap_or(f64::NAN),
        trigger = config.trigger.name().as_str();
        "camera set up (pixel format from the {pixel_format_from}; exposure and gain as read back from the camera)");
    Ok(camera)
}

/// Why a feature was refused, and what the camera accepts.
type Refusal = (String, Option<String>);

/// A `features` assignment that failed: refused by the camera's own
/// description (a person must change the config), or a write that did not go
/// through (timeout, another program holds the camera: time may fix it).
enum Failure {
    Refused(String, Option<String>),
    Io(String),
}

/// A camera that did not take a write: a start error, so a live source
/// retries (the camera may be rebooting, or still held by a pipeline being torn down).
fn unreachable_camera(origin: &str, feature: &str, reason: &str) -> CaptureError {
    CaptureError::Start {
        origin: origin.to_string(),
        verb: "opened",
        reason: format!("the camera did not take {feature}: {reason}"),
        hint: "check that no other program (a vendor viewer, a second sealcheck) holds the camera \
               and that it answers (`sealcheck cameras`)",
    }
}

/// One `features` assignment: the camera must know the feature, a number must
/// lie in its range, an enumeration entry must be one of its entries.
fn apply_feature(camera: &Camera, name: &str, value: &str) -> Result<(), Failure> {
    if !camera.knows(name).map_err(Failure::Io)? {
        return Err(Failure::Refused(
            "the camera has no such feature".into(),
            None,
        ));
    }
    if let Some((min, max)) = camera.numeric_bounds(name) {
        let accepts = Some(format!("{min} to {max}"));
        let Ok(number) = value.parse::<f64>() else {
            return Err(Failure::Refused("not a number".into(), accepts));
        };
        if number < min || number > max {
            return Err(Failure::Refused(
                "out of the camera's range".into(),
                accepts,
            ));
        }
    } else if let Some(entries) = camera.enumeration(name)
        && !entries.iter().any(|e| e == value)
    {
        return Err(Failure::Refused(
            "not one of the camera's values".into(),
            Some(entries.join(", ")),
        ));
    }
    camera
        .set_features(&format!("{name}={value}"))
        .map_err(Failure::Io)
}

enum Setting {
    Exposure,
    Gain,
}

/// A recipe's exposure (µs) and gain (dB) on the open `camera`, each
/// checked against the camera's range; the values read back after. The
/// message of a refusal names the setting, its value and what the camera
/// accepts.
pub(crate) fn apply_settings(
    camera: &Camera,
    exposure_us: Option<f64>,
    gain_db: Option<f64>,
) -> Result<(Option<f64>, Option<f64>), String> {
    let apply =
        |value: Option<f64>, setting, key: &str| match value {
            None => Ok(None),
            Some(wanted) => apply_value(camera, &CameraValue::Fixed(wanted), setting).map_err(
                |(value, failure)| match failure {
                    Failure::Refused(reason, accepts) => format!(
                        "{key} = {value} refused: {reason}{}",
                        accepts.map_or(String::new(), |a| format!(" (it accepts {a})"))
                    ),
                    Failure::Io(reason) => format!("{key} = {value} not set: {reason}"),
                },
            ),
        };
    let exposure = apply(exposure_us, Setting::Exposure, "exposure_us")?;
    let gain = apply(gain_db, Setting::Gain, "gain_db")?;
    Ok((exposure, gain))
}

/// Sets exposure or gain; returns the value the camera reports afterwards.
fn apply_value(
    camera: &Camera,
    value: &CameraValue,
    setting: Setting,
) -> Result<Option<f64>, (String, Failure)> {
    let read = || match setting {
        Setting::Exposure => camera.exposure(),
        Setting::Gain => camera.gain(),
    };
    match *value {
        CameraValue::Unchanged => Ok(read().ok()),
        CameraValue::Auto => {
            let set = match setting {
                Setting::Exposure => camera.set_exposure_auto(),
                Setting::Gain => camera.set_gain_auto(),
            };
            set.map_err(|e| {
                let accepts = Some("a fixed value (it has no auto mode)".to_string());
                ("auto".to_string(), Failure::Refused(e, accepts))
            })?;
            Ok(read().ok())
        }
        CameraValue::Fixed(wanted) => {
            let bounds = match setting {
                Setting::Exposure => camera.exposure_bounds(),
                Setting::Gain => camera.gain_bounds(),
            };
            let (min, max) = bounds.map_err(|e| (wanted.to_string(), Failure::Refused(e, None)))?;
            let accepts = Some(format!("{min} to {max}"));
            if wanted < min || wanted > max {
                return Err((
                    wanted.to_string(),
                    Failure::Refused("out of the camera's range".into(), accepts),
                ));
            }
            let set = match setting {
                Setting::Exposure => camera.set_exposure(wanted),
                Setting::Gain => camera.set_gain(wanted),
            };
            set.map_err(|e| (wanted.to_string(), Failure::Io(e)))?;
            let got = read().map_err(|e| (wanted.to_string(), Failure::Io(e)))?;
            Ok(Some(got))
        }
    }
}

/// The element's `features` string that sets the frame trigger.
fn trigger_features(camera: &Camera, trigger: GenicamTrigger) -> Result<String, Refusal> {
    let mut features = Vec::new();
    if camera.knows("TriggerSelector").unwrap_or(false) {
        features.push("TriggerSelector=FrameStart".to_string());
    }
    let source = match trigger {
        GenicamTrigger::Off => {
            if camera.knows("TriggerMode").unwrap_or(false) {
                features.push("TriggerMode=Off".into());
            }
            return Ok(features.join(" "));
        }
        GenicamTrigger::Line(n) => format!("Line{n}"),
        GenicamTrigger::Software => "Software".to_string(),
    };
    let sources = camera.enumeration("TriggerSource").ok_or_else(|| {
        (
            "the camera has no TriggerSource: it cannot be triggered".to_string(),
            None,
        )
    })?;
    if !sources.iter().any(|s| *s == source) {
        return Err((
            format!("the camera has no trigger source {source}"),
            Some(sources.join(", ")),
        ));
    }
    if trigger == GenicamTrigger::Software && !camera.knows("TriggerSoftware").unwrap_or(false) {
        return Err(("the camera has no TriggerSoftware command".into(), None));
    }
    features.push("TriggerMode=On".into());
    features.push(format!("TriggerSource={source}"));
    // Setting the caps' frame rate enables the rate limit on cameras that
    // have one (Basler, FLIR): it would cap the trigger rate. Off again.
    if camera.knows("AcquisitionFrameRateEnable").unwrap_or(false) {
        features.push("AcquisitionFrameRateEnable=false".into());
    }
    Ok(features.join(" "))
}

/// A frame rate as a GStreamer fraction, rounded up to 1/1000 fps (so it
/// stays within the camera's range, whose lower end it is).
fn fraction(rate: f64) -> (i64, i64) {
    let thousandths = ((rate * 1000.0 - 1e-9).ceil() as i64).max(1);
    let gcd = gcd(thousandths, 1000);
    (thousandths / gcd, 1000 / gcd)
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_rates_become_fractions_rounded_up() {
        assert_eq!(fraction(0.1), (1, 10));
        assert_eq!(fraction(25.0), (25, 1));
        assert_eq!(fraction(0.0286), (29, 1000));
        assert_eq!(fraction(0.0), (1, 1000));
    }
}
