//! What the archive counts, owned here and read by the status room (which
//! registers these same handles in `/metrics`): the archive names nothing of
//! the status room.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

/// Why a frame did not reach the archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveDrop {
    /// The archive thread's queue was full (a slow disk).
    QueueFull,
    /// Writing would have passed `max_mib` even after deleting every older hour.
    OverLimit,
    /// Writing would have left less than `min_free_mib` free.
    LowDisk,
    /// Encoding or writing failed (see the log).
    WriteError,
}

impl ArchiveDrop {
    pub const ALL: [ArchiveDrop; 4] = [
        ArchiveDrop::QueueFull,
        ArchiveDrop::OverLimit,
        ArchiveDrop::LowDisk,
        ArchiveDrop::WriteError,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ArchiveDrop::QueueFull => "queue_full",
            ArchiveDrop::OverLimit => "over_limit",
            ArchiveDrop::LowDisk => "low_disk",
            ArchiveDrop::WriteError => "write_error",
        }
    }
}

/// The archive's counters: cheap to clone (each handle shares its atomic).
#[derive(Debug, Clone, Default)]
pub struct ArchiveCounters {
    /// Bytes in the archive folder.
    pub bytes: Gauge,
    /// Frames written.
    pub files: Counter,
    /// Frames not kept, indexed like `ArchiveDrop::ALL`.
    drops: [Counter; 4],
}

impl ArchiveCounters {
    /// Counters whose drop counts are `drops` (indexed like `ArchiveDrop::ALL`).
    pub fn new(drops: [Counter; 4]) -> Self {
        ArchiveCounters {
            bytes: Gauge::default(),
            files: Counter::default(),
            drops,
        }
    }

    pub fn dropped(&self, why: ArchiveDrop) {
        self.drops[why as usize].inc();
    }

    pub fn drops(&self, why: ArchiveDrop) -> u64 {
        self.drops[why as usize].get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_are_counted_under_their_own_reason() {
        for (i, why) in ArchiveDrop::ALL.iter().enumerate() {
            assert_eq!(
                *why as usize, i,
                "ALL must list the reasons in declaration order"
            );
        }
        let c = ArchiveCounters::default();
        c.dropped(ArchiveDrop::LowDisk);
        c.dropped(ArchiveDrop::LowDisk);
        assert_eq!(c.drops(ArchiveDrop::LowDisk), 2);
        assert_eq!(c.drops(ArchiveDrop::QueueFull), 0);
    }
}
