// crown-bench plan: how long crown-plan's search takes (serial, no MPI), at the issue's
// target size (100 layers over 1,024 devices), as layers and devices grow, and against
// brute force on a case brute force can finish.
#include "bench.hpp"
#include <chrono>
#include <crown/plan/search.hpp>

namespace crown_bench {

namespace {

using namespace crown::plan;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// A GPT of `layers` blocks (hidden 8192, 64 heads, sequence 2048) on `devices` A100 80 GB
/// (8 per host, NVLink within, 8 x 200 Gb/s InfiniBand across), bf16, Adam, recomputation.
struct planning_case {
  model m;
  cluster c;
  training t;
};
planning_case make_case(int layers, int devices, int hidden = 8192, int heads = 64) {
  planning_case p;
  p.m = gpt_model({layers, hidden, heads, 2048, 51200}, 2);
  p.c.devices_per_host = std::min(devices, 8);
  p.c.hosts = devices / p.c.devices_per_host;
  p.c.memory_bytes = 80.0 * (1 << 30);
  p.c.precision = "bf16";
  p.c.peak_flops = 312e12;
  p.c.achievable_fraction = 0.6;
  p.c.intra_host = {300e9, 3e-6};
  p.c.inter_host = {25e9, 5e-6};
  p.t.global_batch = 1536;
  p.t.parameter_precision = "bf16";
  p.t.parameter_bytes = 2;
  p.t.gradient_bytes = 4;
  p.t.optimizer_bytes = 4;
  p.t.recompute = true;
  p.t.memory_budget_bytes = 76.0 * (1 << 30);
  return p;
}

/// Median milliseconds of `runs` searches.
double median_search_ms(const planning_case& p, int runs, search_result& last, int top = 10) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    last = search(p.m, p.c, p.t, top);
    t.push_back(1e3 * seconds_since(start));
  }
  return median(std::move(t));
}

} // namespace

void plan(const options& o) {
  const int runs = o.smoke ? 1 : 5;
  search_result r;
  // The figure: 100 layers over 1,024 devices, against its 1 s target.
  const planning_case target = make_case(100, 1024);
  const double ms = median_search_ms(target, runs, r);
  if (r.ranked.empty()) throw std::runtime_error("crown-bench plan: no plan for 100 x 1024");
  print_line("plan", "search_L100_N1024", 0, "ms", ms, "target_1s", 1000.0);
  std::printf("# best: %s, %.3f s/step; %ld kinds with micro-batches, %ld searched\n",
              to_string(r.ranked.front().plan).c_str(), r.ranked.front().step_seconds,
              r.kinds_considered, r.kinds_searched);
  // Against brute force where it finishes: 10 layers over 16 devices.
  const planning_case small = make_case(10, 16, 1024, 16);
  const double search_ms = median_search_ms(small, runs, r);
  const auto start = std::chrono::steady_clock::now();
  const search_result b = brute_force(small.m, small.c, small.t, 1);
  const double brute_ms = 1e3 * seconds_since(start);
  if (b.ranked.empty() || r.ranked.empty() ||
      std::abs(b.ranked.front().step_seconds - r.ranked.front().step_seconds) >
          1e-9 * b.ranked.front().step_seconds)
    throw std::runtime_error("crown-bench plan: search and brute force disagree at 10 x 16");
  print_line("plan", "search_L10_N16", 0, "ms", search_ms, "brute_force", brute_ms);
  if (o.smoke) return;
  // Without the bound's help: every kind searched and ranked (--top larger than the kinds).
  const double all_ms = median_search_ms(target, runs, r, 1 << 30);
  print_line("plan", "rank_all_L100_N1024", 0, "ms", all_ms, "target_1s", 1000.0);
  std::printf("# ranked all %zu feasible kinds with micro-batches, %ld searched\n", r.ranked.size(),
              r.kinds_searched);
  // Growth: layers at 1,024 devices, devices at 100 layers.
  for (int layers : {25, 50, 200, 400}) {
    const std::string op = "search_L" + std::to_string(layers) + "_N1024";
    print_line("plan", op.c_str(), 0, "ms", median_search_ms(make_case(layers, 1024), runs, r),
               "target_1s", 1000.0);
  }
  for (int devices : {64, 256, 4096, 16384}) {
    const std::string op = "search_L100_N" + std::to_string(devices);
    print_line("plan", op.c_str(), 0, "ms", median_search_ms(make_case(100, devices), runs, r),
               "target_1s", 1000.0);
  }
}

} // namespace crown_bench
