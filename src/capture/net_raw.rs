//! Whether this process holds `CAP_NET_RAW`. With it (root, say) Aravis
//! receives a GigE Vision stream on a packet socket, which sees nothing from a
//! camera on the same machine (docs/OPERATIONS.md, "The service user and the
//! network"): the stream error's hint must say so, or the technician checks
//! cables and subnets for a camera that is fine.

/// `CAP_NET_RAW`'s bit in the capability sets (linux/capability.h).
const CAP_NET_RAW: u32 = 13;

/// Whether the effective set of this process has `CAP_NET_RAW`; false when
/// it cannot be read (not Linux, no /proc).
pub(crate) fn holds_net_raw() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| net_raw_in(&status))
}

/// `CapEff` of a /proc/PID/status text has `CAP_NET_RAW`.
fn net_raw_in(status: &str) -> bool {
    status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_NET_RAW) != 0)
}

#[cfg(test)]
mod tests {
    use super::net_raw_in;

    #[test]
    fn the_effective_set_decides() {
        let root = "Name:\tsealcheck\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        let user = "Name:\tsealcheck\nCapEff:\t0000000000000000\nCapBnd:\t000001ffffffffff\n";
        let net_raw_only = "CapEff:\t0000000000002000\n";
        assert!(net_raw_in(root));
        assert!(!net_raw_in(user));
        assert!(net_raw_in(net_raw_only));
        assert!(!net_raw_in("no capabilities here"));
    }
}
