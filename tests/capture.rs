//! Capture against real GStreamer: frames arrive numbered with no gap, pixels
//! survive padded rows, the drop policy loses nothing, and a source that cannot
//! work fails at start with an error naming it.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;

use sealcheck::capture::{
    Capture, CaptureError, CaptureEvent, EndOfStream, RingConsumer, decode_image_file,
};
use sealcheck::config::{OverflowPolicy, SourceConfig, SourceKind, SourceRecovery};
use sealcheck::frame::{FrameSlot, PixelLayout};
use sealcheck::ring::frame_ring;
use sealcheck::service::Liveness;

/// Longest any single event may take to arrive before the test fails.
const EVENT_TIMEOUT: Duration = Duration::from_secs(10);

fn source(kind: SourceKind, overflow: OverflowPolicy, pool_size: usize) -> SourceConfig {
    SourceConfig {
        kind,
        overflow,
        pool_size,
        recovery: SourceRecovery::default(),
        layout: None,
    }
}

fn test_pattern(width: u32, height: u32, num_buffers: u32) -> SourceKind {
    SourceKind::Test {
        pattern: "smpte".into(),
        width,
        height,
        framerate: 30,
        num_buffers,
    }
}

/// Everything the consumer saw, checked for order: each event starts where the
/// previous one ended.
#[derive(Default)]
struct Received {
    /// The slots as the consumer got them: a consumer that never recycles keeps them.
    #[expect(
        clippy::vec_box,
        reason = "these are the pool's own boxes, held like a real consumer would"
    )]
    frames: Vec<Box<FrameSlot>>,
    dropped: u64,
    failed: u64,
    end: Option<EndOfStream>,
}

impl Received {
    fn accounted(&self) -> u64 {
        self.frames.len() as u64 + self.dropped + self.failed
    }
}

/// Pops until `End`. With `recycle`, each frame's pixels are copied out and the
/// slot goes back to capture; without, the consumer keeps every slot it gets.
/// `after_frame` runs after each frame (to stop capture mid-stream).
fn receive(
    consumer: &mut RingConsumer,
    recycle: bool,
    mut after_frame: impl FnMut(u64),
) -> Received {
    let mut got = Received::default();
    let mut next_seq = 0;
    loop {
        let event = consumer
            .pop(EVENT_TIMEOUT)
            .expect("capture went quiet without End");
        match event {
            CaptureEvent::Frame(slot) => {
                assert_eq!(
                    slot.meta.seq, next_seq,
                    "frame out of order or a gap before it"
                );
                next_seq += 1;
                if recycle {
                    let copy = Box::new(FrameSlot {
                        meta: slot.meta,
                        width: slot.width,
                        height: slot.height,
                        stride: slot.stride,
                        layout: slot.layout,
                        data: slot.data.clone(),
                        in_slot: slot.in_slot,
                    });
                    consumer.recycle(slot);
                    got.frames.push(copy);
                } else {
                    got.frames.push(slot);
                }
                after_frame(got.frames.len() as u64);
            }
            CaptureEvent::Dropped { meta, count } => {
                assert_eq!(meta.seq, next_seq, "drop run out of order");
                next_seq += count;
                got.dropped += count;
            }
            CaptureEvent::Failed { meta, message } => {
                panic!("frame {} failed: {message}", meta.seq);
            }
            CaptureEvent::End(end) => {
                got.end = Some(end);
                assert!(
                    consumer.pop(Duration::from_millis(50)).is_none(),
                    "event after End"
                );
                return got;
            }
        }
    }
}

#[test]
fn test_source_delivers_exactly_num_buffers_frames_then_finishes() {
    let (producer, mut consumer) = frame_ring(3);
    let liveness = Liveness::new();
    let capture = Capture::start(
        &source(test_pattern(64, 48, 25), OverflowPolicy::Block, 3),
        producer,
        liveness.clone(),
    )
    .expect("videotestsrc starts");
    let got = receive(&mut consumer, true, |_| {});
    assert_eq!(got.end, Some(EndOfStream::Finished));
    assert_eq!(got.frames.len(), 25);
    assert_eq!(got.dropped, 0, "block policy never drops");
    for frame in &got.frames {
        assert_eq!(
            (frame.width, frame.height, frame.stride, frame.layout),
            (64, 48, 64 * 3, PixelLayout::Rgb)
        );
        assert_eq!(frame.data.len(), 64 * 3 * 48);
    }
    assert_eq!(capture.probe().frames_delivered(), 25);
    assert_eq!(liveness.captured(), 25);
    assert!(capture.probe().last_frame_at().is_some());
    assert!(capture.probe().has_ended());
    assert!(!capture.probe().is_streaming());
    capture.shutdown();
}

/// The pixel (`x`, `y`) of test image `index`: every byte depends on its
/// position, so a row read with the wrong stride cannot match.
fn expected_pixel(index: usize, x: usize, y: usize) -> [u8; 3] {
    [
        (x * 7 + index * 13) as u8,
        (y * 5 + index) as u8,
        (x ^ y) as u8,
    ]
}

/// Writes `count` lossless PNGs of `width`x`height` holding `expected_pixel`,
/// through appsrc with GStreamer's own (padded) row stride.
fn write_png_sequence(dir: &Path, width: usize, height: usize, count: usize) -> PathBuf {
    gst::init().unwrap();
    let location = dir.join("frame_%05d.png");
    let pipeline = gst::parse::launch(
        "appsrc name=src format=time ! pngenc snapshot=false ! multifilesink name=out",
    )
    .unwrap()
    .downcast::<gst::Pipeline>()
    .unwrap();
    pipeline
        .by_name("out")
        .unwrap()
        .set_property("location", location.to_str().unwrap());
    let appsrc = pipeline
        .by_name("src")
        .unwrap()
        .downcast::<gst_app::AppSrc>()
        .unwrap();
    let info =
        gst_video::VideoInfo::builder(gst_video::VideoFormat::Rgb, width as u32, height as u32)
            .fps(gst::Fraction::new(5, 1))
            .build()
            .unwrap();
    let stride = info.stride()[0] as usize;
    assert!(
        stride > width * 3,
        "the test needs padded rows: pick a width whose RGB row is not a multiple of 4"
    );
    appsrc.set_caps(Some(&info.to_caps().unwrap()));
    pipeline.set_state(gst::State::Playing).unwrap();
    for index in 0..count {
        let mut bytes = vec![0xAAu8; info.size()];
        for y in 0..height {
            for x in 0..width {
                bytes[y * stride + x * 3..y * stride + x * 3 + 3]
                    .copy_from_slice(&expected_pixel(index, x, y));
            }
        }
        let mut buffer = gst::Buffer::from_mut_slice(bytes);
        buffer
            .get_mut()
            .unwrap()
            .set_pts(gst::ClockTime::from_mseconds(200 * index as u64));
        appsrc.push_buffer(buffer).unwrap();
    }
    appsrc.end_of_stream().unwrap();
    let bus = pipeline.bus().unwrap();
    let message = bus
        .timed_pop_filtered(
            gst::ClockTime::from_seconds(10),
            &[gst::MessageType::Eos, gst::MessageType::Error],
        )
        .expect("png writer finished");
    assert!(
        matches!(message.view(), gst::MessageView::Eos(..)),
        "png writer failed: {message:?}"
    );
    pipeline.set_state(gst::State::Null).unwrap();
    location
}

/// Starts an image-sequence source over `location` with a pool of 2 that blocks.
fn start_image_sequence(location: PathBuf) -> (Capture, RingConsumer) {
    let (producer, consumer) = frame_ring(2);
    let capture = Capture::start(
        &source(
            SourceKind::Images {
                location,
                framerate: 5,
            },
            OverflowPolicy::Block,
            2,
        ),
        producer,
        Liveness::new(),
    )
    .expect("image sequence starts");
    (capture, consumer)
}

fn assert_pixels(frame: &FrameSlot, index: usize, width: usize, height: usize) {
    assert_eq!(
        (frame.width as usize, frame.height as usize),
        (width, height)
    );
    assert!(frame.stride >= width * 3);
    for y in 0..height {
        for x in 0..width {
            let at = y * frame.stride + x * 3;
            assert_eq!(
                frame.data[at..at + 3],
                expected_pixel(index, x, y),
                "image {index} pixel ({x}, {y})"
            );
        }
    }
}

#[test]
fn image_sequence_with_odd_width_keeps_every_pixel_in_place() {
    let (width, height, count) = (333, 201, 4);
    let dir = tempfile::tempdir().unwrap();
    let location = write_png_sequence(dir.path(), width, height, count);

    let (capture, mut consumer) = start_image_sequence(location);
    let got = receive(&mut consumer, true, |_| {});
    assert_eq!(
        got.end,
        Some(EndOfStream::Finished),
        "the sequence ends with EOS when the files run out"
    );
    assert_eq!(got.frames.len(), count);
    for (index, frame) in got.frames.iter().enumerate() {
        assert_eq!(frame.stride, width * 3, "slots store rows packed");
        assert_pixels(frame, index, width, height);

        let mut decoded = FrameSlot::with_capacity(0);
        decode_image_file(
            &dir.path().join(format!("frame_{index:05}.png")),
            &mut decoded,
        )
        .unwrap();
        assert_eq!(
            (decoded.width, decoded.height, decoded.stride),
            (frame.width, frame.height, frame.stride)
        );
        assert_eq!(
            decoded.data, frame.data,
            "capture and decode_image_file disagree on image {index}"
        );
    }
    capture.shutdown();
}

#[test]
fn drop_policy_accounts_for_every_frame_when_the_consumer_never_recycles() {
    let (producer, mut consumer) = frame_ring(3);
    let capture = Capture::start(
        &source(test_pattern(32, 24, 60), OverflowPolicy::Drop, 3),
        producer,
        Liveness::new(),
    )
    .expect("videotestsrc starts");
    let got = receive(&mut consumer, false, |_| {});
    assert_eq!(got.end, Some(EndOfStream::Finished));
    assert_eq!(got.frames.len(), 3, "only the pool's slots carry frames");
    assert_eq!(got.dropped, 57);
    assert_eq!(got.accounted(), capture.probe().frames_delivered());
    assert_eq!(capture.probe().frames_delivered(), 60);
}

#[test]
fn stop_finishes_frames_in_flight_then_ends_stopped() {
    let (producer, mut consumer) = frame_ring(3);
    let capture = Capture::start(
        &source(test_pattern(32, 24, 0), OverflowPolicy::Block, 3),
        producer,
        Liveness::new(),
    )
    .expect("endless videotestsrc starts");
    let started = Instant::now();
    let got = receive(&mut consumer, true, |frames| {
        if frames == 10 {
            assert!(
                capture.probe().is_streaming(),
                "an endless source is streaming"
            );
            capture.stop();
        }
    });
    assert_eq!(got.end, Some(EndOfStream::Stopped));
    assert!(got.frames.len() >= 10);
    assert_eq!(
        got.accounted(),
        capture.probe().frames_delivered(),
        "frames delivered after stop still arrive"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "EOS must end the stream, not the stop timeout"
    );
}

/// Writes a short MJPEG-in-Matroska clip (no patent-encumbered encoder needed).
fn write_clip(path: &Path, frames: u32) {
    gst::init().unwrap();
    let pipeline = gst::parse::launch(&format!(
        "videotestsrc num-buffers={frames} ! video/x-raw,width=160,height=90,framerate=30/1 ! jpegenc ! matroskamux ! filesink name=out"
    ))
    .unwrap()
    .downcast::<gst::Pipeline>()
    .unwrap();
    pipeline
        .by_name("out")
        .unwrap()
        .set_property("location", path.to_str().unwrap());
    pipeline.set_state(gst::State::Playing).unwrap();
    let message = pipeline
        .bus()
        .unwrap()
        .timed_pop_filtered(
            gst::ClockTime::from_seconds(10),
            &[gst::MessageType::Eos, gst::MessageType::Error],
        )
        .expect("clip writer finished");
    assert!(
        matches!(message.view(), gst::MessageView::Eos(..)),
        "clip writer failed: {message:?}"
    );
    pipeline.set_state(gst::State::Null).unwrap();
}

#[test]
fn video_file_is_decoded_frame_by_frame_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    // Spaces and quotes in the path must not matter.
    let path = dir.path().join("line 3 \"night\" shift.mkv");
    write_clip(&path, 12);
    let (producer, mut consumer) = frame_ring(4);
    let capture = Capture::start(
        &source(SourceKind::File { path }, OverflowPolicy::Block, 4),
        producer,
        Liveness::new(),
    )
    .expect("clip starts");
    let got = receive(&mut consumer, true, |_| {});
    assert_eq!(got.end, Some(EndOfStream::Finished));
    assert_eq!(got.frames.len(), 12);
    assert!(
        got.frames
            .iter()
            .all(|f| (f.width, f.height, f.stride) == (160, 90, 480))
    );
    assert_eq!(capture.probe().frames_delivered(), 12);
}

fn start_error(kind: SourceKind) -> (CaptureError, Option<EndOfStream>) {
    let (producer, mut consumer) = frame_ring(2);
    let error = Capture::start(
        &source(kind, OverflowPolicy::Block, 2),
        producer,
        Liveness::new(),
    )
    .expect_err("this source cannot start");
    let end = match consumer.pop(Duration::from_secs(1)) {
        Some(CaptureEvent::End(end)) => Some(end),
        other => panic!("expected End after a failed start, got {other:?}"),
    };
    (error, end)
}

#[test]
fn missing_video_file_fails_at_start_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no such clip.mp4");
    let (error, end) = start_error(SourceKind::File { path: path.clone() });
    assert!(
        matches!(error, CaptureError::Start { verb: "read", .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.contains(&format!("video file {} cannot be read", path.display())),
        "{text}"
    );
    assert!(text.contains("`path` key in [source]"), "{text}");
    assert_eq!(end, Some(EndOfStream::Error(error)));
}

#[test]
fn corrupt_video_file_fails_at_start_not_later() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clip.mp4");
    std::fs::write(&path, [0x5Au8; 4096]).unwrap();
    let (error, _) = start_error(SourceKind::File { path: path.clone() });
    assert!(matches!(error, CaptureError::Start { .. }), "{error:?}");
    assert!(
        error.to_string().contains(&path.display().to_string()),
        "{error}"
    );
}

/// Polls `done` every 10 ms up to `limit`.
fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    done()
}

fn quick_retries(mut config: SourceConfig) -> SourceConfig {
    config.recovery.retry_min = Duration::from_millis(50);
    config.recovery.retry_max = Duration::from_millis(200);
    config
}

#[test]
fn absent_v4l2_device_is_waited_for_saying_what_to_check() {
    let (producer, mut consumer) = frame_ring(2);
    let config = quick_retries(source(
        SourceKind::V4l2 {
            device: "/dev/video9".into(),
            caps: None,
        },
        OverflowPolicy::Drop,
        2,
    ));
    let capture = Capture::start(&config, producer, Liveness::new())
        .expect("a camera missing at start is waited for, not an error");
    let status = capture.source_status();
    assert!(!status.is_up());
    assert_eq!(status.outages(), 1);
    let text = status.last_error();
    assert!(
        text.starts_with("v4l2 device /dev/video9 cannot be opened: "),
        "{text}"
    );
    assert!(
        text.contains("check the camera is connected and the `device` key in [source]"),
        "{text}"
    );
    assert!(
        wait_until(Duration::from_secs(10), || status.tries_this_outage() >= 3),
        "capture keeps trying: {} tries",
        status.tries_this_outage()
    );
    let line = status.describe_outage().unwrap();
    assert!(line.starts_with("waiting for camera since "), "{line}");
    assert_eq!(status.outages(), 1, "one outage however many tries");
    assert!(
        consumer.pop(Duration::from_millis(50)).is_none(),
        "nothing, not even End, while waiting"
    );
    capture.stop();
    assert!(matches!(
        consumer.pop(Duration::from_secs(2)),
        Some(CaptureEvent::End(EndOfStream::Stopped))
    ));
}

/// Raw RGB frames of 64x48 into a pipe read by `fdsrc`: a live source that
/// can be frozen (stop writing: no error, no end-of-stream) and thawed.
const RAW_W: usize = 64;
const RAW_H: usize = 48;

fn raw_pipe_source(fd: i32, frame_timeout: Duration) -> SourceConfig {
    let mut config = quick_retries(source(
        SourceKind::Pipeline {
            description: format!(
                "fdsrc fd={fd} ! rawvideoparse width={RAW_W} height={RAW_H} format=rgb framerate=20/1 ! \
                 videoconvert ! video/x-raw,format=RGB ! appsink name=sink sync=false"
            ),
            live: true,
        },
        OverflowPolicy::Drop,
        4,
    ));
    config.recovery.frame_timeout = Some(frame_timeout);
    config
}

fn write_raw_frames(pipe: &mut impl std::io::Write, count: usize) {
    let frame = vec![0x80u8; RAW_W * RAW_H * 3];
    for _ in 0..count {
        pipe.write_all(&frame).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn frozen_live_source_is_rebuilt_and_frames_resume_with_seq_unbroken() {
    use std::os::fd::AsRawFd;
    let (reader, mut writer) = std::io::pipe().unwrap();
    let frame_timeout = Duration::from_millis(400);
    let config = raw_pipe_source(reader.as_raw_fd(), frame_timeout);
    let (producer, mut consumer) = frame_ring(4);
    let writer_thread = std::thread::spawn(move || {
        write_raw_frames(&mut writer, 10);
        // Frozen: the pipe stays open and silent, as a hung camera does.
        std::thread::sleep(Duration::from_millis(1500));
        write_raw_frames(&mut writer, 10);
        writer
    });
    let capture = Capture::start(&config, producer, Liveness::new()).expect("starts");
    let status = capture.source_status();
    let mut seqs = Vec::new();
    let mut last_frame = Instant::now();
    let mut longest_gap = Duration::ZERO;
    let deadline = Instant::now() + Duration::from_secs(20);
    while seqs.len() < 20 && Instant::now() < deadline {
        match consumer.pop(Duration::from_millis(100)) {
            Some(CaptureEvent::Frame(slot)) => {
                longest_gap = longest_gap.max(last_frame.elapsed());
                last_frame = Instant::now();
                seqs.push(slot.meta.seq);
                consumer.recycle(slot);
            }
            Some(CaptureEvent::Dropped { meta, count }) => {
                seqs.extend(meta.seq..meta.seq + count);
            }
            Some(other) => panic!("unexpected {other:?}"),
            None => {}
        }
        if seqs.len() == 10 && status.outages() == 0 {
            // Lost after frame_timeout, rebuilt one retry interval (50 ms) later.
            let limit = frame_timeout + config.recovery.retry_min + Duration::from_millis(300);
            assert!(
                wait_until(limit, || status.tries_this_outage() >= 1),
                "a source silent for {frame_timeout:?} must be rebuilt within {limit:?}"
            );
        }
    }
    let _writer = writer_thread.join().unwrap();
    assert_eq!(
        seqs,
        (0..20).collect::<Vec<u64>>(),
        "seq unbroken across the rebuild"
    );
    assert!(
        longest_gap >= Duration::from_millis(1000),
        "{longest_gap:?}"
    );
    assert_eq!((status.outages(), status.frozen()), (1, 1));
    assert!(status.is_up(), "frames came back: the outage is over");
    assert!(
        status.last_error().contains("frozen"),
        "{}",
        status.last_error()
    );
    capture.stop();
    assert!(matches!(
        consumer.pop(Duration::from_secs(5)),
        Some(CaptureEvent::End(EndOfStream::Stopped))
    ));
}

#[test]
fn invalid_v4l2_caps_are_rejected_before_opening_the_device() {
    let (error, _) = start_error(SourceKind::V4l2 {
        device: "/dev/video9".into(),
        caps: Some("video/x-raw,width=".into()),
    });
    assert!(matches!(&error, CaptureError::Launch { .. }), "{error:?}");
    assert!(error.to_string().contains("`caps` key"), "{error}");
}

#[test]
fn pipeline_description_without_an_appsink_named_sink_is_rejected() {
    let (error, _) = start_error(SourceKind::Pipeline {
        description: "videotestsrc ! fakesink".into(),
        live: false,
    });
    assert!(
        matches!(&error, CaptureError::NoAppsink { found } if found == "no element named sink"),
        "{error:?}"
    );
    assert!(error.to_string().contains("appsink name=sink"), "{error}");

    let (error, _) = start_error(SourceKind::Pipeline {
        description: "videotestsrc ! fakesink name=sink".into(),
        live: false,
    });
    assert!(
        matches!(&error, CaptureError::NoAppsink { found } if found.contains("fakesink")),
        "{error:?}"
    );
}

#[test]
fn unknown_element_names_the_missing_plugin() {
    let (error, _) = start_error(SourceKind::Pipeline {
        description: "nosuchcamerasrc ! appsink name=sink".into(),
        live: false,
    });
    assert!(
        matches!(&error, CaptureError::MissingElement { element, .. } if element == "nosuchcamerasrc"),
        "{error:?}"
    );
}

#[test]
fn csi_camera_without_the_jetson_plugins_says_which_package_to_install() {
    gst::init().unwrap();
    if gst::ElementFactory::find("nvarguscamerasrc").is_some() {
        common::skipped(format_args!(
            "this machine has nvarguscamerasrc (a Jetson): the missing-plugin message cannot be shown"
        ));
        return;
    }
    let (error, end) = start_error(SourceKind::Csi {
        sensor_id: 0,
        width: 1920,
        height: 1080,
        framerate: 30,
    });
    assert!(
        matches!(&error, CaptureError::MissingElement { element, .. } if element == "nvarguscamerasrc"),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.contains("CSI camera 0") && text.contains("nvidia-l4t-gstreamer"),
        "{text}"
    );
    assert_eq!(end, Some(EndOfStream::Error(error)));
}

#[test]
fn user_pipeline_with_an_appsink_named_sink_delivers_frames() {
    let description = "videotestsrc num-buffers=7 ! video/x-raw,width=50,height=10 ! videoconvert ! video/x-raw,format=RGB ! appsink name=sink";
    let (producer, mut consumer) = frame_ring(2);
    let capture = Capture::start(
        &source(
            SourceKind::Pipeline {
                description: description.into(),
                live: false,
            },
            OverflowPolicy::Block,
            2,
        ),
        producer,
        Liveness::new(),
    )
    .expect("user pipeline starts");
    let got = receive(&mut consumer, true, |_| {});
    assert_eq!(got.end, Some(EndOfStream::Finished));
    assert_eq!(got.frames.len(), 7);
    assert_eq!(got.frames[0].stride, 150);
    drop(capture);
}

#[test]
fn missing_first_image_fails_at_start_even_though_eos_follows_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let location = dir.path().join("frame_%05d.jpg");
    let (error, end) = start_error(SourceKind::Images {
        location,
        framerate: 5,
    });
    assert!(matches!(&error, CaptureError::Start { .. }), "{error:?}");
    assert!(error.to_string().contains("frame_00000.jpg"), "{error}");
    assert_eq!(end, Some(EndOfStream::Error(error)));
}

#[test]
fn error_mid_stream_ends_with_the_error_not_finished() {
    // identity fails the 4th buffer; the source then pushes EOS, which must not
    // hide the error (the missing-first-image test pins the EOS-after-error
    // order deterministically; here the timing is the streaming thread's).
    // Pool of 2 and nobody popping during start: the streaming thread waits on
    // frame 2, so the error cannot come before start returns.
    let description = "videotestsrc num-buffers=10 ! video/x-raw,width=32,height=24 ! identity name=faulty error-after=4 \
                       ! videoconvert ! video/x-raw,format=RGB ! appsink name=sink";
    let (producer, mut consumer) = frame_ring(2);
    let capture = Capture::start(
        &source(
            SourceKind::Pipeline {
                description: description.into(),
                live: false,
            },
            OverflowPolicy::Block,
            2,
        ),
        producer,
        Liveness::new(),
    )
    .expect("starts before the fault");
    let got = receive(&mut consumer, true, |_| {});
    assert_eq!(got.frames.len(), 3);
    match &got.end {
        Some(EndOfStream::Error(CaptureError::Bus { element, .. })) => {
            assert!(element.contains("faulty"), "{element}")
        }
        other => panic!("expected End(Error) from the faulty element, got {other:?}"),
    }
    assert!(capture.health_probe().has_failed());
    assert!(
        !capture
            .health_probe()
            .is_healthy(Instant::now(), Duration::from_secs(60))
    );
}

#[test]
fn decode_image_file_names_a_corrupt_or_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let corrupt = dir.path().join("seal 0001.png");
    std::fs::write(&corrupt, b"\x89PNG\r\n\x1a\nthis is not really a png").unwrap();
    let mut slot = FrameSlot::with_capacity(0);
    let error =
        decode_image_file(&corrupt, &mut slot).expect_err("a corrupt file cannot be decoded");
    assert!(
        matches!(&error, CaptureError::Image { path, .. } if path == &corrupt),
        "{error:?}"
    );
    assert!(
        error.to_string().contains(&corrupt.display().to_string()),
        "{error}"
    );

    let missing = dir.path().join("missing.jpg");
    let error =
        decode_image_file(&missing, &mut slot).expect_err("a missing file cannot be decoded");
    assert!(
        error.to_string().contains("missing.jpg") && error.to_string().contains("no such file"),
        "{error}"
    );
}

#[test]
fn image_sequence_gives_every_file_one_event_even_the_ones_that_cannot_be_decoded() {
    let (width, height, count) = (333, 201, 7);
    let dir = tempfile::tempdir().unwrap();
    let location = write_png_sequence(dir.path(), width, height, count);
    let file = |index: usize| dir.path().join(format!("frame_{index:05}.png"));
    std::fs::write(file(1), b"not an image at all").unwrap();
    let whole = std::fs::read(file(3)).unwrap();
    std::fs::write(file(3), &whole[..whole.len() / 2]).unwrap();
    std::fs::write(file(5), b"").unwrap();
    let failing = [1, 3, 5];

    let (capture, mut consumer) = start_image_sequence(location);
    let mut next_seq = 0u64;
    let end = loop {
        match consumer
            .pop(EVENT_TIMEOUT)
            .expect("capture went quiet without End")
        {
            CaptureEvent::Frame(slot) => {
                let index = slot.meta.seq as usize;
                assert_eq!(index as u64, next_seq, "one event per file, in file order");
                assert!(!failing.contains(&index), "file {index} is not decodable");
                assert_pixels(&slot, index, width, height);
                consumer.recycle(slot);
            }
            CaptureEvent::Failed { meta, message } => {
                let index = meta.seq as usize;
                assert_eq!(index as u64, next_seq, "one event per file, in file order");
                assert!(failing.contains(&index), "file {index} decodes: {message}");
                let name = format!("frame_{index:05}.png");
                assert!(
                    message.contains(&name),
                    "the message names {name}: {message}"
                );
                if index == 3 {
                    assert!(message.contains("truncated"), "{message}");
                }
            }
            other => break other,
        }
        next_seq += 1;
    };
    assert!(
        matches!(end, CaptureEvent::End(EndOfStream::Finished)),
        "{end:?}"
    );
    assert_eq!(next_seq, count as u64, "every file got an event");
    assert_eq!(capture.probe().frames_delivered(), count as u64);
    capture.shutdown();
}

#[test]
fn decode_image_file_refuses_a_truncated_jpeg() {
    let dir = tempfile::tempdir().unwrap();
    let whole = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/demo_clip/frame_00000.jpg"),
    )
    .unwrap();
    let mut slot = FrameSlot::with_capacity(0);
    let complete = dir.path().join("complete.jpg");
    std::fs::write(&complete, &whole).unwrap();
    decode_image_file(&complete, &mut slot).expect("the clip's frame decodes");

    let cut = dir.path().join("cut.jpg");
    std::fs::write(&cut, &whole[..whole.len() * 3 / 4]).unwrap();
    let error = decode_image_file(&cut, &mut slot).expect_err("a cut JPEG is refused");
    assert!(
        error.to_string().contains("cut.jpg") && error.to_string().contains("truncated"),
        "{error}"
    );
}
