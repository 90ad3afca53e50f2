//! `[source]` or `[cameras.NAME]`: each camera's source kind, overflow,
//! pool and recovery, and its own `decision` over the station's.

use std::path::PathBuf;
use std::time::Duration;

use super::decision::read_decision;
use super::files::{Files, looked_for};
use crate::config::camera_name::camera_name_problem;
use crate::config::image_sequence;
use crate::config::raw::Section;
use crate::config::types::{
    CameraConfig, DecisionConfig, OverflowPolicy, SourceConfig, SourceKind, SourceRecovery,
};

/// `[source]` (one camera) or `[cameras.NAME]` tables (several), never both.
pub(super) fn read_cameras(
    root: &Section,
    files: &Files,
    decision: Option<&DecisionConfig>,
) -> Option<Vec<CameraConfig>> {
    // Asked with `given`, so that `cameras` is among the allowed keys either way.
    if !root.given("cameras") {
        let source = read_source(&root.section("source"), files);
        return Some(vec![CameraConfig {
            name: None,
            source: source?,
            decision: *decision?,
        }]);
    }
    let tables = root.section("cameras");
    if root.has("source") {
        root.section("source");
        root.problem(
            "source",
            "a config has either [source] (one camera) or [cameras.NAME] tables (several), not both: move this source into a [cameras.NAME] table",
        );
    }
    let names = tables.keys_in_file_order();
    if names.is_empty() {
        root.problem(
            "cameras",
            "[cameras] names no camera: add a [cameras.NAME] table per camera (the keys of [source]), or remove [cameras] and use [source]",
        );
        return None;
    }
    let mut cameras = Some(Vec::with_capacity(names.len()));
    for name in names {
        let problem = camera_name_problem(&name);
        let valid = problem.is_none();
        if let Some(problem) = problem {
            tables.problem(&name, format!("camera name \"{name}\" {problem}"));
        }
        let table = tables.section(&name);
        let own_decision = read_decision(&table.section("decision"), decision);
        let source = read_source(&table, files);
        cameras = match (cameras, source, own_decision) {
            (Some(mut list), Some(source), Some(decision)) if valid => {
                list.push(CameraConfig {
                    name: Some(name),
                    source,
                    decision,
                });
                Some(list)
            }
            _ => None,
        };
    }
    cameras
}

fn read_source(s: &Section, files: &Files) -> Option<SourceConfig> {
    const KINDS: [&str; 8] = [
        "test", "file", "images", "v4l2", "rtsp", "pipeline", "csi", "genicam",
    ];
    let kind_index = s.choice("kind", &KINDS, None);
    let kind = kind_index.and_then(|kind| read_source_kind(s, files, kind));
    let default_overflow = if kind.as_ref().is_some_and(SourceKind::is_live) {
        1
    } else {
        0
    };
    let overflow = s
        .choice("overflow", &["block", "drop"], Some(default_overflow))
        .map(|i| match i {
            0 => OverflowPolicy::Block,
            _ => OverflowPolicy::Drop,
        });
    let pool_size = s.int_in("pool_size", 2..=64, Some(4));
    let recovery = read_recovery(s);
    let layout = super::layout::read_layout(s);
    // Which keys belong in [source] depends on the kind: judge them only once it is known.
    if kind_index.is_some() {
        s.finish();
    }
    let (kind, layout) = (kind?, layout?);
    if let (Some(layout), Some((width, height))) = (&layout, kind.frame_size())
        && let Err(misfit) = layout.check_frame(width, height)
    {
        s.section("layout").problem("rows", misfit.to_string());
        return None;
    }
    Some(SourceConfig {
        kind,
        overflow: overflow?,
        pool_size: pool_size? as usize,
        recovery: recovery?,
        layout: layout.map(std::sync::Arc::new),
    })
}

/// `retry_min_ms`, `retry_max_ms`, `frame_timeout_ms` of `[source]` (live sources).
fn read_recovery(s: &Section) -> Option<SourceRecovery> {
    let default = SourceRecovery::default();
    let ms = |d: Duration| d.as_millis() as i64;
    let retry_min = s.int_in("retry_min_ms", 10..=600_000, Some(ms(default.retry_min)));
    let retry_max = s.int_in("retry_max_ms", 10..=3_600_000, Some(ms(default.retry_max)));
    let frame_timeout = if s.has("frame_timeout_ms") {
        Some(s.int_in("frame_timeout_ms", 100..=3_600_000, None)?)
    } else {
        s.int_in("frame_timeout_ms", 0..=0, Some(0));
        None
    };
    let (retry_min, retry_max) = (retry_min?, retry_max?);
    if retry_min > retry_max {
        s.problem(
            "retry_min_ms",
            format!("({retry_min}) must not exceed retry_max_ms ({retry_max})"),
        );
        return None;
    }
    Some(SourceRecovery {
        retry_min: Duration::from_millis(retry_min as u64),
        retry_max: Duration::from_millis(retry_max as u64),
        frame_timeout: frame_timeout.map(|ms| Duration::from_millis(ms as u64)),
    })
}

fn read_source_kind(s: &Section, files: &Files, kind: usize) -> Option<SourceKind> {
    let kind = match kind {
        0 => {
            let pattern = s.str_or("pattern", "smpte");
            let width = s.int_in("width", 16..=7680, Some(1280));
            let height = s.int_in("height", 16..=4320, Some(720));
            let framerate = s.int_in("framerate", 1..=240, Some(30));
            let num_buffers = s.int_in("num_buffers", 0..=u32::MAX as i64, Some(0));
            SourceKind::Test {
                pattern,
                width: width? as u32,
                height: height? as u32,
                framerate: framerate? as u32,
                num_buffers: num_buffers? as u32,
            }
        }
        1 => SourceKind::File {
            path: files.existing(s, "path", "the video file to read")?,
        },
        2 => {
            let location = s.str_required(
                "location",
                "a numbered file pattern such as \"frames/frame_%05d.jpg\"",
            );
            let framerate = s.int_in("framerate", 1..=240, Some(30));
            let (location, framerate) = (files.resolve(&location?), framerate? as u32);
            let first = image_sequence::image_file(&location, 0);
            if !image_sequence::is_numbered(&location) {
                s.problem(
                    "location",
                    "must contain a printf-style index such as %05d (e.g. \"frame_%05d.jpg\")",
                );
                return None;
            }
            if !first.is_file() {
                s.problem(
                    "location",
                    format!(
                        "the first image {} does not exist",
                        looked_for(&first).display()
                    ),
                );
                return None;
            }
            SourceKind::Images {
                location,
                framerate,
            }
        }
        3 => SourceKind::V4l2 {
            device: PathBuf::from(s.str_or("device", "/dev/video0")),
            caps: s.opt_str("caps"),
        },
        4 => {
            let url = s.str_required("url", "the camera's rtsp:// URL");
            let latency_ms = s.int_in("latency_ms", 0..=10_000, Some(200));
            let url = url?;
            if !url.starts_with("rtsp://") && !url.starts_with("rtsps://") {
                s.problem(
                    "url",
                    format!("\"{url}\" is not an rtsp:// or rtsps:// URL"),
                );
            }
            SourceKind::Rtsp {
                url,
                latency_ms: latency_ms? as u32,
            }
        }
        7 => return super::genicam::read_genicam(s),
        6 => {
            let sensor_id = s.int_in("sensor_id", 0..=7, Some(0));
            let width = s.int_in("width", 16..=7680, Some(1920));
            let height = s.int_in("height", 16..=4320, Some(1080));
            let framerate = s.int_in("framerate", 1..=240, Some(30));
            SourceKind::Csi {
                sensor_id: sensor_id? as u32,
                width: width? as u32,
                height: height? as u32,
                framerate: framerate? as u32,
            }
        }
        _ => {
            let description = s.str_required(
                "pipeline",
                "a GStreamer launch description ending in \"appsink name=sink\"",
            )?;
            if !description.contains("name=sink") {
                s.problem(
                    "pipeline",
                    "must end in an appsink named sink (\"... ! appsink name=sink\")",
                );
            }
            // A camera behind a user pipeline: drops by default and is rebuilt when lost.
            let live = s.bool_or("live", false);
            SourceKind::Pipeline { description, live }
        }
    };
    Some(kind)
}
