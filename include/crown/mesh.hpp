// include/crown/mesh.hpp — a set of ranks with named dimensions.
#pragma once
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

/// One named dimension of a mesh.
struct dim {
  std::string name;
  int size = 0;
  friend bool operator==(const dim&, const dim&) = default;
};

/// Coordinates of one member, in the order of mesh::dims().
using point = std::vector<int>;

/// Half-open index range [begin, end) along one dimension.
struct range {
  int begin = 0;
  int end = 0;
};

/// A mesh is a value: an ordered list of ranks (of the runtime's world) laid out
/// row-major over named dimensions. Copying is cheap-ish (two vectors); every
/// operation that only computes (reshape, slice, point <-> rank, printing) works on
/// any rank, members or not. Operations that communicate (comm(), barrier()) are
/// collective over the mesh's members only. Communicators are created once per
/// distinct rank list, by the members alone (MPI_Comm_create_group), and cached by
/// the runtime until it is destroyed.
class mesh {
public:
  /// An explicit mesh over world ranks; `ranks` lists the rank at each point in
  /// row-major order. Throws argument_error if the sizes do not match, a rank is out
  /// of the world or listed twice.
  mesh(std::vector<dim> dims, std::vector<int> ranks);

  [[nodiscard]] const std::vector<dim>& dims() const noexcept { return dims_; }
  [[nodiscard]] std::size_t ndim() const noexcept { return dims_.size(); }
  [[nodiscard]] int size() const noexcept { return static_cast<int>(ranks_.size()); }
  [[nodiscard]] int size(std::string_view dim) const;
  [[nodiscard]] bool has_dim(std::string_view dim) const noexcept;
  /// Position of `dim` in dims(); throws argument_error for an unknown name.
  [[nodiscard]] std::size_t dim_index(std::string_view dim) const;

  /// World ranks in row-major point order.
  [[nodiscard]] std::span<const int> ranks() const noexcept { return ranks_; }
  [[nodiscard]] auto begin() const noexcept { return ranks_.begin(); }
  [[nodiscard]] auto end() const noexcept { return ranks_.end(); }
  [[nodiscard]] bool contains(int world_rank) const noexcept;
  /// True when the calling rank belongs to the mesh.
  [[nodiscard]] bool is_member() const noexcept { return my_index_ >= 0; }

  /// The calling rank's linear index in the mesh (= its rank in comm()).
  [[nodiscard]] int rank() const;
  /// The calling rank's point, and its coordinate along one dimension.
  [[nodiscard]] point coords() const;
  [[nodiscard]] int coordinate(std::string_view dim) const;
  [[nodiscard]] int rank_at(const point& p) const; ///< world rank at a point
  [[nodiscard]] point point_of(int world_rank) const;
  [[nodiscard]] int index_of(int world_rank) const; ///< linear index, -1 if absent

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

  [[nodiscard]] std::string to_string() const; ///< "mesh{dp=2,tp=2}"
  friend bool operator==(const mesh& a, const mesh& b) noexcept {
    return a.dims_ == b.dims_ && a.ranks_ == b.ranks_;
  }
  friend std::ostream& operator<<(std::ostream& os, const mesh& m);

private:
  mesh(std::shared_ptr<detail::runtime_state> rt, std::vector<dim> dims, std::vector<int> ranks);
  friend struct detail::runtime_state;
  void require_member(std::string_view op) const;
  [[nodiscard]] std::vector<dim> checked_dims(std::vector<dim> dims, int total,
                                              std::string_view op) const;

  std::shared_ptr<detail::runtime_state> rt_;
  std::vector<dim> dims_;
  std::vector<int> ranks_;
  int my_index_ = -1;
};

} // namespace crown
