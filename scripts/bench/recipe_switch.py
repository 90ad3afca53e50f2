#!/usr/bin/env python3
"""Issue 39's recipe goals, measured as the line sees them (docs/PERFORMANCE.md, "Recipes"):

- switch to a prepared recipe: from the PLC's RecipeRequest to the first part judged by it,
  at most one part interval at 10 parts/s, no part lost;
- preparing a recipe (its own model files opened, checked, warmed up) never delays a part of
  the running one by more than 10 % (trigger -> ResultsValid p99, while preparing vs before).

`sealcheck run` on the sample clip looped as a live 30 frames/s camera, `[trigger] mode =
"plc"`, parts triggered through the Modbus server at RATE by this script's PLC (polling every
millisecond, one connection for triggers, one for results, one for the recipe), the recipe
prepared over HTTP (`POST /api/recipe?name=b&prepare=true`) a third of the way in and switched
to over Modbus (RecipeId, RecipeRequest) two thirds of the way in.

    BIN=target/ci/sealcheck BACKEND=onnxruntime RATE=10 PARTS=300 scripts/bench/recipe_switch.py
"""

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("BIN", os.path.join(ROOT, "target/ci/sealcheck"))
BACKEND = os.environ.get("BACKEND", "onnxruntime")
RATE = float(os.environ.get("RATE", "10"))
PARTS = int(os.environ.get("PARTS", "300"))
WARMUP = int(os.environ.get("WARMUP", "20"))
POLL = 0.001


class Plc:
    """A minimal Modbus TCP client (unit 1): the requests a PLC's program makes."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.tid = 0

    def _call(self, pdu):
        self.tid = (self.tid + 1) & 0xFFFF
        self.sock.sendall(struct.pack(">HHHB", self.tid, 0, len(pdu) + 1, 1) + pdu)
        head = self._read(7)
        _, _, length, _ = struct.unpack(">HHHB", head)
        body = self._read(length - 1)
        if body[0] & 0x80:
            raise RuntimeError(f"Modbus exception {body[1]} for function {pdu[0]}")
        return body

    def _read(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise RuntimeError("the Modbus server closed the connection")
            data += chunk
        return data

    def bits(self, address, count):
        body = self._call(struct.pack(">BHH", 2, address, count))
        return [bool(body[2 + i // 8] >> (i % 8) & 1) for i in range(count)]

    def inputs(self, address, count):
        body = self._call(struct.pack(">BHH", 4, address, count))
        return list(struct.unpack(f">{count}H", body[2 : 2 + 2 * count]))

    def coil(self, address, on):
        self._call(struct.pack(">BHH", 5, address, 0xFF00 if on else 0))

    def registers(self, address, values):
        self._call(struct.pack(f">BHHB{len(values)}H", 16, address, len(values), 2 * len(values), *values))

    def wait(self, check, within):
        until = time.monotonic() + within
        while time.monotonic() < until:
            if check():
                return True
            time.sleep(POLL)
        return False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(dir, modbus, status):
    copies = os.path.join(dir, "copies")
    os.makedirs(copies)
    for name in ("seg.onnx", "cls.onnx"):
        shutil.copy(os.path.join(ROOT, "models", name), copies)
    clip = os.path.join(ROOT, "samples/demo_clip/frame_%05d.jpg")
    text = f"""[source]
kind = "pipeline"
pipeline = "multifilesrc location={clip} loop=true caps=image/jpeg,framerate=30/1 ! jpegdec ! videoconvert ! video/x-raw,format=RGB ! identity sync=true ! appsink name=sink"
live = true

[inference]
backend = "{BACKEND}"
threads = 2

[models.segmentation]
path = "{ROOT}/models/seg.onnx"

[models.classifier]
path = "{ROOT}/models/cls.onnx"

[output]
results = "{dir}/results.jsonl"
log_verdicts = false

[logging]
level = "warn"

[trigger]
mode = "plc"

[modbus]
listen = "127.0.0.1:{modbus}"

[status]
listen = "127.0.0.1:{status}"

[recipes.a]
id = 1

[recipes.b]
id = 2
segmentation = "{copies}/seg.onnx"
classifier = "{copies}/cls.onnx"
defect_threshold = 0.4
"""
    path = os.path.join(dir, "sealcheck.toml")
    with open(path, "w") as f:
        f.write(text)
    return path


def percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, max(0, int(round(p / 100 * len(values) + 0.5)) - 1))]


def main():
    dir = tempfile.mkdtemp(prefix="recipe-bench-")
    modbus, status = free_port(), free_port()
    config = write_config(dir, modbus, status)
    env = dict(os.environ)
    service = subprocess.Popen([BIN, "run", "--config", config], env=env, stderr=open(os.path.join(dir, "log"), "w"))
    try:
        deadline = time.monotonic() + 60
        plc = None
        while time.monotonic() < deadline:
            try:
                plc = Plc(modbus)
                if plc.bits(0, 1)[0]:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        else:
            sys.exit(f"never Online; log in {dir}/log")
        plc.coil(0, True)

        triggered, valid = {}, {}
        events = {}

        def triggers():
            p = Plc(modbus)
            start = time.monotonic()
            for k in range(PARTS):
                part = k + 1
                time.sleep(max(0.0, start + k / RATE - time.monotonic()))
                p.registers(0, [part >> 16, part & 0xFFFF])
                at = time.monotonic()
                p.coil(1, True)
                if p.wait(lambda: p.bits(2, 1)[0], 0.5):
                    triggered[part] = at
                p.coil(1, False)

        def results():
            p = Plc(modbus)
            last = time.monotonic()
            while len(valid) < PARTS and time.monotonic() - last < 10:
                if not p.bits(3, 1)[0]:
                    time.sleep(POLL)
                    continue
                seen = time.monotonic()
                last = seen
                high, low = p.inputs(2, 2)
                valid[(high << 16) | low] = seen
                p.coil(2, True)
                p.wait(lambda: not p.bits(3, 1)[0], 1.0)
                p.coil(2, False)

        threads = [threading.Thread(target=triggers), threading.Thread(target=results)]
        started = time.monotonic()
        for t in threads:
            t.start()
        # The middle third: product changeovers one after another over HTTP,
        # each recipe prepared (its own model files opened, checked, warmed
        # up) while the other judges, then switched to.
        def http(query):
            request = urllib.request.Request(f"http://127.0.0.1:{status}/api/recipe?{query}", method="POST")
            with urllib.request.urlopen(request, timeout=120) as answer:
                return json.load(answer)

        time.sleep(max(0.0, started + PARTS / 3 / RATE - time.monotonic()))
        windows = []
        active, other = "a", "b"
        while time.monotonic() < started + PARTS * 2 / 3 / RATE - 3:
            begin = time.monotonic()
            prepared = http(f"name={other}&prepare=true")
            windows.append((begin, time.monotonic()))
            if prepared.get("prepared", {}).get("name") != other:
                sys.exit(f"prepare answered {prepared}")
            time.sleep(0.5)
            http(f"name={other}")
            active, other = other, active
            time.sleep(0.5)
        if active != "a":
            http("name=a")
        # Two thirds of the way in: b prepared, then the PLC switches to it.
        http("name=b&prepare=true")
        time.sleep(max(0.0, started + PARTS * 2 / 3 / RATE - time.monotonic()))
        recipe = Plc(modbus)
        recipe.registers(2, [2])
        events["switch_request"] = time.monotonic()
        recipe.coil(4, True)
        done = recipe.wait(lambda: any(recipe.bits(8, 2)), 30)
        events["switch_done"] = time.monotonic()
        outcome = recipe.bits(8, 2)
        recipe.coil(4, False)
        for t in threads:
            t.join()
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(60)

    lines = [json.loads(l) for l in open(os.path.join(dir, "results.jsonl"))]
    by_part = {}
    for line in lines:
        by_part.setdefault(line["part_id"], []).append(line)
    once = all(len(by_part.get(p, [])) == 1 for p in triggered)
    latency = {p: (valid[p] - triggered[p]) * 1e3 for p in triggered if p in valid}
    measured = [p for p in sorted(latency) if p > WARMUP]
    before = [latency[p] for p in measured if triggered[p] < windows[0][0]]
    preparing = lambda t: any(begin <= t <= end for begin, end in windows)
    during = [latency[p] for p in measured if preparing(triggered[p]) or any(begin <= valid.get(p, 0) <= end for begin, end in windows)]
    judged_by_b = sorted(p for p in triggered if triggered[p] > events["switch_request"] and by_part.get(p) and by_part[p][0].get("recipe") == "b")
    first_b = judged_by_b[0] if judged_by_b else None
    after_request_by_a = [p for p in triggered if triggered[p] > events["switch_request"] and by_part.get(p) and by_part[p][0].get("recipe") == "a"]
    interval_ms = 1e3 / RATE
    report = {
        "backend": BACKEND,
        "rate": RATE,
        "parts triggered": len(triggered),
        "results": len(lines),
        "every part exactly one result": once and len(lines) == len(triggered),
        "preparations": len(windows),
        "a preparation took p50/max (s)": (round(percentile([e - b for b, e in windows], 50), 3), round(max(e - b for b, e in windows), 3)),
        "trigger->ResultsValid p50/p99 before preparing (ms)": (round(percentile(before, 50), 2), round(percentile(before, 99), 2), len(before)),
        "trigger->ResultsValid p50/p99 while preparing (ms)": (round(percentile(during, 50), 2), round(percentile(during, 99), 2), len(during)),
"p99 of parts triggered or answered while preparing / before": round(percentile(during, 99) / percentile(before, 99), 3) if before and during else None,
        "switch: RecipeDone": bool(done and outcome[0]),
        "switch: request -> RecipeDone (ms)": round((events["switch_done"] - events["switch_request"]) * 1e3, 2),
        "switch: request -> trigger of the first part judged by b (ms)": round((triggered[first_b] - events["switch_request"]) * 1e3, 2) if first_b else None,
        "switch: parts triggered after the request judged by a": sorted(after_request_by_a),
        "part interval (ms)": interval_ms,
        "folder": dir,
    }
    for key, value in report.items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
