// crown::mesh: named-dimension layout of ranks; communicators via the runtime's cache.
#include "../runtime/runtime_state.hpp"
#include "crown_comm.hpp"
#include <algorithm>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <crown/mesh.hpp>
#include <ostream>

namespace crown {

mesh::mesh(std::vector<dim> dims, std::vector<int> ranks)
    : mesh(detail::current_state(), mesh_shape(std::move(dims), std::move(ranks))) {}

mesh::mesh(std::shared_ptr<detail::runtime_state> rt, mesh_shape shape)
    : rt_(std::move(rt)), shape_(std::move(shape)) {
  if (!rt_) throw state_error("crown::mesh", "no crown::runtime is active");
  for (const int r : shape_.ranks())
    if (r >= rt_->size)
      throw argument_error("crown::mesh", "rank " + std::to_string(r) +
                                              " is outside the world [0, " +
                                              std::to_string(rt_->size) + ")");
  my_index_ = shape_.index_of(rt_->rank);
}

void mesh::require_member(std::string_view op) const {
  if (!is_member())
    throw argument_error(to_string() + "." + std::string(op),
                         "rank " + std::to_string(rt_->rank) + " is not a member of this mesh");
}

int mesh::rank() const {
  require_member("rank()");
  return my_index_;
}

point mesh::coords() const {
  require_member("coords()");
  return point_of(rt_->rank);
}

int mesh::coordinate(std::string_view d) const {
  const std::size_t i = dim_index(d);
  return coords()[i];
}

mesh mesh::reshape(std::vector<dim> dims) const {
  require_member("reshape()");
  return mesh(rt_, shape_.reshape(std::move(dims)));
}

mesh mesh::slice(std::string_view d, int index) const { return mesh(rt_, shape_.slice(d, index)); }

mesh mesh::slice(std::string_view d, range r) const { return mesh(rt_, shape_.slice(d, r)); }

mesh mesh::sub(std::initializer_list<std::string_view> keep) const {
  std::vector<std::string> names(keep.begin(), keep.end());
  return sub(std::span<const std::string>(names));
}

mesh mesh::sub(std::span<const std::string> keep) const {
  require_member("sub()");
  return mesh(rt_, shape_.through(coords(), keep));
}

MPI_Comm mesh::comm() const {
  rt_->check_alive(to_string() + ".comm()");
  require_member("comm()");
  return rt_->comm_for(ranks());
}

namespace {
/// MPI_Ibarrier, waited for under the backoff so that one-sided requests are served.
void serving_barrier(MPI_Comm c, const std::string& what) {
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibarrier(c, &request), what + ": MPI_Ibarrier");
  int done = 0;
  detail::wait_until(detail::wait_site{what.c_str()}, [&] {
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what + ": MPI_Test");
    return done != 0;
  });
}
} // namespace

void mesh::barrier() const { serving_barrier(comm(), to_string() + ".barrier()"); }

MPI_Comm detail::runtime_state::crown_comm_of(const crown::mesh& m) {
  m.rt_->check_alive(m.to_string() + ".comm()");
  m.require_member("comm()");
  return m.rt_->crown_comm_for(m.ranks());
}

MPI_Comm detail::crown_comm(const mesh& m) { return runtime_state::crown_comm_of(m); }

void detail::crown_barrier(const mesh& m) {
  serving_barrier(crown_comm(m), m.to_string() + " (Crown's barrier)");
}

std::ostream& operator<<(std::ostream& os, const mesh& m) { return os << m.to_string(); }

} // namespace crown
