// crown::mesh_shape: the arithmetic of named-dimension layouts, without MPI.
#include <algorithm>
#include <crown/error.hpp>
#include <crown/mesh_shape.hpp>
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

/// `dims` with its inferred size filled in, after checking names and sizes against
/// `total` ranks.
std::vector<dim> checked_dims(std::vector<dim> dims, int total, std::string_view op) {
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

} // namespace

mesh_shape::mesh_shape(std::vector<dim> dims, std::vector<int> ranks) : ranks_(std::move(ranks)) {
  dims_ = checked_dims(std::move(dims), size(), "crown::mesh");
  std::unordered_set<int> seen;
  for (const int r : ranks_) {
    if (r < 0) throw argument_error("crown::mesh", "rank " + std::to_string(r) + " is negative");
    if (!seen.insert(r).second)
      throw argument_error("crown::mesh", "rank " + std::to_string(r) + " is listed twice");
  }
}

int mesh_shape::size(std::string_view d) const { return dims_[dim_index(d)].size; }

bool mesh_shape::has_dim(std::string_view d) const noexcept {
  return std::any_of(dims_.begin(), dims_.end(), [&](const dim& x) { return x.name == d; });
}

std::size_t mesh_shape::dim_index(std::string_view d) const {
  for (std::size_t i = 0; i < dims_.size(); ++i)
    if (dims_[i].name == d) return i;
  throw argument_error(to_string(), "unknown dimension \"" + std::string(d) +
                                        "\" (dimensions: " + dim_names(dims_) + ")");
}

int mesh_shape::index_of(int rank) const noexcept {
  const auto it = std::find(ranks_.begin(), ranks_.end(), rank);
  return it == ranks_.end() ? -1 : static_cast<int>(it - ranks_.begin());
}

int mesh_shape::rank_at(const point& p) const {
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
  return ranks_[static_cast<std::size_t>(linear)];
}

point mesh_shape::point_of(int rank) const {
  int linear = index_of(rank);
  if (linear < 0)
    throw argument_error(to_string() + ".point_of(" + std::to_string(rank) + ")",
                         "rank " + std::to_string(rank) + " is not in this mesh");
  point p(dims_.size());
  for (std::size_t i = dims_.size(); i-- > 0;) {
    p[i] = linear % dims_[i].size;
    linear /= dims_[i].size;
  }
  return p;
}

mesh_shape mesh_shape::reshape(std::vector<dim> dims) const {
  mesh_shape s;
  s.dims_ = checked_dims(std::move(dims), size(), "crown::mesh");
  s.ranks_ = ranks_;
  return s;
}

mesh_shape mesh_shape::slice(std::string_view d, int index) const {
  const std::size_t k = dim_index(d);
  if (index < 0 || index >= dims_[k].size)
    throw argument_error(to_string() + ".slice(\"" + std::string(d) + "\", " +
                             std::to_string(index) + ")",
                         "index out of range [0, " + std::to_string(dims_[k].size) + ")");
  mesh_shape kept = slice(d, range{index, index + 1});
  kept.dims_.erase(kept.dims_.begin() + static_cast<std::ptrdiff_t>(k));
  return kept;
}

mesh_shape mesh_shape::slice(std::string_view d, range r) const {
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
  mesh_shape s;
  for (std::size_t base = 0; base < ranks_.size(); base += static_cast<std::size_t>(n * inner))
    s.ranks_.insert(s.ranks_.end(),
                    ranks_.begin() + static_cast<std::ptrdiff_t>(base + r.begin * inner),
                    ranks_.begin() + static_cast<std::ptrdiff_t>(base + r.end * inner));
  s.dims_ = dims_;
  s.dims_[k].size = r.end - r.begin;
  return s;
}

mesh_shape mesh_shape::through(const point& at, std::span<const std::string> keep) const {
  for (const auto& k : keep) (void)dim_index(k); // unknown names throw here
  mesh_shape s = *this;
  for (std::size_t i = dims_.size(); i-- > 0;)
    if (std::find(keep.begin(), keep.end(), dims_[i].name) == keep.end())
      s = s.slice(dims_[i].name, at[i]);
  return s;
}

std::string mesh_shape::to_string() const {
  std::string s = "mesh{";
  for (std::size_t i = 0; i < dims_.size(); ++i)
    s += (i ? "," : "") + dims_[i].name + "=" + std::to_string(dims_[i].size);
  return s + "}";
}

std::ostream& operator<<(std::ostream& os, const mesh_shape& s) { return os << s.to_string(); }

} // namespace crown
