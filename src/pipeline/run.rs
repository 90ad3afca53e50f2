//! Driving one run: the operator and line sides set up, the stages started,
//! READY=1, then signals served (stop, reload) until the output ends or a
//! drain runs out, and last the threads joined and the summary made.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Sender, bounded, select};

use super::context::RunContext;
use super::error::PipelineError;
use super::parts;
use super::recipes;
use super::reload::reload;
use super::run_info::run_info;
use super::stages::{Stages, start_stages};
use super::status_text::{LineTelemetry, problems_first};
use super::summary::{GenicamFrameCounts, RunSummary};
use crate::capture::EndOfStream;
use crate::config::Config;
use crate::frame::PixelDemand;
use crate::line::deadline::DeadlineThread;
use crate::line::mqtt::MqttLine;
use crate::line::{Line, LineStats, ModelIds};
use crate::output::{LiveSettings, OutputError};
use crate::service::{Liveness, ServiceSignal, WatchdogThread};
use crate::shadow::{ShadowAgreement, ShadowState};
use crate::stats::RunStats;
use crate::status::{
    NoStatus, RunReport, RunState, ServerFeed, StatusFeed, StatusServer, Telemetry,
};

/// At the end of a run, how long verdicts still queued may take to reach the broker.
const MQTT_FLUSH: Duration = Duration::from_secs(2);

/// Runs the pipeline until the source ends or a stop is requested.
pub fn run(config: Config, context: RunContext) -> Result<RunSummary, PipelineError> {
    let started = Instant::now();
    // The status server answers from the start ("starting" while models load).
    let pixel_demand = Arc::new(PixelDemand::default());
    // What the run reports of itself; the status server, when on, reads it.
    let report = RunReport::new();
    let operators = operator_telemetry(&config, &context, &pixel_demand, &report);
    let _status_server = match (&config.status, &operators) {
        (Some(status), Some(t)) => Some(StatusServer::start(status.listen, Arc::clone(t))?),
        _ => None,
    };
    // What each result feeds the status server; with [status] off, nothing.
    let status_feed: Box<dyn StatusFeed> = match &operators {
        Some(t) => Box::new(ServerFeed::new(Arc::clone(t))),
        None => Box::new(NoStatus),
    };
    // With [recipes.NAME]: the desk every interface asks to switch.
    let recipe_desk = recipes::recipe_desk(&config);
    let recipe_counts = recipe_desk.as_deref().map(recipes::recipe_counts);
    // Every result is counted once, here: /metrics, the page and the summary read it.
    let results = match &recipe_counts {
        Some(counts) => status_feed
            .result_counters()
            .with_recipes(Arc::clone(counts)),
        None => status_feed.result_counters(),
    };
    // The shadow's agreement, counted by its thread (`/metrics` has the counters).
    let shadow_agreement = Arc::new(ShadowAgreement::new(status_feed.shadow_counters()));
    if config.shadow.is_none() {
        shadow_agreement.set_state(ShadowState::Off, None);
    }
    report.set_shadow(Arc::clone(&shadow_agreement));
    let stats = Arc::new(Mutex::new(RunStats::new(results.clone())));
    let liveness = Liveness::new();
    let (reload_tx, reload_rx) = bounded::<LiveSettings>(4);
    // The models are the start recipe's (the config's without recipes).
    let judged = recipes::start_models(&config, recipe_desk.as_ref());
    let models =
        Arc::new(ModelIds::of(&judged).for_recipe(recipe_desk.as_ref().map(|d| d.active())));
    let mqtt = config
        .mqtt
        .as_ref()
        .map(|m| MqttLine::start(m, (*models).clone(), context.measure_from_seq));
    // `plc` mode: each camera's triggers (the frame path pairs them with frames).
    let desks = parts::trigger_desks(&config);
    let waiters = parts::http_waiters(&config, &desks);
    let stations = parts::modbus_stations(&config, &desks, recipe_desk.as_ref());
    // Clients may connect from now on: StartSingleJob is refused until READY=1.
    let opcua = parts::opcua_server(&config, &desks, recipe_desk.as_ref())?;
    let opcua_outputs = opcua
        .as_ref()
        .map_or(&[][..], |(_, outputs)| outputs.as_slice());
    let outputs = parts::line_outputs(config.cameras.len(), &stations, opcua_outputs, &waiters);
    let (line_stats, lines) = camera_lines(&config, mqtt.as_ref(), &outputs);
    parts::serve_http_trigger(&config, operators.as_ref(), &desks, &waiters);
    // The PLC may connect from now on: Online stays low until READY=1.
    let modbus_server = match &config.modbus {
        Some(modbus) if !stations.is_empty() => {
            Some(crate::plc::ModbusServer::start(modbus, stations)?)
        }
        _ => None,
    };
    let telemetry = LineTelemetry {
        line: Arc::clone(&line_stats),
        mqtt: mqtt.as_ref().map(MqttLine::stats),
        modbus: modbus_server.as_ref().map(|m| Arc::clone(m.counters())),
    };
    report.set_liveness(liveness.clone());
    let (mut stages, engine) = start_stages(
        &judged,
        &context,
        (&stats, &results, &shadow_agreement),
        &liveness,
        reload_rx,
        (
            &lines,
            &models,
            parts::matched_desks(&config, &desks),
            // The page's live view shows frames no trigger claimed too.
            operators
                .as_ref()
                .map(|t| Arc::clone(&t.live) as Arc<dyn crate::trigger::UnjudgedFrames>),
        ),
        (status_feed, &report),
        Arc::clone(&pixel_demand),
    )?;
    report.set_info(run_info(&judged, &models, &engine.name));
    let _recipe_worker = match (&recipe_desk, recipe_counts) {
        (Some(desk), Some(counts)) => Some(
            recipes::start_recipes(
                &config,
                desk,
                counts,
                stages.model_swap.as_ref(),
                &lines,
                stages.capture.camera_settings(),
                operators.as_ref(),
            )
            .map_err(|e| PipelineError::Spawn("recipe", e))?,
        ),
        _ => None,
    };
    for (desk, probe) in desks.iter().zip(stages.capture.camera_streaming_probes()) {
        desk.set_streaming_probe(probe);
    }
    parts::fire_software_triggers(&desks, stages.capture.camera_software_triggers());
    let run_started = Instant::now();
    announce_running(&config, &context, &report, &stages, &telemetry, &desks);
    parts::set_ready(&desks, true);
    let watchdog = start_watchdog(
        &config,
        &context,
        &liveness,
        &stages,
        (&stats, &telemetry),
        run_started,
    )?;

    let camera_names: Vec<String> = config
        .cameras
        .iter()
        .filter_map(|c| c.name.clone())
        .collect();
    let mut current = config;
    let (stopped_by_signal, drain_deadline) = serve_signals(
        &mut current,
        &context,
        &mut stages,
        &report,
        &reload_tx,
        &liveness,
    );
    // Test-only (feature `fault-injection`); a no-op otherwise.
    crate::fault::maybe_hang_after_stop(stopped_by_signal);
    // No trigger is taken once stopping: a refused trigger is owed nothing.
    parts::set_ready(&desks, false);
    // Nor a recipe switch: the worker ends after the one it is on (not
    // waited for: preparing models may take long; nothing waits on it).
    if let Some(desk) = &recipe_desk {
        desk.detach();
    }
    if drain_deadline.is_none() {
        context.notifier.stopping();
    }
    report.set_state(RunState::Stopping);
    drop(watchdog);
    let frames_delivered = stages.capture.frames_delivered();
    let source_outages = stages.capture.outages();
    // Read once the output stage has drained (it offers the archive its frames).
    let archive = stages.archive.clone();
    let results_file = stages.results_file.clone();
    let shadow_ran = stages.shadow.started();
    let batches = stages.batches.as_ref().map(|(counts, max_batch)| {
        let (runs, frames) = counts.snapshot();
        (runs, frames, *max_batch)
    });
    let drained = drain_deadline.is_none()
        || stages.output_done.try_recv().is_ok()
        || stages.output.is_finished();
    let (end, results_written) = if drained {
        join_frame_threads(stages.ring_reader, stages.infer, stages.output)?
    } else {
        (EndOfStream::Stopped, liveness.finished())
    };
    // The counters' handles, taken while the sources are there; their values are
    // read after the shutdown below, so that every camera's last frames count.
    let genicam = stages.capture.genicam_counters();
    stages.capture.shutdown();
    // In `plc` mode each deadline clock is fed by its desk: no trigger
    // comes any more, so its feed goes and the thread ends after the last part.
    for desk in &desks {
        desk.end_deadline_clock();
    }
    join_deadlines(stages.deadlines, &lines);
    let mqtt = mqtt.map(|m| m.finish(MQTT_FLUSH));
    let line_counts = line_stats.snapshot();
    report.set_state(RunState::Stopped);
    let stats = take_stats(stats);
    Ok(RunSummary {
        backend: engine.name,
        backend_reason: engine.reason,
        frames_delivered,
        results_written,
        elapsed: started.elapsed().min(run_started.elapsed()),
        stats,
        end,
        stopped_by_signal,
        line: line_counts,
        mqtt,
        results_lost: results_file.lost_lines(),
        source_outages,
        genicam_frames: genicam
            .into_iter()
            .map(|(camera, counters)| GenicamFrameCounts {
                camera,
                whole: counters.frames(),
                incomplete: counters.incomplete(),
            })
            .collect(),
        archive_dropped: Some(
            crate::archive::ArchiveDrop::ALL.map(|why| (why.as_str(), archive.drops(why))),
        ),
        // Final: the output stage waited for the shadow's last verdicts.
        shadow: shadow_ran.then(|| shadow_agreement.snapshot()),
        batches,
        camera_names,
    })
}

/// What the status server reads (metrics, health, the page), when
/// `[status]` is on.
fn operator_telemetry(
    config: &Config,
    context: &RunContext,
    pixel_demand: &Arc<PixelDemand>,
    report: &Arc<RunReport>,
) -> Option<Arc<Telemetry>> {
    config.status.as_ref().map(|_| {
        let telemetry = Telemetry::new(
            config.service.stall_timeout,
            context.notifier.ping_interval().is_some(),
            config
                .decision
                .deadline
                .unwrap_or(crate::status::metrics::DEFAULT_DEADLINE),
            Arc::clone(pixel_demand),
            config.archive.clone(),
            report.subscribe(),
        );
        // The cameras' cavity layouts: the status feed made next tallies
        // each camera's cavities from the start.
        telemetry.set_cameras(&config.cameras);
        telemetry
    })
}

/// One line per camera (its own part numbers and deadline), counted
/// together; its outputs are MQTT's and the camera's `outputs` (Modbus,
/// the HTTP trigger's waiters).
fn camera_lines(
    config: &Config,
    mqtt: Option<&MqttLine>,
    outputs: &[Vec<Arc<dyn crate::line::LineOutput>>],
) -> (Arc<LineStats>, Vec<Arc<Line>>) {
    let line_stats = Arc::new(LineStats::default());
    let lines: Vec<Arc<Line>> = config
        .cameras
        .iter()
        .enumerate()
        .map(|(index, camera)| {
            let mut line_outputs: Vec<Arc<dyn crate::line::LineOutput>> =
                mqtt.iter().map(|m| m.output()).collect();
            line_outputs.extend(outputs.get(index).into_iter().flatten().cloned());
            Arc::new(
                Line::of_camera(
                    line_outputs,
                    camera.decision.deadline,
                    camera.name.as_deref().map(Arc::from),
                    Arc::clone(&line_stats),
                )
                .with_layout(camera.source.layout.clone()),
            )
        })
        .collect();
    (line_stats, lines)
}

/// READY=1, and the report's view of the running sources, line and results file.
fn announce_running(
    config: &Config,
    context: &RunContext,
    report: &RunReport,
    stages: &Stages,
    telemetry: &LineTelemetry,
    desks: &[Arc<crate::trigger::TriggerDesk>],
) {
    context.notifier.ready();
    report.set_external(crate::status::ExternalStats {
        line: Some(Arc::clone(&telemetry.line)),
        mqtt: telemetry.mqtt.clone(),
        source: stages.capture.first_status(),
        cameras: stages.capture.camera_sources(),
        results_file: Some(stages.results_file.clone()),
        triggers: desks.to_vec(),
        modbus: telemetry.modbus.clone(),
    });
    report.set_state(RunState::Running);
    log::info!(target: "sealcheck::pipeline", source = config.first_source().kind.name(), cameras = config.cameras.len(), results = config.output.results.display().to_string().as_str(); "pipeline running");
}

/// The watchdog thread: pings while the stages move, with the STATUS= text.
fn start_watchdog(
    config: &Config,
    context: &RunContext,
    liveness: &Liveness,
    stages: &Stages,
    (stats, telemetry): (&Arc<Mutex<RunStats>>, &LineTelemetry),
    run_started: Instant,
) -> Result<WatchdogThread, PipelineError> {
    crate::service::spawn_watchdog(
        context.notifier.clone(),
        liveness.clone(),
        config.service.stall_timeout,
        stages.capture.streaming_probe(),
        {
            let stats = Arc::clone(stats);
            let telemetry = telemetry.clone();
            let sources = stages.capture.named_statuses();
            let results_file = stages.results_file.clone();
            move || {
                let fps_since = run_started.elapsed().as_secs_f64().max(1e-9);
                let line = stats
                    .lock()
                    .map(|s| s.status_line(s.counts().frames as f64 / fps_since))
                    .unwrap_or_default();
                problems_first(&sources, &results_file, line) + &telemetry.status_note()
            }
        },
    )
    .map_err(|e| PipelineError::Spawn("watchdog", e))
}

/// Serves stop and reload requests until the output stage ends, a second
/// stop comes, or a drain runs past `drain_timeout_s`. Returns whether a
/// signal stopped the run, and the drain's deadline when one was started.
fn serve_signals(
    current: &mut Config,
    context: &RunContext,
    stages: &mut Stages,
    report: &RunReport,
    reload_tx: &Sender<LiveSettings>,
    liveness: &Liveness,
) -> (bool, Option<Instant>) {
    let mut signals = context.signals.clone();
    let mut stopped_by_signal = false;
    let mut drain_deadline: Option<Instant> = None;
    loop {
        let timeout = drain_deadline.map_or(Duration::from_secs(3600), |d| {
            d.saturating_duration_since(Instant::now())
        });
        select! {
            recv(stages.output_done) -> _ => break,
            recv(signals) -> signal => match signal {
                Ok(ServiceSignal::Stop) if drain_deadline.is_none() => {
                    log::info!(target: "sealcheck::pipeline", drain_timeout_s = current.service.drain_timeout.as_secs_f64(); "stop requested: stopping the source and finishing frames in flight");
                    context.notifier.stopping();
                    report.set_state(RunState::Stopping);
                    stopped_by_signal = true;
                    arm_stop_guard(current.service.drain_timeout);
                    stages.capture.stop();
                    drain_deadline = Some(Instant::now() + current.service.drain_timeout);
                }
                Ok(ServiceSignal::Stop) | Ok(ServiceSignal::ForceStop) => {
                    log::warn!(target: "sealcheck::pipeline", "second stop request: exiting without waiting for frames in flight");
                    stopped_by_signal = true;
                    break;
                }
                Ok(ServiceSignal::Reload) => {
                    context.notifier.reloading();
                    reload(current, reload_tx, stages.model_swap.as_ref(), &mut stages.shadow);
                    context.notifier.ready();
                }
                // Nobody can send any more (a bench or a test): stop listening.
                Err(_) => signals = crossbeam_channel::never(),
            },
            default(timeout) => {
                if drain_deadline.is_some_and(|d| Instant::now() >= d) {
                    let left = stages.unfinished();
                    log::error!(target: "sealcheck::pipeline", in_flight = liveness.in_flight(), left_behind = left.as_str();
                        "frames in flight did not finish within drain_timeout_s; exiting, leaving behind the {left} thread(s)");
                    break;
                }
            }
        }
    }
    (stopped_by_signal, drain_deadline)
}

/// Arms the last word on a stop (`service::StopGuard`): the process ends
/// `drain_timeout` plus `STOP_GRACE` after the request, whatever is stuck.
fn arm_stop_guard(drain_timeout: Duration) {
    let limit = drain_timeout + crate::service::STOP_GRACE;
    if let Err(e) = crate::service::StopGuard::arm(limit) {
        log::warn!(target: "sealcheck::pipeline", error = e.to_string().as_str();
            "cannot start the stop guard; a stuck thread could keep the process from ending");
    }
}

/// Joins the stage threads after a full drain: how capture ended (the ring
/// reader reports it) and the result lines written.
fn join_frame_threads(
    ring_reader: JoinHandle<EndOfStream>,
    infer: Option<JoinHandle<()>>,
    output: JoinHandle<Result<u64, OutputError>>,
) -> Result<(EndOfStream, u64), PipelineError> {
    let ring_reader_name = if infer.is_some() {
        "preprocess"
    } else {
        "device"
    };
    let end = ring_reader
        .join()
        .map_err(|_| PipelineError::Panicked(ring_reader_name))?;
    if let Some(infer) = infer {
        infer.join().map_err(|_| PipelineError::Panicked("infer"))?;
    }
    let written = output
        .join()
        .map_err(|_| PipelineError::Panicked("output"))??;
    Ok((end, written))
}

/// Capture is gone: each deadline thread fails what is still open at its
/// deadline (nothing, after a full drain), then ends.
fn join_deadlines(deadlines: Vec<DeadlineThread>, lines: &[Arc<Line>]) {
    for (deadline, line) in deadlines.into_iter().zip(lines) {
        let deadline_wait = line.deadline().unwrap_or_default() + Duration::from_secs(1);
        if !deadline.join_within(deadline_wait) {
            log::warn!(target: "sealcheck::line", waited_ms = deadline_wait.as_millis() as u64;
                "a deadline thread did not end after capture; it is left behind");
        }
    }
}

/// The run's statistics: the last handle once the output thread let go of
/// them, else taken from under a thread left behind that still holds them.
fn take_stats(stats: Arc<Mutex<RunStats>>) -> RunStats {
    Arc::try_unwrap(stats)
        .map(|m| m.into_inner().unwrap_or_default())
        .unwrap_or_else(|shared| {
            std::mem::take(&mut *shared.lock().unwrap_or_else(|p| p.into_inner()))
        })
}
