//! `kind = "genicam"`: an industrial camera's keys, each checked on its own so
//! `check-config` lists every problem at once. What only the camera can say
//! (a feature it lacks, a value outside its range) is checked at start.

use crate::config::raw::Section;
use crate::config::types::SourceKind;
use crate::config::{
    CameraValue, GenicamPixelFormat, GenicamSource, GenicamTrigger, parse_features,
};

/// Widest exposure any camera offers (µs): 100 s.
pub(super) const EXPOSURE_MAX_US: f64 = 100_000_000.0;
/// Gain in dB; cameras offer 0 to a few tens.
pub(super) const GAIN_MAX_DB: f64 = 100.0;

pub(super) fn read_genicam(s: &Section) -> Option<SourceKind> {
    let camera = s.opt_str("camera").filter(|c| !c.trim().is_empty());
    let exposure_us = read_value(s, "exposure_us", 1.0..=EXPOSURE_MAX_US);
    let gain_db = read_value(s, "gain_db", 0.0..=GAIN_MAX_DB);
    // Left out: the camera keeps its PixelFormat and the pipeline follows it.
    let pixel_format = if s.has("pixel_format") {
        s.choice("pixel_format", &GenicamPixelFormat::NAMES, None)
            .map(|i| {
                Some(match i {
                    0 => GenicamPixelFormat::Mono8,
                    1 => GenicamPixelFormat::Rgb8,
                    _ => GenicamPixelFormat::Bayer,
                })
            })
    } else {
        s.opt_str("pixel_format");
        Some(None)
    };
    let packet_size = if s.has("packet_size") {
        s.int_in("packet_size", 576..=16_384, None)
            .map(|n| Some(n as u32))
    } else {
        s.opt_str("packet_size");
        Some(None)
    };
    let features = match s.opt_str("features") {
        None => Some(Vec::new()),
        Some(text) => match parse_features(&text) {
            Ok(features) => {
                for (name, _) in &features {
                    if is_managed(name) {
                        s.problem(
                            "features",
                            format!(
                                "sets {name}, which sealcheck sets itself: use the `trigger`, \
                                     `exposure_us`, `gain_db` or `pixel_format` key instead"
                            ),
                        );
                    }
                }
                Some(features)
            }
            Err(problem) => {
                s.problem(
                    "features",
                    format!(
                        "{problem}: write GenICam assignments separated by spaces, \
                             e.g. \"BalanceWhiteAuto=Off Width=1024\""
                    ),
                );
                None
            }
        },
    };
    let trigger = match s.opt_str("trigger") {
        None => Some(GenicamTrigger::Off),
        Some(text) => GenicamTrigger::parse(&text).or_else(|| {
            s.problem(
                "trigger",
                format!("\"{text}\" is not a trigger: use \"off\" (free run), \"line0\", \"line1\", ... \
                         (the camera's input line a photo-eye is wired to) or \"software\""),
            );
            None
        }),
    };
    Some(SourceKind::Genicam(GenicamSource {
        camera,
        exposure_us: exposure_us?,
        gain_db: gain_db?,
        pixel_format: pixel_format?,
        packet_size: packet_size?,
        features: features?,
        trigger: trigger?,
    }))
}

fn read_value(s: &Section, key: &str, range: std::ops::RangeInclusive<f64>) -> Option<CameraValue> {
    if !s.has(key) {
        s.opt_str(key);
        return Some(CameraValue::Unchanged);
    }
    s.float_or_auto(key, range)
        .map(|v| v.map_or(CameraValue::Auto, CameraValue::Fixed))
}

/// Features that the dedicated keys own: set twice, the later would win silently.
fn is_managed(name: &str) -> bool {
    matches!(
        name,
        "TriggerMode"
            | "TriggerSource"
            | "TriggerSelector"
            | "TriggerSoftware"
            | "PixelFormat"
            | "ExposureTime"
            | "ExposureTimeAbs"
            | "ExposureAuto"
            | "Gain"
            | "GainRaw"
            | "GainAuto"
            | "GevSCPSPacketSize"
    )
}
