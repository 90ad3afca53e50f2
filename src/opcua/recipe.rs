//! The seam for recipes (issue 39, part 1, built apart): what the OPC UA
//! side asks of them. `StartSingleJob`'s RecipeId and the plain variable
//! ActiveRecipe go through `RecipeBook`; RecipeManagement's methods
//! (`PrepareRecipe`, `UnprepareRecipe`, `GetRecipeListFiltered`) are not
//! served until recipes implement it.
//!
//! TODO(recipes): implement `RecipeBook` for the recipe code's store and
//! hand it to `OpcUaServer::start` (today `pipeline::run` hands `NoRecipes`).

/// Why a job's recipe was refused (`StartSingleJob` answers
/// `BadInvalidArgument` and Error = the code).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecipeRefused {
    #[error("no recipe {0:?}")]
    Unknown(String),
    #[error("recipe {0:?} is not prepared")]
    NotPrepared(String),
}

impl RecipeRefused {
    /// StartSingleJob's `Error` output.
    pub fn code(&self) -> i32 {
        match self {
            RecipeRefused::Unknown(_) => 6,
            RecipeRefused::NotPrepared(_) => 7,
        }
    }
}

/// What the OPC UA server needs of recipes, per camera (`camera` = config
/// order).
pub trait RecipeBook: Send + Sync {
    /// The recipe judging `camera`'s parts now (its name).
    fn active(&self, camera: usize) -> String;

    /// `StartSingleJob`'s RecipeId: empty (or "0") is the active recipe;
    /// another must be prepared. `Ok`: the recipe the job runs with.
    fn for_job(&self, camera: usize, recipe_id: &str) -> Result<String, RecipeRefused>;
}

/// No `[recipes.*]`: one recipe, "default", always active.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoRecipes;

/// The one recipe's name without `[recipes.*]`.
pub const DEFAULT_RECIPE: &str = "default";

impl RecipeBook for NoRecipes {
    fn active(&self, _camera: usize) -> String {
        DEFAULT_RECIPE.to_string()
    }

    fn for_job(&self, _camera: usize, recipe_id: &str) -> Result<String, RecipeRefused> {
        match recipe_id.trim() {
            "" | "0" | DEFAULT_RECIPE => Ok(DEFAULT_RECIPE.to_string()),
            other => Err(RecipeRefused::Unknown(other.to_string())),
        }
    }
}
