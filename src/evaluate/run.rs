//! One `sealcheck evaluate`: every engine asked for judges the labelled
//! images (`evaluate`), with its time, memory and tally, for the report and
//! the gate.

use std::time::Instant;

use super::gate;
use super::image_set::ImageSet;
use super::outcome::{EngineOutcome, EngineRun, EvaluateError, EvaluateRequest, Evaluation};
use super::overlay;
use super::report;
use super::spec::EngineSpec;
use super::tally::{self, EngineTally};

use crate::config::Config;
use crate::frame::FrameMeta;
use crate::inspect::ImageJudge;

/// Runs the evaluation and writes the report folder.
pub fn evaluate(request: EvaluateRequest) -> Result<Evaluation, EvaluateError> {
    let set = ImageSet::open(&request.images, request.labels.as_deref())?;
    // Labels per cavity: each cavity is cropped by the config's layout.
    let layout = request.config.first_source().layout.clone();
    if set.has_cavities() {
        let Some(layout) = &layout else {
            return Err(EvaluateError::Cavities(
                "the labels name cavities, but the config has no [source.layout]: add the layout the frames were taken with".to_string(),
            ));
        };
        if let Some(f) = set
            .frames
            .iter()
            .find(|f| f.cavity.is_some_and(|n| !layout.is_enabled(n)))
        {
            return Err(EvaluateError::Cavities(format!(
                "frame {} labels cavity {}, which is not a judged cavity of [source.layout] ({} cavities, disabled ones left out)",
                f.frame,
                f.cavity.unwrap_or_default(),
                layout.count()
            )));
        }
    }
    let report_dir = report::prepare_folder(&request.report)?;
    let mut reference = open_engine(&request.config, &request.reference).map_err(|reason| {
        EvaluateError::Reference {
            spec: request.reference.text.clone(),
            reason,
        }
    })?;
    let mut candidates: Vec<(EngineSpec, Result<OpenEngine, String>)> = request
        .candidates
        .iter()
        .map(|spec| (spec.clone(), open_engine(&request.config, spec)))
        .collect();
    for (spec, engine) in &mut candidates {
        if let Ok(open) = engine
            && open.judge.geometry != reference.judge.geometry
        {
            *engine = Err(format!(
                "its models' tensor shapes {:?} differ from the reference's {:?}",
                open.judge.geometry, reference.judge.geometry
            ));
            log::warn!(target: "sealcheck::evaluate", spec = spec.text.as_str(); "candidate not evaluated: tensor shapes differ");
        }
    }
    let mut overlays = overlay::OverlayWriter::new(&report_dir, reference.judge.geometry.seg_hw);
    let thresholds = request.config.decision;
    let mut gt = tally::GroundTruth::new(reference.judge.geometry.seg_hw);
    for (seq, frame) in set.frames.iter().enumerate() {
        let meta = FrameMeta::now(seq as u64);
        let cavity = frame.cavity.zip(layout.as_deref());
        let ref_decision = reference
            .judge
            .judge_cavity(&frame.image, meta, &thresholds, cavity);
        let truth = frame.ground_truth_mask.as_deref().and_then(|p| gt.load(p));
        reference
            .tally
            .record(frame, &ref_decision, &reference.judge.work, None, truth);
        for (spec, engine) in &mut candidates {
            let Ok(open) = engine else { continue };
            let decision = open
                .judge
                .judge_cavity(&frame.image, meta, &thresholds, cavity);
            let record = open.tally.record(
                frame,
                &decision,
                &open.judge.work,
                Some((&ref_decision, &reference.judge.work)),
                truth,
            );
            // Overlays draw a whole frame's masks; a cavity's are its crop's.
            if record.disagrees() && cavity.is_none() {
                overlays.draw(
                    &spec.text,
                    frame,
                    open.judge.frame(),
                    &reference.judge.work.mask,
                    &open.judge.work.mask,
                );
            }
        }
    }
    let labelled = set.labelled();
    let reference_tally = reference.tally;
    let reference_run = EngineRun {
        engine: reference.engine,
        load_ms: reference.load_ms,
        load_rss_mib: reference.load_rss_mib,
        tally: reference_tally,
    };
    let candidates: Vec<EngineOutcome> = candidates
        .into_iter()
        .map(|(spec, engine)| {
            let result = engine.map(|open| EngineRun {
                engine: open.engine,
                load_ms: open.load_ms,
                load_rss_mib: open.load_rss_mib,
                tally: open.tally,
            });
            let rules = gate::rules(
                &request.config.evaluate,
                &reference_run.tally,
                result.as_ref().ok().map(|r| &r.tally),
                labelled,
            );
            EngineOutcome {
                spec,
                result,
                rules,
            }
        })
        .collect();
    let reference_rules =
        gate::reference_rules(&request.config.evaluate, &reference_run.tally, labelled);
    let evaluation = Evaluation {
        images: request.images,
        labelled,
        frames: {
            let mut frames: Vec<u64> = set.frames.iter().map(|f| f.frame).collect();
            frames.dedup();
            frames.len()
        },
        cavities: set.frames.iter().filter(|f| f.cavity.is_some()).count(),
        reference: EngineOutcome {
            spec: request.reference,
            result: Ok(reference_run),
            rules: reference_rules,
        },
        candidates,
        peak_rss_mib: memory_mib("VmHWM:"),
        report: report_dir.clone(),
    };
    report::write(&evaluation, &overlays).map_err(|source| EvaluateError::Report {
        path: report_dir,
        source,
    })?;
    Ok(evaluation)
}

struct OpenEngine {
    engine: String,
    judge: ImageJudge,
    load_ms: f64,
    load_rss_mib: f64,
    tally: EngineTally,
}

/// Opens one engine; `Err` says, for the table, why it cannot be evaluated.
fn open_engine(base: &Config, spec: &EngineSpec) -> Result<OpenEngine, String> {
    let config = spec.config(base).map_err(|e| e.problem)?;
    let rss_before = memory_mib("VmRSS:");
    let started = Instant::now();
    let judge = ImageJudge::open(&config).map_err(|e| e.to_string())?;
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    let engine = judge.backend.kind().as_str().to_string();
    log::info!(target: "sealcheck::evaluate", spec = spec.text.as_str(), engine = engine.as_str(), load_ms = load_ms, segmentation:% = config.segmentation.path.display(), classifier:% = config.classifier.path.display(); "engine opened");
    Ok(OpenEngine {
        tally: EngineTally::new(),
        engine,
        judge,
        load_ms,
        load_rss_mib: (memory_mib("VmRSS:") - rss_before).max(0.0),
    })
}

/// A `/proc/self/status` memory line in MiB (0 where there is none).
fn memory_mib(key: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0)
}
