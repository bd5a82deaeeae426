#!/usr/bin/python3
"""PyTorch DDP's figures beside crown-bench parallel's: the same GPT (pre-LN blocks, tanh GELU,
learned positions, an untied output layer), the same sizes, Adam, float32, one thread per rank,
gloo. Run by scripts/bench-parallel under mpirun with Debian's /usr/bin/python3 (python3-torch):

  mpirun -np 2 /usr/bin/python3 torch_baseline.py --out FILE [--bucket-view] [--smoke]
  mpirun -np 2 /usr/bin/python3 torch_baseline.py --out FILE --model fsdp [--fsdp S] [--smoke]

Appends "name value" lines (the largest over the ranks) to FILE for crown-bench parallel --torch:
  step_ddp_s                  median step time (steps 4..13), seconds
  rss_growth_default_mib      peak RSS growth, before the model to after step 3 (MiB), or
  rss_growth_bucket_view_mib  the same with gradient_as_bucket_view=True (--bucket-view)
  grad_sync_gloo_s            all_reduce of the whole gradient over DDP's bucket layout (1 MiB
                              first, then 25 MiB, reverse parameter order), median of 20
--model fsdp: crown-bench parallel's FSDP model, 16 equal blocks (V=256, T=64, C=384, NH=8, L=16;
--smoke: C=64, NH=4, T=32, L=4 as Crown's smoke), batch 4 per rank:
  rss_growth_ddp16_mib, step_ddp16_s                      DDP at its defaults (no --fsdp)
  rss_growth_fsdp_<s>_mib, step_fsdp_<s>_s                FullyShardedDataParallel, --fsdp s in
                                                          full, grad_op, no_shard; each Block
                                                          its own unit, the root the rest
  fsdp_cpu_unavailable 1      instead, where FSDP cannot run on CPU (the reason goes to stderr).
Debian's torch 1.13.1 on Python 3.11 cannot: torch.distributed.fsdp fails to import (a dataclass
default that Python 3.11 rejects, worked around below), then the constructor asks CUDA for the
compute device of CPU parameters ("Torch not compiled with CUDA enabled"), and 1.13's _lazy_init
raises "FSDP does not support CPU only execution" before the first forward in any case. Past
those (CUDA streams stubbed out, in a probe only), the first forward needs _allgather_base,
which 1.13's gloo lacks ("no support for _allgather_base in Gloo process group"), as it lacks
reduce_scatter ("ProcessGroupGloo does not support reduce_scatter").
"""
import argparse
import ctypes
import math
import os
import statistics
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return 0


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, 4 * C)
        self.fc_proj = nn.Linear(4 * C, C)
        self.NH = NH

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        hs = C // self.NH
        q, k, v = (t.view(B, T, self.NH, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V, T, C, NH, L):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.lnf = nn.LayerNorm(C)
        self.head = nn.Linear(C, V, bias=False)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


def buckets(params, first_cap=1 << 20, cap=25 << 20):
    """Element counts of DDP's buckets over reversed(params), as crown::parallel::assign_buckets."""
    out, current, limit = [], 0, first_cap
    for p in reversed(params):
        current += p.numel()
        if current * 4 >= limit:
            out.append(current)
            current, limit = 0, cap
    if current:
        out.append(current)
    return out


def import_fsdp():
    """FullyShardedDataParallel, ShardingStrategy and the Block wrap policy. torch 1.13's
    sharded_tensor/metadata.py declares a dataclass field whose default is an unhashable
    TensorProperties(), which Python 3.11 rejects (ValueError: mutable default); on that error
    the import is retried with TensorProperties hashable by identity, which is all it needs."""
    import dataclasses
    import functools
    try:
        import torch.distributed.fsdp as fsdp
    except ValueError as e:
        if dist.get_rank() == 0:
            print(f"# torch.distributed.fsdp import failed ({e}); retrying with "
                  "TensorProperties hashable", file=sys.stderr)
        for name in [m for m in sys.modules if m.startswith(("torch.distributed._shard",
                                                             "torch.distributed.fsdp"))]:
            del sys.modules[name]
        plain = dataclasses.dataclass

        def hashable(cls=None, **kw):
            def wrap(c):
                c = plain(c, **kw)
                if c.__name__ == "TensorProperties" and c.__hash__ is None:
                    c.__hash__ = object.__hash__
                return c
            return wrap if cls is None else wrap(cls)

        dataclasses.dataclass = hashable
        try:
            import torch.distributed.fsdp as fsdp
        finally:
            dataclasses.dataclass = plain
    from torch.distributed.fsdp import wrap
    if hasattr(wrap, "ModuleWrapPolicy"):
        policy = wrap.ModuleWrapPolicy({Block})
    else:
        policy = functools.partial(wrap.transformer_auto_wrap_policy,
                                   transformer_layer_cls={Block})
    return fsdp.FullyShardedDataParallel, fsdp.ShardingStrategy, policy


STRATEGIES = {"full": "FULL_SHARD", "grad_op": "SHARD_GRAD_OP", "no_shard": "NO_SHARD"}


def train(wrap, size, data):
    """Builds GPT(*size), wraps it, trains len(data) Adam steps. Returns the model, the peak RSS
    growth from before the model to after step 3 and the median time of steps 4.., both the
    largest over the ranks."""
    dist.barrier()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status("VmRSS:")
    model = GPT(*size)
    wrapped = wrap(model)
    opt = torch.optim.Adam(wrapped.parameters(), lr=1e-3)
    times, growth = [], 0
    for s in range(len(data)):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        loss = wrapped(data[s, :, :-1], data[s, :, 1:])
        loss.backward()
        opt.step()
        if s == 2:
            growth = status("VmHWM:") - before
        if s >= 3:
            times.append(time.perf_counter() - start)
    out = torch.tensor([float(growth), statistics.median(times)], dtype=torch.float64)
    dist.all_reduce(out, op=dist.ReduceOp.MAX)
    return model, out[0].item(), out[1].item()


def fsdp_model(o, rank):
    """--model fsdp: DDP (no --fsdp) or FSDP with strategy o.fsdp on the 16-block GPT."""
    # glibc's mmap threshold fixed at 256 KiB, as crown-bench parallel fixes it for these figures:
    # the adaptive default keeps freed blocks in the heap and raises the peak (DDP at np 2:
    # 749 MiB against 672), but mapping every large block afresh costs time (1.4 s a step
    # against 2.5 on a loaded 2-core machine), so step_* here are not DDP's best.
    ctypes.CDLL("libc.so.6").mallopt(-3, 256 << 10)  # M_MMAP_THRESHOLD
    V, T, C, NH, L = (256, 32, 64, 4, 4) if o.smoke else (256, 64, 384, 8, 16)
    torch.manual_seed(1234)
    data = torch.randint(0, V, (4 if o.smoke else 13, 4, T + 1))
    if o.fsdp is None:
        _, growth, step = train(torch.nn.parallel.DistributedDataParallel, (V, T, C, NH, L), data)
        lines = [f"rss_growth_ddp16_mib {growth / 1048576:.3f}", f"step_ddp16_s {step:.6f}"]
    else:
        try:
            fsdp, strategy, policy = import_fsdp()
            _, growth, step = train(
                lambda m: fsdp(m, sharding_strategy=getattr(strategy, STRATEGIES[o.fsdp]),
                               auto_wrap_policy=policy), (V, T, C, NH, L), data)
            lines = [f"rss_growth_fsdp_{o.fsdp}_mib {growth / 1048576:.3f}",
                     f"step_fsdp_{o.fsdp}_s {step:.6f}"]
        except Exception as e:  # every rank fails alike: FSDP's checks are local
            if rank == 0:
                frames = traceback.extract_tb(e.__traceback__)
                fsdp_frames = [f for f in frames if "/torch/distributed/fsdp/" in f.filename]
                at = "".join(f" at {f}:{n}" for f, n in dict.fromkeys(
                    (f.filename, f.lineno) for f in fsdp_frames[-1:] + frames[-1:]))
                print(f"# PyTorch {torch.__version__} FSDP {STRATEGIES[o.fsdp]} cannot run on "
                      f"CPU: {type(e).__name__}: {e}{at}", file=sys.stderr)
            lines = ["fsdp_cpu_unavailable 1"]
    if rank == 0:
        with open(o.out, "a") as f:
            f.write("\n".join(lines) + "\n")
        print(f"# torch {torch.__version__}, GPT V={V} T={T} C={C} NH={NH} L={L}, "
              f"{o.fsdp or 'ddp'}: " + "; ".join(lines))


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--out", required=True)
    a.add_argument("--bucket-view", action="store_true")
    a.add_argument("--model", choices=("ddp", "fsdp"), default="ddp")
    a.add_argument("--fsdp", choices=tuple(STRATEGIES))
    a.add_argument("--smoke", action="store_true")
    o = a.parse_args()
    if o.fsdp and o.model != "fsdp":
        a.error("--fsdp needs --model fsdp")
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    world = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29517", rank=rank,
                            world_size=world)
    if o.model == "fsdp":
        fsdp_model(o, rank)
        dist.destroy_process_group()
        return
    V, T, C, NH, L = (256, 32, 64, 4, 2) if o.smoke else (256, 64, 512, 8, 8)
    batch, steps = 4, (4 if o.smoke else 13)
    torch.manual_seed(1234)
    data = torch.randint(0, V, (steps, batch, T + 1))
    model, growth, step = train(
        lambda m: torch.nn.parallel.DistributedDataParallel(
            m, gradient_as_bucket_view=o.bucket_view), (V, T, C, NH, L), data)
    lines = []
    if o.bucket_view:
        lines.append(f"rss_growth_bucket_view_mib {growth / 1048576:.3f}")
    else:
        lines.append(f"step_ddp_s {step:.6f}")
        lines.append(f"rss_growth_default_mib {growth / 1048576:.3f}")
        flat = [torch.full((n,), float(rank)) for n in buckets(list(model.parameters()))]
        sync = []
        for _ in range(3 if o.smoke else 20):
            dist.barrier()
            start = time.perf_counter()
            for w in [dist.all_reduce(b, async_op=True) for b in flat]:
                w.wait()
            t = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            sync.append(t.item())
        lines.append(f"grad_sync_gloo_s {statistics.median(sync):.6f}")
    if rank == 0:
        with open(o.out, "a") as f:
            f.write("\n".join(lines) + "\n")
        params = sum(p.numel() for p in model.parameters())
        print(f"# torch {torch.__version__}, {params} parameters, buckets "
              f"{buckets(list(model.parameters()))}; " + "; ".join(lines))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
