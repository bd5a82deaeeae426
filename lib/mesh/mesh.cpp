// crown::mesh: named-dimension layout of ranks; communicators via the runtime's cache.
#include "../runtime/runtime_state.hpp"
#include "crown_comm.hpp"
#include <algorithm>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <crown/mesh.hpp>
#include <numeric>
#include <ostream>
#include <unordered_set>

namespace crown {
namespace {

std::string dim_names(const std::vector<dim>& dims) {
  std::string s;
  for (const auto& d : dims) s += (s.empty() ? "" : ", ") + d.name;
  return s.empty() ? "none" : s;
}

std::string point_string(const point& p) {
  std::string s = "(";
  for (std::size_t i = 0; i < p.size(); ++i) s += (i ? "," : "") + std::to_string(p[i]);
  return s + ")";
}

} // namespace

mesh::mesh(std::vector<dim> dims, std::vector<int> ranks)
    : mesh(detail::current_state(), std::move(dims), std::move(ranks)) {}

mesh::mesh(std::shared_ptr<detail::runtime_state> rt, std::vector<dim> dims, std::vector<int> ranks)
    : rt_(std::move(rt)), ranks_(std::move(ranks)) {
  if (!rt_) throw state_error("crown::mesh", "no crown::runtime is active");
  dims_ = checked_dims(std::move(dims), static_cast<int>(ranks_.size()), "crown::mesh");
  std::unordered_set<int> seen;
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    const int r = ranks_[i];
    if (r < 0 || r >= rt_->size)
      throw argument_error("crown::mesh", "rank " + std::to_string(r) +
                                              " is outside the world [0, " +
                                              std::to_string(rt_->size) + ")");
    if (!seen.insert(r).second)
      throw argument_error("crown::mesh", "rank " + std::to_string(r) + " is listed twice");
    if (r == rt_->rank) my_index_ = static_cast<int>(i);
  }
}

std::vector<dim> mesh::checked_dims(std::vector<dim> dims, int total, std::string_view op) const {
  long known = 1;
  int inferred = -1;
  std::unordered_set<std::string> names;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const auto& d = dims[i];
    if (d.name.empty()) throw argument_error(std::string(op), "a dimension has an empty name");
    if (!names.insert(d.name).second)
      throw argument_error(std::string(op), "dimension \"" + d.name + "\" appears twice");
    if (d.size == -1 && inferred < 0) {
      inferred = static_cast<int>(i);
    } else if (d.size < 1) {
      throw argument_error(std::string(op), "dimension \"" + d.name + "\" has size " +
                                                std::to_string(d.size) +
                                                " (sizes are >= 1; one may be -1 = inferred)");
    } else {
      known *= d.size;
    }
  }
  std::string shape;
  for (const auto& d : dims)
    shape += (shape.empty() ? "" : ",") + d.name + "=" + std::to_string(d.size);
  if (inferred >= 0 && known > 0 && total % known == 0) {
    dims[inferred].size = static_cast<int>(total / known);
    known = total;
  }
  if (known != total || total == 0)
    throw argument_error(std::string(op), "sizes {" + shape + "} do not multiply to " +
                                              std::to_string(total) + " ranks");
  return dims;
}

int mesh::size(std::string_view d) const { return dims_[dim_index(d)].size; }

bool mesh::has_dim(std::string_view d) const noexcept {
  return std::any_of(dims_.begin(), dims_.end(), [&](const dim& x) { return x.name == d; });
}

std::size_t mesh::dim_index(std::string_view d) const {
  for (std::size_t i = 0; i < dims_.size(); ++i)
    if (dims_[i].name == d) return i;
  throw argument_error(to_string(), "unknown dimension \"" + std::string(d) +
                                        "\" (dimensions: " + dim_names(dims_) + ")");
}

bool mesh::contains(int world_rank) const noexcept { return index_of(world_rank) >= 0; }

int mesh::index_of(int world_rank) const {
  const auto it = std::find(ranks_.begin(), ranks_.end(), world_rank);
  return it == ranks_.end() ? -1 : static_cast<int>(it - ranks_.begin());
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

int mesh::rank_at(const point& p) const {
  if (p.size() != dims_.size())
    throw argument_error(to_string() + ".rank_at" + point_string(p),
                         "point has " + std::to_string(p.size()) + " coordinates, mesh has " +
                             std::to_string(dims_.size()) + " dimensions");
  int linear = 0;
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (p[i] < 0 || p[i] >= dims_[i].size)
      throw argument_error(to_string() + ".rank_at" + point_string(p),
                           "coordinate " + std::to_string(p[i]) + " of dimension \"" +
                               dims_[i].name + "\" is out of range [0, " +
                               std::to_string(dims_[i].size) + ")");
    linear = linear * dims_[i].size + p[i];
  }
  return ranks_[linear];
}

point mesh::point_of(int world_rank) const {
  int linear = index_of(world_rank);
  if (linear < 0)
    throw argument_error(to_string() + ".point_of(" + std::to_string(world_rank) + ")",
                         "rank " + std::to_string(world_rank) + " is not in this mesh");
  point p(dims_.size());
  for (std::size_t i = dims_.size(); i-- > 0;) {
    p[i] = linear % dims_[i].size;
    linear /= dims_[i].size;
  }
  return p;
}

mesh mesh::reshape(std::vector<dim> dims) const {
  require_member("reshape()");
  return mesh(rt_, std::move(dims), ranks_);
}

mesh mesh::slice(std::string_view d, int index) const {
  const std::size_t k = dim_index(d);
  if (index < 0 || index >= dims_[k].size)
    throw argument_error(to_string() + ".slice(\"" + std::string(d) + "\", " +
                             std::to_string(index) + ")",
                         "index out of range [0, " + std::to_string(dims_[k].size) + ")");
  mesh kept = slice(d, range{index, index + 1});
  kept.dims_.erase(kept.dims_.begin() + static_cast<std::ptrdiff_t>(k));
  return kept;
}

mesh mesh::slice(std::string_view d, range r) const {
  const std::size_t k = dim_index(d);
  const int n = dims_[k].size;
  const std::string op = to_string() + ".slice(\"" + std::string(d) + "\", [" +
                         std::to_string(r.begin) + ", " + std::to_string(r.end) + "))";
  if (r.begin < 0 || r.end > n)
    throw argument_error(op, "range out of [0, " + std::to_string(n) + ")");
  if (r.begin >= r.end) throw argument_error(op, "empty slice");
  // inner = product of the sizes after k; each block of n*inner keeps [begin,end)*inner.
  int inner = 1;
  for (std::size_t i = k + 1; i < dims_.size(); ++i) inner *= dims_[i].size;
  std::vector<int> kept;
  for (std::size_t base = 0; base < ranks_.size(); base += static_cast<std::size_t>(n * inner))
    kept.insert(kept.end(), ranks_.begin() + static_cast<std::ptrdiff_t>(base + r.begin * inner),
                ranks_.begin() + static_cast<std::ptrdiff_t>(base + r.end * inner));
  std::vector<dim> dims = dims_;
  dims[k].size = r.end - r.begin;
  return mesh(rt_, std::move(dims), std::move(kept));
}

mesh mesh::sub(std::initializer_list<std::string_view> keep) const {
  std::vector<std::string> names(keep.begin(), keep.end());
  return sub(std::span<const std::string>(names));
}

mesh mesh::sub(std::span<const std::string> keep) const {
  require_member("sub()");
  for (const auto& k : keep) (void)dim_index(k); // unknown names throw here
  mesh m = *this;
  const point me = coords();
  for (std::size_t i = dims_.size(); i-- > 0;)
    if (std::find(keep.begin(), keep.end(), dims_[i].name) == keep.end())
      m = m.slice(dims_[i].name, me[i]);
  return m;
}

MPI_Comm mesh::comm() const {
  rt_->check_alive(to_string() + ".comm()");
  require_member("comm()");
  return rt_->comm_for(ranks_);
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
  return m.rt_->crown_comm_for(m.ranks_);
}

MPI_Comm detail::crown_comm(const mesh& m) { return runtime_state::crown_comm_of(m); }

void detail::crown_barrier(const mesh& m) {
  serving_barrier(crown_comm(m), m.to_string() + " (Crown's barrier)");
}

std::string mesh::to_string() const {
  std::string s = "mesh{";
  for (std::size_t i = 0; i < dims_.size(); ++i)
    s += (i ? "," : "") + dims_[i].name + "=" + std::to_string(dims_[i].size);
  return s + "}";
}

std::ostream& operator<<(std::ostream& os, const mesh& m) { return os << m.to_string(); }

} // namespace crown
