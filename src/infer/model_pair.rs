//! One thing per model role: `ModelPair<T>` holds a `T` for the
//! segmentation model and one for the classifier (an engine's models, their
//! sessions, their IO, their calibration feeds), and `by_role` is the one
//! place in the crate where a `ModelRole` picks its model. Every engine
//! (`host_engine::HostEngine` for tract and ONNX Runtime,
//! `tensorrt::TensorRtBackend`, `onnxruntime/device.rs`, the test doubles)
//! keeps its two models in a `ModelPair` and selects through it. A leaf:
//! it names only `model_role`.

use super::model_role::ModelRole;

/// A `T` for each of the two models. Walked segmentation first
/// (`ModelRole::BOTH`), the order the models run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelPair<T> {
    pub segmentation: T,
    pub classifier: T,
}

impl<T> ModelPair<T> {
    /// The pair `f` makes, segmentation first.
    pub fn from_fn(mut f: impl FnMut(ModelRole) -> T) -> Self {
        let segmentation = f(ModelRole::Segmentation);
        ModelPair {
            segmentation,
            classifier: f(ModelRole::Classifier),
        }
    }

    /// The model that plays `role`: the one role→model selection.
    pub fn by_role(&self, role: ModelRole) -> &T {
        match role {
            ModelRole::Segmentation => &self.segmentation,
            ModelRole::Classifier => &self.classifier,
        }
    }

    /// The model that plays `role`, to run or rebind it (as `by_role`).
    pub fn by_role_mut(&mut self, role: ModelRole) -> &mut T {
        match role {
            ModelRole::Segmentation => &mut self.segmentation,
            ModelRole::Classifier => &mut self.classifier,
        }
    }

    /// Each model through `f` with its role, segmentation first.
    pub fn map<U>(self, mut f: impl FnMut(ModelRole, T) -> U) -> ModelPair<U> {
        let segmentation = f(ModelRole::Segmentation, self.segmentation);
        ModelPair {
            segmentation,
            classifier: f(ModelRole::Classifier, self.classifier),
        }
    }

    /// As `map`, stopping at the first error (the classifier is then not
    /// passed to `f`).
    pub fn try_map<U, E>(
        self,
        mut f: impl FnMut(ModelRole, T) -> Result<U, E>,
    ) -> Result<ModelPair<U>, E> {
        let segmentation = f(ModelRole::Segmentation, self.segmentation)?;
        Ok(ModelPair {
            segmentation,
            classifier: f(ModelRole::Classifier, self.classifier)?,
        })
    }

    pub fn as_ref(&self) -> ModelPair<&T> {
        ModelPair {
            segmentation: &self.segmentation,
            classifier: &self.classifier,
        }
    }

    /// Each role's `T` beside its `U`.
    pub fn zip<U>(self, other: ModelPair<U>) -> ModelPair<(T, U)> {
        ModelPair {
            segmentation: (self.segmentation, other.segmentation),
            classifier: (self.classifier, other.classifier),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_picks_its_own_model_and_pairs_are_walked_segmentation_first() {
        let mut pair = ModelPair::from_fn(|role| role.as_str().len());
        assert_eq!(*pair.by_role(ModelRole::Segmentation), "segmentation".len());
        assert_eq!(*pair.by_role(ModelRole::Classifier), "classifier".len());
        *pair.by_role_mut(ModelRole::Classifier) = 0;
        assert_eq!(pair.classifier, 0);
        let mut order = Vec::new();
        let mapped = pair.map(|role, n| {
            order.push(role);
            n + 1
        });
        assert_eq!(order, ModelRole::BOTH);
        assert_eq!(mapped.classifier, 1);
        let failed: Result<ModelPair<()>, ModelRole> = mapped.try_map(|role, _| Err(role));
        assert_eq!(failed, Err(ModelRole::Segmentation));
    }
}
