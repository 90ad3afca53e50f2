//! Owners of GPU-side memory: `DeviceBuffer` (device memory) and
//! `PinnedBuffer` (page-locked host memory, optionally mapped into the
//! device's address space for zero-copy reads on a Jetson). Both are
//! allocated once, at start, and freed on drop.
//!
//! They hand out raw device addresses for copies and kernel launches; the
//! code that queues such work (`GpuPreprocessor`) keeps every buffer alive and
//! untouched until the stream has passed the work (events per frame), and
//! synchronizes its stream before the buffers are dropped.

use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::result;
use cudarc::driver::sys::{self, CUdeviceptr};

use super::context::GpuContext;
use super::driver;
use super::element::DeviceTap;
use super::error::GpuError;

/// Element types that may live in GPU buffers: plain data for which every bit
/// pattern is a valid value (so reading back poisoned or uninitialized memory
/// is defined).
pub trait DeviceValue: Copy + Send + 'static + private::Sealed {}

mod private {
    pub trait Sealed {}
}

macro_rules! device_value {
    ($($t:ty),*) => {$(
        impl private::Sealed for $t {}
        impl DeviceValue for $t {}
    )*};
}
// u16 carries f16 bits on the host.
device_value!(u8, u16, u32, u64, f32);
impl private::Sealed for DeviceTap {}
impl DeviceValue for DeviceTap {}

/// `len` values of `T` in device memory.
#[derive(Debug)]
pub struct DeviceBuffer<T: DeviceValue> {
    gpu: Arc<GpuContext>,
    ptr: CUdeviceptr,
    len: usize,
    _values: PhantomData<T>,
}

impl<T: DeviceValue> DeviceBuffer<T> {
    /// Allocates `len` values (contents undefined until written). `len` 0
    /// allocates one value, so every buffer has a real address.
    pub fn new(gpu: &Arc<GpuContext>, len: usize) -> Result<Self, GpuError> {
        gpu.bind()?;
        let bytes = byte_len::<T>(len.max(1))?;
        // SAFETY: the context is current (bind) and `bytes` is non-zero; the
        // contents are undefined, which every `DeviceValue` tolerates.
        let ptr = unsafe { result::malloc_sync(bytes) }.map_err(GpuError::driver("cuMemAlloc"))?;
        Ok(DeviceBuffer {
            gpu: Arc::clone(gpu),
            ptr,
            len,
            _values: PhantomData,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn bytes(&self) -> usize {
        self.len * size_of::<T>()
    }

    /// The device address of the first value.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// The device address of value `index` (which must be `<= len`).
    pub fn device_ptr_at(&self, index: usize) -> u64 {
        debug_assert!(index <= self.len);
        self.ptr + (index * size_of::<T>()) as u64
    }
}

impl<T: DeviceValue> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if let Err(e) = self.gpu.bind() {
            self.gpu
                .record_drop_error("binding the context to free device memory", e);
            return;
        }
        // SAFETY: `ptr` came from cuMemAlloc and is freed only here; the owner
        // that queued work on it synchronized its stream before dropping it.
        if let Err(e) = unsafe { result::memory_free(self.ptr) } {
            self.gpu.record_drop_error("cuMemFree", e);
        }
    }
}

/// `len` values of `T` in page-locked host memory: host-to-device and
/// device-to-host copies from and to it are asynchronous.
#[derive(Debug)]
pub struct PinnedBuffer<T: DeviceValue> {
    gpu: Arc<GpuContext>,
    ptr: *mut T,
    len: usize,
    /// The device's address for the same memory, when allocated mapped.
    mapped: Option<CUdeviceptr>,
}

// SAFETY: the buffer owns its allocation exclusively (like a Vec<T>, with T:
// Send); the raw pointer is only dereferenced through &self / &mut self.
unsafe impl<T: DeviceValue> Send for PinnedBuffer<T> {}

// SAFETY: as a Vec<T>: a shared reference only reads (`as_slice`), and
// every write needs `&mut self`; T: DeviceValue is plain data.
unsafe impl<T: DeviceValue> Sync for PinnedBuffer<T> {}

impl<T: DeviceValue> PinnedBuffer<T> {
    /// Allocates `len` values, zeroed. With `mapped`, kernels can read it in
    /// place through `mapped_device_ptr` (zero-copy; the right choice on a
    /// Jetson, where host and device share DRAM).
    pub fn new(gpu: &Arc<GpuContext>, len: usize, mapped: bool) -> Result<Self, GpuError> {
        gpu.bind()?;
        let bytes = byte_len::<T>(len.max(1))?;
        // Portable: usable from every context; with DEVICEMAP, the device
        // can also address it (`driver::host_device_pointer`).
        let flags = sys::CU_MEMHOSTALLOC_PORTABLE
            | if mapped {
                sys::CU_MEMHOSTALLOC_DEVICEMAP
            } else {
                0
            };
        // SAFETY: the context is current and `bytes` is non-zero; the memory
        // is zeroed below before anything reads it.
        let raw = unsafe { result::malloc_host(bytes, flags) }
            .map_err(GpuError::driver("cuMemHostAlloc"))?;
        // SAFETY: `raw` is a fresh allocation of `bytes` writable bytes.
        unsafe { std::ptr::write_bytes(raw.cast::<u8>(), 0, bytes) };
        let mut buffer = PinnedBuffer {
            gpu: Arc::clone(gpu),
            ptr: raw.cast::<T>(),
            len,
            mapped: None,
        };
        if mapped {
            // SAFETY: allocated just above with the DEVICEMAP flag, still live.
            let device = unsafe { driver::host_device_pointer(raw) }
                .map_err(GpuError::driver("cuMemHostGetDevicePointer"))?;
            buffer.mapped = Some(device);
        }
        Ok(buffer)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialized values (zeroed at allocation,
        // any bit pattern valid for T) for as long as `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as in `as_slice`, and `&mut self` makes this the only access
        // from the host.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// The first value, for code that hands the block out as raw memory
    /// (`host_slots`: a ring slot's bytes).
    pub(crate) fn host_ptr(&self) -> *mut T {
        self.ptr
    }

    /// The device address of this memory, if it was allocated mapped.
    pub fn mapped_device_ptr(&self) -> Option<u64> {
        self.mapped
    }
}

impl<T: DeviceValue> Drop for PinnedBuffer<T> {
    fn drop(&mut self) {
        if let Err(e) = self.gpu.bind() {
            self.gpu
                .record_drop_error("binding the context to free pinned memory", e);
            return;
        }
        // SAFETY: `ptr` came from cuMemHostAlloc and is freed only here; the
        // owner that queued copies synchronized its stream before dropping it.
        if let Err(e) = unsafe { result::free_host(self.ptr.cast()) } {
            self.gpu.record_drop_error("cuMemFreeHost", e);
        }
    }
}

fn byte_len<T>(len: usize) -> Result<usize, GpuError> {
    len.checked_mul(size_of::<T>()).ok_or(GpuError::TooLarge {
        what: "buffer",
        value: len,
        max: usize::MAX / size_of::<T>(),
    })
}
