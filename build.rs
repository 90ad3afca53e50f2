//! Build steps that need tools outside cargo, each behind its cargo feature.
//! Without features this does nothing, so the crate builds on a machine with
//! no CUDA at all.
//!
//! - `cuda`: compiles `kernels/*.cu` with nvcc into fatbins in `OUT_DIR`
//!   (machine code for the Jetson Orin, sm_87, and Hopper, sm_90, plus
//!   compute_90 PTX that newer GPUs compile at load). `src/gpu/kernels.rs`
//!   embeds them with `include_bytes!`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "build/tensorrt.rs"]
mod tensorrt;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if env::var_os("CARGO_FEATURE_CUDA").is_some() {
        cuda_kernels::build();
    }
    if std::env::var_os("CARGO_FEATURE_TENSORRT").is_some() {
        tensorrt::build();
    }
}

mod cuda_kernels {
    use super::*;

    /// Kernel sources, compiled one fatbin each. `src/gpu/kernels.rs` names
    /// the same files.
    const SOURCES: [&str; 3] = ["frame_to_tensors", "mask", "bench_delay"];

    /// Targets: cubins for the Orin (sm_87) and Hopper (sm_90), and PTX for
    /// anything newer.
    const GENCODE: [&str; 3] = [
        "arch=compute_87,code=sm_87",
        "arch=compute_90,code=sm_90",
        "arch=compute_90,code=compute_90",
    ];

    pub fn build() {
        println!("cargo:rerun-if-env-changed=NVCC");
        println!("cargo:rerun-if-env-changed=CUDA_HOME");
        println!("cargo:rerun-if-env-changed=PATH");
        let kernels_dir = Path::new("kernels");
        rerun_for_sources(kernels_dir);

        let nvcc = find_nvcc().unwrap_or_else(|searched| missing_nvcc(&searched));
        let out_dir =
            PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR for build scripts"));
        for name in SOURCES {
            compile(
                &nvcc,
                &kernels_dir.join(format!("{name}.cu")),
                &out_dir.join(format!("{name}.fatbin")),
            );
        }
    }

    /// Every `.cu` and `.cuh` under `kernels/`, so editing a header rebuilds.
    fn rerun_for_sources(dir: &Path) {
        println!("cargo:rerun-if-changed={}", dir.display());
        let entries = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("cannot list {} for the CUDA kernels: {e}", dir.display()));
        for entry in entries.flatten() {
            let path = entry.path();
            if matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("cu" | "cuh")
            ) {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }

    /// `NVCC`, then `CUDA_HOME/bin/nvcc`, then `nvcc` on `PATH`, then the
    /// toolkit that `scripts/ci/ci_cuda_build.sh` installs into `.cuda-toolkit/`.
    /// On failure, returns what was tried.
    fn find_nvcc() -> Result<PathBuf, Vec<String>> {
        let mut searched = Vec::new();
        if let Some(nvcc) = env::var_os("NVCC") {
            let nvcc = PathBuf::from(nvcc);
            if nvcc.is_file() {
                return Ok(nvcc);
            }
            searched.push(format!("NVCC={} (no such file)", nvcc.display()));
        }
        if let Some(home) = env::var_os("CUDA_HOME") {
            let nvcc = Path::new(&home).join("bin").join("nvcc");
            if nvcc.is_file() {
                return Ok(nvcc);
            }
            searched.push(format!(
                "CUDA_HOME/bin/nvcc = {} (no such file)",
                nvcc.display()
            ));
        }
        if let Some(path) = env::var_os("PATH") {
            for dir in env::split_paths(&path) {
                let nvcc = dir.join("nvcc");
                if nvcc.is_file() {
                    return Ok(nvcc);
                }
            }
            searched.push("nvcc on PATH (not found)".to_string());
        }
        let local = Path::new(".cuda-toolkit").join("venv").join("lib");
        if let Ok(pythons) = std::fs::read_dir(&local) {
            for python in pythons.flatten() {
                let nvcc = python.path().join("site-packages/nvidia/cu13/bin/nvcc");
                if nvcc.is_file() {
                    return Ok(nvcc);
                }
            }
        }
        searched.push(format!(
            "{}/python*/site-packages/nvidia/cu13/bin/nvcc (not installed)",
            local.display()
        ));
        Err(searched)
    }

    fn missing_nvcc(searched: &[String]) -> ! {
        panic!(
            "\n\nThe `cuda` feature compiles kernels/*.cu with nvcc, and nvcc was not found.\n\
             Searched: {}.\n\
             Point to it with CUDA_HOME=/usr/local/cuda (nvcc in $CUDA_HOME/bin) or NVCC=/path/to/nvcc,\n\
             or install it from PyPI: scripts/ci/ci_cuda_build.sh does that, or by hand:\n  \
             python3 -m venv .cuda-toolkit/venv && .cuda-toolkit/venv/bin/pip install \
             nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-cuda-runtime==13.0.96 \
             nvidia-cuda-cccl==13.0.85 nvidia-nvvm==13.0.88\n  \
             then CUDA_HOME=$PWD/.cuda-toolkit/venv/lib/python3.*/site-packages/nvidia/cu13.\n\
             On a Jetson, use JetPack's own nvcc (CUDA_HOME=/usr/local/cuda): its driver loads only\n\
             code built by a toolkit no newer than itself.\n\
             Or build without `--features cuda`.\n",
            searched.join("; ")
        )
    }

    fn compile(nvcc: &Path, source: &Path, fatbin: &Path) {
        let mut command = Command::new(nvcc);
        command.args(["-fatbin", "-O3", "-std=c++17", "-lineinfo", "-Xptxas", "-v"]);
        for gencode in GENCODE {
            command.arg("-gencode").arg(gencode);
        }
        command.arg("-o").arg(fatbin).arg(source);
        let output = command.output().unwrap_or_else(|e| {
            panic!(
                "cannot run {} to compile {}: {e}",
                nvcc.display(),
                source.display()
            )
        });
        // ptxas -v reports registers, spills and shared memory per kernel; keep
        // it next to the fatbin for whoever tunes the kernels.
        let report = fatbin.with_extension("ptxas.txt");
        let _ = std::fs::write(&report, &output.stderr);
        if !output.status.success() {
            panic!(
                "nvcc failed on {} ({}):\n{}{}",
                source.display(),
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        for line in stderr.lines().filter(|l| {
            l.contains("spill") && !l.contains(", 0 bytes spill stores, 0 bytes spill loads")
        }) {
            println!("cargo:warning={}: {line}", source.display());
        }
    }
}
