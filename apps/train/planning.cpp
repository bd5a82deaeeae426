// crown-train's link to the planner (planning.hpp).
#include "planning.hpp"
#include <algorithm>
#include <chrono>
#include <crown/collectives.hpp>
#include <crown/error.hpp>
#include <crown/parallel/nn.hpp>
#include <crown/parallel/optim.hpp>
#include <crown/topology.hpp>
#include <cstdio>
#include <optional>
#include <random>
#include <thread>
#include <unistd.h>

namespace train {

namespace plan = crown::plan;
namespace par = crown::parallel;

plan::model planner_model(const par::gpt_config& c, int element_bytes) {
  const double e = element_bytes, T = c.context, C = c.channels, NH = c.heads, V = c.vocabulary;
  plan::model m;
  m.heads = c.heads;
  m.hidden = c.channels;
  m.vocabulary = c.vocabulary;
  m.tokens_per_sample = T;
  // gpt's scratch: 14 rows of C per token (gradients backward passes along); its 2·T·T
  // elements for attention's backward, a constant, are left out.
  m.workspace_bytes = 14 * T * C * e;
  for (int b = 0; b < c.blocks; ++b) {
    plan::layer l;
    l.name = b == 0 ? "embeddings+h0" : std::string("h").append(std::to_string(b));
    l.parameters = 12 * C * C + 13 * C;
    // Per token: qkv 3C, attention NH·T, its output C, the MLP's 4C twice, split over tp;
    // two layer norms' outputs with mean and 1/std, two residual sums, whole.
    l.activation_bytes = T * (12 * C + NH * T) * e;
    l.replicated_activation_bytes = T * (4 * C + 4) * e;
    l.input_bytes = T * C * e;
    l.forward_flops = 24 * T * C * C + 4 * T * T * C;
    l.backward_flops = 2 * l.forward_flops;
    l.tp_allreduce_bytes = 2 * T * C * e; // after attention's and the MLP's projections
    if (b == 0) {                         // the input it keeps is the embeddings' output
      l.parameters += V * C + T * C;
      l.tp_allreduce_bytes += T * C * e; // the vocabulary-parallel embedding
    }
    if (b == c.blocks - 1) { // final norm (output, mean, 1/std) and the probabilities
      l.name += "+head";
      l.parameters += 2 * C + V * C;
      l.replicated_activation_bytes += T * (C + 2) * e;
      l.activation_bytes += T * V * e;
      l.forward_flops += 2 * T * C * V;
      l.backward_flops += 4 * T * C * V;
      l.tp_allreduce_bytes += 3 * T * e; // the vocabulary-parallel cross-entropy's rows
    }
    m.layers.push_back(std::move(l));
  }
  return m;
}

std::string precision_of(int element_bytes) { return element_bytes == 8 ? "fp64" : "fp32"; }

plan::training planner_training(int global_batch, int element_bytes, const std::string& optimizer,
                                double budget) {
  plan::training t;
  t.global_batch = global_batch;
  t.parameter_bytes = t.gradient_bytes = t.optimizer_bytes = element_bytes;
  t.parameter_precision = precision_of(element_bytes);
  t.opt = optimizer == "sgd" ? plan::optimizer::sgd : plan::optimizer::adam;
  t.recompute = false;
  t.memory_budget_bytes = budget;
  return t;
}

plan::plan_choice to_choice(const par::plan& p, int blocks) {
  plan::plan_choice c;
  c.kind = {p.dp, p.tp, p.pp, plan::sharding(int(p.fsdp)), p.microbatches};
  c.stages = p.stages;
  if (c.stages.empty()) // the trainer's equal split (trainer.cpp's part_of)
    for (int i = 1; i < p.pp; ++i) c.stages.push_back(i * blocks / p.pp);
  return c;
}

par::plan to_plan(const plan::plan_choice& c) {
  // The planner's sharding and the trainer's fsdp_strategy name PyTorch's strategies in
  // the same order.
  static_assert(int(plan::sharding::hybrid_shard) == int(par::fsdp_strategy::hybrid_shard));
  par::plan p;
  p.dp = c.kind.dp;
  p.tp = c.kind.tp;
  p.pp = c.kind.pp;
  p.fsdp = par::fsdp_strategy(int(c.kind.shard));
  p.microbatches = c.kind.micro;
  p.stages = c.stages;
  return p;
}

plan::estimate predict(const plan::model& m, const plan::cluster& c, const plan::training& t,
                       const par::plan& p, int blocks) {
  const plan::plan_choice choice = to_choice(p, blocks);
  return plan::cost_model(m, c, t, choice.kind).evaluate(choice.stages);
}

std::string size_text(double bytes) {
  char text[48];
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = bytes;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return text;
}

std::string memory_text(const plan::memory_use& m) {
  return size_text(m.total()) + " (model state " + size_text(m.model_state) + ", gathered " +
         size_text(m.gathered) + ", activations " + size_text(m.activations) + ")";
}

void check_cluster(const plan::cluster& c, const std::string& what, int hosts, int per_host,
                   int element_bytes) {
  auto fail = [&](const std::string& rule) {
    throw crown::argument_error(what, rule + " (run crown-train --calibrate on this job)");
  };
  if (c.hosts != hosts || c.devices_per_host != per_host)
    fail("describes " + std::to_string(c.hosts) + " host(s) x " +
         std::to_string(c.devices_per_host) + " device(s) = " + std::to_string(c.devices()) +
         " devices, this job trains on " + std::to_string(hosts) + " x " +
         std::to_string(per_host) + " = " + std::to_string(hosts * per_host) + " ranks");
  if (c.precision != precision_of(element_bytes))
    fail("was measured in " + c.precision + ", this run trains in " + precision_of(element_bytes));
}

void check_model(const plan::model& m, const std::string& what, const par::gpt_config& config,
                 int element_bytes, const std::string& optimizer) {
  const plan::model mine = planner_model(config, element_bytes);
  auto fail = [&](const std::string& rule) {
    throw crown::argument_error(what, rule + " (calibrate this model: crown-train --calibrate " +
                                          "with the same model options)");
  };
  if (m.layers.size() != mine.layers.size())
    fail("has " + std::to_string(m.layers.size()) + " layers, this model " +
         std::to_string(mine.layers.size()) + " blocks");
  if (m.hidden != mine.hidden || m.heads != mine.heads || m.vocabulary != mine.vocabulary ||
      m.tokens_per_sample != mine.tokens_per_sample)
    fail("is a model of hidden " + std::to_string(m.hidden) + ", " + std::to_string(m.heads) +
         " heads, vocabulary " + std::to_string(m.vocabulary) + ", not this " + config.to_string());
  if (!m.optimizer.empty() && m.optimizer != optimizer)
    fail("timed the " + m.optimizer + " optimizer's step, this run uses " + optimizer);
  if (m.workspace_bytes != mine.workspace_bytes)
    fail("has a workspace of " + std::to_string(m.workspace_bytes) + " bytes per sample, this " +
         "model at " + precision_of(element_bytes) + " " + std::to_string(mine.workspace_bytes));
  for (std::size_t l = 0; l < m.layers.size(); ++l)
    if (m.layers[l].activation_bytes != mine.layers[l].activation_bytes)
      fail("layer " + std::to_string(l) + " keeps " + std::to_string(m.layers[l].activation_bytes) +
           " bytes of activations per sample, this model at " + precision_of(element_bytes) + " " +
           std::to_string(mine.layers[l].activation_bytes));
}

namespace {

using clock_type = std::chrono::steady_clock;

/// One timing of f(), every rank of `m` starting together.
template <class F>
double once(const crown::mesh& m, F&& f) {
  MPI_Barrier(m.comm());
  const auto start = clock_type::now();
  f();
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

/// The median of this rank's timings, then the largest of the ranks' (the same on every
/// rank). Each rank's median keeps a burst of other load on the machine out of the figure.
double slowest_median(const crown::mesh& m, std::vector<double> t) {
  const auto middle = t.begin() + std::ptrdiff_t(t.size() / 2);
  std::nth_element(t.begin(), middle, t.end());
  double median = *middle;
  crown::co_max(m, median);
  return median;
}

/// slowest_median() of `reps` timings of f() after one untimed run.
template <class F>
double timed(const crown::mesh& m, int reps, F&& f) {
  f();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) t.push_back(once(m, f));
  return slowest_median(m, std::move(t));
}

/// The link whose ring all-reduce over n ranks, 2(n-1)(α + B/(nβ)), takes `t_small` at
/// `b_small` bytes and `t_large` at `b_large`.
plan::link ring_fit(double n, double b_small, double t_small, double b_large, double t_large) {
  plan::link l;
  l.bandwidth = 2 * (n - 1) / (n * std::max(t_large - t_small, 1e-12) / (b_large - b_small));
  l.latency = std::max(0.0, (t_small - 2 * (n - 1) * b_small / (n * l.bandwidth)) / (2 * (n - 1)));
  return l;
}

/// Latency and bandwidth of an all-reduce (co_sum, as tensor parallelism uses) over `group`,
/// from the ring formula t(B) = 2(n-1)(α + B/(nβ)) at a small and a large size.
template <typename T>
plan::link fit_link(const crown::mesh& world, const crown::mesh& group) {
  constexpr std::size_t small = 512, large = std::size_t{1} << 20; // elements
  std::vector<T> x(large, T(1));
  const double n = group.size();
  auto time_of = [&](std::size_t count) {
    return timed(world, 9, [&] { crown::co_sum(group, std::span<T>(x.data(), count)); });
  };
  return ring_fit(n, double(small * sizeof(T)), time_of(small), double(large * sizeof(T)),
                  time_of(large));
}

/// What a co_sum over `group` issued from a second thread (as FSDP issues its gathers) costs
/// `compute` running meanwhile on this one, per call, at `large` elements (a block's
/// parameters: what FSDP gathers) and an eighth of it, fitted to the ring's formula like a
/// link: nothing where a spare core runs it.
template <typename T, class F>
plan::link fit_beside_compute(const crown::mesh& world, const crown::mesh& group, std::size_t large,
                              F&& compute) {
  constexpr int calls = 32;
  const std::size_t small = std::max<std::size_t>(large / 8, 1); // elements
  std::vector<T> x(large, T(1));
  auto cost = [&](std::size_t count) {
    auto beside = [&] {
      std::exception_ptr failed;
      std::thread comm([&] {
        try {
          for (int k = 0; k < calls; ++k) crown::co_sum(group, std::span<T>(x.data(), count));
        } catch (...) {
          failed = std::current_exception();
        }
      });
      compute();
      comm.join();
      if (failed) std::rethrow_exception(failed);
    };
    beside();                  // warm
    std::vector<double> extra; // alone and beside alternate: slow drifts cancel
    for (int r = 0; r < 9; ++r) {
      const double alone = once(world, compute);
      extra.push_back(once(world, beside) - alone);
    }
    return std::max(0.0, slowest_median(world, std::move(extra))) / calls;
  };
  return ring_fit(group.size(), double(small * sizeof(T)), cost(small), double(large * sizeof(T)),
                  cost(large));
}

} // namespace

std::pair<int, int> job_hosts(const crown::mesh& workers, const crown::topology& where) {
  const auto& all = where.all();
  const int n = workers.size();
  const int hosts = all.back().host_index + 1;
  const int per_host = n / hosts;
  for (int r = 0; r < n; ++r)
    if (hosts * per_host != n || all[std::size_t(r)].host_index != r / per_host)
      throw crown::argument_error("the planner",
                                  "rank " + std::to_string(r) + " is on host " +
                                      std::to_string(all[std::size_t(r)].host_index) +
                                      ": the planner needs ranks placed host by host, as many "
                                      "on each (mpirun --map-by slot)");
  return {hosts, per_host};
}

template <typename T>
plan::model calibrate_layers(const crown::mesh& workers, const par::gpt_config& config,
                             const std::string& optimizer, int micro_batch, std::string& summary) {
  plan::model model = planner_model(config, sizeof(T));
  model.optimizer = optimizer;
  // Two micro-batch sizes around the one given, for each layer's time per micro-batch and
  // per sample: fixed + b x per-sample.
  const int L = config.blocks, lo = std::max(1, micro_batch / 2), hi = 2 * micro_batch;
  const std::size_t N = std::size_t(hi) * config.context, C = std::size_t(config.channels);
  char line[256];
  // Each kind of layer (the first block, the middle ones, the last) as a pipeline stage.
  std::mt19937 random(1234);
  std::normal_distribution<double> normal(0, 1);
  std::vector<int> tokens(N), targets(N);
  for (std::size_t i = 0; i < N; ++i)
    tokens[i] = targets[i] = int(i * 7 % std::size_t(config.vocabulary));
  std::vector<T> input(N * C), dout(N * C), dinput(N * C);
  for (auto* v : {&input, &dout})
    std::generate(v->begin(), v->end(), [&] { return T(normal(random)); });
  /// fixed + b x per-sample through (lo, t_lo) and (hi, t_hi); a fixed part below 0 (noise) is 0.
  auto fit = [&](double t_lo, double t_hi, double& per_sample, double& fixed) {
    per_sample = (t_hi - t_lo) / (hi - lo);
    fixed = t_lo - per_sample * lo;
    if (fixed < 0 || per_sample <= 0) per_sample = t_hi / hi, fixed = 0;
  };
  // The middle blocks run together, as a stage holds them: their activations, not one
  // block's, compete for the caches, as in a training step. Times are per block.
  auto measure = [&](int block, int end) {
    const double blocks = end - block;
    const par::model_part part{0, 1, block, end};
    par::gpt<T> g(config, hi, true, part, std::nullopt, 1);
    g.initialise(1234);
    std::vector<T> grads(g.params().size());
    const bool first = block == 0, last = end == L;
    const auto none = [](std::size_t) {};
    auto forward = [&](int B) {
      const std::size_t n = std::size_t(B) * config.context;
      (void)g.forward_part(
          0, first ? std::span<const int>(tokens).first(n) : std::span<const int>(),
          first ? std::span<const T>() : std::span<const T>(input).first(n * C),
          last ? std::span<const int>(targets).first(n) : std::span<const int>(), B);
    };
    auto step = [&](int B) {
      const std::size_t n = std::size_t(B) * config.context;
      forward(B);
      g.backward_part(0, T(1), last ? std::span<const T>() : std::span<const T>(dout).first(n * C),
                      first ? std::span<T>() : std::span<T>(dinput).first(n * C), grads, none);
    };
    double fwd[2], both[2];
    for (int k = 0; k < 2; ++k) {
      const int B = k == 0 ? lo : hi;
      fwd[k] = timed(workers, 7, [&] { forward(B); });
      both[k] = timed(workers, 7, [&] { step(B); });
    }
    std::optional<par::adam<T>> adam;
    std::optional<par::sgd<T>> sgd;
    if (optimizer == "sgd")
      sgd.emplace(grads.size(), par::sgd_options{1e-9, 0});
    else
      adam.emplace(grads.size(), par::adam_options{.lr = 1e-9});
    const double opt = timed(workers, 7, [&] {
      if (sgd)
        sgd->step(g.params(), grads);
      else
        adam->step(g.params(), grads);
    });
    plan::layer& l = model.layers[std::size_t(block)];
    fit(fwd[0] / blocks, fwd[1] / blocks, l.forward_seconds, l.forward_fixed_seconds);
    fit(std::max(both[0] - fwd[0], 1e-9) / blocks, std::max(both[1] - fwd[1], 1e-9) / blocks,
        l.backward_seconds, l.backward_fixed_seconds);
    l.optimizer_seconds = opt / blocks;
    std::snprintf(line, sizeof line,
                  "layer %-22s forward %7.3f + %7.3f ms/sample, backward %7.3f + %7.3f "
                  "ms/sample (%d-%d samples); %s step %6.3f ms\n",
                  l.name.c_str(), l.forward_fixed_seconds * 1e3, l.forward_seconds * 1e3,
                  l.backward_fixed_seconds * 1e3, l.backward_seconds * 1e3, lo, hi,
                  optimizer.c_str(), opt * 1e3);
    summary += line;
  };
  measure(0, 1);
  if (L > 2) measure(1, L - 1);
  if (L > 1) measure(L - 1, L);
  for (int b = 2; b < L - 1; ++b) { // the middle blocks are alike
    plan::layer& l = model.layers[std::size_t(b)];
    const plan::layer& one = model.layers[1];
    l.forward_seconds = one.forward_seconds;
    l.backward_seconds = one.backward_seconds;
    l.forward_fixed_seconds = one.forward_fixed_seconds;
    l.backward_fixed_seconds = one.backward_fixed_seconds;
    l.optimizer_seconds = one.optimizer_seconds;
  }
  return model;
}

template <typename T>
plan::cluster calibrate_cluster(const crown::mesh& workers, const crown::topology& where,
                                const par::gpt_config& config, int micro_batch,
                                std::string& summary) {
  const auto [hosts, per_host] = job_hosts(workers, where);
  const std::size_t N = std::size_t(micro_batch) * config.context, C = std::size_t(config.channels);
  char line[256];
  plan::cluster c;
  c.hosts = hosts;
  c.devices_per_host = per_host;
  c.precision = precision_of(sizeof(T));
  c.achievable_fraction = 1;
  // The GEMM rate at the model's largest shape: the MLP's first layer.
  std::vector<T> out(N * 4 * C), in(N * C, T(0.5)), w(4 * C * C, T(0.01));
  auto gemm = [&] { par::nn::linear_forward<T>(out, in, w, {}, int(N), int(C), int(4 * C)); };
  const double gemm_seconds = timed(workers, 7, gemm);
  c.peak_flops = 2.0 * double(N) * double(C) * 4.0 * double(C) / gemm_seconds;
  std::snprintf(line, sizeof line, "GEMM %zux%zux%zu: %.2f GFLOP/s per rank\n", N, C, 4 * C,
                c.peak_flops / 1e9);
  summary += line;
  c.memory_bytes =
      double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE)) / where.host().ranks;
  crown::co_min(workers, c.memory_bytes); // the same on every rank: the smallest host's share
  // Links: an all-reduce within a host (all its ranks) and across hosts (one rank per host).
  const crown::mesh grid = workers.reshape({{"host", hosts}, {"local", per_host}});
  if (per_host > 1) c.intra_host = fit_link<T>(workers, grid.sub({"local"}));
  if (hosts > 1) c.inter_host = fit_link<T>(workers, grid.sub({"host"}));
  if (per_host == 1) c.intra_host = c.inter_host; // no such link: never used
  if (hosts == 1) c.inter_host = c.intra_host;
  if (workers.size() == 1) c.intra_host = c.inter_host = {1e12, 0}; // nothing to measure
  if (workers.size() > 1) { // about 80 ms of GEMMs under 32 collectives
    const int reps = std::max(1, int(0.08 / gemm_seconds));
    const std::size_t block = 12 * C * C + 13 * C;
    c.beside_compute = fit_beside_compute<T>(
        workers, per_host > 1 ? grid.sub({"local"}) : grid.sub({"host"}), block, [&] {
          for (int r = 0; r < reps; ++r) gemm();
        });
    std::snprintf(line, sizeof line,
                  "a collective beside compute costs it: latency %.2f us, bandwidth %.2f GB/s\n",
                  c.beside_compute.latency * 1e6, c.beside_compute.bandwidth / 1e9);
    summary += line;
  }
  for (auto [name, l, real] : {std::tuple{"within a host", c.intra_host, per_host > 1},
                               {"across hosts", c.inter_host, hosts > 1}})
    if (real) {
      std::snprintf(line, sizeof line, "all-reduce %s: latency %.2f us, bandwidth %.2f GB/s\n",
                    name, l.latency * 1e6, l.bandwidth / 1e9);
      summary += line;
    }
  return c;
}

template plan::model calibrate_layers<float>(const crown::mesh&, const par::gpt_config&,
                                             const std::string&, int, std::string&);
template plan::model calibrate_layers<double>(const crown::mesh&, const par::gpt_config&,
                                              const std::string&, int, std::string&);
template plan::cluster calibrate_cluster<float>(const crown::mesh&, const crown::topology&,
                                                const par::gpt_config&, int, std::string&);
template plan::cluster calibrate_cluster<double>(const crown::mesh&, const crown::topology&,
                                                 const par::gpt_config&, int, std::string&);

} // namespace train
