//! The fault hooks in a build without the `fault-injection` feature (every
//! production build): the names `fault.rs` has, doing nothing, so the
//! inference loop and the stop carry no `cfg` lines. Each call compiles away.

/// No faults: nothing is read, nothing held, nothing failed.
#[derive(Debug, Clone, Copy)]
pub struct InferFaults;

impl InferFaults {
    pub fn from_env() -> Self {
        InferFaults
    }

    #[inline(always)]
    pub fn hold(&self, _seq: u64) {}

    #[inline(always)]
    pub fn fail(&self, _work: &mut crate::frame::FrameWork) -> bool {
        false
    }
}

#[inline(always)]
pub fn maybe_hang_after_stop(_stopped_by_signal: bool) {}
