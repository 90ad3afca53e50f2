//! `sealcheck bench --trigger plc --rate R`: parts triggered through the
//! Modbus server as a PLC triggers them, on the config's own (live) camera,
//! measured from the first part as the line sees it:
//!
//! - trigger → frame: from the trigger to the capture of the part's frame
//!   (`delay_ms` plus the wait for the next frame);
//! - frame → verdict: from that capture to the verdict (the result line);
//! - trigger → ResultsValid: as a PLC polling every millisecond sees it,
//!   from just before its Trigger write;
//! - the Modbus server thread's CPU time over the run.
//!
//! ```text
//! trigger thread (PLC): PartId, Trigger=1, TriggerAck?, Trigger=0 ─┐      sealcheck pipeline (this process,
//! result thread (PLC): ResultsValid? (1 ms), read, ResultsAck ─────┴─TCP─▶ the config's camera, [modbus])
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::bounded;
use tokio_modbus::Slave;
use tokio_modbus::client::sync::{self, Reader, Writer};

use crate::config::{Config, ModbusConfig, TriggerMode};
use crate::pipeline::{self, RunContext};
use crate::service::{Notifier, ServiceSignal};
use crate::stats::LatencyHistogram;

/// How often the PLC threads poll, like a PLC scanning every millisecond.
const POLL: Duration = Duration::from_millis(1);
/// The longest a part's result may take before the bench gives up on it.
const RESULT_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum PartsBenchError {
    #[error("the bench's PLC cannot reach the Modbus server at {addr}: {message}")]
    Plc { addr: SocketAddr, message: String },
    #[error("no free loopback port for the bench's Modbus server: {0}")]
    Port(std::io::Error),
    #[error(transparent)]
    Pipeline(#[from] pipeline::PipelineError),
    #[error("the pipeline thread panicked")]
    Panicked,
    /// A PLC triggers parts of a camera that streams: a source read as fast
    /// as it decodes, and ended, is done before the first trigger.
    #[error(
        "bench --trigger plc needs a live camera, and the config's source (kind = \"{kind}\") is not live: it is read as fast as it decodes and ends before a PLC could trigger a part. Use a camera, or a kind = \"pipeline\" source with live = true (config/demo-plc.toml loops the sample clip at 30 frames/s)"
    )]
    NotLive { kind: &'static str },
}

/// What was measured, every figure over the measured parts.
pub struct PartsReport {
    pub rate: f64,
    pub parts: u64,
    pub warmup: u64,
    /// Parts triggered, accepted (TriggerAck), and seen on Modbus.
    pub triggered: u64,
    pub accepted: u64,
    pub results: u64,
    pub trigger_to_frame: LatencyHistogram,
    pub frame_to_verdict: LatencyHistogram,
    pub trigger_to_results_valid: LatencyHistogram,
    /// From the part's frame's capture to ResultsValid as the PLC saw it
    /// (counted from the PLC's Trigger write, so a little over).
    pub frame_to_results_valid: LatencyHistogram,
    /// The judged parts' stage times (the result lines' `latency_ms`):
    /// preprocess, segment, classify.
    pub stages: [LatencyHistogram; 3],
    /// Per reason, from the result lines of the measured parts.
    pub reasons: std::collections::BTreeMap<String, u64>,
    /// The Modbus server thread's CPU time over the wall time, in percent.
    pub modbus_cpu_pct: Option<f64>,
    pub wall: Duration,
    pub summary: pipeline::RunSummary,
}

/// Runs the bench: `warmup` parts first (left out), then `parts` parts at `rate` per second.
pub fn run(
    config: &Config,
    rate: f64,
    parts: u64,
    warmup: u64,
) -> Result<PartsReport, PartsBenchError> {
    if let Some(camera) = config.cameras.iter().find(|c| !c.source.kind.is_live()) {
        return Err(PartsBenchError::NotLive {
            kind: camera.source.kind.name(),
        });
    }
    let mut config = config.clone();
    config.trigger.mode = TriggerMode::Plc;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(PartsBenchError::Port)?
        .port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut modbus = config.modbus.clone().unwrap_or_else(|| ModbusConfig {
        listen: addr,
        buffer: 8,
        handshake: true,
        allow: Vec::new(),
        max_connections: 4,
        idle_timeout: Duration::from_secs(60),
    });
    modbus.listen = addr;
    modbus.handshake = true;
    // The bench's PLC is this process, on loopback.
    modbus.allow = Vec::new();
    config.modbus = Some(modbus);
    let results_path = std::env::temp_dir().join(format!(
        "sealcheck-bench-parts-{}.jsonl",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&results_path);
    config.output.results = results_path.clone();
    config.output.log_verdicts = false;

    let (stop, signals) = bounded::<ServiceSignal>(4);
    let context = RunContext::configured(Notifier::disabled(), signals);
    let pipeline = thread::Builder::new()
        .name("bench-run".into())
        .spawn(move || pipeline::run(config, context))
        .map_err(|e| PartsBenchError::Plc {
            addr,
            message: e.to_string(),
        })?;

    let started = Instant::now();
    let measured = plc_side(addr, rate, parts + warmup);
    let wall = started.elapsed();
    // Its whole life (start-up included): the cost is not flattered.
    let modbus_cpu = modbus_thread_cpu();
    let _ = stop.send(ServiceSignal::Stop);
    let summary = pipeline.join().map_err(|_| PartsBenchError::Panicked)??;
    let (sent, results) = measured?;
    let lines = read_lines(&results_path);
    let _ = std::fs::remove_file(&results_path);

    let mut report = PartsReport {
        rate,
        parts,
        warmup,
        triggered: parts + warmup,
        accepted: sent.iter().filter(|s| s.is_some()).count() as u64,
        results: results.len() as u64,
        trigger_to_frame: LatencyHistogram::default(),
        frame_to_verdict: LatencyHistogram::default(),
        trigger_to_results_valid: LatencyHistogram::default(),
        frame_to_results_valid: LatencyHistogram::default(),
        stages: Default::default(),
        reasons: Default::default(),
        modbus_cpu_pct: modbus_cpu.map(|cpu| cpu / wall.as_secs_f64() * 100.0),
        wall,
        summary,
    };
    let frame_ms: std::collections::HashMap<u64, f64> = lines
        .iter()
        .filter_map(|l| Some((l["part_id"].as_u64()?, l["trigger_ms"]["frame"].as_f64()?)))
        .collect();
    for (part_id, seen) in results {
        let Some(Some(at)) = sent.get(part_id as usize) else {
            continue;
        };
        if u64::from(part_id) >= warmup {
            let to_valid = seen.saturating_duration_since(*at).as_secs_f64() * 1e3;
            report.trigger_to_results_valid.record(to_valid);
            if let Some(frame) = frame_ms.get(&u64::from(part_id)) {
                report.frame_to_results_valid.record(to_valid - frame);
            }
        }
    }
    for line in &lines {
        if line["part_id"].as_u64().is_none_or(|id| id < warmup) {
            continue;
        }
        let reason = line["reason"].as_str().unwrap_or("?").to_string();
        *report.reasons.entry(reason).or_insert(0) += 1;
        let frame = line["trigger_ms"]["frame"].as_f64();
        let verdict = line["trigger_ms"]["verdict"].as_f64();
        if let (Some(frame), Some(verdict)) = (frame, verdict) {
            report.trigger_to_frame.record(frame);
            report.frame_to_verdict.record(verdict - frame);
        }
        for (histogram, key) in report
            .stages
            .iter_mut()
            .zip(["preprocess", "segment", "classify"])
        {
            if let Some(ms) = line["latency_ms"][key].as_f64() {
                histogram.record(ms);
            }
        }
    }
    Ok(report)
}

/// When each part's trigger was acknowledged (`None`: refused), and when
/// the PLC saw each result (by part id).
type PlcSide = (Vec<Option<Instant>>, Vec<(u32, Instant)>);

/// The PLC: one connection triggers parts 0.. at `rate`, another takes
/// their results, both polling every millisecond.
fn plc_side(addr: SocketAddr, rate: f64, parts: u64) -> Result<PlcSide, PartsBenchError> {
    let connect = || -> Result<sync::Context, PartsBenchError> {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let tried =
                sync::tcp::connect_slave_with_timeout(addr, Slave(1), Some(Duration::from_secs(5)))
                    .map_err(|e| e.to_string())
                    .and_then(|mut ctx| match ctx.read_discrete_inputs(0, 2) {
                        Ok(Ok(bits)) if bits[0] => Ok(ctx),
                        Ok(Ok(_)) => Err("not Online yet".to_string()),
                        Ok(Err(e)) => Err(format!("exception {e:?}")),
                        Err(e) => Err(e.to_string()),
                    });
            match tried {
                Ok(ctx) => return Ok(ctx),
                Err(message) if Instant::now() >= deadline => {
                    return Err(PartsBenchError::Plc { addr, message });
                }
                Err(_) => thread::sleep(Duration::from_millis(100)),
            }
        }
    };
    let plc_error = |message: String| PartsBenchError::Plc { addr, message };
    let mut trigger = connect()?;
    let taker = connect()?;
    trigger
        .write_single_coil(0, true)
        .map_err(|e| plc_error(e.to_string()))?
        .map_err(|e| plc_error(format!("TriggerEnable: exception {e:?}")))?;
    let results = thread::spawn(move || take_results(taker, parts));
    let every = Duration::from_secs_f64(1.0 / rate.max(0.001));
    let start = Instant::now();
    let mut sent = Vec::with_capacity(parts as usize);
    // Parts do not come in step with the camera: the trigger period is
    // longer by 1/parts, so over the run the triggers sweep one whole
    // period against the frames (the wait for the next frame covers the
    // frame interval) and no two come closer than the period.
    let stretch = 1.0 + 1.0 / parts.max(1) as f64;
    for part in 0..parts {
        let due = start + every.mul_f64(part as f64 * stretch);
        thread::sleep(due.saturating_duration_since(Instant::now()));
        sent.push(trigger_one(&mut trigger, part as u32).map_err(plc_error)?);
    }
    let results = results
        .join()
        .map_err(|_| plc_error("result thread panicked".into()))?;
    Ok((sent, results.map_err(plc_error)?))
}

/// PartId, Trigger high, TriggerAck (polled), Trigger low; the ack's time.
fn trigger_one(ctx: &mut sync::Context, id: u32) -> Result<Option<Instant>, String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    ctx.write_multiple_registers(0, &[(id >> 16) as u16, id as u16])
        .map_err(|x| e(&x))?
        .map_err(|x| format!("{x:?}"))?;
    let sent = Instant::now();
    ctx.write_single_coil(1, true)
        .map_err(|x| e(&x))?
        .map_err(|x| format!("{x:?}"))?;
    let mut acked = None;
    while sent.elapsed() < Duration::from_millis(500) {
        let bits = ctx
            .read_discrete_inputs(2, 1)
            .map_err(|x| e(&x))?
            .map_err(|x| format!("{x:?}"))?;
        if bits[0] {
            acked = Some(sent);
            break;
        }
        thread::sleep(POLL);
    }
    ctx.write_single_coil(1, false)
        .map_err(|x| e(&x))?
        .map_err(|x| format!("{x:?}"))?;
    Ok(acked)
}

/// Takes `parts` results with the four-way handshake (or until none comes for `RESULT_WAIT`).
fn take_results(mut ctx: sync::Context, parts: u64) -> Result<Vec<(u32, Instant)>, String> {
    let e = |x: &dyn std::fmt::Display| x.to_string();
    let mut got = Vec::with_capacity(parts as usize);
    let mut last = Instant::now();
    while (got.len() as u64) < parts && last.elapsed() < RESULT_WAIT {
        let valid = ctx
            .read_discrete_inputs(3, 1)
            .map_err(|x| e(&x))?
            .map_err(|x| format!("{x:?}"))?;
        if !valid[0] {
            thread::sleep(POLL);
            continue;
        }
        let seen = Instant::now();
        last = seen;
        let r = ctx
            .read_input_registers(2, 2)
            .map_err(|x| e(&x))?
            .map_err(|x| format!("{x:?}"))?;
        got.push(((u32::from(r[0]) << 16) | u32::from(r[1]), seen));
        ctx.write_single_coil(2, true)
            .map_err(|x| e(&x))?
            .map_err(|x| format!("{x:?}"))?;
        while ctx
            .read_discrete_inputs(3, 1)
            .map_err(|x| e(&x))?
            .map_err(|x| format!("{x:?}"))?[0]
        {
            thread::sleep(POLL);
        }
        ctx.write_single_coil(2, false)
            .map_err(|x| e(&x))?
            .map_err(|x| format!("{x:?}"))?;
    }
    Ok(got)
}

/// CPU seconds (user + system) of this process's thread named "modbus".
fn modbus_thread_cpu() -> Option<f64> {
    let ticks = 100.0; // USER_HZ on Linux
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let path: PathBuf = task.path();
        if std::fs::read_to_string(path.join("comm")).ok()?.trim() != "modbus" {
            continue;
        }
        let stat = std::fs::read_to_string(path.join("stat")).ok()?;
        // Fields after the command's closing parenthesis; utime and stime are 14 and 15.
        let rest = stat.rsplit_once(')')?.1;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let utime: f64 = fields.get(11)?.parse().ok()?;
        let stime: f64 = fields.get(12)?.parse().ok()?;
        return Some((utime + stime) / ticks);
    }
    None
}

fn read_lines(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

impl PartsReport {
    pub fn render(&self) -> String {
        let q = |h: &LatencyHistogram| {
            format!(
                "p50 {:.2} / p99 {:.2} / max {:.2} ms ({} parts)",
                h.quantile(0.5).unwrap_or(f64::NAN),
                h.quantile(0.99).unwrap_or(f64::NAN),
                h.max_ms(),
                h.count()
            )
        };
        let mut out = format!(
            "bench --trigger plc: {} parts at {} parts/s through Modbus TCP ({} warm-up parts left out), backend {}\n\
             triggered {}, acknowledged {}, results seen on Modbus {}\n\
             trigger -> frame:         {}\n\
             frame -> verdict:         {}\n\
             trigger -> ResultsValid:  {} (a PLC polling every 1 ms)\n\
             frame -> ResultsValid:    {}\n",
            self.parts,
            self.rate,
            self.warmup,
            self.summary.backend,
            self.triggered,
            self.accepted,
            self.results,
            q(&self.trigger_to_frame),
            q(&self.frame_to_verdict),
            q(&self.trigger_to_results_valid),
            q(&self.frame_to_results_valid),
        );
        for (name, h) in ["preprocess", "segment", "classify"]
            .iter()
            .zip(&self.stages)
        {
            out.push_str(&format!("  of which {name:<10} {}\n", q(h)));
        }
        out.push_str(&format!("reasons: {:?}\n", self.reasons));
        if let Some(cpu) = self.modbus_cpu_pct {
            out.push_str(&format!(
                "Modbus server thread: {cpu:.3} % of one core over {:.1} s\n",
                self.wall.as_secs_f64()
            ));
        }
        out
    }
}
