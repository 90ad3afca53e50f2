//! How the process runs: `[logging]` (format, level) and `[service]`
//! (drain and stall timeouts).

use std::time::Duration;

use crate::config::raw::Section;
use crate::config::types::{LogFormat, LoggingConfig, ServiceConfig};

pub(super) fn read_logging(s: &Section) -> Option<LoggingConfig> {
    let format = s
        .choice("format", &["logfmt", "json"], Some(0))
        .map(|i| [LogFormat::Logfmt, LogFormat::Json][i]);
    let level = s.str_or("level", "info");
    s.finish();
    Some(LoggingConfig {
        format: format?,
        level,
    })
}

pub(super) fn read_service(s: &Section) -> Option<ServiceConfig> {
    let drain = s.float_in("drain_timeout_s", 0.1..=600.0, Some(10.0));
    let stall = s.float_in("stall_timeout_s", 0.1..=600.0, Some(5.0));
    s.finish();
    Some(ServiceConfig {
        drain_timeout: Duration::from_secs_f64(drain?),
        stall_timeout: Duration::from_secs_f64(stall?),
    })
}
