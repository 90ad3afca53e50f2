//! `[opcua]`: the OPC UA server (off without the section).

use crate::config::opcua::OpcUaConfig;
use crate::config::raw::Section;

/// `[opcua]` (read only when the file has it: absent = off).
pub(super) fn read_opcua(s: &Section) -> Option<OpcUaConfig> {
    let listen = s.str_or("listen", OpcUaConfig::DEFAULT_LISTEN);
    let max_connections = s.int_in("max_connections", 1..=256, Some(16));
    let results_kept = s.int_in("results_kept", 1..=10_000, Some(100));
    s.finish();
    let listen = match listen.parse::<std::net::SocketAddr>() {
        Ok(listen) => Some(listen),
        Err(_) => {
            s.problem(
                "listen",
                format!(
                    "\"{listen}\" is not an address and port; use e.g. \"127.0.0.1:4840\" \
                     (OPC UA's registered port; 0.0.0.0:4840 for every interface)"
                ),
            );
            None
        }
    };
    Some(OpcUaConfig {
        listen: listen?,
        max_connections: max_connections? as usize,
        results_kept: results_kept? as usize,
    })
}
