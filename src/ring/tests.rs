//! The ring's own tests: a producer and a consumer together (order,
//! coalesced drops, the marker room, blocking, stop, timeouts).

use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use super::consumer::RingConsumer;
use super::event::{RingEvent, TestEnd};
use super::pool::frame_ring;
use super::producer::RingProducer;
use super::sync::{Arc, Ordering, thread};
use crate::config::OverflowPolicy;
use crate::frame::{FrameMeta, FrameSlot};

const WAIT: Duration = Duration::from_secs(5);

/// What the capture callback does with one delivered frame.
fn deliver(producer: &mut RingProducer<TestEnd>, seq: u64, policy: OverflowPolicy) -> bool {
    let meta = FrameMeta::now(seq);
    match producer.acquire_slot(policy) {
        Some(mut slot) => {
            slot.meta = meta;
            slot.data.clear();
            slot.data.extend_from_slice(&seq.to_le_bytes());
            producer.push(RingEvent::Frame(slot));
            true
        }
        None => {
            producer.push(RingEvent::Dropped { meta, count: 1 });
            false
        }
    }
}

/// Checks the events cover `0..delivered` in order with no gap; returns
/// (frames, dropped, failed) counts and how the stream ended.
fn account(events: &[RingEvent<TestEnd>]) -> (u64, u64, u64, Option<TestEnd>) {
    let (mut next, mut frames, mut dropped, mut failed, mut end) = (0u64, 0, 0, 0, None);
    for event in events {
        assert!(end.is_none(), "event after End: {event:?}");
        match event {
            RingEvent::Frame(slot) => {
                assert_eq!(slot.meta.seq, next, "frame out of order");
                assert_eq!(
                    slot.data,
                    next.to_le_bytes(),
                    "slot carries another frame's data"
                );
                next += 1;
                frames += 1;
            }
            RingEvent::Dropped { meta, count } => {
                assert_eq!(meta.seq, next, "drop run out of order");
                assert!(*count > 0);
                next += count;
                dropped += count;
            }
            RingEvent::Failed { meta, .. } => {
                assert_eq!(meta.seq, next, "failure out of order");
                next += 1;
                failed += 1;
            }
            RingEvent::End(e) => end = Some(e.clone()),
        }
    }
    assert_eq!(next, frames + dropped + failed);
    (frames, dropped, failed, end)
}

fn drain(consumer: &mut RingConsumer<TestEnd>, recycle: bool) -> Vec<RingEvent<TestEnd>> {
    let mut events = Vec::new();
    while let Some(event) = consumer.pop(WAIT) {
        let done = matches!(event, RingEvent::End(_));
        match event {
            RingEvent::Frame(slot) if recycle => {
                events.push(RingEvent::Frame(Box::new(FrameSlot {
                    meta: slot.meta,
                    width: 0,
                    height: 0,
                    stride: 0,
                    layout: slot.layout,
                    data: slot.data.clone(),
                    in_slot: slot.in_slot,
                })));
                consumer.recycle(slot);
            }
            other => events.push(other),
        }
        if done {
            break;
        }
    }
    events
}

#[test]
fn events_arrive_in_push_order() {
    let (mut producer, mut consumer) = frame_ring(3);
    assert!(deliver(&mut producer, 0, OverflowPolicy::Drop));
    producer.push(RingEvent::Failed {
        meta: FrameMeta::now(1),
        message: "cannot map".into(),
    });
    assert!(deliver(&mut producer, 2, OverflowPolicy::Drop));
    producer.push(RingEvent::Dropped {
        meta: FrameMeta::now(3),
        count: 2,
    });
    assert!(deliver(&mut producer, 5, OverflowPolicy::Drop));
    producer.push(RingEvent::End(TestEnd::Finished));
    let events = drain(&mut consumer, true);
    let kinds: Vec<String> = events
        .iter()
        .map(|e| match e {
            RingEvent::Frame(s) => format!("F{}", s.meta.seq),
            RingEvent::Dropped { meta, count } => format!("D{}x{count}", meta.seq),
            RingEvent::Failed { meta, message } => format!("X{}:{message}", meta.seq),
            RingEvent::End(e) => format!("{e:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        ["F0", "X1:cannot map", "F2", "D3x2", "F5", "Finished"]
    );
    assert_eq!(account(&events), (3, 2, 1, Some(TestEnd::Finished)));
}

#[test]
fn end_comes_after_pending_drops() {
    let (mut producer, mut consumer) = frame_ring(1);
    assert!(deliver(&mut producer, 0, OverflowPolicy::Drop));
    for seq in 1..6 {
        assert!(
            !deliver(&mut producer, seq, OverflowPolicy::Drop),
            "pool of one is busy"
        );
    }
    // The drops are coalesced and wait for the next event.
    assert_eq!(consumer.queued(), 1);
    producer.push(RingEvent::End(TestEnd::Finished));
    let events = drain(&mut consumer, false);
    assert!(
        matches!(&events[1], RingEvent::Dropped { meta, count: 5 } if meta.seq == 1),
        "{events:?}"
    );
    assert_eq!(account(&events), (1, 5, 0, Some(TestEnd::Finished)));
}

#[test]
fn a_camera_triggered_producer_counts_every_frame_and_drop_as_a_part() {
    let (producer, mut consumer) = frame_ring(1);
    let mut producer = producer.parts_counted_by_camera();
    assert!(deliver(&mut producer, 0, OverflowPolicy::Drop));
    for seq in 1..4 {
        assert!(!deliver(&mut producer, seq, OverflowPolicy::Drop));
    }
    producer.push(RingEvent::End(TestEnd::Finished));
    let events = drain(&mut consumer, false);
    let RingEvent::Frame(slot) = &events[0] else {
        panic!("{events:?}")
    };
    let part = slot.meta.part;
    assert_eq!((part.number, part.id), (0, 1), "the first frame is part 1");
    assert_eq!(part.triggered_id(), Some(1));
    assert_eq!(part.started(&slot.meta).1, slot.meta.captured_instant);
    let RingEvent::Dropped { meta, count: 3 } = &events[1] else {
        panic!("{events:?}")
    };
    // Each frame of the run is its own part, counted on.
    let ids: Vec<Option<u64>> = (0..3)
        .map(|k| meta.nth_of_run(k).part.triggered_id())
        .collect();
    assert_eq!(ids, [Some(2), Some(3), Some(4)]);
}

#[test]
fn a_pending_run_of_drops_can_be_flushed_without_a_next_frame() {
    let (mut producer, mut consumer) = frame_ring(1);
    assert!(deliver(&mut producer, 0, OverflowPolicy::Drop));
    assert!(!deliver(&mut producer, 1, OverflowPolicy::Drop));
    assert!(!deliver(&mut producer, 2, OverflowPolicy::Drop));
    assert_eq!(producer.pending_drops(), 2);
    assert!(matches!(consumer.pop(WAIT), Some(RingEvent::Frame(_))));
    assert!(
        consumer.pop(Duration::from_millis(10)).is_none(),
        "drops wait for the next event"
    );
    // The source goes quiet: capture's periodic flush reports the run anyway.
    assert!(producer.flush_pending_drops());
    assert_eq!(producer.pending_drops(), 0);
    assert!(
        matches!(consumer.pop(WAIT), Some(RingEvent::Dropped { meta, count: 2 }) if meta.seq == 1)
    );
}

#[test]
fn dropping_the_producer_ends_the_stream() {
    let (mut producer, mut consumer) = frame_ring(2);
    assert!(deliver(&mut producer, 0, OverflowPolicy::Block));
    drop(producer);
    let events = drain(&mut consumer, true);
    assert_eq!(account(&events), (1, 0, 0, Some(TestEnd::Stopped)));
    assert!(
        consumer.pop(Duration::from_secs(60)).is_none(),
        "an ended ring must not make pop wait"
    );
}

#[test]
fn drop_policy_loses_no_frame_with_a_slow_consumer() {
    const DELIVERED: u64 = 20_000;
    let (mut producer, mut consumer) = frame_ring(3);
    let taken = Arc::new(AtomicU64::new(0));
    let producer_thread = thread::spawn(move || {
        let mut passed = 0;
        for seq in 0..DELIVERED {
            if deliver(&mut producer, seq, OverflowPolicy::Drop) {
                passed += 1;
            }
            if seq % 64 == 0 {
                thread::yield_now();
            }
        }
        producer.push(RingEvent::End(TestEnd::Finished));
        passed
    });
    let mut events = Vec::new();
    while let Some(event) = consumer.pop(WAIT) {
        let done = matches!(event, RingEvent::End(_));
        if let RingEvent::Frame(slot) = event {
            // Slow: hold each frame a little before giving the slot back.
            thread::sleep(Duration::from_micros(200));
            taken.fetch_add(1, Ordering::Relaxed);
            events.push(RingEvent::Frame(Box::new(FrameSlot {
                meta: slot.meta,
                width: 0,
                height: 0,
                stride: 0,
                layout: slot.layout,
                data: slot.data.clone(),
                in_slot: slot.in_slot,
            })));
            consumer.recycle(slot);
        } else {
            events.push(event);
        }
        if done {
            break;
        }
    }
    let passed = producer_thread.join().unwrap();
    let (frames, dropped, failed, end) = account(&events);
    assert_eq!(end, Some(TestEnd::Finished));
    assert_eq!(frames + dropped + failed, DELIVERED);
    assert!(dropped > 0, "a slow consumer should have caused drops");
    // Frames folded into drops (marker room used up) are counted as dropped.
    assert!(frames <= passed);
    assert_eq!(taken.load(Ordering::Relaxed), frames);
}

#[test]
fn markers_never_overflow_a_stuck_consumer() {
    // Consumer pops nothing until the end: alternating frames (recycled by hand)
    // and drops would need far more markers than the ring holds.
    let (mut producer, mut consumer) = frame_ring(2);
    let mut seq = 0;
    for _ in 0..200 {
        deliver(&mut producer, seq, OverflowPolicy::Drop);
        seq += 1;
        producer.push(RingEvent::Dropped {
            meta: FrameMeta::now(seq),
            count: 1,
        });
        seq += 1;
        producer.push(RingEvent::Failed {
            meta: FrameMeta::now(seq),
            message: "bad buffer".into(),
        });
        seq += 1;
    }
    producer.push(RingEvent::End(TestEnd::Finished));
    assert!(consumer.queued() <= consumer.capacity().get());
    let events = drain(&mut consumer, false);
    let (frames, dropped, failed, end) = account(&events);
    assert_eq!(end, Some(TestEnd::Finished));
    assert_eq!(frames + dropped + failed, seq);
    assert_eq!(frames, 2, "only the pool's two slots can be in the ring");
}

#[test]
fn block_policy_waits_for_a_recycled_slot() {
    let (mut producer, mut consumer) = frame_ring(2);
    let delivered = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&delivered);
    let producer_thread = thread::spawn(move || {
        for seq in 0..5 {
            assert!(
                deliver(&mut producer, seq, OverflowPolicy::Block),
                "block never drops"
            );
            counter.store(seq + 1, Ordering::SeqCst);
        }
        producer.push(RingEvent::End(TestEnd::Finished));
    });
    let first = consumer.pop(WAIT).unwrap();
    let second = consumer.pop(WAIT).unwrap();
    thread::sleep(Duration::from_millis(100));
    assert_eq!(
        delivered.load(Ordering::SeqCst),
        2,
        "producer must wait while both slots are held"
    );
    assert!(consumer.pop(Duration::from_millis(50)).is_none());
    let mut events = vec![first, second];
    for event in events.iter_mut() {
        if let RingEvent::Frame(slot) = event {
            let copy = Box::new(FrameSlot {
                meta: slot.meta,
                width: 0,
                height: 0,
                stride: 0,
                layout: slot.layout,
                data: slot.data.clone(),
                in_slot: slot.in_slot,
            });
            let held = std::mem::replace(slot, copy);
            consumer.recycle(held);
        }
    }
    events.extend(drain(&mut consumer, true));
    producer_thread.join().unwrap();
    assert_eq!(account(&events), (5, 0, 0, Some(TestEnd::Finished)));
}

#[test]
fn stop_wakes_a_producer_blocked_on_a_full_pool() {
    let (mut producer, mut consumer) = frame_ring(1);
    let stop = producer.stop_handle();
    let producer_thread = thread::spawn(move || {
        assert!(deliver(&mut producer, 0, OverflowPolicy::Block));
        let started = Instant::now();
        let got = producer.acquire_slot(OverflowPolicy::Block).is_some();
        (got, started.elapsed())
    });
    let held = consumer.pop(WAIT).unwrap();
    thread::sleep(Duration::from_millis(50));
    stop.request_stop();
    let (got, waited) = producer_thread.join().unwrap();
    assert!(!got, "a stopped producer gets no slot");
    assert!(waited < WAIT);
    drop(held);
}

#[test]
fn pop_times_out_without_spinning_past_the_deadline() {
    let (_producer, mut consumer) = frame_ring::<TestEnd>(2);
    let started = Instant::now();
    assert!(consumer.pop(Duration::from_millis(30)).is_none());
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(30) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
}

#[test]
fn on_delivery_sees_every_delivered_frame_once_in_order() {
    let (mut producer, _consumer) = frame_ring(1);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    producer.on_delivery(move |meta| sink.lock().unwrap().push(meta.seq));
    // One slot: frame 0 fills it, 1..=3 are dropped (one run), 4 fails to copy.
    for seq in 0..4 {
        deliver(&mut producer, seq, OverflowPolicy::Drop);
    }
    producer.push(RingEvent::Failed {
        meta: FrameMeta::now(4),
        message: "cannot map".into(),
    });
    producer.push(RingEvent::End(TestEnd::Finished));
    // After the end nothing more is delivered.
    deliver(&mut producer, 5, OverflowPolicy::Drop);
    assert_eq!(*seen.lock().unwrap(), vec![0, 1, 2, 3, 4]);
}
