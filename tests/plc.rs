//! The line's PLC runs sealcheck over Modbus TCP, end to end: `sealcheck
//! run` on a live test camera with `[trigger] mode = "plc"` and `[modbus]`,
//! a PLC simulator (`common::plc`, the map of docs/INTEGRATION.md) in this
//! test, and a real MQTT broker: every part once, in order, on every
//! interface.
//!
//! ```text
//! PLC simulator ──Modbus TCP (loopback)──▶ sealcheck run (videotestsrc live) ──▶ results.jsonl
//!   trigger thread: PartId, Trigger, TriggerAck          └──MQTT──▶ mosquitto ──▶ subscriber
//!   result thread: ResultsValid, read, ResultsAck
//! ```
//!
//! A camera that hangs is an RTSP server in a child process (`common::rtsp`,
//! this binary re-run as `rtsp_camera_process`), stopped with SIGSTOP.
//!
//! Every wait is bounded; nothing talks to any address but loopback.

use crate::common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::mqtt::{Broker, Subscriber, TOPIC};
use common::plc::{Plc, PlcResult, TriggerRefused};
use common::rtsp::RtspCamera;
use common::{Sealcheck, free_port, repo, result_lines};

const FPS: u32 = 30;

/// A config in `dir`: `cameras` (a `[source]` or `[cameras.*]` tables), plc
/// mode with `trigger` keys, `[modbus]` on `port` with `modbus` keys, and
/// `extra` sections.
fn write_config(
    dir: &Path,
    cameras: &str,
    trigger: &str,
    port: u16,
    modbus: &str,
    extra: &str,
) -> PathBuf {
    let text = format!(
        r#"{cameras}

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
{trigger}

[modbus]
listen = "127.0.0.1:{port}"
{modbus}

{extra}
"#,
        backend = common::backend(),
        models = repo().join("models").display(),
    );
    let path = dir.join("sealcheck.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A live 320x240 test camera at `FPS`.
fn camera_source() -> String {
    common::test_camera("ball", FPS)
}

/// Starts sealcheck and connects the PLC once unit 1 (and `units`) is Online.
fn start(config: &Path, addr: SocketAddr, units: &[u8]) -> Sealcheck {
    let mut cmd = Sealcheck::command(config);
    cmd.env("RUST_LOG", "info");
    let mut service = Sealcheck::spawn(cmd);
    let deadline = Instant::now() + Duration::from_secs(60);
    for unit in units {
        loop {
            assert!(
                service.is_running(),
                "sealcheck exited:\n{}",
                service.stderr()
            );
            if let Ok(mut plc) = Plc::try_connect(addr, *unit)
                && plc.bits().online
            {
                plc.enable(true);
                break;
            }
            assert!(
                Instant::now() < deadline,
                "unit {unit} never Online:\n{}",
                service.stderr()
            );
            thread::sleep(Duration::from_millis(50));
        }
    }
    service
}

/// ReasonCode `overrun` (docs/INTEGRATION.md).
const OVERRUN: u16 = 8;

/// The ResultSeq a result line's part shows on Modbus: its frame's `seq`,
/// all ones for a part without a frame (docs/INTEGRATION.md).
fn result_seq_of(line: &serde_json::Value) -> u32 {
    line["seq"].as_u64().map_or(u32::MAX, |seq| seq as u32)
}

/// Milliseconds since the epoch of a result line's RFC 3339 time.
fn epoch_ms(line: &serde_json::Value, key: &str) -> f64 {
    let text = line[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} in {line}"));
    let t = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|e| panic!("{key} {text:?}: {e}"));
    (t.unix_timestamp_nanos() / 1_000_000) as f64
}

/// Each `overrun` follows the part that took its frame, and that frame was
/// captured at or after the overrun trigger's moment (trigger + `delay_ms`):
/// two moments before one frame, as the rule says (src/trigger/matcher.rs).
/// The file's times are whole milliseconds: 2 ms of slack.
fn overruns_are_the_rules(lines: &[serde_json::Value], delay_ms: f64) {
    let mut last_judged: Option<&serde_json::Value> = None;
    for line in lines {
        if line["reason"] != "overrun" {
            if !line["seq"].is_null() {
                last_judged = Some(line);
            }
            continue;
        }
        let judged =
            last_judged.unwrap_or_else(|| panic!("overrun with no part before it: {line}"));
        let moment = epoch_ms(line, "triggered") + delay_ms;
        let captured = epoch_ms(judged, "ts");
        assert!(
            captured + 2.0 >= moment,
            "part {} overran part {} though its frame was captured {:.0} ms before the moment",
            line["part_id"],
            judged["part_id"],
            moment - captured
        );
    }
}

/// Triggers `ids` on `unit`, one every `every`, the full handshake each;
/// returns the ids the station acknowledged.
fn trigger_all(addr: SocketAddr, unit: u8, ids: Vec<u32>, every: Duration) -> Vec<u32> {
    let mut plc = Plc::connect(addr, unit);
    let start = Instant::now();
    let mut accepted = Vec::new();
    for (k, id) in ids.into_iter().enumerate() {
        thread::sleep((start + every * k as u32).saturating_duration_since(Instant::now()));
        if plc.trigger(id, Duration::from_millis(500)).is_ok() {
            accepted.push(id);
        }
    }
    accepted
}

/// Takes results on `unit` (four-way handshake) until `count` came or none
/// came for `quiet`.
fn take_results(addr: SocketAddr, unit: u8, count: usize, quiet: Duration) -> Vec<PlcResult> {
    let mut plc = Plc::connect(addr, unit);
    let mut results = Vec::new();
    while results.len() < count {
        match plc.take_result(quiet) {
            Some(r) => results.push(r),
            None => break,
        }
    }
    results
}

#[test]
fn a_plc_runs_200_parts_at_20_per_second_and_each_is_judged_once_in_order_everywhere() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), "allow_anonymous true");
    let subscriber = Subscriber::start(broker.port, None);
    let port = free_port();
    let delay_ms = 20.0;
    let config = write_config(
        dir.path(),
        &format!("[source]\n{}", camera_source()),
        "delay_ms = 20",
        port,
        "",
        &format!("[mqtt]\nurl = \"{}\"\ntopic = \"{TOPIC}\"\n", broker.url()),
    );
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let service = start(&config, addr, &[1]);
    let ids: Vec<u32> = (4711..4911).collect();
    let results = thread::spawn(move || take_results(addr, 1, 200, Duration::from_secs(10)));
    let accepted = trigger_all(addr, 1, ids.clone(), Duration::from_millis(50));
    let results = results.join().unwrap();
    assert_eq!(accepted, ids, "every trigger acknowledged");
    // Modbus: every part once, in trigger order.
    let got: Vec<u32> = results.iter().map(|r| r.part_id).collect();
    assert_eq!(got, ids, "results on Modbus, in order");
    // Judged (0 to 3), or `overrun` (8): a trigger the station accepted
    // late (a 2-core runner's stall) can land within one frame of the last;
    // the results file must then show the rule made it so (below).
    for r in &results {
        assert!(
            r.reason_code <= 3 || r.reason_code == OVERRUN,
            "part {}: reason code {}",
            r.part_id,
            r.reason_code
        );
        assert!(!r.late, "part {} late", r.part_id);
    }
    service.signal("INT");
    let (code, _, stderr) = service.finish(Duration::from_secs(30));
    assert_eq!(code, 0, "{stderr}");
    // The results file: every part once, in order, each its own frame, the
    // first frame captured at or after trigger + delay_ms.
    let lines = result_lines(&dir.path().join("results.jsonl"));
    let file_ids: Vec<u64> = lines
        .iter()
        .map(|l| l["part_id"].as_u64().unwrap())
        .collect();
    assert_eq!(
        file_ids,
        ids.iter().map(|&i| u64::from(i)).collect::<Vec<_>>(),
        "results file"
    );
    overruns_are_the_rules(&lines, delay_ms);
    let judged: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["reason"] != "overrun").collect();
    let mut seqs: Vec<u64> = judged.iter().map(|l| l["seq"].as_u64().unwrap()).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "no frame judged twice: {seqs:?}"
    );
    seqs.dedup();
    assert_eq!(seqs.len(), judged.len());
    assert!(
        judged.len() * 10 >= ids.len() * 9,
        "only {} of {} parts judged",
        judged.len(),
        ids.len()
    );
    let interval = 1000.0 / f64::from(FPS);
    for line in &judged {
        let wait = line["trigger_ms"]["frame"].as_f64().unwrap();
        assert!(
            wait >= delay_ms && wait <= delay_ms + interval + 5.0,
            "part {}: frame {wait:.1} ms after the trigger",
            line["part_id"]
        );
    }
    // Modbus's ResultSeq is the judged frame's seq (all ones without a frame).
    for (r, line) in results.iter().zip(&lines) {
        assert_eq!(r.result_seq, result_seq_of(line), "{line}");
    }
    // MQTT: the same parts, once each, in order.
    let deadline = Instant::now() + Duration::from_secs(10);
    while subscriber.verdicts().len() < ids.len() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    let mqtt_ids: Vec<u64> = subscriber
        .verdicts()
        .iter()
        .map(|(_, v)| v["part_id"].as_u64().unwrap())
        .collect();
    assert_eq!(mqtt_ids, file_ids, "MQTT verdicts");
}

/// ReasonCode `no_frame`; ErrorCode "refused: offline" (docs/INTEGRATION.md).
const NO_FRAME: u16 = 7;
const OFFLINE: u16 = 2;

/// The camera hangs mid-run: its RTSP server is stopped (SIGSTOP) for a
/// few seconds with its connection open, so frames just stop. Triggers while the
/// station still counts the camera as streaming are accepted and fail
/// `no_frame` at `frame_wait_ms`; once the source is declared lost
/// (`frame_timeout_ms`), triggers are refused at the handshake (ErrorCode 2).
/// After the camera goes on and is reopened, parts are judged again, and
/// every accepted trigger got exactly one result, in order, on Modbus and
/// in the results file.
#[test]
fn triggers_while_the_camera_hangs_fail_no_frame_in_time_or_are_refused_and_none_is_lost() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let rtsp_port = free_port();
    let camera = RtspCamera::start(rtsp_port);
    let port = free_port();
    let frame_wait_ms = 200u16;
    let config = write_config(
        dir.path(),
        &format!(
            "[source]\nkind = \"rtsp\"\nurl = \"rtsp://127.0.0.1:{rtsp_port}/line\"\nlatency_ms = 0\n\
             retry_min_ms = 200\nretry_max_ms = 1000\nframe_timeout_ms = 1000\n"
        ),
        &format!("frame_wait_ms = {frame_wait_ms}"),
        port,
        "max_connections = 8",
        "",
    );
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let service = start(&config, addr, &[1]);
    // Results are taken all along (the station holds 8 at most), until the
    // triggering is over and none came for a while.
    let triggered = Arc::new(AtomicBool::new(false));
    let taker = {
        let triggered = Arc::clone(&triggered);
        thread::spawn(move || {
            let mut plc = Plc::connect(addr, 1);
            let (mut results, deadline) = (Vec::new(), Instant::now() + Duration::from_secs(90));
            while Instant::now() < deadline {
                match plc.take_result(Duration::from_millis(500)) {
                    Some(r) => results.push(r),
                    None if triggered.load(Ordering::Acquire) => break,
                    None => {}
                }
            }
            results
        })
    };
    let mut plc = Plc::connect(addr, 1);
    let every = Duration::from_millis(100);
    let mut accepted = Vec::new();
    // Before: parts judged.
    for id in 1..=10u32 {
        thread::sleep(every);
        plc.trigger(id, Duration::from_millis(500))
            .unwrap_or_else(|e| panic!("part {id} refused: {e:?}"));
        accepted.push(id);
    }
    // Part 10 is judged (its frame came) before the camera hangs; frames
    // already on their way are in by 300 ms after.
    let results_file = dir.path().join("results.jsonl");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !result_lines(&results_file)
        .iter()
        .any(|l| l["part_id"] == 10 && !l["seq"].is_null())
    {
        assert!(
            Instant::now() < deadline,
            "part 10 never judged:\n{}",
            service.stderr()
        );
        thread::sleep(Duration::from_millis(20));
    }
    camera.freeze();
    thread::sleep(Duration::from_millis(300));
    // Until the loss is noticed and three triggers were refused (bounded).
    let (mut during, mut refused) = (Vec::new(), 0);
    for id in 101..=160u32 {
        if refused == 3 {
            break;
        }
        thread::sleep(every);
        match plc.trigger(id, Duration::from_millis(150)) {
            Ok(()) => during.push(id),
            Err(TriggerRefused::NoAck { error_code }) => {
                assert_eq!(
                    error_code, OFFLINE,
                    "part {id} refused with ErrorCode {error_code}"
                );
                refused += 1;
            }
        }
    }
    accepted.extend(&during);
    assert!(
        !during.is_empty() && refused > 0,
        "{} accepted while the camera hung unnoticed, {refused} refused once it was lost:\n{}",
        during.len(),
        service.stderr()
    );
    // The camera goes on: it is reopened and parts are judged again.
    camera.thaw();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !plc.bits().online {
        assert!(
            Instant::now() < deadline,
            "never Online again:\n{}",
            service.stderr()
        );
        thread::sleep(Duration::from_millis(50));
    }
    for id in 201..=210u32 {
        thread::sleep(every);
        plc.trigger(id, Duration::from_millis(500))
            .unwrap_or_else(|e| panic!("part {id} refused after the camera came back: {e:?}"));
        accepted.push(id);
    }
    triggered.store(true, Ordering::Release);
    let results = taker.join().unwrap();
    service.signal("INT");
    let (code, _, stderr) = service.finish(Duration::from_secs(30));
    assert_eq!(code, 0, "{stderr}");
    // Modbus: every accepted trigger once, in trigger order.
    let got: Vec<u32> = results.iter().map(|r| r.part_id).collect();
    assert_eq!(got, accepted, "results on Modbus, in order");
    for r in &results {
        if during.contains(&r.part_id) {
            // TriggerToResultMs is x10.
            let ms = f64::from(r.trigger_to_result) / 10.0;
            assert!(
                r.reason_code == NO_FRAME
                    && ms >= f64::from(frame_wait_ms)
                    && ms < f64::from(frame_wait_ms) + 100.0,
                "part {} while the camera hung: reason {} after {ms:.1} ms",
                r.part_id,
                r.reason_code
            );
        } else {
            assert!(
                r.reason_code <= 3,
                "part {}: reason code {}",
                r.part_id,
                r.reason_code
            );
        }
    }
    // The results file says the same.
    let lines = result_lines(&results_file);
    let file_ids: Vec<u64> = lines
        .iter()
        .map(|l| l["part_id"].as_u64().unwrap())
        .collect();
    let expected: Vec<u64> = accepted.iter().map(|&i| u64::from(i)).collect();
    assert_eq!(file_ids, expected, "results file");
    for (line, r) in lines.iter().zip(&results) {
        let hung = during.contains(&(line["part_id"].as_u64().unwrap() as u32));
        assert_eq!(line["reason"] == "no_frame", hung, "{line}");
        assert_eq!(line["seq"].is_null(), hung, "{line}");
        assert_eq!(r.result_seq, result_seq_of(line), "{line}");
    }
}

/// ErrorCode "refused: the camera triggers itself" (docs/INTEGRATION.md).
const BY_CAMERA: u16 = 5;

/// `[trigger] mode = "camera"`: a camera triggered on its own input line (a
/// live test camera stands in for one) makes every frame a part whose id is
/// the count of the camera's frames. The PLC reads them over Modbus in
/// order (ResultPartId 1, 2, 3, ...), its own trigger is refused with
/// ErrorCode 5 (TriggerReady stays low), and the results file carries the
/// same ids, each its frame's `seq` + 1.
#[test]
fn a_camera_triggered_on_its_input_line_numbers_the_parts_the_plc_reads() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = write_config(
        dir.path(),
        &format!("[source]\n{}", common::test_camera("ball", 10)),
        "",
        port,
        // Room for every result until the PLC reads them (10 a second).
        "buffer = 64\nmax_connections = 8",
        "",
    );
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("mode = \"plc\"", "mode = \"camera\"")).unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let service = start(&config, addr, &[1]);
    let mut plc = Plc::connect(addr, 1);
    assert!(!plc.bits().trigger_ready, "TriggerReady in camera mode");
    match plc.trigger(999, Duration::from_millis(200)) {
        Err(TriggerRefused::NoAck { error_code }) => assert_eq!(error_code, BY_CAMERA),
        Ok(()) => panic!("a PLC trigger was taken in camera mode"),
    }
    let results = take_results(addr, 1, 20, Duration::from_secs(5));
    service.signal("INT");
    let (code, _, stderr) = service.finish(Duration::from_secs(30));
    assert_eq!(code, 0, "{stderr}");
    let got: Vec<u32> = results.iter().map(|r| r.part_id).collect();
    assert_eq!(
        got,
        (1..=20).collect::<Vec<u32>>(),
        "parts on Modbus, by count"
    );
    let lines = result_lines(&dir.path().join("results.jsonl"));
    assert!(lines.len() >= 20, "{} result lines", lines.len());
    for (k, line) in lines.iter().enumerate() {
        let seq = line["seq"].as_u64().unwrap();
        assert_eq!(seq, k as u64, "{line}");
        assert_eq!(line["part_id"].as_u64(), Some(seq + 1), "{line}");
    }
    for (r, line) in results.iter().zip(&lines) {
        assert!(
            r.reason_code <= 3,
            "part {}: reason code {}",
            r.part_id,
            r.reason_code
        );
        assert_eq!(r.result_seq, result_seq_of(line), "{line}");
    }
}

#[test]
fn a_flood_of_triggers_gets_one_result_per_accepted_trigger_and_the_server_stays_up() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = write_config(
        dir.path(),
        &format!("[source]\n{}", camera_source()),
        "",
        port,
        "handshake = false",
        "",
    );
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let service = start(&config, addr, &[1]);
    // 1000 triggers a second for 5 s, each acknowledged or refused at once.
    let mut plc = Plc::connect(addr, 1);
    let start = Instant::now();
    let mut accepted = Vec::new();
    let mut id = 100_000u32;
    while start.elapsed() < Duration::from_secs(5) {
        let due = start + Duration::from_millis(u64::from(id - 100_000));
        thread::sleep(due.saturating_duration_since(Instant::now()));
        if plc.trigger(id, Duration::ZERO).is_ok() {
            accepted.push(u64::from(id));
        }
        id += 1;
    }
    let tried = id - 100_000;
    assert!(tried >= 2500, "only {tried} triggers in 5 s");
    assert!(!accepted.is_empty());
    // The server still answers, and its heartbeat moves.
    let mut late_plc = Plc::connect(addr, 1);
    let beat = late_plc.registers().heartbeat;
    thread::sleep(Duration::from_millis(300));
    assert_ne!(late_plc.registers().heartbeat, beat, "heartbeat stopped");
    thread::sleep(Duration::from_secs(1));
    service.signal("INT");
    let (code, _, stderr) = service.finish(Duration::from_secs(30));
    assert_eq!(code, 0, "{stderr}");
    let lines = result_lines(&dir.path().join("results.jsonl"));
    let ids: Vec<u64> = lines
        .iter()
        .map(|l| l["part_id"].as_u64().unwrap())
        .collect();
    assert_eq!(
        ids, accepted,
        "one result per accepted trigger, in order ({tried} tried)"
    );
    let judged: Vec<u64> = lines.iter().filter_map(|l| l["seq"].as_u64()).collect();
    assert!(
        judged.windows(2).all(|w| w[0] < w[1]),
        "no frame judged twice"
    );
}

#[test]
fn two_cameras_are_units_1_and_2_and_keep_their_parts_apart() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let cameras = format!(
        "[cameras.top]\n{}\n[cameras.side]\n{}",
        camera_source(),
        common::test_camera("snow", FPS)
    );
    // Four PLC connections at once (two per unit), besides the ones the
    // start-up check just closed: above the default cap of 4.
    let config = write_config(dir.path(), &cameras, "", port, "max_connections = 8", "");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let service = start(&config, addr, &[1, 2]);
    let top = thread::spawn(move || take_results(addr, 1, 20, Duration::from_secs(10)));
    let side = thread::spawn(move || take_results(addr, 2, 20, Duration::from_secs(10)));
    let t1 =
        thread::spawn(move || trigger_all(addr, 1, (1..21).collect(), Duration::from_millis(60)));
    let t2 = thread::spawn(move || {
        trigger_all(addr, 2, (501..521).collect(), Duration::from_millis(60))
    });
    assert_eq!(t1.join().unwrap(), (1..21).collect::<Vec<u32>>());
    assert_eq!(t2.join().unwrap(), (501..521).collect::<Vec<u32>>());
    let ids = |r: Vec<PlcResult>| r.iter().map(|r| r.part_id).collect::<Vec<u32>>();
    assert_eq!(
        ids(top.join().unwrap()),
        (1..21).collect::<Vec<u32>>(),
        "unit 1: the top camera's parts"
    );
    assert_eq!(
        ids(side.join().unwrap()),
        (501..521).collect::<Vec<u32>>(),
        "unit 2: the side camera's parts"
    );
    // Unit 3 is no camera of this station.
    let mut stranger = Plc::connect(addr, 3);
    assert!(
        matches!(stranger.try_read_inputs(0, 1), Ok(Err(_))),
        "unit 3 must be refused with an exception"
    );
    service.signal("INT");
    let (code, _, stderr) = service.finish(Duration::from_secs(30));
    assert_eq!(code, 0, "{stderr}");
    let lines = result_lines(&dir.path().join("results.jsonl"));
    let of = |camera: &str| -> Vec<u64> {
        lines
            .iter()
            .filter(|l| l["camera"] == camera)
            .map(|l| l["part_id"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(of("top"), (1..21).collect::<Vec<u64>>());
    assert_eq!(of("side"), (501..521).collect::<Vec<u64>>());
}

/// Issue 40, point 3: the shipped PLC demo (`config/demo-plc.toml`, what
/// `make demo-plc` runs) triggers and judges parts: its live camera streams
/// until stopped, so a PLC that enables, triggers and reads back as
/// docs/INTEGRATION.md says gets a verdict of a seal for every part.
#[test]
fn the_plc_demo_config_judges_every_part_a_plc_triggers() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let (port, status) = (free_port(), free_port());
    let shipped = std::fs::read_to_string(repo().join("config/demo-plc.toml")).unwrap();
    let models = repo().join("models");
    let text = shipped
        .replace("127.0.0.1:5020", &format!("127.0.0.1:{port}"))
        .replace("127.0.0.1:9750", &format!("127.0.0.1:{status}"))
        .replace("../models", &models.display().to_string())
        .replace("../results/demo-plc.jsonl", "results.jsonl")
        .replace(
            "samples/demo_clip",
            &repo().join("samples/demo_clip").display().to_string(),
        );
    let config = dir.path().join("demo-plc.toml");
    std::fs::write(&config, text).unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut service = start(&config, addr, &[1]);
    // Point 5: before the first trigger the station is idle waiting for one,
    // while the camera streams and its frames are passed over.
    let health_at = SocketAddr::from(([127, 0, 0, 1], status));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let health = common::http::get(health_at, "/healthz").text();
        if health.contains("waiting for a trigger") {
            assert!(!health.contains("sends no frames"), "{health}");
            break;
        }
        assert!(Instant::now() < deadline, "health: {health}");
        thread::sleep(Duration::from_millis(200));
    }
    let mut plc = Plc::connect(addr, 1);
    let parts = 20u32;
    for id in 1..=parts {
        plc.trigger_when_ready(id, Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("part {id}: {e:?}\n{}", service.stderr()));
        let result = plc
            .take_result(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("part {id}: no result\n{}", service.stderr()));
        assert_eq!(result.part_id, id);
    }
    let status = service.terminate(Duration::from_secs(30));
    assert!(status.success(), "exit {status}:\n{}", service.stderr());
    let lines = result_lines(&dir.path().join("results.jsonl"));
    let judged: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["part_id"].as_u64().is_some())
        .collect();
    assert_eq!(judged.len(), parts as usize, "{lines:#?}");
    // The sample clip's seals are judged: a frame for every part, and a seal on most.
    assert!(
        judged
            .iter()
            .all(|l| !matches!(l["reason"].as_str(), Some("no_frame" | "overrun"))),
        "{judged:#?}"
    );
    // The clip has 180 good seals and 120 defects: twenty parts meet both.
    for reason in ["ok", "defect"] {
        assert!(
            judged.iter().any(|l| l["reason"] == reason),
            "no part judged {reason}: {judged:#?}"
        );
    }
}

#[test]
fn a_plc_reads_each_cycles_reject_mask_matching_its_result_line() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // The cavity demo clip as a live camera, 5 cycles a second; cavity 3 disabled.
    let camera = format!(
        "[source]\nkind = \"pipeline\"\npipeline = \"multifilesrc location={}/frame_%05d.jpg loop=true caps=image/jpeg,framerate=5/1 ! jpegdec ! videoconvert ! video/x-raw,format=RGB ! identity sync=true ! appsink name=sink\"\nlive = true\n\n[source.layout]\nrows = 2\ncols = 3\nfirst = [320, 180]\npitch = [640, 360]\nsize = [600, 340]\nmargin = 10\ndisabled = [3]\n",
        repo().join("samples/demo_cavities").display()
    );
    let config = write_config(dir.path(), &camera, "", port, "buffer = 16", "");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("/seg.onnx", "/seg_batch.onnx")
            .replace("/cls.onnx", "/cls_batch.onnx")
            .replace("threads = 2", "threads = 2\nmax_batch = 6"),
    )
    .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let service = start(&config, addr, &[1]);
    let parts = 12;
    let ids: Vec<u32> = (0..parts).map(|k| 8000 + k).collect();
    let reader =
        thread::spawn(move || take_results(addr, 1, parts as usize, Duration::from_secs(10)));
    let accepted = trigger_all(addr, 1, ids.clone(), Duration::from_millis(400));
    let results = reader.join().unwrap();
    service.signal("INT");
    let (code, _, stderr) = service.finish(Duration::from_secs(30));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(accepted, ids, "{stderr}");
    let got: Vec<u32> = results.iter().map(|r| r.part_id).collect();
    assert_eq!(got, ids, "every cycle's result on Modbus, in order");
    let lines = result_lines(&dir.path().join("results.jsonl"));
    assert_eq!(lines.len(), parts as usize);
    let mut rejected = 0;
    for (r, line) in results.iter().zip(&lines) {
        assert_eq!(line["part_id"].as_u64(), Some(u64::from(r.part_id)));
        let mask = line["reject_mask"]
            .as_u64()
            .unwrap_or_else(|| panic!("{line}"));
        assert_eq!(r.reject_mask, mask, "part {}: {line}", r.part_id);
        assert_eq!(
            r.cavities, 6,
            "the layout's cavities, the disabled one included"
        );
        assert_eq!(mask & 0b100, 0, "disabled cavity 3 never fails");
        assert_eq!(r.pass, mask == 0, "Pass exactly when no cavity is rejected");
        rejected += mask.count_ones();
    }
    assert!(
        rejected > 0,
        "the clip's defective cavities show in the masks"
    );
}
