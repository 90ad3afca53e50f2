//! The ring slots' page-locked memory, before the start (issue 30): once the
//! device path is open, its allocator (`PathInfo::slot_allocator`) is
//! installed in the run's `SlotMemory`, and every ring slot gets its block
//! at once, where the source's frame size is known. Capture starts only
//! after the device thread's start report, so every slot's first frame
//! lands in page-locked memory that the GPU reads where capture wrote it.

use std::sync::Arc;
use std::time::Instant;

use crate::frame_bytes::{HostAllocator, SlotMemory};
use crate::infer::warm_up::WarmUpSize;

/// Installs `allocator` as the ring slots' memory and allocates every
/// slot's block now (`prepare_slots`). Called by the device thread right
/// after the path is open, before its warm-up and start report.
/// `zero_copy`: `[inference] zero_copy`, for the log line.
pub(super) fn give_slots_page_locked_memory(
    memory: &SlotMemory,
    allocator: Arc<dyn HostAllocator>,
    zero_copy: Option<bool>,
    size: WarmUpSize,
) {
    memory.install(allocator);
    log::info!(target: "sealcheck::pipeline", zero_copy = zero_copy.map_or("default", |z| if z { "true" } else { "false" });
        "device stage: ring slots in page-locked memory, read by the GPU where capture wrote them");
    prepare_slots(memory, size);
}

/// Allocates every ring slot's page-locked memory now, before capture
/// starts, where the source's frame size is known (`WarmUpSize::Source`):
/// otherwise each slot allocates it at its first frame, on capture's
/// thread, and a run's first frames waited for it (8 cameras on the H100:
/// frames 0 to 12 of each camera up to 40 ms, docs/PERFORMANCE-gpu-pipeline.md).
pub(super) fn prepare_slots(memory: &SlotMemory, size: WarmUpSize) {
    let Some(bytes) = size.rgb_frame_bytes() else {
        log::info!(target: "sealcheck::pipeline",
            "device stage: the frame size is not known before the start; each ring slot allocates its page-locked memory at its first frame");
        return;
    };
    let started = Instant::now();
    match memory.prepare(bytes) {
        Ok(blocks) => log::info!(target: "sealcheck::pipeline", slots = blocks, bytes = bytes,
            ms = started.elapsed().as_secs_f64() * 1e3;
            "device stage: every ring slot's page-locked memory allocated before the start"),
        Err(e) => log::warn!(target: "sealcheck::pipeline", error = e.as_str(), bytes = bytes;
            "device stage: page-locked memory for the ring slots could not all be allocated before the start; the rest allocate it at their first frame"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::super::DeviceSwap;
    use super::super::fake_path::*;
    use super::*;
    use crate::capture::{CaptureEvent, EndOfStream};
    use crate::frame_bytes::HostPlacement;
    use crate::trigger::PartRings;

    /// Test double for page-locked memory: heap blocks that count how many
    /// are alive and how many were made.
    struct CountingHostMemory {
        live: Arc<AtomicU64>,
        made: Arc<AtomicU64>,
    }

    struct CountedBlock {
        bytes: Box<[u8]>,
        live: Arc<AtomicU64>,
    }

    impl crate::frame_bytes::HostBlock for CountedBlock {
        fn as_ptr(&self) -> *mut u8 {
            self.bytes.as_ptr().cast_mut()
        }
        fn capacity(&self) -> usize {
            self.bytes.len()
        }
        fn placement(&self) -> HostPlacement {
            HostPlacement::Pinned
        }
    }

    impl Drop for CountedBlock {
        fn drop(&mut self) {
            self.live.fetch_sub(1, Ordering::SeqCst);
        }
    }

    impl crate::frame_bytes::HostAllocator for CountingHostMemory {
        fn allocate(&self, bytes: usize) -> Result<Box<dyn crate::frame_bytes::HostBlock>, String> {
            self.live.fetch_add(1, Ordering::SeqCst);
            self.made.fetch_add(1, Ordering::SeqCst);
            Ok(Box::new(CountedBlock {
                bytes: vec![0; bytes].into_boxed_slice(),
                live: Arc::clone(&self.live),
            }))
        }
    }

    #[test]
    fn slot_memory_is_kept_across_a_model_swap_and_freed_when_the_device_path_is_torn_down() {
        let (live, made) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let memory = SlotMemory::new();
        let (producer, consumer) = crate::ring::frame_ring_in(3, &memory);
        let (mut producer, stage, free_tx, out_rx, swap_tx) = {
            let (_, mut stage, free_tx, out_rx, swap_tx) = stage_over_ring(3, 8);
            stage.input = PartRings::free(crate::capture::CameraRings::new(vec![consumer]));
            stage.slot_memory = memory.clone();
            (producer, stage, free_tx, out_rx, swap_tx)
        };
        // What the device thread does once its path is open: the allocator,
        // then a block for each slot, as the source's 2x1 frames need.
        assert!(memory.install(Arc::new(CountingHostMemory {
            live: Arc::clone(&live),
            made: Arc::clone(&made),
        })));
        prepare_slots(
            &memory,
            WarmUpSize::Source {
                width: 2,
                height: 1,
            },
        );
        assert_eq!(made.load(Ordering::SeqCst), 3, "prepared before the start");
        let released = Arc::new(AtomicU64::new(u64::MAX));
        let mut path = FakeDevicePath::new(2);
        path.released = Some(released);
        let generation = Arc::clone(&path.generation);
        path.swap_on = Some((
            13,
            swap_tx,
            DeviceSwap {
                engine: Some(Box::new(FakeCandidate {
                    generation: 1,
                    bound: generation,
                })),
                models: ids("new-seg", "new-cls"),
                on_swapped: None,
            },
        ));
        let handle = std::thread::spawn(move || run_stage(stage, &mut path, 2, ONE_AT_A_TIME));
        let feeder = std::thread::spawn(move || {
            for seq in 0..8u64 {
                tiny_frame(&mut producer, seq, 10 + seq as u8);
            }
            producer.push(CaptureEvent::End(EndOfStream::Finished));
            producer
        });
        let seen = results_until_the_end(&out_rx, &free_tx);
        assert_eq!(handle.join().unwrap(), EndOfStream::Finished);
        let producer = feeder.join().unwrap();
        assert_eq!(seen.len(), 8);
        assert_eq!(
            seen[7].1, 1017,
            "the new engine judged the last frame: {seen:?}"
        );
        assert_eq!(
            made.load(Ordering::SeqCst),
            3,
            "each of the 3 slots took its prepared block, the frames and the swap made none"
        );
        assert_eq!(live.load(Ordering::SeqCst), 3);
        // The device path and the ring are torn down: every block is freed.
        drop(producer);
        drop(out_rx);
        assert_eq!(
            live.load(Ordering::SeqCst),
            0,
            "a slot's block outlived the ring"
        );
    }
}
