//! `[archive]`: images of judged frames on disk, written by their own thread.
//!
//! ```text
//! preprocess: frame pixels copied into the work record (only while the archive is on)
//! output:     frame to keep? swap its pixels and mask into a free ArchiveJob --try_send-->
//!             (no free job: dropped, counted as queue_full; the verdict never waits)
//! archive thread: encode (JPEG/PNG) -> ArchiveStore::write (limits, manifest) -> job back to the pool
//! ```
//!
//! With `[cameras.NAME]` a frame goes into its camera's folder
//! (`dir/<camera>/YYYY-MM-DD/HH/`), the camera its result line names: the
//! folder and the manifest's `result` can never disagree, and the output
//! thread hands over nothing more than before.
//!
//! Swapping buffers instead of copying keeps the output thread's cost to a
//! few pointer moves; every buffer is reused, so the steady state allocates
//! nothing on the frame path.
//!
//! The files: `queue` (`ArchiveQueue`, the output thread's end), `job` (one
//! frame on its way), `writer` (the archive thread), `encode` (JPEG/PNG,
//! masks, the thread's priority), `store` (the folder on disk: names,
//! limits, the manifest's hash chain), `counters` (what `/metrics` shows).

mod counters;
mod encode;
mod job;
mod queue;
mod store;
mod writer;

pub use counters::{ArchiveCounters, ArchiveDrop};
pub use encode::{
    EncodeError, encode_grey_png, encode_rgb, lower_thread_priority, mask_to_frame, packed_rgb,
    tint_mask,
};
pub use job::ArchiveJob;
pub use queue::ArchiveQueue;
pub use store::{
    ArchiveName, ArchiveStore, ArchiveWrite, RESERVED_FOLDERS, free_bytes, is_camera_folder,
    is_day, is_hour, sha256_hex, tree_size,
};
