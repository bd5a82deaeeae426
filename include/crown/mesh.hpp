// include/crown/mesh.hpp — a set of ranks with named dimensions.
#pragma once
#include <crown/mesh_shape.hpp>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <mpi.h>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace crown {

namespace detail {
struct runtime_state;
}

/// A mesh is a value: an ordered list of ranks (of the runtime's world) laid out
/// row-major over named dimensions — a mesh_shape, whose arithmetic it forwards —
/// bound to the runtime. Copying is cheap-ish (two vectors); every operation that only
/// computes (reshape, slice, point <-> rank, printing) works on any rank, members or
/// not. Operations that communicate (comm(), barrier()) are
/// collective over the mesh's members only. Communicators are created once per
/// distinct rank list, by the members alone (MPI_Comm_create_group), and cached by
/// the runtime until it is destroyed.
class mesh {
public:
  /// An explicit mesh over world ranks; `ranks` lists the rank at each point in
  /// row-major order. Throws argument_error if the sizes do not match, a rank is out
  /// of the world or listed twice.
  mesh(std::vector<dim> dims, std::vector<int> ranks);

  [[nodiscard]] const mesh_shape& shape() const noexcept { return shape_; }
  [[nodiscard]] const std::vector<dim>& dims() const noexcept { return shape_.dims(); }
  [[nodiscard]] std::size_t ndim() const noexcept { return shape_.ndim(); }
  [[nodiscard]] int size() const noexcept { return shape_.size(); }
  [[nodiscard]] int size(std::string_view dim) const { return shape_.size(dim); }
  [[nodiscard]] bool has_dim(std::string_view dim) const noexcept { return shape_.has_dim(dim); }
  /// Position of `dim` in dims(); throws argument_error for an unknown name.
  [[nodiscard]] std::size_t dim_index(std::string_view dim) const { return shape_.dim_index(dim); }

  /// World ranks in row-major point order.
  [[nodiscard]] std::span<const int> ranks() const noexcept { return shape_.ranks(); }
  [[nodiscard]] auto begin() const noexcept { return ranks().begin(); }
  [[nodiscard]] auto end() const noexcept { return ranks().end(); }
  [[nodiscard]] bool contains(int world_rank) const noexcept { return shape_.contains(world_rank); }
  /// True when the calling rank belongs to the mesh.
  [[nodiscard]] bool is_member() const noexcept { return my_index_ >= 0; }

  /// The calling rank's linear index in the mesh (= its rank in comm()).
  [[nodiscard]] int rank() const;
  /// The calling rank's point, and its coordinate along one dimension.
  [[nodiscard]] point coords() const;
  [[nodiscard]] int coordinate(std::string_view dim) const;
  [[nodiscard]] int rank_at(const point& p) const { return shape_.rank_at(p); } ///< world rank
  [[nodiscard]] point point_of(int world_rank) const { return shape_.point_of(world_rank); }
  /// Linear index, -1 if absent.
  [[nodiscard]] int index_of(int world_rank) const noexcept { return shape_.index_of(world_rank); }

  /// Same ranks, new dimensions (one size may be -1: inferred). The calling rank
  /// must be a member.
  [[nodiscard]] mesh reshape(std::vector<dim> dims) const;
  /// Fixes `dim` at `index`; the dimension disappears.
  [[nodiscard]] mesh slice(std::string_view dim, int index) const;
  /// Keeps indices [r.begin, r.end) along `dim`; the dimension stays.
  [[nodiscard]] mesh slice(std::string_view dim, range r) const;
  /// The sub-mesh varying along `keep` only, through the calling rank's point
  /// (e.g. sub({"tp"}) = my tensor-parallel group). The caller must be a member.
  [[nodiscard]] mesh sub(std::initializer_list<std::string_view> keep) const;
  [[nodiscard]] mesh sub(std::span<const std::string> keep) const;

  /// MPI communicator of the members, rank order = mesh order, MPI_ERRORS_RETURN.
  /// Collective over the members the first time; cached afterwards. Not to be freed.
  [[nodiscard]] MPI_Comm comm() const;
  /// Barrier over the members that spins briefly and then yields the core.
  void barrier() const;

  [[nodiscard]] std::string to_string() const { return shape_.to_string(); } ///< "mesh{dp=2,tp=2}"
  friend bool operator==(const mesh& a, const mesh& b) noexcept { return a.shape_ == b.shape_; }
  friend std::ostream& operator<<(std::ostream& os, const mesh& m);

private:
  /// Binds `shape` to the runtime: its ranks must lie in the world.
  mesh(std::shared_ptr<detail::runtime_state> rt, mesh_shape shape);
  friend struct detail::runtime_state;
  void require_member(std::string_view op) const;

  std::shared_ptr<detail::runtime_state> rt_;
  mesh_shape shape_;
  int my_index_ = -1;
};

} // namespace crown
