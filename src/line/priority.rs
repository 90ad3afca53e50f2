//! The scheduling priority of the line's timing threads (deadline, MQTT):
//! raised where the service may, so a `late` fail leaves at its deadline.

/// Nice value the line's timing threads (deadline, MQTT) ask for: ahead of
/// everything else on a busy machine, so a `late` fail leaves at its deadline.
const LINE_THREAD_NICE: i32 = -10;

/// Raises the calling thread's scheduling priority to `LINE_THREAD_NICE`
/// where the service may (root or `CAP_SYS_NICE`, e.g. systemd's `Nice=` or
/// `AmbientCapabilities=CAP_SYS_NICE`); otherwise it runs at the default.
pub(crate) fn raise_thread_priority() {
    // SAFETY: gettid and setpriority take plain integers and touch no memory of ours.
    let rc = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, LINE_THREAD_NICE)
    };
    if rc != 0 {
        log::debug!(target: "sealcheck::line", nice = LINE_THREAD_NICE;
            "cannot raise the priority of a line thread (needs CAP_SYS_NICE); it runs at the default");
    }
}
