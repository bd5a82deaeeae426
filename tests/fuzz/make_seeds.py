#!/usr/bin/env python3
"""Writes the seed corpora: for fuzz_am_decoder one valid request of each kind (into
DIR), for fuzz_controller_messages a command and a reply (into DIR-controller).
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


# Controller messages (lib/actor/protocol.hpp): command_header is u32 magic, u16 version,
# u16 kind, u64 seq, u64 request, u64 mesh, u32 endpoint, u8 mode, u8 op, u16 fanout,
# u32 targets, i32 origin, i32 sequencer, u32 reserved, u64 payload bytes (64 bytes);
# then the payload and per target its order (u64), for a relayed command (origin !=
# sequencer) its order in the origin's stream (u64), its rank (i32) and position (u32).
controller = out.rstrip("/") + "-controller"
os.makedirs(controller, exist_ok=True)
MAGIC = 0x4E575243
VERSION = 5
payload = struct.pack("<Q", 3) + b"abc"
command = struct.pack("<IHHQQQIBBHIiiIQ", MAGIC, VERSION, 2, 1, 1, 1, 0, 0, 0, 2, 2, 0, 0, 0,
                      len(payload))
command += payload + struct.pack("<QQ", 0, 0) + struct.pack("<ii", 1, 2) + struct.pack("<II", 0, 1)
relayed = struct.pack("<IHHQQQIBBHIiiIQ", MAGIC, VERSION, 2, 1, 1, 1, 0, 0, 0, 2, 2, 1, 0, 0,
                      len(payload))
relayed += payload + struct.pack("<QQ", 0, 0) + struct.pack("<QQ", 3, 4)
relayed += struct.pack("<ii", 1, 2) + struct.pack("<II", 0, 1)
record = struct.pack("<IBQ", 0, 0, 4) + b"\x07\x00\x00\x00"
# A reply: u32 magic, u16 version, u16 kind, u64 request, u32 records, u8 leg (1: to the
# caller), 3 zero bytes (24 bytes); then its records.
reply = struct.pack("<IHHQIB3x", MAGIC, VERSION, 4, 1, 1, 1) + record
# A note: u32 magic, u16 version, u16 kind, u64 target, u64 seq, u64 type (32 bytes), then
# its payload (a supervision event's failures, a port message's value).
note = struct.pack("<IHHQQQ", MAGIC, VERSION, 7, 1 << 40 | 1, 0, 12345) + struct.pack("<i", 7)
for name, blob in {"command": command, "relayed": relayed, "reply": reply, "note": note}.items():
    with open(os.path.join(controller, name), "wb") as f:
        f.write(blob)
