//! Parts, not frames (`[trigger] mode = "plc"`), end to end: `sealcheck
//! run` on a live test camera, triggered through `POST /api/trigger` by
//! threads of this test, checked in the answers and the results file.
//! (The PLC's side, Modbus TCP, is `tests/plc.rs`.)
//!
//! ```text
//! test threads ──POST /api/trigger?part_id=N──▶ sealcheck run (videotestsrc live) ──▶ answer + results.jsonl
//! ```

use crate::common;

use std::net::SocketAddr;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use common::http::request;
use common::status_page::{start, status_config};
use common::{Sealcheck, result_lines};

/// A live 320x240 test camera at `fps`.
fn camera(fps: u32) -> String {
    format!("[source]\n{}", common::test_camera("ball", fps))
}

/// Starts `sealcheck run` in plc mode with `trigger` keys; returns it and
/// its status server's address once the station is online.
fn start_station(dir: &Path, fps: u32, keys: &str) -> (Sealcheck, SocketAddr) {
    let config = status_config(
        dir,
        &camera(fps),
        &format!("[trigger]\nmode = \"plc\"\nhttp = true\n{keys}"),
        30.0,
    );
    let mut service = start(&config, &[]);
    let addr = service.status_addr();
    assert!(
        service.wait_for_log("pipeline running", Duration::from_secs(60)),
        "not running:\n{}",
        service.stderr()
    );
    // Online once the camera streams: a first trigger may be refused before.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = trigger(addr, 1);
        if r.0 == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "never online: {} {}", r.0, r.1);
        thread::sleep(Duration::from_millis(100));
    }
    (service, addr)
}

/// One HTTP trigger of part `id`: the status and the answer's text.
fn trigger(addr: SocketAddr, id: u32) -> (u16, String) {
    let reply = request(addr, "POST", &format!("/api/trigger?part_id={id}"), "");
    (reply.status, reply.text())
}

/// Fires `ids` at `rate` per second, each on its own thread (an answer
/// waits for the result); returns (id, status, answer) in id order.
fn fire(
    addr: SocketAddr,
    ids: std::ops::Range<u32>,
    every: Duration,
) -> Vec<(u32, u16, serde_json::Value)> {
    let start = Instant::now();
    let handles: Vec<_> = ids
        .enumerate()
        .map(|(k, id)| {
            let at = start + every * k as u32;
            thread::sleep(at.saturating_duration_since(Instant::now()));
            thread::spawn(move || {
                let (status, text) = trigger(addr, id);
                let value = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
                (id, status, value)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Results of part ids at or above `from` (the online probe's part 1 is left out).
fn part_lines(dir: &Path, from: u64) -> Vec<serde_json::Value> {
    result_lines(&dir.join("results.jsonl"))
        .into_iter()
        .filter(|l| l["part_id"].as_u64().is_some_and(|id| id >= from))
        .collect()
}

/// The part ids of `lines`, in file order.
fn part_ids(lines: &[serde_json::Value]) -> Vec<u64> {
    lines
        .iter()
        .map(|l| l["part_id"].as_u64().unwrap())
        .collect()
}

#[test]
fn each_trigger_gets_one_result_of_the_first_frame_after_its_moment() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let (fps, delay_ms) = (30u32, 20.0);
    let (service, addr) = start_station(dir.path(), fps, "delay_ms = 20\n");
    // No trigger: the live view still shows the camera, its frames unjudged.
    let _ = common::http::get(addr, "/api/live.jpg");
    thread::sleep(Duration::from_millis(300));
    let live = common::http::get(addr, "/api/live.jpg");
    assert_eq!(live.status, 200, "{}", live.text());
    assert!(
        live.headers
            .to_ascii_lowercase()
            .contains("x-sealcheck-verdict: none"),
        "a frame no trigger claimed is shown unjudged: {}",
        live.headers
    );
    let answers = fire(addr, 4711..4771, Duration::from_millis(100));
    for (id, status, answer) in &answers {
        assert_eq!(*status, 200, "part {id}: {answer}");
        assert_eq!(answer["part_id"], *id, "part {id}: {answer}");
    }
    service.signal("INT");
    let (code, _, stderr) = service.finish(Duration::from_secs(30));
    assert_eq!(code, 0, "{stderr}");
    let lines = part_lines(dir.path(), 4711);
    let ids = part_ids(&lines);
    assert_eq!(
        ids,
        (4711..4771).collect::<Vec<u64>>(),
        "every part once, in trigger order"
    );
    let mut seqs: Vec<u64> = lines
        .iter()
        .map(|l| {
            l["seq"]
                .as_u64()
                .unwrap_or_else(|| panic!("no frame judged: {l}"))
        })
        .collect();
    seqs.dedup();
    assert_eq!(seqs.len(), lines.len(), "no frame judged twice");
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "frames in order: {seqs:?}"
    );
    // The part's frame: the first captured at or after trigger + delay_ms,
    // so within one frame interval after that moment (capture times are
    // taken as the appsink gets each frame: a scheduling delay shows).
    let interval = 1000.0 / f64::from(fps);
    let waits: Vec<f64> = lines
        .iter()
        .map(|l| l["trigger_ms"]["frame"].as_f64().unwrap())
        .collect();
    for (line, wait) in lines.iter().zip(&waits) {
        assert!(
            *wait >= delay_ms && *wait <= delay_ms + interval + 5.0,
            "part {}: frame {wait:.1} ms after its trigger, not within one frame interval of trigger + {delay_ms} ms",
            line["part_id"]
        );
        assert_eq!(line["late"], false);
    }
}

#[test]
fn triggers_without_a_frame_fail_no_frame_in_time_and_a_second_trigger_on_one_frame_overruns() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    // A camera at 2 frames/s that a part waits 150 ms for: a trigger far
    // from the next frame gets `no_frame` (a frozen or lost camera looks
    // the same), two triggers just before one frame share it: `overrun`.
    let frame_wait_ms = 150.0;
    let (service, addr) = start_station(dir.path(), 2, "frame_wait_ms = 150\n");
    let mut answers = Vec::new();
    for k in 0..12u32 {
        let pair = 5000 + 2 * k;
        answers.extend(fire(addr, pair..pair + 2, Duration::from_millis(5)));
        thread::sleep(Duration::from_millis(130));
    }
    service.signal("INT");
    let (code, _, stderr) = service.finish(Duration::from_secs(30));
    assert_eq!(code, 0, "{stderr}");
    let mut reasons = std::collections::BTreeMap::new();
    for (id, status, answer) in &answers {
        assert_eq!(*status, 200, "part {id}: {answer}");
        let reason = answer["reason"].as_str().unwrap().to_string();
        if reason == "no_frame" {
            let latency = answer["latency_ms"].as_f64().unwrap();
            assert!(
                latency >= frame_wait_ms && latency < frame_wait_ms + 100.0,
                "part {id}: no_frame after {latency:.1} ms, not at its {frame_wait_ms} ms wait"
            );
            assert!(answer["seq"].is_null());
        }
        *reasons.entry(reason).or_insert(0) += 1;
    }
    // The pairs: a judged frame then `overrun`, or `no_frame` for each
    // (one may still get the frame if it comes between their waits' ends).
    for pair in answers.chunks(2) {
        let r: Vec<&str> = pair
            .iter()
            .map(|a| a.2["reason"].as_str().unwrap())
            .collect();
        let judged = |r: &str| !matches!(r, "no_frame" | "overrun");
        assert!(
            (judged(r[0]) && r[1] == "overrun")
                || (r[0] == "no_frame" && (r[1] == "no_frame" || judged(r[1]))),
            "pair {:?}: {r:?}",
            (pair[0].0, pair[1].0)
        );
    }
    assert!(
        reasons.contains_key("overrun") && reasons.contains_key("no_frame"),
        "{reasons:?}"
    );
    let lines = part_lines(dir.path(), 5000);
    let ids = part_ids(&lines);
    assert_eq!(
        ids,
        (5000..5024).collect::<Vec<u64>>(),
        "every part once, in trigger order"
    );
}
