//! Parts in `[trigger] mode = "plc"`: each camera's trigger desk, made
//! before the stages (the frame path reads their triggers), told when the
//! station is online, and handed to what takes triggers (Modbus, HTTP).

use std::sync::Arc;

use crate::config::{Config, TriggerMode};
use crate::frame::CameraIndex;
use crate::trigger::TriggerDesk;

/// One desk per camera in `plc` mode, in camera order; none in `free` mode.
pub(super) fn trigger_desks(config: &Config) -> Vec<Arc<TriggerDesk>> {
    match config.trigger.mode {
        TriggerMode::Free => Vec::new(),
        TriggerMode::Plc => (0..config.cameras.len())
            .map(|index| Arc::new(TriggerDesk::new(index as CameraIndex, config.trigger.delay)))
            .collect(),
    }
}

/// The station takes triggers (after READY=1) or no longer (stopping).
pub(super) fn set_ready(desks: &[Arc<TriggerDesk>], ready: bool) {
    for desk in desks {
        desk.set_ready(ready);
    }
}
