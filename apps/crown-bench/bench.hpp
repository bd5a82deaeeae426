// apps/crown-bench/bench.hpp — what every crown-bench group shares: options, medians,
// and the CSV line `group,op,bytes,unit,crown,baseline,baseline_value,ratio`.
#pragma once
#include "machine.hpp"
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <mpi.h>
#include <string>
#include <vector>

namespace heat2d {
struct options;
}

namespace crown_bench {

struct options {
  int batches = 11;
  bool smoke = false;
  std::string shmem_file;
  std::string nvshmem_file; ///< gpu: crown-nvshmem-baseline's output
  bool mps = false;         ///< gpu: only the kernel flag hand-off, labelled as run under MPS
  std::string torch_file;   ///< parallel: torch_baseline.py's output
  std::string crown_file, baseline_file; ///< fortran: crown-caf-bench's output on each runtime
};

/// The median of `t` (the upper one of an even count).
inline double median(std::vector<double> t) {
  std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2), t.end());
  return t[t.size() / 2];
}

/// Median seconds per operation over `batches` batches of `ops` calls of f.
inline double median_seconds(const options& o, int ops, const std::function<void()>& f) {
  std::vector<double> t;
  f(); // warm-up
  for (int b = 0; b < o.batches; ++b) {
    const double start = MPI_Wtime();
    for (int i = 0; i < ops; ++i) f();
    t.push_back((MPI_Wtime() - start) / ops);
  }
  return median(std::move(t));
}

/// Median seconds per operation of each of `fs` (Crown's figure and its baselines),
/// their batches taken in turn, one of each, `batches` times: load that comes and goes
/// reaches every figure alike. Timed one after the other, a figure and its baseline
/// moved apart by 2x on a 2-core VM whenever other work started between them.
/// `before_batch(b)`, where given, runs before each round (say, to move to fresh buffers).
inline std::vector<double> medians_alternating(const options& o, int ops,
                                               std::initializer_list<std::function<void()>> fs,
                                               const std::function<void(int)>& before_batch = {}) {
  std::vector<std::vector<double>> t(fs.size());
  for (const auto& f : fs) f(); // warm-up
  for (int b = 0; b < o.batches; ++b) {
    if (before_batch) before_batch(b);
    std::size_t i = 0;
    for (const auto& f : fs) {
      const double start = MPI_Wtime();
      for (int k = 0; k < ops; ++k) f();
      t[i++].push_back((MPI_Wtime() - start) / ops);
    }
  }
  std::vector<double> m;
  for (auto& v : t) m.push_back(median(std::move(v)));
  return m;
}

/// One CSV line; ratio > 1 means Crown is better (times and sizes, "us", "ms", "KiB" and
/// "MiB", are lower-is-better).
inline void print_line(const std::string& group, const char* op, std::size_t bytes,
                       const char* unit, double crown, const char* base, double base_value) {
  const bool lower_is_better = std::strcmp(unit, "us") == 0 || std::strcmp(unit, "ms") == 0 ||
                               std::strcmp(unit, "KiB") == 0 || std::strcmp(unit, "MiB") == 0;
  const double ratio = lower_is_better ? base_value / crown : crown / base_value;
  std::printf("%s,%s,%zu,%s,%.4g,%s,%.4g,%.3f\n", group.c_str(), op, bytes, unit, crown, base,
              base_value, ratio);
  std::fflush(stdout);
}

/// The CSV header, then what the run is measured on (machine.hpp).
inline void print_header() {
  std::printf("group,op,bytes,unit,crown,baseline,baseline_value,ratio\n");
  print_machine();
}

/// Operations per batch for a transfer of `bytes`: about 256 MiB per batch (8 MiB smoke).
inline int ops_for(std::size_t bytes, bool smoke) {
  const std::size_t budget = smoke ? (std::size_t{8} << 20) : (std::size_t{256} << 20);
  return static_cast<int>(
      std::clamp<std::size_t>(budget / std::max<std::size_t>(bytes, 1), 4, smoke ? 200 : 5000));
}

void onesided(const options& o);
void actors(const options& o);
void apps(const options& o);
void engine(const options& o); ///< heat2d from the controller (engine.cpp)
void fortran(const options& o);
void progress(const options& o);
void checkpoint(const options& o); ///< checkpoint write/read vs dd (checkpoint.cpp)
void gpu(const options& o);        ///< built with CUDA only (gpu.cpp)
void parallel(const options& o);   ///< built with libcrown_parallel only (parallel.cpp)
void plan(const options& o);       ///< the planner's search time, serial (plan.cpp)

/// heat2d with MPI_Sendrecv halos (apps.cpp); `on_gpu`: the plain CUDA+MPI version.
double mpi_heat2d(const heat2d::options& o, double& checksum, bool on_gpu);

} // namespace crown_bench
