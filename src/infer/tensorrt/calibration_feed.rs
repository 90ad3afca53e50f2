//! The calibrator's side in Rust: what TensorRT's `getBatch`, `readCalibrationCache`
//! and `writeCalibrationCache` call through the bridge (`bridge.rs`'s
//! `extern "Rust"` section). A leaf below the bridge: it names no bridge type,
//! so the bridge can name it without an import circle; `calibration` makes it.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::engine_cache::write_atomically;
use super::error::TrtError;
use crate::gpu::{DeviceBuffer, GpuContext, Stream};

/// Fills one sample's tensor (the model input, f32) from an image file.
pub type SampleMaker = Box<dyn FnMut(&Path, &mut [f32]) -> Result<(), String>>;

/// What TensorRT's calibrator asks for, answered from Rust. One image per
/// calibration batch: the networks have an explicit batch dimension, static
/// 1 or, for a dynamic batch, 1 in the calibration profile (trt_bridge sets
/// it to one frame), so TensorRT reads one frame's input tensor per
/// `getBatch`.
pub struct CalibrationFeed {
    /// f32 values of one sample (the model input's length).
    sample_len: usize,
    images: Vec<PathBuf>,
    next_image: usize,
    make_sample: Option<SampleMaker>,
    host_sample: Vec<f32>,
    device: Option<(Arc<GpuContext>, DeviceBuffer<f32>)>,
    cache_path: Option<PathBuf>,
}

impl CalibrationFeed {
    /// The feed for a build without INT8: TensorRT never asks it for anything.
    pub fn none() -> Self {
        CalibrationFeed {
            sample_len: 0,
            images: Vec::new(),
            next_image: 0,
            make_sample: None,
            host_sample: Vec::new(),
            device: None,
            cache_path: None,
        }
    }

    /// One sample per image of `images`, made by `make_sample` into a tensor
    /// of `sample_len` floats and uploaded to `gpu`.
    pub fn new(
        gpu: &Arc<GpuContext>,
        images: Vec<PathBuf>,
        sample_len: usize,
        make_sample: SampleMaker,
        cache_path: PathBuf,
    ) -> Result<Self, TrtError> {
        let device = DeviceBuffer::new(gpu, sample_len)
            .map_err(TrtError::gpu("allocate a calibration batch"))?;
        Ok(CalibrationFeed {
            sample_len,
            images,
            next_image: 0,
            make_sample: Some(make_sample),
            host_sample: vec![0.0; sample_len],
            device: Some((Arc::clone(gpu), device)),
            cache_path: Some(cache_path),
        })
    }

    /// Always 1: the batch dimension is part of the network's input shape.
    pub fn batch_size(&self) -> i32 {
        1
    }

    /// Device address of the next image's input tensor, 0 when the images run out.
    pub fn next_batch(&mut self, input: &str) -> Result<usize, String> {
        let (Some(make_sample), Some((gpu, device))) =
            (self.make_sample.as_mut(), self.device.as_ref())
        else {
            return Ok(0);
        };
        let Some(image) = self.images.get(self.next_image) else {
            return Ok(0);
        };
        debug_assert_eq!(self.host_sample.len(), self.sample_len);
        make_sample(image, &mut self.host_sample)
            .map_err(|e| format!("input \"{input}\", image {}: {e}", image.display()))?;
        self.next_image += 1;
        let stream = Stream::new(gpu).map_err(|e| e.to_string())?;
        // SAFETY: `host_sample` and `device` outlive the copy, which is complete
        // when `synchronize` returns, before either is touched again.
        unsafe { stream.upload(&self.host_sample, device, 0) }.map_err(|e| e.to_string())?;
        stream.synchronize().map_err(|e| e.to_string())?;
        if self.next_image.is_multiple_of(25) || self.next_image == self.images.len() {
            log::info!(target: "sealcheck::tensorrt", input, images = self.next_image, total = self.images.len();
                "INT8 calibration progress");
        }
        usize::try_from(device.device_ptr())
            .map_err(|_| "device address does not fit a pointer".to_string())
    }

    /// The cache of an earlier calibration, to skip the batches (empty when none).
    pub fn read_cache(&mut self) -> Vec<u8> {
        match &self.cache_path {
            Some(path) => match fs::read(path) {
                Ok(bytes) => {
                    log::info!(target: "sealcheck::tensorrt", cache:% = path.display(); "reusing the INT8 calibration cache");
                    bytes
                }
                Err(_) => Vec::new(),
            },
            None => Vec::new(),
        }
    }

    pub fn write_cache(&mut self, cache: &[u8]) -> Result<(), String> {
        match &self.cache_path {
            Some(path) => write_atomically(path, cache).map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }
}
