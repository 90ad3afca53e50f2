//! `make demo-plc`: a line's PLC against `sealcheck run` over Modbus TCP.
//!
//! ```text
//! demo_plc ──spawns──▶ sealcheck run --config CONFIG   (live camera, [trigger] mode = "plc", [modbus])
//!    │                          ▲
//!    └── PLC (Modbus TCP) ──────┘  TriggerEnable; per part: PartId, Trigger, TriggerAck, Trigger low;
//!                                  ResultsValid, read, ResultsAck, ResultsValid low, ResultsAck low
//! ```
//!
//! The PLC is the simulator of the tests (`tests/common/plc.rs`), which runs the
//! handshake of docs/INTEGRATION.md ("Modbus TCP") with bounded waits. At the end
//! the service is stopped (SIGTERM, as systemd stops it) and the parts the PLC
//! read back are compared with the results file.
//!
//! Usage: `demo_plc SEALCHECK CONFIG [PARTS]` (from the repository's root).
//! Exit 0 when every part was triggered, judged and read back, each read-back
//! matching its line of the results file; 1 otherwise, saying which.

#[allow(dead_code)]
#[path = "../tests/common/plc.rs"]
mod plc;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// How long the service may take to open its models and camera.
const START_WAIT: Duration = Duration::from_secs(120);
/// A part's trigger and its result, each at most this long.
const PART_WAIT: Duration = Duration::from_secs(10);
/// How long the service may take to drain and stop.
const STOP_WAIT: Duration = Duration::from_secs(30);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(binary), Some(config)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: demo_plc SEALCHECK CONFIG [PARTS]");
        return ExitCode::from(2);
    };
    let parts: u32 = match args.get(3).map(|p| p.parse()) {
        None => 300,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("demo_plc: PARTS must be a whole number above 0");
            return ExitCode::from(2);
        }
    };
    match run(Path::new(binary), Path::new(config), parts) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("demo_plc: {e}");
            ExitCode::from(1)
        }
    }
}

/// One part as the PLC saw it.
struct Part {
    id: u32,
    result: Option<plc::PlcResult>,
}

fn run(binary: &Path, config_path: &Path, parts: u32) -> Result<bool, String> {
    let config = sealcheck::config::load(config_path).map_err(|e| format!("{e}"))?;
    let modbus = config
        .modbus
        .as_ref()
        .ok_or("the config has no [modbus]: the PLC has nothing to talk to")?;
    let results = config.output.results.clone();
    let _ = std::fs::remove_file(&results);
    let log = results.with_extension("log");
    let log_file = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    println!(
        "demo_plc: starting {} run --config {} (its log: {})",
        binary.display(),
        config_path.display(),
        log.display()
    );
    let mut service = Command::new(binary)
        .args(["run", "--config"])
        .arg(config_path)
        .stdout(Stdio::piped())
        .stderr(log_file)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
    let outcome = drive(modbus.listen, parts, &mut service);
    let summary = stop(&mut service);
    let judged = result_lines(&results);
    let mut read_back = 0;
    let mut matching = 0;
    let mut triggered = 0;
    let parts_seen = match outcome {
        Ok(list) => list,
        Err(e) => {
            println!("{}", summary.unwrap_or_default());
            return Err(format!("{e} (the service's log: {})", log.display()));
        }
    };
    let mut reasons: BTreeMap<String, u32> = BTreeMap::new();
    for part in &parts_seen {
        triggered += 1;
        let Some(result) = part.result else { continue };
        read_back += 1;
        if let Some((verdict, reason)) = judged.get(&u64::from(part.id)) {
            let pass = verdict == "pass";
            if pass == result.pass && u64::from(result.part_id) == u64::from(part.id) {
                matching += 1;
            }
            *reasons.entry(format!("{verdict} {reason}")).or_default() += 1;
        }
    }
    let in_file = parts_seen
        .iter()
        .filter(|p| judged.contains_key(&u64::from(p.id)))
        .count();
    println!("{}", summary.unwrap_or_default().trim_end());
    println!("parts triggered: {triggered} of {parts} (each accepted with TriggerAck)");
    println!(
        "parts judged: {in_file} (results file {}): {}",
        results.display(),
        reasons
            .iter()
            .map(|(r, n)| format!("{n} {r}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "parts read back over Modbus: {read_back}, {matching} matching their result line (part id and pass/fail)"
    );
    let all = triggered == parts && read_back == parts && matching == parts;
    if !all {
        println!(
            "demo_plc: not every part went through: see above and {}",
            log.display()
        );
    }
    Ok(all)
}

/// The PLC: connect once the server answers, enable triggers, then each part
/// in turn (trigger, then its result with the four-way handshake).
fn drive(addr: std::net::SocketAddr, parts: u32, service: &mut Child) -> Result<Vec<Part>, String> {
    let start = Instant::now();
    let mut plc = loop {
        if let Ok(Some(status)) = service.try_wait() {
            return Err(format!(
                "sealcheck ended before its Modbus server answered ({status})"
            ));
        }
        match plc::Plc::try_connect(addr, 1) {
            Ok(plc) => break plc,
            Err(_) if start.elapsed() < START_WAIT => {
                std::thread::sleep(Duration::from_millis(200))
            }
            Err(e) => {
                return Err(format!(
                    "no Modbus server at {addr} after {START_WAIT:?}: {e}"
                ));
            }
        }
    };
    // TriggerEnable first: a trigger before it is refused (ErrorCode 1).
    plc.enable(true);
    while !plc.bits().trigger_ready {
        if start.elapsed() > START_WAIT {
            return Err(format!(
                "TriggerReady stayed low {START_WAIT:?} after start (is the camera streaming?)"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    println!(
        "demo_plc: station online after {:.1} s; triggering {parts} parts",
        start.elapsed().as_secs_f64()
    );
    let mut list = Vec::with_capacity(parts as usize);
    for id in 1..=parts {
        if let Err(plc::TriggerRefused::NoAck { error_code }) =
            plc.trigger_when_ready(id, PART_WAIT)
        {
            return Err(format!(
                "part {id}: trigger refused, ErrorCode {error_code} (docs/INTEGRATION.md, \"ErrorCode\")"
            ));
        }
        let result = plc.take_result(PART_WAIT);
        if result.is_some_and(|r| r.part_id != id) {
            return Err(format!(
                "part {id}: the PLC read the result of part {}",
                result.map_or(0, |r| r.part_id)
            ));
        }
        list.push(Part { id, result });
    }
    plc.enable(false);
    Ok(list)
}

/// SIGTERM, as systemd stops the service; its summary (stdout) once it ended.
fn stop(service: &mut Child) -> Option<String> {
    // SAFETY: kill(2) on the child's pid, which is ours until it is waited for.
    unsafe {
        libc::kill(service.id() as libc::pid_t, libc::SIGTERM);
    }
    let start = Instant::now();
    loop {
        match service.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() < STOP_WAIT => {
                std::thread::sleep(Duration::from_millis(100))
            }
            _ => {
                let _ = service.kill();
                let _ = service.wait();
                return None;
            }
        }
    }
    let mut out = String::new();
    use std::io::Read as _;
    service.stdout.take()?.read_to_string(&mut out).ok()?;
    Some(out)
}

/// The results file's lines by part id: (verdict, reason).
fn result_lines(path: &PathBuf) -> BTreeMap<u64, (String, String)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| {
            let id = v.get("part_id")?.as_u64()?;
            let verdict = v.get("verdict")?.as_str()?.to_string();
            let reason = v.get("reason")?.as_str()?.to_string();
            Some((id, (verdict, reason)))
        })
        .collect()
}
