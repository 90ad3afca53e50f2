#!/usr/bin/env python3
# Run by: tests/model_swap.rs and tests/shadow.rs (`make test`), scripts/gpu/gpu_shadow.sh; docs/OPERATIONS.md.
"""A deliberately broken classifier, for testing that `sealcheck evaluate --gate` refuses one.

  python3 scripts/demo/swap_classes.py models/cls.onnx /tmp/cls_swapped.onnx

Swaps the two output classes of the last Gemm (weights and bias), so the model calls every
good seal defective and every defective seal good, while its IO contract stays intact.
Needs onnx and numpy (scripts/requirements.txt).
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper as nh


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model = onnx.load(sys.argv[1])
    gemm = [n for n in model.graph.node if n.op_type == "Gemm"][-1]
    trans_b = next((a.i for a in gemm.attribute if a.name == "transB"), 0)
    initializers = {i.name: i for i in model.graph.initializer}
    for name, axis in ((gemm.input[1], 0 if trans_b else 1), (gemm.input[2], 0)):
        tensor = initializers[name]
        swapped = np.flip(nh.to_array(tensor), axis=axis).copy()
        tensor.CopyFrom(nh.from_array(swapped, name))
    onnx.save(model, sys.argv[2])


if __name__ == "__main__":
    main()
