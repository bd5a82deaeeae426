// crown-bench engine: heat2d driven from the controller through a tensor engine (one
// command per iteration) beside the SPMD solver on the same workers, in the same run.
// Both are apps/heat2d's own solvers; their checksums must agree bitwise.
#include "../heat2d/controller_solver.hpp"
#include "bench.hpp"
#include <crown/crown.hpp>

namespace crown_bench {

void engine(const options& o) {
  heat2d::options h;
  h.n = o.smoke ? 128 : 1024;
  h.iterations = o.smoke ? 20 : 100;
  const int code = crown::this_runtime().control([&](crown::controller& c) {
    const crown::proc_mesh workers = c.workers();
    std::vector<double> driven, spmd;
    for (int b = 0; b < (o.smoke ? 1 : 5); ++b) { // alternately, so that load hits both
      const heat2d::result s = heat2d::solve_spmd_on(workers, h, false);
      const heat2d::result d = heat2d::solve_from_controller(workers, h, false);
      if (s.checksum != d.checksum)
        throw crown::error("crown-bench engine", "heat2d checksums differ");
      spmd.push_back(s.seconds);
      driven.push_back(d.seconds);
    }
    const double updates = static_cast<double>(h.n) * static_cast<double>(h.n) * h.iterations;
    print_header();
    print_line("engine", "heat2d_controller", h.n, "MLUP/s", updates / median(driven) / 1e6,
               "spmd_heat2d", updates / median(spmd) / 1e6);
  });
  if (code != 0) throw crown::error("crown-bench engine", "the controller failed");
}

} // namespace crown_bench
