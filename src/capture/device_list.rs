//! `sealcheck cameras`: what this machine can open, as a technician checks it
//! first. V4L2 devices come from GStreamer's device monitor with the formats
//! they offer; GenICam cameras (GigE Vision, USB3 Vision) from Aravis, with
//! id, address, model and the current PixelFormat, Width, Height, TriggerMode.

use std::fmt::Write as _;

use gstreamer as gst;
use gstreamer::prelude::*;

use super::genicam::{self, GenicamCameraInfo, list_genicam_cameras};
use super::library::init;

/// One V4L2 device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V4l2Device {
    /// `/dev/videoN`, what `device = ...` takes.
    pub path: String,
    pub name: String,
    /// One line per format: "YUY2 640x480 @ 30/1, 15/1".
    pub formats: Vec<String>,
}

/// Everything `sealcheck cameras` found.
#[derive(Debug, Clone)]
pub struct CameraList {
    pub v4l2: Result<Vec<V4l2Device>, String>,
    pub genicam: Result<Vec<GenicamCameraInfo>, String>,
}

/// Looks for cameras: V4L2 through GStreamer, GenICam through Aravis (a
/// GigE Vision discovery takes about a second).
pub fn list_cameras() -> CameraList {
    CameraList {
        v4l2: list_v4l2(),
        genicam: list_genicam_cameras().map_err(|reason| {
            format!(
                "Aravis ({}) cannot be loaded: {reason} — install libaravis-0.8-0 to use GigE Vision \
                 and USB3 Vision cameras",
                genicam::LIBRARY
            )
        }),
    }
}

fn list_v4l2() -> Result<Vec<V4l2Device>, String> {
    init().map_err(|e| e.to_string())?;
    let monitor = gst::DeviceMonitor::new();
    monitor.add_filter(Some("Video/Source"), None);
    monitor
        .start()
        .map_err(|e| format!("GStreamer's device monitor did not start: {e}"))?;
    let devices = monitor.devices();
    monitor.stop();
    Ok(devices
        .iter()
        .filter_map(|device| {
            let props = device.properties()?;
            let path = props
                .get::<String>("api.v4l2.path")
                .or_else(|_| props.get::<String>("device.path"))
                .ok()?;
            Some(V4l2Device {
                path,
                name: device.display_name().to_string(),
                formats: device.caps().map(|caps| formats(&caps)).unwrap_or_default(),
            })
        })
        .collect())
}

/// "FORMAT WxH @ rates" per caps structure, each line once.
fn formats(caps: &gst::Caps) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for s in caps.iter() {
        let format = s.get::<String>("format").unwrap_or_else(|_| {
            s.name()
                .trim_start_matches("video/x-")
                .trim_start_matches("image/")
                .to_string()
        });
        let size = match (s.get::<i32>("width"), s.get::<i32>("height")) {
            (Ok(w), Ok(h)) => format!("{w}x{h}"),
            _ => "any size".to_string(),
        };
        let rates = s
            .value("framerate")
            .ok()
            .and_then(|v| v.serialize().ok())
            .map(|r| format!(" @ {r}"))
            .unwrap_or_default();
        let line = format!("{format} {size}{rates}");
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    lines
}

impl CameraList {
    /// The list as printed: one block per kind, one line per camera.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("V4L2 cameras (kind = \"v4l2\", device = PATH):\n");
        match &self.v4l2 {
            Err(reason) => {
                let _ = writeln!(out, "  cannot list: {reason}");
            }
            Ok(list) if list.is_empty() => out.push_str("  none found\n"),
            Ok(list) => {
                for device in list {
                    let _ = writeln!(out, "  {}  {}", device.path, device.name);
                    for format in &device.formats {
                        let _ = writeln!(out, "      {format}");
                    }
                }
            }
        }
        out.push_str("GenICam cameras (kind = \"genicam\", camera = ID):\n");
        match &self.genicam {
            Err(reason) => {
                let _ = writeln!(out, "  cannot list: {reason}");
            }
            Ok(list) if list.is_empty() => out.push_str(
                "  none found (GigE Vision: the camera must be in this machine's subnet; \
                 see docs/OPERATIONS.md)\n",
            ),
            Ok(list) => {
                for camera in list {
                    let _ = writeln!(
                        out,
                        "  {}  address {}  {} {} ({})",
                        camera.id, camera.address, camera.vendor, camera.model, camera.protocol
                    );
                    match &camera.settings {
                        Ok(s) => {
                            let _ = writeln!(
                                out,
                                "      PixelFormat {}  Width {}  Height {}  TriggerMode {}",
                                s.pixel_format, s.width, s.height, s.trigger_mode
                            );
                        }
                        Err(reason) => {
                            let _ = writeln!(
                                out,
                                "      settings not readable: {reason} (is another program using it?)"
                            );
                        }
                    }
                }
            }
        }
        out
    }
}
