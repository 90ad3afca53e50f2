//! Capture: a GStreamer source into the frame ring.
//!
//! ```text
//! {source per [source] kind} - ... - {videoconvert} - {video/x-raw,format=RGB} - {appsink "sink"}
//!                                                                                   │ new-sample (streaming thread)
//!                                                                                   ▼
//!                     FrameSink: seq, capture time, slot (overflow policy), row copy ──▶ ring::RingProducer
//! bus ──▶ capture thread: PLAYING → streaming; EOS → End(Finished|Stopped); error → End(Error); then NULL
//!         live source:    error, EOS or frozen → NULL, wait (backoff), rebuild (`recover`); stop → End(Stopped)
//! ```
//!
//! `device_list` is `sealcheck cameras`; `genicam` is the industrial-camera source (Aravis): its setup at each open,
//! its software trigger and frame counts, and the camera list.
//! `camera` is the running source (`Capture`) and its thread, `open` starts one
//! pipeline, `launch` turns `[source]` into a pipeline, `frame_sink` is the appsink
//! callback, `bus` watches the pipeline, `recover` rebuilds a lost live source,
//! `status` says whether it is up, `decode` reads single image files for
//! `sealcheck inspect`. `Capture::start` returns only once the source has shown
//! it works (prerolled, first frame, or a short grace for live sources), so a
//! missing file fails the start with a clear error, not a late `End`; a missing
//! camera is waited for (`recover`).

mod bus;
mod camera;
mod decode;
mod device_list;
mod error;
mod frame_sink;
mod genicam;
mod image_feeder;
mod launch;
mod library;
mod net_raw;
mod open;
mod recover;
mod replay;
mod rgb_plane;
mod rings;
mod state;
mod status;
mod teardown;

pub use camera::Capture;
pub use decode::decode_image_file;
pub use device_list::{CameraList, V4l2Device, list_cameras};
pub use error::{CaptureError, EndOfStream};
pub use genicam::{
    CameraSettingsHandle, GenicamCameraInfo, GenicamCounters, GenicamSettings, SoftwareTrigger,
    TriggerError, list_genicam_cameras,
};
pub use library::gstreamer_version;
pub use replay::{Replay, load_frames};
pub use rings::{CameraRings, CaptureEvent, RingConsumer, RingProducer};
pub use state::CaptureProbe;
pub use status::{OutageEnded, SourceStatus};
