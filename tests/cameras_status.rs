//! What operators see of a station with several cameras, end to end:
//! `sealcheck run` with `[cameras.top]` and `[cameras.side]`, `[status]`
//! and `[archive]`, checked from outside with raw HTTP, `promtool check
//! metrics` and headless Chromium (as `tests/status.rs` checks one camera).
//!
//! ```text
//! test --writes--> config + clips --> sealcheck run --> results.jsonl ("camera"), archive/<camera>/
//!   \--HTTP (loopback)--> /api/status "cameras"  /metrics {camera=}  /healthz  /api/live.jpg?camera=  /archive/<camera>/...
//!   \--chromium: a tile per camera, the lost one's alarm, one camera's present view
//! ```

use crate::common;

use common::http::get;
use common::status_page::{
    browse, chromium, element, looping_demo_clip, sample, start, status_config as write_config,
    status_json, wait_until,
};
#[cfg(feature = "fault-injection")]
use common::{by_camera, result_lines};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
#[cfg(feature = "fault-injection")]
use std::time::Instant;

#[cfg(feature = "fault-injection")]
use sealcheck::archive::sha256_hex;

/// `/api/status`'s camera called `name`.
fn camera<'a>(status: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    status["cameras"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no camera {name} in {:#}", status["cameras"]))
}

#[cfg(feature = "fault-injection")]
const REASONS: [&str; 7] = [
    "ok",
    "defect",
    "no_seal",
    "seal_area",
    "not_inspected",
    "error",
    "late",
];

/// The camera's figures in `/api/status` are those of its result lines:
/// counts, per reason, the last result, the last hour's trend.
#[cfg(feature = "fault-injection")]
fn check_camera_counts(status: &serde_json::Value, name: &str, lines: &[serde_json::Value]) {
    let c = camera(status, name);
    let count = |reason: &str| lines.iter().filter(|l| l["reason"] == reason).count() as u64;
    let pass = count("ok");
    let fail = lines.len() as u64 - pass;
    assert_eq!(
        (c["frames"].as_u64(), c["pass"].as_u64(), c["fail"].as_u64()),
        (Some(pass + fail), Some(pass), Some(fail)),
        "{name}: {c:#}"
    );
    for reason in REASONS {
        assert_eq!(
            c["by_reason"][reason].as_u64(),
            Some(count(reason)),
            "{name} {reason}"
        );
    }
    let newest = lines.iter().max_by_key(|l| l["seq"].as_u64()).unwrap();
    assert_eq!(c["last"]["seq"], newest["seq"], "{name}");
    assert_eq!(c["last"]["reason"], newest["reason"], "{name}");
    let trend = c["trend"].as_array().unwrap();
    assert_eq!(trend.len(), 60, "{name}: an hour by minute");
    let in_trend = |key: &str| trend.iter().map(|b| b[key].as_u64().unwrap()).sum::<u64>();
    assert_eq!(
        (in_trend("pass"), in_trend("fail")),
        (pass, fail),
        "{name}: every result of this run is within the hour"
    );
}

#[cfg(not(feature = "fault-injection"))]
#[test]
fn two_cameras_are_counted_apart_in_api_status_and_metrics_and_archived_in_their_own_folders() {
    common::skipped(format_args!(
        "needs `--features fault-injection` (the run is held after its frames by a stalled inference)"
    ));
}

/// Two cameras of the same clip prefix, paced at 5 frames/s, inference held at
/// `seq` 12 (fault injection) so the process stays up with its results
/// written and a stall timeout longer than the test, so it stays healthy:
/// `/api/status` lists both cameras with exactly their lines' counts,
/// `/metrics` has their `camera` series (and promtool takes them),
/// `/healthz` is 200, and every failed frame is archived once (or counted as
/// skipped), in its camera's folder, with a manifest of its own.
#[cfg(feature = "fault-injection")]
#[test]
fn two_cameras_are_counted_apart_in_api_status_and_metrics_and_archived_in_their_own_folders() {
    let _serial = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    common::clip_prefix(dir, "clip", 20);
    // Paced at 5 frames/s like a camera: the archive thread runs at the
    // lowest CPU priority and takes what inspection leaves over.
    let paced = format!(
        "kind = \"pipeline\"\npipeline = \"multifilesrc location={} stop-index=19 caps=image/jpeg,framerate=5/1 ! jpegdec ! videoconvert ! video/x-raw,format=RGB ! identity sync=true ! appsink name=sink\"\noverflow = \"block\"",
        dir.join("clip/frame_%05d.jpg").display()
    );
    let cameras = format!("[cameras.top]\n{paced}\n\n[cameras.side]\n{paced}\n");
    let config = write_config(
        dir,
        &cameras,
        "[archive]\ndir = \"archive\"\nkeep = \"fail\"\nformat = \"jpeg\"",
        120.0,
    );
    let mut service = start(&config, &[("SEALCHECK_FAULT_STALL_INFER_AFTER", "12")]);
    let addr = service.status_addr();

    // Results of both cameras, then none for 2 s: inference is held.
    let mut last = (0, Instant::now());
    wait_until(
        Duration::from_secs(180),
        "both cameras' results, then the stall",
        &service,
        || {
            let lines = result_lines(&dir.join("results.jsonl"));
            if lines.len() != last.0 {
                last = (lines.len(), Instant::now());
            }
            by_camera(&lines).len() == 2 && last.1.elapsed() > Duration::from_secs(2)
        },
    );
    let lines = result_lines(&dir.join("results.jsonl"));
    let cameras = by_camera(&lines);
    assert_eq!(
        cameras.keys().collect::<Vec<_>>(),
        ["side", "top"],
        "{lines:?}"
    );
    for (name, of_camera) in &cameras {
        assert!(of_camera.len() >= 6, "{name}: {} results", of_camera.len());
    }
    // The board publishes within a second of the last result.
    wait_until(
        Duration::from_secs(10),
        "/api/status to count every line",
        &service,
        || status_json(addr)["shift"]["frames"].as_u64() == Some(lines.len() as u64),
    );
    let status = status_json(addr);
    let listed: Vec<&serde_json::Value> = status["cameras"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["name"])
        .collect();
    assert_eq!(listed, ["top", "side"], "in the config's order");
    for (name, of_camera) in &cameras {
        check_camera_counts(&status, name, of_camera);
        let c = camera(&status, name);
        assert_eq!(
            (&c["kind"], &c["state"], &c["up"]),
            (
                &serde_json::json!("pipeline"),
                &serde_json::json!("inspecting"),
                &serde_json::json!(true)
            ),
            "{c:#}"
        );
        assert!(c["problem"].is_null() && c["lost_since"].is_null(), "{c:#}");
        // A replay has no outages to count (`null`); an image sequence read
        // by GStreamer counts none.
        assert_eq!(c["outages"].as_u64().unwrap_or(0), 0, "{c:#}");
    }

    // /metrics: the camera series add up to each camera's lines and to the
    // station's unlabelled series.
    let metrics = get(addr, "/metrics").text();
    for (name, of_camera) in &cameras {
        for reason in REASONS {
            let verdict = if reason == "ok" { "pass" } else { "fail" };
            let series = format!(
                "sealcheck_camera_results_total{{camera=\"{name}\",verdict=\"{verdict}\",reason=\"{reason}\"}}"
            );
            let count = of_camera.iter().filter(|l| l["reason"] == reason).count();
            assert_eq!(
                sample(&metrics, &series),
                Some(count as f64),
                "{series}\n{metrics}"
            );
        }
        assert_eq!(
            sample(
                &metrics,
                &format!("sealcheck_camera_source_up{{camera=\"{name}\"}}")
            ),
            Some(1.0),
            "{metrics}"
        );
    }
    assert_eq!(
        sample(&metrics, "sealcheck_frames_total"),
        Some(lines.len() as f64)
    );
    assert_eq!(sample(&metrics, "sealcheck_source_up"), Some(1.0));
    common::promtool_accepts(&metrics);

    let health = get(addr, "/healthz");
    assert_eq!(health.status, 200, "{}", health.text());
    assert!(!health.text().contains("lost"), "{}", health.text());

    // The archive: each failed frame once, under its camera's folder, in
    // its camera's manifest (hashes verify, the chain holds).
    let archive = dir.join("archive");
    let manifest = |name: &str| -> Vec<String> {
        let mut all = Vec::new();
        for day in std::fs::read_dir(archive.join(name))
            .into_iter()
            .flatten()
            .flatten()
        {
            let text =
                std::fs::read_to_string(day.path().join("manifest.jsonl")).unwrap_or_default();
            all.extend(text.lines().map(str::to_string));
        }
        all
    };
    let fails = |name: &str| -> Vec<&serde_json::Value> {
        cameras[name]
            .iter()
            .filter(|l| l["verdict"] == "fail")
            .collect()
    };
    // What the archive thread could not take in time is counted, not lost.
    let all_fails = fails("top").len() + fails("side").len();
    let skipped = || {
        sample(
            &get(addr, "/metrics").text(),
            "sealcheck_archive_dropped_total{reason=\"queue_full\"}",
        )
        .unwrap_or(0.0) as usize
    };
    wait_until(
        Duration::from_secs(90),
        "the archive to catch up",
        &service,
        || manifest("top").len() + manifest("side").len() + skipped() == all_fails,
    );
    let mut top_level: Vec<String> = std::fs::read_dir(&archive)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    top_level.sort();
    assert_eq!(
        top_level,
        ["side", "top"],
        "nothing outside the cameras' folders"
    );
    for name in ["top", "side"] {
        let entries = manifest(name);
        assert!(!entries.is_empty(), "{name}: no failed frame archived");
        let days: Vec<PathBuf> = std::fs::read_dir(archive.join(name))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert_eq!(days.len(), 1, "{days:?}");
        let mut prev: Option<String> = None;
        for line in &entries {
            let entry: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(entry["result"]["camera"], name, "{line}");
            let seq = entry["result"]["seq"].as_u64().unwrap();
            let result = fails(name)
                .into_iter()
                .find(|l| l["seq"] == seq)
                .unwrap_or_else(|| panic!("{name} #{seq} archived but not a failed result of it"));
            let suffix = format!("_{seq}_{}.jpg", result["reason"].as_str().unwrap());
            let hour = days[0].join(entry["file"].as_str().unwrap().split('/').next().unwrap());
            let frames = std::fs::read_dir(hour)
                .unwrap()
                .flatten()
                .filter(|f| f.file_name().to_string_lossy().ends_with(&suffix))
                .count();
            assert_eq!(frames, 1, "{name} #{seq}: one frame in its folder");
            assert_eq!(
                &entry["result"], result,
                "manifest result differs from the results file"
            );
            for (file, hash) in [("file", "sha256"), ("mask", "mask_sha256")] {
                let bytes = std::fs::read(days[0].join(entry[file].as_str().unwrap())).unwrap();
                assert_eq!(entry[hash].as_str().unwrap(), sha256_hex(&bytes), "{line}");
            }
            assert_eq!(
                entry["prev"].as_str().map(str::to_string),
                prev,
                "{name}'s chain broken at {line}"
            );
            prev = Some(sha256_hex(line.as_bytes()));
        }
    }
    // The page's links reach the camera's folder, and only a camera of the run's.
    let status = status_json(addr);
    for name in ["top", "side"] {
        let reject = status["rejects"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["camera"] == name && !r["image"].is_null())
            .unwrap_or_else(|| panic!("no archived reject of {name}: {:#}", status["rejects"]));
        let image = reject["image"].as_str().unwrap();
        assert!(image.starts_with(&format!("/archive/{name}/")), "{image}");
        let reply = get(addr, image);
        assert_eq!(reply.status, 200, "{image}");
        assert!(reply.body.starts_with(&[0xFF, 0xD8]));
        let day = image.split('/').nth(3).unwrap();
        assert_eq!(
            get(addr, &format!("/archive/{name}/{day}/manifest.jsonl")).status,
            200
        );
        assert_eq!(
            get(addr, &format!("/archive/nope/{day}/manifest.jsonl")).status,
            404
        );
    }
    let unknown = get(addr, "/api/live.jpg?camera=nope");
    assert_eq!(unknown.status, 404);
    assert!(unknown.text().contains("top, side"), "{}", unknown.text());
    service.terminate(Duration::from_secs(30));
}

/// The inner markup of the element with `id` up to its closing `</tag>`
/// (for an element without the same tag nested inside).
fn inner(dom: &str, id: &str, tag: &str) -> String {
    let at = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in:\n{dom}"));
    let from = at + dom[at..].find('>').unwrap() + 1;
    let to = from + dom[from..].find(&format!("</{tag}>")).unwrap();
    dom[from..to].to_string()
}

/// A live camera that never delivers: its pipeline reads files that are not
/// there, so it is missing from the start and rebuilt again and again.
fn camera_that_never_comes(dir: &Path) -> String {
    format!(
        "kind = \"pipeline\"\npipeline = \"multifilesrc location={} caps=image/jpeg,framerate=5/1 ! jpegdec ! videoconvert ! video/x-raw,format=RGB ! appsink name=sink\"\nlive = true",
        dir.join("unplugged/frame_%05d.jpg").display()
    )
}

/// `top` inspects a looping clip while `side` never comes: `/healthz` stays
/// 200 and names `side`, `/api/status` and `/metrics` show it lost and `top`
/// inspecting, each camera has its own live frame, and the page in headless
/// Chromium shows a tile per camera with exactly the figures of an
/// `/api/status` answer it was served (the test records them all), the lost
/// camera's alarm in red on its tile, the yield-and-rejects chart, and
/// `#camera=top` opens top's present view. A screenshot is written for a
/// person to look at (docs/status-page-cameras.png comes from it).
#[test]
fn the_page_shows_a_tile_per_camera_and_names_the_lost_one_while_the_other_inspects() {
    let Some(chromium) = chromium() else { return };
    let _serial = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let cameras = format!(
        "[cameras.top]\n{}\n\n[cameras.side]\n{}\n",
        looping_demo_clip(),
        camera_that_never_comes(dir)
    );
    let config = write_config(dir, &cameras, "[archive]\ndir = \"archive\"", 5.0);
    let mut service = start(&config, &[]);
    let addr = service.status_addr();
    wait_until(
        Duration::from_secs(180),
        "top's results with rejects, side lost",
        &service,
        || {
            // Until the run reports its cameras, the list is one unnamed camera.
            let status = status_json(addr);
            let named = |name: &str| {
                status["cameras"]
                    .as_array()
                    .and_then(|c| c.iter().find(|c| c["name"] == name).cloned())
                    .unwrap_or_default()
            };
            named("top")["fail"].as_u64() >= Some(3) && named("side")["state"] == "lost"
        },
    );

    // Healthy while top inspects; side named.
    let health = get(addr, "/healthz");
    assert_eq!(health.status, 200, "{}", health.text());
    assert!(
        health.text().contains("waiting for camera side since"),
        "{}",
        health.text()
    );
    let status = status_json(addr);
    let (top, side) = (camera(&status, "top"), camera(&status, "side"));
    assert_eq!(
        (&top["state"], &top["up"]),
        (&serde_json::json!("inspecting"), &serde_json::json!(true))
    );
    assert_eq!(
        (&side["up"], &side["pass"], &side["fail"]),
        (
            &serde_json::json!(false),
            &serde_json::json!(0),
            &serde_json::json!(0)
        )
    );
    assert!(side["outages"].as_u64() >= Some(1), "{side:#}");
    assert!(side["lost_since"].is_string(), "{side:#}");
    assert!(
        side["problem"]
            .as_str()
            .is_some_and(|p| p.starts_with("waiting for camera side since")),
        "{side:#}"
    );
    assert_eq!(status["source"]["up"], false, "the station is not whole");
    assert_eq!(status["health"]["ok"], true);
    let metrics = get(addr, "/metrics").text();
    assert_eq!(
        sample(&metrics, "sealcheck_camera_source_up{camera=\"top\"}"),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, "sealcheck_camera_source_up{camera=\"side\"}"),
        Some(0.0),
        "{metrics}"
    );
    assert!(
        sample(
            &metrics,
            "sealcheck_camera_source_outages_total{camera=\"side\"}"
        ) >= Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, "sealcheck_source_up"),
        Some(0.0),
        "{metrics}"
    );

    // Each camera's own live frame: top's comes, side has none.
    wait_until(
        Duration::from_secs(30),
        "top's live frame",
        &service,
        || get(addr, "/api/live.jpg?camera=top").status == 200,
    );
    let frame = get(addr, "/api/live.jpg?camera=top");
    assert!(frame.headers.contains("image/jpeg") && frame.body.starts_with(&[0xFF, 0xD8]));
    assert_eq!(get(addr, "/api/live.jpg?camera=side").status, 204);

    // Every answer the page could be shown while the browser runs.
    let served: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let recorder = {
        let (served, stop) = (Arc::clone(&served), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                served.lock().unwrap().push(status_json(addr));
                // As open tiles do: keep top's frame fresh.
                let _ = get(addr, "/api/live.jpg?camera=top");
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let page = format!("http://{addr}/");
    let dom = browse(chromium, &page, &["--dump-dom"]);
    let screenshot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("status-page-cameras.png");
    let _ = std::fs::remove_file(&screenshot);
    browse(
        chromium,
        &page,
        &[
            &format!("--screenshot={}", screenshot.display()),
            "--window-size=1280,800",
            "--hide-scrollbars",
        ],
    );
    let present = browse(chromium, &format!("{page}#camera=top"), &["--dump-dom"]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    recorder.join().unwrap();

    // Two tiles, in the config's order, in place of the single frame.
    let body = &dom[dom.find("<body").unwrap()..];
    assert!(
        body[..body.find('>').unwrap()].contains("class=\"multi\""),
        "not the cameras' layout"
    );
    let tiles = dom.matches("class=\"tile\"").count() + dom.matches("class=\"tile lost\"").count();
    assert_eq!(tiles, 2, "tiles");
    let at = |name: &str| {
        dom.find(&format!("id=\"tile-{name}\""))
            .unwrap_or_else(|| panic!("no tile of {name}"))
    };
    assert!(at("top") < at("side"), "tiles in the config's order");
    assert!(
        element(&dom, "tile-side").0.contains("lost"),
        "side's tile is not marked lost"
    );
    assert!(
        element(&dom, "live").0.contains("hidden"),
        "the single frame shows beside the tiles"
    );
    let rendered: u64 = dom
        .split("data-snapshot=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("the page rendered no snapshot:\n{dom}"));
    let served = served.lock().unwrap();
    let text_of = |id: &str| element(&dom, id).1;
    let shown_by = |s: &serde_json::Value| -> Vec<String> {
        let mut differences = Vec::new();
        for name in ["top", "side"] {
            let c = camera(s, name);
            let yield_shown = c["yield_pct"]
                .as_f64()
                .map_or("–".to_string(), |y| format!("{y:.1}"));
            for (part, want) in [
                ("pass", c["pass"].to_string()),
                ("fail", c["fail"].to_string()),
                ("yield", yield_shown),
                ("state", c["state"].as_str().unwrap().to_string()),
            ] {
                let id = format!("tile-{name}-{part}");
                if text_of(&id) != want {
                    differences.push(format!("#{id}: {:?}, API {want}", text_of(&id)));
                }
            }
            // One bar per minute with rejects.
            let minutes_with_fails = c["trend"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["fail"].as_u64() > Some(0))
                .count();
            let bars = inner(&dom, &format!("tile-{name}-trend"), "svg")
                .matches("<rect")
                .count();
            if bars != minutes_with_fails {
                differences.push(format!(
                    "{name}'s chart: {bars} bars, API {minutes_with_fails} minutes with rejects"
                ));
            }
        }
        // The lost camera's alarm, in the words the API gave (up to the
        // countdown, which moves between two answers of one snapshot).
        let side_alarm = text_of("tile-side-alarm");
        let since = |text: &str| text.split(" (").next().unwrap_or_default().to_string();
        if camera(s, "side")["problem"].as_str().map(since) != Some(since(&side_alarm)) {
            differences.push(format!(
                "#tile-side-alarm: {side_alarm:?}, API {}",
                camera(s, "side")["problem"]
            ));
        }
        differences
    };
    let same_snapshot: Vec<&serde_json::Value> = served
        .iter()
        .filter(|s| s["snapshot"].as_u64() == Some(rendered))
        .collect();
    assert!(
        same_snapshot.iter().any(|s| shown_by(s).is_empty()),
        "the tiles (snapshot {rendered}) show none of the answers served with it: {:#?}",
        same_snapshot
            .iter()
            .map(|s| shown_by(s))
            .collect::<Vec<_>>()
    );
    let (alarm_tag, alarm_text) = element(&dom, "tile-side-alarm");
    assert!(
        !alarm_tag.contains("hidden") && alarm_tag.contains("class=\"alarm"),
        "{alarm_tag}"
    );
    assert!(
        alarm_text.starts_with("waiting for camera side since"),
        "{alarm_text}"
    );
    assert!(
        element(&dom, "tile-top-alarm").0.contains("hidden"),
        "an alarm on the inspecting camera"
    );
    assert!(
        element(&dom, "tile-top-img").0.contains("src=\"blob:"),
        "no frame on top's tile"
    );
    assert!(
        inner(&dom, "tile-top-trend", "svg").contains("<polyline"),
        "no yield line"
    );
    assert!(
        text_of("source").starts_with("cameras 1/2 up"),
        "{}",
        text_of("source")
    );

    // `#camera=top`: top's present view, its frame large, the tiles away.
    assert!(
        element(&present, "tiles").0.contains("hidden"),
        "tiles beside the present view"
    );
    assert!(!element(&present, "live").0.contains("hidden"));
    assert_eq!(element(&present, "live-camera").1, "top");
    assert!(
        element(&present, "live-img").0.contains("src=\"blob:"),
        "no frame in the present view"
    );
    assert!(!element(&present, "live-back").0.contains("hidden"));

    let png = std::fs::read(&screenshot).expect("chromium wrote no screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "screenshot too small"
    );
    println!(
        "status page screenshot with two cameras: {}",
        screenshot.display()
    );
    assert_eq!(
        service.terminate(Duration::from_secs(30)).code(),
        Some(0),
        "{}",
        service.stderr()
    );
}
