//! The ring's hand-over protocol under loom (`make test` runs it:
//! `cargo test --release --features loom --lib ring::loom_model`).
//!
//! What is modelled: the wake-up protocol (registration in a `OnceLock`, the
//! `SeqCst` fences in `wake_*` against the ones in `pop` and `acquire_slot`,
//! park/unpark), the stop flag, the marker count and slot recycling, all on
//! loom's atomics and threads, with every `park` untimed so that a lost
//! wake-up shows as a deadlock. What is assumed: `ringbuf`'s SPSC push and pop
//! are correct; they use atomics loom cannot see, so here each is one
//! indivisible step between loom's scheduling points (its own tests and Miri
//! runs cover its internals).

use std::time::{Duration, Instant};

use super::consumer::RingConsumer;
use super::event::{RingEvent, TestEnd};
use super::pool::frame_ring;
use super::producer::RingProducer;
use super::sync::{Arc, Ordering, thread};
use crate::config::OverflowPolicy;
use crate::frame::FrameMeta;

/// Few preemptions: enough for every wake-up race of two threads, and the
/// models finish in seconds.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

fn frame(producer: &mut RingProducer<TestEnd>, seq: u64, policy: OverflowPolicy) -> bool {
    let meta = FrameMeta {
        seq,
        camera: 0,
        captured_at: std::time::UNIX_EPOCH,
        captured_instant: Instant::now(),
        part: crate::frame::Part::free(seq),
    };
    match producer.acquire_slot(policy) {
        Some(mut slot) => {
            slot.meta = meta;
            producer.push(RingEvent::Frame(slot));
            true
        }
        None => {
            producer.push(RingEvent::Dropped { meta, count: 1 });
            false
        }
    }
}

/// Pops to `End` with no timeout (a lost wake-up deadlocks), recycling
/// frames; returns the seqs covered and how the stream ended.
fn drain(consumer: &mut RingConsumer<TestEnd>) -> (Vec<u64>, TestEnd) {
    let mut seqs = Vec::new();
    loop {
        match consumer.pop(Duration::MAX) {
            Some(RingEvent::Frame(slot)) => {
                seqs.push(slot.meta.seq);
                consumer.recycle(slot);
            }
            Some(RingEvent::Dropped { meta, count }) => seqs.extend(meta.seq..meta.seq + count),
            Some(RingEvent::Failed { meta, .. }) => seqs.push(meta.seq),
            Some(RingEvent::End(end)) => return (seqs, end),
            None => panic!("pop without a timeout returned nothing"),
        }
    }
}

#[test]
fn a_parked_consumer_never_misses_a_frame_or_the_end() {
    model(|| {
        let (mut producer, mut consumer) = frame_ring(2);
        let capture = thread::spawn(move || {
            frame(&mut producer, 0, OverflowPolicy::Drop);
            frame(&mut producer, 1, OverflowPolicy::Drop);
            producer.push(RingEvent::End(TestEnd::Finished));
        });
        let (seqs, end) = drain(&mut consumer);
        capture.join().unwrap();
        assert_eq!(seqs, [0, 1]);
        assert_eq!(end, TestEnd::Finished);
        assert_eq!(consumer.free_slots(), 2, "every slot came back");
    });
}

#[test]
fn a_blocked_producer_is_woken_by_the_recycled_slot() {
    model(|| {
        // One slot: the second frame waits for the first one's slot.
        let (mut producer, mut consumer) = frame_ring(1);
        let capture = thread::spawn(move || {
            let blocked_never_drops = frame(&mut producer, 0, OverflowPolicy::Block)
                && frame(&mut producer, 1, OverflowPolicy::Block);
            producer.push(RingEvent::End(TestEnd::Finished));
            blocked_never_drops
        });
        let (seqs, end) = drain(&mut consumer);
        assert!(capture.join().unwrap());
        assert_eq!((seqs, end), (vec![0, 1], TestEnd::Finished));
    });
}

#[test]
fn stop_wakes_a_producer_waiting_for_a_slot_and_clear_stop_rearms_it() {
    model(|| {
        let (mut producer, mut consumer) = frame_ring(1);
        let stop = producer.stop_handle();
        let capture = thread::spawn(move || {
            assert!(frame(&mut producer, 0, OverflowPolicy::Block));
            // The only slot is held by the consumer: waits until stopped.
            let got = producer.acquire_slot(OverflowPolicy::Block).is_some();
            (producer, got)
        });
        let held = match consumer.pop(Duration::MAX) {
            Some(RingEvent::Frame(slot)) => slot,
            other => panic!("{other:?}"),
        };
        stop.request_stop();
        let (mut producer, got) = capture.join().unwrap();
        assert!(!got, "a stopped producer gets no slot");
        // A rebuilt source: waiting works again, and the recycled slot comes back.
        stop.clear_stop();
        consumer.recycle(held);
        assert!(producer.acquire_slot(OverflowPolicy::Block).is_some());
    });
}

#[test]
fn markers_are_counted_back_to_zero_whatever_the_interleaving() {
    model(|| {
        let (mut producer, mut consumer) = frame_ring(1);
        let shared = Arc::clone(&producer.shared);
        let capture = thread::spawn(move || {
            let meta = |seq| FrameMeta {
                seq,
                camera: 0,
                captured_at: std::time::UNIX_EPOCH,
                captured_instant: Instant::now(),
                part: crate::frame::Part::free(seq),
            };
            producer.push(RingEvent::Failed {
                meta: meta(0),
                message: String::new(),
            });
            producer.push(RingEvent::Dropped {
                meta: meta(1),
                count: 2,
            });
            assert!(producer.flush_pending_drops());
            producer.push(RingEvent::End(TestEnd::Stopped));
        });
        let (seqs, end) = drain(&mut consumer);
        capture.join().unwrap();
        assert_eq!((seqs, end), (vec![0, 1, 2], TestEnd::Stopped));
        assert!(consumer.pop(Duration::ZERO).is_none());
        assert_eq!(shared.markers_in_ring.load(Ordering::SeqCst), 0);
    });
}
