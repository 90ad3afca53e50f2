//! Which of the two models: a leaf both the contract check (`model_io`) and
//! the errors (`error`) name, so neither has to import the other for it.

use std::fmt;

/// Which of the two models, for messages and for the shape contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelRole {
    Segmentation,
    Classifier,
}

impl ModelRole {
    /// Both roles in the order the models run: segmentation, then the
    /// classifier (which reads the segmentation's mask).
    pub const BOTH: [ModelRole; 2] = [ModelRole::Segmentation, ModelRole::Classifier];

    pub fn as_str(self) -> &'static str {
        match self {
            ModelRole::Segmentation => "segmentation",
            ModelRole::Classifier => "classifier",
        }
    }

    /// The config section that describes this model.
    pub fn config_section(self) -> &'static str {
        match self {
            ModelRole::Segmentation => "models.segmentation",
            ModelRole::Classifier => "models.classifier",
        }
    }

    /// Channels of the input: RGB for segmentation, RGB + mask for the classifier.
    pub fn input_channels(self) -> usize {
        match self {
            ModelRole::Segmentation => 3,
            ModelRole::Classifier => 4,
        }
    }

    /// The contract in words, for error messages.
    pub fn contract(self) -> &'static str {
        match self {
            ModelRole::Segmentation => {
                "one static f32 input [1,3,H,W] and one static f32 output [1,C,H,W] (C >= 2)"
            }
            ModelRole::Classifier => {
                "one static f32 input [1,4,H,W] and one static f32 output [1,C] (C >= 2)"
            }
        }
    }
}

impl fmt::Display for ModelRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
