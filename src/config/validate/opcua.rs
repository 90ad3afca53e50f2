//! `[opcua]`: the OPC UA server (off without the section).

use super::files::Files;
use crate::config::opcua::OpcUaConfig;
use crate::config::raw::Section;

/// `[opcua]` (read only when the file has it: absent = off).
pub(super) fn read_opcua(s: &Section, files: &Files) -> Option<OpcUaConfig> {
    let listen = s.str_or("listen", OpcUaConfig::DEFAULT_LISTEN);
    let max_connections = s.int_in("max_connections", 1..=256, Some(16));
    let results_kept = s.int_in("results_kept", 1..=10_000, Some(100));
    let publish_interval_ms = s.int_in("publish_interval_ms", 1..=1000, Some(10));
    let pki_dir = s.opt_str("pki_dir").map(|d| files.resolve(&d));
    let users_file = if s.given("users_file") {
        Some(files.existing(s, "users_file", "a file of NAME:PASSWORD lines"))
    } else {
        None
    };
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
    if let Some(listen) = listen
        && !listen.ip().is_loopback()
        && users_file.is_none()
    {
        s.problem(
            "listen",
            format!(
                "\"{listen}\" is not a loopback address: there clients must use security and \
                 log in (SecurityPolicy None and anonymous clients are refused off loopback), \
                 so nobody could; add users_file = \"opcua-users\" (a file of NAME:PASSWORD \
                 lines, readable by the service only), or listen on 127.0.0.1"
            ),
        );
        return None;
    }
    Some(OpcUaConfig {
        listen: listen?,
        max_connections: max_connections? as usize,
        results_kept: results_kept? as usize,
        publish_interval_ms: publish_interval_ms? as u64,
        pki_dir,
        users_file: users_file.flatten(),
    })
}
