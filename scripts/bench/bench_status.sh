#!/bin/sh
# Run by hand, for docs/PERFORMANCE.md (the status page's and archive's cost).
# What the status page and the archive cost: `sealcheck bench` on the demo clip,
# alternating rounds of
#   off: no [status], no [archive]
#   on:  [status] with three polling clients doing what an open page does
#        (/api/status every second, /api/live.jpg twice a second, keep-alive),
#        and [archive] keep = "all" (every frame encoded as JPEG and written, with its mask)
# Rounds alternate (off, on, off, on, ...) so that load from other programs on a
# shared machine falls on both alike.
#
#   scripts/bench/bench_status.sh [ROUNDS] [FRAMES] [OUT_DIR]
#   RATE=8 scripts/bench/bench_status.sh ...   offers frames at 8/s like a camera (default: as fast
#                                        as the pipeline takes them)
#   CLIENTS=0 ...  "on" without the polling clients (the archive's share)
#   ARCHIVE=0 ...  "on" without [archive] (the page's share)
#
# Needs a release build (target/release/sealcheck) and ONNX Runtime (make onnxruntime).
# Writes OUT_DIR/{off,on}-N.json (bench --json) and prints the medians.
set -eu
cd "$(dirname "$0")/../.."
ROUNDS=${1:-3}
FRAMES=${2:-200}
OUT=${3:-results/bench_status}
BIN=${BIN:-target/release/sealcheck}
PORT=${PORT:-19759}
PYTHON=${PYTHON:-python3}
export ORT_DYLIB_PATH=${ORT_DYLIB_PATH:-$PWD/.ort/lib/libonnxruntime.so.1.31.1}
mkdir -p "$OUT"
WORK=$(mktemp -d)
CLIENTS=
cleanup() {
    [ -n "$CLIENTS" ] && kill "$CLIENTS" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
REPO=$PWD
sed "s#\.\./#$REPO/#" config/demo.toml > "$WORK/off.toml"
cp "$WORK/off.toml" "$WORK/on.toml"
cat >> "$WORK/on.toml" <<CONF

[status]
listen = "127.0.0.1:$PORT"

CONF
if [ "${ARCHIVE:-1}" != 0 ]; then
    cat >> "$WORK/on.toml" <<CONF

[archive]
dir = "$WORK/archive"
keep = "all"
format = "jpeg"
CONF
fi

clients() {
    "$PYTHON" - "$PORT" <<'PY' &
import http.client, sys, threading, time
port = int(sys.argv[1])
def page():
    conn, tick = None, 0
    while True:
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            for path in (["/api/status"] if tick % 2 == 0 else []) + ["/api/live.jpg"]:
                conn.request("GET", path)
                conn.getresponse().read()
        except Exception:
            conn = None
        tick += 1
        time.sleep(0.5)
for _ in range(3):
    threading.Thread(target=page, daemon=True).start()
while True:
    time.sleep(60)
PY
    CLIENTS=$!
}

for round in $(seq 1 "$ROUNDS"); do
    for mode in off on; do
        rm -rf "$WORK/archive"
        [ "$mode" = on ] && [ "${CLIENTS:-1}" != 0 ] && clients
        "$BIN" bench --config "$WORK/$mode.toml" --frames "$FRAMES" --warmup 10 --json ${RATE:+--rate "$RATE"} \
            2>"$OUT/$mode-$round.log" | tail -n 1 > "$OUT/$mode-$round.json"
        if [ "$mode" = on ]; then
            [ -n "$CLIENTS" ] && kill "$CLIENTS"; CLIENTS=
            find "$WORK/archive" -name '*_mask.png' 2>/dev/null | wc -l > "$OUT/on-$round.archived"
            echo "round $round: archived $(cat "$OUT/on-$round.archived") of $((FRAMES + 10)) frames" >&2
        fi
        echo "round $round $mode: $(cat "$OUT/$mode-$round.json")"
    done
done

"$PYTHON" - "$OUT" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for mode in ("off", "on"):
    runs = [json.load(open(f"{out}/{mode}-{r}.json")) for r in range(1, rounds + 1)]
    fps = [r["fps"] for r in runs]
    p99 = [r["latency_ms"]["total"]["p99"] for r in runs]
    kept = ""
    if mode == "on":
        kept = "; archived " + ", ".join(open(f"{out}/on-{r}.archived").read().strip() for r in range(1, rounds + 1)) + " frames"
    print(f"{mode:>3}: fps median {statistics.median(fps):7.2f} (runs {', '.join(f'{x:.2f}' for x in fps)}); "
          f"verdict p99 median {statistics.median(p99):7.1f} ms (runs {', '.join(f'{x:.1f}' for x in p99)}){kept}")
PY
