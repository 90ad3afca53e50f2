//! Build-script part of the `tensorrt` feature: compiles `trt_bridge/` (C++17)
//! and the `#[cxx::bridge]` in `src/infer/tensorrt/bridge.rs` against
//! TensorRT 10 and CUDA headers.
//!
//! Nothing of TensorRT is linked: the bridge opens libnvinfer with dlopen at
//! run time (trt_bridge/README.md says why), so building needs only headers,
//! and `cargo check/clippy/build --features tensorrt` all work on a machine
//! without libnvinfer (CI compiles the bridge this way on every push).
//!
//! Headers are searched in this order:
//!
//! ```text
//! TensorRT: TENSORRT_ROOT/include
//!           TENSORRT_INCLUDE_DIR
//!           /usr/include/aarch64-linux-gnu   (JetPack 6: nvidia-tensorrt-dev)
//!           /usr/include/x86_64-linux-gnu    (x86 Debian/Ubuntu packages: libnvinfer-dev)
//!           /usr/include
//! CUDA:     CUDA_HOME/include, CUDA_PATH/include, /usr/local/cuda/include,
//!           .cuda-toolkit/venv/lib/python*/site-packages/nvidia/cu13/include
//! ```
//!
//! The library folder (TENSORRT_ROOT/lib, TENSORRT_LIB_DIR, or the JetPack /
//! Debian one where libnvinfer is found) is not linked against; it is passed
//! to the program as `SEALCHECK_TENSORRT_LIB_DIR`, the first place it looks.

use std::env;
use std::path::{Path, PathBuf};

/// Files the bridge is made of; a change in any rebuilds it.
const BRIDGE_RS: &str = "src/infer/tensorrt/bridge.rs";
const BRIDGE_CC: &str = "trt_bridge/src/trt_bridge.cc";
const BRIDGE_H: &str = "trt_bridge/include/trt_bridge.h";

const VARIABLES: [&str; 5] = [
    "TENSORRT_ROOT",
    "TENSORRT_INCLUDE_DIR",
    "TENSORRT_LIB_DIR",
    "CUDA_HOME",
    "CUDA_PATH",
];

/// JetPack's and the x86 Debian packages' header and library folders.
const SYSTEM_INCLUDE_DIRS: [&str; 3] = [
    "/usr/include/aarch64-linux-gnu",
    "/usr/include/x86_64-linux-gnu",
    "/usr/include",
];
const SYSTEM_LIB_DIRS: [&str; 3] = [
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu/nvidia",
];

pub fn build() {
    for variable in VARIABLES {
        println!("cargo:rerun-if-env-changed={variable}");
    }
    for file in [BRIDGE_RS, BRIDGE_CC, BRIDGE_H, "build/tensorrt.rs"] {
        println!("cargo:rerun-if-changed={file}");
    }

    let tensorrt = find_tensorrt_include().unwrap_or_else(|searched| {
        missing("TensorRT 10 headers (NvInfer.h)", &searched, TENSORRT_FIX)
    });
    let cuda = find_cuda_include().unwrap_or_else(|searched| {
        missing("CUDA headers (cuda_runtime_api.h)", &searched, CUDA_FIX)
    });
    let version = read_header_version(&tensorrt);
    println!(
        "cargo:rustc-env=SEALCHECK_TENSORRT_HEADERS={}",
        tensorrt.display()
    );
    if let Some(lib_dir) = find_tensorrt_lib_dir() {
        println!(
            "cargo:rustc-env=SEALCHECK_TENSORRT_LIB_DIR={}",
            lib_dir.display()
        );
    } else {
        println!("cargo:rustc-env=SEALCHECK_TENSORRT_LIB_DIR=");
    }
    if let Some(version) = version.as_ref().filter(|v| !v.starts_with("10.")) {
        println!(
            "cargo:warning=TensorRT headers in {} are version {version}; trt_bridge is written for TensorRT 10",
            tensorrt.display()
        );
    }

    let mut build = cxx_build::bridge(BRIDGE_RS);
    build
        .file(BRIDGE_CC)
        .std("c++17")
        // Vendor headers as system headers: their deprecation notices are not ours to fix.
        .flag("-isystem")
        .flag(tensorrt.to_string_lossy().as_ref())
        .flag("-isystem")
        .flag(cuda.to_string_lossy().as_ref())
        .flag_if_supported("-Wall")
        .flag_if_supported("-Wextra")
        .flag_if_supported("-Werror=return-type");
    build.compile("trt_bridge");
    // dlopen/dlsym: in libc since glibc 2.34; libdl keeps older systems working.
    println!("cargo:rustc-link-lib=dylib=dl");
}

const TENSORRT_FIX: &str = "Set TENSORRT_ROOT to a TensorRT 10 install (with include/ and lib/), or \
     TENSORRT_INCLUDE_DIR (and TENSORRT_LIB_DIR); on a Jetson install JetPack's TensorRT \
     (`sudo apt install nvidia-tensorrt-dev`); on x86 Debian/Ubuntu `libnvinfer-dev libnvonnxparsers-dev`. \
     For a compile check without TensorRT: `scripts/ci/fetch_tensorrt_headers.sh` prints a header folder \
     to use as TENSORRT_INCLUDE_DIR. Or build without `--features tensorrt`.";

const CUDA_FIX: &str = "Set CUDA_HOME to the CUDA toolkit (JetPack: /usr/local/cuda), or install the headers \
     from PyPI (`scripts/ci/fetch_tensorrt_headers.sh` does, and prints the folder to use as CUDA_HOME).";

fn missing(what: &str, searched: &[String], fix: &str) -> ! {
    panic!(
        "\n\nThe `tensorrt` feature compiles trt_bridge/ against {what}, which were not found.\n\
         Searched:\n  {}\n{fix}\n",
        searched.join("\n  ")
    )
}

fn env_path(variable: &str) -> Option<PathBuf> {
    env::var_os(variable)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn has(dir: &Path, file: &str) -> bool {
    dir.join(file).is_file()
}

/// The folder holding NvInfer.h; on failure, what was tried (and why it failed).
fn find_tensorrt_include() -> Result<PathBuf, Vec<String>> {
    let mut searched = Vec::new();
    if let Some(root) = env_path("TENSORRT_ROOT") {
        let dir = root.join("include");
        if has(&dir, "NvInfer.h") && has(&dir, "NvOnnxParser.h") {
            return Ok(dir);
        }
        searched.push(format!(
            "TENSORRT_ROOT/include = {} (no NvInfer.h + NvOnnxParser.h)",
            dir.display()
        ));
    }
    if let Some(dir) = env_path("TENSORRT_INCLUDE_DIR") {
        if has(&dir, "NvInfer.h") && has(&dir, "NvOnnxParser.h") {
            return Ok(dir);
        }
        searched.push(format!(
            "TENSORRT_INCLUDE_DIR = {} (no NvInfer.h + NvOnnxParser.h)",
            dir.display()
        ));
    }
    for dir in SYSTEM_INCLUDE_DIRS {
        let dir = PathBuf::from(dir);
        if has(&dir, "NvInfer.h") && has(&dir, "NvOnnxParser.h") {
            return Ok(dir);
        }
        searched.push(format!("{} (no NvInfer.h + NvOnnxParser.h)", dir.display()));
    }
    Err(searched)
}

/// Where libnvinfer.so.10 lives, if the build machine has it (optional).
fn find_tensorrt_lib_dir() -> Option<PathBuf> {
    let candidates = env_path("TENSORRT_ROOT")
        .map(|root| root.join("lib"))
        .into_iter()
        .chain(env_path("TENSORRT_LIB_DIR"))
        .chain(SYSTEM_LIB_DIRS.iter().map(PathBuf::from));
    candidates
        .into_iter()
        .find(|dir| has(dir, "libnvinfer.so.10") || has(dir, "libnvinfer.so"))
}

/// The folder holding cuda_runtime_api.h (TensorRT's headers include it).
fn find_cuda_include() -> Result<PathBuf, Vec<String>> {
    let mut searched = Vec::new();
    for variable in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = env_path(variable) {
            let dir = home.join("include");
            if has(&dir, "cuda_runtime_api.h") {
                return Ok(dir);
            }
            searched.push(format!(
                "{variable}/include = {} (no cuda_runtime_api.h)",
                dir.display()
            ));
        }
    }
    let default = PathBuf::from("/usr/local/cuda/include");
    if has(&default, "cuda_runtime_api.h") {
        return Ok(default);
    }
    searched.push(format!("{} (no cuda_runtime_api.h)", default.display()));
    let local = Path::new(".cuda-toolkit").join("venv").join("lib");
    if let Ok(pythons) = std::fs::read_dir(&local) {
        for python in pythons.flatten() {
            let dir = python.path().join("site-packages/nvidia/cu13/include");
            if has(&dir, "cuda_runtime_api.h") && has(&dir.join("crt"), "host_defines.h") {
                return Ok(dir);
            }
        }
    }
    searched.push(format!(
        "{}/python*/site-packages/nvidia/cu13/include (not installed)",
        local.display()
    ));
    Err(searched)
}

/// "10.3.0" from NvInferVersion.h, for a warning when the headers are not TensorRT 10.
fn read_header_version(include: &Path) -> Option<String> {
    let text = std::fs::read_to_string(include.join("NvInferVersion.h")).ok()?;
    let number = |names: &[&str]| -> Option<String> {
        text.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("#define") && words.next().is_some_and(|w| names.contains(&w)))
                .then(|| words.next().map(str::to_string))
                .flatten()
                .filter(|v| v.chars().all(|c| c.is_ascii_digit()))
        })
    };
    // TensorRT 10.3 defines NV_TENSORRT_MAJOR as a number; later 10.x as TRT_MAJOR_ENTERPRISE.
    let major = number(&["NV_TENSORRT_MAJOR", "TRT_MAJOR_ENTERPRISE"])?;
    let minor = number(&["NV_TENSORRT_MINOR", "TRT_MINOR_ENTERPRISE"])?;
    let patch = number(&["NV_TENSORRT_PATCH", "TRT_PATCH_ENTERPRISE"])?;
    Some(format!("{major}.{minor}.{patch}"))
}
