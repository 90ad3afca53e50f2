//! The steady state allocates nothing in sealcheck's own stages: frame copy
//! into a slot, the ring, preprocessing, mask, decision and the result line.
//! (Inference engines allocate inside themselves; they are not ours.)
//!
//! A separate test binary because `#[global_allocator]` is per binary. The
//! counter is per thread, so the test harness's own threads cannot disturb it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use std::time::Duration;

use sealcheck::capture::CaptureEvent;
use sealcheck::config::{
    CavityLayout, DecisionConfig, Normalization, OutputConfig, OverflowPolicy, ResultsRotation,
};
use sealcheck::cycle::CycleVerdicts;
use sealcheck::decision::decide;
use sealcheck::frame::{FrameMeta, FrameWork, ImageView, PixelLayout, TensorGeometry};
use sealcheck::output::{ResultSink, format_output_line, format_result};
use sealcheck::preprocess::{FramePreprocessor, Preprocessor, logits_to_mask, preprocess_frame};
use sealcheck::ring::frame_ring;

/// Counts allocations made by the current thread, then defers to `System`.
struct CountingAllocator;

thread_local! {
    // `const` initialisation: no lazy setup that could itself allocate.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_one() {
    // `try_with` fails only while the thread is being torn down; not counting then is fine.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees carry over; counting touches only a
// thread-local integer and never allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: the caller upholds `alloc`'s contract; passed through as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: `ptr` came from this allocator, which is `System` underneath.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, which is `System` underneath.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// The demo models' normalization and tensor shapes, and thresholds.
fn demo_setup() -> (Normalization, TensorGeometry, DecisionConfig) {
    let norm = Normalization {
        mean: [0.485, 0.456, 0.406],
        std: [0.229, 0.224, 0.225],
    };
    let geometry = TensorGeometry {
        seg_hw: (640, 640),
        seg_classes: 2,
        cls_hw: (224, 512),
        cls_classes: 2,
    };
    let thresholds = DecisionConfig {
        defect_threshold: 0.5,
        no_seal_below: 0.005,
        min_seal_area: 0.01,
        max_seal_area: 0.9,
        deadline: None,
    };
    (norm, geometry, thresholds)
}

/// Infer, minus the engines: a stand-in segmentation result (every
/// `step`th logit of the seal class high), then our mask steps, and a
/// classifier's answer.
fn stand_in_inference(
    work: &mut FrameWork,
    mask_pre: &Preprocessor,
    geometry: &TensorGeometry,
    step: usize,
) {
    work.seg_logits[geometry.mask_len()..]
        .iter_mut()
        .step_by(step)
        .for_each(|v| *v = 1.0);
    work.mask_pixels = logits_to_mask(&work.seg_logits, 2, 1, &mut work.mask);
    mask_pre.mask_to_classifier_channel(&work.mask, &mut work.cls_input);
    work.cls_logits.copy_from_slice(&[1.0, -1.0]);
}

#[test]
fn second_frame_of_the_same_size_allocates_nothing() {
    let (norm, geometry, _) = demo_setup();
    let mut pre = Preprocessor::new(norm, norm, 0.5, 0.5, geometry);
    let (width, height, stride) = (1280, 720, 1280 * 4 + 64);
    let data: Vec<u8> = (0..stride * height).map(|i| (i * 7 % 251) as u8).collect();
    let frame = ImageView {
        width,
        height,
        stride,
        layout: PixelLayout::Bgrx,
        data: &data,
    };
    let mut seg = vec![0.0f32; geometry.seg_input_len()];
    let mut cls = vec![0.0f32; geometry.cls_input_len()];
    let mut logits = vec![0.0f32; geometry.seg_logits_len()];
    logits[geometry.mask_len()..]
        .iter_mut()
        .step_by(3)
        .for_each(|v| *v = 1.0);
    let mut mask = vec![0.0f32; geometry.mask_len()];

    // The counter must see this thread's allocations, or the test could not fail.
    let before_box = allocations();
    drop(std::hint::black_box(Box::new(1u64)));
    assert_eq!(
        allocations(),
        before_box + 1,
        "the allocation counter does not count"
    );

    // First frame: tables are built for 1280x720.
    pre.frame_to_tensors(frame, &mut seg, &mut cls).unwrap();

    // Steady state: the same frame size again, then the mask steps.
    let before = allocations();
    pre.frame_to_tensors(frame, &mut seg, &mut cls).unwrap();
    let set = logits_to_mask(&logits, 2, 1, &mut mask);
    pre.mask_to_classifier_channel(&mask, &mut cls);
    let during = allocations() - before;
    assert!(set > 0);
    assert_eq!(
        during, 0,
        "preprocessing a second frame of the same size allocated {during} times"
    );

    // A layout change at the same size keeps the tables too.
    let rgb_data = &data[..width * 3 * height];
    let rgb = ImageView {
        width,
        height,
        stride: width * 3,
        layout: PixelLayout::Rgb,
        data: rgb_data,
    };
    let before = allocations();
    pre.frame_to_tensors(rgb, &mut seg, &mut cls).unwrap();
    assert_eq!(
        allocations() - before,
        0,
        "a layout change at the same size allocated"
    );
}

/// One frame's whole path outside the engines, as the stages run it: capture
/// copies rows into a ring slot, preprocess fills the work record and returns
/// the slot, the mask and its classifier channel, the decision, the result
/// line into the results file.
#[test]
fn a_frame_through_every_stage_of_ours_allocates_nothing_in_steady_state() {
    let (norm, geometry, thresholds) = demo_setup();
    let (width, height) = (1280usize, 720usize);
    let camera: Vec<u8> = (0..width * 3 * height)
        .map(|i| (i * 13 % 251) as u8)
        .collect();
    let (mut producer, mut consumer) = frame_ring(2);
    let mut pre = FramePreprocessor::Cpu(Preprocessor::new(norm, norm, 0.0, 1.0, geometry));
    let mask_pre = Preprocessor::new(norm, norm, 0.0, 1.0, geometry);
    let mut work = Box::new(FrameWork::new(&geometry));
    let dir = tempfile::tempdir().unwrap();
    let output = results_config(dir.path());
    let mut sink = ResultSink::open(&output).unwrap();
    let mut line = String::with_capacity(512);

    let mut one_frame = |seq: u64| {
        // Capture: copy the camera's rows into a free slot, push it.
        let mut slot = producer.acquire_slot(OverflowPolicy::Block).unwrap();
        slot.data.clear();
        slot.data.extend_from_slice(&camera);
        (slot.width, slot.height, slot.stride, slot.layout) =
            (width as u32, height as u32, width * 3, PixelLayout::Rgb);
        slot.meta = FrameMeta::now(seq);
        producer.push(CaptureEvent::Frame(slot));
        // Preprocess.
        let Some(CaptureEvent::Frame(slot)) = consumer.pop(Duration::from_secs(1)) else {
            panic!("no frame")
        };
        preprocess_frame(&mut pre, &slot, &mut work);
        consumer.recycle(slot);
        stand_in_inference(&mut work, &mask_pre, &geometry, 5);
        // Decision and output.
        let decision = decide(&work, 1, &thresholds);
        format_result(
            &mut line,
            None,
            &work.meta,
            &decision,
            Some(&[1.0, 2.0, 3.0, 6.0]),
        );
        sink.write_line(&line).unwrap();
        assert!(work.error.is_none());
    };
    // Warm-up: slots and tables grow to the frame size once, the line buffer to a line.
    for seq in 0..3 {
        one_frame(seq);
    }
    let before = allocations();
    for seq in 3..13 {
        one_frame(seq);
    }
    let during = allocations() - before;
    assert_eq!(during, 0, "10 steady-state frames allocated {during} times");
    sink.flush().unwrap();
    assert_eq!(
        std::fs::read_to_string(&output.results)
            .unwrap()
            .lines()
            .count(),
        13
    );
}

/// A machine cycle of 2x3 cavities: each cavity's crop preprocessed on its
/// own (the crops at the frame's edge are clipped smaller than the others,
/// so the resize tables change size within a cycle), the cavities decided
/// and the cycle's line written: nothing allocated once warm.
#[test]
fn a_cycle_of_cavities_allocates_nothing_in_steady_state() {
    let (norm, geometry, thresholds) = demo_setup();
    let (width, height) = (1920usize, 720usize);
    let camera: Vec<u8> = (0..width * 3 * height)
        .map(|i| (i * 7 % 253) as u8)
        .collect();
    let rects = CavityLayout::grid_rects(2, 3, (320, 180), (640, 360), (600, 340)).unwrap();
    let layout = CavityLayout::new(rects, &[5], 30, Some((2, 3))).unwrap();
    let mut pre = FramePreprocessor::Cpu(Preprocessor::new(norm, norm, 0.0, 1.0, geometry));
    let mask_pre = Preprocessor::new(norm, norm, 0.0, 1.0, geometry);
    let mut works: Vec<FrameWork> = (0..5).map(|_| FrameWork::new(&geometry)).collect();
    let mut cycle = CycleVerdicts::with_capacity(6);
    let mut line = String::with_capacity(1024);
    let frame = ImageView {
        width,
        height,
        stride: width * 3,
        layout: PixelLayout::Rgb,
        data: &camera,
    };
    let sizes: Vec<(u32, u32)> = layout
        .enabled()
        .map(|n| {
            let r = layout.crop(n, (width as u32, height as u32));
            (r.width, r.height)
        })
        .collect();
    assert!(
        sizes.iter().any(|s| *s != sizes[0]),
        "the edge crops are clipped: {sizes:?}"
    );

    let mut one_cycle = |seq: u64| {
        cycle.start(&layout);
        for (work, number) in works.iter_mut().zip(layout.enabled()) {
            work.reset(FrameMeta::now(seq));
            let r = layout.crop(number, (width as u32, height as u32));
            let crop = frame
                .crop(
                    r.x as usize,
                    r.y as usize,
                    r.width as usize,
                    r.height as usize,
                )
                .unwrap();
            pre.frame_to_tensors(crop, &mut work.seg_input, &mut work.cls_input)
                .unwrap();
            stand_in_inference(work, &mask_pre, &geometry, 3);
            cycle.push(number, decide(work, 1, &thresholds));
        }
        let overall = cycle.overall();
        format_output_line(
            &mut line,
            None,
            &works[0].meta,
            &overall,
            Some(&[1.0, 2.0, 3.0, 6.0]),
            false,
            None,
            Some(&cycle),
        );
        assert!(line.contains("\"cavities\":["), "{line}");
    };
    for seq in 0..3 {
        one_cycle(seq);
    }
    let before = allocations();
    for seq in 3..13 {
        one_cycle(seq);
    }
    let during = allocations() - before;
    assert_eq!(
        during, 0,
        "10 steady-state cycles of 5 cavities allocated {during} times"
    );
}

/// A results file in `dir` with the production rotation default (the size
/// check runs on every line), flushed by the caller.
fn results_config(dir: &std::path::Path) -> OutputConfig {
    OutputConfig {
        results: dir.join("results.jsonl"),
        flush_each_line: false,
        log_verdicts: false,
        rotation: ResultsRotation {
            max_mib: 256,
            keep_files: 8,
        },
    }
}

/// The results file's check that its path still names the open file (once a
/// second, on the frame path) allocates nothing either.
#[test]
fn the_results_files_identity_check_allocates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let output = results_config(dir.path());
    let mut sink = ResultSink::open(&output).unwrap();
    sink.write_line("first").unwrap();
    sink.flush().unwrap();
    // The check runs at most once a second: wait it out once.
    std::thread::sleep(Duration::from_millis(1100));
    let before = allocations();
    sink.flush().unwrap();
    let during = allocations() - before;
    assert_eq!(during, 0, "the identity check allocated {during} times");
}
