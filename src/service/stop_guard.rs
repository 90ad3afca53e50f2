//! A stop always ends the process.
//!
//! ```text
//! SIGTERM ─▶ pipeline drains (drain_timeout_s), shuts capture down (bounded), returns ─▶ exit
//!    │
//!    └─▶ StopGuard::arm(drain_timeout_s + STOP_GRACE) ── still running then? ──▶ one line naming
//!                                                         the threads left behind, _exit(1)
//! ```
//!
//! The pipeline's own shutdown is bounded at every step (capture teardown,
//! joins), but a thread can be stuck where no bound reaches: an engine call
//! inside a GPU driver, a CUDA exit handler that waits for it, a write to a
//! hung disk. systemd would SIGKILL the service after `TimeoutStopSec=`, with
//! nothing in the journal saying why; an operator running it by hand would
//! wait forever. The guard is the last word: it names what is still running
//! (from `/proc/self/task`) and ends the process at once.

use std::time::Duration;

/// What the guard adds to `drain_timeout_s`: capture's stop timeout and
/// teardown, the deadline thread and the MQTT flush all fit within it.
pub const STOP_GRACE: Duration = Duration::from_secs(4);

/// The exit status when the guard had to end the process: not 0, since
/// frames in flight may have lost their results, and systemd should say so.
pub const STUCK_STOP_EXIT: i32 = 1;

/// Ends the process `limit` after `arm` unless it has ended by then.
#[derive(Debug)]
pub struct StopGuard {
    _private: (),
}

impl StopGuard {
    /// Starts the guard's thread. The thread lives until the process ends; it
    /// has nothing to clean up, so nothing joins it.
    pub fn arm(limit: Duration) -> std::io::Result<StopGuard> {
        std::thread::Builder::new()
            .name("stop-guard".into())
            .spawn(move || {
                std::thread::sleep(limit);
                let left = threads_left_behind();
                log::error!(target: "sealcheck::service", waited_s = limit.as_secs_f64(), left_behind = left.as_str();
                    "the stop did not finish within {:.1} s (drain_timeout_s + {:.0} s); exiting now, leaving behind the threads {left}",
                    limit.as_secs_f64(), STOP_GRACE.as_secs_f64());
                end_process_now(STUCK_STOP_EXIT);
            })?;
        Ok(StopGuard { _private: () })
    }
}

/// The names of this process's threads other than the main thread and the
/// guard itself, counted by name (`source-teardown x3, infer`).
pub fn threads_left_behind() -> String {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return "(cannot read /proc/self/task)".to_string();
    };
    let main_tid = std::process::id().to_string();
    let mut names: Vec<String> = tasks
        .filter_map(Result::ok)
        .filter(|task| task.file_name().to_string_lossy() != main_tid)
        .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
        .map(|comm| comm.trim().to_string())
        .filter(|name| name != "stop-guard")
        .collect();
    names.sort();
    let mut counted: Vec<String> = Vec::new();
    let mut i = 0;
    while i < names.len() {
        let same = names[i..].iter().take_while(|n| **n == names[i]).count();
        counted.push(if same == 1 {
            names[i].clone()
        } else {
            format!("{} x{same}", names[i])
        });
        i += same;
    }
    if counted.is_empty() {
        "(none but the main thread)".to_string()
    } else {
        counted.join(", ")
    }
}

/// Ends the process without running exit handlers: a library's handler
/// (the CUDA runtime's, for one) may wait for the very thread that is stuck.
fn end_process_now(code: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stderr().flush();
    // SAFETY: `_exit` takes no pointers and never returns; it ends every
    // thread of the process at once, so no Rust value is observed half-dropped.
    unsafe { libc::_exit(code) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_left_behind_names_running_threads_by_name_and_count() {
        let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
        // Both threads have their names before the listing is read.
        let named = std::sync::Arc::new(std::sync::Barrier::new(3));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (stop_rx, named) = (stop_rx.clone(), std::sync::Arc::clone(&named));
                std::thread::Builder::new()
                    .name("stuck-double".into())
                    .spawn(move || {
                        named.wait();
                        let _ = stop_rx.recv_timeout(Duration::from_secs(10));
                    })
                    .unwrap()
            })
            .collect();
        named.wait();
        let left = threads_left_behind();
        drop(stop_tx);
        for h in handles {
            h.join().unwrap();
        }
        assert!(left.contains("stuck-double x2"), "{left}");
    }
}
