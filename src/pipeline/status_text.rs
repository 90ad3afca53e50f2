//! What the service says about itself during a run (systemd's STATUS=):
//! problems first (a camera lost, the results file not written), then the
//! counts and the line side's notes.

use std::sync::Arc;

use super::sources;
use crate::capture::SourceStatus;
use crate::line::LineStats;
use crate::line::mqtt::MqttStats;
use crate::output::ResultsFileStatus;

/// Live counters of the line side, for anything that reports during a run
/// (STATUS=, a metrics endpoint): cheap to clone, read without locking the
/// frame path.
#[derive(Clone)]
pub struct LineTelemetry {
    pub line: Arc<LineStats>,
    pub mqtt: Option<Arc<MqttStats>>,
    /// The Modbus server's connection counters, when it runs.
    pub modbus: Option<Arc<crate::plc::ModbusCounters>>,
}

impl LineTelemetry {
    /// What STATUS= adds: the late count, and an MQTT outage when there is one.
    pub fn status_note(&self) -> String {
        let mut note = String::new();
        let late = self.line.snapshot().late;
        if late > 0 {
            note.push_str(&format!("; late {late}"));
        }
        if let Some(outage) = self.mqtt.as_ref().and_then(|m| m.status_note()) {
            note.push_str("; ");
            note.push_str(&outage);
        }
        note
    }
}

/// The STATUS= text: what is wrong first (camera lost, results file not
/// written), then the counts.
pub(super) fn problems_first(
    sources: &[(Option<String>, SourceStatus)],
    results_file: &ResultsFileStatus,
    counts: String,
) -> String {
    let mut line = sources::StationSources::describe_outages(sources);
    if !results_file.is_writable() {
        line.push_str(&format!(
            "results file NOT WRITTEN ({} lines lost); ",
            results_file.lost_lines()
        ));
    }
    line.push_str(&counts);
    line
}
