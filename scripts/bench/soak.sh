#!/usr/bin/env bash
# Run by hand, for docs/RELIABILITY.md (the soak).
# Soak: `sealcheck run` on a live camera for MINUTES with faults every minute, checking that
# memory and file descriptors stay flat and that every frame in gets its result out.
#
#   camera: gst-launch-1.0 videotestsrc (live, 15 fps) ! jpegenc ! multipartmux ! tcpserversink 127.0.0.1:PORT
#   sealcheck: [source] kind = "pipeline", live = true: tcpclientsrc ! multipartdemux ! jpegdec ! ... ! appsink
#
# Each minute:  +10 s camera killed for 5 s (the source is torn down; sealcheck rebuilds it)
#               +25 s SIGHUP (config reload)
#               +35 s results file unwritable for 8 s (the path points at /dev/full; then it is removed)
# Every 5 s the resident memory (VmRSS) and open descriptors of the process are sampled.
#
# Pass when, after the warm-up (first minute, or a fifth of the run if shorter):
#   - resident memory grows by at most 8 MiB (MAX_RSS_GROWTH_KIB) over its value at the warm-up's end,
#   - open descriptors at the end are at most 2 above their value at the warm-up's end,
#   - frames delivered == results emitted, and lines in the results files + lines lost == frames,
#     with every seq present once (0 .. frames-1, less the lost ones),
#   - every camera kill is one outage logged once at its start and once at its end,
#   - the process never exits by itself and exits 0 on SIGTERM (1 if result lines were lost).
#
# Usage: scripts/bench/soak.sh [MINUTES]   (default 10)
# Env:   SEALCHECK (binary, default target/release/sealcheck), BACKEND (default onnxruntime if
#        ORT_DYLIB_PATH is set, else tract), KEEP=1 keeps the work folder, MAX_RSS_GROWTH_KIB.
# Exit:  0 pass, 1 a check failed, 2 could not run.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
minutes="${1:-10}"
bin="${SEALCHECK:-$here/target/release/sealcheck}"
max_growth_kib="${MAX_RSS_GROWTH_KIB:-8192}"
if [[ -n "${BACKEND:-}" ]]; then
    backend="$BACKEND"
elif [[ -n "${ORT_DYLIB_PATH:-}" && -f "${ORT_DYLIB_PATH}" ]]; then
    backend="onnxruntime"
else
    backend="tract"
fi
[[ -x "$bin" ]] || { echo "soak: $bin not built (cargo build --release)" >&2; exit 2; }
command -v gst-launch-1.0 >/dev/null || { echo "soak: gst-launch-1.0 missing (gstreamer1.0-tools)" >&2; exit 2; }

work="$(mktemp -d /tmp/sealcheck-soak.XXXXXX)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
camera_pid=""
pid=""
cleanup() {
    [[ -n "$camera_pid" ]] && kill "$camera_pid" 2>/dev/null || true
    [[ -n "$pid" ]] && kill -KILL "$pid" 2>/dev/null || true
    rm -f "$work/results.jsonl" 2>/dev/null || true
    if [[ "${KEEP:-0}" != 1 ]]; then rm -rf "$work"; else echo "soak: kept $work"; fi
}
trap cleanup EXIT

start_camera() {
    gst-launch-1.0 -q videotestsrc is-live=true pattern=ball \
        ! video/x-raw,width=320,height=240,framerate=15/1 ! jpegenc ! multipartmux \
        ! tcpserversink host=127.0.0.1 port="$port" sync-method=latest-keyframe >/dev/null 2>&1 &
    camera_pid=$!
}
stop_camera() {
    kill -KILL "$camera_pid" 2>/dev/null || true
    wait "$camera_pid" 2>/dev/null || true
    camera_pid=""
}

cat >"$work/sealcheck.toml" <<EOF
[source]
kind = "pipeline"
live = true
pipeline = "tcpclientsrc host=127.0.0.1 port=$port ! multipartdemux ! jpegdec ! videoconvert ! video/x-raw,format=RGB ! appsink name=sink sync=false"
retry_min_ms = 200
retry_max_ms = 2000
frame_timeout_ms = 2000

[inference]
backend = "$backend"

[models.segmentation]
path = "$here/models/seg.onnx"

[models.classifier]
path = "$here/models/cls.onnx"

[output]
results = "$work/results.jsonl"
log_verdicts = false
rotate_mib = 1
keep_files = 1000

[logging]
format = "logfmt"
level = "info"

[service]
drain_timeout_s = 20
stall_timeout_s = 10
EOF

start_camera
sleep 1
"$bin" run --config "$work/sealcheck.toml" >"$work/summary.txt" 2>"$work/log.txt" &
pid=$!
started=$(date +%s)
end=$((started + minutes * 60))
warmup=$(( minutes * 60 / 5 < 60 ? minutes * 60 / 5 : 60 ))
echo "soak: ${minutes} min, backend $backend, camera on 127.0.0.1:$port, pid $pid, work $work"
echo "t_s,rss_kib,fds" >"$work/samples.csv"

kills=0 hups=0 unwritable=0 part=0
killed_in=-1 hup_in=-1 unwritable_in=-1
next_sample=$started
while (( $(date +%s) < end )); do
    now=$(date +%s)
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "soak: FAIL: sealcheck exited by itself after $((now - started)) s" >&2
        tail -20 "$work/log.txt" >&2
        exit 1
    fi
    t=$((now - started))
    if (( now >= next_sample )); then
        rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
        fds=$(ls "/proc/$pid/fd" | wc -l)
        echo "$t,$rss,$fds" >>"$work/samples.csv"
        next_sample=$((next_sample + 5))
    fi
    cycle=$((t / 60)) phase=$((t % 60))
    # Each fault once per minute, in its window (the loop may skip a second).
    if (( phase >= 10 && phase < 15 && killed_in != cycle )) && [[ -n "$camera_pid" ]]; then
        stop_camera; kills=$((kills + 1)); killed_in=$cycle
    fi
    if (( phase >= 15 )) && [[ -z "$camera_pid" ]]; then start_camera; fi
    if (( phase >= 25 && hup_in != cycle )); then kill -HUP "$pid"; hups=$((hups + 1)); hup_in=$cycle; fi
    if (( phase >= 35 && phase < 43 && unwritable_in != cycle )); then
        part=$((part + 1))
        mv "$work/results.jsonl" "$work/part-$part.jsonl" 2>/dev/null || true
        ln -s /dev/full "$work/results.jsonl"
        unwritable=$((unwritable + 1)) unwritable_in=$cycle
    fi
    if (( phase >= 43 )) && [[ -L "$work/results.jsonl" ]]; then rm -f "$work/results.jsonl"; fi
    sleep 1
done
[[ -z "$camera_pid" ]] && start_camera
[[ -L "$work/results.jsonl" ]] && rm -f "$work/results.jsonl"
sleep 3
rss_end=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
fds_end=$(ls "/proc/$pid/fd" | wc -l)
echo "$(( $(date +%s) - started )),$rss_end,$fds_end" >>"$work/samples.csv"
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=""

python3 - "$work" "$warmup" "$max_growth_kib" "$kills" "$status" "$minutes" "$hups" "$unwritable" <<'PY'
import glob, json, os, re, sys
work, warmup, max_growth, kills, status, minutes, hups, unwritable = sys.argv[1], *map(int, sys.argv[2:])
ok = True
def check(cond, what):
    global ok
    print(("  ok    " if cond else "  FAIL  ") + what)
    ok &= cond
samples = [tuple(map(int, l.split(","))) for l in open(f"{work}/samples.csv").read().split()[1:]]
after = [s for s in samples if s[0] >= warmup]
base = after[0] if after else samples[-1]
peak = max(s[1] for s in after) if after else base[1]
log = open(f"{work}/log.txt").read()
summary = open(f"{work}/summary.txt").read()
m = re.search(r"frames: (\d+) delivered, (\d+) results", summary)
delivered, emitted = (int(m[1]), int(m[2])) if m else (-1, -2)
seqs = []
for path in glob.glob(f"{work}/part-*.jsonl") + glob.glob(f"{work}/results.jsonl*"):
    if os.path.isfile(path):
        seqs += [json.loads(l)["seq"] for l in open(path) if l.strip()]
lost = sum(int(x) for x in re.findall(r"lost_lines=(\d+)", "\n".join(
    l for l in log.splitlines() if "written again" in l or "could still not be written" in l)))
print(f"soak result: {minutes} min, {delivered} frames delivered, {emitted} results emitted, "
      f"{len(seqs)} lines in the results files, {lost} lost, exit {status}")
print(f"  memory: VmRSS {samples[0][1]} KiB at start, {base[1]} KiB after warm-up ({base[0]} s), "
      f"peak {peak} KiB, {samples[-1][1]} KiB at the end: growth {peak - base[1]} KiB (limit {max_growth})")
print(f"  descriptors: {base[2]} after warm-up, {max(s[2] for s in after) if after else base[2]} peak, {samples[-1][2]} at the end")
print(f"  faults: {kills} camera kills, {hups} SIGHUP, {unwritable} unwritable spells; "
      f"outages logged: {log.count('source lost')} start, {log.count('source is back after')} end; "
      f"write-error episodes logged: {log.count('cannot write the results file')}")
check(peak - base[1] <= max_growth, f"resident memory growth after warm-up {peak - base[1]} KiB <= {max_growth} KiB")
check(samples[-1][2] <= base[2] + 2, f"open descriptors flat ({base[2]} -> {samples[-1][2]})")
check(delivered == emitted, f"frames delivered == results emitted ({delivered}, {emitted})")
check(len(seqs) == len(set(seqs)), "no seq written twice")
check(len(seqs) + lost == delivered, f"lines written + lost == frames ({len(seqs)} + {lost} == {delivered})")
check(not seqs or max(seqs) == delivered - 1, "the last frame has its line")
check(log.count("source lost") == kills and log.count("source is back after") == kills,
      f"each of {kills} camera kills is one outage, logged at start and end")
check(log.count("cannot write the results file") == unwritable, f"each of {unwritable} unwritable spells logged once")
check(status == (1 if lost else 0), f"exit status {status} ({'lines lost' if lost else 'nothing lost'})")
sys.exit(0 if ok else 1)
PY
