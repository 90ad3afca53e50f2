//! Where each camera's cavities are cropped: its layout, and the frame size
//! the layout was found to fit. A camera whose frames change size after
//! that (reconfigured while running) gets `error` for every cavity of each
//! such frame until its size is back: crops from another geometry would
//! judge the wrong pixels.

use std::sync::Arc;

use crate::config::{CavityLayout, Config};
use crate::frame::CameraIndex;

/// Each camera's layout and the frame size it fits, by `FrameMeta::camera`.
#[derive(Debug, Default)]
pub struct CycleCrops {
    cameras: Vec<CameraCrops>,
}

#[derive(Debug)]
struct CameraCrops {
    layout: Option<Arc<CavityLayout>>,
    /// The size the config fixes (`test`, `csi`), else the first frame's
    /// that fitted.
    size: Option<(usize, usize)>,
}

/// How a frame meets its camera's layout.
#[derive(Debug)]
pub enum CycleFit<'a> {
    /// Every cavity lies inside it: crop them.
    Fits(&'a CavityLayout),
    /// It does not: every cavity of this cycle fails with `error`, for this
    /// reason.
    Misfit {
        layout: &'a CavityLayout,
        message: String,
    },
}

impl CycleFit<'_> {
    pub fn layout(&self) -> &CavityLayout {
        match self {
            CycleFit::Fits(layout) | CycleFit::Misfit { layout, .. } => layout,
        }
    }
}

impl CycleCrops {
    /// Each camera's layout; a margin that takes a cavity's crop into a
    /// neighbour's region is logged (`check-config` says it too).
    pub fn from_config(config: &Config) -> CycleCrops {
        for camera in &config.cameras {
            if let Some((a, b)) = camera
                .source
                .layout
                .as_deref()
                .and_then(CavityLayout::margin_reaches_a_neighbour)
            {
                log::warn!(target: "sealcheck::preprocess", camera = camera.label(), cavity = a, neighbour = b;
                    "the layout's margin makes the crops of cavities {a} and {b} overlap: each model sees the edge of the neighbour's cell; lower `margin` to at most half the gap between cavities");
            }
        }
        CycleCrops {
            cameras: config
                .cameras
                .iter()
                .map(|c| CameraCrops {
                    layout: c.source.layout.clone(),
                    size: c
                        .source
                        .kind
                        .frame_size()
                        .map(|(w, h)| (w as usize, h as usize)),
                })
                .collect(),
        }
    }

    /// No camera has a layout: every frame is one seal.
    pub fn none() -> CycleCrops {
        CycleCrops::default()
    }

    /// Judged cavities per frame at most, over the cameras (1 without a
    /// layout): how many work records one frame may take at once.
    pub fn most_per_frame(&self) -> usize {
        self.cameras
            .iter()
            .filter_map(|c| c.layout.as_ref())
            .map(|l| usize::from(l.enabled_count()))
            .max()
            .unwrap_or(1)
    }

    pub fn has_layout(&self, camera: CameraIndex) -> bool {
        self.cameras
            .get(usize::from(camera))
            .is_some_and(|c| c.layout.is_some())
    }

    /// How a `width` x `height` frame of `camera` (which has a layout:
    /// `has_layout`) meets it. The first frame that fits fixes the size
    /// when the config did not.
    ///
    /// # Panics
    /// If `camera` has no layout.
    pub fn fit(&mut self, camera: CameraIndex, width: usize, height: usize) -> CycleFit<'_> {
        let camera = &mut self.cameras[usize::from(camera)];
        let layout = camera
            .layout
            .as_deref()
            .expect("fit is asked only for a camera with a layout");
        if let Some((w, h)) = camera.size
            && (w, h) != (width, height)
        {
            return CycleFit::Misfit {
                layout,
                message: format!(
                    "the frame is {width}x{height}, but this camera's cavity layout was set for {w}x{h} frames: the camera was reconfigured; every cavity of the cycle fails until its frames are {w}x{h} again (or fix the layout)"
                ),
            };
        }
        match layout.check_frame(width as u32, height as u32) {
            Ok(()) => {
                camera.size = Some((width, height));
                CycleFit::Fits(layout)
            }
            Err(misfit) => CycleFit::Misfit {
                layout,
                message: misfit.to_string(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CavityRect;

    fn crops(size: Option<(usize, usize)>) -> CycleCrops {
        let rects = vec![
            CavityRect {
                x: 0,
                y: 0,
                width: 10,
                height: 10,
            },
            CavityRect {
                x: 10,
                y: 0,
                width: 10,
                height: 10,
            },
        ];
        CycleCrops {
            cameras: vec![
                CameraCrops {
                    layout: None,
                    size: None,
                },
                CameraCrops {
                    layout: Some(Arc::new(CavityLayout::new(rects, &[], 2, None).unwrap())),
                    size,
                },
            ],
        }
    }

    #[test]
    fn the_first_frame_that_fits_fixes_the_size_and_another_size_then_fails_the_cycle() {
        let mut crops = crops(None);
        assert!(!crops.has_layout(0) && crops.has_layout(1) && !crops.has_layout(2));
        assert_eq!(crops.most_per_frame(), 2);
        // Too small for cavity 2: named, and the size is not fixed by it.
        let CycleFit::Misfit { message, .. } = crops.fit(1, 15, 10) else {
            panic!("a 15x10 frame fits a layout 20 wide");
        };
        assert!(message.contains("cavity 2 at [10, 0, 10, 10]"), "{message}");
        assert!(matches!(crops.fit(1, 20, 10), CycleFit::Fits(_)));
        // Larger frames fit the layout, but not the size it was set for.
        let CycleFit::Misfit { message, .. } = crops.fit(1, 40, 30) else {
            panic!("a reconfigured camera's frame was cropped");
        };
        assert!(
            message.contains("the frame is 40x30") && message.contains("set for 20x10"),
            "{message}"
        );
        assert!(matches!(crops.fit(1, 20, 10), CycleFit::Fits(_)));
    }

    #[test]
    fn a_size_the_config_fixes_is_held_from_the_first_frame() {
        let mut crops = crops(Some((30, 10)));
        assert!(matches!(crops.fit(1, 20, 10), CycleFit::Misfit { .. }));
        assert!(matches!(crops.fit(1, 30, 10), CycleFit::Fits(_)));
    }
}
