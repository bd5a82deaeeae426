// include/crown/mesh_shape.hpp — the arithmetic of a mesh, with no MPI and no runtime.
#pragma once
#include <initializer_list>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace crown {

/// One named dimension of a mesh.
struct dim {
  std::string name;
  int size = 0;
  friend bool operator==(const dim&, const dim&) = default;
};

/// Coordinates of one member, in the order of the dimensions.
using point = std::vector<int>;

/// Half-open index range [begin, end) along one dimension.
struct range {
  int begin = 0;
  int end = 0;
};

/// Ranks laid out row-major over named dimensions: reshaping, slicing, and converting
/// between points and ranks. A plain value (two vectors); usable anywhere, with or
/// without MPI — crown::mesh adds the runtime, the caller's membership and
/// communicators on top. Bad input throws argument_error naming the shape.
class mesh_shape {
public:
  mesh_shape() = default;
  /// `ranks` lists the rank at each point in row-major order; one size may be -1
  /// (inferred). Throws argument_error when the sizes do not multiply to the number of
  /// ranks, a name is empty or repeated, or a rank is negative or listed twice.
  mesh_shape(std::vector<dim> dims, std::vector<int> ranks);

  [[nodiscard]] const std::vector<dim>& dims() const noexcept { return dims_; }
  [[nodiscard]] std::size_t ndim() const noexcept { return dims_.size(); }
  [[nodiscard]] int size() const noexcept { return static_cast<int>(ranks_.size()); }
  [[nodiscard]] int size(std::string_view dim) const;
  [[nodiscard]] bool has_dim(std::string_view dim) const noexcept;
  /// Position of `dim` in dims(); throws argument_error for an unknown name.
  [[nodiscard]] std::size_t dim_index(std::string_view dim) const;

  /// Ranks in row-major point order.
  [[nodiscard]] std::span<const int> ranks() const noexcept { return ranks_; }
  [[nodiscard]] bool contains(int rank) const noexcept { return index_of(rank) >= 0; }
  [[nodiscard]] int index_of(int rank) const noexcept; ///< linear index, -1 if absent
  [[nodiscard]] int rank_at(const point& p) const;
  [[nodiscard]] point point_of(int rank) const;

  /// Same ranks, new dimensions (one size may be -1: inferred).
  [[nodiscard]] mesh_shape reshape(std::vector<dim> dims) const;
  /// Fixes `dim` at `index`; the dimension disappears.
  [[nodiscard]] mesh_shape slice(std::string_view dim, int index) const;
  /// Keeps indices [r.begin, r.end) along `dim`; the dimension stays.
  [[nodiscard]] mesh_shape slice(std::string_view dim, range r) const;
  /// The sub-shape through `at` that varies along `keep` only.
  [[nodiscard]] mesh_shape through(const point& at, std::span<const std::string> keep) const;

  [[nodiscard]] std::string to_string() const; ///< "mesh{dp=2,tp=2}"
  friend bool operator==(const mesh_shape&, const mesh_shape&) = default;
  friend std::ostream& operator<<(std::ostream& os, const mesh_shape& s);

private:
  std::vector<dim> dims_;
  std::vector<int> ranks_;
};

} // namespace crown
