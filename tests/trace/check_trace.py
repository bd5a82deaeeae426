#!/usr/bin/env python3
"""Checks CROWN_TRACE's files from tests/trace/trace_workload.cpp.

check_trace.py ranks N DIR         each crown-trace.<rank>.json parses and holds the
                                   workload's events with their peers and sizes
check_trace.py merged N FILE [--progress]
                                   crown-trace-merge's output: valid JSON, every rank's
                                   process and thread tracks, the same events, one clock
"""
import json
import os
import sys


def fail(message):
    print("check_trace.py: " + message, file=sys.stderr)
    sys.exit(1)


def spans(events, pid=None):
    return [e for e in events if e.get("ph") == "X" and (pid is None or e.get("pid") == pid)]


def find(events, name, where, **args):
    for e in events:
        if e["name"] == name and all(e.get("args", {}).get(k) == v for k, v in args.items()):
            if e["dur"] < 0:
                fail(f"{where}: {name} {args} has a negative duration")
            return e
    seen = sorted({(e["name"], json.dumps(e.get("args", {}), sort_keys=True)) for e in events
                   if e["name"] == name})
    fail(f"{where}: no {name} event with {args}; {name} events seen: {seen[:8]}")


def check_rank(events, r, n, where, progress):
    mine = spans(events, r)
    right, left = (r + 1) % n, (r + n - 1) % n
    find(mine, "put", where, peer=right, bytes=800)
    find(mine, "get", where, peer=left, bytes=400)
    find(mine, "co_sum", where, bytes=400, images=n, root=-1)
    find(mine, "co_broadcast", where, bytes=16, images=n, root=0)
    find(mine, "sync_all", where, images=n)
    if n > 1 and r == 0:
        e = find(mine, "call_send", where, targets=n - 1, callee=1)
        if "tracers" not in e["args"].get("actor", ""):
            fail(f"{where}: call_send names {e['args'].get('actor')!r}, not the tracers")
    if n > 1 and r > 0:
        e = find(mine, "call", where, caller=0, callee=r, endpoint=0)
        if not e["args"].get("actor", "").startswith("tracers"):
            fail(f"{where}: call names {e['args'].get('actor')!r}, not a tracer")
    names = {e["args"]["name"] for e in events
             if e.get("ph") == "M" and e["name"] == "thread_name" and e["pid"] == r}
    if "main" not in names:
        fail(f"{where}: rank {r} has no main thread track (threads: {sorted(names)})")
    if progress and "crown-progress" not in names:
        fail(f"{where}: rank {r}: no progress thread track (threads {sorted(names)})")
    return any(e["cat"] == "progress" for e in mine)
    for e in mine:
        for key in ("ts", "dur", "pid", "tid", "cat", "name"):
            if key not in e:
                fail(f"{where}: an event without {key}: {e}")


def main():
    mode, n, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    progress = "--progress" in sys.argv
    napped = []  # per rank: whether its progress thread napped (one busy rank may not)
    if mode == "ranks":
        files = sorted(f for f in os.listdir(path) if f.startswith("crown-trace."))
        expected = sorted(f"crown-trace.{r}.json" for r in range(n))
        if files != expected:
            fail(f"{path} holds {files}, expected {expected}")
        for r in range(n):
            where = os.path.join(path, f"crown-trace.{r}.json")
            with open(where) as f:
                doc = json.load(f)
            meta = doc["otherData"]
            if meta["crown_rank"] != r or meta["crown_ranks"] != n:
                fail(f"{where}: otherData says rank {meta['crown_rank']} of {meta['crown_ranks']}")
            if meta["clock_error_us"] < 0 or (r == 0 and meta["clock_offset_us"] != 0):
                fail(f"{where}: clock offset {meta['clock_offset_us']} error {meta['clock_error_us']}")
            if any(e["pid"] != r for e in doc["traceEvents"]):
                fail(f"{where}: an event of another pid")
            napped.append(check_rank(doc["traceEvents"], r, n, where, progress))
    else:
        with open(path) as f:
            doc = json.load(f)
        events = doc["traceEvents"]
        pids = {e["pid"] for e in spans(events)}
        if pids != set(range(n)):
            fail(f"{path}: tracks of pids {sorted(pids)}, expected 0..{n - 1}")
        procs = {e["pid"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
        if procs != set(range(n)):
            fail(f"{path}: process names for {sorted(procs)}")
        if min(e["ts"] for e in spans(events)) != 0:
            fail(f"{path}: the first event is not at 0")
        for r in range(n):
            napped.append(check_rank(events, r, n, f"{path} rank {r}", progress))
        meta = doc["otherData"]
        if len(meta["ranks"]) != n or meta["clock_error_bound_us"] != max(
                x["clock_error_us"] for x in meta["ranks"]):
            fail(f"{path}: otherData {meta}")
    if progress and not any(napped):
        fail(f"{path}: no rank's progress thread napped")
    if mode == "merged":
        print(f"merged trace: {n} ranks, {len(spans(events))} spans, "
              f"clock error bound {meta['clock_error_bound_us']:.3f} us")


main()
