//! What `evaluate` hands back: a table for the terminal, `evaluation.json`
//! (summary and every frame, so each figure can be recounted) and
//! `index.html` with the frames where a candidate disagrees.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::outcome::{EngineOutcome, EngineRun, EvaluateError, Evaluation};
use super::overlay::OverlayWriter;
use super::tally::FrameRecord;

pub fn prepare_folder(dir: &Path) -> Result<PathBuf, EvaluateError> {
    std::fs::create_dir_all(dir.join("overlays")).map_err(|source| EvaluateError::Report {
        path: dir.to_path_buf(),
        source,
    })?;
    Ok(dir.to_path_buf())
}

pub fn write(evaluation: &Evaluation, overlays: &OverlayWriter) -> std::io::Result<()> {
    let json = to_json(evaluation);
    std::fs::write(
        evaluation.report.join("evaluation.json"),
        serde_json::to_string_pretty(&json).map_err(std::io::Error::other)? + "\n",
    )?;
    std::fs::write(
        evaluation.report.join("index.html"),
        html(evaluation, overlays),
    )
}

fn opt(v: Option<f64>) -> Value {
    v.filter(|x| x.is_finite()).map_or(Value::Null, Value::from)
}

fn engine_json(outcome: &EngineOutcome) -> Value {
    let rules: Vec<Value> = outcome
        .rules
        .iter()
        .map(|r| json!({"rule": r.rule, "passed": r.passed, "skipped": r.skipped, "detail": r.detail}))
        .collect();
    let run = match &outcome.result {
        Err(why) => {
            return json!({"spec": outcome.spec.text, "evaluated": false, "not_evaluated_because": why, "gate": rules});
        }
        Ok(run) => run,
    };
    let t = &run.tally;
    let labels = t.label_scores().map(|s| {
        json!({"accuracy": s.accuracy, "defect_recall": s.defect_recall, "false_reject_rate": s.false_reject_rate, "wrong_verdicts": s.wrong})
    });
    let reference = t.reference_scores().map(|s| {
        json!({"verdict_flips": s.verdict_flips, "mask_iou_mean": s.mask_iou_mean, "mask_iou_worst": s.mask_iou_worst,
               "max_abs_logit_diff": opt(Some(s.max_abs_logit_diff)), "defect_prob_diff_p99": opt(s.defect_prob_diff_p99)})
    });
    let latency: serde_json::Map<String, Value> = ["preprocess", "segment", "classify"]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let [p50, p95, p99] = t.latency(i);
            (
                name.to_string(),
                json!({"p50": opt(p50), "p95": opt(p95), "p99": opt(p99)}),
            )
        })
        .collect();
    let reasons: serde_json::Map<String, Value> = t
        .by_reason()
        .into_iter()
        .map(|(r, n)| (r.as_str().to_string(), Value::from(n)))
        .collect();
    json!({
        "spec": outcome.spec.text,
        "evaluated": true,
        "engine": run.engine,
        "load_ms": run.load_ms,
        "load_rss_mib": run.load_rss_mib,
        "frames": t.frames(),
        "verdicts_by_reason": reasons,
        "labels": labels,
        "vs_reference": reference,
        "seal_iou_vs_ground_truth": opt(t.truth_iou()),
        "latency_ms": latency,
        "gate": rules,
        "per_cavity": per_cavity(t),
        "per_frame": t.records.iter().map(frame_json).collect::<Vec<_>>(),
    })
}

/// With labels per cavity: each cavity's figures (an empty list without).
fn per_cavity(t: &super::tally::EngineTally) -> Value {
    t.cavity_scores()
        .iter()
        .map(|c| {
            json!({"cavity": c.cavity, "defects": c.defects, "goods": c.goods,
                   "accuracy": c.scores.accuracy, "defect_recall": c.scores.defect_recall,
                   "false_reject_rate": c.scores.false_reject_rate, "wrong_verdicts": c.scores.wrong})
        })
        .collect()
}

fn frame_json(r: &FrameRecord) -> Value {
    json!({
        "frame": r.frame,
        "cavity": r.cavity,
        "image": r.image,
        "label": r.defect.map(|d| if d { "defect" } else { "ok" }),
        "kind": r.kind,
        "verdict": r.verdict.as_str(),
        "reason": r.reason.as_str(),
        "defect_prob": opt(r.defect_prob),
        "seal_area": opt(r.seal_area),
        "error": r.error,
        "reference_verdict": r.reference.map(|c| c.verdict.as_str()),
        "reference_defect_prob": opt(r.reference.and_then(|c| c.defect_prob)),
        "mask_iou_vs_reference": opt(r.reference.map(|c| c.mask_iou)),
        "max_abs_logit_diff": opt(r.reference.map(|c| c.max_abs_logit_diff)),
        "seal_iou_vs_ground_truth": opt(r.truth_iou),
    })
}

pub fn to_json(e: &Evaluation) -> Value {
    json!({
        "images": e.images.display().to_string(),
        "frames": e.frames,
        "cavities": e.cavities,
        "labelled": e.labelled,
        "peak_rss_mib": e.peak_rss_mib,
        "gate_passed": e.gate_passed(),
        "reference": engine_json(&e.reference),
        "candidates": e.candidates.iter().map(engine_json).collect::<Vec<_>>(),
    })
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.filter(|x| x.is_finite())
        .map_or("-".to_string(), |x| format!("{x:.digits$}"))
}

/// The table `evaluate` prints: one column per engine, the reference first.
pub fn render(e: &Evaluation) -> String {
    let engines: Vec<&EngineOutcome> = std::iter::once(&e.reference).chain(&e.candidates).collect();
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut row = |name: &str, f: &dyn Fn(&EngineOutcome) -> String| {
        rows.push((name.to_string(), engines.iter().map(|o| f(o)).collect()));
    };
    row("engine", &|o| {
        o.result
            .as_ref()
            .map_or("not evaluated".into(), |r| r.engine.clone())
    });
    let run = |o: &EngineOutcome, f: &dyn Fn(&EngineRun) -> String| {
        o.result.as_ref().map_or("-".to_string(), f)
    };
    row("load ms", &|o| run(o, &|r| format!("{:.0}", r.load_ms)));
    row("load RSS MiB", &|o| {
        run(o, &|r| format!("{:.1}", r.load_rss_mib))
    });
    row("accuracy", &|o| {
        run(o, &|r| num(r.tally.label_scores().map(|s| s.accuracy), 4))
    });
    row("defect recall", &|o| {
        run(o, &|r| {
            num(r.tally.label_scores().map(|s| s.defect_recall), 4)
        })
    });
    row("false reject rate", &|o| {
        run(o, &|r| {
            num(r.tally.label_scores().map(|s| s.false_reject_rate), 4)
        })
    });
    row("wrong vs labels", &|o| {
        run(o, &|r| {
            r.tally
                .label_scores()
                .map_or("-".into(), |s| s.wrong.to_string())
        })
    });
    // Labels per cavity: each cavity's recall and false rejects, as
    // `caught/defects, false rejects/goods`.
    let cavities: Vec<u16> = e
        .reference
        .result
        .as_ref()
        .map(|r| r.tally.cavity_scores().iter().map(|c| c.cavity).collect())
        .unwrap_or_default();
    for cavity in cavities {
        row(&format!("cavity {cavity} caught, false rej"), &|o| {
            run(o, &|r| {
                r.tally
                    .cavity_scores()
                    .iter()
                    .find(|c| c.cavity == cavity)
                    .map_or("-".into(), |c| {
                        let caught = (c.scores.defect_recall * c.defects as f64).round() as u64;
                        let rejected = (c.scores.false_reject_rate * c.goods as f64).round() as u64;
                        format!("{caught}/{}, {rejected}/{}", c.defects, c.goods)
                    })
            })
        });
    }
    row("verdict flips vs ref", &|o| {
        run(o, &|r| {
            r.tally
                .reference_scores()
                .map_or("-".into(), |s| s.verdict_flips.to_string())
        })
    });
    row("mask IoU vs ref mean", &|o| {
        run(o, &|r| {
            num(r.tally.reference_scores().map(|s| s.mask_iou_mean), 4)
        })
    });
    row("mask IoU vs ref worst", &|o| {
        run(o, &|r| {
            num(r.tally.reference_scores().map(|s| s.mask_iou_worst), 4)
        })
    });
    row("max |logit diff|", &|o| {
        run(o, &|r| {
            num(r.tally.reference_scores().map(|s| s.max_abs_logit_diff), 5)
        })
    });
    row("p99 |p_defect diff|", &|o| {
        run(o, &|r| {
            num(
                r.tally
                    .reference_scores()
                    .and_then(|s| s.defect_prob_diff_p99),
                5,
            )
        })
    });
    row("seal IoU vs truth", &|o| {
        run(o, &|r| num(r.tally.truth_iou(), 4))
    });
    for (i, stage) in ["preprocess", "segment", "classify"].iter().enumerate() {
        row(&format!("{stage} ms p50/p95/p99"), &|o| {
            run(o, &|r| r.tally.latency(i).map(|v| num(v, 2)).join("/"))
        });
    }
    row("verdicts", &|o| {
        run(o, &|r| {
            r.tally
                .by_reason()
                .iter()
                .map(|(reason, n)| format!("{}={n}", reason.as_str()))
                .collect::<Vec<_>>()
                .join(" ")
        })
    });
    row("gate", &|o| {
        if !o.rules.iter().all(|r| r.passed) {
            "FAIL".into()
        } else if std::ptr::eq(o, &e.reference) {
            "reference".into()
        } else {
            "pass".into()
        }
    });
    let name_w = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let col_w: Vec<usize> = (0..engines.len())
        .map(|i| {
            rows.iter()
                .map(|(_, c)| c[i].len())
                .chain([engines[i].spec.text.len() + 6])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let cavities = if e.cavities > 0 {
        format!(" ({} cavities, each judged on its own)", e.cavities)
    } else {
        String::new()
    };
    let mut out = format!(
        "{} frames{cavities} from {}{}\n",
        e.frames,
        e.images.display(),
        if e.labelled {
            ", labelled"
        } else {
            ", no labels"
        }
    );
    let _ = write!(out, "{:name_w$}", "");
    for (i, o) in engines.iter().enumerate() {
        let head = if i == 0 {
            format!("{} (ref)", o.spec.text)
        } else {
            o.spec.text.clone()
        };
        let _ = write!(out, "  {head:>w$}", w = col_w[i]);
    }
    out.push('\n');
    for (name, cells) in &rows {
        let _ = write!(out, "{name:name_w$}");
        for (i, c) in cells.iter().enumerate() {
            let _ = write!(out, "  {c:>w$}", w = col_w[i]);
        }
        out.push('\n');
    }
    for (i, o) in engines.iter().enumerate() {
        let name = if i == 0 {
            format!("{} (ref)", o.spec.text)
        } else {
            o.spec.text.clone()
        };
        if let Err(why) = &o.result {
            let _ = writeln!(out, "{name}: not evaluated: {why}");
        }
        for r in o.rules.iter().filter(|r| !r.passed) {
            let _ = writeln!(out, "{name}: gate rule {} broken: {}", r.rule, r.detail);
        }
    }
    let _ = writeln!(
        out,
        "peak RSS {:.0} MiB; report: {}",
        e.peak_rss_mib,
        e.report.join("index.html").display()
    );
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn html(e: &Evaluation, overlays: &OverlayWriter) -> String {
    let mut out = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>sealcheck evaluate</title><style>\
         body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}\
         th:first-child,td:first-child{text-align:left}.fail{color:#b00;font-weight:bold}.pass{color:#070}figure{display:inline-block;margin:6px;vertical-align:top}\
         figcaption{font-size:13px;max-width:640px}.key span{padding:0 6px;margin-right:8px}</style></head><body>\n",
    );
    let _ = writeln!(
        out,
        "<h1>sealcheck evaluate</h1><p>{} frames from <code>{}</code>{}. Gate: <span class=\"{}\">{}</span></p>",
        e.frames,
        escape(&e.images.display().to_string()),
        if e.labelled {
            ", labelled"
        } else {
            ", no labels"
        },
        if e.gate_passed() { "pass" } else { "fail" },
        if e.gate_passed() {
            "every candidate passes"
        } else if !e.reference_passed() {
            "the reference itself is outside a floor against the labels"
        } else {
            "a candidate fails"
        }
    );
    let _ = writeln!(out, "<pre>{}</pre>", escape(&render(e)));
    let _ = writeln!(
        out,
        "<p class=\"key\">Masks over the frame: <span style=\"background:#0f0\">both</span><span style=\"background:#285aff;color:#fff\">reference only</span><span style=\"background:#ff1e1e;color:#fff\">candidate only</span></p>"
    );
    let rules_html = |out: &mut String, o: &EngineOutcome| {
        for r in &o.rules {
            let _ = writeln!(
                out,
                "<p class=\"{}\">{} {}: {}</p>",
                if r.passed { "pass" } else { "fail" },
                if r.skipped {
                    "skipped"
                } else if r.passed {
                    "pass"
                } else {
                    "FAIL"
                },
                r.rule,
                escape(&r.detail)
            );
        }
    };
    let _ = writeln!(
        out,
        "<h2>{} (reference)</h2>",
        escape(&e.reference.spec.text)
    );
    rules_html(&mut out, &e.reference);
    for o in &e.candidates {
        let _ = writeln!(out, "<h2>{}</h2>", escape(&o.spec.text));
        rules_html(&mut out, o);
        let Ok(run) = &o.result else {
            let _ = writeln!(
                out,
                "<p class=\"fail\">not evaluated: {}</p>",
                escape(o.result.as_ref().err().map_or("", |s| s))
            );
            continue;
        };
        let disagreeing: Vec<&FrameRecord> =
            run.tally.records.iter().filter(|r| r.disagrees()).collect();
        let _ = writeln!(
            out,
            "<p>{} frames where it disagrees with the reference or the labels.</p>",
            disagreeing.len()
        );
        for r in disagreeing {
            let picture = overlays
                .written
                .iter()
                .find(|(s, f, _)| *s == o.spec.text && *f == r.frame);
            let c = r.reference;
            let _ = writeln!(
                out,
                "<figure>{}<figcaption>frame {} <code>{}</code>{}<br>reference: {} p_defect {}<br>candidate: {} ({}) p_defect {}, mask IoU with reference {}</figcaption></figure>",
                picture.map_or(
                    "(no picture: too many frames disagree)".to_string(),
                    |(_, _, file)| format!(
                        "<img src=\"{}\" width=\"640\" alt=\"frame {}\">",
                        escape(file),
                        r.frame
                    )
                ),
                r.frame,
                escape(&r.image),
                r.defect.map_or(String::new(), |d| format!(
                    ", labelled {}{}",
                    if d { "defect" } else { "ok" },
                    r.kind
                        .as_ref()
                        .map_or(String::new(), |k| format!(" ({})", escape(k)))
                )),
                c.map_or("-", |c| c.verdict.as_str()),
                c.map_or("-".into(), |c| num(c.defect_prob, 4)),
                r.verdict.as_str(),
                r.reason.as_str(),
                num(r.defect_prob, 4),
                num(c.map(|c| c.mask_iou), 4)
            );
        }
    }
    out.push_str("</body></html>\n");
    out
}
