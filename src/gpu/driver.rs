//! Every raw CUDA driver call of the crate, and nothing else: each function is
//! one driver call with its status turned into a `Result`. The safe owners
//! (`GpuContext`, `Stream`, `Event`, `DeviceBuffer`, `PinnedBuffer`,
//! `KernelSet`) are built on these and uphold their `# Safety` conditions.
//!
//! The driver library is loaded at run time (cudarc's `dynamic-loading`), so
//! nothing CUDA is needed to link. cudarc panics if a call is made while the
//! library is absent: `driver_present` must be checked first (`GpuContext::open`
//! does), and every other function here is only reachable through a context.

use std::ffi::{CStr, c_void};
use std::mem::MaybeUninit;

pub(crate) use cudarc::driver::DriverError;
use cudarc::driver::sys;

pub(crate) type Device = sys::CUdevice;
pub(crate) type Context = sys::CUcontext;
pub(crate) type RawStream = sys::CUstream;
pub(crate) type RawEvent = sys::CUevent;
pub(crate) type Module = sys::CUmodule;
pub(crate) type Function = sys::CUfunction;
pub(crate) type DevicePtr = sys::CUdeviceptr;

/// Whether `libcuda.so` can be loaded. Checked before any other call.
pub(crate) fn driver_present() -> bool {
    // SAFETY: only tries to open the library by its known names; loading the
    // NVIDIA driver library runs no code of ours.
    unsafe { sys::is_culib_present() }
}

/// `cuInit(0)`.
pub(crate) fn init() -> Result<(), DriverError> {
    // SAFETY: cuInit takes no pointers and may be called any number of times.
    unsafe { sys::cuInit(0) }.result()
}

pub(crate) fn device_count() -> Result<i32, DriverError> {
    let mut count = 0;
    // SAFETY: `count` is a valid out-pointer for the duration of the call.
    unsafe { sys::cuDeviceGetCount(&mut count) }.result()?;
    Ok(count)
}

pub(crate) fn device_get(ordinal: i32) -> Result<Device, DriverError> {
    let mut device = MaybeUninit::uninit();
    // SAFETY: valid out-pointer; the driver writes it on success only, and we
    // read it only then.
    unsafe {
        sys::cuDeviceGet(device.as_mut_ptr(), ordinal).result()?;
        Ok(device.assume_init())
    }
}

pub(crate) fn device_name(device: Device) -> Result<String, DriverError> {
    let mut buf = [0 as std::ffi::c_char; 256];
    // SAFETY: the driver writes at most `len` bytes, NUL-terminated, into `buf`.
    unsafe { sys::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as i32, device) }.result()?;
    // The driver NUL-terminates within the buffer; force the last byte to
    // NUL in case a name ever fills it.
    buf[buf.len() - 1] = 0;
    // SAFETY: `buf` is a live, NUL-terminated C string (last byte is NUL).
    let name = unsafe { CStr::from_ptr(buf.as_ptr()) };
    Ok(name.to_string_lossy().into_owned())
}

pub(crate) fn device_attribute(
    device: Device,
    attribute: sys::CUdevice_attribute,
) -> Result<i32, DriverError> {
    let mut value = 0;
    // SAFETY: valid out-pointer; `device` came from `device_get`.
    unsafe { sys::cuDeviceGetAttribute(&mut value, attribute, device) }.result()?;
    Ok(value)
}

/// Retains the device's primary context (the one the CUDA runtime, and so
/// TensorRT, also uses).
///
/// # Safety
/// `device` must come from `device_get`. Each successful call must be paired
/// with one `primary_context_release`.
pub(crate) unsafe fn primary_context_retain(device: Device) -> Result<Context, DriverError> {
    let mut context = MaybeUninit::uninit();
    // SAFETY: valid out-pointer, read only on success; the caller upholds the pairing.
    unsafe {
        sys::cuDevicePrimaryCtxRetain(context.as_mut_ptr(), device).result()?;
        Ok(context.assume_init())
    }
}

/// # Safety
/// Pairs with one successful `primary_context_retain` of `device`; nothing
/// allocated in the context may be used afterwards unless another retain holds it.
pub(crate) unsafe fn primary_context_release(device: Device) -> Result<(), DriverError> {
    // SAFETY: the caller upholds the pairing.
    unsafe { sys::cuDevicePrimaryCtxRelease_v2(device) }.result()
}

/// `cuMemGetInfo`: (free, total) bytes of the current context's device.
///
/// # Safety
/// A context must be current on the calling thread.
pub(crate) unsafe fn mem_get_info() -> Result<(usize, usize), DriverError> {
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: valid out-pointers for the call; a context is current.
    unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) }.result()?;
    Ok((free, total))
}

/// Makes `context` current on the calling thread.
///
/// # Safety
/// `context` must be a live context (retained and not yet released).
pub(crate) unsafe fn context_set_current(context: Context) -> Result<(), DriverError> {
    // SAFETY: the caller guarantees the context is live.
    unsafe { sys::cuCtxSetCurrent(context) }.result()
}

/// A stream that does not synchronize with the legacy default stream, at
/// the context's greatest priority: every stream sealcheck makes carries the
/// frame path, and a kernel of another stream in the process (a `[shadow]`
/// engine's, made by its library at the default, least priority) then waits
/// for free multiprocessors behind the frame's kernels instead of beside them.
///
/// # Safety
/// A context must be current on the calling thread.
pub(crate) unsafe fn stream_create() -> Result<RawStream, DriverError> {
    let (mut least, mut greatest) = (0, 0);
    let mut stream = MaybeUninit::uninit();
    // SAFETY: valid out-pointers, read only on success; a context is current.
    unsafe {
        sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest).result()?;
        sys::cuStreamCreateWithPriority(
            stream.as_mut_ptr(),
            sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
            greatest,
        )
        .result()?;
        Ok(stream.assume_init())
    }
}

/// # Safety
/// `stream` must be live; it must not be used afterwards.
pub(crate) unsafe fn stream_destroy(stream: RawStream) -> Result<(), DriverError> {
    // SAFETY: the caller guarantees a live stream that is not used again.
    unsafe { sys::cuStreamDestroy_v2(stream) }.result()
}

/// # Safety
/// `stream` must be live.
pub(crate) unsafe fn stream_synchronize(stream: RawStream) -> Result<(), DriverError> {
    // SAFETY: the caller guarantees a live stream.
    unsafe { sys::cuStreamSynchronize(stream) }.result()
}

/// # Safety
/// A context must be current on the calling thread.
pub(crate) unsafe fn event_create(timing: bool) -> Result<RawEvent, DriverError> {
    let flags = if timing {
        sys::CUevent_flags::CU_EVENT_DEFAULT
    } else {
        sys::CUevent_flags::CU_EVENT_DISABLE_TIMING
    };
    let mut event = MaybeUninit::uninit();
    // SAFETY: valid out-pointer, read only on success.
    unsafe {
        sys::cuEventCreate(event.as_mut_ptr(), flags as u32).result()?;
        Ok(event.assume_init())
    }
}

/// # Safety
/// `event` and `stream` must be live and belong to the same context.
pub(crate) unsafe fn event_record(event: RawEvent, stream: RawStream) -> Result<(), DriverError> {
    // SAFETY: the caller guarantees both handles are live.
    unsafe { sys::cuEventRecord(event, stream) }.result()
}

/// # Safety
/// `event` must be live.
pub(crate) unsafe fn event_synchronize(event: RawEvent) -> Result<(), DriverError> {
    // SAFETY: the caller guarantees a live event.
    unsafe { sys::cuEventSynchronize(event) }.result()
}

/// Milliseconds between two completed events.
///
/// # Safety
/// Both events must be live, created with timing, and recorded.
pub(crate) unsafe fn event_elapsed_ms(start: RawEvent, end: RawEvent) -> Result<f32, DriverError> {
    let mut ms = 0.0f32;
    // SAFETY: valid out-pointer; the caller guarantees live timing events.
    unsafe { sys::cuEventElapsedTime(&mut ms, start, end) }.result()?;
    Ok(ms)
}

/// # Safety
/// `event` must be live; it must not be used afterwards.
pub(crate) unsafe fn event_destroy(event: RawEvent) -> Result<(), DriverError> {
    // SAFETY: the caller guarantees a live event not used again.
    unsafe { sys::cuEventDestroy_v2(event) }.result()
}

/// Device memory, uninitialized.
///
/// # Safety
/// A context must be current on the calling thread; `bytes` must be non-zero.
pub(crate) unsafe fn mem_alloc(bytes: usize) -> Result<DevicePtr, DriverError> {
    let mut ptr = MaybeUninit::uninit();
    // SAFETY: valid out-pointer, read only on success.
    unsafe {
        sys::cuMemAlloc_v2(ptr.as_mut_ptr(), bytes).result()?;
        Ok(ptr.assume_init())
    }
}

/// # Safety
/// `ptr` must come from `mem_alloc`, be freed once, and no queued work may
/// still use it.
pub(crate) unsafe fn mem_free(ptr: DevicePtr) -> Result<(), DriverError> {
    // SAFETY: the caller guarantees a live allocation with no pending users.
    unsafe { sys::cuMemFree_v2(ptr) }.result()
}

/// Page-locked host memory, uninitialized. With `mapped`, the device can also
/// address it (`host_device_pointer`).
///
/// # Safety
/// A context must be current on the calling thread; `bytes` must be non-zero.
pub(crate) unsafe fn host_alloc(bytes: usize, mapped: bool) -> Result<*mut c_void, DriverError> {
    let flags = sys::CU_MEMHOSTALLOC_PORTABLE
        | if mapped {
            sys::CU_MEMHOSTALLOC_DEVICEMAP
        } else {
            0
        };
    let mut ptr = MaybeUninit::uninit();
    // SAFETY: valid out-pointer, read only on success.
    unsafe {
        sys::cuMemHostAlloc(ptr.as_mut_ptr(), bytes, flags).result()?;
        Ok(ptr.assume_init())
    }
}

/// The device address of mapped page-locked memory.
///
/// # Safety
/// `host` must come from `host_alloc(_, true)` and be live.
pub(crate) unsafe fn host_device_pointer(host: *mut c_void) -> Result<DevicePtr, DriverError> {
    let mut ptr = MaybeUninit::uninit();
    // SAFETY: valid out-pointer; the caller guarantees mapped, live memory.
    unsafe {
        sys::cuMemHostGetDevicePointer_v2(ptr.as_mut_ptr(), host, 0).result()?;
        Ok(ptr.assume_init())
    }
}

/// # Safety
/// `host` must come from `host_alloc`, be freed once, and no queued work may
/// still use it.
pub(crate) unsafe fn host_free(host: *mut c_void) -> Result<(), DriverError> {
    // SAFETY: the caller guarantees a live allocation with no pending users.
    unsafe { sys::cuMemFreeHost(host) }.result()
}

/// Queues `bytes` bytes of `value` at `dst`.
///
/// # Safety
/// `dst..dst+bytes` must lie in a live device allocation that outlives the
/// queued work; `stream` must be live.
pub(crate) unsafe fn memset_d8_async(
    dst: DevicePtr,
    value: u8,
    bytes: usize,
    stream: RawStream,
) -> Result<(), DriverError> {
    // SAFETY: the caller guarantees the range and the stream.
    unsafe { sys::cuMemsetD8Async(dst, value, bytes, stream) }.result()
}

/// Queues a host-to-device copy.
///
/// # Safety
/// `src..src+bytes` must be readable host memory (page-locked for the copy to
/// be asynchronous) that stays valid and unwritten until the stream passes the
/// copy; `dst..dst+bytes` must lie in a live device allocation; `stream` live.
pub(crate) unsafe fn memcpy_htod_async(
    dst: DevicePtr,
    src: *const c_void,
    bytes: usize,
    stream: RawStream,
) -> Result<(), DriverError> {
    // SAFETY: the caller guarantees both ranges and the stream.
    unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src, bytes, stream) }.result()
}

/// Queues a device-to-host copy.
///
/// # Safety
/// `dst..dst+bytes` must be writable host memory (page-locked for the copy to
/// be asynchronous) that nothing reads or writes until the stream passes the
/// copy; `src..src+bytes` must lie in a live device allocation; `stream` live.
pub(crate) unsafe fn memcpy_dtoh_async(
    dst: *mut c_void,
    src: DevicePtr,
    bytes: usize,
    stream: RawStream,
) -> Result<(), DriverError> {
    // SAFETY: the caller guarantees both ranges and the stream.
    unsafe { sys::cuMemcpyDtoHAsync_v2(dst, src, bytes, stream) }.result()
}

/// Queues a device-to-device copy.
///
/// # Safety
/// Both ranges must lie in live device allocations that outlive the queued
/// work; `stream` must be live.
pub(crate) unsafe fn memcpy_dtod_async(
    dst: DevicePtr,
    src: DevicePtr,
    bytes: usize,
    stream: RawStream,
) -> Result<(), DriverError> {
    // SAFETY: the caller guarantees both ranges and the stream.
    unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, stream) }.result()
}

/// Loads a module from an in-memory image (a fatbin here).
///
/// # Safety
/// A context must be current; `image` must point to a complete, well-formed
/// fatbin, cubin or NUL-terminated PTX image, aligned as the driver expects.
pub(crate) unsafe fn module_load_data(image: *const c_void) -> Result<Module, DriverError> {
    let mut module = MaybeUninit::uninit();
    // SAFETY: valid out-pointer, read only on success; the caller vouches for the image.
    unsafe {
        sys::cuModuleLoadData(module.as_mut_ptr(), image).result()?;
        Ok(module.assume_init())
    }
}

/// # Safety
/// `module` must be live.
pub(crate) unsafe fn module_function(
    module: Module,
    symbol: &CStr,
) -> Result<Function, DriverError> {
    let mut function = MaybeUninit::uninit();
    // SAFETY: valid out-pointer; NUL-terminated name; live module.
    unsafe {
        sys::cuModuleGetFunction(function.as_mut_ptr(), module, symbol.as_ptr()).result()?;
        Ok(function.assume_init())
    }
}

/// # Safety
/// `module` must be live; none of its functions may be used afterwards.
pub(crate) unsafe fn module_unload(module: Module) -> Result<(), DriverError> {
    // SAFETY: the caller guarantees a live module not used again.
    unsafe { sys::cuModuleUnload(module) }.result()
}

/// Queues a kernel launch.
///
/// # Safety
/// `function` must belong to a live module; `params` must hold one pointer per
/// kernel parameter, each to a value of exactly the parameter's type and
/// layout (they are copied at the call); every device address inside them
/// must stay valid, and be large enough for what the kernel touches given the
/// grid, until the stream passes the launch.
pub(crate) unsafe fn launch(
    function: Function,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    stream: RawStream,
    params: &mut [*mut c_void],
) -> Result<(), DriverError> {
    // SAFETY: the caller guarantees the function, the parameters and the memory they name.
    unsafe {
        sys::cuLaunchKernel(
            function,
            grid.0,
            grid.1,
            grid.2,
            block.0,
            block.1,
            block.2,
            0,
            stream,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    }
    .result()
}
