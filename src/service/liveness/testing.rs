//! Helpers the liveness unit tests share: a record with a streaming source, frames
//! through every stage or failed, further cameras with live sources lost and rebuilt.

use std::time::{Duration, Instant};

use super::record::Liveness;
use crate::frame::FailedStage;

pub(super) const STALL: Duration = Duration::from_secs(5);

pub(super) fn streaming() -> Liveness {
    let l = Liveness::new();
    l.set_source_streaming(true);
    l
}

pub(super) fn full_frame(l: &Liveness) {
    l.frame_captured();
    l.frame_preprocessed();
    l.frame_inferred();
    l.frame_finished();
}

pub(super) fn after(secs: u64) -> Instant {
    Instant::now() + Duration::from_secs(secs)
}

/// A frame that preprocessing or a model failed, as output records it.
pub(super) fn failed_frame(l: &Liveness, stage: FailedStage) {
    l.frame_captured();
    l.frame_preprocessed();
    l.frame_inferred();
    l.frame_failed_inspection(stage);
}

pub(super) const FRONT: &str = "camera front: RTSP camera rtsp://front";
pub(super) const SIDE: &str = "camera side: RTSP camera rtsp://side";

/// A further camera with a live source, as capture sets it up: named,
/// managed (its thread beats now), not streaming yet.
pub(super) fn live_camera(station: &Liveness, name: &str) -> Liveness {
    let camera = station.for_another_camera();
    camera.set_source_name(name);
    camera.set_source_managed(true);
    camera
}

/// A camera's source lost, and `n` rebuilt pipelines in a row that did
/// not stop in time.
pub(super) fn lost_with_pipelines_abandoned(camera: &Liveness, n: u64) {
    camera.set_source_streaming(true);
    camera.set_source_streaming(false);
    camera.set_source_lost(true);
    for _ in 0..n {
        camera.pipeline_abandoned();
        camera.capture_heartbeat();
    }
}
