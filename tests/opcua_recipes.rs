//! OPC UA RecipeManagement end to end: `sealcheck run` with `[recipes.*]`
//! and `[opcua]`, and Python asyncua 2.1.0 (tests/opcua/client.py
//! `recipe`): GetRecipeListFiltered, PrepareRecipe (answered at once, then
//! RecipePrepared), StartSingleJob with a RecipeId that is not prepared
//! (Error 9, no part), StartSingleJob with the prepared one (switched to
//! before the trigger: every result names it).
//!
//! The recipes are tests/recipes.rs's idea: "strict" (min_seal_area 0.99)
//! fails every judged part `seal_area`, "lenient" and "copy" none, so a
//! result shows whose thresholds decided it. "copy" has model files of its
//! own, so preparing it opens, gates and warms models (seconds).
//!
//! Every wait is bounded; nothing talks to any address but loopback.

use crate::common;
use crate::opcua::{client, start_on, url, write_config_on};

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::{free_port, repo, result_lines};

fn recipes(dir: &Path) -> String {
    let models = repo().join("models");
    let copies = dir.join("copies");
    std::fs::create_dir_all(&copies).unwrap();
    for name in ["seg.onnx", "cls.onnx"] {
        std::fs::copy(models.join(name), copies.join(name)).unwrap();
    }
    format!(
        r#"
[recipes.lenient]
id = 1
no_seal_below = 0.0
min_seal_area = 0.0
max_seal_area = 1.0

[recipes.strict]
id = 2
no_seal_below = 0.0
min_seal_area = 0.99
max_seal_area = 1.0

[recipes.copy]
id = 3
segmentation = "{copies}/seg.onnx"
classifier = "{copies}/cls.onnx"
no_seal_below = 0.0
min_seal_area = 0.0
max_seal_area = 1.0
"#,
        copies = copies.display()
    )
}

fn names(value: &serde_json::Value) -> Vec<&str> {
    value["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect()
}

/// The ResultReady events of a `recipe` report: (part, recipe).
fn results(report: &serde_json::Value) -> Vec<(String, String)> {
    report["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"].as_str().unwrap().contains("1024"))
        .map(|e| {
            (
                e["part"].as_str().unwrap_or("?").to_string(),
                e["recipe"].as_str().unwrap_or("?").to_string(),
            )
        })
        .collect()
}

#[test]
fn a_prepared_recipe_is_announced_and_judges_the_single_jobs_that_name_it() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let listen: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let config = write_config_on(dir.path(), listen, "", &recipes(dir.path()));
    let service = start_on(&config, listen);

    // "copy" by name: its own model files are prepared beside "lenient".
    let first = client(&["recipe", &url(port), "copy", "5", "500", "strict"]);
    assert_eq!(names(&first["listed"]), ["lenient", "strict", "copy"]);
    let prepare = &first["prepare"];
    assert_eq!(prepare["error"], 0, "{first}");
    assert_eq!(prepare["internal"], "copy");
    assert_eq!(
        prepare["completed"], false,
        "PrepareRecipe answers before the models are ready: {first}"
    );
    let answered = prepare["seconds"].as_f64().unwrap();
    assert!(answered < 1.0, "PrepareRecipe took {answered:.2} s");
    let announced: Vec<&serde_json::Value> = first["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"].as_str().unwrap().contains("1022"))
        .collect();
    assert_eq!(announced.len(), 1, "one RecipePrepared: {first}");
    assert_eq!(
        (&announced[0]["internal"], &announced[0]["external"]),
        (&serde_json::json!("copy"), &serde_json::json!("copy"))
    );
    assert_eq!(names(&first["listed_prepared"]), ["lenient", "copy"]);
    assert_eq!(first["plain_prepared"]["PreparedRecipes"], "copy");
    assert_eq!(first["plain_prepared"]["ActiveRecipe"], "lenient");
    // "strict" is not prepared: Error 9, and no part was triggered.
    assert_eq!(first["unprepared_job"][1], 9, "{first}");
    for job in first["jobs"].as_array().unwrap() {
        assert_eq!(job[1], 0, "{first}");
    }
    let expected: Vec<(String, String)> = (500..505)
        .map(|id: u32| (id.to_string(), "copy".to_string()))
        .collect();
    assert_eq!(results(&first), expected, "{first}");
    assert_eq!(first["plain"]["ActiveRecipe"], "copy");
    assert_eq!(first["plain"]["LastRecipe"], "copy");

    // "strict" by its id: its thresholds judge the next jobs.
    let second = client(&["recipe", &url(port), "2", "5", "600", "lenient"]);
    assert_eq!(second["prepare"]["internal"], "strict", "{second}");
    assert_eq!(
        second["unprepared_job"][1], 9,
        "lenient was let go: {second}"
    );
    let expected: Vec<(String, String)> = (600..605)
        .map(|id: u32| (id.to_string(), "strict".to_string()))
        .collect();
    assert_eq!(results(&second), expected, "{second}");

    service.signal("INT");
    let (code, _, stderr) = service.finish(Duration::from_secs(30));
    assert_eq!(code, 0, "{stderr}");
    let lines = result_lines(&dir.path().join("results.jsonl"));
    assert_eq!(lines.len(), 10, "the refused jobs made no part");
    for line in &lines {
        let part = line["part_id"].as_u64().unwrap();
        let recipe = line["recipe"].as_str().unwrap();
        let wanted = if part < 600 { "copy" } else { "strict" };
        assert_eq!(recipe, wanted, "{line}");
        // The recipe named is the one whose thresholds decided (a part
        // judged without a frame, or late, says nothing of thresholds).
        if !line["seq"].is_null() && line["reason"] != "late" {
            assert_eq!(recipe == "strict", line["reason"] == "seal_area", "{line}");
        }
    }
}
