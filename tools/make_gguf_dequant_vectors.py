#!/usr/bin/env python3
"""Decoding vectors for every ggml block format minivllm reads: random blocks (every code bit pattern
is valid; the f16 scales set to finite values) and gguf-py's numpy dequantisation of them, the
reference tests/loader/gguf_dequant_vectors_test.cc holds common/quant_blocks.h's decoding to.

Usage (gguf==0.19.0 and numpy, tools/requirements-goldens.txt):
    python3 tools/make_gguf_dequant_vectors.py tests/goldens/gguf-dequant/vectors.json
"""
import json
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

# type: (blocks, byte offsets of the block's f16 scales, their magnitude)
TYPES = {
    Q.Q8_0: (2, [0], 0.01), Q.Q4_0: (2, [0], 0.1), Q.Q4_1: (2, [0, 2], 0.1), Q.Q5_0: (2, [0], 0.1),
    Q.Q5_1: (2, [0, 2], 0.1), Q.IQ4_NL: (2, [0], 0.01), Q.Q2_K: (2, [80, 82], 0.05), Q.Q3_K: (2, [108], 0.01),
    Q.Q4_K: (2, [0, 2], 0.005), Q.Q5_K: (2, [0, 2], 0.005), Q.Q6_K: (2, [208], 0.0005), Q.IQ4_XS: (2, [0], 0.0005),
    Q.MXFP4: (6, [], 0),  # its E8M0 exponents: below
}
# MXFP4's exponent byte (E8M0): 0 and 1 (ggml's denormal scales), 127 and 128 (scale 1/2 and 1), 140, 200
# (255 would overflow fp32 at its larger codes).
MXFP4_EXPONENTS = [0, 1, 127, 128, 140, 200]


def main():
    rng = np.random.default_rng(47)
    out = {"generator": "python3 tools/make_gguf_dequant_vectors.py tests/goldens/gguf-dequant/vectors.json",
           "gguf_py_version": "0.19.0", "types": []}
    for qtype, (blocks, f16_at, scale) in TYPES.items():
        block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, size=(blocks, block_bytes), dtype=np.uint8)
        for b in range(blocks):
            if qtype == Q.MXFP4:
                raw[b, 0] = MXFP4_EXPONENTS[b]
            for at in f16_at:
                v = np.float16(rng.choice([-1.0, 1.0]) * rng.uniform(0.2, 1.0) * scale)
                raw[b, at:at + 2] = np.frombuffer(v.tobytes(), dtype=np.uint8)
        values = gguf.quants.dequantize(raw.reshape(-1), qtype).astype(np.float32).reshape(-1)
        assert values.size == blocks * block_elems
        out["types"].append({"name": qtype.name, "type": int(qtype), "bytes": raw.reshape(-1).tobytes().hex(),
                             "values": [float(x) for x in values]})
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
