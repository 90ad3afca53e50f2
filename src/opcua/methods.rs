//! What each method of a camera's VisionSystem does (`space` wires them):
//! the state machines' (`station::VisionStation`), ResultManagement's over
//! the results kept, and RecipeManagement's over the recipes
//! (`recipe::RecipeBook`). Arguments come as the NodeSet declares them, or
//! as plain Strings and numbers from clients that cannot send structures
//! (`station::text_of`); a refusal is the `Error` output, never a fault.

use async_opcua::types::{ExtensionObject, StatusCode, Variant};

use super::event::result_data;
use super::recipe::{Listed, RecipeRefused};
use super::station::{Answer, VisionStation, text_of};
use super::types::RecipeIdInternalDataType;

/// A method call on camera `station`.
pub fn call(station: &VisionStation, method: &str, args: &[Variant]) -> Answer {
    match method {
        "StartSingleJob" => station.start_single_job(args),
        "StartContinuous" => station.start_continuous(),
        "Stop" | "Abort" => station.stop(),
        "Halt" => station.halt(),
        "Reset" => station.reset(),
        "GetResultById" => get_result_by_id(station, args),
        "GetResultListFiltered" => get_result_list(station, args),
        "PrepareRecipe" => prepare_recipe(station, args),
        "UnprepareRecipe" => unprepare_recipe(station, args),
        "GetRecipeListFiltered" => get_recipe_list(station, args),
        _ => Err(StatusCode::BadMethodInvalid),
    }
}

/// `GetResultById(ResultId, Timeout) -> (ResultHandle, Result, Error)`.
fn get_result_by_id(station: &VisionStation, args: &[Variant]) -> Answer {
    let id = args.first().and_then(text_of).unwrap_or_default();
    let found = station.with_results(|log| log.by_id(&id).map(result_data));
    Ok(match found {
        Some(result) => vec![
            0u32.into(),
            ExtensionObject::from_message(result).into(),
            0i32.into(),
        ],
        // Error 1: no such result among those kept.
        None => vec![0u32.into(), Variant::Empty, 1i32.into()],
    })
}

/// `GetResultListFiltered(ResultState, MeasId, PartId, ExternalRecipeId,
/// InternalRecipeId, ExternalConfigurationId, InternalConfigurationId,
/// ProductId, JobId, MaxResults, StartIndex, Timeout) -> (IsComplete,
/// ResultCount, ResultHandle, ResultList, Error)`. Filters on ResultState
/// (0 = any), PartId, JobId and the internal recipe (empty = any).
fn get_result_list(station: &VisionStation, args: &[Variant]) -> Answer {
    let text = |i: usize| args.get(i).and_then(text_of).filter(|s| !s.is_empty());
    let state = match args.first() {
        Some(Variant::Int32(s)) => *s,
        _ => 0,
    };
    let part = text(2);
    let recipe = text(4);
    let job = text(8);
    let max = match args.get(9) {
        Some(Variant::UInt32(n)) => *n as usize,
        _ => 0,
    };
    let start = match args.get(10) {
        Some(Variant::UInt32(n)) => *n as usize,
        _ => 0,
    };
    let (list, complete) = station.with_results(|log| {
        let (page, complete) = log.filtered(
            |r| {
                (state == 0 || r.result_state() == state)
                    && part
                        .as_ref()
                        .is_none_or(|p| r.part_id.is_some_and(|id| id.to_string() == *p))
                    && job.as_ref().is_none_or(|j| r.job_id() == *j)
                    && recipe.as_ref().is_none_or(|name| r.recipe == *name)
            },
            start,
            max,
        );
        let list: Vec<ExtensionObject> = page
            .into_iter()
            .map(|r| ExtensionObject::from_message(result_data(r)))
            .collect();
        (list, complete)
    });
    Ok(vec![
        complete.into(),
        (list.len() as u32).into(),
        0u32.into(),
        list.into(),
        0i32.into(),
    ])
}

/// The recipe a RecipeManagement call names: its ExternalId, else its
/// InternalId (`InternalIdIn`), as text.
fn named_recipe(args: &[Variant]) -> String {
    let text = |i: usize| {
        args.get(i)
            .and_then(text_of)
            .filter(|s| !s.trim().is_empty())
    };
    text(0).or_else(|| text(1)).unwrap_or_default()
}

/// A recipe's InternalId as this server gives it: its name.
fn internal_id(name: &str) -> Variant {
    ExtensionObject::from_message(RecipeIdInternalDataType {
        id: name.into(),
        ..Default::default()
    })
    .into()
}

fn refused(method: &str, asked: &str, refused: &RecipeRefused) -> i32 {
    log::warn!(target: "sealcheck::opcua", recipe = asked;
        "OPC UA {method}({asked:?}) refused (Error {}): {refused}", refused.code());
    refused.code()
}

/// `PrepareRecipe(ExternalId, InternalIdIn) -> (InternalIdOut,
/// IsCompleted, Error)`: answers at once (a PLC's call times out long
/// before models are warmed up); IsCompleted is false while the recipe is
/// prepared, and a RecipePrepared event follows from this VisionSystem
/// once it is ready (also for one ready at once).
fn prepare_recipe(station: &VisionStation, args: &[Variant]) -> Answer {
    let asked = named_recipe(args);
    Ok(match station.recipes().prepare(station.camera(), &asked) {
        Ok((name, completed)) => vec![internal_id(&name), completed.into(), 0i32.into()],
        Err(why) => vec![
            Variant::Empty,
            false.into(),
            refused("PrepareRecipe", &asked, &why).into(),
        ],
    })
}

/// `UnprepareRecipe(ExternalId, InternalIdIn) -> (InternalIdOut, Error)`.
fn unprepare_recipe(station: &VisionStation, args: &[Variant]) -> Answer {
    let asked = named_recipe(args);
    Ok(match station.recipes().unprepare(&asked) {
        Ok(name) => vec![internal_id(&name), 0i32.into()],
        Err(why) => vec![
            Variant::Empty,
            refused("UnprepareRecipe", &asked, &why).into(),
        ],
    })
}

/// `GetRecipeListFiltered(ExternalId, ProductId, IsPrepared, MaxResults,
/// StartIndex, Timeout) -> (IsComplete, ResultCount, RecipeHandle,
/// RecipeList, Error)`. Filters on the recipe (its id or name; empty =
/// any) and IsPrepared (0 not prepared, 1 prepared, 2 either); ProductId
/// is not filtered on (recipes are not linked to products here).
fn get_recipe_list(station: &VisionStation, args: &[Variant]) -> Answer {
    let asked = args
        .first()
        .and_then(text_of)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let prepared = match args.get(2) {
        Some(Variant::Int32(0)) => Some(false),
        Some(Variant::Int32(1)) => Some(true),
        _ => None,
    };
    let number = |i: usize| match args.get(i) {
        Some(Variant::UInt32(n)) => *n as usize,
        _ => 0,
    };
    let (max, start) = (number(3), number(4));
    let keep = |r: &Listed| {
        asked
            .as_ref()
            .is_none_or(|a| *a == r.name || *a == r.id.to_string())
            && prepared.is_none_or(|p| p == r.prepared)
    };
    let matching: Vec<Listed> = station.recipes().list().into_iter().filter(keep).collect();
    let rest = matching.len().saturating_sub(start);
    let take = if max == 0 { rest } else { rest.min(max) };
    let list: Vec<ExtensionObject> = matching
        .iter()
        .skip(start)
        .take(take)
        .map(|r| {
            ExtensionObject::from_message(RecipeIdInternalDataType {
                id: r.name.as_str().into(),
                ..Default::default()
            })
        })
        .collect();
    Ok(vec![
        (take == rest).into(),
        (list.len() as u32).into(),
        0u32.into(),
        list.into(),
        0i32.into(),
    ])
}
