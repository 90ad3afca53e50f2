//! Every raw call into ONNX Runtime's C API that the `ort` crate does not
//! wrap, in one place (as `gpu::driver` is for CUDA): the library pre-check
//! before `ort` loads it, and binding device buffers in place for the device
//! path. Each `unsafe` block says why it is sound; callers see safe
//! functions or an `unsafe fn` with its `# Safety` contract.

use std::ffi::CStr;
#[cfg(feature = "cuda")]
use std::ffi::CString;
use std::path::Path;

#[cfg(feature = "cuda")]
use ort::{AsPointer, session::IoBinding, value::TensorRefMut};

/// What a library file says about itself before `ort` loads it.
pub struct LibraryProbe {
    /// `GetVersionString`, e.g. "1.31.1".
    pub version: String,
    /// Whether it offers the C API version `ort` was built for.
    pub has_api: bool,
    library: libloading::Library,
}

impl LibraryProbe {
    /// Leaves the library mapped for the life of the process: `ort` opens the
    /// same file next and gets this handle.
    pub fn keep_loaded(self) {
        std::mem::forget(self.library);
    }
}

/// Opens `path` and asks it for its version and C API, so that a wrong file
/// becomes a message instead of a panic inside `ort`.
pub fn probe_library(path: &Path) -> Result<LibraryProbe, String> {
    // SAFETY: loading a shared library runs its initializers. The file is one the
    // operator named (or the project's own copy) and is meant to be loaded into
    // this process; ort would load the same file next.
    let library = unsafe { libloading::Library::new(path) }.map_err(|e| {
        match std::error::Error::source(&e) {
            // libloading's own text is only "dlopen failed"; the loader's reason is the source.
            Some(reason) => format!("{e}: {reason}"),
            None => e.to_string(),
        }
    })?;
    // SAFETY: `OrtGetApiBase` has this signature in every ONNX Runtime release
    // (onnxruntime_c_api.h); the type matches ort-sys's declaration.
    let get_api_base = unsafe {
        library.get::<unsafe extern "C" fn() -> *const ort::sys::OrtApiBase>(b"OrtGetApiBase\0")
    }
    .map_err(|_| "it does not export OrtGetApiBase: not an ONNX Runtime library".to_string())?;
    // SAFETY: OrtGetApiBase takes no arguments and returns a pointer to a static table.
    let base = unsafe { get_api_base() };
    if base.is_null() {
        return Err("OrtGetApiBase returned null".into());
    }
    // SAFETY: `base` is non-null and points to the library's static OrtApiBase;
    // GetVersionString returns a static NUL-terminated string.
    let version = unsafe { CStr::from_ptr(((*base).GetVersionString)()) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: as above; GetApi returns null for API versions the library lacks.
    let api = unsafe { ((*base).GetApi)(ort::sys::ORT_API_VERSION) };
    Ok(LibraryProbe {
        version,
        has_api: !api.is_null(),
        library,
    })
}

/// Which side of a model an IO binding names.
#[cfg(feature = "cuda")] // IO binding on device buffers: the device path only
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindSide {
    Input,
    Output,
}

/// Binds `value` to the tensor `name` of `binding`, in place: ONNX Runtime
/// reads (input) or writes (output) the value's memory on every run.
/// (`ort`'s `bind_input` copies borrowed tensors and its `bind_output`
/// accepts only tensors it allocated.)
///
/// # Safety
/// `value` must outlive `binding`, and the memory it wraps must stay
/// allocated while runs through `binding` may touch it.
#[cfg(feature = "cuda")]
pub unsafe fn bind_in_place(
    binding: &mut IoBinding,
    side: BindSide,
    name: &str,
    value: &TensorRefMut<'static, f32>,
) -> Result<(), String> {
    let name = CString::new(name).map_err(|_| format!("tensor name {name:?} contains NUL"))?;
    let api = ort::api();
    // SAFETY: the binding and value pointers come from live ort objects; the
    // caller keeps the value alive longer than the binding, and ONNX Runtime
    // keeps its own reference to the OrtValue.
    let status = unsafe {
        match side {
            BindSide::Input => (api.BindInput)(binding.ptr_mut(), name.as_ptr(), value.ptr()),
            BindSide::Output => (api.BindOutput)(binding.ptr_mut(), name.as_ptr(), value.ptr()),
        }
    };
    if status.0.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null status is an OrtStatus we own; its message is a
    // NUL-terminated string valid until the status is released.
    let message = unsafe {
        let text = CStr::from_ptr((api.GetErrorMessage)(status.0))
            .to_string_lossy()
            .into_owned();
        (api.ReleaseStatus)(status.0);
        text
    };
    Err(message)
}
