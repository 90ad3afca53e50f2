//! Parts in `[trigger] mode = "plc"` (and `"camera"`, whose desks only say
//! whether the station is online): each camera's trigger desk, made
//! before the stages (the frame path reads their triggers), told when the
//! station is online, and handed to what takes triggers (Modbus, HTTP),
//! with each camera's verdicts for the HTTP trigger's answer.

use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, TriggerMode};
use crate::frame::CameraIndex;
use crate::line::LineOutput;
use crate::opcua::{Camera, OpcUaError, OpcUaServer, RecipeBook};
use crate::plc::Station;
use crate::recipe::RecipeDesk;
use crate::status::{Telemetry, TriggerApi};
use crate::trigger::{PartWaiters, TriggerDesk};

/// One desk per camera in `plc` mode, in camera order; in `camera` mode
/// one per camera too, which only says whether the station is online and
/// refuses every trigger (the camera's input line triggers); none in `free` mode.
pub(super) fn trigger_desks(config: &Config) -> Vec<Arc<TriggerDesk>> {
    let cameras = 0..config.cameras.len() as CameraIndex;
    match config.trigger.mode {
        TriggerMode::Free => Vec::new(),
        TriggerMode::Plc => {
            // A stored source is read as fast as it decodes and ends: the
            // run may be over before the first trigger (issue 40).
            if let Some(stored) = config.cameras.iter().find(|c| !c.source.kind.is_live()) {
                log::warn!(target: "sealcheck::pipeline", kind = stored.source.kind.name();
                    "[trigger] mode = \"plc\" on a source that is not live: it is read as fast as it decodes and ends, likely before a trigger comes; use a camera (config/demo-plc.toml shows a live source)");
            }
            cameras
                .map(|index| Arc::new(TriggerDesk::new(index, config.trigger.delay)))
                .collect()
        }
        TriggerMode::Camera => cameras
            .map(|index| Arc::new(TriggerDesk::triggered_by_camera(index)))
            .collect(),
    }
}

/// The desks the frame path pairs frames with: `plc` mode's. None in
/// `camera` mode, where every frame is a part (`Part::counted`) and the
/// desks only serve the Modbus stations.
pub(super) fn matched_desks<'a>(
    config: &Config,
    desks: &'a [Arc<TriggerDesk>],
) -> &'a [Arc<TriggerDesk>] {
    match config.trigger.mode {
        TriggerMode::Plc => desks,
        TriggerMode::Free | TriggerMode::Camera => &[],
    }
}

/// The station takes triggers (after READY=1) or no longer (stopping).
pub(super) fn set_ready(desks: &[Arc<TriggerDesk>], ready: bool) {
    for desk in desks {
        desk.set_ready(ready);
    }
}

/// `[modbus]`: one station per camera (unit id 1 is the first camera), a
/// line output each (`line_outputs`); none without the section. The way
/// from a PLC's trigger to its ResultsValid is drawn in `plc`'s module doc.
pub(super) fn modbus_stations(
    config: &Config,
    desks: &[Arc<TriggerDesk>],
    recipes: Option<&Arc<RecipeDesk>>,
) -> Vec<Arc<Station>> {
    match &config.modbus {
        Some(modbus) => Station::for_desks(desks, modbus, recipes),
        None => Vec::new(),
    }
}

/// Each camera's line outputs besides MQTT: its Modbus station, its OPC
/// UA output and its HTTP trigger's waiters, where on.
pub(super) fn line_outputs(
    cameras: usize,
    stations: &[Arc<Station>],
    opcua: &[Arc<dyn LineOutput>],
    waiters: &[Arc<PartWaiters>],
) -> Vec<Vec<Arc<dyn LineOutput>>> {
    (0..cameras)
        .map(|index| {
            let mut outputs: Vec<Arc<dyn LineOutput>> = Vec::new();
            if let Some(station) = stations.get(index) {
                outputs.push(Arc::clone(station) as Arc<dyn LineOutput>);
            }
            if let Some(output) = opcua.get(index) {
                outputs.push(Arc::clone(output));
            }
            if let Some(w) = waiters.get(index) {
                outputs.push(Arc::clone(w) as Arc<dyn LineOutput>);
            }
            outputs
        })
        .collect()
}

/// `[trigger] http = true`: each camera's verdicts for `POST /api/trigger`
/// (a line output each, beside MQTT and Modbus); none otherwise.
pub(super) fn http_waiters(config: &Config, desks: &[Arc<TriggerDesk>]) -> Vec<Arc<PartWaiters>> {
    if !config.trigger.http || desks.is_empty() {
        return Vec::new();
    }
    desks
        .iter()
        .map(|_| Arc::new(PartWaiters::default()))
        .collect()
}

/// Hands the HTTP trigger its desks and waiters (when it is on and the
/// status server runs).
pub(super) fn serve_http_trigger(
    config: &Config,
    telemetry: Option<&Arc<Telemetry>>,
    desks: &[Arc<TriggerDesk>],
    waiters: &[Arc<PartWaiters>],
) {
    let Some(telemetry) = telemetry else {
        if !waiters.is_empty() {
            log::warn!(target: "sealcheck::pipeline", "[trigger] http = true needs [status] (the HTTP server): POST /api/trigger is off");
        }
        return;
    };
    if waiters.is_empty() {
        return;
    }
    // The result comes by the deadline, or a frame wait after the moment;
    // the HTTP server ends any request after 10 s.
    let wait = (config.trigger.delay
        + config.trigger.frame_wait
        + config.decision.deadline.unwrap_or(Duration::from_secs(2))
        + Duration::from_secs(2))
    .min(Duration::from_secs(9));
    telemetry.set_triggers(TriggerApi {
        cameras: config
            .cameras
            .iter()
            .zip(desks.iter().zip(waiters))
            .map(|(camera, (desk, w))| (camera.name.clone(), Arc::clone(desk), Arc::clone(w)))
            .collect(),
        wait,
    });
}

/// A GenICam camera with `trigger = "software"` is fired for each accepted
/// part: the one frame it sends back is that part's. A fire that fails
/// (the camera is being reopened) leaves the part to fail `no_frame`.
pub(super) fn fire_software_triggers(
    desks: &[Arc<TriggerDesk>],
    triggers: Vec<Option<crate::capture::SoftwareTrigger>>,
) {
    for (desk, trigger) in desks.iter().zip(triggers) {
        let Some(trigger) = trigger else { continue };
        desk.set_on_accept(move |part| {
            if let Err(e) = trigger.fire() {
                log::warn!(target: "sealcheck::trigger", part_id = part.id, error = e.to_string().as_str();
                    "the camera's software trigger failed: part {} will fail no_frame", part.id);
            }
        });
    }
}

/// The OPC UA server and each camera's line output to it.
pub(super) type OpcUaParts = (OpcUaServer, Vec<Arc<dyn LineOutput>>);

/// `[opcua]`: the OPC UA server, one VisionSystem per camera (StartSingleJob
/// triggers through the camera's desk in `plc` mode; RecipeManagement and
/// StartSingleJob's RecipeId ask the recipe desk), with each camera's
/// line output; none without the section. Started before the lines are
/// made (its outputs are theirs); Online to clients once the desks are ready.
pub(super) fn opcua_server(
    config: &Config,
    desks: &[Arc<TriggerDesk>],
    recipes: Option<&Arc<RecipeDesk>>,
) -> Result<Option<OpcUaParts>, OpcUaError> {
    let Some(opcua) = &config.opcua else {
        return Ok(None);
    };
    let matched = matched_desks(config, desks);
    let cameras = config
        .cameras
        .iter()
        .enumerate()
        .map(|(index, camera)| Camera {
            name: camera.name.clone().unwrap_or_else(|| "camera".to_string()),
            desk: matched.get(index).cloned(),
        })
        .collect();
    // The server's certificate store: `pki_dir`, else the state directory
    // under systemd (the first of a colon-separated list), else beside the
    // config file.
    let pki = opcua.pki_dir.clone().unwrap_or_else(|| {
        std::env::var("STATE_DIRECTORY")
            .ok()
            .filter(|v| !v.is_empty())
            .map(|state| std::path::PathBuf::from(state.split(':').next().unwrap_or(&state)))
            .unwrap_or_else(|| {
                config
                    .path
                    .parent()
                    .map(std::path::Path::to_path_buf)
                    .unwrap_or_default()
            })
            .join("opcua-pki")
    });
    let recipes = RecipeBook::new(recipes.cloned());
    OpcUaServer::start(opcua, cameras, recipes, pki).map(Some)
}
