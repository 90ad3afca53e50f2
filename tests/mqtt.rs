//! Verdicts to a real MQTT broker: Mosquitto from Debian's packages, started by
//! each test as a child process on a free loopback port with its own config
//! file, and stopped at the end (also when the test panics).
//!
//! ```text
//! sealcheck run ──MQTT 5──▶ mosquitto (child, 127.0.0.1:<free port>) ──▶ Subscriber (rumqttc, in the test)
//!       └──results.jsonl──▶ test                                            └── (receive time, topic, payload)
//! ```
//!
//! Every wait is bounded; nothing talks to any address but loopback.

use crate::common;

use common::mqtt::{Broker, Subscriber, TOPIC, wait_until};
use common::{Sealcheck, free_port, repo};

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Never printed by sealcheck: every test that uses it greps all output for it.
const PASSWORD: &str = "pw-Zq81-never-printed";

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `sealcheck check-config CONFIG`: its exit code and all it printed.
fn check_config(config: &Path) -> (Option<i32>, String) {
    let out = Command::new(crate::common::sealcheck_bin())
        .arg("check-config")
        .arg(config)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

/// A live test source paced at `fps`, `frames` long: a camera stand-in.
fn paced_source(fps: u32, frames: u32) -> String {
    format!(
        "kind = \"pipeline\"\npipeline = \"videotestsrc is-live=true num-buffers={frames} pattern=smpte ! video/x-raw,width=320,height=240,framerate={fps}/1 ! videoconvert ! video/x-raw,format=RGB ! appsink name=sink\"\n"
    )
}

/// The first `frames` frames of the demo clip, as an image-sequence source.
fn clip_source(dir: &Path, frames: usize) -> String {
    common::clip_prefix(dir, "clip", frames);
    "kind = \"images\"\nlocation = \"clip/frame_%05d.jpg\"\n".to_string()
}

fn write_config(dir: &Path, source: &str, deadline_ms: u64, mqtt: &str) -> PathBuf {
    let text = format!(
        r#"[source]
{source}
[inference]
backend = "{backend}"

[models.segmentation]
path = "{models}/seg.onnx"

[models.classifier]
path = "{models}/cls.onnx"

[decision]
no_seal_below = 0.005
min_seal_area = 0.02
max_seal_area = 0.25
deadline_ms = {deadline_ms}

[output]
results = "results.jsonl"
log_verdicts = false

[mqtt]
{mqtt}
"#,
        backend = common::backend(),
        models = repo().join("models").display(),
    );
    let path = dir.join("sealcheck.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn results(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// "published P, dropped D" and the line's "N verdicts, L late" from the summary.
fn summary_counts(stdout: &str) -> (u64, u64, u64, u64) {
    let number_after = |text: &str, key: &str| -> u64 {
        let at = text
            .find(key)
            .unwrap_or_else(|| panic!("no {key:?} in:\n{text}"));
        text[at + key.len()..]
            .trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let line = stdout
        .lines()
        .find(|l| l.starts_with("line: "))
        .unwrap_or_else(|| panic!("no line summary:\n{stdout}"));
    let mqtt = stdout
        .lines()
        .find(|l| l.starts_with("mqtt: "))
        .unwrap_or_else(|| panic!("no mqtt summary:\n{stdout}"));
    let verdicts = number_after(line, "line:");
    let late = number_after(line, "verdicts,");
    (
        verdicts,
        late,
        number_after(mqtt, "published"),
        number_after(mqtt, "dropped"),
    )
}

/// Validates every message against docs/verdict.schema.json with Python's
/// `jsonschema` (scripts/requirements.txt; `make test` puts the venv on PATH).
pub(crate) fn assert_schema_valid(verdicts: &[(SystemTime, serde_json::Value)]) {
    let dir = tempfile::tempdir().unwrap();
    let messages = dir.path().join("messages.jsonl");
    let text: Vec<String> = verdicts.iter().map(|(_, v)| v.to_string()).collect();
    std::fs::write(&messages, text.join("\n")).unwrap();
    let out = Command::new("python3")
        .arg("-c")
        .arg(
            "import json, sys, jsonschema\n\
             schema = json.load(open(sys.argv[1]))\n\
             jsonschema.Draft202012Validator.check_schema(schema)\n\
             v = jsonschema.Draft202012Validator(schema)\n\
             n = 0\n\
             for line in open(sys.argv[2]):\n\
             \x20   v.validate(json.loads(line)); n += 1\n\
             print(n)\n",
        )
        .arg(repo().join("docs/verdict.schema.json"))
        .arg(&messages)
        .output()
        .expect("python3 (make test puts .venv/bin on PATH)");
    assert!(
        out.status.success(),
        "schema check failed (is jsonschema installed? make python):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        verdicts.len().to_string()
    );
}

fn parse_time(s: &str) -> SystemTime {
    // "2026-11-23T12:31:23.067Z" -> SystemTime, without a date crate.
    let (date, time) = s.trim_end_matches('Z').split_once('T').unwrap();
    let d: Vec<i64> = date.split('-').map(|x| x.parse().unwrap()).collect();
    let (hms, ms) = time.split_once('.').unwrap();
    let t: Vec<i64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + t[0] * 3600 + t[1] * 60 + t[2];
    UNIX_EPOCH + Duration::from_secs(secs as u64) + Duration::from_millis(ms.parse().unwrap())
}

fn ms_after(a: SystemTime, b: SystemTime) -> f64 {
    match a.duration_since(b) {
        Ok(d) => d.as_secs_f64() * 1e3,
        Err(e) => -e.duration().as_secs_f64() * 1e3,
    }
}

#[test]
fn demo_clip_one_schema_valid_message_per_frame_matching_the_results_file() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), "allow_anonymous true");
    let subscriber = Subscriber::start(broker.port, None);
    let frames = 20;
    let source = clip_source(dir.path(), frames);
    // A file that is no image: capture fails that frame; the line still gets its `error`.
    std::fs::write(dir.path().join("clip/frame_00005.jpg"), b"not a jpeg").unwrap();
    let config = write_config(
        dir.path(),
        &source,
        0,
        &format!("url = \"{}\"\ntopic = \"{TOPIC}\"\nqos = 1", broker.url()),
    );
    let (code, stdout, stderr) = Sealcheck::start(&config, &[]).finish(Duration::from_secs(240));
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        wait_until(Duration::from_secs(5), || subscriber
            .statuses()
            .last()
            .map(String::as_str)
            == Some("offline")),
        "no offline status at the end: {:?}",
        subscriber.statuses()
    );
    let results = results(dir.path());
    let verdicts = subscriber.verdicts();
    assert_eq!(results.len(), frames);
    assert_eq!(verdicts.len(), frames, "one message per frame:\n{stdout}");
    assert_schema_valid(&verdicts);
    let seg = sealcheck::line::model_id::model_id(&repo().join("models/seg.onnx")).unwrap();
    let cls = sealcheck::line::model_id::model_id(&repo().join("models/cls.onnx")).unwrap();
    for (i, ((_, m), r)) in verdicts.iter().zip(&results).enumerate() {
        assert_eq!(m["seq"], i as u64, "in seq order");
        assert_eq!(m["seq"], r["seq"]);
        assert_eq!(m["ts"], r["ts"]);
        assert_eq!(
            (&m["verdict"], &m["reason"]),
            (&r["verdict"], &r["reason"]),
            "seq {i}"
        );
        assert_eq!(m["models"]["segmentation"], seg.as_str());
        assert_eq!(m["models"]["classifier"], cls.as_str());
        assert_eq!(r["models"], m["models"]);
        assert_eq!(r["late"], false);
        assert!(m["deadline"].is_null(), "no deadline configured");
    }
    assert_eq!(verdicts[5].1["reason"], "error");
    assert_eq!(verdicts[5].1["evaluation"], "NotDecidable");
    // Availability: online (retained) when connected, offline at the clean stop.
    let statuses = subscriber.statuses();
    assert_eq!(
        statuses.first().map(String::as_str),
        Some("online"),
        "{statuses:?}"
    );
    let (sent, late, published, dropped) = summary_counts(&stdout);
    assert_eq!(
        (sent, late, published, dropped),
        (frames as u64, 0, frames as u64, 0),
        "{stdout}"
    );
}

#[test]
fn broker_killed_mid_run_and_back_3s_later_nothing_arrives_after_its_deadline() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), "allow_anonymous true");
    let subscriber = Subscriber::start(broker.port, None);
    let frames = 80;
    let config = write_config(
        dir.path(),
        &paced_source(5, frames),
        2000,
        &format!(
            "url = \"{}\"\ntopic = \"{TOPIC}\"\nqos = 1\nkeep_alive_s = 5",
            broker.url()
        ),
    );
    let run = Sealcheck::start(&config, &[]);
    assert!(
        wait_until(Duration::from_secs(120), || subscriber.verdicts().len()
            >= 10),
        "no verdicts before the outage:\n{}",
        run.stderr()
    );
    broker.kill();
    let killed_at = SystemTime::now();
    std::thread::sleep(Duration::from_secs(3));
    broker.restart();
    let back_at = SystemTime::now();
    let (code, stdout, stderr) = run.finish(Duration::from_secs(120));
    assert_eq!(
        code, 0,
        "sealcheck must keep running through the outage:\n{stdout}\n{stderr}"
    );
    let results = results(dir.path());
    assert_eq!(results.len(), frames as usize, "every frame got its result");
    let (sent, _late, published, dropped) = summary_counts(&stdout);
    assert_eq!(sent, frames as u64, "{stdout}");
    assert_eq!(
        published + dropped,
        frames as u64,
        "published + dropped = frames:\n{stdout}"
    );

    let verdicts = subscriber.verdicts();
    assert_schema_valid(&verdicts);
    for (at, m) in &verdicts {
        let expires = parse_time(m["expires"].as_str().unwrap());
        let deadline = parse_time(m["deadline"].as_str().unwrap());
        assert!(
            ms_after(*at, expires) <= 0.0,
            "seq {} arrived {:.1} ms after it expired: {m}",
            m["seq"],
            ms_after(*at, expires)
        );
        if m["reason"] != "late" {
            assert_eq!(expires, deadline);
        }
    }
    // Messages flow again after the broker returns, still in order, none twice
    // but for at-least-once resends of unacknowledged ones.
    assert!(
        verdicts.iter().any(|(at, _)| *at > back_at),
        "no verdict after the broker came back"
    );
    let seqs: Vec<u64> = verdicts
        .iter()
        .map(|(_, m)| m["seq"].as_u64().unwrap())
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[0] <= w[1]),
        "out of order: {seqs:?}"
    );
    assert!(
        !verdicts
            .iter()
            .any(|(at, _)| *at > killed_at + Duration::from_millis(50) && *at < back_at),
        "a verdict while the broker was down?"
    );
    // The log says it once per outage, and when it is back.
    assert_eq!(
        stderr.matches("lost the MQTT broker").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("reachable again after"), "{stderr}");
    assert!(stdout.contains("outages 1"), "{stdout}");
}

#[cfg(feature = "fault-injection")]
#[test]
fn late_fails_reach_the_line_at_the_deadline_and_late_results_stay_in_the_file() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), "allow_anonymous true");
    let subscriber = Subscriber::start(broker.port, None);
    let frames = 8;
    let source = clip_source(dir.path(), frames);
    let deadline_ms = 100;
    let config = write_config(
        dir.path(),
        &source,
        deadline_ms,
        &format!("url = \"{}\"\ntopic = \"{TOPIC}\"", broker.url()),
    );
    // Inference takes 250 ms longer than usual: every part misses its 100 ms deadline.
    let (code, stdout, stderr) =
        Sealcheck::start(&config, &[("SEALCHECK_FAULT_DELAY_INFER_MS", "250")])
            .finish(Duration::from_secs(240));
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(wait_until(Duration::from_secs(5), || subscriber
        .verdicts()
        .len()
        >= frames));
    let verdicts = subscriber.verdicts();
    assert_eq!(
        verdicts.len(),
        frames,
        "one message per part, the late fail only"
    );
    assert_schema_valid(&verdicts);
    for (at, m) in &verdicts {
        assert_eq!(m["reason"], "late", "{m}");
        assert_eq!(m["verdict"], "fail");
        assert_eq!(m["evaluation"], "NotDecidable");
        let deadline = parse_time(m["deadline"].as_str().unwrap());
        let after = ms_after(*at, deadline);
        assert!(
            (0.0..=10.0).contains(&after),
            "seq {}: late fail arrived {after:.2} ms after the deadline (must be 0..10)",
            m["seq"]
        );
    }
    // The real results: in the results file, marked late, with their real reasons.
    let results = results(dir.path());
    assert_eq!(results.len(), frames);
    for r in &results {
        assert_eq!(r["late"], true, "{r}");
        assert_ne!(r["reason"], "late", "the file keeps the real verdict: {r}");
        assert!(r["latency_ms"]["total"].as_f64().unwrap() > deadline_ms as f64);
    }
    let (sent, late, published, dropped) = summary_counts(&stdout);
    assert_eq!(
        (sent, late, published, dropped),
        (frames as u64, frames as u64, frames as u64, 0),
        "{stdout}"
    );
}

#[cfg(not(feature = "fault-injection"))]
#[test]
fn late_fails_reach_the_line_at_the_deadline_and_late_results_stay_in_the_file() {
    common::skipped(format_args!(
        "needs `cargo test --features fault-injection` (the inference delay hook is compiled out)"
    ));
}

/// Runs 10 paced frames against `mqtt` settings; MQTT trouble must not stop
/// inspection. Returns stdout + stderr.
fn run_with_mqtt_trouble(dir: &Path, mqtt: &str, frames: u32) -> String {
    let config = write_config(dir, &paced_source(5, frames), 0, mqtt);
    let _ = std::fs::remove_file(dir.join("results.jsonl"));
    let (code, stdout, stderr) = Sealcheck::start(&config, &[]).finish(Duration::from_secs(240));
    let all = format!("{stdout}\n{stderr}");
    assert_eq!(code, 0, "MQTT trouble must not stop inspection:\n{all}");
    assert_eq!(results(dir).len(), frames as usize, "{all}");
    assert!(!all.contains(PASSWORD), "the password leaked:\n{all}");
    all
}

#[test]
fn broker_trouble_is_explained_inspection_goes_on_and_the_password_never_shows() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let passwd = dir.path().join("passwd");
    std::fs::write(&passwd, "").unwrap();
    let made = Command::new("mosquitto_passwd")
        .arg("-b")
        .arg(&passwd)
        .arg("line7")
        .arg(PASSWORD)
        .output()
        .expect("mosquitto_passwd (package mosquitto)");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let acl = dir.path().join("acl");
    std::fs::write(&acl, format!("user line7\ntopic write {TOPIC}/#\n")).unwrap();
    let broker = Broker::start(
        dir.path(),
        &format!(
            "allow_anonymous false\npassword_file {}\nacl_file {}\nclientid_prefixes line7-",
            passwd.display(),
            acl.display()
        ),
    );
    let secret = |mode: u32, text: &str| -> PathBuf {
        let path = dir.path().join(format!("pw-{mode:o}-{}", text.len()));
        std::fs::write(&path, format!("{text}\n")).unwrap();
        chmod(&path, mode);
        path
    };
    let good = secret(0o600, PASSWORD);
    let mqtt = |url: &str, client_id: &str, password_file: &Path| {
        format!(
            "url = \"{url}\"\ntopic = \"{TOPIC}\"\nclient_id = \"{client_id}\"\nusername = \"line7\"\npassword_file = \"{}\"",
            password_file.display()
        )
    };

    // The right password: verdicts are published (ACL allows the topic).
    let out = run_with_mqtt_trouble(dir.path(), &mqtt(&broker.url(), "line7-a", &good), 5);
    assert!(out.contains("published 5, dropped 0"), "{out}");

    // Wrong password: the broker says so, we say what to check.
    let wrong = secret(0o600, "not-the-password");
    let out = run_with_mqtt_trouble(dir.path(), &mqtt(&broker.url(), "line7-b", &wrong), 5);
    // Mosquitto answers "not authorised" (0x87) or "bad user name or password" (0x86).
    assert!(
        out.contains("refused the user name or password")
            || out.contains("does not authorise this client"),
        "{out}"
    );
    assert!(out.contains("password_file"), "{out}");

    // A client id the broker refuses.
    let out = run_with_mqtt_trouble(dir.path(), &mqtt(&broker.url(), "intruder", &good), 5);
    assert!(
        out.contains("client id \\\"intruder\\\"") && out.contains("client_id"),
        "{out}"
    );

    // Refused connection: nothing listens there.
    let closed = format!("mqtt://127.0.0.1:{}", free_port());
    let out = run_with_mqtt_trouble(dir.path(), &mqtt(&closed, "line7-c", &good), 5);
    assert!(out.contains("refused: is the broker running"), "{out}");
    assert!(
        out.contains("inspection and the results file go on"),
        "{out}"
    );

    // A host that accepts TCP but never answers (a hung broker, or a
    // firewall that swallows packets): the connect times out.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("mqtt://127.0.0.1:{}", silent.local_addr().unwrap().port());
    let out = run_with_mqtt_trouble(dir.path(), &mqtt(&silent_url, "line7-d", &good), 25);
    assert!(out.contains("no answer from"), "{out}");
    drop(silent);

    // The password file: missing, or readable by others.
    let missing = dir.path().join("no-such-file");
    let out = run_with_mqtt_trouble(dir.path(), &mqtt(&broker.url(), "line7-e", &missing), 3);
    assert!(
        out.contains("does not exist") && out.contains("MQTT is off for this run"),
        "{out}"
    );
    assert!(
        out.contains("unavailable 3"),
        "every verdict counted: {out}"
    );
    let open = secret(0o644, PASSWORD);
    let out = run_with_mqtt_trouble(dir.path(), &mqtt(&broker.url(), "line7-f", &open), 3);
    assert!(out.contains("chmod 600"), "{out}");

    let log = std::fs::read_to_string(&broker.log).unwrap_or_default();
    assert!(!log.contains(PASSWORD), "the broker logged the password?");
}

#[test]
fn malformed_mqtt_settings_are_config_errors_with_their_place() {
    let dir = tempfile::tempdir().unwrap();
    for (mqtt, says) in [
        ("url = \"http://broker:1883\"", "mqtt.url"),
        (
            &format!("url = \"mqtt://line7:{PASSWORD}@broker\"") as &str,
            "must not hold a user name or password",
        ),
        ("url = \"mqtt://broker\"\nqos = 2", "mqtt.qos"),
        ("url = \"mqtts://broker\"", "needs `ca_file`"),
        ("url = \"mqtt://broker\"\ntopic = \"a/#\"", "mqtt.topic"),
        ("url = \"mqtt://broker\"\npassword = \"x\"", "unknown key"),
        (
            "url = \"mqtts://broker\"\nca_file = \"/etc/hostname\"\ncert_file = \"/etc/hostname\"",
            "needs `key_file` too",
        ),
        (
            "url = \"mqtt://broker\"\ncert_file = \"/etc/hostname\"\nkey_file = \"/etc/hostname\"",
            "only used with an mqtts:// url",
        ),
    ] {
        let config = write_config(dir.path(), &clip_source(dir.path(), 1), 0, mqtt);
        let (code, text) = check_config(&config);
        assert_eq!(code, Some(78), "{mqtt}: {text}");
        assert!(text.contains(says), "{mqtt}: {text}");
        assert!(text.contains("sealcheck.toml:"), "file:line:col: {text}");
        assert!(!text.contains(PASSWORD), "password echoed: {text}");
    }
}

#[test]
fn mqtt_section_defaults_and_off_when_absent() {
    let dir = tempfile::tempdir().unwrap();
    let source = clip_source(dir.path(), 1);
    let config = write_config(dir.path(), &source, 60, "url = \"mqtt://broker.local\"");
    let cfg = sealcheck::config::load(&config).unwrap();
    let mqtt = cfg.mqtt.expect("[mqtt] present");
    assert_eq!(mqtt.broker.url(), "mqtt://broker.local:1883");
    assert_eq!((mqtt.qos, mqtt.queue), (1, 256));
    assert_eq!(mqtt.keep_alive, Duration::from_secs(10));
    assert!(!mqtt.client_id.is_empty());
    assert_eq!(mqtt.topic, format!("sealcheck/{}", mqtt.client_id));
    assert_eq!(cfg.decision.deadline, Some(Duration::from_millis(60)));

    let text = std::fs::read_to_string(&config).unwrap();
    let without = text
        .split("[mqtt]")
        .next()
        .unwrap()
        .replace("deadline_ms = 60", "deadline_ms = 0");
    std::fs::write(&config, without).unwrap();
    let cfg = sealcheck::config::load(&config).unwrap();
    assert!(cfg.mqtt.is_none() && cfg.decision.deadline.is_none());
}

#[cfg(not(feature = "fault-injection"))]
#[test]
fn dropped_frames_each_get_one_not_inspected_verdict_on_the_line() {
    common::skipped(format_args!(
        "needs `cargo test --features fault-injection` (the inference delay hook makes the drops certain)"
    ));
}

#[cfg(feature = "fault-injection")]
#[test]
fn dropped_frames_each_get_one_not_inspected_verdict_on_the_line() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), "allow_anonymous true");
    let subscriber = Subscriber::start(broker.port, None);
    // 60 frames/s into two slots, with inference made 50 ms slower (a fault hook,
    // so that a fast machine cannot keep up either): most frames are dropped.
    let frames = 60;
    let source = format!(
        "{}overflow = \"drop\"\npool_size = 2\n",
        paced_source(60, frames)
    );
    let config = write_config(
        dir.path(),
        &source,
        0,
        &format!(
            "url = \"{}\"\ntopic = \"{TOPIC}\"\nqueue = 1000",
            broker.url()
        ),
    );
    let (code, stdout, stderr) =
        Sealcheck::start(&config, &[("SEALCHECK_FAULT_DELAY_INFER_MS", "50")])
            .finish(Duration::from_secs(240));
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(wait_until(Duration::from_secs(5), || subscriber
        .verdicts()
        .len()
        >= frames as usize));
    let verdicts = subscriber.verdicts();
    let seqs: Vec<u64> = verdicts
        .iter()
        .map(|(_, m)| m["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(
        seqs,
        (0..frames as u64).collect::<Vec<_>>(),
        "every frame once, in order"
    );
    let results = results(dir.path());
    for ((_, m), r) in verdicts.iter().zip(&results) {
        assert_eq!((&m["seq"], &m["reason"]), (&r["seq"], &r["reason"]));
    }
    assert!(
        verdicts.iter().any(|(_, m)| m["reason"] == "not_inspected"),
        "expected drops at 60 frames/s: {stdout}"
    );
}

#[test]
fn a_killed_inspector_is_offline_by_its_last_will() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), "allow_anonymous true");
    let subscriber = Subscriber::start(broker.port, None);
    let config = write_config(
        dir.path(),
        &paced_source(5, 100_000),
        0,
        &format!("url = \"{}\"\ntopic = \"{TOPIC}\"", broker.url()),
    );
    let mut run = Sealcheck::start(&config, &[]);
    assert!(
        wait_until(Duration::from_secs(120), || !subscriber
            .verdicts()
            .is_empty()),
        "no verdict:\n{}",
        run.stderr()
    );
    assert_eq!(subscriber.statuses(), vec!["online".to_string()]);
    // SIGKILL: no clean DISCONNECT, so the broker publishes the last will.
    run.child.kill().unwrap();
    run.child.wait().unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || subscriber
            .statuses()
            .last()
            .map(String::as_str)
            == Some("offline")),
        "no offline last will: {:?}",
        subscriber.statuses()
    );
}

/// A test certificate authority and a broker certificate it signed, made with
/// the `openssl` command line as an operator would (docs/INTEGRATION.md).
struct TestPki {
    dir: PathBuf,
    name: String,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl (package openssl; `make deps` installs it)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl TestPki {
    /// `name`: a prefix for the files; `host`: the broker certificate's only
    /// name (a DNS subjectAltName, no IP address).
    fn make(dir: &Path, name: &str, host: &str) -> TestPki {
        let ca = format!("{name}-ca");
        openssl(
            dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                &format!("/CN={name} test CA"),
                "-keyout",
                &format!("{ca}.key"),
                "-out",
                &format!("{ca}.pem"),
            ],
        );
        let mut pki = TestPki {
            dir: dir.to_path_buf(),
            name: name.to_string(),
            ca: dir.join(format!("{ca}.pem")),
            cert: PathBuf::new(),
            key: PathBuf::new(),
        };
        (pki.cert, pki.key) = pki.issue("broker", host, &format!("subjectAltName=DNS:{host}"));
        pki
    }

    /// Mosquitto with its plain listener (for the test's subscriber) and a TLS
    /// one on the returned port, serving this authority's broker certificate;
    /// `extra` adds lines to the TLS listener (client certificates).
    fn tls_broker(&self, extra: &str) -> (Broker, u16) {
        // mosquitto drops to its own user when started as root (CI) and must
        // still read these: "Permission denied" otherwise.
        for path in [&self.dir, &self.cert, &self.key, &self.ca] {
            chmod(path, 0o755);
        }
        let tls_port = free_port();
        let broker = Broker::start(
            &self.dir,
            &format!(
                "allow_anonymous true\nlistener {tls_port} 127.0.0.1\ncertfile {}\nkeyfile {}\n{extra}",
                self.cert.display(),
                self.key.display()
            ),
        );
        broker.wait_for_listener(tls_port);
        (broker, tls_port)
    }

    /// A client certificate for `who`, signed by this authority: (cert, key).
    fn client(&self, who: &str) -> (PathBuf, PathBuf) {
        self.issue(who, who, "extendedKeyUsage=clientAuth")
    }

    /// A key and a certificate for `subject` with extension `ext`, signed by
    /// this authority, as `<name>-<what>.pem` and `.key`.
    fn issue(&self, what: &str, subject: &str, ext: &str) -> (PathBuf, PathBuf) {
        let (ca, base) = (format!("{}-ca", self.name), format!("{}-{what}", self.name));
        openssl(
            &self.dir,
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                &format!("/CN={subject}"),
                "-keyout",
                &format!("{base}.key"),
                "-out",
                &format!("{base}.csr"),
            ],
        );
        std::fs::write(self.dir.join(format!("{base}.ext")), format!("{ext}\n")).unwrap();
        openssl(
            &self.dir,
            &[
                "x509",
                "-req",
                "-in",
                &format!("{base}.csr"),
                "-CA",
                &format!("{ca}.pem"),
                "-CAkey",
                &format!("{ca}.key"),
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                &format!("{base}.ext"),
                "-out",
                &format!("{base}.pem"),
            ],
        );
        (
            self.dir.join(format!("{base}.pem")),
            self.dir.join(format!("{base}.key")),
        )
    }
}

#[test]
fn tls_broker_gets_every_verdict_and_a_wrong_authority_or_host_name_is_explained() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::make(dir.path(), "plant", "localhost");
    let rogue = TestPki::make(dir.path(), "rogue", "localhost");
    // Two listeners: TLS for sealcheck, plain for the test's subscriber.
    let (broker, tls_port) = pki.tls_broker("");
    let subscriber = Subscriber::start(broker.port, None);
    let mqtt = |url: &str, ca: &Path| {
        format!(
            "url = \"{url}\"\ntopic = \"{TOPIC}\"\nqos = 1\nca_file = \"{}\"",
            ca.display()
        )
    };
    let tls_url = format!("mqtts://localhost:{tls_port}");

    // The authority that signed the broker's certificate: every verdict over TLS.
    let frames = 5;
    let out = run_with_mqtt_trouble(dir.path(), &mqtt(&tls_url, &pki.ca), frames);
    assert!(out.contains("published 5, dropped 0"), "{out}");
    assert!(!out.contains("TLS with"), "{out}");
    assert!(
        wait_until(Duration::from_secs(5), || subscriber.verdicts().len() == 5),
        "the plain listener's subscriber got {} of 5 verdicts sent over TLS",
        subscriber.verdicts().len()
    );
    let seqs: Vec<_> = subscriber
        .verdicts()
        .iter()
        .map(|(_, v)| v["seq"].clone())
        .collect();
    assert_eq!(
        seqs,
        (0..5u64).map(serde_json::Value::from).collect::<Vec<_>>()
    );

    // Another authority: refused, said why, inspection goes on, every verdict counted.
    let out = run_with_mqtt_trouble(dir.path(), &mqtt(&tls_url, &rogue.ca), frames);
    assert!(
        out.contains("not signed by the authority in ca_file") && out.contains("rogue-ca.pem"),
        "{out}"
    );
    assert!(out.contains("published 0"), "{out}");

    // The right authority, but the url names the broker by an address its
    // certificate does not carry.
    let by_address = format!("mqtts://127.0.0.1:{tls_port}");
    let out = run_with_mqtt_trouble(dir.path(), &mqtt(&by_address, &pki.ca), frames);
    assert!(
        out.contains("not issued for the host name in `url`") && out.contains("localhost"),
        "{out}"
    );
    assert!(out.contains("published 0"), "{out}");

    // mqtts:// to the plain listener: no TLS there.
    let plain = format!("mqtts://localhost:{}", broker.port);
    let out = run_with_mqtt_trouble(dir.path(), &mqtt(&plain, &pki.ca), frames);
    assert!(out.contains("published 0"), "{out}");
    assert!(out.contains("is that port a TLS listener"), "{out}");

    // A ca_file that holds no certificate (a key given by mistake).
    let out = run_with_mqtt_trouble(dir.path(), &mqtt(&tls_url, &pki.key), frames);
    assert!(
        out.contains("cannot use ca_file") && out.contains("holds no certificate"),
        "{out}"
    );
    assert_eq!(
        subscriber.verdicts().len(),
        5,
        "nothing else reached the broker"
    );
}

/// A broker that requires client certificates (Mosquitto's
/// `require_certificate`), as plants with strict network rules run them.
#[test]
fn mutual_tls_broker_takes_our_certificate_and_refusals_say_what_to_set() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::make(dir.path(), "plant", "localhost");
    let rogue = TestPki::make(dir.path(), "rogue", "localhost");
    let (cert, key) = pki.client("line7-inspector");
    let (rogue_cert, rogue_key) = rogue.client("line7-inspector");
    // The client keys are ours and private, as the service's would be.
    for path in [&key, &rogue_key] {
        chmod(path, 0o600);
    }
    let (broker, tls_port) = pki.tls_broker(&format!(
        "cafile {}\nrequire_certificate true",
        pki.ca.display()
    ));
    let subscriber = Subscriber::start(broker.port, None);
    let url = format!("mqtts://localhost:{tls_port}");
    let mqtt = |client: Option<(&Path, &Path)>| {
        let mut text = format!(
            "url = \"{url}\"\ntopic = \"{TOPIC}\"\nqos = 1\nca_file = \"{}\"\n",
            pki.ca.display()
        );
        if let Some((cert, key)) = client {
            text += &format!(
                "cert_file = \"{}\"\nkey_file = \"{}\"\n",
                cert.display(),
                key.display()
            );
        }
        text
    };

    // Our certificate, from the authority the broker trusts: every verdict.
    let out = run_with_mqtt_trouble(dir.path(), &mqtt(Some((&cert, &key))), 5);
    assert!(out.contains("published 5, dropped 0"), "{out}");
    assert!(
        wait_until(Duration::from_secs(5), || subscriber.verdicts().len() == 5),
        "{} of 5 verdicts reached the subscriber",
        subscriber.verdicts().len()
    );

    // No certificate: the broker wants one, and the line says which keys to set.
    let out = run_with_mqtt_trouble(dir.path(), &mqtt(None), 5);
    assert!(out.contains("published 0"), "{out}");
    assert!(out.contains("`cert_file` and `key_file`"), "{out}");

    // A certificate from an authority the broker does not trust.
    let out = run_with_mqtt_trouble(dir.path(), &mqtt(Some((&rogue_cert, &rogue_key))), 5);
    assert!(out.contains("published 0"), "{out}");
    assert!(
        out.contains("refused this client's certificate")
            && out.contains("rogue-line7-inspector.pem"),
        "{out}"
    );

    // A key others may read: refused before use, inspection goes on.
    chmod(&key, 0o644);
    let out = run_with_mqtt_trouble(dir.path(), &mqtt(Some((&cert, &key))), 3);
    assert!(
        out.contains("MQTT is off for this run") && out.contains("chmod 600"),
        "{out}"
    );
    assert_eq!(
        subscriber.verdicts().len(),
        5,
        "nothing else reached the broker"
    );
}

/// `check-config` reads the files `[mqtt]` names as the service would at
/// start, where each of these would turn MQTT off for the run: an operator
/// learns it before the restart, never seeing the password.
#[test]
fn check_config_reads_the_mqtt_files_the_service_would() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::make(dir.path(), "plant", "localhost");
    let (cert, key) = pki.client("line7-inspector");
    let password = dir.path().join("mqtt-password");
    std::fs::write(&password, format!("{PASSWORD}\n")).unwrap();
    chmod(&password, 0o600);
    chmod(&key, 0o600);
    let source = clip_source(dir.path(), 1);
    let check = |ca: &Path, key: &Path| {
        let mqtt = format!(
            "url = \"mqtts://localhost:8883\"\ntopic = \"{TOPIC}\"\nusername = \"line7\"\npassword_file = \"{}\"\nca_file = \"{}\"\ncert_file = \"{}\"\nkey_file = \"{}\"",
            password.display(),
            ca.display(),
            cert.display(),
            key.display()
        );
        let (code, text) = check_config(&write_config(dir.path(), &source, 0, &mqtt));
        assert!(!text.contains(PASSWORD), "password echoed: {text}");
        (code, text)
    };

    let (code, text) = check(&pki.ca, &key);
    assert_eq!(code, Some(0), "{text}");

    chmod(&key, 0o644);
    let (code, text) = check(&pki.ca, &key);
    assert_eq!(code, Some(78), "{text}");
    assert!(
        text.contains("[mqtt]: key_file") && text.contains("chmod 600"),
        "{text}"
    );
    chmod(&key, 0o600);

    chmod(&password, 0o640);
    let (code, text) = check(&pki.ca, &key);
    assert_eq!(code, Some(78), "{text}");
    assert!(
        text.contains("password file") && text.contains("chmod 600"),
        "{text}"
    );
    chmod(&password, 0o600);

    // The key given where the authority's certificate belongs.
    let (code, text) = check(&key, &key);
    assert_eq!(code, Some(78), "{text}");
    assert!(
        text.contains("cannot use ca_file") && text.contains("holds no certificate"),
        "{text}"
    );
}

/// `sealcheck bench ARGS --json` on `config` with the fault hooks in `env`:
/// its report.
#[cfg(feature = "fault-injection")]
fn bench(config: &Path, args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let mut cmd = Command::new(common::sealcheck_bin());
    cmd.arg("bench")
        .arg("--config")
        .arg(config)
        .args(args)
        .arg("--json");
    Sealcheck::isolate(&mut cmd);
    cmd.envs(env.iter().copied());
    let (code, stdout, stderr) = Sealcheck::spawn(cmd).finish(Duration::from_secs(240));
    assert_eq!(code, 0, "sealcheck bench {args:?}:\n{stdout}\n{stderr}");
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("bench printed no JSON report ({e}):\n{stdout}\n{stderr}"))
}

/// A bench config of the first 20 clip frames with `[mqtt]` to `broker`.
#[cfg(feature = "fault-injection")]
fn bench_config(dir: &Path, broker: &Broker) -> PathBuf {
    let source = clip_source(dir, 20);
    let mqtt = format!(
        "url = \"{}\"\ntopic = \"{TOPIC}\"\nqos = 1\nqueue = 1024",
        broker.url()
    );
    write_config(dir, &source, 0, &mqtt)
}

#[cfg(not(feature = "fault-injection"))]
#[test]
fn bench_mqtt_latency_leaves_out_a_slow_warm_up() {
    common::skipped(format_args!(
        "needs `cargo test --features fault-injection` (the inference delay hook makes the warm-up slow)"
    ));
}

/// The warm-up's frames are made 3 s slower each (a cold engine, exaggerated):
/// MQTT's capture->ack figures, like the stage figures, must be those of the
/// measured frames alone, and none of those may wait behind a warm-up frame.
#[cfg(feature = "fault-injection")]
#[test]
fn bench_mqtt_latency_leaves_out_a_slow_warm_up() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), "allow_anonymous true");
    let config = bench_config(dir.path(), &broker);
    let delay_ms = 3000.0;
    let report = bench(
        &config,
        &["--frames", "60", "--warmup", "3"],
        &[
            ("SEALCHECK_FAULT_DELAY_INFER_MS", "3000"),
            ("SEALCHECK_FAULT_DELAY_INFER_FIRST", "3"),
        ],
    );
    let mqtt = &report["mqtt"];
    assert_eq!(
        (&report["offered"], &report["judged"], &mqtt["published"]),
        (
            &serde_json::json!(60),
            &serde_json::json!(60),
            &serde_json::json!(63)
        ),
        "every verdict, warm-up included, still goes to the broker: {report}"
    );
    let ms = |figure: &str, p: &str| {
        mqtt[figure][p]
            .as_f64()
            .unwrap_or_else(|| panic!("no {figure} {p}: {report}"))
    };
    // The warm-up's own acks came after at least 3 s; the measured frames' in
    // a fraction of that even on a loaded 2-core machine.
    for figure in ["capture_to_ack_ms", "verdict_to_ack_ms"] {
        assert!(
            ms(figure, "p99.9") < delay_ms / 2.0,
            "{figure} p99.9 {} ms holds warm-up frames (each {delay_ms} ms slower): {report}",
            ms(figure, "p99.9")
        );
    }
    assert!(
        report["latency_ms"]["total"]["p99"].as_f64().unwrap() < delay_ms / 2.0,
        "{report}"
    );
}

#[cfg(not(feature = "fault-injection"))]
#[test]
fn bench_rate_is_never_exceeded_and_frames_the_pipeline_cannot_take_are_dropped() {
    common::skipped(format_args!(
        "needs `cargo test --features fault-injection` (the inference delay hook makes the pipeline slow)"
    ));
}

/// `bench --rate` behaves like a camera: after a slow warm-up it does not catch
/// up in a burst faster than the rate, and a pipeline slower than the rate
/// gets drops (counted, each a `not_inspected` result), not a slower camera.
#[cfg(feature = "fault-injection")]
#[test]
fn bench_rate_is_never_exceeded_and_frames_the_pipeline_cannot_take_are_dropped() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), "allow_anonymous true");
    let config = bench_config(dir.path(), &broker);
    let counts = |report: &serde_json::Value| {
        let n = |key: &str| {
            report[key]
                .as_u64()
                .unwrap_or_else(|| panic!("no {key}: {report}"))
        };
        (n("offered"), n("judged"), n("dropped"))
    };

    // A warm-up of 3 frames, 2 s each, then a fast pipeline offered 4 frames/s:
    // paced from the start, the measured frames would all be overdue and go
    // in as fast as the pipeline takes them.
    let subscriber = Subscriber::start(broker.port, None);
    let report = bench(
        &config,
        &["--frames", "16", "--warmup", "3", "--rate", "4"],
        &[
            ("SEALCHECK_FAULT_DELAY_INFER_MS", "2000"),
            ("SEALCHECK_FAULT_DELAY_INFER_FIRST", "3"),
        ],
    );
    let (offered, judged, dropped) = counts(&report);
    assert_eq!((offered, judged + dropped), (16, 16), "{report}");
    // The replay's own lateness is reported apart: its offers came at their
    // due times (the clock starts after the slow warm-up), within a frame
    // interval, whatever the pipeline's latency.
    let late = &report["replay_offer_late_ms"];
    let (p99, max) = (late["p99"].as_f64(), late["max"].as_f64());
    assert!(
        matches!((p99, max), (Some(p99), Some(max)) if p99 >= 0.0 && p99 <= max.max(0.05) && max < 100.0),
        "replay_offer_late_ms: {report}"
    );
    let fps = report["fps"].as_f64().unwrap();
    assert!(
        fps <= 4.0,
        "{fps} frames/s measured at an offered 4/s: {report}"
    );
    // As the line saw them: the measured parts captured 250 ms apart (their
    // due times, to the millisecond of `ts`), none reaching the broker before
    // its capture time (offered early with a due time ahead).
    assert!(wait_until(Duration::from_secs(5), || subscriber
        .verdicts()
        .len()
        >= 19));
    let measured: Vec<(SystemTime, SystemTime)> = subscriber
        .verdicts()
        .into_iter()
        .filter(|(_, m)| m["seq"].as_u64().unwrap() >= 3)
        .map(|(at, m)| (at, parse_time(m["ts"].as_str().unwrap())))
        .collect();
    assert_eq!(measured.len(), 16);
    for pair in measured.windows(2) {
        let apart = ms_after(pair[1].1, pair[0].1);
        assert!(
            (249.0..=251.0).contains(&apart),
            "measured parts captured {apart} ms apart, not at 4/s: {measured:?}"
        );
    }
    for (at, ts) in &measured {
        assert!(
            ms_after(*at, *ts) >= 0.0,
            "a part reached the line before its capture time: {measured:?}"
        );
    }

    // Every frame 150 ms slower (under 7 frames/s) offered at 20/s.
    let report = bench(
        &config,
        &["--frames", "40", "--warmup", "2", "--rate", "20"],
        &[("SEALCHECK_FAULT_DELAY_INFER_MS", "150")],
    );
    let (offered, judged, dropped) = counts(&report);
    assert_eq!((offered, judged + dropped), (40, 40), "{report}");
    assert!(
        dropped > 0,
        "a pipeline slower than the rate must drop frames: {report}"
    );
    let fps = report["fps"].as_f64().unwrap();
    assert!(
        fps <= 20.0,
        "{fps} frames/s measured at an offered 20/s: {report}"
    );
    // Each dropped frame still got its one verdict on the line.
    assert_eq!(report["line"]["verdicts"], 42, "{report}");
    assert_eq!(report["mqtt"]["published"], 42, "{report}");

    // A rate that is no rate is refused before anything runs.
    let out = Command::new(common::sealcheck_bin())
        .args(["bench", "--config"])
        .arg(&config)
        .args(["--rate", "0"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && text.contains("--rate 0"), "{text}");
}

#[test]
fn each_camera_publishes_to_its_own_topic_in_its_own_part_order() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), "allow_anonymous true");
    let subscriber = Subscriber::start(broker.port, None);
    common::clip_prefix(dir.path(), "clip", 8);
    let config = write_config(
        dir.path(),
        "kind = \"images\"\nlocation = \"clip/frame_%05d.jpg\"\n",
        0,
        &format!("url = \"{}\"\ntopic = \"{TOPIC}\"\nqos = 1", broker.url()),
    );
    // The same clip as two cameras of one station.
    let text = std::fs::read_to_string(&config).unwrap().replace(
        "[source]\n",
        "[cameras.top]\nkind = \"images\"\nlocation = \"clip/frame_%05d.jpg\"\n[cameras.side]\n",
    );
    std::fs::write(&config, text).unwrap();
    let (code, stdout, stderr) = Sealcheck::start(&config, &[]).finish(Duration::from_secs(240));
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        wait_until(Duration::from_secs(5), || subscriber.messages().len() >= 16),
        "{} messages",
        subscriber.messages().len()
    );
    let messages = subscriber.messages();
    assert!(
        !messages
            .iter()
            .any(|m| m.topic == format!("{TOPIC}/verdict")),
        "with named cameras no verdict goes to <topic>/verdict"
    );
    let results = results(dir.path());
    for camera in ["top", "side"] {
        let timed: Vec<(SystemTime, serde_json::Value)> = messages
            .iter()
            .filter(|m| m.topic == format!("{TOPIC}/{camera}/verdict"))
            .map(|m| (m.at, serde_json::from_str(&m.payload).unwrap()))
            .collect();
        assert_schema_valid(&timed);
        let on_topic: Vec<serde_json::Value> = timed.into_iter().map(|(_, v)| v).collect();
        let seqs: Vec<u64> = on_topic
            .iter()
            .map(|v| v["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(
            seqs,
            (0..8).collect::<Vec<_>>(),
            "camera {camera}, in part order"
        );
        let lines: Vec<&serde_json::Value> =
            results.iter().filter(|r| r["camera"] == camera).collect();
        for (message, line) in on_topic.iter().zip(&lines) {
            assert_eq!(message["camera"], camera);
            assert_eq!(
                (&message["seq"], &message["verdict"], &message["reason"]),
                (&line["seq"], &line["verdict"], &line["reason"])
            );
        }
    }
    assert_eq!(
        subscriber.statuses().first().map(String::as_str),
        Some("online"),
        "the status topic is the station's, as before"
    );
    let (sent, late, published, dropped) = summary_counts(&stdout);
    assert_eq!((sent, late, published, dropped), (16, 0, 16, 0), "{stdout}");
}
