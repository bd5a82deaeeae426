// apps/heat2d/controller_solver.hpp — heat2d driven from the controller: the SPMD
// solver's fields and kernels (set_edges, step) on the workers of a tensor engine, one
// command per iteration, the field fetched to the controller only at the end.
#pragma once
#include "solver.hpp"
#include <crown/crown.hpp>
#include <span>
#include <utility>

namespace heat2d {

namespace detail {

using field_ptrs = std::span<crown::dist_tensor<double, 2>* const>;
inline void edges_kernel(field_ptrs fields, std::span<const double>) {
  for (auto* f : fields) set_edges(*f);
}
/// fields u, v; scalars {overlap (0 or 1)}.
inline void step_kernel(field_ptrs fields, std::span<const double> scalars) {
  step(*fields[0], *fields[1], scalars[0] != 0);
}
inline const bool kernels_registered =
    crown::register_kernel<double, 2>("heat2d.edges", &edges_kernel) &&
    crown::register_kernel<double, 2>("heat2d.step", &step_kernel);

} // namespace detail

/// On the controller: solves on `workers` (all of them, as a rows x cols mesh) and
/// returns the time of the iterations, the checksum and (when asked for) the field.
inline result solve_from_controller(const crown::proc_mesh& workers, const options& o,
                                    bool keep_field) {
  const auto [rows, cols] = decomposition(o, workers.mesh().size());
  crown::tensor_engine engine(workers.reshape({{"rows", rows}, {"cols", cols}}), "heat2d");
  auto u = engine.create<double, 2>("u", {o.n, o.n}, placements(), halo);
  auto v = engine.create<double, 2>("v", {o.n, o.n}, placements(), halo);
  engine.run("heat2d.edges", {}, u, v);
  engine.wait();
  const double start = MPI_Wtime();
  for (int it = 0; it < o.iterations; ++it) {
    engine.run("heat2d.step", {o.overlap ? 1.0 : 0.0}, u, v);
    swap(u, v); // the handles only
  }
  engine.wait();
  result out;
  out.seconds = MPI_Wtime() - start;
  std::vector<double> field = u.fetch();
  out.checksum = checksum(field);
  if (keep_field) out.field = std::move(field);
  engine.stop();
  return out;
}

/// The SPMD solver run by actors on the workers: the baseline measured in the same run.
class spmd_solver {
public:
  result solve(const options& o, bool keep_field) {
    return heat2d::solve(crown::this_actor().mesh, o, keep_field); // the field on actor 0
  }
  static constexpr auto endpoints = crown::endpoints(&spmd_solver::solve);
};

/// On the controller: the SPMD solver on `workers` (every one runs it); actor 0's result.
inline result solve_spmd_on(const crown::proc_mesh& workers, const options& o, bool keep_field) {
  auto actors = workers.spawn<spmd_solver>("heat2d_spmd");
  result r = actors.call(&spmd_solver::solve, o, keep_field).get()[0];
  actors.stop();
  return r;
}

} // namespace heat2d
