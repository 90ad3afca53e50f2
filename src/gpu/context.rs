//! One CUDA device's primary context, shared (through `Arc`) by every buffer,
//! stream and module made in it, so it is released only after all of them.
//!
//! The primary context is the one the CUDA runtime uses too, so TensorRT,
//! which works through the runtime, runs in the same context on the same
//! stream as these kernels.

use std::sync::{Arc, Mutex};

use cudarc::driver::result;
use cudarc::driver::sys::{CUcontext, CUdevice, CUdevice_attribute};

use super::driver;
use super::error::GpuError;

/// Whether this build has the CUDA layer (the kernels, the device path).
pub const BUILT_IN: bool = true;

/// A retained primary context of one device.
#[derive(Debug)]
pub struct GpuContext {
    device: CUdevice,
    context: CUcontext,
    ordinal: usize,
    name: String,
    compute_capability: (i32, i32),
    /// Whether the device shares memory with the host (a Jetson): mapped
    /// page-locked memory is then read by kernels without a copy.
    integrated: bool,
    drop_errors: Mutex<DropErrors>,
}

/// Failures of `Drop` impls, which cannot return them: counted and the first
/// kept, so a test or a health check can see that a release failed.
#[derive(Debug, Default)]
struct DropErrors {
    count: u64,
    first: Option<String>,
}

// SAFETY: a CUcontext handle may be used from any thread; the driver API is
// thread-safe, and every use first makes the context current on the calling
// thread (`bind`). The remaining fields are plain data or a Mutex.
unsafe impl Send for GpuContext {}
// SAFETY: as above; `&GpuContext` only reads immutable fields, binds the
// context (thread-local driver state), or locks `drop_errors`.
unsafe impl Sync for GpuContext {}

impl GpuContext {
    /// Opens device `ordinal`. `GpuError::NoDriver` and `GpuError::NoDevice`
    /// mean "this machine has no usable CUDA GPU", as distinct from a fault.
    pub fn open(ordinal: usize) -> Result<Arc<GpuContext>, GpuError> {
        if !driver::driver_present() {
            return Err(GpuError::NoDriver);
        }
        result::init().map_err(|e| GpuError::NoDevice {
            detail: format!("cuInit: {e}"),
        })?;
        let count = result::device::get_count().map_err(GpuError::driver("cuDeviceGetCount"))?;
        let count = usize::try_from(count).unwrap_or(0);
        if count == 0 {
            return Err(GpuError::NoDevice {
                detail: "the driver reports 0 devices".to_string(),
            });
        }
        if ordinal >= count {
            return Err(GpuError::DeviceOutOfRange { ordinal, count });
        }
        // `ordinal < count <= i32::MAX`.
        let device =
            result::device::get(ordinal as i32).map_err(GpuError::driver("cuDeviceGet"))?;
        let name = result::device::get_name(device).map_err(GpuError::driver("cuDeviceGetName"))?;
        let attribute = |a| {
            // SAFETY: `device` came from cuDeviceGet just above.
            unsafe { result::device::get_attribute(device, a) }
                .map_err(GpuError::driver("cuDeviceGetAttribute"))
        };
        let major = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        let integrated = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_INTEGRATED)? != 0;
        // SAFETY: `device` came from cuDeviceGet; the matching release is in Drop.
        let context = unsafe { result::primary_ctx::retain(device) }
            .map_err(GpuError::driver("cuDevicePrimaryCtxRetain"))?;
        let gpu = GpuContext {
            device,
            context,
            ordinal,
            name,
            compute_capability: (major, minor),
            integrated,
            drop_errors: Mutex::new(DropErrors::default()),
        };
        gpu.bind()?;
        Ok(Arc::new(gpu))
    }

    /// Makes this context current on the calling thread. Every public GPU
    /// operation calls it first, so owners may move between threads.
    pub fn bind(&self) -> Result<(), GpuError> {
        // SAFETY: the context is retained for as long as `self` lives.
        unsafe { result::ctx::set_current(self.context) }
            .map_err(GpuError::driver("cuCtxSetCurrent"))
    }

    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// Bytes of the device's memory in use (total less free, every process
    /// and context on it), as `cuMemGetInfo` reports it.
    pub fn memory_in_use(&self) -> Result<u64, GpuError> {
        self.bind()?;
        // `bind` made this live context current on this thread, as
        // cuMemGetInfo needs.
        let (free, total) = result::mem_get_info().map_err(GpuError::driver("cuMemGetInfo"))?;
        Ok(total.saturating_sub(free) as u64)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn compute_capability(&self) -> (i32, i32) {
        self.compute_capability
    }

    /// True on a Jetson (the GPU shares the host's memory).
    pub fn integrated(&self) -> bool {
        self.integrated
    }

    /// Records a failure inside a `Drop` (which cannot return it) and logs it.
    pub(crate) fn record_drop_error(&self, what: &str, error: impl std::fmt::Display) {
        let message = format!("{what}: {error}");
        log::error!(
            "GPU resource release failed on device {} ({}): {message}",
            self.ordinal,
            self.name
        );
        // A poisoned lock only means another drop panicked mid-record; the
        // counts are still usable.
        let mut errors = self
            .drop_errors
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        errors.count += 1;
        if errors.first.is_none() {
            errors.first = Some(message);
        }
    }

    /// How many releases failed in `Drop` so far, and the first failure.
    pub fn drop_errors(&self) -> (u64, Option<String>) {
        let errors = self
            .drop_errors
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        (errors.count, errors.first.clone())
    }
}

impl Drop for GpuContext {
    fn drop(&mut self) {
        // SAFETY: pairs with the retain in `open`; every owner of memory,
        // streams or modules in this context holds an `Arc<GpuContext>`, so
        // they are all gone by now.
        if let Err(e) = unsafe { result::primary_ctx::release(self.device) } {
            // Nothing outlives the context to record this in: log it.
            log::error!(
                "cuDevicePrimaryCtxRelease on device {} ({}) failed: {e}",
                self.ordinal,
                self.name
            );
        }
    }
}
