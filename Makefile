# sealcheck: `make demo` runs the sample clip, `make test` runs every test.
# Both install the system packages they need when missing (as root, or via sudo).

CARGO      ?= cargo
PYTHON     ?= python3
BINARY     := target/release/sealcheck
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PKGS   := pkg-config libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev \
              gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-tools \
              python3 python3-pip python3-venv systemd \
              mosquitto mosquitto-clients prometheus chromium \
              libgstrtspserver-1.0-dev gstreamer1.0-rtsp openssl \
              libaravis-0.8-0 aravis-tools aravis-tools-cli gstreamer1.0-plugins-bad iproute2
PY_VENV    := .venv
PY         := $(PY_VENV)/bin/python
ORT_LIB    := .ort/lib/libonnxruntime.so.1.31.1
export ORT_DYLIB_PATH := $(CURDIR)/$(ORT_LIB)
# `make test` builds with the `ci-test` profile (in target/ci-test): release without
# debug info, the dependencies the tests do not spend their time in at opt-level 0
# (Cargo.toml says which). The scripts it calls take it from PROFILE.
TEST_PROFILE := ci-test

.PHONY: all build demo demo-cameras demo-cavities demo-plc test aarch64-deps test-tensorrt deps python onnxruntime install uninstall deb jetson jetson-check deb-test demo-assets clean

all: build

# System packages: installed only when something is missing.
deps:
	@if ! pkg-config --exists gstreamer-1.0 gstreamer-app-1.0 gstreamer-video-1.0 2>/dev/null \
	   || ! command -v gst-inspect-1.0 >/dev/null || ! gst-inspect-1.0 jpegdec >/dev/null 2>&1 \
	   || ! command -v python3 >/dev/null || ! python3 -m venv --help >/dev/null 2>&1 \
	   || ! command -v systemd-analyze >/dev/null \
	   || ! command -v mosquitto >/dev/null || ! command -v mosquitto_sub >/dev/null \
	   || ! command -v promtool >/dev/null || ! command -v chromium >/dev/null \
	   || ! command -v openssl >/dev/null \
	   || ! pkg-config --exists gstreamer-rtsp-server-1.0 2>/dev/null \
	   || ! gst-inspect-1.0 aravissrc >/dev/null 2>&1 || ! gst-inspect-1.0 bayer2rgb >/dev/null 2>&1 \
	   || ! command -v arv-fake-gv-camera-0.8 >/dev/null || ! command -v arv-tool-0.8 >/dev/null \
	   || ! command -v ip >/dev/null; then \
	  echo "Installing system packages: $(APT_PKGS)"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(APT_PKGS); \
	fi

# Python for the demo-world scripts, parity references and the Python peer.
python: $(PY_VENV)/.done
$(PY_VENV)/.done: scripts/requirements.txt | deps
	$(PYTHON) -m venv $(PY_VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r scripts/requirements.txt
	touch $@

# ONNX Runtime 1.31.1 (CPU) from its PyPI wheel, into .ort/lib.
onnxruntime: $(ORT_LIB)
$(ORT_LIB): scripts/fetch_onnxruntime.sh | python
	PYTHON=$(PY) scripts/fetch_onnxruntime.sh

build: deps
	$(CARGO) build --release --locked

demo: build onnxruntime
	@mkdir -p results && rm -f results/demo.jsonl
	$(BINARY) run --config config/demo.toml
	$(PY) scripts/demo/score.py --results results/demo.jsonl --labels samples/demo_clip/labels.jsonl

# The sample clip as four cameras of one station, judged by one process in batches.
demo-cameras: build onnxruntime
	@mkdir -p results && rm -f results/demo-cameras.jsonl
	$(BINARY) run --config config/demo-cameras.toml

# A multi-cavity machine (samples/demo_cavities/: 2x3 trays per cycle, cavity 5's sealing head
# drifting bad): every cavity judged on its own, then the per-cavity confusion and the heat
# map's worst cavity (scripts/demo/score_cavities.py).
demo-cavities: build onnxruntime
	@mkdir -p results && rm -f results/demo-cavities.jsonl
	$(BINARY) run --config config/demo-cavities.toml
	$(PY) scripts/demo/score_cavities.py --results results/demo-cavities.jsonl --labels samples/demo_cavities/labels.jsonl

# Parts triggered by a PLC over Modbus TCP (config/demo-plc.toml: a live camera, the sample
# clip looped at 30 frames/s): a PLC simulator (examples/demo_plc.rs) runs the handshake of
# docs/INTEGRATION.md for DEMO_PARTS parts and prints those triggered, judged and read back.
DEMO_PARTS ?= 300
demo-plc: build onnxruntime
	@mkdir -p results
	$(CARGO) build --release --locked --example demo_plc
	target/release/examples/demo_plc $(BINARY) config/demo-plc.toml $(DEMO_PARTS)

# Where the time goes and why the steps are built this way: docs/CI.md. Every step
# builds with the `ci-test` profile and the dev-dependencies' features, so the dependencies
# are built once (in the first step) and every later step builds only our crate and
# the few crates its feature adds.
test: deps aarch64-deps python onnxruntime
	# The quick checks first, so that they fail in seconds rather than after the builds.
	scripts/ci/verify_unit.sh
	$(PYTHON) scripts/ci/test_ci_scripts.py
	# Rooms import one way: any import circle, between rooms or files of a folder, fails.
	$(PYTHON) scripts/ci/import_cycles.py
	# Files of one job: a src/ file over 700 non-test lines fails (issue 32).
	$(PYTHON) scripts/ci/line_limit.py
	# The aarch64 type-check (at nice 19, from the start), every test of the default
	# build with the loom model check and the `tensorrt` build (GPU code: kernels by nvcc
	# from PyPI, the TensorRT bridge against TensorRT 10 headers; GPU tests print
	# SKIPPED here) beside them at nice 19, then the tests about time each alone. The
	# script says how and docs/CI.md why.
	PATH="$(CURDIR)/$(PY_VENV)/bin:$$PATH" SEALCHECK_REQUIRE_ORT=1 PROFILE=$(TEST_PROFILE) \
	    PYTHON=$(CURDIR)/$(PY) scripts/ci/make_test.sh

# Debian's Rust with the aarch64 standard library and the cross compilers, for
# scripts/ci/aarch64_check.sh (`make test`; it says why no arm64 GStreamer packages).
AARCH64_PKGS := rustc-web cargo-web libstd-rust-web-dev:arm64 gcc-aarch64-linux-gnu \
                g++-aarch64-linux-gnu binutils-aarch64-linux-gnu
aarch64-deps:
	@if ! command -v aarch64-linux-gnu-g++ >/dev/null || ! [ -x /usr/bin/cargo ] \
	   || ! ls -d /usr/lib/rustlib/aarch64-unknown-linux-gnu/lib >/dev/null 2>&1; then \
	  echo "Installing the aarch64 toolchain: $(AARCH64_PKGS)"; \
	  $(SUDO) dpkg --add-architecture arm64 && $(SUDO) apt-get update -qq \
	  && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(AARCH64_PKGS); \
	fi

# TensorRT tests, on a machine with TensorRT and an NVIDIA GPU (a Jetson).
test-tensorrt: deps python onnxruntime
	$(CARGO) test --release --locked --features tensorrt --lib infer::tensorrt
	$(CARGO) test --release --locked --features tensorrt --test tensorrt -- --nocapture --test-threads=1
	# Every inference path of the machine (TensorRT host and device mode included) vs tract.
	SEALCHECK_PARITY_STRIDE=1 $(CARGO) test --release --locked --features tensorrt --test parity

install:
	scripts/install.sh install

uninstall:
	scripts/install.sh uninstall

# Debian packages (cargo-deb; docs/JETSON.md, "Install the package"):
# dist/sealcheck_<version>_amd64.deb and, cross-compiled for the Jetson, _arm64.deb. Each
# binary passes scripts/ci/jetpack_abi_check.py first. The script names any missing tool.
deb: deps
	scripts/package/make_deb.sh amd64

jetson: deps aarch64-deps python
	PYTHON=$(CURDIR)/$(PY) scripts/package/make_deb.sh arm64

# The arm64 build checked here, under emulation (docs/JETSON.md, "What was verified"): its
# results, check-config and evaluate against the x86_64 build's on the demo clip
# (scripts/ci/arm64_run.sh), then its package installed, run, upgraded and removed in a
# fresh arm64 Debian 12 root (scripts/ci/deb_test.sh). Not in `make test` (docs/CI.md: time).
JETSON_CHECK_PKGS := qemu-user-static binfmt-support debootstrap file
# The package's demo in the arm64 root runs on the clip's first frames: tract takes
# seconds a frame under emulation (arm64_run.sh compares all 300 frames with x86_64's).
JETSON_DEMO_FRAMES ?= 30
jetson-check: jetson build onnxruntime
	@if ! command -v qemu-aarch64-static >/dev/null || ! command -v debootstrap >/dev/null \
	   || ! command -v update-binfmts >/dev/null || ! command -v file >/dev/null; then \
	  echo "Installing: $(JETSON_CHECK_PKGS)"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(JETSON_CHECK_PKGS); \
	fi
	PYTHON=$(CURDIR)/$(PY) scripts/ci/arm64_run.sh target/jetson/aarch64-unknown-linux-gnu/release/sealcheck $(BINARY)
	$(SUDO) env DEB_TEST_FRAMES=$(JETSON_DEMO_FRAMES) DEB_TEST_DEMO_LIMIT=1500 \
	    scripts/ci/deb_test.sh dist/sealcheck_$$(sed -n 's/^version = "\(.*\)"$$/\1/p' Cargo.toml | head -1)_arm64.deb

# The amd64 package installed, checked, run, removed, reinstalled and purged in a fresh
# Debian 12 root (debootstrap). Needs root and the network (apt); the script says more.
deb-test:
	scripts/ci/deb_test.sh dist/sealcheck_$$(sed -n 's/^version = "\(.*\)"$$/\1/p' Cargo.toml | head -1)_amd64.deb

# Regenerates the demo models, the sample clip and the model card's numbers.
demo-assets: python build onnxruntime
	scripts/demo/make_demo_assets.sh

clean:
	$(CARGO) clean
	rm -rf $(PY_VENV) .ort results
