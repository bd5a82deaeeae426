// crown-bench parallel: data-parallel training against MPI and PyTorch DDP (gloo).
//   mpirun -np 2 crown-bench parallel [--smoke] [--torch FILE]
// Figures, all float32, one BLAS thread per rank:
//   grad_sync       DDP's bucketed all-reduce of a whole gradient (>= 25 M parameters: a GPT
//                   of 8 blocks of 512 channels), median of 20, against one MPI_Allreduce of
//                   the same bytes in the same run, and against gloo's all_reduce over the
//                   same buckets (from FILE, written by torch_baseline.py before this run)
//   step            a DDP training step of that model (batch 4 x 64 tokens per rank) against
//                   PyTorch DDP's step (FILE)
//   rss_growth      peak resident-set growth from before the model is built to after step 3,
//                   against PyTorch DDP at its defaults and with gradient_as_bucket_view=True
//   hidden          the fraction of DDP's all-reduce time hidden behind backward (reported)
// FSDP, on a GPT of 16 equal blocks of 384 channels (28.5 M parameters), batch 4 x 64:
//   model_state_*   peak bytes per rank of parameters + gradients + Adam state, from the
//                   accounting allocator, for DDP, SHARD_GRAD_OP and FULL_SHARD, against
//                   DDP's / dp (target for FULL_SHARD: ratio >= 1/1.1); gathered_* (the units
//                   held unsharded: parameters and the two gradient slots) reported apart
//   step_fsdp       FULL_SHARD's and SHARD_GRAD_OP's step against DDP's (reported)
//   rss_growth_fsdp peak resident-set growth of FULL_SHARD against PyTorch FSDP FULL_SHARD
//                   (gloo, CPU) or, where that cannot run, PyTorch DDP on the same model (FILE)
//   all_gather, reduce_scatter  FSDP's one-sided collectives of one block unit against
//                   MPI_Allgather and MPI_Reduce_scatter_block of the same bytes
// Tensor and pipeline parallelism (np 2), on a GPT of 8 blocks of 256 channels, global batch
// 8 x 64 tokens:
//   tp_allreduce    one of a Megatron layer pair's all-reduces (batch x T x C activations)
//                   against MPI_Allreduce of the same bytes
//   stage_transfer  an activation crossing a stage boundary as crown-train sends it (MPI
//                   point-to-point), half a round trip, against a one-sided put with an
//                   event (put_notify) of the same bytes: the alternative not taken
//   bubble_m*       1F1B's measured bubble at pp = 2, batch 16 (time each stage waited for
//                   the other, over its step, mean of the two) against (p - 1) / (m + p - 1)
//   step_*          a step of each plan kind (tp=2, pp=2 with 4 micro-batches, FSDP) beside
//                   DDP's (dp=2)
// --smoke shrinks the model to seconds. ratio > 1: Crown is better.
#include "bench.hpp"
#include <cmath>
#include <crown/crown.hpp>
#include <crown/parallel/nn.hpp>
#include <crown/parallel/trainer.hpp>
#include <fstream>
#include <malloc.h>
#include <map>
#include <sstream>

namespace crown_bench {

namespace {

namespace par = crown::parallel;

/// "name value" lines from torch_baseline.py; empty when no file was given.
std::map<std::string, double> read_torch(const std::string& path) {
  std::map<std::string, double> out;
  if (path.empty()) return out;
  std::ifstream in(path);
  if (!in) throw crown::argument_error("crown-bench parallel", "cannot read --torch " + path);
  std::string name;
  double value = 0;
  while (in >> name >> value) out[name] = value;
  return out;
}

/// VmRSS or VmHWM of this process, in bytes.
std::size_t proc_status(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::stoul(line.substr(std::strlen(field) + 1)) * 1024;
  return 0;
}

void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

/// The largest value over the ranks (a job's figure is its slowest or largest rank's).
double worst(double v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return v;
}

/// A line beside PyTorch's figure `key` (times `scale`, into `unit`), or why there is none.
void print_torch(const std::map<std::string, double>& torch, const std::string& key, const char* op,
                 std::size_t bytes, const char* unit, double crown, const char* label,
                 double scale) {
  const auto it = torch.find(key);
  if (it == torch.end()) {
    std::printf("# %s: no PyTorch figure '%s' (run torch_baseline.py first and pass --torch)\n", op,
                key.c_str());
    return;
  }
  print_line("parallel", op, bytes, unit, crown, label, it->second * scale);
}

} // namespace

void grad_sync(const options& o, const std::map<std::string, double>& torch,
               const par::param_layout& layout);

/// Training `model` over dp ranks, a batch of 4 samples each.
par::train_options data_parallel(const par::gpt_config& model, int dp) {
  par::train_options t;
  t.model = model;
  t.plan.dp = dp;
  t.batch = 4;
  return t;
}

/// What one FSDP strategy measured (the largest value over the ranks).
struct strategy_figures {
  double model_state = 0, params = 0, grads = 0, optimizer = 0, gathered = 0, activations = 0,
         rss_growth = 0, step_seconds = 0, hidden = 0;
};

strategy_figures train_under(const par::train_options& t, int steps) {
  const crown::mesh& w = crown::world();
  auto data = std::make_shared<const par::corpus>("/usr/share/games/fortunes", t.model.context);
  w.barrier();
  malloc_trim(0);
  reset_peak_rss();
  par::reset_memory_peaks();
  const std::size_t before = proc_status("VmRSS:");
  strategy_figures f;
  {
    par::trainer<float> tr(w, data, t);
    std::vector<double> times, fractions;
    for (int s = 0; s < steps; ++s) {
      const double start = MPI_Wtime();
      (void)tr.step();
      if (s == 2) f.rss_growth = double(proc_status("VmHWM:") - before);
      if (s >= 3) {
        times.push_back(MPI_Wtime() - start);
        fractions.push_back(tr.hidden_fraction());
      }
    }
    f.step_seconds = worst(median(times));
    f.hidden = median(fractions);
  }
  const par::memory_ledger m = par::memory_now();
  f.model_state = worst(double(m.peak_model_state()));
  f.params = worst(double(m.max(par::buffer_kind::params)));
  f.grads = worst(double(m.max(par::buffer_kind::grads)));
  f.optimizer = worst(double(m.max(par::buffer_kind::optimizer)));
  f.gathered = worst(double(m.max(par::buffer_kind::gathered)));
  f.activations = worst(double(m.max(par::buffer_kind::activations)));
  f.rss_growth = worst(f.rss_growth);
  return f;
}

/// One-sided all-gather and reduce-scatter of one block unit, as FSDP issues them, against
/// MPI's collectives of the same bytes.
void fsdp_collectives(const par::param_layout& layout, int reps) {
  const crown::mesh& w = crown::world();
  const std::size_t n = std::size_t(w.size());
  const std::size_t padded = (layout.units[1].count + n - 1) / n * n, shard = padded / n;
  crown::coarray<float> shards(w, shard), slot(w, padded);
  std::vector<float> all(padded), out(shard), mpi_all(padded), mpi_in(padded), mpi_out(shard);
  for (std::size_t i = 0; i < shard; ++i) shards.data()[i] = float(i % 5 + std::size_t(w.rank()));
  std::vector<double> gather_t, mpi_gather_t, scatter_t, mpi_scatter_t;
  for (int r = 0; r < reps; ++r) {
    w.barrier();
    double start = MPI_Wtime();
    crown::all_gather(shards, 0, std::span<float>(all));
    gather_t.push_back(worst(MPI_Wtime() - start));
    MPI_Barrier(MPI_COMM_WORLD);
    start = MPI_Wtime();
    MPI_Allgather(shards.data(), int(shard), MPI_FLOAT, mpi_all.data(), int(shard), MPI_FLOAT,
                  MPI_COMM_WORLD);
    mpi_gather_t.push_back(worst(MPI_Wtime() - start));
    for (std::size_t i = 0; i < padded; ++i) slot.data()[i] = mpi_in[i] = float(i % 3);
    w.barrier();
    start = MPI_Wtime();
    crown::reduce_scatter(slot, 0, std::span<float>(out));
    scatter_t.push_back(worst(MPI_Wtime() - start));
    MPI_Barrier(MPI_COMM_WORLD);
    start = MPI_Wtime();
    MPI_Reduce_scatter_block(mpi_in.data(), mpi_out.data(), int(shard), MPI_FLOAT, MPI_SUM,
                             MPI_COMM_WORLD);
    mpi_scatter_t.push_back(worst(MPI_Wtime() - start));
  }
  if (all != mpi_all || out != mpi_out) // small integers: both sums are exact
    throw crown::state_error("crown-bench parallel", "FSDP's collectives differ from MPI's");
  if (w.rank() == 0) {
    const std::size_t bytes = padded * sizeof(float);
    print_line("parallel", "all_gather", bytes, "ms", median(gather_t) * 1e3, "mpi_allgather",
               median(mpi_gather_t) * 1e3);
    print_line("parallel", "reduce_scatter", bytes, "ms", median(scatter_t) * 1e3,
               "mpi_reduce_scatter_block", median(mpi_scatter_t) * 1e3);
  }
}

/// The FSDP figures (see the top of this file).
void fsdp_figures(const options& o, const std::map<std::string, double>& torch) {
  const crown::mesh& w = crown::world();
  const int n = w.size();
  // Freed blocks go back to the system at once, so each strategy's resident-set growth is
  // its own (glibc's adaptive threshold would otherwise keep the previous one's heap).
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
  par::train_options t = data_parallel(
      o.smoke ? par::gpt_config{256, 32, 64, 4, 4} : par::gpt_config{256, 64, 384, 8, 16}, n);
  const auto layout = par::param_layout::of(t.model);
  const std::size_t bytes = layout.total * sizeof(float);
  const int steps = o.smoke ? 4 : 10;
  std::map<par::fsdp_strategy, strategy_figures> f;
  for (auto s : {par::fsdp_strategy::no_shard, par::fsdp_strategy::shard_grad_op,
                 par::fsdp_strategy::full_shard}) {
    t.plan.fsdp = s;
    f[s] = train_under(t, steps);
  }
  if (w.rank() == 0) {
    std::printf("# FSDP: GPT %s, %zu float32 parameters in %zu units (the largest %zu), dp=%d\n",
                t.model.to_string().c_str(), layout.total, layout.units.size(),
                layout.units[1].count, n);
    const auto& ddp = f[par::fsdp_strategy::no_shard];
    const double mib = 1048576;
    std::printf("parallel,model_state_ddp,%zu,MiB,%.2f,none,0,0\n", bytes, ddp.model_state / mib);
    for (auto [s, name] : {std::pair{par::fsdp_strategy::shard_grad_op, "shard_grad_op"},
                           std::pair{par::fsdp_strategy::full_shard, "full_shard"}}) {
      const auto& g = f[s];
      std::printf("# %s: parameters %.2f, gradients %.2f, Adam %.2f MiB at peak (DDP: %.2f, "
                  "%.2f, %.2f)\n",
                  name, g.params / mib, g.grads / mib, g.optimizer / mib, ddp.params / mib,
                  ddp.grads / mib, ddp.optimizer / mib);
      print_line("parallel", (std::string("model_state_") + name).c_str(), bytes, "MiB",
                 g.model_state / mib, "ddp_over_dp", ddp.model_state / n / mib);
      std::printf("parallel,gathered_%s,%zu,MiB,%.2f,none,0,0\n", name, bytes, g.gathered / mib);
      print_line("parallel", (std::string("step_") + name).c_str(), bytes, "ms",
                 g.step_seconds * 1e3, "ddp", ddp.step_seconds * 1e3);
      std::printf("parallel,activations_%s,%zu,MiB,%.2f,none,0,0\n", name, bytes,
                  g.activations / mib);
      std::printf("parallel,comm_hidden_%s,%zu,fraction,%.3f,none,0,0\n", name, bytes, g.hidden);
      print_line("parallel", (std::string("rss_growth_") + name).c_str(), bytes, "MiB",
                 g.rss_growth / mib, "ddp", ddp.rss_growth / mib);
    }
    const auto& full = f[par::fsdp_strategy::full_shard];
    std::printf("parallel,rss_growth_ddp16,%zu,MiB,%.2f,none,0,0\n", bytes, ddp.rss_growth / mib);
    if (torch.count("rss_growth_fsdp_full_mib"))
      print_torch(torch, "rss_growth_fsdp_full_mib", "rss_growth_fsdp", bytes, "MiB",
                  full.rss_growth / mib, "torch_fsdp_full_shard", 1);
    else
      print_torch(torch, "rss_growth_ddp16_mib", "rss_growth_fsdp", bytes, "MiB",
                  full.rss_growth / mib, "torch_ddp", 1);
    print_torch(torch, "rss_growth_ddp16_mib", "rss_growth_ddp16", bytes, "MiB",
                ddp.rss_growth / mib, "torch_ddp", 1);
    print_torch(torch, "step_fsdp_full_s", "step_full_shard", bytes, "ms", full.step_seconds * 1e3,
                "torch_fsdp_full_shard", 1e3);
  }
  fsdp_collectives(layout, o.smoke ? 3 : 20);
}

/// Median over steps 2.. of a plan's step seconds and pipeline bubble (the largest over
/// the ranks; the bubble averaged over them).
std::pair<double, double> time_plan(par::train_options t, const std::string& plan, int steps) {
  t.plan = par::parse_plan(plan);
  auto data = std::make_shared<const par::corpus>("/usr/share/games/fortunes", t.model.context);
  par::trainer<float> tr(crown::world(), data, t);
  std::vector<double> times, bubbles;
  for (int s = 0; s < steps; ++s) {
    const double start = MPI_Wtime();
    (void)tr.step();
    if (s >= 1) {
      times.push_back(MPI_Wtime() - start);
      bubbles.push_back(tr.last_pipeline_timing().bubble());
    }
  }
  double bubble = median(bubbles);
  MPI_Allreduce(MPI_IN_PLACE, &bubble, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return {worst(median(times)), bubble / crown::world().size()};
}

/// The tensor- and pipeline-parallel figures (see the top of this file).
void split_figures(const options& o) {
  const crown::mesh& w = crown::world();
  const int me = w.rank();
  if (w.size() != 2) {
    if (me == 0) std::printf("# tensor and pipeline figures: at np 2 only\n");
    return;
  }
  par::train_options t;
  t.model = o.smoke ? par::gpt_config{256, 32, 64, 4, 2} : par::gpt_config{256, 64, 256, 8, 8};
  t.batch = 8;
  const int reps = o.smoke ? 3 : 50, steps = o.smoke ? 3 : 6;
  const std::size_t n = std::size_t(t.batch) * t.model.context * t.model.channels;
  const std::size_t bytes = n * sizeof(float);
  std::vector<float> x(n, 1.0f), y(n, 1.0f);
  std::vector<double> crown_t, mpi_t, send_t, put_t;
  crown::coarray<float> landing(w, n);
  crown::event arrived(w);
  const int peer = 1 - me;
  for (int r = 0; r < reps; ++r) {
    w.barrier();
    double start = MPI_Wtime();
    crown::co_sum(w, std::span<float>(x));
    crown_t.push_back(worst(MPI_Wtime() - start));
    MPI_Barrier(MPI_COMM_WORLD);
    start = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, y.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    mpi_t.push_back(worst(MPI_Wtime() - start));
    std::fill(x.begin(), x.end(), 1.0f);
    std::fill(y.begin(), y.end(), 1.0f);
    // Ping-pong: half a round trip each way.
    MPI_Barrier(MPI_COMM_WORLD);
    start = MPI_Wtime();
    if (me == 0) {
      MPI_Send(x.data(), int(n), MPI_FLOAT, peer, 0, MPI_COMM_WORLD);
      MPI_Recv(y.data(), int(n), MPI_FLOAT, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(y.data(), int(n), MPI_FLOAT, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(x.data(), int(n), MPI_FLOAT, peer, 0, MPI_COMM_WORLD);
    }
    send_t.push_back(worst(MPI_Wtime() - start) / 2);
    w.barrier();
    start = MPI_Wtime();
    for (int turn = 0; turn < 2; ++turn) {
      if (me == turn) {
        crown::put_notify(landing.on(peer), std::span<const float>(x), arrived);
      } else {
        arrived.wait();
        std::copy_n(landing.data(), n, y.data()); // into the stage's own activations
      }
    }
    put_t.push_back(worst(MPI_Wtime() - start) / 2);
  }
  if (me == 0) {
    print_line("parallel", "tp_allreduce", bytes, "ms", median(crown_t) * 1e3, "mpi_allreduce",
               median(mpi_t) * 1e3);
    print_line("parallel", "stage_transfer", bytes, "ms", median(send_t) * 1e3, "put_notify",
               median(put_t) * 1e3);
  }
  for (int m : {1, 4, 8}) {
    t.batch = 16; // micro-batches of 2 samples and more: fewer, larger messages per step
    const auto [step, bubble] = time_plan(t, "pp=2,micro=" + std::to_string(m), steps);
    if (me == 0)
      std::printf("parallel,bubble_m%d,%zu,fraction,%.4f,formula,%.4f,%.3f\n", m, bytes, bubble,
                  1.0 / (m + 1), 1.0 / (m + 1) / bubble);
    (void)step;
  }
  t.batch = 4;
  const double ddp = time_plan(t, "dp=2", steps).first;
  const double full = time_plan(t, "dp=2,fsdp=full", steps).first;
  t.batch = 8;
  const double tp = time_plan(t, "tp=2", steps).first;
  const double pp = time_plan(t, "pp=2,micro=4", steps).first;
  if (me == 0) {
    std::printf("# step of each plan kind, GPT %s, global batch 8 x %d tokens\n",
                t.model.to_string().c_str(), t.model.context);
    std::printf("parallel,step_ddp_dp2,%zu,ms,%.1f,none,0,0\n", bytes, ddp * 1e3);
    for (auto [name, v] : {std::pair{"step_fsdp_full_dp2", full}, std::pair{"step_tp2", tp},
                           std::pair{"step_pp2_m4", pp}})
      print_line("parallel", name, bytes, "ms", v * 1e3, "ddp_dp2", ddp * 1e3);
  }
}

void parallel(const options& o) {
  const crown::mesh& w = crown::world();
  const int me = w.rank(), n = w.size();
  const auto torch = read_torch(o.torch_file);
  par::nn::set_blas_threads(1);
  const par::train_options t = data_parallel(
      o.smoke ? par::gpt_config{256, 32, 64, 4, 2} : par::gpt_config{256, 64, 512, 8, 8}, n);
  const auto layout = par::param_layout::of(t.model);
  const std::size_t bytes = layout.total * sizeof(float);
  if (me == 0) {
    print_header();
    std::printf("# %d ranks, GPT %s: %zu float32 parameters; BLAS: %s\n", n,
                t.model.to_string().c_str(), layout.total, par::nn::blas_description());
  }
  // Memory and step time first, from a process that holds no model yet.
  const int steps = o.smoke ? 4 : 13;
  double rss_growth = 0, step_seconds = 0, hidden = 0;
  {
    auto data = std::make_shared<const par::corpus>("/usr/share/games/fortunes", t.model.context);
    w.barrier();
    reset_peak_rss();
    const std::size_t before = proc_status("VmRSS:");
    par::trainer<float> tr(w, data, t);
    std::vector<double> times, fractions;
    for (int s = 0; s < steps; ++s) {
      const double start = MPI_Wtime();
      (void)tr.step();
      if (s == 2) rss_growth = double(proc_status("VmHWM:") - before);
      if (s >= 3) {
        times.push_back(MPI_Wtime() - start);
        fractions.push_back(tr.hidden_fraction());
      }
    }
    step_seconds = worst(median(times));
    hidden = median(fractions);
    rss_growth = worst(rss_growth);
  }
  if (me == 0) {
    print_torch(torch, "step_ddp_s", "step_ddp", bytes, "ms", step_seconds * 1e3, "torch_ddp", 1e3);
    print_torch(torch, "rss_growth_default_mib", "rss_growth", bytes, "MiB", rss_growth / 1048576,
                "torch_ddp", 1);
    print_torch(torch, "rss_growth_bucket_view_mib", "rss_growth", bytes, "MiB",
                rss_growth / 1048576, "torch_ddp_bucket_view", 1);
    std::printf("parallel,allreduce_hidden_behind_backward,%zu,fraction,%.3f,none,0,0\n", bytes,
                hidden);
  }
  grad_sync(o, torch, layout);
  fsdp_figures(o, torch);
  split_figures(o);
}

/// DDP's bucketed all-reduce of the whole gradient, exactly as DDP issues it after a backward.
void grad_sync(const options& o, const std::map<std::string, double>& torch,
               const par::param_layout& layout) {
  const crown::mesh& w = crown::world();
  const int me = w.rank(), n = w.size();
  const std::size_t bytes = layout.total * sizeof(float);
  std::vector<float> params(layout.total, 0.5f);
  par::ddp<float> d(w, params, layout);
  std::vector<float> plain(layout.total);
  std::vector<double> crown_t, mpi_t;
  const int reps = o.smoke ? 3 : 20;
  for (int r = 0; r < reps; ++r) {
    for (std::size_t i = 0; i < layout.total; ++i) d.grads()[i] = float(i % 7) + float(me);
    w.barrier();
    double start = MPI_Wtime();
    for (std::size_t e = layout.entries.size(); e-- > 0;) d.mark_ready(e);
    d.finish();
    crown_t.push_back(worst(MPI_Wtime() - start));
    for (std::size_t i = 0; i < layout.total; ++i) plain[i] = float(i % 7) + float(me);
    MPI_Barrier(MPI_COMM_WORLD);
    start = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, plain.data(), int(layout.total), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    mpi_t.push_back(worst(MPI_Wtime() - start));
  }
  // The mean of MPI's sum (values are small integers: MPI's sum is exact; Crown divides each
  // by n first, which rounds unless n is a power of 2).
  for (std::size_t i = 0; i < layout.total; i += 9973)
    if (std::abs(d.grads()[i] - plain[i] / float(n)) > 1e-6f * std::abs(plain[i]))
      throw crown::state_error("crown-bench parallel", "bucketed all-reduce differs from MPI's");
  if (me == 0) {
    const double crown_ms = median(crown_t) * 1e3;
    print_line("parallel", "grad_sync", bytes, "ms", crown_ms, "mpi_allreduce",
               median(mpi_t) * 1e3);
    print_torch(torch, "grad_sync_gloo_s", "grad_sync", bytes, "ms", crown_ms, "gloo_bucketed",
                1e3);
    std::printf("# buckets: %zu (%s), %s\n", d.buckets().size(),
                d.grads_in_heap() ? "in the symmetric heap" : "in ordinary memory",
                "PyTorch's assignment: 1 MiB first, then 25 MiB, reverse parameter order");
  }
}

} // namespace crown_bench
