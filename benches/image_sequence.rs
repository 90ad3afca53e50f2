//! Capture alone on the demo clip: frames per second of the `images` source
//! (each file decoded on its own, so an undecodable file keeps its place)
//! against GStreamer's `multifilesrc ! decodebin` in one pipeline (faster, but
//! it skips an undecodable file without a word). Frames are recycled at once,
//! so the figure is capture's ceiling, not the pipeline's.
//!
//! `cargo bench --bench image_sequence [-- RUNS]` (default 3 runs each).

use std::path::Path;
use std::time::{Duration, Instant};

use sealcheck::capture::{Capture, CaptureEvent};
use sealcheck::config::{OverflowPolicy, SourceConfig, SourceKind, SourceRecovery};
use sealcheck::ring::frame_ring;
use sealcheck::service::Liveness;

fn frames_per_second(kind: SourceKind) -> (u64, f64) {
    let source = SourceConfig {
        kind,
        overflow: OverflowPolicy::Block,
        pool_size: 4,
        recovery: SourceRecovery::default(),
        layout: None,
    };
    let (producer, mut consumer) = frame_ring(source.pool_size);
    let started = Instant::now();
    let capture = Capture::start(&source, producer, Liveness::new()).expect("the clip starts");
    let mut frames = 0;
    loop {
        match consumer.pop(Duration::from_secs(10)) {
            Some(CaptureEvent::Frame(slot)) => {
                frames += 1;
                consumer.recycle(slot);
            }
            Some(CaptureEvent::End(_)) | None => break,
            Some(_) => frames += 1,
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    capture.shutdown();
    (frames, frames as f64 / seconds)
}

fn main() {
    let runs: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(3);
    let clip = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/demo_clip/frame_%05d.jpg");
    let clip_text = clip.to_str().expect("the repository path is UTF-8");
    for run in 1..=runs {
        let (frames, feeder) = frames_per_second(SourceKind::Images {
            location: clip.clone(),
            framerate: 30,
        });
        let (_, multifile) = frames_per_second(SourceKind::Pipeline {
            description: format!(
                "multifilesrc location={clip_text} index=0 caps=image/jpeg,framerate=30/1 ! decodebin \
                 ! videoconvert ! video/x-raw,format=RGB ! appsink name=sink sync=false"
            ),
            live: false,
        });
        println!(
            "run {run}: {frames} frames; images source {feeder:.1} frames/s; multifilesrc ! decodebin {multifile:.1} frames/s"
        );
    }
}
