#!/usr/bin/python3
"""PyTorch DDP's figures beside crown-bench parallel's: the same GPT (pre-LN blocks, tanh GELU,
learned positions, an untied output layer), the same sizes, Adam, float32, one thread per rank,
gloo. Run by scripts/bench-parallel under mpirun with Debian's /usr/bin/python3 (python3-torch):

  mpirun -np 2 /usr/bin/python3 torch_baseline.py --out FILE [--bucket-view] [--smoke]

Appends "name value" lines to FILE for crown-bench parallel --torch FILE:
  step_ddp_s                  median step time (steps 4..13), seconds
  rss_growth_default_mib      peak RSS growth, before the model to after step 3 (MiB), or
  rss_growth_bucket_view_mib  the same with gradient_as_bucket_view=True (--bucket-view)
  grad_sync_gloo_s            all_reduce of the whole gradient over DDP's bucket layout (1 MiB
                              first, then 25 MiB, reverse parameter order), median of 20
"""
import argparse
import math
import os
import statistics
import time

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


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--out", required=True)
    a.add_argument("--bucket-view", action="store_true")
    a.add_argument("--smoke", action="store_true")
    o = a.parse_args()
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    world = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29517", rank=rank,
                            world_size=world)
    V, T, C, NH, L = (256, 32, 64, 4, 2) if o.smoke else (256, 64, 512, 8, 8)
    batch, steps = 4, (4 if o.smoke else 13)
    torch.manual_seed(1234)
    data = torch.randint(0, V, (steps, batch, T + 1))
    dist.barrier()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status("VmRSS:")
    model = GPT(V, T, C, NH, L)
    ddp = torch.nn.parallel.DistributedDataParallel(model,
                                                    gradient_as_bucket_view=o.bucket_view)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    times, growth = [], 0
    for s in range(steps):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        loss = ddp(data[s, :, :-1], data[s, :, 1:])
        loss.backward()
        opt.step()
        if s == 2:
            growth = status("VmHWM:") - before
        if s >= 3:
            times.append(time.perf_counter() - start)
    step = torch.tensor([statistics.median(times)], dtype=torch.float64)
    dist.all_reduce(step, op=dist.ReduceOp.MAX)
    g = torch.tensor([float(growth)], dtype=torch.float64)
    dist.all_reduce(g, op=dist.ReduceOp.MAX)
    lines = []
    if o.bucket_view:
        lines.append(f"rss_growth_bucket_view_mib {g.item() / 1048576:.3f}")
    else:
        lines.append(f"step_ddp_s {step.item():.6f}")
        lines.append(f"rss_growth_default_mib {g.item() / 1048576:.3f}")
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
