//! The device stage's behaviour over the cameras' rings, with a fake "GPU"
//! path (`fake_path`): batches, markers in place, frames in flight, model
//! swaps between batches, ring slots handed back only once the GPU is past
//! them, and a cavity layout's frames cropped on the "GPU", one tagged
//! entry per judged cavity.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::DeviceSwap;
use super::fake_path::*;
use crate::capture::{CaptureEvent, EndOfStream};
use crate::config::{CavityRect, OverflowPolicy};
use crate::frame::{FrameSlot, StageMessage};
use crate::infer::batch::BatchPolicy;
use crate::infer::batcher::IDLE_WAIT;
use crate::infer::device_path::FramePart;

/// Runs a stream queued up in full (three frames, a run of two drops,
/// three frames, one failing) through a path that can hold two frames,
/// allowed `frames_in_flight`; returns what came out and the most frames
/// the path held at once.
fn run_queued(frames_in_flight: usize) -> (Vec<(u64, u64, bool)>, usize) {
    let (mut producer, stage, free_tx, out_rx, _swaps) = stage_over_ring(8, 3);
    // Everything is in the ring before the stage starts: it can always
    // stage the next frame while one is on the "GPU".
    for (seq, first) in [(0u64, 10u8), (1, 11), (2, 12)] {
        tiny_frame(&mut producer, seq, first);
    }
    let meta = crate::frame::FrameMeta::now(3);
    producer.push(CaptureEvent::Dropped { meta, count: 2 });
    for (seq, first) in [(5u64, 15u8), (6, 0xEE), (7, 17)] {
        tiny_frame(&mut producer, seq, first);
    }
    producer.push(CaptureEvent::End(EndOfStream::Finished));
    let handle = std::thread::spawn(move || {
        let mut path = FakeDevicePath::new(2);
        let end = run_stage(stage, &mut path, frames_in_flight, ONE_AT_A_TIME);
        (end, path.most_in_flight)
    });
    let seen = results_until_the_end(&out_rx, &free_tx);
    let (end, most_in_flight) = handle.join().unwrap();
    assert_eq!(end, EndOfStream::Finished);
    (seen, most_in_flight)
}

#[test]
fn two_frames_in_flight_keep_capture_order_and_markers_in_place() {
    let expected = vec![
        (0, 10, false),
        (1, 11, false),
        (2, 12, false),
        (3, 2, true),
        (5, 15, false),
        (6, 0, true),
        (7, 17, false),
    ];
    let (seen, most_in_flight) = run_queued(2);
    assert_eq!(
        most_in_flight, 2,
        "the next frame was staged while one was on the GPU"
    );
    assert_eq!(seen, expected);
    let (seen, most_in_flight) = run_queued(1);
    assert_eq!(most_in_flight, 1, "frames_in_flight = 1 is obeyed");
    assert_eq!(seen, expected);
}

#[test]
fn frames_waiting_together_are_judged_in_batches_with_markers_after_their_batch() {
    let (mut producer, stage, free_tx, out_rx, _swaps) = stage_over_ring(16, 10);
    let counts = Arc::clone(&stage.batch_counts);
    // All queued before the stage starts: 0..=4 fill a batch of 3 and
    // start the next; a drop marker stops that one at two frames (one of
    // them refused at staging); then 7 and 8 come together, then the end.
    for (seq, first) in [(0u64, 10u8), (1, 11), (2, 12), (3, 13), (4, 0xDD)] {
        tiny_frame(&mut producer, seq, first);
    }
    let meta = crate::frame::FrameMeta::now(5);
    producer.push(CaptureEvent::Dropped { meta, count: 2 });
    for (seq, first) in [(7u64, 17u8), (8, 18)] {
        tiny_frame(&mut producer, seq, first);
    }
    producer.push(CaptureEvent::End(EndOfStream::Finished));
    let handle = std::thread::spawn(move || {
        let mut path = FakeDevicePath::batching(2, 3);
        let policy = BatchPolicy {
            max_batch: 8,
            wait: Duration::ZERO,
        };
        let end = run_stage(stage, &mut path, 2, policy);
        (end, path.batch_sizes)
    });
    let seen = results_until_the_end(&out_rx, &free_tx);
    let (end, batch_sizes) = handle.join().unwrap();
    assert_eq!(end, EndOfStream::Finished);
    assert_eq!(
        batch_sizes,
        vec![3, 1, 2],
        "the path's max_batch (3) bounds a batch; a marker ends one; a refused frame is left out"
    );
    assert_eq!(
        seen,
        vec![
            (0, 10, false),
            (1, 11, false),
            (2, 12, false),
            (3, 13, false),
            (4, 0, true),
            (5, 2, true),
            (7, 17, false),
            (8, 18, false),
        ],
        "one result per frame in capture order, the marker behind the frames before it"
    );
    assert_eq!(counts.snapshot(), (3, 6), "3 engine runs judged 6 frames");
}

#[test]
fn frames_go_through_in_order_with_gpu_timings_and_errors_marked() {
    let (mut producer, stage, free_tx, out_rx, _swaps) = stage_over_ring(2, 2);
    // Two may be in flight, but each frame comes alone: its result must
    // not wait for the next frame.
    let handle =
        std::thread::spawn(move || run_stage(stage, &mut FakeDevicePath::new(2), 2, ONE_AT_A_TIME));
    let mut results = Vec::new();
    for (seq, first) in [(0u64, 7u8), (1, 0xEE), (2, 9)] {
        tiny_frame(&mut producer, seq, first);
        match out_rx.recv_timeout(Duration::from_secs(10)).unwrap() {
            StageMessage::Inspect(work) => {
                results.push((
                    work.meta.seq,
                    work.mask_pixels,
                    work.timings.segment_ms,
                    work.error.is_some(),
                ));
                free_tx.send(work).unwrap();
            }
            _ => panic!("expected an inspected frame"),
        }
    }
    producer.push(CaptureEvent::End(EndOfStream::Finished));
    assert!(matches!(out_rx.recv().unwrap(), StageMessage::End));
    assert_eq!(handle.join().unwrap(), EndOfStream::Finished);
    assert_eq!(
        results,
        vec![(0, 7, 2.0, false), (1, 0, 0.0, true), (2, 9, 2.0, false)]
    );
}

#[test]
fn pixels_and_the_mask_come_back_only_while_someone_wants_them() {
    let (mut producer, stage, free_tx, out_rx, _swaps) = stage_over_ring(2, 2);
    let demand = Arc::clone(&stage.pixel_demand);
    let handle =
        std::thread::spawn(move || run_stage(stage, &mut FakeDevicePath::new(2), 2, ONE_AT_A_TIME));
    let mut seen = Vec::new();
    for (seq, first, wanted) in [(0u64, 7u8, false), (1, 8, true), (2, 9, false)] {
        demand.set_archive(wanted);
        tiny_frame(&mut producer, seq, first);
        let StageMessage::Inspect(mut work) = out_rx.recv_timeout(Duration::from_secs(10)).unwrap()
        else {
            panic!("expected an inspected frame");
        };
        seen.push((
            work.meta.seq,
            work.pixels.valid,
            work.pixels.valid.then(|| work.pixels.data[0]),
            work.mask[0],
        ));
        work.mask.fill(0.0);
        free_tx.send(work).unwrap();
    }
    producer.push(CaptureEvent::End(EndOfStream::Finished));
    assert!(matches!(out_rx.recv().unwrap(), StageMessage::End));
    assert_eq!(handle.join().unwrap(), EndOfStream::Finished);
    assert_eq!(
        seen,
        vec![
            (0, false, None, 0.0),
            (1, true, Some(8), 8.0),
            (2, false, None, 0.0),
        ]
    );
}

#[test]
fn a_swap_waits_for_the_frames_on_the_gpu_and_names_the_new_models_from_the_next_frame() {
    let (mut producer, stage, free_tx, out_rx, swap_tx) = stage_over_ring(8, 4);
    // All frames wait in the ring, so two are on the "GPU" when the swap
    // arrives (sent as frame 3 is submitted, behind frame 2).
    for seq in 0..7u64 {
        tiny_frame(&mut producer, seq, 10 + seq as u8);
    }
    producer.push(CaptureEvent::End(EndOfStream::Finished));
    let swapped = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let on_swapped = {
        let swapped = Arc::clone(&swapped);
        move || {
            swapped.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    };
    let (mut path, generation) = {
        let path = FakeDevicePath::new(2);
        let generation = Arc::clone(&path.generation);
        (path, generation)
    };
    let swap = DeviceSwap {
        engine: Some(Box::new(FakeCandidate {
            generation: 1,
            bound: generation,
        })),
        models: ids("new-seg", "new-cls"),
        on_swapped: Some(Box::new(on_swapped)),
    };
    let handle = std::thread::spawn(move || {
        path.swap_on = Some((13, swap_tx, swap));
        let end = run_stage(stage, &mut path, 2, ONE_AT_A_TIME);
        (end, path.most_in_flight)
    });
    let mut seen = Vec::new();
    loop {
        match out_rx.recv_timeout(Duration::from_secs(10)).unwrap() {
            StageMessage::Inspect(work) => {
                let models = work
                    .models
                    .as_deref()
                    .expect("every frame names its models");
                seen.push((
                    work.meta.seq,
                    work.mask_pixels,
                    models.segmentation.clone(),
                    models.classifier.clone(),
                ));
                let _ = free_tx.send(work);
            }
            StageMessage::End => break,
            _ => panic!("only frames were sent"),
        }
    }
    let (end, most_in_flight) = handle.join().unwrap();
    assert_eq!(end, EndOfStream::Finished);
    assert_eq!(most_in_flight, 2, "the swap arrived with frames in flight");
    let old = |seq: u64| (seq, 10 + seq, "old-seg".to_string(), "old-cls".to_string());
    let new = |seq: u64| {
        (
            seq,
            1010 + seq,
            "new-seg".to_string(),
            "new-cls".to_string(),
        )
    };
    // Frames 0..=3 were on the GPU by the time the swap was seen: the old
    // engine completes them; frame 4 on is the new engine's, with its ids.
    let expected: Vec<_> = (0..4).map(old).chain((4..7).map(new)).collect();
    assert_eq!(seen, expected);
    assert_eq!(swapped.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// Takes a free slot without waiting: `None` while every slot is out.
fn free_slot(producer: &mut crate::capture::RingProducer) -> Option<Box<FrameSlot>> {
    producer.acquire_slot(OverflowPolicy::Drop)
}

/// Waits up to 5 s for a slot to come back to capture.
fn slot_back_within_5s(producer: &mut crate::capture::RingProducer) -> Box<FrameSlot> {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(slot) = free_slot(producer) {
            return slot;
        }
        assert!(Instant::now() < until, "the slot never came back");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_slot_is_never_handed_back_to_capture_while_the_gpu_still_reads_it() {
    // Two slots, both frames staged and judged, but the GPU's reads of
    // their bytes (the stand-in for the slots' upload events) end late.
    let (mut producer, stage, free_tx, out_rx, _swaps) = stage_over_ring(2, 4);
    let released = Arc::new(AtomicU64::new(0));
    let mut path = FakeDevicePath::new(2);
    path.released = Some(Arc::clone(&released));
    let handle = std::thread::spawn(move || run_stage(stage, &mut path, 2, ONE_AT_A_TIME));
    tiny_frame(&mut producer, 0, 10);
    tiny_frame(&mut producer, 1, 11);
    for seq in 0..2u64 {
        let StageMessage::Inspect(work) = out_rx.recv_timeout(Duration::from_secs(10)).unwrap()
        else {
            panic!("expected an inspected frame");
        };
        assert_eq!(work.meta.seq, seq);
        free_tx.send(work).unwrap();
    }
    // Both results are out, and the stage has idled since (it hands
    // slots back after each idle wait): still no slot is free.
    std::thread::sleep(IDLE_WAIT + Duration::from_millis(100));
    assert!(
        free_slot(&mut producer).is_none(),
        "a slot went back to capture while the GPU still read it"
    );
    // The first frame's read ends: its slot, and only it, comes back.
    released.store(1, Ordering::SeqCst);
    let first = slot_back_within_5s(&mut producer);
    assert_eq!(first.data[0], 10, "the slot of the frame read first");
    assert!(
        free_slot(&mut producer).is_none(),
        "the second is still read"
    );
    released.store(2, Ordering::SeqCst);
    let second = slot_back_within_5s(&mut producer);
    assert_eq!(second.data[0], 11);
    drop((first, second));
    producer.push(CaptureEvent::End(EndOfStream::Finished));
    assert!(matches!(
        out_rx.recv_timeout(Duration::from_secs(10)).unwrap(),
        StageMessage::End
    ));
    assert_eq!(handle.join().unwrap(), EndOfStream::Finished);
}

#[test]
fn at_the_end_every_read_is_waited_for_and_every_slot_handed_back() {
    let (mut producer, stage, free_tx, out_rx, _swaps) = stage_over_ring(3, 4);
    let released = Arc::new(AtomicU64::new(0));
    let mut path = FakeDevicePath::new(2);
    path.released = Some(Arc::clone(&released));
    for seq in 0..3u64 {
        tiny_frame(&mut producer, seq, 20 + seq as u8);
    }
    producer.push(CaptureEvent::End(EndOfStream::Finished));
    let handle = std::thread::spawn(move || {
        let end = run_stage(stage, &mut path, 2, ONE_AT_A_TIME);
        (end, path.staged)
    });
    let seen = results_until_the_end(&out_rx, &free_tx);
    let (end, staged) = handle.join().unwrap();
    assert_eq!(end, EndOfStream::Finished);
    assert_eq!(seen.len(), 3);
    assert_eq!(
        released.load(Ordering::SeqCst),
        staged,
        "the stage waited for every read before handing the slots back"
    );
}

/// `row_layout`'s cavity at column `x`, staged as a crop.
fn crop(x: u32, first: bool) -> FramePart {
    FramePart::Crop {
        rect: CavityRect {
            x,
            y: 0,
            width: 2,
            height: 1,
        },
        first,
    }
}

fn batches_of(max_batch: usize) -> BatchPolicy {
    BatchPolicy {
        max_batch,
        wait: Duration::ZERO,
    }
}

#[test]
fn a_layouts_frame_is_a_tagged_entry_per_cavity_cropped_on_the_gpu_its_slot_kept_until_read() {
    // Cavities 1, 2 and 4 judged (3 is disabled): three entries a frame,
    // a batch of three, so one cycle per batch.
    let (mut producer, stage, free_tx, out_rx, _swaps) = stage_over_ring(2, 8);
    let counts = Arc::clone(&stage.batch_counts);
    let released = Arc::new(AtomicU64::new(0));
    let mut path = FakeDevicePath::batching(2, 3);
    path.released = Some(Arc::clone(&released));
    let crops = crops_of(row_layout(4, &[3]));
    let handle = std::thread::spawn(move || {
        let end = run_stage_with(stage, &mut path, 2, batches_of(3), crops);
        (end, path.parts, path.batch_sizes, path.staged)
    });
    cavity_frame(&mut producer, 0, &[11, 12, 13, 14]);
    cavity_frame(&mut producer, 1, &[21, 22, 23, 24]);
    let mut seen = Vec::new();
    for _ in 0..6 {
        let StageMessage::Inspect(work) = out_rx.recv_timeout(Duration::from_secs(10)).unwrap()
        else {
            panic!("expected a cavity's record");
        };
        seen.push(record(&work));
        free_tx.send(work).unwrap();
    }
    assert_eq!(
        seen,
        vec![
            (0, Some((1, 0, 3)), 11, None),
            (0, Some((2, 1, 3)), 12, None),
            (0, Some((4, 2, 3)), 14, None),
            (1, Some((1, 0, 3)), 21, None),
            (1, Some((2, 1, 3)), 22, None),
            (1, Some((4, 2, 3)), 24, None),
        ],
        "each judged cavity's own result from its own crop, tagged, in number order, frame after frame"
    );
    // Every cavity judged and the stage idle since: the GPU still reads
    // both frames, so neither slot is back with capture.
    std::thread::sleep(IDLE_WAIT + Duration::from_millis(100));
    assert!(
        free_slot(&mut producer).is_none(),
        "a slot went back to capture while the GPU still read it"
    );
    // The first frame's read (for all its crops) ends: its slot comes back.
    released.store(1, Ordering::SeqCst);
    let first = slot_back_within_5s(&mut producer);
    assert_eq!(first.data[0], 11, "the slot of the frame read first");
    assert!(free_slot(&mut producer).is_none());
    released.store(2, Ordering::SeqCst);
    let second = slot_back_within_5s(&mut producer);
    assert_eq!(second.data[0], 21);
    drop((first, second));
    producer.push(CaptureEvent::End(EndOfStream::Finished));
    assert!(matches!(
        out_rx.recv_timeout(Duration::from_secs(10)).unwrap(),
        StageMessage::End
    ));
    let (end, parts, batch_sizes, staged) = handle.join().unwrap();
    assert_eq!(end, EndOfStream::Finished);
    assert_eq!(
        parts,
        vec![
            crop(0, true),
            crop(2, false),
            crop(6, false),
            crop(0, true),
            crop(2, false),
            crop(6, false),
        ],
        "one stage per judged cavity with its crop; the frame goes to the GPU at the first"
    );
    assert_eq!(staged, 2, "each frame went to the GPU once");
    assert_eq!(batch_sizes, vec![3, 3], "a cycle is one batch");
    assert_eq!(counts.snapshot(), (2, 6), "2 engine runs judged 6 cavities");
}

#[test]
fn cycles_waiting_together_share_a_batch_as_far_as_their_every_cavity_fits() {
    let (mut producer, stage, free_tx, out_rx, _swaps) = stage_over_ring(4, 16);
    // Three frames of three cavities wait; a batch of 7 entries takes two
    // whole cycles (never part of the third).
    for seq in 0..3u64 {
        let base = 10 * (seq as u8 + 1);
        cavity_frame(&mut producer, seq, &[base + 1, base + 2, base + 3]);
    }
    producer.push(CaptureEvent::End(EndOfStream::Finished));
    let handle = std::thread::spawn(move || {
        let mut path = FakeDevicePath::batching(2, 7);
        let end = run_stage_with(
            stage,
            &mut path,
            2,
            batches_of(7),
            crops_of(row_layout(3, &[])),
        );
        (end, path.batch_sizes)
    });
    let seen = records_until_the_end(&out_rx, &free_tx);
    let (end, batch_sizes) = handle.join().unwrap();
    assert_eq!(end, EndOfStream::Finished);
    assert_eq!(batch_sizes, vec![6, 3]);
    let answers: Vec<_> = seen.iter().map(|r| (r.0, r.1.map(|t| t.0), r.2)).collect();
    assert_eq!(
        answers,
        vec![
            (0, Some(1), 11),
            (0, Some(2), 12),
            (0, Some(3), 13),
            (1, Some(1), 21),
            (1, Some(2), 22),
            (1, Some(3), 23),
            (2, Some(1), 31),
            (2, Some(2), 32),
            (2, Some(3), 33),
        ]
    );
}

#[test]
fn a_frame_the_layout_does_not_fit_or_the_gpu_refuses_fails_every_cavity_and_nothing_crashes() {
    let (mut producer, stage, free_tx, out_rx, _swaps) = stage_over_ring(8, 8);
    cavity_frame(&mut producer, 0, &[11, 12, 13]);
    // Another size than the layout's first frame (a camera reconfigured).
    cavity_frame(&mut producer, 1, &[21, 22]);
    // The GPU refuses the frame at its first crop.
    cavity_frame(&mut producer, 2, &[0xDD, 32, 33]);
    cavity_frame(&mut producer, 3, &[41, 42, 43]);
    producer.push(CaptureEvent::End(EndOfStream::Finished));
    let handle = std::thread::spawn(move || {
        let mut path = FakeDevicePath::batching(2, 3);
        let end = run_stage_with(
            stage,
            &mut path,
            2,
            batches_of(3),
            crops_of(row_layout(3, &[])),
        );
        (end, path.parts, path.batch_sizes)
    });
    let seen = records_until_the_end(&out_rx, &free_tx);
    let (end, parts, batch_sizes) = handle.join().unwrap();
    assert_eq!(end, EndOfStream::Finished);
    assert_eq!(seen.len(), 12, "one record per cavity of every frame");
    for (i, r) in seen.iter().enumerate() {
        let (seq, cavity) = (i as u64 / 3, (i % 3) as u16);
        assert_eq!(
            (r.0, r.1),
            (seq, Some((cavity + 1, cavity, 3))),
            "tagged in order"
        );
        let error = r.3.as_deref().unwrap_or("");
        match seq {
            0 | 3 => assert_eq!((r.2, error), (10 * (seq + 1) + u64::from(cavity) + 1, "")),
            1 => assert!(
                error.contains("the frame is 4x1") && error.contains("set for 6x1"),
                "{error}"
            ),
            _ => assert!(error.contains("a frame refused at staging"), "{error}"),
        }
    }
    assert_eq!(
        parts,
        vec![
            crop(0, true),
            crop(2, false),
            crop(4, false),
            crop(0, true),
            crop(0, true),
            crop(2, false),
            crop(4, false),
        ],
        "nothing of the misfit frame is staged; the refused frame only its first crop"
    );
    assert_eq!(batch_sizes, vec![3, 3]);
}

#[test]
fn models_with_a_smaller_batch_than_a_cycle_split_it_over_batches_in_order() {
    // A batch of 2 (models swapped for smaller ones) and cycles of 3.
    let (mut producer, stage, free_tx, out_rx, _swaps) = stage_over_ring(4, 8);
    cavity_frame(&mut producer, 0, &[11, 12, 13]);
    cavity_frame(&mut producer, 1, &[21, 22, 23]);
    producer.push(CaptureEvent::End(EndOfStream::Finished));
    let handle = std::thread::spawn(move || {
        let mut path = FakeDevicePath::batching(2, 2);
        let end = run_stage_with(
            stage,
            &mut path,
            2,
            batches_of(3),
            crops_of(row_layout(3, &[])),
        );
        (end, path.batch_sizes, path.staged)
    });
    let seen = records_until_the_end(&out_rx, &free_tx);
    let (end, batch_sizes, staged) = handle.join().unwrap();
    assert_eq!(end, EndOfStream::Finished);
    assert_eq!(batch_sizes, vec![2, 1, 2, 1]);
    assert_eq!(staged, 2, "each frame still went to the GPU once");
    let answers: Vec<_> = seen
        .iter()
        .map(|r| (r.0, r.1, r.2, r.3.is_some()))
        .collect();
    assert_eq!(
        answers,
        vec![
            (0, Some((1, 0, 3)), 11, false),
            (0, Some((2, 1, 3)), 12, false),
            (0, Some((3, 2, 3)), 13, false),
            (1, Some((1, 0, 3)), 21, false),
            (1, Some((2, 1, 3)), 22, false),
            (1, Some((3, 2, 3)), 23, false),
        ]
    );
}
