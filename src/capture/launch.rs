//! `[source]` to a GStreamer pipeline. Every source ends in the same tail, so
//! frames always reach us as tightly negotiated RGB:
//!
//! ```text
//! test:     {videotestsrc} - {capsfilter WxH@N} -.
//! file:     {filesrc} - {decodebin} ---------------+- {videoconvert} - {video/x-raw,format=RGB} - {appsink "sink"}
//! v4l2:     {v4l2src} [- {capsfilter} [- {decodebin}]] -+
//! rtsp:     {rtspsrc} - {decodebin} ---------------'
//! images:   {appsrc "src"} (RGB frames decoded file by file by `image_feeder`) - {appsink "sink"}
//! genicam:  {aravissrc} - {capsfilter camera_caps} [- {bayer2rgb}] -+ (caps set, and bayer2rgb put in, by `genicam::prepare`)
//! pipeline: the user's description, which must contain {appsink name=sink}
//! ```
//!
//! Paths, URLs, devices and caps never go into the launch string: they are set as
//! properties on named elements after parsing, so no quoting or escaping can break
//! them (a path with spaces, quotes or `!` is just a path).

use std::path::Path;
use std::str::FromStr;

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;

use super::error::{CaptureError, package_for};
use crate::config::SourceKind;

/// The common tail: convert to RGB and hand frames to our appsink.
const RGB_TAIL: &str = "videoconvert ! video/x-raw,format=RGB ! appsink name=sink";

/// How a source is named in messages, e.g. "v4l2 device /dev/video9".
/// Credentials in an RTSP URL are hidden.
pub(crate) fn describe(kind: &SourceKind) -> String {
    match kind {
        SourceKind::Test {
            pattern,
            width,
            height,
            framerate,
            ..
        } => {
            format!("test source (videotestsrc {pattern} {width}x{height}@{framerate})")
        }
        SourceKind::File { path } => format!("video file {}", path.display()),
        SourceKind::Images { location, .. } => format!("image sequence {}", location.display()),
        SourceKind::V4l2 { device, .. } => format!("v4l2 device {}", device.display()),
        SourceKind::Rtsp { url, .. } => format!("RTSP camera {}", redact_url(url)),
        SourceKind::Csi {
            sensor_id,
            width,
            height,
            framerate,
        } => format!("CSI camera {sensor_id} ({width}x{height}@{framerate})"),
        SourceKind::Pipeline { .. } => "[source] pipeline".to_string(),
        SourceKind::Genicam(g) => match &g.camera {
            Some(camera) => format!("GenICam camera {camera}"),
            None => "GenICam camera (the first found)".to_string(),
        },
    }
}

/// What a technician should check when the source fails.
pub(crate) fn hint(kind: &SourceKind) -> &'static str {
    match kind {
        SourceKind::Test { .. } => {
            "check the test settings in [source] (pattern, width, height, framerate)"
        }
        SourceKind::File { .. } => {
            "check the `path` key in [source] and that GStreamer can play the file (`gst-play-1.0 FILE`)"
        }
        SourceKind::Images { .. } => {
            "check the `location` key in [source]: a printf pattern such as frame_%05d.jpg, \
             files numbered from 0, .jpg/.jpeg or .png"
        }
        SourceKind::V4l2 { .. } => {
            "check the camera is connected and the `device` key in [source] (`v4l2-ctl --list-devices`), \
             that the service may open it (group video) and, if set, that the camera supports the `caps` key"
        }
        SourceKind::Rtsp { .. } => {
            "check the camera is powered and reachable, and the `url` (with its credentials) and `latency_ms` keys in [source]"
        }
        SourceKind::Csi { .. } => {
            "check the CSI camera's ribbon cable and the `sensor_id` key in [source], that nvargus-daemon runs \
             (`sudo systemctl status nvargus-daemon`), and that the sensor offers the width, height and \
             framerate asked for (`gst-launch-1.0 nvarguscamerasrc num-buffers=1 ! fakesink` lists its modes)"
        }
        // Root (CAP_NET_RAW) makes Aravis read the stream on a packet socket,
        // which sees nothing of a camera on this machine: the likeliest cause then.
        SourceKind::Genicam(_) if super::net_raw::holds_net_raw() => {
            "this process holds CAP_NET_RAW (root?): Aravis then receives GigE Vision streams on a packet \
             socket, which sees no frame from a camera on this machine (the simulator on loopback), so \
             `sealcheck cameras` finds it but no frame arrives. Run as the service user, or without the \
             capability (`setpriv --bounding-set=-net_raw --inh-caps=-net_raw sealcheck run ...`; \
             docs/OPERATIONS.md, \"The service user and the network\"). Otherwise check the camera is \
             powered and reachable, its IP address is in this machine's subnet and no other program \
             (a vendor viewer) holds it"
        }
        SourceKind::Genicam(_) => {
            "check the camera is powered and reachable (`sealcheck cameras` lists what Aravis finds) \
             and the `camera` key; for GigE Vision, that the camera's IP address is in this machine's \
             subnet and that no other program (a vendor viewer) holds the camera"
        }
        SourceKind::Pipeline { .. } => {
            "check the `pipeline` key in [source]: try it with gst-launch-1.0 (appsink replaced by fakesink), \
             and make it deliver video/x-raw,format=RGB to appsink name=sink"
        }
    }
}

/// The verb for "cannot be ...": what starting means for this source.
pub(crate) fn start_verb(kind: &SourceKind) -> &'static str {
    match kind {
        SourceKind::File { .. } | SourceKind::Images { .. } => "read",
        SourceKind::V4l2 { .. } | SourceKind::Csi { .. } | SourceKind::Genicam(_) => "opened",
        SourceKind::Rtsp { .. } => "reached",
        SourceKind::Test { .. } | SourceKind::Pipeline { .. } => "started",
    }
}

/// `rtsp://user:secret@host/...` → `rtsp://user:***@host/...`.
fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let authority_end = url[scheme_end..]
        .find('/')
        .map_or(url.len(), |i| scheme_end + i);
    let Some(at) = url[scheme_end..authority_end]
        .rfind('@')
        .map(|i| scheme_end + i)
    else {
        return url.to_string();
    };
    match url[scheme_end..at].find(':') {
        Some(colon) => format!("{}:***{}", &url[..scheme_end + colon], &url[at..]),
        None => url.to_string(),
    }
}

/// Image sequences are JPEG or PNG files, named so.
fn check_image_extension(location: &Path, origin: &str) -> Result<(), CaptureError> {
    let extension = location
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    match extension.as_deref() {
        Some("jpg" | "jpeg" | "png") => Ok(()),
        other => Err(CaptureError::Launch {
            origin: origin.to_string(),
            message: format!(
                "image files must be .jpg, .jpeg or .png, not {}",
                other.unwrap_or("(no extension)")
            ),
            hint: "name the files with a .jpg, .jpeg or .png extension in the `location` key in [source]",
        }),
    }
}

/// Builds (does not start) the pipeline for `kind`, with the appsink named `sink`
/// asking for RGB. `origin` is `describe(kind)`.
pub(crate) fn create_pipeline(
    kind: &SourceKind,
    origin: &str,
) -> Result<(gst::Pipeline, gst_app::AppSink), CaptureError> {
    let description = match kind {
        SourceKind::Test {
            pattern,
            width,
            height,
            framerate,
            num_buffers,
        } => {
            // The pattern is the only user text that goes into the string: allow names only.
            if pattern.is_empty()
                || !pattern
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(CaptureError::Launch {
                    origin: origin.to_string(),
                    message: format!("\"{pattern}\" is not a videotestsrc pattern name"),
                    hint: "set `pattern` in [source] to a name such as smpte, ball or snow (`gst-inspect-1.0 videotestsrc`)",
                });
            }
            // num_buffers 0 means endless, which is videotestsrc's default (-1).
            let buffers = if *num_buffers == 0 {
                String::new()
            } else {
                format!(" num-buffers={num_buffers}")
            };
            format!(
                "videotestsrc name=src pattern={pattern}{buffers} ! \
                 video/x-raw,width={width},height={height},framerate={framerate}/1 ! {RGB_TAIL} sync=false"
            )
        }
        SourceKind::File { .. } => format!("filesrc name=src ! decodebin ! {RGB_TAIL} sync=false"),
        // Decoded file by file by `image_feeder`, already RGB: appsrc blocks while
        // one frame waits (its default max-bytes is less than one frame).
        SourceKind::Images { .. } => {
            "appsrc name=src format=time block=true ! appsink name=sink sync=false".to_string()
        }
        SourceKind::V4l2 { caps: None, .. } => format!("v4l2src name=src ! {RGB_TAIL} sync=false"),
        SourceKind::V4l2 {
            caps: Some(caps), ..
        } => {
            // A camera asked for compressed frames (MJPEG) needs a decoder before conversion.
            let decode = if caps.trim_start().starts_with("video/x-raw") {
                ""
            } else {
                "decodebin ! "
            };
            format!(
                "v4l2src name=src ! capsfilter name=camera_caps ! {decode}{RGB_TAIL} sync=false"
            )
        }
        SourceKind::Rtsp { .. } => format!("rtspsrc name=src ! decodebin ! {RGB_TAIL} sync=false"),
        // Argus delivers NVMM (GPU) buffers; nvvidconv brings them to system memory.
        SourceKind::Csi { .. } => format!(
            "nvarguscamerasrc name=src ! capsfilter name=camera_caps ! nvvidconv ! \
             video/x-raw,format=BGRx ! {RGB_TAIL} sync=false"
        ),
        // Whether bayer2rgb goes in is known once the camera is open
        // (`genicam::prepare`): the camera's own format may be followed.
        SourceKind::Genicam(_) => {
            format!("aravissrc name=src ! capsfilter name=camera_caps ! {RGB_TAIL} sync=false")
        }
        SourceKind::Pipeline { description, .. } => description.clone(),
    };

    let mut context = gst::ParseContext::new();
    let element = gst::parse::launch_full(
        &description,
        Some(&mut context),
        gst::ParseFlags::FATAL_ERRORS,
    )
    .map_err(|e| launch_error(kind, origin, &context, &e))?;
    let pipeline = match element.downcast::<gst::Pipeline>() {
        Ok(pipeline) => pipeline,
        Err(element) => {
            // A description with a single element parses to that element alone.
            let pipeline = gst::Pipeline::new();
            pipeline.add(&element).map_err(|e| CaptureError::Launch {
                origin: origin.to_string(),
                message: e.to_string(),
                hint: hint(kind),
            })?;
            pipeline
        }
    };

    let appsink = find_appsink(&pipeline)?;
    // Our own ring does the buffering and the overflow policy: appsink keeps no
    // extra buffer (which would also pin a camera's buffer-pool buffer).
    appsink.set_property("enable-last-sample", false);
    appsink.set_caps(Some(
        &gst_video::VideoCapsBuilder::new()
            .format(gst_video::VideoFormat::Rgb)
            .build(),
    ));

    configure_source(kind, &pipeline, origin)?;
    Ok((pipeline, appsink))
}

fn launch_error(
    kind: &SourceKind,
    origin: &str,
    context: &gst::ParseContext,
    error: &gst::glib::Error,
) -> CaptureError {
    if let Some(element) = context.missing_elements().into_iter().next() {
        let package = package_for(&element);
        return CaptureError::MissingElement {
            origin: origin.to_string(),
            element,
            package,
        };
    }
    CaptureError::Launch {
        origin: origin.to_string(),
        message: error.to_string(),
        hint: hint(kind),
    }
}

fn find_appsink(pipeline: &gst::Pipeline) -> Result<gst_app::AppSink, CaptureError> {
    let Some(sink) = pipeline.by_name("sink") else {
        return Err(CaptureError::NoAppsink {
            found: "no element named sink".to_string(),
        });
    };
    let factory = sink.factory().map_or_else(
        || "an unknown element".to_string(),
        |f| format!("a {}", f.name()),
    );
    sink.downcast::<gst_app::AppSink>()
        .map_err(|_| CaptureError::NoAppsink {
            found: format!("an element named sink that is {factory}, not an appsink"),
        })
}

/// Sets the properties that carry user text (paths, URLs, devices, caps) on the
/// named elements, where no quoting is needed.
fn configure_source(
    kind: &SourceKind,
    pipeline: &gst::Pipeline,
    origin: &str,
) -> Result<(), CaptureError> {
    let element = |name: &str| {
        pipeline.by_name(name).ok_or_else(|| CaptureError::Launch {
            origin: origin.to_string(),
            message: format!("the pipeline has no element named {name}"),
            hint: hint(kind),
        })
    };
    match kind {
        SourceKind::Test { .. } | SourceKind::Pipeline { .. } => {}
        SourceKind::File { path } => {
            element("src")?.set_property("location", path_text(path, origin, kind)?)
        }
        SourceKind::Images { location, .. } => {
            check_image_extension(location, origin)?;
            element("src")?
                .downcast::<gst_app::AppSrc>()
                .map_err(|_| CaptureError::Launch {
                    origin: origin.to_string(),
                    message: "the element named src is not an appsrc".to_string(),
                    hint: hint(kind),
                })?;
        }
        SourceKind::V4l2 { device, caps } => {
            element("src")?.set_property("device", path_text(device, origin, kind)?);
            if let Some(caps) = caps {
                let parsed = gst::Caps::from_str(caps).map_err(|e| CaptureError::Launch {
                    origin: origin.to_string(),
                    message: format!("\"{caps}\" is not valid GStreamer caps ({e})"),
                    hint: "fix the `caps` key in [source], e.g. \"video/x-raw,width=1280,height=720,framerate=30/1\" \
                           (list what the camera offers with `v4l2-ctl --list-formats-ext`)",
                })?;
                element("camera_caps")?.set_property("caps", parsed);
            }
        }
        SourceKind::Rtsp { url, latency_ms } => {
            let src = element("src")?;
            src.set_property("location", url.as_str());
            src.set_property("latency", *latency_ms);
        }
        SourceKind::Csi {
            sensor_id,
            width,
            height,
            framerate,
        } => {
            // From a string: the property's integer type is the plugin's business.
            element("src")?.set_property_from_str("sensor-id", &sensor_id.to_string());
            element("camera_caps")?.set_property("caps", csi_caps(*width, *height, *framerate));
        }
        SourceKind::Genicam(g) => {
            let src = element("src")?;
            match g.packet_size {
                Some(size) => src.set_property("packet-size", size as i32),
                None => src.set_property("auto-packet-size", true),
            }
            // Last: setting the name opens the camera (aravissrc does so at once).
            src.set_property("camera-name", g.camera.as_deref());
        }
    }
    Ok(())
}

/// The mode asked of a CSI sensor, in NVMM (GPU) memory as Argus delivers it.
fn csi_caps(width: u32, height: u32, framerate: u32) -> gst::Caps {
    gst::Caps::builder("video/x-raw")
        .features(["memory:NVMM"])
        .field("width", width as i32)
        .field("height", height as i32)
        .field("framerate", gst::Fraction::new(framerate as i32, 1))
        .build()
}

/// GStreamer takes file names as UTF-8 strings.
fn path_text<'a>(path: &'a Path, origin: &str, kind: &SourceKind) -> Result<&'a str, CaptureError> {
    path.to_str().ok_or_else(|| CaptureError::Launch {
        origin: origin.to_string(),
        message: format!("the path {} is not valid UTF-8", path.display()),
        hint: hint(kind),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtsp_credentials_are_hidden() {
        assert_eq!(
            redact_url("rtsp://admin:hunter2@10.0.0.5:554/stream1"),
            "rtsp://admin:***@10.0.0.5:554/stream1"
        );
        assert_eq!(
            redact_url("rtsp://10.0.0.5/stream@1"),
            "rtsp://10.0.0.5/stream@1"
        );
        assert_eq!(redact_url("rtsp://viewer@cam/s"), "rtsp://viewer@cam/s");
    }

    #[test]
    fn image_sequences_are_jpeg_or_png_by_extension() {
        assert!(check_image_extension(Path::new("/x/frame_%05d.JPG"), "seq").is_ok());
        assert!(check_image_extension(Path::new("frame_%05d.png"), "seq").is_ok());
        assert!(matches!(
            check_image_extension(Path::new("frame_%05d.bmp"), "seq"),
            Err(CaptureError::Launch { .. })
        ));
    }

    #[test]
    fn csi_caps_ask_argus_for_the_mode_in_nvmm_memory() {
        gst::init().unwrap();
        assert_eq!(
            csi_caps(1280, 720, 60).to_string(),
            "video/x-raw(memory:NVMM), width=(int)1280, height=(int)720, framerate=(fraction)60/1"
        );
    }

    #[test]
    fn every_source_kind_builds_with_its_properties_set() {
        gst::init().unwrap();
        let kinds = [
            SourceKind::Test {
                pattern: "ball".into(),
                width: 64,
                height: 48,
                framerate: 30,
                num_buffers: 0,
            },
            SourceKind::File {
                path: "/clips/line 3 \"night\" ! shift.mkv".into(),
            },
            SourceKind::Images {
                location: "/frames/frame_%05d.jpg".into(),
                framerate: 12,
            },
            SourceKind::V4l2 {
                device: "/dev/video0".into(),
                caps: None,
            },
            SourceKind::V4l2 {
                device: "/dev/video0".into(),
                caps: Some("image/jpeg,width=1280,height=720".into()),
            },
            SourceKind::V4l2 {
                device: "/dev/video0".into(),
                caps: Some("video/x-raw,format=YUY2".into()),
            },
            SourceKind::Rtsp {
                url: "rtsp://user:pw@10.0.0.5/stream".into(),
                latency_ms: 150,
            },
            SourceKind::Csi {
                sensor_id: 1,
                width: 1920,
                height: 1080,
                framerate: 30,
            },
            SourceKind::Pipeline {
                description: "videotestsrc ! videoconvert ! appsink name=sink".into(),
                live: false,
            },
        ];
        for kind in &kinds {
            let origin = describe(kind);
            let Ok((pipeline, appsink)) = create_pipeline(kind, &origin) else {
                // Only a plugin missing on this machine may stop a kind from building.
                match create_pipeline(kind, &origin) {
                    Err(CaptureError::MissingElement { .. }) => continue,
                    other => panic!("{origin}: {other:?}"),
                }
            };
            assert_eq!(appsink.name(), "sink");
            assert!(!appsink.property::<bool>("enable-last-sample"));
            match kind {
                SourceKind::File { path } => {
                    let location: String = pipeline.by_name("src").unwrap().property("location");
                    assert_eq!(Path::new(&location), path, "paths reach filesrc untouched");
                }
                SourceKind::Images { .. } => {
                    let src = pipeline.by_name("src").unwrap();
                    assert!(
                        src.property::<bool>("block"),
                        "the feeder waits for the pipeline"
                    );
                    assert_eq!(src.property::<gst::Format>("format"), gst::Format::Time);
                }
                SourceKind::Rtsp { .. } => {
                    assert_eq!(
                        pipeline.by_name("src").unwrap().property::<u32>("latency"),
                        150
                    );
                }
                SourceKind::V4l2 {
                    caps: Some(caps), ..
                } => {
                    let set: gst::Caps = pipeline.by_name("camera_caps").unwrap().property("caps");
                    assert_eq!(set, gst::Caps::from_str(caps).unwrap());
                }
                SourceKind::Csi { .. } => {
                    let set: gst::Caps = pipeline.by_name("camera_caps").unwrap().property("caps");
                    assert_eq!(set, csi_caps(1920, 1080, 30));
                }
                _ => {}
            }
        }
    }
}
