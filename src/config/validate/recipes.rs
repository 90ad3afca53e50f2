//! `[recipes.NAME]` and `[recipe] start`: the products the line switches
//! between (`crate::config::recipes`). Read after the cameras and
//! `[decision]`, whose values a recipe's thresholds replace: every camera's
//! thresholds under every recipe must still make sense.

use std::sync::Arc;
use std::time::Duration;

use super::decision::bounds_problem;
use super::files::Files;
use super::genicam::{EXPOSURE_MAX_US, GAIN_MAX_DB};
use crate::config::raw::Section;
use crate::config::recipes::{CameraSettings, DecisionOverrides, MAX_RECIPE_ID, Recipe, Recipes};
use crate::config::types::{CameraConfig, SourceKind};

/// The longest recipe name (it names the recipe in metrics labels and logs).
const NAME_MAX: usize = 64;

/// `Some(None)` without `[recipes.*]`; `None` after a problem (recorded).
pub(super) fn read_recipes(
    root: &Section,
    files: &Files,
    cameras: Option<&[CameraConfig]>,
) -> Option<Option<Recipes>> {
    let start = root.optional("recipe", |s| {
        let start = s.str_required("start", "the name of the recipe the service starts with");
        s.finish();
        start
    });
    if !root.has("recipes") {
        root.given("recipes");
        if let Some(Some(_)) = start {
            root.problem(
                "recipe",
                "[recipe] start names a recipe, but the config has no [recipes.NAME] table: add the recipes or remove [recipe]",
            );
            return None;
        }
        return start.map(|_| None);
    }
    let tables = root.section("recipes");
    let names = tables.keys_in_file_order();
    if names.is_empty() {
        root.problem(
            "recipes",
            "[recipes] names no recipe: add a [recipes.NAME] table per product, or remove [recipes]",
        );
        return None;
    }
    let mut list = Some(Vec::with_capacity(names.len()));
    for name in &names {
        let recipe = read_recipe(&tables, name, files, cameras);
        list = match (list, recipe) {
            (Some(mut list), Some(recipe)) => {
                list.push(Arc::new(recipe));
                Some(list)
            }
            _ => None,
        };
    }
    let list = list?;
    let mut ids_ok = true;
    for (i, recipe) in list.iter().enumerate() {
        if let Some(first) = list[..i].iter().find(|r| r.id == recipe.id) {
            tables.section(&recipe.name).problem(
                "id",
                format!(
                    "{} is also recipe \"{}\"'s id: each recipe needs its own (the PLC selects recipes by id)",
                    recipe.id, first.name
                ),
            );
            ids_ok = false;
        }
    }
    let start = match start? {
        None => 0,
        Some(name) => match list.iter().position(|r| *r.name == *name) {
            Some(index) => index,
            None => {
                root.section("recipe").problem(
                    "start",
                    format!(
                        "\"{name}\" is not a recipe; the recipes are: {}",
                        names.join(", ")
                    ),
                );
                return None;
            }
        },
    };
    ids_ok.then_some(Some(Recipes { list, start }))
}

fn read_recipe(
    tables: &Section,
    name: &str,
    files: &Files,
    cameras: Option<&[CameraConfig]>,
) -> Option<Recipe> {
    let name_ok = name_problem(name)
        .map(|p| tables.problem(name, p))
        .is_none();
    let s = tables.section(name);
    let id = s.int_in("id", 1..=i64::from(MAX_RECIPE_ID), None);
    let model = |key, what| {
        if s.has(key) {
            files.existing(&s, key, what).map(Some)
        } else {
            s.given(key);
            Some(None)
        }
    };
    let segmentation = model("segmentation", "the recipe's segmentation model (.onnx)");
    let classifier = model("classifier", "the recipe's classifier model (.onnx)");
    let unit = |key| {
        if s.has(key) {
            s.float_in(key, 0.0..=1.0, None).map(Some)
        } else {
            s.given(key);
            Some(None)
        }
    };
    let defect_threshold = unit("defect_threshold");
    let no_seal_below = unit("no_seal_below");
    let min_seal_area = unit("min_seal_area");
    let max_seal_area = unit("max_seal_area");
    let deadline = if s.has("deadline_ms") {
        s.int_in("deadline_ms", 0..=60_000, None).map(|ms| {
            Some(match ms {
                0 => None,
                ms => Some(Duration::from_millis(ms as u64)),
            })
        })
    } else {
        s.given("deadline_ms");
        Some(None)
    };
    let every_camera = read_settings(&s);
    let per_camera = read_camera_settings(&s, cameras);
    s.finish();
    let decision = DecisionOverrides {
        defect_threshold: defect_threshold?,
        no_seal_below: no_seal_below?,
        min_seal_area: min_seal_area?,
        max_seal_area: max_seal_area?,
        deadline: deadline?,
    };
    let cameras = cameras?;
    let settings = camera_settings(&s, cameras, every_camera?, per_camera?)?;
    let recipe = Recipe {
        id: id? as u16,
        name: name.into(),
        segmentation: segmentation?,
        classifier: classifier?,
        decision,
        cameras: settings,
    };
    // Every camera's thresholds under this recipe keep the rules of [decision].
    for camera in cameras {
        let d = recipe.decision(&camera.decision);
        let whose = camera
            .name
            .as_deref()
            .map_or(String::new(), |n| format!(" (camera {n})"));
        if let Some((key, problem)) = bounds_problem(&d) {
            s.problem(key, format!("{problem} under this recipe{whose}"));
            return None;
        }
    }
    name_ok.then_some(recipe)
}

/// `exposure_us` and `gain_db` in a table (a recipe's, for every camera, or
/// a camera's under it).
fn read_settings(s: &Section) -> Option<CameraSettings> {
    let value = |key, range| {
        if s.has(key) {
            s.float_in(key, range, None).map(Some)
        } else {
            s.given(key);
            Some(None)
        }
    };
    let exposure_us = value("exposure_us", 1.0..=EXPOSURE_MAX_US);
    let gain_db = value("gain_db", 0.0..=GAIN_MAX_DB);
    Some(CameraSettings {
        exposure_us: exposure_us?,
        gain_db: gain_db?,
    })
}

/// `[recipes.NAME.cameras.CAMERA]`: each named camera's settings.
fn read_camera_settings(
    s: &Section,
    cameras: Option<&[CameraConfig]>,
) -> Option<Vec<(usize, CameraSettings)>> {
    if !s.has("cameras") {
        s.given("cameras");
        return Some(Vec::new());
    }
    let tables = s.section("cameras");
    let mut list = Some(Vec::new());
    for name in tables.keys_in_file_order() {
        let table = tables.section(&name);
        let settings = read_settings(&table);
        table.finish();
        let index = cameras.map(|cameras| {
            cameras
                .iter()
                .position(|c| c.name.as_deref() == Some(name.as_str()))
        });
        list = match (list, settings, index) {
            (Some(mut list), Some(settings), Some(Some(index))) => {
                list.push((index, settings));
                Some(list)
            }
            (_, _, Some(None)) => {
                let known: Vec<&str> = cameras
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|c| c.name.as_deref())
                    .collect();
                tables.problem(
                    &name,
                    if known.is_empty() {
                        "names a camera, but the config has one [source]: set exposure_us and gain_db in the recipe's own table".to_string()
                    } else {
                        format!("\"{name}\" is not a camera; the cameras are: {}", known.join(", "))
                    },
                );
                None
            }
            _ => None,
        };
    }
    list
}

/// The recipe's settings per camera: its own table's for every camera,
/// each camera's table over them. Only a GenICam camera (`kind = "genicam"`)
/// has exposure and gain sealcheck sets.
fn camera_settings(
    s: &Section,
    cameras: &[CameraConfig],
    every: CameraSettings,
    per_camera: Vec<(usize, CameraSettings)>,
) -> Option<Vec<(usize, CameraSettings)>> {
    let mut settings = Vec::new();
    let mut ok = true;
    for (index, camera) in cameras.iter().enumerate() {
        let own = per_camera.iter().find(|(i, _)| *i == index).map(|(_, c)| c);
        let merged = CameraSettings {
            exposure_us: own.and_then(|c| c.exposure_us).or(every.exposure_us),
            gain_db: own.and_then(|c| c.gain_db).or(every.gain_db),
        };
        if merged == CameraSettings::default() {
            continue;
        }
        let genicam = matches!(camera.source.kind, SourceKind::Genicam(_));
        if !genicam && (own.is_some() || cameras.len() == 1) {
            let key = if own.is_some() {
                "cameras"
            } else if every.exposure_us.is_some() {
                "exposure_us"
            } else {
                "gain_db"
            };
            s.problem(
                key,
                format!(
                    "sets exposure or gain of camera {}, a `kind = \"{}\"` source: only a GenICam camera (kind = \"genicam\") has settings a recipe changes",
                    camera.name.as_deref().unwrap_or("[source]"),
                    camera.source.kind.name()
                ),
            );
            ok = false;
            continue;
        }
        if genicam {
            settings.push((index, merged));
        }
    }
    ok.then_some(settings)
}

/// Why `name` cannot name a recipe, if it cannot.
fn name_problem(name: &str) -> Option<String> {
    let fine = !name.is_empty()
        && name.len() <= NAME_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    (!fine).then(|| {
        format!(
            "recipe name \"{name}\" must be 1 to {NAME_MAX} letters, digits, `_`, `-` or `.`: it names the recipe in results, metrics and URLs"
        )
    })
}
