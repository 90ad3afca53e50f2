//! The typed `[recipes.NAME]` tables and `[recipe] start`: the products a
//! line switches between, each naming only what differs from the base
//! config (models, thresholds, deadline, camera settings). What a recipe
//! leaves out comes from the base config; a recipe never changes anything
//! else (the cameras, the engine, the outputs).
//!
//! The rules here are pure: which model files a recipe judges with
//! (`Recipe::models`), and the thresholds a camera decides with under it
//! (`Recipe::decision`). `crate::recipe` switches between recipes at run time.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::types::{Config, DecisionConfig};

/// The highest recipe id (a PLC's holding register).
pub const MAX_RECIPE_ID: u16 = u16::MAX;

/// One product: `[recipes.NAME]`. Two recipes are the same recipe when
/// their id and name are (both are unique in a config).
#[derive(Debug, Clone)]
pub struct Recipe {
    /// 1 to 65535: what a PLC writes (holding register 2) and reads back
    /// (input register 11).
    pub id: u16,
    /// The table's name: what results, logs and HTTP name it by.
    pub name: Arc<str>,
    /// The segmentation model file; `None`: `[models.segmentation]`'s.
    pub segmentation: Option<PathBuf>,
    /// The classifier model file; `None`: `[models.classifier]`'s.
    pub classifier: Option<PathBuf>,
    /// Thresholds and deadline over each camera's own.
    pub decision: DecisionOverrides,
    /// Camera settings, by camera index (`Config::cameras`' order); only
    /// cameras whose settings the recipe names.
    pub cameras: Vec<(usize, CameraSettings)>,
}

impl PartialEq for Recipe {
    fn eq(&self, other: &Recipe) -> bool {
        self.id == other.id && self.name == other.name
    }
}

impl Eq for Recipe {}

/// A recipe's thresholds: each `Some` replaces the camera's own value.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DecisionOverrides {
    pub defect_threshold: Option<f64>,
    pub no_seal_below: Option<f64>,
    pub min_seal_area: Option<f64>,
    pub max_seal_area: Option<f64>,
    /// `deadline_ms`: `Some(None)` turns the deadline off (0).
    pub deadline: Option<Option<Duration>>,
}

/// A camera's settings under a recipe (a GigE/USB3 Vision camera's
/// exposure and gain); `None`: left as the camera runs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CameraSettings {
    pub exposure_us: Option<f64>,
    pub gain_db: Option<f64>,
}

impl DecisionOverrides {
    /// `base` (a camera's thresholds) with this recipe's values over it.
    pub fn over(&self, base: &DecisionConfig) -> DecisionConfig {
        DecisionConfig {
            defect_threshold: self.defect_threshold.unwrap_or(base.defect_threshold),
            no_seal_below: self.no_seal_below.unwrap_or(base.no_seal_below),
            min_seal_area: self.min_seal_area.unwrap_or(base.min_seal_area),
            max_seal_area: self.max_seal_area.unwrap_or(base.max_seal_area),
            deadline: self.deadline.unwrap_or(base.deadline),
        }
    }
}

impl Recipe {
    /// The thresholds `base` (a camera's own) become under this recipe.
    pub fn decision(&self, base: &DecisionConfig) -> DecisionConfig {
        self.decision.over(base)
    }

    /// The model files this recipe judges with: its own, else the base config's.
    pub fn models<'c>(&'c self, base: &'c Config) -> (&'c Path, &'c Path) {
        (
            self.segmentation
                .as_deref()
                .unwrap_or(&base.segmentation.path),
            self.classifier.as_deref().unwrap_or(&base.classifier.path),
        )
    }

    /// `base` as this recipe makes it: its model files in `[models.*]`, its
    /// thresholds over `[decision]` and each camera's. What a model swap
    /// (`crate::model_swap`) opens, checks and gates.
    pub fn config(&self, base: &Config) -> Config {
        let mut config = base.clone();
        let (segmentation, classifier) = self.models(base);
        config.segmentation.path = segmentation.to_path_buf();
        config.classifier.path = classifier.to_path_buf();
        config.decision = self.decision(&base.decision);
        for camera in &mut config.cameras {
            camera.decision = self.decision(&camera.decision);
        }
        config
    }

    /// This recipe's settings of camera `index`, if it names any.
    pub fn camera(&self, index: usize) -> Option<&CameraSettings> {
        self.cameras
            .iter()
            .find(|(i, _)| *i == index)
            .map(|(_, settings)| settings)
    }
}

/// Every `[recipes.NAME]` in file order, and the one the service starts with.
#[derive(Debug, Clone, PartialEq)]
pub struct Recipes {
    pub list: Vec<Arc<Recipe>>,
    /// Index into `list`: `[recipe] start`, else the first in the file.
    pub start: usize,
}

impl Recipes {
    pub fn start(&self) -> &Arc<Recipe> {
        &self.list[self.start]
    }

    pub fn by_id(&self, id: u16) -> Option<&Arc<Recipe>> {
        self.list.iter().find(|r| r.id == id)
    }

    pub fn by_name(&self, name: &str) -> Option<&Arc<Recipe>> {
        self.list.iter().find(|r| &*r.name == name)
    }

    /// The recipes' names and ids, for a message about an unknown one.
    pub fn known(&self) -> String {
        self.list
            .iter()
            .map(|r| format!("{} (id {})", r.name, r.id))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recipe(decision: DecisionOverrides) -> Recipe {
        Recipe {
            id: 7,
            name: "cup125".into(),
            segmentation: None,
            classifier: Some("other.onnx".into()),
            decision,
            cameras: vec![(
                1,
                CameraSettings {
                    exposure_us: Some(800.0),
                    gain_db: None,
                },
            )],
        }
    }

    #[test]
    fn a_recipe_replaces_only_the_thresholds_it_names() {
        let base = DecisionConfig {
            deadline: Some(Duration::from_millis(80)),
            ..DecisionConfig::DEFAULT
        };
        let r = recipe(DecisionOverrides {
            defect_threshold: Some(0.3),
            deadline: Some(None),
            ..Default::default()
        });
        let d = r.decision(&base);
        assert_eq!(d.defect_threshold, 0.3);
        assert_eq!(d.deadline, None, "deadline_ms = 0 turns it off");
        assert_eq!(d.min_seal_area, base.min_seal_area);
        assert_eq!(d.max_seal_area, base.max_seal_area);
        assert_eq!(d.no_seal_below, base.no_seal_below);
        let untouched = recipe(DecisionOverrides::default()).decision(&base);
        assert_eq!(untouched, base);
    }

    #[test]
    fn recipes_are_found_by_id_and_name_and_compare_by_both() {
        let a = Arc::new(recipe(DecisionOverrides::default()));
        let mut b = recipe(DecisionOverrides::default());
        b.id = 8;
        b.name = "tray".into();
        let recipes = Recipes {
            list: vec![Arc::clone(&a), Arc::new(b)],
            start: 1,
        };
        assert_eq!(recipes.by_id(7), Some(&a));
        assert_eq!(&*recipes.by_name("tray").unwrap().name, "tray");
        assert!(recipes.by_id(9).is_none() && recipes.by_name("cup").is_none());
        assert_eq!(recipes.start().id, 8);
        assert_eq!(recipes.known(), "cup125 (id 7), tray (id 8)");
        // Thresholds do not make another recipe: id and name do.
        let mut same = recipe(DecisionOverrides::default());
        same.decision.defect_threshold = Some(0.9);
        assert_eq!(*a, same);
        assert_eq!(a.camera(1).unwrap().exposure_us, Some(800.0));
        assert!(a.camera(0).is_none());
    }
}
