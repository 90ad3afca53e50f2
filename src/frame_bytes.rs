//! A ring slot's pixel memory (`FrameBytes`): ordinary heap memory, or
//! page-locked host memory that the GPU reads without a staging copy.
//!
//! ```text
//! pipeline: SlotMemory (one per run, empty) ──▶ every camera's ring slots
//! device thread, once its GPU path is open: SlotMemory::install(pinned allocator),
//!   then, where the frame size is known before the start, SlotMemory::prepare:
//!   a block for every slot, allocated there and then (not by capture's first frames)
//! capture, a slot's first frame (or a larger one): FrameBytes takes a prepared
//!   block, else grows from the allocator installed then (page-locked, portable,
//!   maybe mapped), else the heap
//! device path: HostPlacement of the slot -> upload straight from it, or a
//!   kernel reading it in place (mapped); the slot goes back to capture only
//!   once the GPU has finished reading it (`infer::device_stage`)
//! ```
//!
//! A leaf: it names nothing of ours. The GPU side implements `HostAllocator`
//! (`gpu::PinnedSlots`); without the device path, or where page-locked memory
//! cannot be had, slots stay on the heap and behave exactly as a `Vec<u8>`.
//!
//! Invariants:
//! - the bytes `0..len` are initialized (written by `extend_from_slice`);
//!   memory is never handed out past `len`;
//! - a block is freed when the slot drops it (a larger frame, or the slot's
//!   own drop at the ring's teardown), never while the slot holds it: the
//!   device path keeps a slot (and so its block) until the GPU's reads of it
//!   are done, so a freed block is never read by the GPU.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Where a slot's bytes live, as the GPU sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostPlacement {
    /// Heap memory: the GPU path must copy it into page-locked memory first.
    Pageable,
    /// Page-locked: copies from it are DMA, asynchronous to the host.
    Pinned,
    /// Page-locked and mapped: a kernel may read it in place at this device
    /// address (the first byte of the block).
    Mapped { device_ptr: u64 },
}

/// One block of host memory from a `HostAllocator`, freed on drop.
pub trait HostBlock: Send + Sync {
    /// The block's first byte; valid for `capacity()` bytes while the block lives.
    fn as_ptr(&self) -> *mut u8;
    fn capacity(&self) -> usize;
    fn placement(&self) -> HostPlacement;
}

/// Gives out host blocks for ring slots (page-locked memory of the GPU).
pub trait HostAllocator: Send + Sync {
    /// A block of at least `bytes` bytes, or why none could be had.
    fn allocate(&self, bytes: usize) -> Result<Box<dyn HostBlock>, String>;
}

/// The allocator every ring slot of one run grows from: empty (heap) until
/// the device path installs its own, which it does before capture starts.
#[derive(Clone, Default)]
pub struct SlotMemory {
    allocator: Arc<OnceLock<Arc<dyn HostAllocator>>>,
    /// Slots made to grow from this memory (`FrameBytes::in_memory`).
    slots: Arc<AtomicUsize>,
    /// Blocks allocated ahead by `prepare`, each taken by one slot's first
    /// growth; the rest are freed with the last clone.
    prepared: Arc<Mutex<Vec<Box<dyn HostBlock>>>>,
}

impl fmt::Debug for SlotMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlotMemory")
            .field("installed", &self.allocator.get().is_some())
            .finish()
    }
}

impl SlotMemory {
    /// Heap memory until `install`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Slots grow from `allocator` from now on (slots already holding heap
    /// memory move to it at their next growth only). `false` when one was
    /// installed before (the first stays).
    pub fn install(&self, allocator: Arc<dyn HostAllocator>) -> bool {
        self.allocator.set(allocator).is_ok()
    }

    fn allocator(&self) -> Option<&Arc<dyn HostAllocator>> {
        self.allocator.get()
    }

    /// Allocates, now, blocks of `bytes` (with the installed allocator)
    /// until one waits for every slot made so far; call it before capture
    /// starts, so that capture's first frames find their memory ready:
    /// allocating page-locked memory takes milliseconds, and on the capture
    /// threads it delayed a run's first frames and the GPU's work beside
    /// them. Returns the blocks allocated; none without an allocator.
    pub fn prepare(&self, bytes: usize) -> Result<usize, String> {
        let Some(allocator) = self.allocator() else {
            return Ok(0);
        };
        let mut prepared = self.prepared.lock().unwrap_or_else(|p| p.into_inner());
        let wanted = self.slots.load(Ordering::Relaxed);
        let mut made = 0;
        while prepared.len() < wanted {
            prepared.push(allocator.allocate(bytes.max(1))?);
            made += 1;
        }
        Ok(made)
    }

    /// A slot's first growth takes one prepared block: the block, when it
    /// holds `bytes`; else it is freed here (the frames are larger than the
    /// size known before the start), so no block stays pinned unused.
    fn take_prepared(&self, bytes: usize) -> Option<Box<dyn HostBlock>> {
        let block = self
            .prepared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()?;
        (block.capacity() >= bytes).then_some(block)
    }
}

/// A slot's bytes: a `Vec<u8>` or a block from the run's `SlotMemory`.
pub struct FrameBytes {
    memory: SlotMemory,
    store: Store,
}

enum Store {
    Heap(Vec<u8>),
    Block {
        block: Box<dyn HostBlock>,
        len: usize,
    },
}

impl FrameBytes {
    /// Heap memory for good (tests, replays, the CPU path's copies).
    pub fn heap(capacity: usize) -> Self {
        FrameBytes {
            memory: SlotMemory::new(),
            store: Store::Heap(Vec::with_capacity(capacity)),
        }
    }

    /// Empty, growing from `memory` once something is written.
    pub fn in_memory(memory: SlotMemory) -> Self {
        memory.slots.fetch_add(1, Ordering::Relaxed);
        FrameBytes {
            memory,
            store: Store::Heap(Vec::new()),
        }
    }

    pub fn len(&self) -> usize {
        match &self.store {
            Store::Heap(v) => v.len(),
            Store::Block { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn capacity(&self) -> usize {
        match &self.store {
            Store::Heap(v) => v.capacity(),
            Store::Block { block, .. } => block.capacity(),
        }
    }

    /// Where the bytes live, for the GPU path.
    pub fn placement(&self) -> HostPlacement {
        match &self.store {
            Store::Heap(_) => HostPlacement::Pageable,
            Store::Block { block, .. } => block.placement(),
        }
    }

    pub fn clear(&mut self) {
        match &mut self.store {
            Store::Heap(v) => v.clear(),
            Store::Block { len, .. } => *len = 0,
        }
    }

    /// Room for `additional` more bytes. With an allocator installed, heap
    /// memory moves to a block at its first growth; a block too small is
    /// replaced by a larger one (the old one freed, its bytes kept). When
    /// the allocator fails, the bytes stay on the heap (logged once a slot).
    pub fn reserve_exact(&mut self, additional: usize) {
        let needed = self.len().saturating_add(additional);
        let on_heap = matches!(self.store, Store::Heap(_));
        if needed <= self.capacity() && !(on_heap && self.memory.allocator().is_some()) {
            return;
        }
        if let Some(allocator) = self.memory.allocator() {
            let block = match self.memory.take_prepared(needed) {
                Some(block) => Ok(block),
                None => allocator.allocate(needed.max(1)),
            };
            match block {
                Ok(block) if block.capacity() >= needed => {
                    let len = self.len();
                    // SAFETY: the new block holds at least `needed >= len`
                    // bytes and is not the memory read from (a fresh block).
                    unsafe { std::ptr::copy_nonoverlapping(self.as_ptr(), block.as_ptr(), len) };
                    self.store = Store::Block { block, len };
                    return;
                }
                Ok(_) => {
                    log::warn!("a host block smaller than asked for: the slot stays on the heap")
                }
                Err(e) => {
                    log::warn!(error:% = e, bytes = needed; "no page-locked memory for a ring slot: it stays on the heap (the GPU path copies it first)");
                    // No further attempts for this slot.
                    self.memory = SlotMemory::new();
                }
            }
        }
        match &mut self.store {
            Store::Heap(v) => v.reserve_exact(additional),
            Store::Block { block, len } => {
                // The allocator is gone or failed: back to the heap.
                let mut v = Vec::with_capacity(needed);
                // SAFETY: `0..len` of the block is initialized.
                v.extend_from_slice(unsafe { std::slice::from_raw_parts(block.as_ptr(), *len) });
                self.store = Store::Heap(v);
            }
        }
    }

    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        if self.len() + bytes.len() > self.capacity()
            || (matches!(self.store, Store::Heap(_)) && self.memory.allocator().is_some())
        {
            self.reserve_exact(bytes.len());
        }
        match &mut self.store {
            Store::Heap(v) => v.extend_from_slice(bytes),
            Store::Block { block, len } => {
                // SAFETY: `reserve_exact` above made room for `len +
                // bytes.len()` bytes; the source is a distinct slice.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        bytes.as_ptr(),
                        block.as_ptr().add(*len),
                        bytes.len(),
                    )
                };
                *len += bytes.len();
            }
        }
    }

    fn as_ptr(&self) -> *mut u8 {
        match &self.store {
            Store::Heap(v) => v.as_ptr().cast_mut(),
            Store::Block { block, .. } => block.as_ptr(),
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        match &self.store {
            Store::Heap(v) => v,
            // SAFETY: `0..len` is initialized and lives as long as the block.
            Store::Block { block, len } => unsafe {
                std::slice::from_raw_parts(block.as_ptr(), *len)
            },
        }
    }
}

impl std::ops::Deref for FrameBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

/// A copy on the heap (tests, replays).
impl Clone for FrameBytes {
    fn clone(&self) -> Self {
        FrameBytes {
            memory: SlotMemory::new(),
            store: Store::Heap(self.as_slice().to_vec()),
        }
    }
}

impl From<Vec<u8>> for FrameBytes {
    fn from(v: Vec<u8>) -> Self {
        FrameBytes {
            memory: SlotMemory::new(),
            store: Store::Heap(v),
        }
    }
}

impl PartialEq for FrameBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl PartialEq<Vec<u8>> for FrameBytes {
    fn eq(&self, other: &Vec<u8>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<const N: usize> PartialEq<[u8; N]> for FrameBytes {
    fn eq(&self, other: &[u8; N]) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl fmt::Debug for FrameBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FrameBytes")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("placement", &self.placement())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Test double: heap blocks that count how many are alive, placed as
    /// `placement` says.
    struct CountingAllocator {
        live: Arc<AtomicUsize>,
        made: AtomicUsize,
    }

    struct CountedBlock {
        bytes: Box<[u8]>,
        live: Arc<AtomicUsize>,
    }

    impl HostBlock for CountedBlock {
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

    impl HostAllocator for CountingAllocator {
        fn allocate(&self, bytes: usize) -> Result<Box<dyn HostBlock>, String> {
            self.live.fetch_add(1, Ordering::SeqCst);
            self.made.fetch_add(1, Ordering::SeqCst);
            Ok(Box::new(CountedBlock {
                bytes: vec![0; bytes].into_boxed_slice(),
                live: Arc::clone(&self.live),
            }))
        }
    }

    #[test]
    fn without_an_allocator_the_bytes_behave_as_a_vec() {
        let mut bytes = FrameBytes::in_memory(SlotMemory::new());
        bytes.reserve_exact(6);
        bytes.extend_from_slice(&[1, 2, 3]);
        bytes.extend_from_slice(&[4, 5, 6]);
        assert_eq!(&bytes[..], &[1, 2, 3, 4, 5, 6]);
        assert_eq!(bytes.placement(), HostPlacement::Pageable);
        bytes.clear();
        assert!(bytes.is_empty());
    }

    #[test]
    fn installed_memory_holds_the_frame_and_frees_the_old_block_when_a_larger_frame_comes() {
        let live = Arc::new(AtomicUsize::new(0));
        let allocator = Arc::new(CountingAllocator {
            live: Arc::clone(&live),
            made: AtomicUsize::new(0),
        });
        let memory = SlotMemory::new();
        let mut bytes = FrameBytes::in_memory(memory.clone());
        assert!(memory.install(allocator.clone()));
        bytes.clear();
        bytes.reserve_exact(4);
        bytes.extend_from_slice(&[9, 8, 7, 6]);
        assert_eq!(bytes.placement(), HostPlacement::Pinned);
        assert_eq!(live.load(Ordering::SeqCst), 1);
        // The same size again: the block is reused.
        bytes.clear();
        bytes.extend_from_slice(&[1, 2, 3, 4]);
        assert_eq!(allocator.made.load(Ordering::SeqCst), 1);
        // A larger frame: a new block, the old one freed at once.
        bytes.clear();
        bytes.reserve_exact(8);
        bytes.extend_from_slice(&[0; 8]);
        assert_eq!(allocator.made.load(Ordering::SeqCst), 2);
        assert_eq!(
            live.load(Ordering::SeqCst),
            1,
            "the smaller block was freed"
        );
        let copy = bytes.clone();
        assert_eq!(copy.placement(), HostPlacement::Pageable);
        drop(bytes);
        assert_eq!(
            live.load(Ordering::SeqCst),
            0,
            "the slot's drop frees its block"
        );
    }

    #[test]
    fn prepared_blocks_are_allocated_before_the_first_frames_and_taken_by_them() {
        let live = Arc::new(AtomicUsize::new(0));
        let allocator = Arc::new(CountingAllocator {
            live: Arc::clone(&live),
            made: AtomicUsize::new(0),
        });
        let memory = SlotMemory::new();
        let mut slots: Vec<FrameBytes> = (0..3)
            .map(|_| FrameBytes::in_memory(memory.clone()))
            .collect();
        // Nothing to allocate from yet.
        assert_eq!(memory.prepare(16), Ok(0));
        assert!(memory.install(allocator.clone()));
        assert_eq!(memory.prepare(16), Ok(3), "a block per slot");
        assert_eq!(memory.prepare(16), Ok(0), "each slot has its block waiting");
        assert_eq!(live.load(Ordering::SeqCst), 3);
        // The first frames take them: nothing more is allocated.
        for (k, slot) in slots.iter_mut().take(2).enumerate() {
            slot.extend_from_slice(&[k as u8; 12]);
            assert_eq!(slot.placement(), HostPlacement::Pinned);
            assert_eq!(&slot[..], &[k as u8; 12]);
        }
        assert_eq!(allocator.made.load(Ordering::SeqCst), 3);
        // A frame larger than the prepared blocks gets its own, and the
        // prepared block it cannot use is freed at once.
        slots[2].extend_from_slice(&[7; 20]);
        assert_eq!(allocator.made.load(Ordering::SeqCst), 4);
        assert_eq!(live.load(Ordering::SeqCst), 3, "no block pinned unused");
        drop(slots);
        assert_eq!(live.load(Ordering::SeqCst), 0);
        drop(memory);
        assert_eq!(live.load(Ordering::SeqCst), 0);
    }
}
