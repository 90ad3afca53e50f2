//! `sealcheck check-config`'s look at `[mqtt]`: every file it names read
//! as the service would at start, connecting to nothing.

use super::client;
use crate::config::MqttConfig;

/// A file `[mqtt]` names (password, CA, client certificate or key) that the
/// service could not use: at start it would turn MQTT off for the run, so
/// `sealcheck check-config` reports it before a restart.
#[derive(Debug, thiserror::Error)]
#[error("[mqtt]: {0}")]
pub struct MqttFilesError(String);

/// Reads every file `[mqtt]` names as the service does at start (never
/// printing the password); connects to nothing.
pub fn check_files(config: &MqttConfig) -> Result<(), MqttFilesError> {
    client::check_files(config).map_err(|e| MqttFilesError(e.to_string()))
}
