//! The OPC UA server (src/opcua) end to end: `sealcheck run` on a live test
//! camera with `[trigger] mode = "plc"` and `[opcua]`, and a real client,
//! Python asyncua 2.1.0 (tests/opcua/client.py, scripts/requirements.txt).
//!
//! ```text
//! client.py ──OPC UA (loopback)──▶ sealcheck run (videotestsrc live) ──▶ results.jsonl
//!   StartSingleJob(PartId) ×N          └─ResultReadyEvent, plain variables─▶ client.py
//! ```
//!
//! Every wait is bounded; nothing talks to any address but loopback.

use crate::common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use common::{Sealcheck, free_port, repo, result_lines};

/// A config in `dir`: a live camera, plc mode, `[opcua]` on loopback `port` with `opcua` keys.
fn write_config(dir: &Path, port: u16, opcua: &str) -> PathBuf {
    let listen: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    write_config_on(dir, listen, opcua, "")
}

/// As `write_config`, listening on `listen`, with more `tables` after `[opcua]`.
pub(crate) fn write_config_on(
    dir: &Path,
    listen: SocketAddr,
    opcua: &str,
    tables: &str,
) -> PathBuf {
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

[opcua]
listen = "{listen}"
{opcua}
{tables}"#,
        camera = common::test_camera("ball", 30),
        backend = common::backend(),
        models = repo().join("models").display(),
    );
    let path = dir.join("sealcheck.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Starts sealcheck and waits until the OPC UA server on loopback `port` takes a connection.
fn start(config: &Path, port: u16) -> Sealcheck {
    start_on(config, format!("127.0.0.1:{port}").parse().unwrap())
}

/// Starts sealcheck (RUST_LOG=info) and waits until `addr` takes a connection.
pub(crate) fn start_on(config: &Path, addr: SocketAddr) -> Sealcheck {
    start_logging(config, addr, "info")
}

/// `start_on` with `RUST_LOG=filter`.
pub(crate) fn start_logging(config: &Path, addr: SocketAddr, filter: &str) -> Sealcheck {
    let mut cmd = Sealcheck::command(config);
    cmd.env("RUST_LOG", filter);
    let mut service = Sealcheck::spawn(cmd);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !service.stderr().contains("pipeline running") {
        assert!(
            service.is_running(),
            "sealcheck exited:\n{}",
            service.stderr()
        );
        assert!(
            Instant::now() < deadline,
            "never running:\n{}",
            service.stderr()
        );
        thread::sleep(Duration::from_millis(50));
    }
    assert!(
        TcpStream::connect(addr).is_ok(),
        "nothing listens on {addr}"
    );
    service
}

pub(crate) fn url(port: u16) -> String {
    format!("opc.tcp://127.0.0.1:{port}/")
}

/// Runs tests/opcua/client.py `args`; its JSON answer (stderr in the panic).
pub(crate) fn client(args: &[&str]) -> serde_json::Value {
    let output = Command::new("python3")
        .arg(repo().join("tests/opcua/client.py"))
        .args(args)
        .output()
        .expect("python3 with asyncua (the repo's .venv: make python)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "client.py {args:?}: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("client.py {args:?}: {e}: {stdout}"))
}

#[test]
fn a_client_browses_the_machine_vision_namespace_and_reads_every_methods_arguments() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let service = start(&write_config(dir.path(), port, ""), port);
    let report = client(&["browse", &url(port)]);
    let namespaces: Vec<&str> = report["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(namespaces.contains(&"http://opcfoundation.org/UA/MachineVision"));
    let systems = report["systems"].as_array().unwrap();
    assert_eq!(systems.len(), 1, "one VisionSystem per camera: {report}");
    let methods = &systems[0]["methods"];
    for name in [
        "Halt",
        "Reset",
        "StartSingleJob",
        "StartContinuous",
        "Stop",
        "Abort",
        "GetResultById",
        "GetResultListFiltered",
        "PrepareRecipe",
        "UnprepareRecipe",
        "GetRecipeListFiltered",
    ] {
        assert!(methods[name].is_object(), "{name} missing: {report}");
    }
    // The arguments the NodeSet declares with ValueRank 1 and no
    // ArrayDimensions read back (async-opcua 0.19 failed to encode them).
    let inputs = methods["StartSingleJob"]["InputArguments"]
        .as_array()
        .unwrap();
    let names: Vec<&str> = inputs.iter().map(|a| a[0].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["MeasId", "PartId", "RecipeId", "ProductId", "Parameters"]
    );
    assert_eq!(inputs[4][1], 1);
    assert_eq!(inputs[4][2], serde_json::json!([0]));
    assert!(methods["StartContinuous"]["InputArguments"].is_array());
    drop(service);
}

#[test]
fn a_hundred_single_jobs_give_a_hundred_events_in_order_with_the_results_files_verdicts() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let service = start(&write_config(dir.path(), port, ""), port);
    let answer = client(&["jobs", &url(port), "100", "4711"]);
    let jobs = answer["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 100);
    let events = answer["events"].as_array().unwrap();
    let parts: Vec<String> = events
        .iter()
        .map(|e| e["part"].as_str().unwrap_or("?").to_string())
        .collect();
    let expected: Vec<String> = (4711..4811).map(|id: u32| id.to_string()).collect();
    assert_eq!(
        parts, expected,
        "one event per part, in order, with its PartId"
    );
    for (event, job) in events.iter().zip(jobs) {
        assert_eq!(&event["job"], job, "the event's JobId is StartSingleJob's");
        assert!(event["type"].as_str().unwrap().contains("1024"), "{event}");
    }
    service.signal("INT");
    let (code, _, stderr) = service.finish(Duration::from_secs(30));
    assert_eq!(code, 0, "{stderr}");
    let lines = result_lines(&dir.path().join("results.jsonl"));
    let file_parts: Vec<String> = lines.iter().map(|l| l["part_id"].to_string()).collect();
    assert_eq!(file_parts, expected, "the results file has the same parts");
    for (event, line) in events.iter().zip(&lines) {
        let state = if line["verdict"] == "pass" { 1 } else { 2 };
        assert_eq!(event["state"], state, "{event} vs {line}");
        let content: serde_json::Value =
            serde_json::from_str(event["content"][0].as_str().unwrap()).unwrap();
        assert_eq!(content["verdict"], line["verdict"]);
        assert_eq!(content["reason"], line["reason"]);
    }
    // The plain variables show the last result.
    assert_eq!(answer["plain"]["LastPartId"], 4810);
    assert_eq!(answer["plain"]["ResultCount"], 100);
    assert_eq!(
        answer["plain"]["LastVerdict"],
        lines.last().unwrap()["verdict"]
    );
}

#[test]
fn twenty_subscribed_clients_each_get_every_event() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let service = start(
        &write_config(dir.path(), port, "max_connections = 32"),
        port,
    );
    let ready = dir.path().join("subscribed");
    let watchers: Vec<_> = (0..20)
        .map(|_| {
            let url = url(port);
            let ready = ready.display().to_string();
            thread::spawn(move || client(&["watch", &url, "90", "20", &ready]))
        })
        .collect();
    // The jobs start once the twenty are subscribed.
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&ready).map_or(0, |t| t.lines().count()) < 20 {
        assert!(Instant::now() < deadline, "not every watcher subscribed");
        thread::sleep(Duration::from_millis(100));
    }
    let answer = client(&["jobs", &url(port), "20", "100"]);
    assert_eq!(answer["events"].as_array().unwrap().len(), 20);
    for watcher in watchers {
        let seen = watcher.join().unwrap();
        let parts: Vec<&str> = seen["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["part"].as_str().unwrap_or("?"))
            .collect();
        let expected: Vec<String> = (100..120).map(|id: u32| id.to_string()).collect();
        assert_eq!(parts, expected, "a subscriber's events");
    }
    drop(service);
}

#[test]
fn random_bytes_and_truncated_messages_leave_the_server_serving_others() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut service = start(&write_config(dir.path(), port, ""), port);
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for round in 0..40 {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let bytes: Vec<u8> = match round % 4 {
            // A Hello cut short after its header.
            0 => b"HELF\x38\x00\x00\x00\x00\x00".to_vec(),
            // A Hello claiming a huge size.
            1 => b"HELF\xff\xff\xff\x7f".to_vec(),
            // An OpenSecureChannel truncated mid-way.
            2 => b"OPNF\x84\x00\x00\x00\x00\x00\x00\x00/\x00\x00\x00http://opcfoundation.org/UA/Secur".to_vec(),
            _ => (0..256)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect(),
        };
        let _ = stream.write_all(&bytes);
        let mut sink = [0u8; 256];
        let _ = stream.read(&mut sink);
    }
    assert!(service.is_running(), "{}", service.stderr());
    let answer = client(&["read", &url(port)]);
    assert!(
        answer["state"].as_str().unwrap().contains("Running"),
        "{answer}"
    );
}

#[test]
fn sixty_four_silent_connections_do_not_keep_a_client_out() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let service = start(
        &write_config(dir.path(), port, "max_connections = 16"),
        port,
    );
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let silent: Vec<TcpStream> = (0..64).map(|_| TcpStream::connect(addr).unwrap()).collect();
    thread::sleep(Duration::from_millis(300));
    let answer = client(&["read", &url(port)]);
    let seconds = answer["seconds"].as_f64().unwrap();
    assert!(seconds < 1.0, "served after {seconds:.2} s");
    assert!(
        service.stderr().contains("closed to admit"),
        "the eviction is logged:\n{}",
        service.stderr()
    );
    drop(silent);
}
