//! Element types and descriptions of tensors on the device: plain data, the
//! same with or without the `cuda` feature (the stub uses it too, and the
//! device path's engine contract names `DeviceTensor` in every build). A leaf: `memory` (which
//! says what may live in device memory) and `kernels` (which passes them to
//! the kernels) both name these, and neither imports the other for them.

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

/// A tensor in device memory, for binding to an engine: a description, not
/// an owner (the buffer behind `ptr` belongs to whoever made this).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceTensor {
    /// Device address of the first element.
    pub ptr: u64,
    /// Elements (not bytes).
    pub len: usize,
    pub element: TensorElement,
}

/// One output coordinate's two input neighbours and their weights; the
/// layout of `Tap` in `kernels/tensors.cuh`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceTap {
    pub first: u32,
    pub second: u32,
    pub w_first: f32,
    pub w_second: f32,
}
const _: () = assert!(size_of::<DeviceTap>() == 16);
