//! Recipes (`[recipes.NAME]`), end to end: `sealcheck run` on a live test
//! camera in `[trigger] mode = "plc"`, switched over HTTP (`POST
//! /api/recipe`) and by a PLC simulator over Modbus (RecipeId,
//! RecipeRequest, RecipeBusy/Done/Failed) while parts are in flight.
//!
//! The two recipes differ in thresholds a test camera's frames cannot
//! escape: under "strict" (min_seal_area 0.99) every judged part fails
//! `seal_area`, under "lenient" none does. So a result shows which recipe's
//! thresholds decided it, and the test checks that this is the recipe the
//! result names: no part is judged half by one recipe and half by another.
//!
//! Every wait is bounded; nothing talks to any address but loopback.

use crate::common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use common::http::{get, request};
use common::mqtt::{Broker, Subscriber, TOPIC};
use common::plc::Plc;
use common::status_page::sample;
use common::{Sealcheck, free_port, repo, result_lines};

/// `[recipes.*]`: "lenient" (id 1, the start), "strict" (id 2), "copy" (id
/// 3: lenient's thresholds with model files of its own, so a switch to it
/// opens, checks and warms up models), "broken" (id 4: a classifier that
/// is not a model: refused at step `open`).
fn recipes(dir: &Path) -> String {
    let models = repo().join("models");
    let copies = dir.join("copies");
    std::fs::create_dir_all(&copies).unwrap();
    for name in ["seg.onnx", "cls.onnx"] {
        std::fs::copy(models.join(name), copies.join(name)).unwrap();
    }
    std::fs::write(copies.join("broken.onnx"), b"not a model").unwrap();
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

[recipes.broken]
id = 4
classifier = "{copies}/broken.onnx"
"#,
        copies = copies.display()
    )
}

fn write_config(dir: &Path, modbus_port: u16) -> PathBuf {
    write_config_with(dir, modbus_port, "")
}

/// `write_config` with `extra` sections.
fn write_config_with(dir: &Path, modbus_port: u16, extra: &str) -> PathBuf {
    let text = format!(
        r#"[source]
{camera}

[inference]
backend = "{backend}"
threads = 2

[models.segmentation]
path = "{models}/seg.onnx"

[models.classifier]
path = "{models}/cls.onnx"

[output]
results = "results.jsonl"
flush_each_line = true
log_verdicts = false

[trigger]
mode = "plc"
http = true

[modbus]
listen = "127.0.0.1:{modbus_port}"

[status]
listen = "127.0.0.1:0"
{extra}
{recipes}"#,
        camera = common::test_camera("ball", 30),
        backend = common::backend(),
        models = repo().join("models").display(),
        recipes = recipes(dir),
    );
    let path = dir.join("sealcheck.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Starts sealcheck; returns it with its status address once unit 1 is Online.
fn start(config: &Path, modbus: SocketAddr) -> (Sealcheck, SocketAddr) {
    let mut cmd = Sealcheck::command(config);
    cmd.env("RUST_LOG", "info");
    let mut service = Sealcheck::spawn(cmd);
    let status = service.status_addr();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            service.is_running(),
            "sealcheck exited:\n{}",
            service.stderr()
        );
        if let Ok(mut plc) = Plc::try_connect(modbus, 1)
            && plc.bits().online
        {
            plc.enable(true);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never Online:\n{}",
            service.stderr()
        );
        thread::sleep(Duration::from_millis(50));
    }
    (service, status)
}

fn post(addr: SocketAddr, target: &str) -> (u16, String) {
    let reply = request(addr, "POST", target, "Content-Length: 0\r\n");
    (reply.status, reply.text())
}

/// Triggers part `id` over HTTP and returns its answer (the result).
fn trigger(addr: SocketAddr, id: u32) -> serde_json::Value {
    let (status, text) = post(addr, &format!("/api/trigger?part_id={id}"));
    assert_eq!(status, 200, "part {id}: {text}");
    serde_json::from_str(&text).unwrap()
}

/// Every judged line's reason agrees with the thresholds of the recipe it
/// names: "strict" fails `seal_area`, the others never do.
fn decided_by_the_named_recipe(line: &serde_json::Value) -> bool {
    if line["seq"].is_null() || line["reason"] == "late" {
        return true;
    }
    (line["recipe"] == "strict") == (line["reason"] == "seal_area")
}

#[test]
fn recipes_switch_over_http_at_the_next_part_and_every_result_names_its_recipe() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let modbus: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let config = write_config(dir.path(), modbus.port());
    let (mut service, status) = start(&config, modbus);

    let status_json = || -> serde_json::Value {
        serde_json::from_slice(&get(status, "/api/status").body).unwrap()
    };
    assert_eq!(status_json()["recipe"]["active"]["name"], "lenient");
    assert_eq!(Plc::connect(modbus, 1).registers().active_recipe, 1);
    for id in 1..=4 {
        let answer = trigger(status, id);
        assert_eq!(answer["recipe"], "lenient", "{answer}");
    }

    let (code, text) = post(status, "/api/recipe?name=strict");
    assert_eq!(code, 200, "{text}");
    let answer: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        answer["active"],
        serde_json::json!({"id": 2, "name": "strict"})
    );
    for id in 5..=8 {
        let answer = trigger(status, id);
        assert_eq!(answer["recipe"], "strict", "{answer}");
        assert_eq!(answer["reason"], "seal_area", "{answer}");
    }

    // Refused: the running recipe stays, and says so.
    let (code, text) = post(status, "/api/recipe?name=nope");
    assert_eq!(code, 404, "{text}");
    assert!(text.contains("lenient (id 1)"), "{text}");
    let (code, text) = post(status, "/api/recipe?id=4");
    assert_eq!(code, 409, "{text}");
    assert!(
        text.contains("refused at step `open`") && text.contains("\"strict\" stays active"),
        "{text}"
    );
    let (code, text) = post(status, "/api/recipe");
    assert_eq!(code, 400, "{text}");
    assert_eq!(status_json()["recipe"]["active"]["name"], "strict");
    assert_eq!(trigger(status, 9)["recipe"], "strict");

    // Other model files: opened, checked and warmed up beside the running
    // ones, and kept ready; the switch then only hands them over.
    let (code, text) = post(status, "/api/recipe?name=copy&prepare=true");
    assert_eq!(code, 200, "{text}");
    let answer: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["prepared"]["name"], "copy", "{answer}");
    assert_eq!(answer["active"]["name"], "strict", "{answer}");
    assert_eq!(status_json()["recipe"]["prepared"][0]["name"], "copy");
    assert_eq!(trigger(status, 10)["recipe"], "strict");
    let (code, text) = post(status, "/api/recipe?id=3");
    assert_eq!(code, 200, "{text}");
    assert!(
        status_json()["recipe"]["prepared"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    for id in 11..=13 {
        let answer = trigger(status, id);
        assert_eq!(answer["recipe"], "copy", "{answer}");
        assert_ne!(answer["reason"], "seal_area", "{answer}");
    }
    assert_eq!(Plc::connect(modbus, 1).registers().active_recipe, 3);
    // Four connections that send nothing (max_connections' default) and a
    // fifth: the PLC is still served, and /metrics counts the eviction.
    let idle: Vec<std::net::TcpStream> = (0..5)
        .map(|_| std::net::TcpStream::connect(modbus).unwrap())
        .collect();
    thread::sleep(Duration::from_millis(200));
    assert_eq!(Plc::connect(modbus, 1).registers().active_recipe, 3);
    drop(idle);
    let metrics = get(status, "/metrics").text();
    assert!(
        sample(
            &metrics,
            r#"sealcheck_modbus_connections_total{outcome="evicted_idle"}"#
        )
        .is_some_and(|n| n >= 2.0),
        "{metrics}"
    );
    assert!(sample(&metrics, "sealcheck_modbus_requests_total").is_some_and(|n| n >= 5.0));
    let series = |s: &str| sample(&metrics, s).unwrap_or_else(|| panic!("{s} in\n{metrics}"));
    assert_eq!(
        series(
            r#"sealcheck_recipe_results_total{recipe="strict",verdict="fail",reason="seal_area"}"#
        ),
        6.0
    );
    assert_eq!(series(r#"sealcheck_recipe_active{recipe="copy"}"#), 1.0);
    assert_eq!(series(r#"sealcheck_recipe_active{recipe="strict"}"#), 0.0);
    assert_eq!(series("sealcheck_recipe_switches_total"), 2.0);
    assert_eq!(series("sealcheck_recipe_refusals_total"), 2.0);
    // The page at the line says which product it judges.
    if let Some(chromium) = common::status_page::chromium() {
        let dom =
            common::status_page::browse(chromium, &format!("http://{status}/"), &["--dump-dom"]);
        let (tag, text) = common::status_page::element(&dom, "recipe");
        assert_eq!(text, "recipe copy (3)", "{tag}");
        assert!(!tag.contains("hidden"), "{tag}");
    }

    assert!(service.terminate(Duration::from_secs(30)).success());
    let lines = result_lines(&dir.path().join("results.jsonl"));
    let ids: Vec<u64> = lines
        .iter()
        .map(|l| l["part_id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, (1..=13).collect::<Vec<_>>(), "one result per part");
    let named: Vec<&str> = lines
        .iter()
        .map(|l| l["recipe"].as_str().unwrap())
        .collect();
    let expected: Vec<&str> = [["lenient"; 4].as_slice(), &["strict"; 6], &["copy"; 3]].concat();
    assert_eq!(named, expected);
    assert!(lines.iter().all(decided_by_the_named_recipe), "{lines:#?}");
}

#[test]
fn a_plc_switches_recipe_mid_run_and_no_part_is_lost_or_judged_by_half_a_recipe() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let modbus: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let broker = Broker::start(dir.path(), "allow_anonymous true");
    let subscriber = Subscriber::start(broker.port, None);
    let mqtt = format!("[mqtt]\nurl = \"{}\"\ntopic = \"{TOPIC}\"\n", broker.url());
    let config = write_config_with(dir.path(), modbus.port(), &mqtt);
    let (mut service, status) = start(&config, modbus);

    // The PLC triggers 60 parts at 20 a second on one connection and takes
    // their results on another, while its recipe logic switches on a third.
    let parts = 60u32;
    let triggers = thread::spawn(move || {
        let mut plc = Plc::connect(modbus, 1);
        let start = Instant::now();
        let mut accepted = Vec::new();
        for id in 1..=parts {
            let at = start + Duration::from_millis(50) * (id - 1);
            thread::sleep(at.saturating_duration_since(Instant::now()));
            if plc.trigger(id, Duration::from_millis(500)).is_ok() {
                accepted.push(id);
            }
        }
        accepted
    });
    let results = thread::spawn(move || {
        let mut plc = Plc::connect(modbus, 1);
        let mut taken = Vec::new();
        while taken.len() < parts as usize {
            match plc.take_result(Duration::from_secs(5)) {
                Some(r) => taken.push(r.part_id),
                None => break,
            }
        }
        taken
    });
    let mut plc = Plc::connect(modbus, 1);
    thread::sleep(Duration::from_millis(1000));
    assert_eq!(plc.switch_recipe(2, Duration::from_secs(30)), Ok(()));
    assert_eq!(plc.registers().active_recipe, 2);
    // RecipeDone went low with RecipeRequest; RecipeBusy is low when idle.
    let bits = plc.recipe_bits();
    assert!(!bits.busy && !bits.done && !bits.failed, "{bits:?}");
    // An unknown id: RecipeFailed with ErrorCode 6; the recipe stays.
    assert_eq!(plc.switch_recipe(99, Duration::from_secs(5)), Err(6));
    assert_eq!(plc.registers().active_recipe, 2);
    plc.write_coil(common::plc::map::CLEAR_ERROR, true);
    plc.write_coil(common::plc::map::CLEAR_ERROR, false);

    let accepted = triggers.join().unwrap();
    let taken = results.join().unwrap();
    assert_eq!(accepted.len(), parts as usize, "every trigger accepted");
    assert_eq!(taken, accepted, "the PLC got every result once, in order");
    let (code, text) = post(status, "/api/recipe?name=lenient");
    assert_eq!(code, 200, "{text}");
    assert!(service.terminate(Duration::from_secs(30)).success());

    let lines = result_lines(&dir.path().join("results.jsonl"));
    let ids: Vec<u32> = lines
        .iter()
        .map(|l| l["part_id"].as_u64().unwrap() as u32)
        .collect();
    assert_eq!(ids, accepted, "one result line per part, in part order");
    // One switch at a part boundary: lenient up to some part, strict after.
    let named: Vec<&str> = lines
        .iter()
        .map(|l| l["recipe"].as_str().unwrap())
        .collect();
    let first_strict = named
        .iter()
        .position(|r| *r == "strict")
        .expect("a strict part");
    assert!(first_strict > 0, "parts before the switch: {named:?}");
    assert!(
        named[..first_strict].iter().all(|r| *r == "lenient")
            && named[first_strict..].iter().all(|r| *r == "strict"),
        "{named:?}"
    );
    assert!(lines.iter().all(decided_by_the_named_recipe), "{lines:#?}");
    // MQTT: each part's message names the recipe its result line names,
    // and every message keeps docs/verdict.schema.json.
    assert!(
        common::mqtt::wait_until(Duration::from_secs(10), || subscriber.verdicts().len()
            >= lines.len()),
        "MQTT messages missing"
    );
    let verdicts = subscriber.verdicts();
    for (line, (_, message)) in lines.iter().zip(&verdicts) {
        assert_eq!(message["part_id"], line["part_id"]);
        assert_eq!(message["recipe"], line["recipe"], "{message}");
    }
    super::mqtt::assert_schema_valid(&verdicts);
}
