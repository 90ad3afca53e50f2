#!/usr/bin/env python3
# Run by: scripts/bench/bench_mqtt.sh and scripts/bench/bench_shadow.sh.
"""One `sealcheck bench ... --json` run; prints its JSON report with the CPU seconds the
process used added as "cpu_s" (user + system: less sensitive than frames/s to what else the
machine runs). Used by scripts/bench/bench_mqtt.sh and scripts/bench/bench_shadow.sh:

  python3 scripts/bench/bench_report.py BIN bench --config FILE --frames N ...
"""
import json
import resource
import subprocess
import sys

out = subprocess.run(sys.argv[1:] + ["--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                     text=True, check=True).stdout
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
report = json.loads(out)
report["cpu_s"] = round(usage.ru_utime + usage.ru_stime, 3)
print(json.dumps(report))
