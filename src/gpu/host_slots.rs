//! Page-locked ring slots: `PinnedSlots` gives the cameras' ring slots
//! their memory (`crate::frame_bytes::HostAllocator`) once the device path
//! is open, so the GPU reads a frame where capture wrote it: an
//! asynchronous upload straight from the slot, or, mapped, the kernel
//! reading it in place (zero-copy).
//!
//! The blocks are `PinnedBuffer<u8>`s: `cuMemHostAlloc` with
//! `CU_MEMHOSTALLOC_PORTABLE` (usable from every thread and context) and,
//! mapped, `CU_MEMHOSTALLOC_DEVICEMAP`; never write-combined, because the
//! host reads the slots too (the archive's and the live view's copies, the
//! shadow). Each block holds the context (`Arc<GpuContext>`), so it is
//! freed (`cuMemFreeHost`) with its slot, even after the device path ended.

use std::sync::Arc;

use super::context::GpuContext;
use super::memory::PinnedBuffer;
use crate::frame_bytes::{HostAllocator, HostBlock, HostPlacement};

/// Hands out page-locked blocks of one GPU's context for ring slots.
pub struct PinnedSlots {
    gpu: Arc<GpuContext>,
    mapped: bool,
}

impl PinnedSlots {
    /// `mapped`: blocks the device can address (`zero_copy`).
    pub fn new(gpu: &Arc<GpuContext>, mapped: bool) -> Self {
        PinnedSlots {
            gpu: Arc::clone(gpu),
            mapped,
        }
    }
}

impl HostAllocator for PinnedSlots {
    fn allocate(&self, bytes: usize) -> Result<Box<dyn HostBlock>, String> {
        PinnedBuffer::<u8>::new(&self.gpu, bytes, self.mapped)
            .map(|block| Box::new(block) as Box<dyn HostBlock>)
            .map_err(|e| e.to_string())
    }
}

impl HostBlock for PinnedBuffer<u8> {
    fn as_ptr(&self) -> *mut u8 {
        self.host_ptr()
    }

    fn capacity(&self) -> usize {
        self.len()
    }

    fn placement(&self) -> HostPlacement {
        match self.mapped_device_ptr() {
            Some(device_ptr) => HostPlacement::Mapped { device_ptr },
            None => HostPlacement::Pinned,
        }
    }
}
