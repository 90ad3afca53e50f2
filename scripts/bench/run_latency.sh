#!/usr/bin/env bash
# Run by hand, for docs/PERFORMANCE.md (capture-to-verdict of `run`).
# Capture-to-verdict latency of `sealcheck run` on a live camera stand-in, counted from the
# first frame: the first frame and the first 30 against the steady state; with MQTT=1 also
# MQTT's capture->ack over every frame of the run (Mosquitto on loopback, QoS 1).
#
#   scripts/bench/run_latency.sh [RUNS] [SECONDS]
#
# Each run: `sealcheck run` (BINS, default target/ci/sealcheck; several binaries are run in
# turn, round by round, so before/after meet the same load) with a `[source] pipeline` of
# `videotestsrc is-live=true` at WIDTH x HEIGHT (default 1280x720, the demo clip's size) and
# FPS (default 30) frames/s, `live = true` (a camera: drops when full, never blocks), BACKEND
# (default onnxruntime; ONNX Runtime needs ORT_DYLIB_PATH), stopped with SIGTERM after SECONDS
# (default 60); INFERENCE adds lines to [inference], e.g. the GPU device path:
# INFERENCE='device = "cuda"\npreprocess = "cuda"'. Latency is the results file's
# `latency_ms.total` (capture to verdict written);
# "steady" is every frame from the 301st on. Prints one JSON line per run.
#
# Measure on a quiet machine: before the first run the script waits (up to QUIET_WAIT s,
# default 900) for a 1-minute load average under 1.0 with no cargo or rustc running, and
# before each run for no cargo or rustc; each line says the load and what else ran.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-3}
SECONDS_PER_RUN=${2:-60}
BINS=${BINS:-target/ci/sealcheck}
BACKEND=${BACKEND:-onnxruntime}
WIDTH=${WIDTH:-1280}
HEIGHT=${HEIGHT:-720}
FPS=${FPS:-30}
MQTT=${MQTT:-0}
INFERENCE=${INFERENCE:-}
QUIET_WAIT=${QUIET_WAIT:-900}
MOSQUITTO=${MOSQUITTO:-/usr/sbin/mosquitto}
repo=$PWD

work=$(mktemp -d)
broker=
cleanup() {
  if [ -n "$broker" ]; then kill "$broker" 2>/dev/null || true; wait "$broker" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

mqtt_section=
if [ "$MQTT" = 1 ]; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\n' "$port" > "$work/mosquitto.conf"
  "$MOSQUITTO" -c "$work/mosquitto.conf" 2> "$work/mosquitto.log" &
  broker=$!
  for _ in $(seq 50); do (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
  mqtt_section=$(printf '[mqtt]\nurl = "mqtt://127.0.0.1:%s"\ntopic = "latency/sealcheck"\nqos = 1\nqueue = 1024\n' "$port")
fi

cat > "$work/sealcheck.toml" <<EOF
[source]
kind = "pipeline"
pipeline = "videotestsrc is-live=true pattern=smpte ! video/x-raw,width=$WIDTH,height=$HEIGHT,framerate=$FPS/1 ! videoconvert ! video/x-raw,format=RGB ! appsink name=sink"
live = true

[inference]
backend = "$BACKEND"
$(printf '%b' "$INFERENCE")

[models.segmentation]
path = "$repo/models/seg.onnx"

[models.classifier]
path = "$repo/models/cls.onnx"

[output]
results = "results.jsonl"
log_verdicts = false

$mqtt_section
EOF

builds() { pgrep -x cargo >/dev/null || pgrep -x rustc >/dev/null; }
load() { cut -d' ' -f1 /proc/loadavg; }
# Other processes using the CPU now (not this script's own), for the record.
others() {
  top -b -n 2 -d 1 -w 200 | awk '/^top -/ {frame++} frame == 2 && $1 ~ /^[0-9]+$/ && $9 >= 5 && $12 !~ /^sealcheck/ && $12 != "mosquitto" && $12 != "top" {printf "%s%s %s%%", sep, $12, $9; sep=", "}' 2>/dev/null || true
}

waited=0
until { [ "$(awk '{print ($1 < 1.0)}' /proc/loadavg)" = 1 ] && ! builds; }; do
  if [ "$waited" -ge "$QUIET_WAIT" ]; then
    echo "# not quiet after ${QUIET_WAIT}s (load $(cut -d' ' -f1-3 /proc/loadavg); $(others)); measuring anyway" >&2
    break
  fi
  sleep 10; waited=$((waited + 10))
done

echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), backend $BACKEND, ${WIDTH}x${HEIGHT}@${FPS} live, ${SECONDS_PER_RUN}s per run, mqtt $MQTT"
for round in $(seq "$RUNS"); do
  for bin in $BINS; do
    waited=0
    while builds && [ "$waited" -lt "$QUIET_WAIT" ]; do sleep 5; waited=$((waited + 5)); done
    rm -f "$work/results.jsonl"
    load_before=$(load)
    others_before=$(others)
    case $bin in /*) path=$bin ;; *) path=$repo/$bin ;; esac
    (cd "$work" && exec env -u RUST_LOG -u NOTIFY_SOCKET -u WATCHDOG_USEC "$path" run --config sealcheck.toml) \
      > "$work/stdout" 2> "$work/stderr" &
    pid=$!
    sleep "$SECONDS_PER_RUN"
    others_during=$(others)
    kill -TERM "$pid"
    wait "$pid" || { echo "# $bin exited $?: $(tail -3 "$work/stderr")" >&2; continue; }
    python3 - "$work" "$round" "$bin" "$load_before" "$others_before; $others_during" "$(builds && echo yes || echo no)" <<'PY'
import json, re, sys
work, round_, bin_, load, others, builds = sys.argv[1:7]
rows = [json.loads(l) for l in open(f"{work}/results.jsonl")]
total = [r["latency_ms"]["total"] for r in rows if r.get("latency_ms")]
def q(xs, p):
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(p * len(xs)))], 1) if xs else None
log = open(f"{work}/stderr").read()
warm = re.search(r'engines warmed up before the start.*? ms=([0-9.]+)', log)
backend = re.search(r'inference backend chosen" backend=(\S+)', log)
out = {
    "round": int(round_), "bin": bin_, "backend": backend.group(1) if backend else None,
    "device_path": "device stage: preprocessing, both models" in log, "load": float(load), "others": others.strip("; "),
    "build_at_end": builds, "frames": len(rows), "judged": len(total),
    "not_inspected": sum(1 for r in rows if r["reason"] == "not_inspected"),
    "warm_up_ms": round(float(warm.group(1)), 1) if warm else None,
    "first_ms": round(total[0], 1),
    "first30_mean_ms": round(sum(total[:30]) / 30, 1),
    "first30_max_ms": round(max(total[:30]), 1),
    "first30": [round(t, 1) for t in total[:30]],
    "steady_p50_ms": q(total[300:], 0.5), "steady_p99_ms": q(total[300:], 0.99),
    "all_p50_ms": q(total, 0.5), "all_p99_ms": q(total, 0.99), "all_p999_ms": q(total, 0.999),
}
m = re.search(r"mqtt capture->ack ms: p50 ([0-9.]+), p99 ([0-9.]+), p99.9 ([0-9.]+)", open(f"{work}/stdout").read())
if m:
    out["mqtt_capture_ack_ms"] = [float(x) for x in m.groups()]
m = re.search(r"mqtt verdict->ack ms: p50 ([0-9.]+), p99 ([0-9.]+), p99.9 ([0-9.]+)", open(f"{work}/stdout").read())
if m:
    out["mqtt_verdict_ack_ms"] = [float(x) for x in m.groups()]
m = re.search(r"mqtt: .*?published (\d+), dropped (\d+)", open(f"{work}/stdout").read())
if m:
    out["mqtt_published"], out["mqtt_dropped"] = int(m.group(1)), int(m.group(2))
print(json.dumps(out))
PY
  done
done
