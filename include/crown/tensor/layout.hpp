// include/crown/tensor/layout.hpp — where each image's block of a global N-d array
// lies, from one placement per mesh dimension (PyTorch DTensor's model).
#pragma once
#include <array>
#include <crown/error.hpp>
#include <crown/mesh.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace crown {

/// How a tensor lies along one mesh dimension: split along tensor dimension `dim`
/// (shard), or whole on every index of the mesh dimension (replicate).
struct placement {
  enum class kind : std::uint8_t { replicate, shard };
  kind how = kind::replicate;
  std::size_t dim = 0; ///< the tensor dimension a shard splits (0 for replicate)
  [[nodiscard]] bool is_shard() const noexcept { return how == kind::shard; }
  [[nodiscard]] std::string to_string() const {
    return is_shard() ? "shard(" + std::to_string(dim) + ")" : "replicate()";
  }
  friend bool operator==(const placement&, const placement&) = default;
};
[[nodiscard]] inline placement shard(std::size_t dim) { return {placement::kind::shard, dim}; }
[[nodiscard]] inline placement replicate() { return {}; }

/// A box of global indices [lo, hi) per dimension.
template <std::size_t N>
struct box {
  std::array<std::size_t, N> lo{}, hi{};
  [[nodiscard]] std::size_t extent(std::size_t d) const noexcept {
    return hi[d] > lo[d] ? hi[d] - lo[d] : 0;
  }
  [[nodiscard]] std::size_t size() const noexcept {
    std::size_t n = 1;
    for (std::size_t d = 0; d < N; ++d) n *= extent(d);
    return n;
  }
  [[nodiscard]] bool empty() const noexcept { return size() == 0; }
  [[nodiscard]] bool contains(const std::array<std::size_t, N>& i) const noexcept {
    for (std::size_t d = 0; d < N; ++d)
      if (i[d] < lo[d] || i[d] >= hi[d]) return false;
    return true;
  }
  [[nodiscard]] box intersect(const box& o) const noexcept {
    box r;
    for (std::size_t d = 0; d < N; ++d) {
      r.lo[d] = std::max(lo[d], o.lo[d]);
      r.hi[d] = std::max(r.lo[d], std::min(hi[d], o.hi[d]));
    }
    return r;
  }
};

namespace detail {

/// Text of an index or shape: "[4, 7]".
template <std::size_t N>
std::string index_text(const std::array<std::size_t, N>& i) {
  std::string t = "[";
  for (std::size_t d = 0; d < N; ++d) t += (d ? ", " : "") + std::to_string(i[d]);
  return t + "]";
}

inline std::string placements_text(const std::vector<placement>& p) {
  std::string t = "{";
  for (std::size_t i = 0; i < p.size(); ++i) t += (i ? ", " : "") + p[i].to_string();
  return t + "}";
}

} // namespace detail

/// The block distribution of a global shape over a mesh. Along tensor dimension d the
/// mesh dimensions that shard it (in mesh order) form p parts; part k holds indices
/// [k*b, min(n, (k+1)*b)) with b = ceil(n/p): equal blocks, the last one short, and
/// the last one empty when n <= (p-1)*b (9 over 4 parts: 3, 3, 3, 0; a halo along such
/// a dimension is refused). Replicated mesh dimensions hold copies.
template <std::size_t N>
class tensor_layout {
public:
  using index_type = std::array<std::size_t, N>;

  /// Throws argument_error when the placements do not match the mesh's dimensions or
  /// name a tensor dimension that does not exist.
  tensor_layout(const mesh& m, const index_type& shape, std::vector<placement> placements)
      : mesh_(m), shape_(shape), placements_(std::move(placements)) {
    const std::string what = "dist_tensor" + detail::index_text(shape_) + " on " +
                             mesh_.to_string() + " with " + detail::placements_text(placements_);
    if (placements_.size() != mesh_.ndim())
      throw argument_error(what, std::to_string(placements_.size()) + " placements for " +
                                     std::to_string(mesh_.ndim()) +
                                     " mesh dimensions (one placement per mesh dimension)");
    for (std::size_t d = 0; d < N; ++d)
      if (shape_[d] == 0)
        throw argument_error(what, "dimension " + std::to_string(d) + " is empty");
    parts_.fill(1);
    for (std::size_t md = 0; md < placements_.size(); ++md) {
      const placement& p = placements_[md];
      if (!p.is_shard()) continue;
      if (p.dim >= N)
        throw argument_error(what, "shard(" + std::to_string(p.dim) +
                                       ") names a tensor dimension outside [0, " +
                                       std::to_string(N) + ")");
      parts_[p.dim] *= static_cast<std::size_t>(mesh_.dims()[md].size);
    }
    for (std::size_t d = 0; d < N; ++d) block_[d] = (shape_[d] + parts_[d] - 1) / parts_[d];
  }

  [[nodiscard]] const crown::mesh& mesh() const noexcept { return mesh_; }
  [[nodiscard]] const index_type& shape() const noexcept { return shape_; }
  [[nodiscard]] const std::vector<placement>& placements() const noexcept { return placements_; }
  [[nodiscard]] std::size_t parts(std::size_t d) const noexcept { return parts_[d]; }
  /// The largest block (what every image stores).
  [[nodiscard]] const index_type& block_extents() const noexcept { return block_; }
  [[nodiscard]] std::size_t elements() const noexcept {
    std::size_t n = 1;
    for (std::size_t e : shape_) n *= e;
    return n;
  }

  /// The part of tensor dimension d that `image` holds.
  [[nodiscard]] std::size_t part_of(int image, std::size_t d) const {
    const point c = coords_of(image);
    std::size_t part = 0;
    for (std::size_t md = 0; md < placements_.size(); ++md)
      if (placements_[md].is_shard() && placements_[md].dim == d)
        part = part * static_cast<std::size_t>(mesh_.dims()[md].size) +
               static_cast<std::size_t>(c[md]);
    return part;
  }
  /// The global indices `image` holds.
  [[nodiscard]] box<N> block_of(int image) const {
    box<N> b;
    for (std::size_t d = 0; d < N; ++d) {
      const std::size_t k = part_of(image, d);
      b.lo[d] = std::min(shape_[d], k * block_[d]);
      b.hi[d] = std::min(shape_[d], b.lo[d] + block_[d]);
    }
    return b;
  }
  /// The image that holds global index `i`, among the copies the one that shares
  /// `near`'s coordinates along replicated mesh dimensions (itself when it holds i).
  [[nodiscard]] int owner(const index_type& i, int near) const {
    point c = coords_of(near);
    for (std::size_t d = 0; d < N; ++d) {
      std::size_t part = i[d] / block_[d];
      for (std::size_t md = placements_.size(); md-- > 0;) {
        if (!placements_[md].is_shard() || placements_[md].dim != d) continue;
        const auto size = static_cast<std::size_t>(mesh_.dims()[md].size);
        c[md] = static_cast<int>(part % size);
        part /= size;
      }
    }
    return image_at(c);
  }
  /// Every image holding a copy of `image`'s block (itself included), in mesh order.
  [[nodiscard]] std::vector<int> replicas_of(int image) const {
    std::vector<int> out;
    const point mine = coords_of(image);
    for (int j = 0; j < mesh_.size(); ++j) {
      const point c = coords_of(j);
      bool same = true;
      for (std::size_t md = 0; md < placements_.size(); ++md)
        same = same && (!placements_[md].is_shard() || c[md] == mine[md]);
      if (same) out.push_back(j);
    }
    return out;
  }
  /// True for the one copy of each block that reductions count (coordinate 0 along
  /// every replicated mesh dimension).
  [[nodiscard]] bool is_primary(int image) const {
    const point c = coords_of(image);
    for (std::size_t md = 0; md < placements_.size(); ++md)
      if (!placements_[md].is_shard() && c[md] != 0) return false;
    return true;
  }

  [[nodiscard]] point coords_of(int image) const {
    point c(mesh_.ndim());
    for (std::size_t md = mesh_.ndim(); md-- > 0;) {
      const int size = mesh_.dims()[md].size;
      c[md] = image % size;
      image /= size;
    }
    return c;
  }
  [[nodiscard]] int image_at(const point& c) const {
    int image = 0;
    for (std::size_t md = 0; md < mesh_.ndim(); ++md) image = image * mesh_.dims()[md].size + c[md];
    return image;
  }

private:
  crown::mesh mesh_;
  index_type shape_;
  std::vector<placement> placements_;
  index_type parts_{}, block_{};
};

} // namespace crown
