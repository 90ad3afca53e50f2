//! Element types of tensors on the device: plain data, the same with or
//! without the `cuda` feature (the stub uses it too).

/// Element type of a tensor on the device, as the engine's input or output wants it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorElement {
    F32,
    /// IEEE half precision (carried as `u16` bits on the host).
    F16,
}

impl TensorElement {
    pub fn bytes(self) -> usize {
        match self {
            TensorElement::F32 => 4,
            TensorElement::F16 => 2,
        }
    }
}
