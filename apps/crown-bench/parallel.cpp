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
// --smoke shrinks the model to seconds. ratio > 1: Crown is better.
#include "bench.hpp"
#include <cmath>
#include <crown/crown.hpp>
#include <crown/parallel/nn.hpp>
#include <crown/parallel/trainer.hpp>
#include <fstream>
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

void parallel(const options& o) {
  const crown::mesh& w = crown::world();
  const int me = w.rank(), n = w.size();
  const auto torch = read_torch(o.torch_file);
  par::nn::set_blas_threads(1);
  par::train_options t;
  t.model = o.smoke ? par::gpt_config{256, 32, 64, 4, 2} : par::gpt_config{256, 64, 512, 8, 8};
  t.plan.dp = n;
  t.batch = 4;
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
  // The gradient's bucketed all-reduce, exactly as DDP issues it after a backward.
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
