#!/usr/bin/env bash
# Run by hand and by scripts/gpu/gpu_shadow.sh, for docs/PERFORMANCE.md (the shadow's cost).
# What a shadow costs production, measured with `sealcheck bench` offered at a camera's rate.
#
#   scripts/bench/bench_shadow.sh CONFIG SHADOW_TOML [ROUNDS] [FRAMES] [RATE]
#
# CONFIG must not have a [shadow] section; SHADOW_TOML is the [shadow] table to add (a file).
# Each round runs the same bench without and with the shadow back to back, taking turns (the
# machine's load then hits both alike), FRAMES measured frames (default 900) offered at RATE
# frames/s (default 15) after 20 warm-up frames. Production's capture-to-verdict p50/p99 is
# the report's latency_ms.total; the shadow's own counts are the report's "shadow".
# Prints one JSON line per run; docs/PERFORMANCE.md quotes them.
set -euo pipefail
cd "$(dirname "$0")/../.."
CONFIG=${1:?CONFIG}
SHADOW=${2:?SHADOW_TOML}
ROUNDS=${3:-3}
FRAMES=${4:-900}
RATE=${5:-15}
BIN=${BIN:-target/release/sealcheck}

dir=$(cd "$(dirname "$CONFIG")" && pwd)
plain="$dir/.bench-shadow-off.$$.toml"
shadowed="$dir/.bench-shadow-on.$$.toml"
cp "$CONFIG" "$plain"
{ cat "$CONFIG"; printf '\n'; cat "$SHADOW"; } > "$shadowed"
trap 'rm -f "$plain" "$shadowed"' EXIT

bench() {
  python3 scripts/bench/bench_report.py "$BIN" bench "$@"
}

echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), config $CONFIG, shadow $SHADOW, rate $RATE"
for round in $(seq "$ROUNDS"); do
  order="off on"; [ $((round % 2)) = 0 ] && order="on off"
  for variant in $order; do
    cfg=$plain; [ "$variant" = on ] && cfg=$shadowed
    printf '{"round":%s,"shadow":"%s","load":"%s","report":%s}\n' "$round" "$variant" \
      "$(cut -d' ' -f1 /proc/loadavg)" "$(bench --config "$cfg" --frames "$FRAMES" --warmup 20 --rate "$RATE")"
  done
done
