#!/usr/bin/env python3
"""Writes the seed corpus for fuzz_am_decoder: one valid request of each kind.
Layout (am_codec.hpp, x86-64): u32 kind, u32 id, u64 runs, u64 bytes, u64 offset,
u64 operand, u64 compare, u32 op, u16 width, u16 floating; then runs (u64 offset,
u64 bytes) and the put payload."""
import os
import struct
import sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def header(kind, runs=0, nbytes=0, offset=0, operand=0, compare=0, op=0, width=0, floating=0):
    return struct.pack("<IIQQQQQIHH", kind, 7, runs, nbytes, offset, operand, compare, op, width,
                       floating)


seeds = {
    "put": header(1, 1, 8) + struct.pack("<QQ", 64, 8) + b"\x01" * 8,
    "put_two_runs": header(1, 2, 12) + struct.pack("<QQQQ", 0, 4, 128, 8) + b"\x02" * 12,
    "get": header(2, 2, 24) + struct.pack("<QQQQ", 0, 16, 256, 8),
    "atomic_add": header(3, offset=8, operand=1, op=2, width=8),
    "atomic_cas32": header(3, offset=4, operand=5, compare=4, op=7, width=4),
}
for name, blob in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(blob)
