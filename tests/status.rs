//! What operators see, end to end: `sealcheck run` with `[status]` and
//! `[archive]`, checked from outside with real clients: raw HTTP requests,
//! `promtool check metrics` (Debian's `prometheus`) and headless Chromium.
//!
//! ```text
//! test --writes--> config + clip --> sealcheck run --> results.jsonl, archive/
//!   \--HTTP (loopback, port chosen by the OS)--> /metrics /healthz /api/status /archive/... /
//!   \--promtool, chromium (child processes, bounded in time)
//! ```

use crate::common;

use common::http::get;
#[cfg(feature = "fault-injection")]
use common::http::request;
use common::repo;
use common::status_page::{
    browse, chromium, element, looping_demo_clip, sample, start, status_config, status_json,
    wait_until,
};

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[cfg(feature = "fault-injection")]
use sealcheck::archive::sha256_hex;

/// A config in `dir` with `source` (the `[source]` body) and `sections`.
fn write_config(dir: &Path, source: &str, sections: &str, stall_timeout_s: f64) -> PathBuf {
    status_config(
        dir,
        &format!("[source]\n{source}"),
        sections,
        stall_timeout_s,
    )
}

fn results(dir: &Path) -> Vec<(String, serde_json::Value)> {
    std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| (l.to_string(), serde_json::from_str(l).unwrap()))
        .collect()
}

/// Every file under `dir`, relative, with its size.
fn files_under(dir: &Path) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(path),
                Ok(m) => {
                    out.insert(
                        path.strip_prefix(dir).unwrap().display().to_string(),
                        m.len(),
                    );
                }
                Err(_) => {}
            }
        }
    }
    out
}

#[cfg(not(feature = "fault-injection"))]
#[test]
fn demo_clip_prefix_archives_every_failed_frame_and_metrics_match_the_results_file() {
    common::skipped(format_args!(
        "needs `--features fault-injection` (the run is held after its frames by a stalled inference)"
    ));
}

/// The clip's first 30 frames, paced at 5 frames/s like a camera (the
/// archive thread runs at the lowest CPU priority and takes what inspection
/// leaves over), with inference held at frame 24 (fault injection), so the
/// process stays up with exactly 24 results: the archive,
/// the manifest, /metrics (and promtool), /healthz's 503 and the request
/// limits are all checked against a run that is over but still answering.
#[cfg(feature = "fault-injection")]
#[test]
fn demo_clip_prefix_archives_every_failed_frame_and_metrics_match_the_results_file() {
    const RESULTS: usize = 24;
    let _serial = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    common::clip_prefix(dir, "clip", 30);
    let source = format!(
        "kind = \"pipeline\"\npipeline = \"multifilesrc location={} stop-index=29 caps=image/jpeg,framerate=5/1 ! jpegdec ! videoconvert ! video/x-raw,format=RGB ! identity sync=true ! appsink name=sink\"\noverflow = \"block\"",
        dir.join("clip/frame_%05d.jpg").display()
    );
    let config = write_config(
        dir,
        &source,
        "[archive]\ndir = \"archive\"\nkeep = \"fail\"\nformat = \"jpeg\"",
        1.0,
    );
    let mut service = start(&config, &[("SEALCHECK_FAULT_STALL_INFER_AFTER", "24")]);
    let addr = service.status_addr();
    wait_until(Duration::from_secs(180), "24 results", &service, || {
        results(dir).len() >= RESULTS
    });
    let lines = results(dir);
    assert_eq!(lines.len(), RESULTS);
    let fails: Vec<&(String, serde_json::Value)> = lines
        .iter()
        .filter(|(_, v)| v["verdict"] == "fail")
        .collect();
    assert!(
        fails.len() >= 5,
        "the clip prefix has failed seals: {}",
        fails.len()
    );

    // Exactly one frame and one mask per failed frame, nothing for passes.
    let archive = dir.join("archive");
    let manifest_lines = || -> Vec<String> {
        let mut all = Vec::new();
        for day in std::fs::read_dir(&archive).into_iter().flatten().flatten() {
            let text =
                std::fs::read_to_string(day.path().join("manifest.jsonl")).unwrap_or_default();
            all.extend(text.lines().map(str::to_string));
        }
        all
    };
    wait_until(
        Duration::from_secs(90),
        "the archive to catch up",
        &service,
        || manifest_lines().len() >= fails.len(),
    );
    let files = files_under(&archive);
    let frames: Vec<&String> = files.keys().filter(|f| f.ends_with(".jpg")).collect();
    let masks: Vec<&String> = files.keys().filter(|f| f.ends_with("_mask.png")).collect();
    assert_eq!(frames.len(), fails.len(), "{files:#?}");
    assert_eq!(masks.len(), fails.len(), "{files:#?}");
    for (_, fail) in &fails {
        let suffix = format!("_{}_{}.jpg", fail["seq"], fail["reason"].as_str().unwrap());
        assert_eq!(
            frames.iter().filter(|f| f.ends_with(&suffix)).count(),
            1,
            "no single archived frame for {fail}"
        );
    }

    // The manifest: hashes verify, lines chain, each carries its result line.
    let manifest = manifest_lines();
    assert_eq!(manifest.len(), fails.len());
    let mut prev: Option<String> = None;
    for line in &manifest {
        let entry: serde_json::Value = serde_json::from_str(line).unwrap();
        let day = archive.read_dir().unwrap().flatten().next().unwrap().path();
        for (file, hash) in [("file", "sha256"), ("mask", "mask_sha256")] {
            let bytes = std::fs::read(day.join(entry[file].as_str().unwrap())).unwrap();
            assert_eq!(entry[hash].as_str().unwrap(), sha256_hex(&bytes), "{line}");
        }
        assert_eq!(
            entry["prev"].as_str().map(str::to_string),
            prev,
            "chain broken at {line}"
        );
        prev = Some(sha256_hex(line.as_bytes()));
        let seq = entry["result"]["seq"].as_u64().unwrap() as usize;
        assert_eq!(
            entry["result"], lines[seq].1,
            "manifest result differs from the results file"
        );
    }

    // /metrics counts equal the results file's, and promtool accepts them.
    let metrics = get(addr, "/metrics");
    assert_eq!(metrics.status, 200);
    let text = metrics.text();
    assert_eq!(
        sample(&text, "sealcheck_frames_total"),
        Some(RESULTS as f64),
        "{text}"
    );
    for reason in [
        "ok",
        "defect",
        "no_seal",
        "seal_area",
        "error",
        "not_inspected",
    ] {
        let count = lines.iter().filter(|(_, v)| v["reason"] == reason).count();
        let verdict = if reason == "ok" { "pass" } else { "fail" };
        let series =
            format!("sealcheck_verdicts_total{{verdict=\"{verdict}\",reason=\"{reason}\"}}");
        assert_eq!(
            sample(&text, &series),
            Some(count as f64),
            "{series}\n{text}"
        );
    }
    assert_eq!(
        sample(&text, "sealcheck_verdict_latency_seconds_count"),
        Some(RESULTS as f64)
    );
    assert_eq!(
        sample(&text, "sealcheck_archive_files_total"),
        Some(fails.len() as f64)
    );
    assert!(
        text.contains("sealcheck_model_info{role=\"segmentation\",file=\"seg.onnx\",sha256=\"")
    );
    assert!(text.contains("sealcheck_build_info{version=\""));
    let openmetrics = request(
        addr,
        "GET",
        "/metrics",
        "Accept: application/openmetrics-text; version=1.0.0\r\n",
    );
    assert!(openmetrics.text().ends_with("# EOF\n"));
    common::promtool_accepts(&text);

    // The pipeline is stuck: /healthz says so, with the reason, while every
    // other endpoint still answers.
    wait_until(Duration::from_secs(20), "/healthz 503", &service, || {
        get(addr, "/healthz").status == 503
    });
    let health = get(addr, "/healthz").text();
    assert!(health.contains("stalled"), "{health}");
    let status = status_json(addr);
    assert_eq!(status["health"]["ok"], false);
    assert_eq!(status["shift"]["frames"], RESULTS);
    assert_eq!(status["shift"]["fail"], fails.len());
    let reject = &status["rejects"][0];
    let image = get(addr, reject["image"].as_str().unwrap());
    assert_eq!(image.status, 200, "{reject}");
    assert!(image.headers.contains("image/jpeg") && image.body.starts_with(&[0xFF, 0xD8]));
    assert_eq!(get(addr, reject["mask"].as_str().unwrap()).status, 200);

    // Leaving the archive folder, in every spelling, is 404; nothing writes.
    std::fs::write(dir.join("secret.jpg"), b"not for the web").unwrap();
    let day = reject["image"]
        .as_str()
        .unwrap()
        .split('/')
        .nth(2)
        .unwrap()
        .to_string();
    for target in [
        "/archive/../sealcheck.toml".to_string(),
        "/archive/..%2Fsealcheck.toml".to_string(),
        "/archive/%2e%2e/secret.jpg".to_string(),
        format!("/archive/{day}/00/..%2F..%2F..%2Fsecret.jpg"),
        format!("/archive/{day}/../../secret.jpg"),
        format!("/archive/{day}%2F00%2Fx.jpg"),
        format!("/archive/{}/secret.jpg", dir.display()),
        "/archive//etc/passwd".to_string(),
        "/archive/%2Fetc%2Fpasswd".to_string(),
        "/archive/".to_string(),
        "/../sealcheck.toml".to_string(),
        "/nothing-here".to_string(),
    ] {
        let reply = get(addr, &target);
        assert_eq!(reply.status, 404, "{target}: {}", reply.text());
        assert!(!reply.text().contains("not for the web"));
    }
    assert_eq!(
        request(addr, "POST", "/api/status", "Content-Length: 0\r\n").status,
        405
    );
    assert_eq!(
        request(addr, "DELETE", reject["image"].as_str().unwrap(), "").status,
        405
    );
    let big = request(addr, "GET", "/api/status", "Content-Length: 100000\r\n");
    assert_eq!(big.status, 413, "{}", big.text());
    let long = get(addr, &format!("/api/status?{}", "x".repeat(4000)));
    assert_eq!(long.status, 414);
    assert!(
        get(addr, reject["image"].as_str().unwrap()).status == 200,
        "still serving"
    );
}

/// A live test source keeping every frame as PNG (snow does not compress)
/// into a 1 MiB archive: sampled every 50 ms, the folder never passes the
/// limit, the two old hours planted before the run go first, and what does
/// not fit is counted as dropped.
#[test]
fn archive_stays_under_max_mib_with_a_live_source_oldest_hours_first() {
    let _serial = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let archive = dir.join("archive");
    for hour in ["05", "06"] {
        let h = archive.join("2020-01-01").join(hour);
        std::fs::create_dir_all(&h).unwrap();
        std::fs::write(h.join("old.png"), vec![0u8; 200 << 10]).unwrap();
    }
    std::fs::write(archive.join("2020-01-01/manifest.jsonl"), b"{}\n").unwrap();
    let config = write_config(
        dir,
        &(common::test_camera("snow", 15) + "overflow = \"drop\""),
        "[archive]\ndir = \"archive\"\nkeep = \"all\"\nformat = \"png\"\nmax_mib = 1\nmin_free_mib = 0",
        5.0,
    );
    let mut service = start(&config, &[]);
    let addr = service.status_addr();
    let limit = 1u64 << 20;
    let mut largest = 0u64;
    let mut old_gone_at = None;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(120);
    loop {
        let files = files_under(&archive);
        let total: u64 = files.values().sum();
        largest = largest.max(total);
        assert!(
            total <= limit,
            "archive at {total} bytes > {limit}: {files:#?}"
        );
        let new_frames = files
            .keys()
            .filter(|f| !f.starts_with("2020-") && f.ends_with("_mask.png"))
            .count();
        if old_gone_at.is_none() && !archive.join("2020-01-01").exists() {
            old_gone_at = Some(new_frames);
        }
        if old_gone_at.is_none() {
            // Hour 06 gone implies hour 05 gone (06 is read first: 05 goes before it).
            assert!(
                archive.join("2020-01-01/06").exists() || !archive.join("2020-01-01/05").exists(),
                "hour 06 went before hour 05"
            );
        }
        let metrics = get(addr, "/metrics").text();
        let dropped = sample(
            &metrics,
            "sealcheck_archive_dropped_total{reason=\"over_limit\"}",
        )
        .unwrap_or(0.0);
        if dropped >= 3.0 && old_gone_at.is_some() {
            assert!(sample(&metrics, "sealcheck_archive_files_total").unwrap() >= 1.0);
            let archived = sample(&metrics, "sealcheck_archive_bytes").unwrap() as u64;
            assert!(archived <= limit);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no drops after 120 s:\n{metrics}\n{}",
            service.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        largest > limit / 2,
        "the archive never filled up: {largest}"
    );
    let status = status_json(addr);
    assert!(status["archive"]["dropped"]["over_limit"].as_u64().unwrap() >= 3);
    assert!(
        service.stderr().contains("oldest hour deleted"),
        "{}",
        service.stderr()
    );
    assert_eq!(
        service.terminate(Duration::from_secs(30)).code(),
        Some(0),
        "{}",
        service.stderr()
    );
}

/// On a touch screen nobody hovers: with every frame failing, the page writes
/// out over the frame what /healthz says.
#[cfg(feature = "fault-injection")]
#[test]
fn status_page_writes_out_why_the_line_is_not_ok() {
    let Some(chromium) = chromium() else { return };
    let _serial = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let source = &(common::test_camera("smpte", 10) + "live = true");
    let config = write_config(tmp.path(), source, "", 1.0);
    let mut service = start(&config, &[("SEALCHECK_FAULT_FAIL_INFER_AFTER", "3")]);
    let addr = service.status_addr();
    // (503 comes first while the models load: wait for the engine's failure.)
    wait_until(
        Duration::from_secs(60),
        "/healthz: failing",
        &service,
        || {
            let reply = get(addr, "/healthz");
            reply.status == 503 && reply.text().contains("every frame has failed")
        },
    );
    let dom = browse(chromium, &format!("http://{addr}/"), &["--dump-dom"]);
    let (tag, text) = element(&dom, "alarm");
    assert!(!tag.contains("hidden"), "{tag}");
    assert!(text.contains("every frame has failed in segment"), "{text}");
    // Run without systemd's watchdog: the page does not promise a restart.
    assert!(text.contains("nothing restarts it"), "{text}");
    service.terminate(Duration::from_secs(60));
}

#[cfg(not(feature = "fault-injection"))]
#[test]
fn status_page_writes_out_why_the_line_is_not_ok() {
    common::skipped(format_args!(
        "needs `cargo test --features fault-injection` (the engine failure hook is compiled out)"
    ));
}

/// A looping clip paced at 5 frames/s, the page open in headless Chromium:
/// the counters in its DOM are exactly those of the `/api/status` snapshot it
/// rendered (the test records every snapshot while the browser runs), the
/// live frame arrived, and a screenshot is written for a person to look at.
/// Without `[shadow]`, `/api/status` says `"shadow": null` and the page
/// shows no shadow panel.
#[test]
fn status_page_in_headless_chromium_shows_the_counters_of_api_status() {
    let Some(chromium) = chromium() else { return };
    let _serial = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let config = write_config(
        dir,
        &looping_demo_clip(),
        "[archive]\ndir = \"archive\"",
        5.0,
    );
    let mut service = start(&config, &[]);
    let addr = service.status_addr();
    wait_until(
        Duration::from_secs(180),
        "results with rejects",
        &service,
        || {
            status_json(addr)["rejects"]
                .as_array()
                .is_some_and(|r| r.len() >= 3)
        },
    );
    // As an open page does: ask for the live frame until one is there, so the
    // browser (whose timers run on virtual time) finds one at once.
    wait_until(Duration::from_secs(30), "a live frame", &service, || {
        get(addr, "/api/live.jpg").status == 200
    });

    // Record every snapshot the page could be shown while the browser runs.
    let snapshots: Arc<Mutex<BTreeMap<u64, serde_json::Value>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let recorder = {
        let (snapshots, stop) = (Arc::clone(&snapshots), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let s = status_json(addr);
                snapshots
                    .lock()
                    .unwrap()
                    .insert(s["snapshot"].as_u64().unwrap(), s);
                let _ = get(addr, "/api/live.jpg");
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let browse = |extra: &[&str]| browse(chromium, &format!("http://{addr}/"), extra);
    let dom = browse(&["--dump-dom"]);
    let screenshot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("status-page.png");
    let _ = std::fs::remove_file(&screenshot);
    browse(&[
        &format!("--screenshot={}", screenshot.display()),
        "--window-size=1280,800",
        "--hide-scrollbars",
    ]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    recorder.join().unwrap();

    let text_of = |id: &str| element(&dom, id).1;
    assert!(
        element(&dom, "alarm").0.contains("hidden"),
        "the alarm shows on a healthy line: {:?}",
        element(&dom, "alarm")
    );
    let rendered: u64 = dom
        .split("data-snapshot=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("the page rendered no snapshot:\n{dom}"));
    let snapshots = snapshots.lock().unwrap();
    let shown = snapshots.get(&rendered).unwrap_or_else(|| {
        panic!(
            "snapshot {rendered} not among those served: {:?}",
            snapshots.keys()
        )
    });
    for (id, value) in [
        ("shift-frames", &shown["shift"]["frames"]),
        ("shift-pass", &shown["shift"]["pass"]),
        ("shift-fail", &shown["shift"]["fail"]),
        ("window-seals", &shown["window"]["seals"]),
        ("window-pass", &shown["window"]["pass"]),
        ("window-fail", &shown["window"]["fail"]),
    ] {
        assert_eq!(
            text_of(id),
            value.to_string(),
            "#{id} differs from /api/status"
        );
    }
    for (reason, n) in shown["window"]["by_reason"].as_object().unwrap() {
        if reason != "ok" && reason != "late" {
            assert_eq!(
                text_of(&format!("reason-{reason}")),
                n.to_string(),
                "fails for {reason}"
            );
        }
    }
    assert!(
        shown["shadow"].is_null(),
        "no [shadow]: {}",
        shown["shadow"]
    );
    assert!(
        element(&dom, "shadow").0.contains("hidden"),
        "a shadow panel without a shadow: {:?}",
        element(&dom, "shadow")
    );
    assert_eq!(
        dom.matches("class=\"reject\"").count(),
        shown["rejects"].as_array().unwrap().len(),
        "filmstrip"
    );
    assert!(
        dom.contains("id=\"live-img\"") && dom.contains("src=\"blob:"),
        "no live frame reached the page"
    );
    let png = std::fs::read(&screenshot).expect("chromium wrote no screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "screenshot too small"
    );
    println!("status page screenshot: {}", screenshot.display());
    let metrics = get(addr, "/metrics").text();
    assert!(sample(&metrics, "sealcheck_live_frames_total").unwrap() >= 1.0);
    assert_eq!(
        service.terminate(Duration::from_secs(30)).code(),
        Some(0),
        "{}",
        service.stderr()
    );
}

/// The demo clip's frames three good seals to one defective, looped at 5
/// frames/s like a camera, from a copy in `dir`: the swapped-class shadow
/// flips more passes to fails than the other way round, so a page that
/// mixed up the two directions would show it.
fn three_good_seals_to_one_defective(dir: &Path) -> String {
    let demo = repo().join("samples/demo_clip");
    let labels = std::fs::read_to_string(demo.join("labels.jsonl")).unwrap();
    let (mut good, mut defective) = (Vec::new(), Vec::new());
    for line in labels.lines() {
        let label: serde_json::Value = serde_json::from_str(line).unwrap();
        let frame = label["frame"].as_u64().unwrap();
        match label["label"].as_str() {
            Some("ok") => good.push(frame),
            _ => defective.push(frame),
        }
    }
    let order: Vec<u64> = good
        .chunks_exact(3)
        .zip(defective)
        .flat_map(|(three, one)| three.iter().copied().chain([one]))
        .collect();
    let clip = dir.join("clip");
    std::fs::create_dir_all(&clip).unwrap();
    for (i, frame) in order.iter().enumerate() {
        std::fs::copy(
            demo.join(format!("frame_{frame:05}.jpg")),
            clip.join(format!("frame_{i:05}.jpg")),
        )
        .unwrap();
    }
    format!(
        "kind = \"pipeline\"\npipeline = \"multifilesrc location={} loop=true stop-index={} caps=image/jpeg,framerate=5/1 ! jpegdec ! videoconvert ! video/x-raw,format=RGB ! identity sync=true ! appsink name=sink\"\noverflow = \"drop\"",
        clip.join("frame_%05d.jpg").display(),
        order.len() - 1
    )
}

/// The shadow's figures of one `/api/status` answer hold together.
fn check_shadow_figures(shadow: &serde_json::Value) {
    assert_eq!(shadow["state"], "running", "{shadow:#}");
    assert!(shadow["problem"].is_null(), "{shadow:#}");
    let (start, window) = (&shadow["since_start"], &shadow["last_1000"]);
    let count = |v: &serde_json::Value| v.as_u64().unwrap_or_else(|| panic!("{shadow:#}"));
    assert_eq!(
        count(&window["compared"]),
        count(&start["compared"]).min(1000),
        "{shadow:#}"
    );
    for span in [start, window] {
        let compared = count(&span["compared"]);
        let flips = ["pass_to_fail", "fail_to_pass"].map(|d| count(&span["flips"][d]));
        assert!(flips[0] + flips[1] <= compared, "{shadow:#}");
        if compared > 0 {
            let agreement = span["agreement"].as_f64().unwrap();
            let expected = 1.0 - (flips[0] + flips[1]) as f64 / compared as f64;
            assert!((agreement - expected).abs() < 1e-9, "{shadow:#}");
        }
        // Only judged frames are compared, each under production's reason.
        let by_reason = span["by_reason"].as_object().unwrap();
        let sum = |key: &str| by_reason.values().map(|r| count(&r[key])).sum::<u64>();
        assert_eq!(
            [sum("compared"), sum("pass_to_fail"), sum("fail_to_pass")],
            [compared, flips[0], flips[1]],
            "{shadow:#}"
        );
    }
}

/// Where the shadow panel's figures in `dom` differ from those of the
/// `/api/status` shadow object `shadow`; empty when it shows that answer.
fn shadow_panel_differences(dom: &str, shadow: &serde_json::Value) -> Vec<String> {
    let text_of = |id: &str| element(dom, id).1;
    let mut differences = Vec::new();
    let mut exact = vec![
        ("shadow-skipped".to_string(), shadow["skipped"].to_string()),
        (
            "shadow-failures".to_string(),
            shadow["failures"].to_string(),
        ),
    ];
    // (cell, value, decimals shown)
    let mut rounded: Vec<(String, Option<f64>, i32)> = Vec::new();
    for span in ["since_start", "last_1000"] {
        let s = &shadow[span];
        let id = |key: &str| format!("shadow-{span}-{key}");
        exact.push((id("compared"), s["compared"].to_string()));
        for direction in ["pass_to_fail", "fail_to_pass"] {
            exact.push((id(direction), s["flips"][direction].to_string()));
        }
        rounded.push((
            id("agreement"),
            s["agreement"].as_f64().map(|a| a * 100.0),
            2,
        ));
        rounded.push((id("p99"), s["p99_abs_delta_defect_prob"].as_f64(), 3));
        let iou = text_of(&id("iou"));
        let (mean, worst) = iou.split_once(" / ").unwrap_or((&iou, ""));
        for (text, key) in [(mean, "mask_iou_mean"), (worst, "mask_iou_worst")] {
            if !shown_as(text, s[key].as_f64(), 3) {
                differences.push(format!("#{} {key}: {text:?}, API {}", id("iou"), s[key]));
            }
        }
    }
    for (id, want) in exact {
        let got = text_of(&id);
        if got != want {
            differences.push(format!("#{id}: {got:?}, API {want}"));
        }
    }
    for (id, want, decimals) in rounded {
        let got = text_of(&id);
        if !shown_as(&got, want, decimals) {
            differences.push(format!("#{id}: {got:?}, API {want:?}"));
        }
    }
    differences
}

/// Whether `text` shows `value` to `decimals` places ("–" for none). Compared
/// as numbers: JavaScript and Rust round a tie differently.
fn shown_as(text: &str, value: Option<f64>, decimals: i32) -> bool {
    match (text.parse::<f64>(), value) {
        (Ok(shown), Some(v)) => (shown - v).abs() <= 0.5 * 10f64.powi(-decimals) + 1e-9,
        (Err(_), None) => text == "–",
        _ => false,
    }
}

/// A `[shadow]` whose classifier has its classes swapped, beside production
/// on a live source with good and defective seals: `/api/status`'s shadow
/// is running with flips both ways that hold together with what was
/// compared, and the page in headless Chromium shows its panel with the
/// figures of an answer the test saw served while the browser ran (the
/// test records them all), flips highlighted, and the shadow's own
/// classifier id. A screenshot is written for a person to look at.
#[test]
fn status_page_shows_the_shadow_panel_with_the_flips_of_api_status() {
    let Some(chromium) = chromium() else { return };
    let _serial = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let swapped = dir.join("cls_swapped.onnx");
    common::swap_classes(&swapped);
    let shadow_section = format!(
        "[shadow]\nclassifier = \"{}\"\nevery = 1",
        swapped.display()
    );
    let source = three_good_seals_to_one_defective(dir);
    let config = write_config(dir, &source, &shadow_section, 5.0);
    let mut service = start(&config, &[]);
    let addr = service.status_addr();
    // Both ways: good seals (production passes, the shadow fails) and
    // defective ones (the other way round), and by then the two apart.
    wait_until(
        Duration::from_secs(180),
        "the shadow to flip verdicts both ways, more passes than fails",
        &service,
        || {
            let start = &status_json(addr)["shadow"]["since_start"];
            let flips = ["pass_to_fail", "fail_to_pass"].map(|d| start["flips"][d].as_u64());
            start["compared"].as_u64() > Some(0)
                && flips[1] > Some(0)
                && flips[0] >= flips[1].map(|n| n + 3)
        },
    );
    let status = status_json(addr);
    check_shadow_figures(&status["shadow"]);

    // Every shadow answer the page could be shown while the browser runs.
    let served: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let recorder = {
        let (served, stop) = (Arc::clone(&served), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let shadow = status_json(addr)["shadow"].clone();
                let mut served = served.lock().unwrap();
                if served.last() != Some(&shadow) {
                    served.push(shadow);
                }
                drop(served);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let dom = browse(chromium, &format!("http://{addr}/"), &["--dump-dom"]);
    let screenshot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("status-page-shadow.png");
    let _ = std::fs::remove_file(&screenshot);
    browse(
        chromium,
        &format!("http://{addr}/"),
        &[
            &format!("--screenshot={}", screenshot.display()),
            "--window-size=1280,800",
            "--hide-scrollbars",
        ],
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    recorder.join().unwrap();
    let served = served.lock().unwrap();
    for shadow in served.iter() {
        check_shadow_figures(shadow);
    }

    let (tag, _) = element(&dom, "shadow");
    assert!(!tag.contains("hidden"), "no shadow panel: {tag}");
    let text_of = |id: &str| element(&dom, id).1;
    let shadow = &status["shadow"];
    assert_eq!(text_of("shadow-state"), "running");
    assert!(element(&dom, "shadow-problem").0.contains("hidden"));
    assert_eq!(
        text_of("shadow-engine"),
        format!("on {}", shadow["engine"].as_str().unwrap())
    );
    assert_eq!(text_of("shadow-every"), "1");
    // The shadow's own classifier, not production's; the same segmentation.
    let production_id = |role: &str| {
        status["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == role)
            .unwrap_or_else(|| panic!("no {role} in {}", status["models"]))["id"]
            .clone()
    };
    assert_eq!(
        text_of("shadow-cls"),
        shadow["models"]["classifier"].as_str().unwrap()
    );
    assert_ne!(shadow["models"]["classifier"], production_id("classifier"));
    assert_eq!(
        text_of("shadow-seg"),
        production_id("segmentation").as_str().unwrap()
    );

    // The figures are those of one answer served while the browser ran.
    let shown = text_of("shadow-since_start-compared");
    let same_count: Vec<&serde_json::Value> = served
        .iter()
        .filter(|s| shown.parse().ok() == s["since_start"]["compared"].as_u64())
        .collect();
    assert!(
        same_count
            .iter()
            .any(|s| shadow_panel_differences(&dom, s).is_empty()),
        "the shadow panel (since_start.compared {shown}) shows none of the answers served (since_start.compared: {:?}); those with its count differ in: {:#?}",
        served
            .iter()
            .map(|s| s["since_start"]["compared"].as_u64())
            .collect::<Vec<_>>(),
        same_count
            .iter()
            .map(|s| shadow_panel_differences(&dom, s))
            .collect::<Vec<_>>()
    );
    for span in ["since_start", "last_1000"] {
        for direction in ["pass_to_fail", "fail_to_pass"] {
            let id = format!("shadow-{span}-{direction}");
            let (tag, text) = element(&dom, &id);
            let flips: u64 = text.parse().unwrap_or_else(|_| panic!("#{id}: {text:?}"));
            assert_eq!(tag.contains("flip"), flips > 0, "#{id} highlighted: {tag}");
        }
    }
    // The answers only grow: the one shown has both flips the wait saw.
    assert!(
        text_of("shadow-since_start-pass_to_fail")
            .parse::<u64>()
            .unwrap()
            > 0
    );
    assert!(
        text_of("shadow-since_start-fail_to_pass")
            .parse::<u64>()
            .unwrap()
            > 0
    );
    // The shadow runs production's segmentation on production's tensors.
    let start = &shadow["since_start"];
    assert!(
        start["mask_iou_mean"].as_f64().unwrap() > 0.99,
        "masks differ: {start:#}"
    );

    let png = std::fs::read(&screenshot).expect("chromium wrote no screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "screenshot too small"
    );
    println!(
        "status page screenshot with the shadow: {}",
        screenshot.display()
    );
    let metrics = get(addr, "/metrics").text();
    assert!(sample(&metrics, "sealcheck_shadow_frames_total").unwrap() >= 1.0);
    assert_eq!(
        service.terminate(Duration::from_secs(30)).code(),
        Some(0),
        "{}",
        service.stderr()
    );
}

/// `[archive]` applies on reload: off (`keep = "none"`) at start, every frame
/// after a SIGHUP with `keep = "all"`, nothing new after one that removes
/// the section.
#[test]
fn archive_settings_apply_on_reload() {
    let _serial = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let source = &(common::test_camera("ball", 10) + "overflow = \"drop\"");
    let archive = dir.join("archive");
    let frames = || {
        files_under(&archive)
            .keys()
            .filter(|f| f.ends_with(".png") && !f.ends_with("_mask.png"))
            .count()
    };
    let config = write_config(
        dir,
        source,
        "[archive]\ndir = \"archive\"\nkeep = \"none\"\nformat = \"png\"",
        5.0,
    );
    let mut service = start(&config, &[]);
    let addr = service.status_addr();
    wait_until(Duration::from_secs(120), "results", &service, || {
        results(dir).len() >= 5
    });
    assert_eq!(frames(), 0, "keep = \"none\" archived frames");

    write_config(
        dir,
        source,
        "[archive]\ndir = \"archive\"\nkeep = \"all\"\nformat = \"png\"",
        5.0,
    );
    let _ = Command::new("kill")
        .arg("-HUP")
        .arg(service.child.id().to_string())
        .status();
    wait_until(
        Duration::from_secs(60),
        "archived frames after the reload",
        &service,
        || frames() >= 3,
    );
    assert_eq!(status_json(addr)["archive"]["keep"], "all");

    write_config(dir, source, "", 5.0);
    let _ = Command::new("kill")
        .arg("-HUP")
        .arg(service.child.id().to_string())
        .status();
    wait_until(
        Duration::from_secs(30),
        "the reload that removes [archive]",
        &service,
        || status_json(addr)["archive"].is_null(),
    );
    // What was queued before the reload may still land; then nothing more.
    std::thread::sleep(Duration::from_secs(1));
    let settled = frames();
    let results_then = results(dir).len();
    wait_until(Duration::from_secs(60), "more results", &service, || {
        results(dir).len() >= results_then + 5
    });
    assert_eq!(
        frames(),
        settled,
        "frames archived after [archive] was removed"
    );
    assert_eq!(
        service.terminate(Duration::from_secs(30)).code(),
        Some(0),
        "{}",
        service.stderr()
    );
}

/// A client that never finishes its headers, or holds connections open
/// (idle from the start or after an answer), is cut off (`status::serve`: 5 s
/// for the headers, 64 connections at most), while other clients are still
/// answered. Against a server without these
/// limits the stalled connection stays open and the read below times out.
#[test]
fn slow_or_idle_clients_are_cut_off_and_others_still_served() {
    let _serial = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let config = write_config(
        dir,
        &(common::test_camera("smpte", 5) + "overflow = \"drop\""),
        "",
        5.0,
    );
    let mut service = start(&config, &[]);
    let addr = service.status_addr();
    wait_until(
        Duration::from_secs(120),
        "the page answers",
        &service,
        || get(addr, "/healthz").status == 200,
    );

    // Half a request: the headers never end.
    let mut stalled = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    write!(stalled, "GET /api/status HTTP/1.1\r\nHost: {addr}\r\n").unwrap();
    stalled
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let opened = Instant::now();
    // Idle connections up to the limit (the stalled one holds one slot).
    let idle: Vec<TcpStream> = (0..63)
        .map(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap())
        .collect();
    // One more is closed at once, without an answer.
    let mut extra = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut buf = [0u8; 64];
    let closed = matches!(extra.read(&mut buf), Ok(0) | Err(_));
    assert!(
        closed && opened.elapsed() < Duration::from_secs(4),
        "the 65th connection was not closed at once"
    );

    // The stalled client is cut off after the header timeout, unanswered.
    let mut got = Vec::new();
    let _ = stalled.read_to_end(&mut got);
    let waited = opened.elapsed();
    assert!(
        got.is_empty() || String::from_utf8_lossy(&got).starts_with("HTTP/1.1 408"),
        "a request whose headers never ended was answered: {}",
        String::from_utf8_lossy(&got)
    );
    assert!(
        (Duration::from_secs(4)..Duration::from_secs(15)).contains(&waited),
        "the stalled connection was closed after {waited:?}, not after the 5 s header timeout"
    );
    // The idle ones were cut off with it (or go now), so new clients are
    // served again.
    drop(idle);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(get(addr, "/healthz").status, 200);
    assert!(
        service.stderr().contains("too many open connections"),
        "{}",
        service.stderr()
    );

    // A kept-alive connection idle after its answer goes the same way.
    let mut kept = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(kept, "GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    let answered = loop {
        let n = kept.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before answering");
        reply.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&reply).into_owned();
        if let Some(split) = text.find("\r\n\r\n") {
            let length: usize = text[..split]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .expect("a Content-Length");
            if reply.len() >= split + 4 + length {
                assert!(text.starts_with("HTTP/1.1 200"), "{text}");
                break Instant::now();
            }
        }
    };
    let closed = matches!(kept.read(&mut chunk), Ok(0) | Err(_));
    let idled = answered.elapsed();
    assert!(
        closed && (Duration::from_secs(4)..Duration::from_secs(15)).contains(&idled),
        "a kept-alive connection idled {idled:?} (closed: {closed}), not the 5 s header timeout"
    );

    assert_eq!(
        service.terminate(Duration::from_secs(30)).code(),
        Some(0),
        "{}",
        service.stderr()
    );
}
