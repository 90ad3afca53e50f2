#!/usr/bin/env python3
# Run by: scripts/gpu/gpu_cameras.sh (docs/PERFORMANCE.md, docs/PERFORMANCE-gpu-pipeline.md).
"""`sealcheck bench --json` reports on stdin, one line each on stdout: frames/s, the
capture-to-verdict p50/p99, per camera with several, the mean batch, how late the replay
offered paced frames (its own wake-up, inside the latency) and the GPU memory the run took,
prefixed with LABEL. Used by scripts/gpu/gpu_cameras.sh:

  sealcheck bench ... --json | python3 scripts/bench/bench_line.py LABEL
"""
import json
import sys

label = sys.argv[1] if len(sys.argv) > 1 else "bench"
for line in sys.stdin:
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    total = r["latency_ms"]["total"]
    parts = [
        f"{label}: cameras {r.get('cameras', 1)} fps {r['fps']:.1f} judged {r['judged']} "
        f"dropped {r['dropped']} total p50/p99 {total['p50']:.2f}/{total['p99']:.2f} ms"
    ]
    cameras = r.get("per_camera") or []
    if cameras:
        parts.append("per camera p50/p99 " + " ".join(
            f"{c['camera']}:{c['p50']:.2f}/{c['p99']:.2f}" for c in cameras))
    batches = r.get("batches")
    if batches:
        parts.append(f"batches mean {batches['frames'] / max(batches['runs'], 1):.2f} "
                     f"of max {batches['max_batch']}")
    late = r.get("replay_offer_late_ms")
    if late:
        parts.append(f"replay offered late p99/max {late['p99']:.2f}/{late['max']:.2f} ms")
    memory = r.get("gpu_memory")
    if memory:
        parts.append(f"GPU memory run {memory['run_mib']:.0f} MiB")
    print(" | ".join(parts))
