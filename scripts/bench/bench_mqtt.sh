#!/usr/bin/env bash
# Run by hand, for docs/PERFORMANCE.md (MQTT's cost); no make target.
# MQTT's cost and latency, measured with `sealcheck bench` against a Mosquitto on loopback.
#
#   scripts/bench/bench_mqtt.sh [CONFIG] [ROUNDS] [FRAMES]
#
# CONFIG (default config/bench-onnxruntime.toml if present, else config/demo.toml) must not
# have an [mqtt] section: the script adds one pointing at its own broker. Each round runs the
# same bench without and with MQTT back to back (the machine's load then hits both alike),
# then one run offered at each rate in RATES (default 30 frames/s, RATE_FRAMES frames), paced
# like a camera from the end of the warm-up: frames the pipeline has no slot for at their due
# time are dropped (the report's "offered", "judged", "dropped"). The warm-up is left out of
# every figure, MQTT's capture->ack and verdict->ack included.
# Prints one JSON line per run; docs/PERFORMANCE.md quotes them.
set -euo pipefail
cd "$(dirname "$0")/../.."
CONFIG=${1:-config/demo.toml}
ROUNDS=${2:-3}
FRAMES=${3:-600}
RATE_FRAMES=${RATE_FRAMES:-1500}
BIN=${BIN:-target/release/sealcheck}
MOSQUITTO=${MOSQUITTO:-/usr/sbin/mosquitto}

work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\n' "$port" > "$work/mosquitto.conf"
"$MOSQUITTO" -c "$work/mosquitto.conf" 2> "$work/mosquitto.log" &
broker=$!
trap 'kill $broker 2>/dev/null; wait $broker 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 50); do (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done

# The same config twice: as given, and with [mqtt] (relative paths resolve against the
# config's folder, so the copies live next to it).
dir=$(cd "$(dirname "$CONFIG")" && pwd)
plain="$dir/.bench-mqtt-off.$$.toml"
mqtt="$dir/.bench-mqtt-on.$$.toml"
cp "$CONFIG" "$plain"
{ cat "$CONFIG"; printf '\n[mqtt]\nurl = "mqtt://127.0.0.1:%s"\ntopic = "bench/sealcheck"\nqos = 1\nqueue = 1024\n' "$port"; } > "$mqtt"
trap 'kill $broker 2>/dev/null; wait $broker 2>/dev/null; rm -rf "$work" "$plain" "$mqtt"' EXIT

# One bench; its JSON report with the CPU seconds the process used ("cpu_s": user + system,
# less sensitive than frames/s to what else the machine runs).
bench() {
  python3 scripts/bench/bench_report.py "$BIN" bench "$@"
}
load() { cut -d' ' -f1 /proc/loadavg; }

echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), config $CONFIG"
for round in $(seq "$ROUNDS"); do
  for variant in off on; do
    cfg=$plain; [ "$variant" = on ] && cfg=$mqtt
    printf '{"round":%s,"mqtt":"%s","load":"%s","report":%s}\n' "$round" "$variant" "$(load)" \
      "$(bench --config "$cfg" --frames "$FRAMES" --warmup 20)"
  done
done
for rate in ${RATES:-30}; do
  printf '{"rate":%s,"mqtt":"on","load":"%s","report":%s}\n' "$rate" "$(load)" \
    "$(bench --config "$mqtt" --frames "$RATE_FRAMES" --warmup 20 --rate "$rate")"
done
