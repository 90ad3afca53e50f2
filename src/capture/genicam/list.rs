//! The GenICam cameras Aravis finds, with what a technician checks first; a
//! GigE Vision camera whose frame is larger than the socket buffer a
//! `sealcheck run` would get is warned of (`buffer`), as the run warns.

use super::buffer;
use super::sys::{self, Camera};

/// One camera found on the network or the USB bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenicamCameraInfo {
    /// The GenICam id "vendor-model-serial": what `camera = ...` takes.
    pub id: String,
    /// IP address (GigE Vision) or USB bus address.
    pub address: String,
    pub vendor: String,
    pub model: String,
    /// "GigEVision" or "USB3Vision".
    pub protocol: String,
    /// The camera's current settings, or why they could not be read (for
    /// example another program holds the camera).
    pub settings: Result<GenicamSettings, String>,
}

/// Current values of the features that decide what a pipeline gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenicamSettings {
    pub pixel_format: String,
    pub width: i32,
    pub height: i32,
    pub trigger_mode: String,
}

/// Lists the cameras Aravis finds; `Err` when Aravis cannot be loaded.
pub fn list_genicam_cameras() -> Result<Vec<GenicamCameraInfo>, String> {
    Ok(sys::devices()?
        .into_iter()
        .map(|device| {
            let settings = read_settings(&device.id);
            GenicamCameraInfo {
                id: device.id,
                address: device.address,
                vendor: device.vendor,
                model: device.model,
                protocol: device.protocol,
                settings,
            }
        })
        .collect())
}

fn read_settings(id: &str) -> Result<GenicamSettings, String> {
    let camera = Camera::open(Some(id))?;
    if camera.is_gige().unwrap_or(false) {
        // The service reads the stream through a UDP socket (no CAP_NET_RAW).
        buffer::check(&format!("GenICam camera {id}"), &camera);
    }
    let (width, height) = camera.size()?;
    Ok(GenicamSettings {
        pixel_format: camera.value("PixelFormat")?,
        width,
        height,
        trigger_mode: camera
            .value("TriggerMode")
            .unwrap_or_else(|_| "(no TriggerMode)".into()),
    })
}
