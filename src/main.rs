//! The `sealcheck` command line. Parsing only: the work is in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use sealcheck::config::{self, EXIT_CONFIG};
use sealcheck::pipeline::{self, PipelineError, RunContext};
use sealcheck::{bench, inspect, service};

/// `--config FILE`, the same on every command that reads a config.
const CONFIG_HELP: &str = "The config file (TOML); relative paths in it resolve against its folder. config/sealcheck.toml is the commented template";

#[derive(Parser)]
#[command(
    name = "sealcheck",
    about = "Real-time seal inspection: camera to pass/fail verdict"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the pipeline until the source ends or SIGINT/SIGTERM, then print a summary.
    Run {
        #[arg(long, value_name = "FILE", help = CONFIG_HELP)]
        config: PathBuf,
    },
    /// List the cameras this machine can open: V4L2 devices with their formats,
    /// GenICam (GigE Vision, USB3 Vision) cameras with id, address, model and
    /// current PixelFormat, Width, Height and TriggerMode.
    Cameras,
    /// Check a config file as `run` takes it (every key, the files it names,
    /// both models opened and run once, the shadow, the ways a part is
    /// triggered): exit 0 saying what was checked, or exit 78 listing every problem.
    CheckConfig {
        #[arg(long, value_name = "FILE", help = CONFIG_HELP, required_unless_present = "file")]
        config: Option<PathBuf>,
        /// The config file, given bare (the same as --config FILE).
        #[arg(value_name = "FILE", conflicts_with = "config")]
        file: Option<PathBuf>,
    },
    /// Inspect image files with the same stages; one JSON result line per image.
    Inspect {
        #[arg(long, value_name = "FILE", help = CONFIG_HELP)]
        config: PathBuf,
        /// Also write each image's tensors as .npy files under DIR/<image stem>/.
        #[arg(long, value_name = "DIR")]
        dump: Option<PathBuf>,
        #[arg(value_name = "IMAGE", required = true)]
        images: Vec<PathBuf>,
    },
    /// Compare candidate engines (backend, device, precision, models) with a
    /// reference and the labels on a folder of frames; `--gate` exits 1 when a
    /// candidate breaks a rule of `[evaluate]`.
    Evaluate {
        #[arg(long, value_name = "FILE", help = CONFIG_HELP)]
        config: PathBuf,
        /// Folder of numbered frames (frame_00012.jpg), with labels.jsonl and
        /// optional NAME_mask.png ground-truth masks beside them.
        #[arg(long, value_name = "DIR")]
        images: PathBuf,
        /// Labels (default: labels.jsonl in the images folder, when there is one).
        #[arg(long, value_name = "FILE")]
        labels: Option<PathBuf>,
        /// An engine to judge: BACKEND[:DEVICE][:PRECISION][,seg=PATH][,cls=PATH],
        /// e.g. onnxruntime:cpu, onnxruntime:cpu:int8, onnxruntime:cuda, tensorrt:fp16.
        #[arg(long = "candidate", value_name = "SPEC", required = true)]
        candidates: Vec<sealcheck::evaluate::EngineSpec>,
        /// The engine the candidates are compared with (default: tract, FP32).
        #[arg(long, value_name = "SPEC")]
        reference: Option<sealcheck::evaluate::EngineSpec>,
        /// Folder for evaluation.json, index.html and the overlay pictures.
        #[arg(long, value_name = "DIR", default_value = "evaluation")]
        report: PathBuf,
        /// Exit 1 when a candidate breaks a rule (each broken rule is named).
        #[arg(long)]
        gate: bool,
    },
    /// Build (or check the cache of) the TensorRT engines for the config's models.
    BuildEngine {
        #[arg(long, value_name = "FILE", help = CONFIG_HELP)]
        config: PathBuf,
    },
    /// Measure throughput and per-stage latency on the configured source.
    Bench {
        #[arg(long, value_name = "FILE", help = CONFIG_HELP)]
        config: PathBuf,
        /// Frames to process (the source is replayed from memory as needed).
        #[arg(long, default_value_t = 300)]
        frames: u64,
        /// Frames to run first and leave out of the figures.
        #[arg(long, default_value_t = 10)]
        warmup: u64,
        /// Offer the measured frames at this rate (frames per second), like a camera,
        /// instead of as fast as the pipeline takes them: each frame is stamped at
        /// its due time and dropped when the pipeline has no free slot then.
        /// The pace starts once the warm-up is done.
        #[arg(long, value_name = "FPS")]
        rate: Option<f64>,
        /// Replay the frames as this many cameras of one station (`cam1` ...),
        /// each offered at `--rate` like a camera of its own.
        #[arg(long, default_value_t = 1, value_name = "N")]
        cameras: usize,
        /// Most frames per engine run (overrides `[inference] max_batch`;
        /// default: the config's, or one per camera with `--cameras`).
        #[arg(long, value_name = "B")]
        max_batch: Option<usize>,
        /// Print the result as one JSON object instead of a table.
        #[arg(long)]
        json: bool,
        /// `plc`: parts triggered through the Modbus server by a PLC simulator
        /// polling every millisecond, on the config's own (live) camera;
        /// `--frames` parts (after `--warmup` ones) at `--rate` parts/s.
        #[arg(long, value_name = "MODE", value_parser = ["plc"])]
        trigger: Option<String>,
    },
}

fn main() -> ExitCode {
    let version = format!(
        "{}\nbackends: {}\nGStreamer: {}",
        env!("CARGO_PKG_VERSION"),
        sealcheck::infer::available_backends().join(", "),
        sealcheck::capture::gstreamer_version()
    );
    let matches = Cli::command().version(version).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let is_service = matches!(cli.command, Command::Run { .. });
    match execute(cli.command) {
        Ok(code) => code,
        Err(e) => {
            // Once `run` has its logger, the error is one structured line like
            // every other (the journal keeps stderr); before that, and for the
            // interactive commands, plain text on stderr.
            if is_service && log::max_level() != log::LevelFilter::Off {
                log::error!(target: "sealcheck", error = format!("{e:#}").as_str(); "sealcheck stopped");
            } else {
                eprintln!("sealcheck: {e:#}");
            }
            ExitCode::from(exit_code(&e))
        }
    }
}

/// Config and model problems exit 78 so systemd does not restart-loop on them.
fn exit_code(e: &anyhow::Error) -> u8 {
    let config_problem = e.chain().any(|c| {
        c.downcast_ref::<config::ConfigError>().is_some()
            || c.downcast_ref::<sealcheck::check_config::CheckError>()
                .is_some()
            || matches!(
                c.downcast_ref::<PipelineError>(),
                Some(
                    PipelineError::Config(_)
                        | PipelineError::Inference(_)
                        | PipelineError::Device(_)
                        // A camera refusing a configured setting: the config must change.
                        | PipelineError::Capture(
                            sealcheck::capture::CaptureError::CameraRefused { .. }
                                | sealcheck::capture::CaptureError::PixelFormatUnread { .. }
                        )
                        // OPC UA: the users file or the certificate store must change.
                        | PipelineError::OpcUa(
                            sealcheck::opcua::OpcUaError::Users(_)
                                | sealcheck::opcua::OpcUaError::Certificate { .. }
                                | sealcheck::opcua::OpcUaError::HalfCertificate { .. }
                        )
                )
            )
            || c.downcast_ref::<sealcheck::infer::InferError>().is_some()
            || matches!(
                c.downcast_ref::<sealcheck::bench_parts::PartsBenchError>(),
                Some(sealcheck::bench_parts::PartsBenchError::NotLive { .. })
            )
            || c.downcast_ref::<sealcheck::shadow::ShadowRefused>()
                .is_some()
            || c.downcast_ref::<sealcheck::line::mqtt::MqttFilesError>()
                .is_some()
            || matches!(
                c.downcast_ref::<inspect::InspectError>(),
                Some(inspect::InspectError::Inference(_) | inspect::InspectError::Preprocess(_))
            )
    });
    if config_problem { EXIT_CONFIG as u8 } else { 1 }
}

fn execute(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Cameras => {
            // Warnings (a GigE camera's frame larger than its socket buffer) on stderr.
            service::init_logging(config::LogFormat::Logfmt, "warn");
            print!("{}", sealcheck::capture::list_cameras().render());
            Ok(ExitCode::SUCCESS)
        }
        Command::CheckConfig { config, file } => {
            service::init_logging(config::LogFormat::Logfmt, "warn");
            let path = config
                .or(file)
                .context("check-config needs the config file: --config FILE")?;
            for line in sealcheck::check_config::check(&path)?.lines {
                println!("{line}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Run { config: path } => {
            let cfg = load_and_log(&path)?;
            let signals = service::watch_signals().context("cannot install signal handlers")?;
            let summary = pipeline::run(
                cfg,
                RunContext::configured(service::Notifier::from_env(), signals),
            )?;
            print!("{}", summary.render());
            // Every frame got its result; still, a source that failed mid-run
            // (a camera unplugged) is a failure: systemd restarts the service.
            if let sealcheck::capture::EndOfStream::Error(e) = summary.end {
                return Err(anyhow::Error::new(e).context("the source failed during the run"));
            }
            // Every verdict reached the log, but the results file misses some:
            // whoever reads the file must learn it from the exit status.
            if summary.results_lost > 0 {
                anyhow::bail!(
                    "{} result lines could not be written to the results file (see the journal for why)",
                    summary.results_lost
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Inspect {
            config: path,
            dump,
            images,
        } => {
            let cfg = load_and_log(&path)?;
            inspect::inspect(&cfg, &images, dump.as_deref(), |_, result| {
                println!("{}", result.line)
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Evaluate {
            config: path,
            images,
            labels,
            candidates,
            reference,
            report,
            gate,
        } => {
            let cfg = load_and_log(&path)?;
            let evaluation = sealcheck::evaluate::evaluate(sealcheck::evaluate::EvaluateRequest {
                config: cfg,
                images,
                labels,
                candidates,
                reference: reference
                    .unwrap_or_else(sealcheck::evaluate::EngineSpec::reference_default),
                report,
            })?;
            print!("{}", sealcheck::evaluate::render(&evaluation));
            if gate && !evaluation.gate_passed() {
                eprintln!(
                    "sealcheck: evaluate --gate: a candidate broke a rule, or the reference itself is outside a floor against the labels (named above); it must not go on the line"
                );
                return Ok(ExitCode::from(1));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::BuildEngine { config: path } => {
            let cfg = load_and_log(&path)?;
            build_engines(&cfg)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench {
            config: path,
            frames,
            warmup,
            rate,
            cameras,
            max_batch,
            json,
            trigger,
        } => {
            let cfg = load_and_log(&path)?;
            if trigger.is_some() {
                let report =
                    sealcheck::bench_parts::run(&cfg, rate.unwrap_or(10.0), frames, warmup)?;
                println!("{}", report.render());
                return Ok(ExitCode::SUCCESS);
            }
            let station = bench::Station { cameras, max_batch };
            let report = bench::run(&cfg, frames, warmup, rate, station)?;
            println!(
                "{}",
                if json {
                    report.to_json()
                } else {
                    report.render()
                }
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn build_engines(cfg: &config::Config) -> anyhow::Result<()> {
    for (role, path, outcome) in sealcheck::infer::tensorrt::build_engines(cfg)? {
        println!("{role}: {} ({outcome:?})", path.display());
    }
    Ok(())
}

fn load_and_log(path: &std::path::Path) -> anyhow::Result<config::Config> {
    let cfg = config::load(path)?;
    service::init_logging(cfg.logging.format, &cfg.logging.level);
    Ok(cfg)
}
