//! Every raw call into Aravis 0.8 (`libaravis-0.8.so.0`), in one place.
//!
//! The library is opened at run time (`dlopen`), as ONNX Runtime is: sealcheck
//! builds and runs without it, and only a `kind = "genicam"` source or
//! `sealcheck cameras` needs it. `aravissrc` links the same file, so a camera
//! object taken from the element (its `camera` property) belongs to the library
//! opened here. The signatures are those of Aravis 0.8's public headers
//! (`arvcamera.h`, `arvdevice.h`, `arvinterface.h`, `arvgcfeaturenode.h`);
//! they have not changed within 0.8.
//!
//! Callers get safe functions: a camera is a `glib::Object` holding its own
//! reference, errors come back as `glib::Error`, strings as `String`.

use std::ffi::{CStr, CString, c_char, c_double, c_int, c_uint, c_void};
use std::ptr;
use std::sync::OnceLock;

use gstreamer::glib;
use gstreamer::glib::translate::FromGlibPtrFull;

/// The file `aravissrc` links and that Debian's `libaravis-0.8-0` installs.
pub(crate) const LIBRARY: &str = "libaravis-0.8.so.0";

type GError = glib::ffi::GError;
type ErrSlot = *mut *mut GError;
type Cam = *mut c_void;

/// ArvAuto: off, once, continuous.
pub(crate) const ARV_AUTO_OFF: c_int = 0;
pub(crate) const ARV_AUTO_CONTINUOUS: c_int = 2;

/// The functions sealcheck calls, looked up once.
struct Api {
    _library: libloading::Library,
    update_device_list: unsafe extern "C" fn(),
    get_n_devices: unsafe extern "C" fn() -> c_uint,
    get_device_id: unsafe extern "C" fn(c_uint) -> *const c_char,
    get_device_address: unsafe extern "C" fn(c_uint) -> *const c_char,
    get_device_model: unsafe extern "C" fn(c_uint) -> *const c_char,
    get_device_vendor: unsafe extern "C" fn(c_uint) -> *const c_char,
    get_device_protocol: unsafe extern "C" fn(c_uint) -> *const c_char,
    camera_new: unsafe extern "C" fn(*const c_char, ErrSlot) -> Cam,
    camera_get_device: unsafe extern "C" fn(Cam) -> *mut c_void,
    camera_is_gv_device: unsafe extern "C" fn(Cam) -> c_int,
    camera_get_payload: unsafe extern "C" fn(Cam, ErrSlot) -> c_uint,
    execute_command: unsafe extern "C" fn(Cam, *const c_char, ErrSlot),
    set_exposure_time: unsafe extern "C" fn(Cam, c_double, ErrSlot),
    get_exposure_time: unsafe extern "C" fn(Cam, ErrSlot) -> c_double,
    get_exposure_time_bounds: unsafe extern "C" fn(Cam, *mut c_double, *mut c_double, ErrSlot),
    set_exposure_time_auto: unsafe extern "C" fn(Cam, c_int, ErrSlot),
    set_gain: unsafe extern "C" fn(Cam, c_double, ErrSlot),
    get_gain: unsafe extern "C" fn(Cam, ErrSlot) -> c_double,
    get_gain_bounds: unsafe extern "C" fn(Cam, *mut c_double, *mut c_double, ErrSlot),
    set_gain_auto: unsafe extern "C" fn(Cam, c_int, ErrSlot),
    get_frame_rate_bounds: unsafe extern "C" fn(Cam, *mut c_double, *mut c_double, ErrSlot),
    get_region: unsafe extern "C" fn(Cam, *mut c_int, *mut c_int, *mut c_int, *mut c_int, ErrSlot),
    device_get_feature: unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void,
    device_set_features_from_string:
        unsafe extern "C" fn(*mut c_void, *const c_char, ErrSlot) -> c_int,
    device_get_float_bounds:
        unsafe extern "C" fn(*mut c_void, *const c_char, *mut c_double, *mut c_double, ErrSlot),
    device_get_integer_bounds:
        unsafe extern "C" fn(*mut c_void, *const c_char, *mut i64, *mut i64, ErrSlot),
    device_dup_enumeration_strings: unsafe extern "C" fn(
        *mut c_void,
        *const c_char,
        *mut c_uint,
        ErrSlot,
    ) -> *mut *const c_char,
    feature_node_get_value_as_string: unsafe extern "C" fn(*mut c_void, ErrSlot) -> *const c_char,
}

// `Api` is Send and Sync by itself: the library handle and plain function
// pointers are; the library is never unloaded (the OnceLock keeps it).

static API: OnceLock<Result<Api, String>> = OnceLock::new();

fn api() -> Result<&'static Api, String> {
    API.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// Whether Aravis can be loaded; the loader's reason when not.
pub(crate) fn available() -> Result<(), String> {
    api().map(|_| ())
}

fn load() -> Result<Api, String> {
    // SAFETY: loading the Aravis library runs its initializers (GType
    // registration), which aravissrc does too when GStreamer loads it; the
    // library is meant to be loaded into any process that uses Aravis.
    let library =
        unsafe { libloading::Library::new(LIBRARY) }.map_err(
            |e| match std::error::Error::source(&e) {
                Some(reason) => format!("{e}: {reason}"),
                None => e.to_string(),
            },
        )?;
    // SAFETY: every name below is declared in Aravis 0.8's public headers
    // (see the module docs) with the signature of the `Api` field it is
    // stored in, as `lookup` requires; the pointers live as long as
    // `library`, which the `Api` keeps and never unloads.
    let api = unsafe {
        Api {
            update_device_list: lookup(&library, "arv_update_device_list")?,
            get_n_devices: lookup(&library, "arv_get_n_devices")?,
            get_device_id: lookup(&library, "arv_get_device_id")?,
            get_device_address: lookup(&library, "arv_get_device_address")?,
            get_device_model: lookup(&library, "arv_get_device_model")?,
            get_device_vendor: lookup(&library, "arv_get_device_vendor")?,
            get_device_protocol: lookup(&library, "arv_get_device_protocol")?,
            camera_new: lookup(&library, "arv_camera_new")?,
            camera_get_device: lookup(&library, "arv_camera_get_device")?,
            camera_is_gv_device: lookup(&library, "arv_camera_is_gv_device")?,
            camera_get_payload: lookup(&library, "arv_camera_get_payload")?,
            execute_command: lookup(&library, "arv_camera_execute_command")?,
            set_exposure_time: lookup(&library, "arv_camera_set_exposure_time")?,
            get_exposure_time: lookup(&library, "arv_camera_get_exposure_time")?,
            get_exposure_time_bounds: lookup(&library, "arv_camera_get_exposure_time_bounds")?,
            set_exposure_time_auto: lookup(&library, "arv_camera_set_exposure_time_auto")?,
            set_gain: lookup(&library, "arv_camera_set_gain")?,
            get_gain: lookup(&library, "arv_camera_get_gain")?,
            get_gain_bounds: lookup(&library, "arv_camera_get_gain_bounds")?,
            set_gain_auto: lookup(&library, "arv_camera_set_gain_auto")?,
            get_frame_rate_bounds: lookup(&library, "arv_camera_get_frame_rate_bounds")?,
            get_region: lookup(&library, "arv_camera_get_region")?,
            device_get_feature: lookup(&library, "arv_device_get_feature")?,
            device_set_features_from_string: lookup(
                &library,
                "arv_device_set_features_from_string",
            )?,
            device_get_float_bounds: lookup(&library, "arv_device_get_float_feature_bounds")?,
            device_get_integer_bounds: lookup(&library, "arv_device_get_integer_feature_bounds")?,
            device_dup_enumeration_strings: lookup(
                &library,
                "arv_device_dup_available_enumeration_feature_values_as_strings",
            )?,
            feature_node_get_value_as_string: lookup(
                &library,
                "arv_gc_feature_node_get_value_as_string",
            )?,
            _library: library,
        }
    };
    Ok(api)
}

/// The function `name` of `library`, typed as the field it is stored in.
///
/// # Safety
///
/// `T` must be the type of the symbol `name` as the library defines it: an
/// `unsafe extern "C" fn` with the C declaration's parameters and return
/// type (a wrong type makes every later call undefined behaviour), and the
/// value must not be used after `library` is unloaded.
unsafe fn lookup<T: Copy>(library: &libloading::Library, name: &str) -> Result<T> {
    let symbol = format!("{name}\0");
    // SAFETY: the caller vouches that `T` is the symbol's type (`# Safety`).
    let found = unsafe { library.get::<T>(symbol.as_bytes()) }
        .map_err(|_| format!("{LIBRARY} does not export {name}: not Aravis 0.8"))?;
    Ok(*found)
}

/// A failed call: the library's own error, or why it could not be called.
pub(crate) type Result<T, E = String> = std::result::Result<T, E>;

/// Runs `call` with a fresh GError slot; its error as text.
fn checked<T>(call: impl FnOnce(ErrSlot) -> T) -> Result<T> {
    let mut error: *mut GError = ptr::null_mut();
    let value = call(&raw mut error);
    if error.is_null() {
        Ok(value)
    } else {
        // SAFETY: Aravis set `error` to a newly allocated GError that we own.
        let error = unsafe { glib::Error::from_glib_full(error) };
        Err(error.message().to_string())
    }
}

/// A C string owned by Aravis, copied; "" for null.
fn text(s: *const c_char) -> String {
    if s.is_null() {
        return String::new();
    }
    // SAFETY: Aravis returns NUL-terminated strings that stay valid until the
    // next call on the same object or device list; we copy at once.
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
}

fn c(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| format!("\"{s}\" contains a NUL byte"))
}

/// A camera (an `ArvCamera`), holding one reference to it.
#[derive(Debug)]
pub(crate) struct Camera(glib::Object);

// SAFETY: a GObject's reference count is atomic, so the reference may move to
// and be dropped on any thread. Aravis serializes each device's I/O (the GigE
// Vision control channel and the USB3 Vision control endpoint are behind the
// device's own mutex), and sealcheck calls into a running camera from one
// thread at a time: setup before the camera is shared, then only under
// `GenicamLink`'s lock (the software trigger).
unsafe impl Send for Camera {}
// SAFETY: as above; `&Camera` is only used under that lock once shared.
unsafe impl Sync for Camera {}

impl Camera {
    /// The camera object of an `aravissrc` element, when it has one (the element
    /// opens the camera when `camera-name` is set).
    pub(crate) fn of_element(element: &gstreamer::Element) -> Option<Camera> {
        use gstreamer::prelude::*;
        element
            .find_property("camera")
            .and_then(|_| element.property::<Option<glib::Object>>("camera"))
            .map(Camera)
    }

    /// Opens a camera by id, address or (None) the first one found.
    pub(crate) fn open(name: Option<&str>) -> Result<Camera> {
        let api = api()?;
        let name = name.map(c).transpose()?;
        let raw = checked(|e| {
            // SAFETY: the name is a valid C string or null (first camera); the
            // returned camera is a new reference (transfer full) or null on error.
            unsafe { (api.camera_new)(name.as_ref().map_or(ptr::null(), |n| n.as_ptr()), e) }
        })?;
        if raw.is_null() {
            return Err("Aravis returned no camera".into());
        }
        // SAFETY: `raw` is a non-null GObject we own one reference to.
        Ok(Camera(unsafe {
            glib::Object::from_glib_full(raw as *mut glib::gobject_ffi::GObject)
        }))
    }

    fn ptr(&self) -> Cam {
        use glib::prelude::ObjectType as _;
        self.0.as_ptr() as Cam
    }

    fn device(&self, api: &Api) -> *mut c_void {
        // SAFETY: the camera is alive (we hold a reference); the device is owned
        // by the camera (transfer none) and lives as long as it.
        unsafe { (api.camera_get_device)(self.ptr()) }
    }

    /// Whether the camera is a GigE Vision one (its stream comes over UDP).
    pub(crate) fn is_gige(&self) -> Result<bool> {
        let api = api()?;
        // SAFETY: the camera is alive (we hold a reference); returns a gboolean.
        Ok(unsafe { (api.camera_is_gv_device)(self.ptr()) } != 0)
    }

    /// The size of one frame as the camera sends it (PayloadSize), in bytes.
    pub(crate) fn payload(&self) -> Result<u32> {
        let api = api()?;
        // SAFETY: live camera, GError slot.
        checked(|e| unsafe { (api.camera_get_payload)(self.ptr(), e) })
    }

    /// Executes a GenICam command feature (e.g. TriggerSoftware).
    pub(crate) fn execute(&self, command: &str) -> Result<()> {
        let api = api()?;
        let command = c(command)?;
        // SAFETY: live camera, valid C string, GError slot from `checked`.
        checked(|e| unsafe { (api.execute_command)(self.ptr(), command.as_ptr(), e) })
    }

    pub(crate) fn exposure_bounds(&self) -> Result<(f64, f64)> {
        let api = api()?;
        let (mut min, mut max) = (0.0, 0.0);
        // SAFETY: live camera, out-pointers to locals, GError slot.
        checked(|e| unsafe { (api.get_exposure_time_bounds)(self.ptr(), &mut min, &mut max, e) })?;
        Ok((min, max))
    }

    pub(crate) fn set_exposure(&self, us: f64) -> Result<()> {
        let api = api()?;
        // SAFETY: live camera, GError slot.
        checked(|e| unsafe { (api.set_exposure_time_auto)(self.ptr(), ARV_AUTO_OFF, e) }).ok();
        // SAFETY: live camera, GError slot.
        checked(|e| unsafe { (api.set_exposure_time)(self.ptr(), us, e) })
    }

    pub(crate) fn exposure(&self) -> Result<f64> {
        let api = api()?;
        // SAFETY: live camera, GError slot.
        checked(|e| unsafe { (api.get_exposure_time)(self.ptr(), e) })
    }

    pub(crate) fn set_exposure_auto(&self) -> Result<()> {
        let api = api()?;
        // SAFETY: live camera, GError slot.
        checked(|e| unsafe { (api.set_exposure_time_auto)(self.ptr(), ARV_AUTO_CONTINUOUS, e) })
    }

    pub(crate) fn gain_bounds(&self) -> Result<(f64, f64)> {
        let api = api()?;
        let (mut min, mut max) = (0.0, 0.0);
        // SAFETY: live camera, out-pointers to locals, GError slot.
        checked(|e| unsafe { (api.get_gain_bounds)(self.ptr(), &mut min, &mut max, e) })?;
        Ok((min, max))
    }

    pub(crate) fn set_gain(&self, db: f64) -> Result<()> {
        let api = api()?;
        // SAFETY: live camera, GError slot. A camera without GainAuto refuses: ignored.
        checked(|e| unsafe { (api.set_gain_auto)(self.ptr(), ARV_AUTO_OFF, e) }).ok();
        // SAFETY: live camera, GError slot.
        checked(|e| unsafe { (api.set_gain)(self.ptr(), db, e) })
    }

    pub(crate) fn gain(&self) -> Result<f64> {
        let api = api()?;
        // SAFETY: live camera, GError slot.
        checked(|e| unsafe { (api.get_gain)(self.ptr(), e) })
    }

    pub(crate) fn set_gain_auto(&self) -> Result<()> {
        let api = api()?;
        // SAFETY: live camera, GError slot.
        checked(|e| unsafe { (api.set_gain_auto)(self.ptr(), ARV_AUTO_CONTINUOUS, e) })
    }

    pub(crate) fn frame_rate_bounds(&self) -> Result<(f64, f64)> {
        let api = api()?;
        let (mut min, mut max) = (0.0, 0.0);
        // SAFETY: live camera, out-pointers to locals, GError slot.
        checked(|e| unsafe { (api.get_frame_rate_bounds)(self.ptr(), &mut min, &mut max, e) })?;
        Ok((min, max))
    }

    /// Width and height of the image region.
    pub(crate) fn size(&self) -> Result<(i32, i32)> {
        let api = api()?;
        let (mut x, mut y, mut w, mut h) = (0, 0, 0, 0);
        // SAFETY: live camera, out-pointers to locals, GError slot.
        checked(|e| unsafe { (api.get_region)(self.ptr(), &mut x, &mut y, &mut w, &mut h, e) })?;
        Ok((w, h))
    }

    /// Whether the camera's GenICam description has the feature `name`.
    pub(crate) fn knows(&self, name: &str) -> Result<bool> {
        let api = api()?;
        let name = c(name)?;
        // SAFETY: live camera's device, valid C string; the node is borrowed (transfer none).
        Ok(!unsafe { (api.device_get_feature)(self.device(api), name.as_ptr()) }.is_null())
    }

    /// A feature's current value, as text.
    pub(crate) fn value(&self, name: &str) -> Result<String> {
        let api = api()?;
        let cname = c(name)?;
        // SAFETY: live camera's device, valid C string; the node is borrowed.
        let node = unsafe { (api.device_get_feature)(self.device(api), cname.as_ptr()) };
        if node.is_null() {
            return Err(format!("the camera has no feature {name}"));
        }
        // SAFETY: `node` is a feature node of the live device; the string is
        // owned by the node and copied at once by `text`.
        checked(|e| text(unsafe { (api.feature_node_get_value_as_string)(node, e) }))
    }

    /// Sets features from "Name=Value Name=Value" (Aravis' own syntax).
    pub(crate) fn set_features(&self, assignments: &str) -> Result<()> {
        let api = api()?;
        let assignments = c(assignments)?;
        // SAFETY: live camera's device, valid C string, GError slot.
        checked(|e| unsafe {
            (api.device_set_features_from_string)(self.device(api), assignments.as_ptr(), e)
        })
        .map(|_| ())
    }

    /// A numeric feature's range (float or integer), when it has one.
    pub(crate) fn numeric_bounds(&self, name: &str) -> Option<(f64, f64)> {
        let api = api().ok()?;
        let cname = c(name).ok()?;
        let (mut min, mut max) = (0.0, 0.0);
        // SAFETY: live camera's device, valid C string, out-pointers to locals.
        let float = checked(|e| unsafe {
            (api.device_get_float_bounds)(self.device(api), cname.as_ptr(), &mut min, &mut max, e)
        });
        if float.is_ok() {
            return Some((min, max));
        }
        let (mut imin, mut imax) = (0i64, 0i64);
        // SAFETY: as above, for an integer feature.
        checked(|e| unsafe {
            (api.device_get_integer_bounds)(
                self.device(api),
                cname.as_ptr(),
                &mut imin,
                &mut imax,
                e,
            )
        })
        .ok()?;
        Some((imin as f64, imax as f64))
    }

    /// An enumeration feature's available entries, when it is one.
    pub(crate) fn enumeration(&self, name: &str) -> Option<Vec<String>> {
        let api = api().ok()?;
        let cname = c(name).ok()?;
        let mut n: c_uint = 0;
        // SAFETY: live camera's device, valid C string, out-pointer to a local.
        let list = checked(|e| unsafe {
            (api.device_dup_enumeration_strings)(self.device(api), cname.as_ptr(), &mut n, e)
        })
        .ok()?;
        if list.is_null() {
            return None;
        }
        // SAFETY: `list` is an array of `n` strings owned by the device (only
        // the array is ours); copied before the array is freed with g_free.
        let values = (0..n as usize)
            .map(|i| text(unsafe { *list.add(i) }))
            .collect();
        // SAFETY: the array (not the strings) was allocated by Aravis with g_malloc.
        unsafe { glib::ffi::g_free(list as *mut c_void) };
        Some(values)
    }
}

/// One camera as Aravis' device list describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeviceEntry {
    pub(crate) id: String,
    pub(crate) address: String,
    pub(crate) vendor: String,
    pub(crate) model: String,
    pub(crate) protocol: String,
}

/// Discovers the cameras Aravis sees (GigE Vision broadcast, USB3 Vision).
pub(crate) fn devices() -> Result<Vec<DeviceEntry>> {
    let api = api()?;
    // SAFETY: updates Aravis' global device list; no arguments.
    unsafe { (api.update_device_list)() };
    // SAFETY: reads the list just updated.
    let n = unsafe { (api.get_n_devices)() };
    Ok((0..n)
        .map(|i| {
            // SAFETY: `i` < n; each returns a string owned by the list (copied at once).
            unsafe {
                DeviceEntry {
                    id: text((api.get_device_id)(i)),
                    address: text((api.get_device_address)(i)),
                    vendor: text((api.get_device_vendor)(i)),
                    model: text((api.get_device_model)(i)),
                    protocol: text((api.get_device_protocol)(i)),
                }
            }
        })
        .collect())
}
