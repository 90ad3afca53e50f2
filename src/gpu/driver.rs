//! The raw CUDA driver calls that cudarc's `result` layer does not provide,
//! and nothing else. Every other driver call of the crate goes through
//! `cudarc::driver::result` (status codes to `Result`), called by the safe
//! owners (`GpuContext`, `Stream`, `Event`, `DeviceBuffer`, `PinnedBuffer`,
//! `KernelSet`), which uphold its `# Safety` conditions. Each function here
//! says why cudarc's `result` layer cannot serve it.
//!
//! The driver library is loaded at run time (cudarc's `dynamic-loading`), so
//! nothing CUDA is needed to link. cudarc panics if a call is made while the
//! library is absent: `driver_present` must be checked first (`GpuContext::open`
//! does), and every other call is only reachable through a context.

use std::ffi::c_void;
use std::mem::MaybeUninit;

use cudarc::driver::DriverError;
use cudarc::driver::sys;

/// Whether `libcuda.so` can be loaded. Checked before any other call.
///
/// Kept here: cudarc's `result` layer has no such check (its calls panic
/// when the library is absent); the check is `sys::is_culib_present`.
pub(crate) fn driver_present() -> bool {
    // SAFETY: only tries to open the library by its known names; loading the
    // NVIDIA driver library runs no code of ours.
    unsafe { sys::is_culib_present() }
}

/// The device address of mapped page-locked memory
/// (`cuMemHostGetDevicePointer`).
///
/// Kept here: cudarc's `result` layer allocates mapped memory
/// (`malloc_host` with `CU_MEMHOSTALLOC_DEVICEMAP`) but has no call for its
/// device address.
///
/// # Safety
/// `host` must come from `cudarc::driver::result::malloc_host` with
/// `CU_MEMHOSTALLOC_DEVICEMAP` and be live; a context must be current.
pub(crate) unsafe fn host_device_pointer(
    host: *mut c_void,
) -> Result<sys::CUdeviceptr, DriverError> {
    let mut ptr = MaybeUninit::uninit();
    // SAFETY: valid out-pointer, read only on success; the caller guarantees
    // mapped, live memory.
    unsafe {
        sys::cuMemHostGetDevicePointer_v2(ptr.as_mut_ptr(), host, 0).result()?;
        Ok(ptr.assume_init())
    }
}
