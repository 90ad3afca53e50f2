//! Recipes on the status server (`[recipes.NAME]`, `crate::recipe`): what
//! `/api/status` and the page show of them, and the recipe series of
//! `/metrics` (`RecipeCollector`). `POST /api/recipe` is `recipe_switch`.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use serde_json::{Value, json};

use crate::config::Recipe;
use crate::decision::Reason;
use crate::recipe::RecipeDesk;
use crate::stats::RecipeCounts;

/// The longest `POST /api/recipe` waits for a switch to be done (opening
/// models, the acceptance gate and the warm-up take seconds to minutes).
pub const SWITCH_WAIT: Duration = Duration::from_secs(120);

/// What the status server knows of recipes (set by the pipeline at start).
pub struct RecipeApi {
    pub desk: Arc<RecipeDesk>,
    pub counts: Arc<RecipeCounts>,
}

pub(super) fn recipe_json(recipe: &Recipe) -> Value {
    json!({"id": recipe.id, "name": &*recipe.name})
}

/// `/api/status`'s `"recipe"`: the active one, the one being prepared, and
/// every recipe of the config.
pub(super) fn status_json(api: &RecipeApi) -> Value {
    let desk = &api.desk;
    json!({
        "active": recipe_json(&desk.active()),
        "preparing": desk.preparing().map(|r| recipe_json(&r)),
        "prepared": desk.prepared().iter().map(|r| recipe_json(r)).collect::<Vec<_>>(),
        "recipes": desk.recipes().list.iter().map(|r| recipe_json(r)).collect::<Vec<_>>(),
    })
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RecipeVerdictLabels {
    recipe: String,
    verdict: &'static str,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RecipeLabels {
    recipe: String,
}

/// The recipe series of `/metrics`, read at scrape time; none without recipes.
#[derive(Clone)]
pub struct RecipeCollector(pub Arc<std::sync::OnceLock<RecipeApi>>);

impl std::fmt::Debug for RecipeCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecipeCollector")
    }
}

impl Collector for RecipeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(api) = self.0.get() else {
            return Ok(());
        };
        {
            let mut family = encoder.encode_descriptor(
                "recipe_results",
                "Result lines by the recipe that judged them, by verdict and reason (summed over recipes: verdicts_total)",
                None,
                MetricType::Counter,
            )?;
            for (recipe, by_reason) in api.counts.snapshot() {
                for (reason, n) in Reason::ALL.iter().zip(by_reason) {
                    ConstCounter::new(n).encode(family.encode_family(&RecipeVerdictLabels {
                        recipe: recipe.to_string(),
                        verdict: reason.verdict().as_str(),
                        reason: reason.as_str(),
                    })?)?;
                }
            }
        }
        let active = api.desk.active();
        {
            let mut family = encoder.encode_descriptor(
                "recipe_active",
                "1 for the recipe judging now, 0 for the others",
                None,
                MetricType::Gauge,
            )?;
            for recipe in &api.desk.recipes().list {
                ConstGauge::new(i64::from(**recipe == *active)).encode(family.encode_family(
                    &RecipeLabels {
                        recipe: recipe.name.to_string(),
                    },
                )?)?;
            }
        }
        let (switches, refusals) = api.desk.counts();
        ConstCounter::new(switches).encode(encoder.encode_descriptor(
            "recipe_switches",
            "Recipe switches done since start",
            None,
            MetricType::Counter,
        )?)?;
        ConstCounter::new(refusals).encode(encoder.encode_descriptor(
            "recipe_refusals",
            "Recipe switches refused since start (unknown recipe, models refused, another switch under way)",
            None,
            MetricType::Counter,
        )?)?;
        Ok(())
    }
}
