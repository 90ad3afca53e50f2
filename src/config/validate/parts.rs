//! `[trigger]` (what a part is) and `[modbus]` (the PLC's server).

use std::net::IpAddr;
use std::time::Duration;

use crate::config::parts::{DEFAULT_FRAME_WAIT_MS, ModbusConfig, TriggerConfig, TriggerMode};
use crate::config::raw::Section;

/// `[trigger]` and `[modbus]`, and the rules between them: a Modbus server
/// needs a mode that serves a PLC, and `plc` mode needs a way to trigger
/// (Modbus, OPC UA or the HTTP trigger). `None`: a problem was recorded; the
/// inner `None` of `[modbus]`: the file has none (off).
pub(super) fn read_parts(root: &Section) -> (Option<TriggerConfig>, Option<Option<ModbusConfig>>) {
    let trigger_section = root.section("trigger");
    let trigger = read_trigger(&trigger_section);
    let modbus = root.optional("modbus", read_modbus);
    if let (Some(Some(_)), Some(t)) = (&modbus, &trigger)
        && t.mode == TriggerMode::Free
    {
        trigger_section.problem(
            "mode",
            "[modbus] serves a PLC its parts: set [trigger] mode = \"plc\" (the PLC triggers) or \"camera\" (the camera's input line triggers), or remove [modbus]",
        );
    }
    // The opposite mistake: parts only from a PLC, and no way for one to
    // trigger. Such a run would pass over every frame and judge nothing.
    // `http = true` is served by the status server: without [status] it is off.
    if let (Some(None), Some(t)) = (&modbus, &trigger)
        && t.mode == TriggerMode::Plc
        && !root.has("opcua")
        && !(t.http && root.has("status"))
    {
        let (key, why) = if t.http {
            (
                "http",
                "http = true serves POST /api/trigger on the status server, and this config has no [status]: add [status] listen = \"127.0.0.1:9750\"",
            )
        } else {
            (
                "mode",
                "mode = \"plc\" judges only triggered parts, and this config has no way to trigger one",
            )
        };
        trigger_section.problem(key, format!("{why}; {NO_TRIGGER}"));
    }
    (trigger, modbus)
}

/// The ways a part can be triggered in `plc` mode, for a config that has none.
pub(super) const NO_TRIGGER: &str = "add a [modbus] table (the PLC triggers over Modbus TCP, docs/INTEGRATION.md), an [opcua] table (StartSingleJob over OPC UA, docs/INTEGRATION.md), or set http = true in [trigger] with a [status] table (POST /api/trigger). Or use mode = \"free\" (every frame is a part) or \"camera\" (the camera's input line triggers)";

/// `[trigger]`; absent = free running. `None`: a problem was recorded.
fn read_trigger(s: &Section) -> Option<TriggerConfig> {
    let mode = s
        .choice("mode", &["free", "plc", "camera"], Some(0))
        .map(|i| [TriggerMode::Free, TriggerMode::Plc, TriggerMode::Camera][i]);
    let delay_ms = s.int_in("delay_ms", 0..=10_000, Some(0));
    let frame_wait_ms = s.int_in(
        "frame_wait_ms",
        1..=60_000,
        Some(DEFAULT_FRAME_WAIT_MS as i64),
    );
    let http = s.bool_or("http", false);
    s.finish();
    let mode = mode?;
    if http && mode != TriggerMode::Plc {
        s.problem(
            "http",
            format!(
                "an HTTP trigger needs mode = \"plc\" (in \"{}\" mode every frame is a part already)",
                mode.as_str()
            ),
        );
        return None;
    }
    Some(TriggerConfig {
        mode,
        delay: Duration::from_millis(delay_ms? as u64),
        frame_wait: Duration::from_millis(frame_wait_ms? as u64),
        http,
    })
}

/// `[modbus]` (read only when the file has it: absent = off).
fn read_modbus(s: &Section) -> Option<ModbusConfig> {
    let listen = s.str_or("listen", ModbusConfig::DEFAULT_LISTEN);
    let buffer = s.int_in("buffer", 1..=64, Some(8));
    let handshake = s.bool_or("handshake", true);
    let allow = s.str_list("allow", "client IP addresses, e.g. [\"192.168.0.10\"]");
    let max_connections = s.int_in("max_connections", 1..=64, Some(4));
    let idle_timeout_s = s.int_in("idle_timeout_s", 1..=86_400, Some(60));
    s.finish();
    let listen = match listen.parse::<std::net::SocketAddr>() {
        Ok(listen) => Some(listen),
        Err(_) => {
            s.problem(
                "listen",
                format!(
                    "\"{listen}\" is not an address and port; use e.g. \"127.0.0.1:5020\" \
                     (port 502 needs CAP_NET_BIND_SERVICE: docs/INTEGRATION.md)"
                ),
            );
            None
        }
    };
    let allow = allow.and_then(|list| {
        let mut parsed = Vec::with_capacity(list.len());
        for text in list {
            match text.parse::<IpAddr>() {
                Ok(ip) => parsed.push(ip),
                Err(_) => {
                    s.problem(
                        "allow",
                        format!("\"{text}\" is not an IP address; list the PLCs' addresses, e.g. \"192.168.0.10\""),
                    );
                    return None;
                }
            }
        }
        Some(parsed)
    });
    Some(ModbusConfig {
        listen: listen?,
        buffer: buffer? as usize,
        handshake,
        allow: allow?,
        max_connections: max_connections? as usize,
        idle_timeout: Duration::from_secs(idle_timeout_s? as u64),
    })
}
