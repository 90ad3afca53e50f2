//! What maintenance and operators see of a multi-cavity machine, end to
//! end, and the status page from a phone to a desktop screen: `sealcheck
//! run` on the demo's 2x3 cavity clip (`samples/demo_cavities`, looped like
//! a camera) with `[source.layout]` and `[status]`, checked from outside:
//! `/api/status`'s `cavities` and `/metrics`' `sealcheck_cavity_results_total`
//! against the result lines, and the page in headless Chromium at a phone's
//! 390 px, a tablet's 820 px and a 1920 px screen, with the cavity view.
//!
//! ```text
//! test --writes--> config --> sealcheck run --> results.jsonl (cavities, reject)
//!   \--HTTP (loopback)--> /api/status cameras[0].cavities  /metrics {cavity=}  /api/live.jpg (x-sealcheck-reject-mask)
//!   \--chromium (DevTools protocol over a pipe: the device's width, JavaScript measures the page)
//! ```
//!
//! Chromium is driven through its DevTools protocol (`--remote-debugging-pipe`)
//! rather than `--window-size`: a headless window is never narrower than
//! 500 px, and only the device emulation gives a phone's viewport (its
//! `<meta name="viewport">` honoured, as on the phone).

use crate::common;

use common::http::get;
use common::status_page::{chromium, looping_sample, start, status_json, wait_until};
use common::{Sealcheck, repo};

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The demo machine's 2x3 tool, as `samples/demo_cavities/README.md` gives it.
const LAYOUT: &str =
    "rows = 2\ncols = 3\nfirst = [320, 180]\npitch = [640, 360]\nsize = [600, 340]\nmargin = 10";

/// The widths the page must read well at: a phone, a tablet upright, a
/// desktop screen (width, height, device pixel ratio, mobile).
const SCREENS: [(u32, u32, f64, bool); 3] = [
    (390, 844, 3.0, true),
    (820, 1180, 2.0, true),
    (1920, 1080, 1.0, false),
];

/// The demo cavity clip (80 cycles) looped at one cycle a second, like a
/// machine's camera, with `layout` after its `[source]` lines.
fn looping_cavity_clip(layout: &str) -> String {
    format!("{}\n{layout}", looping_sample("demo_cavities", 80, 1))
}

/// The demo clip's single seals looped at one frame a second.
fn looping_seal_clip() -> String {
    looping_sample("demo_clip", 60, 1)
}

/// A config in `dir` with `cameras` (`[source]` or `[cameras.*]` tables),
/// the batch models (a cycle's cavities go in one batch) and the status
/// server on a free port.
fn write_config(dir: &Path, cameras: &str) -> PathBuf {
    let text = format!(
        r#"{cameras}

[inference]
backend = "{backend}"
max_batch = 6

[models.segmentation]
path = "{models}/seg_batch.onnx"

[models.classifier]
path = "{models}/cls_batch.onnx"

[decision]
no_seal_below = 0.005
min_seal_area = 0.02
max_seal_area = 0.25

[output]
results = "results.jsonl"
flush_each_line = true
log_verdicts = false

[status]
listen = "127.0.0.1:0"

[service]
stall_timeout_s = 10
"#,
        backend = common::backend(),
        models = repo().join("models").display(),
    );
    let path = dir.join("sealcheck.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn header<'a>(headers: &'a str, name: &str) -> Option<&'a str> {
    headers.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// `/api/status` and `/metrics` read from one board snapshot: the metrics
/// between two answers of the same snapshot.
fn status_and_metrics(addr: std::net::SocketAddr, service: &Sealcheck) -> (Value, String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let before = status_json(addr);
        let metrics = get(addr, "/metrics").text();
        let after = status_json(addr);
        if before["snapshot"] == after["snapshot"] {
            return (after, metrics);
        }
        assert!(
            Instant::now() < deadline,
            "the board never stood still for a scrape:\n{}",
            service.stderr()
        );
    }
}

/// `series`'s value in a Prometheus text (`name{labels}` exactly).
fn sample(metrics: &str, series: &str) -> Option<f64> {
    common::status_page::sample(metrics, series)
}

/// `/api/status`'s cavities and `/metrics` are the result lines' cavities,
/// up to the last cycle of the snapshot.
fn check_against_results(status: &Value, metrics: &str, lines: &[Value]) {
    let cavities = &status["cameras"][0]["cavities"];
    let last_seq = cavities["last"]["seq"].as_u64().expect("a last cycle");
    let judged: Vec<&Value> = lines
        .iter()
        .filter(|l| l["seq"].as_u64().is_some_and(|s| s <= last_seq))
        .collect();
    assert_eq!(
        cavities["cycles"]["shift"].as_u64(),
        Some(judged.len() as u64),
        "cycles up to #{last_seq}"
    );
    let last_line = judged.last().unwrap();
    assert_eq!(last_line["seq"].as_u64(), Some(last_seq));
    let shown_last: Vec<(u64, String)> = cavities["last"]["cavities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["cavity"].as_u64().unwrap(),
                c["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let line_last: Vec<(u64, String)> = last_line["cavities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["cavity"].as_u64().unwrap(),
                c["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(shown_last, line_last, "the last cycle's cavities");
    let recent: Vec<&&Value> = judged.iter().rev().take(100).collect();
    for n in 1..=6u64 {
        let fails_of = |lines: &mut dyn Iterator<Item = &Value>| {
            lines
                .filter(|l| {
                    l["reject"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|r| r.as_u64() == Some(n))
                })
                .count() as u64
        };
        let shift_fails = fails_of(&mut judged.iter().copied());
        let recent_fails = fails_of(&mut recent.iter().map(|l| **l));
        let c = &cavities["layout"][n as usize - 1];
        assert_eq!(c["cavity"].as_u64(), Some(n));
        assert_eq!(
            c["shift"]["fail"].as_u64(),
            Some(shift_fails),
            "cavity {n} over the shift"
        );
        assert_eq!(
            c["recent"]["fail"].as_u64(),
            Some(recent_fails),
            "cavity {n} recently"
        );
        // By reason, in /metrics.
        let mut by_reason: BTreeMap<String, u64> = BTreeMap::new();
        for l in &judged {
            for c in l["cavities"].as_array().unwrap() {
                if c["cavity"].as_u64() == Some(n) {
                    *by_reason
                        .entry(format!(
                            "{}\",reason=\"{}",
                            c["verdict"].as_str().unwrap(),
                            c["reason"].as_str().unwrap()
                        ))
                        .or_default() += 1;
                }
            }
        }
        for (verdict_reason, count) in by_reason {
            let series = format!(
                "sealcheck_cavity_results_total{{cavity=\"{n}\",verdict=\"{verdict_reason}\"}}"
            );
            assert_eq!(
                sample(metrics, &series),
                Some(count as f64),
                "{series}\n{metrics}"
            );
        }
    }
    assert!(
        !metrics.contains("sealcheck_cavity_results_total{camera="),
        "a [source] camera's cavity series carry no camera label"
    );
    // The worst cavity: the highest recent rate.
    let rates: Vec<f64> = (0..6)
        .map(|i| cavities["layout"][i]["recent"]["rate"].as_f64().unwrap())
        .collect();
    let top = rates.iter().copied().fold(0.0, f64::max);
    match cavities["worst"]["cavity"].as_u64() {
        Some(w) => assert_eq!(rates[w as usize - 1], top, "{cavities:#}"),
        None => assert_eq!(top, 0.0),
    }
}

/// Measures the page as laid out: the viewport and the document's widths,
/// the header, the frame, the cycle's outlines and the heat map.
const MEASURE: &str = r##"(() => {
  const $ = (id) => document.getElementById(id), r = (el) => el.getBoundingClientRect();
  const W = window.innerWidth;
  const clipped = (e) => { for (let a = e.parentElement; a; a = a.parentElement) { const s = getComputedStyle(a);
    if (s.overflowX !== "visible" && r(a).right <= W + 0.5) return true; } return false; };
  const over = [...document.querySelectorAll("body *")].filter((e) => { const b = r(e); return b.width > 0 && b.right > W + 0.5 && !clipped(e); })
    .slice(0, 8).map((e) => e.tagName + "#" + e.id + "." + e.getAttribute("class") + " right " + Math.round(r(e).right));
  const items = [...document.querySelectorAll("header > *")].filter((e) => !e.hidden);
  const svg = $("live-cycle"), view = $("view"), side = document.querySelector(".side");
  const shown = (e) => !e.hasAttribute("hidden");
  const frames = [...document.querySelectorAll("svg.cycle, #live-img, .tile-view img")].filter((e) => shown(e) && r(e).width > 0)
    .map((e) => ({ id: e.id, width: r(e).width, left: r(e).left }));
  return JSON.stringify({
    inner: W, scroll: document.documentElement.scrollWidth, body_scroll: document.body.scrollWidth, over,
    header_right: Math.max(...items.map((e) => r(e).right)), header_rows: new Set(items.map((e) => Math.round(r(e).top))).size,
    frame: shown(svg) ? r(svg).width : null, frames, seq: svg.dataset.seq || null,
    outlines: [...svg.querySelectorAll("rect.cav")].map((x) => [Number(x.dataset.cavity), x.getAttribute("class")]),
    cells: [...document.querySelectorAll("#cav-map .cell")].map((c) => [c.id, c.className, c.querySelector(".r").textContent, c.querySelector(".s").textContent]),
    worst: $("cav-worst").textContent, cavities_hidden: $("cavities").hidden,
    snapshot: document.body.dataset.snapshot || null,
    view: view.hidden ? null : { left: r(view).left, right: r(view).right, bottom: r(view).bottom },
    side: { left: r(side).left, top: r(side).top },
    tiles: [...document.querySelectorAll(".tile")].map((t) => ({ id: t.id, left: r(t).left, width: r(t).width })),
  });
})()"##;

#[test]
fn the_cavity_view_outlines_each_cavity_and_its_heat_map_names_the_worst_from_a_phone_to_a_desktop()
{
    let Some(chromium) = chromium() else { return };
    let _serial = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let config = write_config(
        dir,
        &format!(
            "[source]\n{}",
            looping_cavity_clip(&format!("\n[source.layout]\n{LAYOUT}"))
        ),
    );
    let mut service = start(&config, &[]);
    let addr = service.status_addr();
    wait_until(
        Duration::from_secs(240),
        "cycles with a failed cavity",
        &service,
        || {
            let c = &status_json(addr)["cameras"][0]["cavities"];
            c["cycles"]["shift"].as_u64() >= Some(6) && !c["worst"].is_null()
        },
    );
    wait_until(Duration::from_secs(30), "a live cycle", &service, || {
        let frame = get(addr, "/api/live.jpg");
        frame.status == 200 && header(&frame.headers, "x-sealcheck-reject-mask").is_some()
    });

    // The API and the metrics against the result lines.
    let (status, metrics) = status_and_metrics(addr, &service);
    let cavities = &status["cameras"][0]["cavities"];
    assert_eq!(cavities["grid"], json!({"rows": 2, "cols": 3}));
    assert_eq!(cavities["window"], 100);
    assert_eq!(
        cavities["layout"][4]["rect"],
        json!([660, 370, 600, 340]),
        "cavity 5: second row, middle"
    );
    let lines = common::result_lines(&dir.join("results.jsonl"));
    check_against_results(&status, &metrics, &lines);

    // The page at each width, every snapshot it could show recorded meanwhile.
    let snapshots: Arc<Mutex<BTreeMap<u64, Value>>> = Arc::default();
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
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let mut browser = Browser::start(chromium);
    let mut measured = Vec::new();
    for (width, height, scale, mobile) in SCREENS {
        let ready = "(() => { const s = document.getElementById('live-cycle'); return !!document.body.dataset.snapshot && !s.hasAttribute('hidden') \
            && s.querySelectorAll('rect.cav').length > 0 && !document.getElementById('cavities').hidden \
            && document.querySelectorAll('#cav-map .cell').length > 0; })()";
        let (m, png) = browser.open(
            &format!("http://{addr}/"),
            (width, height, scale, mobile),
            ready,
            MEASURE,
        );
        let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("status-page-cavities-{width}.png"));
        std::fs::write(&shot, png).unwrap();
        println!(
            "status page with cavities at {width} px: {}",
            shot.display()
        );
        measured.push((width, m));
    }
    drop(browser);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    recorder.join().unwrap();
    let lines = common::result_lines(&dir.join("results.jsonl"));
    let snapshots = snapshots.lock().unwrap();

    for (width, m) in &measured {
        let at = |what: &str| format!("at {width} px: {what}\n{m:#}");
        assert_eq!(
            m["inner"].as_u64(),
            Some(u64::from(*width)),
            "{}",
            at("the viewport")
        );
        assert!(
            m["scroll"].as_f64() <= m["inner"].as_f64() && m["over"].as_array().unwrap().is_empty(),
            "{}",
            at("the page is wider than the screen")
        );
        assert!(
            m["header_right"].as_f64().unwrap() <= f64::from(*width),
            "{}",
            at("the header runs off the edge")
        );
        if *width == 390 {
            assert!(
                m["header_rows"].as_u64() >= Some(2),
                "{}",
                at("the header does not wrap")
            );
        }
        // The frame stays readable: at least 300 px wide (the whole width on a phone).
        let frame = m["frame"]
            .as_f64()
            .unwrap_or_else(|| panic!("{}", at("no cycle frame")));
        assert!(frame >= 300.0, "{}", at("the frame is too small"));
        // One column below 1000 px (the numbers under the frame), side by side above.
        let (view, side) = (&m["view"], &m["side"]);
        if *width < 1000 {
            assert!(
                side["top"].as_f64() >= view["bottom"].as_f64(),
                "{}",
                at("not one column")
            );
        } else {
            assert!(
                side["left"].as_f64() >= view["right"].as_f64(),
                "{}",
                at("not two columns")
            );
        }

        // Each cavity outlined in its verdict's colour in that frame's cycle.
        let seq = m["seq"]
            .as_str()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap();
        let line = lines
            .iter()
            .find(|l| l["seq"].as_u64() == Some(seq))
            .unwrap_or_else(|| panic!("no result line for the shown cycle #{seq}"));
        let rejects: Vec<u64> = line["reject"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_u64().unwrap())
            .collect();
        let outlines: Vec<(u64, String)> = m["outlines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| (o[0].as_u64().unwrap(), o[1].as_str().unwrap().to_string()))
            .collect();
        assert_eq!(outlines.len(), 6, "{}", at("outlines"));
        for (n, class) in &outlines {
            let want = if rejects.contains(n) {
                "cav fail"
            } else {
                "cav pass"
            };
            assert_eq!(
                class,
                want,
                "{}",
                at(&format!("cavity {n} of cycle #{seq} ({line})"))
            );
        }

        // The heat map: a cell per cavity with the shown snapshot's rates, the worst named.
        let snapshot: u64 = m["snapshot"].as_str().unwrap().parse().unwrap();
        let shown = &snapshots
            .get(&snapshot)
            .unwrap_or_else(|| panic!("snapshot {snapshot} not among those served"))["cameras"][0]
            ["cavities"];
        let cells = m["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 6, "{}", at("cells"));
        for (i, cell) in cells.iter().enumerate() {
            let c = &shown["layout"][i];
            assert_eq!(cell[0], format!("cav-{}", i + 1));
            assert!(
                shown_as(cell[2].as_str().unwrap(), c["recent"]["rate"].as_f64()),
                "{}",
                at("recent rate")
            );
            assert!(
                shown_as(cell[3].as_str().unwrap(), c["shift"]["rate"].as_f64()),
                "{}",
                at("shift rate")
            );
        }
        let worst = shown["worst"]["cavity"].as_u64().expect("a worst cavity");
        let marked: Vec<&Value> = cells
            .iter()
            .filter(|c| c[1].as_str().unwrap().contains("worst"))
            .collect();
        assert_eq!(marked.len(), 1, "{}", at("one worst cell"));
        assert_eq!(
            marked[0][0],
            format!("cav-{worst}"),
            "{}",
            at("the worst cell")
        );
        let said = m["worst"].as_str().unwrap();
        assert!(
            said.starts_with(&format!("Worst: cavity {worst}, ")) && said.contains("sealing head"),
            "{}",
            at("the worst cavity named")
        );
    }
    assert_eq!(
        service.terminate(Duration::from_secs(30)).code(),
        Some(0),
        "{}",
        service.stderr()
    );
}

/// Several cameras, one with a layout: the tiles stack in one column below
/// 1000 px, every frame readable and nothing wider than the screen; the
/// cavity camera's tile outlines its cavities, and its own view has the heat map.
#[test]
fn camera_tiles_stack_on_a_narrow_screen_and_a_cavity_cameras_view_has_its_heat_map() {
    let Some(chromium) = chromium() else { return };
    let _serial = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let config = write_config(
        dir,
        &format!(
            "[cameras.tray]\n{}\n\n[cameras.lid]\n{}",
            looping_cavity_clip(&format!("\n[cameras.tray.layout]\n{LAYOUT}")),
            looping_seal_clip()
        ),
    );
    let mut service = start(&config, &[]);
    let addr = service.status_addr();
    wait_until(
        Duration::from_secs(240),
        "both cameras judging",
        &service,
        || {
            let s = status_json(addr);
            let c = s["cameras"].as_array().cloned().unwrap_or_default();
            c.len() == 2
                && c[0]["cavities"]["cycles"]["shift"].as_u64() >= Some(2)
                && c[1]["frames"].as_u64() >= Some(2)
        },
    );
    let status = status_json(addr);
    assert_eq!(
        status["cameras"][1]["cavities"],
        Value::Null,
        "lid has no layout"
    );
    let metrics = get(addr, "/metrics").text();
    assert!(
        metrics.contains("sealcheck_cavity_results_total{camera=\"tray\",cavity=\"1\",verdict=\"pass\",reason=\"ok\"}"),
        "{metrics}"
    );
    assert!(!metrics.contains("sealcheck_cavity_results_total{camera=\"lid\""));
    for name in ["tray", "lid"] {
        wait_until(Duration::from_secs(30), "a live frame", &service, || {
            get(addr, &format!("/api/live.jpg?camera={name}")).status == 200
        });
    }

    let mut browser = Browser::start(chromium);
    for (width, height, scale, mobile) in SCREENS {
        let tiles_ready = "(() => document.querySelectorAll('.tile').length === 2 \
            && !document.getElementById('tile-tray-cycle').hasAttribute('hidden') && !document.getElementById('tile-lid-img').hidden)()";
        let (m, png) = browser.open(
            &format!("http://{addr}/"),
            (width, height, scale, mobile),
            tiles_ready,
            MEASURE,
        );
        let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("status-page-tiles-{width}.png"));
        std::fs::write(&shot, png).unwrap();
        println!(
            "status page with two cameras at {width} px: {}",
            shot.display()
        );
        let at = |what: &str| format!("tiles at {width} px: {what}\n{m:#}");
        assert!(
            m["scroll"].as_f64() <= m["inner"].as_f64() && m["over"].as_array().unwrap().is_empty(),
            "{}",
            at("the page is wider than the screen")
        );
        let frames = m["frames"].as_array().unwrap();
        assert_eq!(frames.len(), 2, "{}", at("a frame per tile"));
        let tiles = m["tiles"].as_array().unwrap();
        if width < 1000 {
            assert_eq!(
                tiles[0]["left"],
                tiles[1]["left"],
                "{}",
                at("tiles not in one column")
            );
        }
        if width >= 820 {
            for f in frames {
                assert!(
                    f["width"].as_f64() >= Some(300.0),
                    "{}",
                    at("a frame too small")
                );
            }
        }

        let view_ready = "(() => { const s = document.getElementById('live-cycle'); return !s.hasAttribute('hidden') \
            && s.querySelectorAll('rect.cav').length === 6 && document.querySelectorAll('#cav-map .cell').length === 6; })()";
        let (m, png) = browser.open(
            &format!("http://{addr}/#camera=tray"),
            (width, height, scale, mobile),
            view_ready,
            MEASURE,
        );
        let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("status-page-tray-{width}.png"));
        std::fs::write(&shot, png).unwrap();
        let at = |what: &str| format!("tray's view at {width} px: {what}\n{m:#}");
        assert!(
            m["scroll"].as_f64() <= m["inner"].as_f64() && m["over"].as_array().unwrap().is_empty(),
            "{}",
            at("the page is wider than the screen")
        );
        assert!(
            m["frame"].as_f64() >= Some(300.0),
            "{}",
            at("the frame is too small")
        );
        assert_eq!(m["cavities_hidden"], false, "{}", at("no heat map"));
    }
    drop(browser);
    assert_eq!(
        service.terminate(Duration::from_secs(30)).code(),
        Some(0),
        "{}",
        service.stderr()
    );
}

/// Whether `text` is `rate` as the heat map writes it (the page's `pct`):
/// "–" for none, whole percent from 10 % (and 0), else one decimal.
fn shown_as(text: &str, rate: Option<f64>) -> bool {
    let Some(rate) = rate else {
        return text == "–";
    };
    let Some(number) = text.strip_suffix(" %") else {
        return false;
    };
    let decimals = number.split_once('.').map_or(0, |(_, d)| d.len());
    let wanted = if rate == 0.0 || rate * 100.0 >= 9.95 {
        0
    } else {
        1
    };
    number.parse::<f64>().is_ok_and(|shown| {
        decimals == wanted
            && (shown - rate * 100.0).abs() <= 0.5 * 10f64.powi(-(wanted as i32)) + 1e-9
    })
}

/// Headless Chromium driven over its DevTools protocol on a pipe (messages
/// are JSON, each ended by a NUL byte; Chromium reads fd 3 and writes fd 4).
/// Bounded in time: a watchdog kills it after two minutes.
struct Browser {
    child: Child,
    to: ChildStdin,
    from: BufReader<ChildStdout>,
    next_id: u64,
    _profile: tempfile::TempDir,
    done: Arc<std::sync::atomic::AtomicBool>,
}

impl Browser {
    fn start(chromium: &Path) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new("sh")
            .arg("-c")
            // Our stdin and stdout become its fd 3 and 4; its own are closed off.
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null 2>/dev/null"#)
            .arg(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--remote-debugging-pipe",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromium");
        let (to, from) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (pid, watching) = (child.id(), Arc::clone(&done));
        std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(120);
            while Instant::now() < until {
                if watching.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        });
        Browser {
            child,
            to,
            from: BufReader::new(from),
            next_id: 0,
            _profile: profile,
            done,
        }
    }

    /// One command (to the page of `session`, or the browser); its result.
    fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let mut message = json!({"id": self.next_id, "method": method, "params": params});
        if let Some(s) = session {
            message["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).expect("chromium's pipe");
        loop {
            let mut raw = Vec::new();
            let n = self.from.read_until(0, &mut raw).expect("chromium's pipe");
            assert!(
                n > 0,
                "chromium ended (or was killed after 2 minutes) during {method}"
            );
            raw.pop();
            let reply: Value = serde_json::from_slice(&raw).unwrap();
            if reply["id"].as_u64() == Some(self.next_id) {
                assert!(reply["error"].is_null(), "{method}: {reply}");
                return reply["result"].clone();
            }
        }
    }

    /// `url` in a new page of `screen`'s size (width, height, pixel ratio,
    /// mobile); once `ready` (JavaScript) is true, what `measure` returns
    /// (a JSON string) and a screenshot (PNG).
    fn open(
        &mut self,
        url: &str,
        screen: (u32, u32, f64, bool),
        ready: &str,
        measure: &str,
    ) -> (Value, Vec<u8>) {
        let (width, height, scale, mobile) = screen;
        let target =
            self.call(None, "Target.createTarget", json!({"url": "about:blank"}))["targetId"]
                .clone();
        let session = self.call(
            None,
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
        )["sessionId"]
            .as_str()
            .unwrap()
            .to_string();
        let s = Some(session.as_str());
        self.call(
            s,
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": scale, "mobile": mobile}),
        );
        self.call(s, "Page.navigate", json!({"url": url}));
        let deadline = Instant::now() + Duration::from_secs(45);
        loop {
            let r = self.call(
                s,
                "Runtime.evaluate",
                json!({"expression": ready, "returnByValue": true}),
            );
            if r["result"]["value"] == json!(true) {
                break;
            }
            if Instant::now() > deadline {
                let m = self.call(
                    s,
                    "Runtime.evaluate",
                    json!({"expression": measure, "returnByValue": true}),
                );
                panic!(
                    "the page at {width} px never got ready ({ready}); it shows: {}",
                    m["result"]["value"]
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let m = self.call(
            s,
            "Runtime.evaluate",
            json!({"expression": measure, "returnByValue": true}),
        );
        let measured: Value = serde_json::from_str(
            m["result"]["value"]
                .as_str()
                .unwrap_or_else(|| panic!("{m}")),
        )
        .unwrap();
        let shot = self.call(s, "Page.captureScreenshot", json!({"format": "png"}));
        let png = base64_decode(shot["data"].as_str().unwrap());
        self.call(None, "Target.closeTarget", json!({"targetId": target}));
        (measured, png)
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self
            .to
            .write_all(b"{\"id\":999999,\"method\":\"Browser.close\"}\0");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Standard base64 (the screenshot's PNG).
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let digits: Vec<u8> = text
        .bytes()
        .filter(|c| *c != b'=' && !c.is_ascii_whitespace())
        .map(value)
        .collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let mut n = 0u32;
        for (i, d) in chunk.iter().enumerate() {
            n |= u32::from(*d) << (18 - 6 * i);
        }
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}
