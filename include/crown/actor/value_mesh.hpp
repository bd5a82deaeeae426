// include/crown/actor/value_mesh.hpp — one value per point of an actor mesh.
#pragma once
#include <crown/error.hpp>
#include <crown/mesh.hpp>
#include <string>
#include <vector>

namespace crown {

/// The results of a call, indexed like the actor mesh it went to: by linear index
/// (mesh order), by point, or iterated; slices like a mesh.
template <typename T>
class value_mesh {
public:
  value_mesh(crown::mesh m, std::vector<T> values)
      : mesh_(std::move(m)), values_(std::move(values)) {}
  [[nodiscard]] const crown::mesh& mesh() const noexcept { return mesh_; }
  [[nodiscard]] std::size_t size() const noexcept { return values_.size(); }
  [[nodiscard]] const T& operator[](std::size_t i) const { return values_.at(i); }
  [[nodiscard]] const T& at(const point& p) const {
    return values_[static_cast<std::size_t>(mesh_.index_of(mesh_.rank_at(p)))];
  }
  [[nodiscard]] auto begin() const noexcept { return values_.begin(); }
  [[nodiscard]] auto end() const noexcept { return values_.end(); }
  [[nodiscard]] const std::vector<T>& values() const noexcept { return values_; }
  /// The values at `dim` = `index` (the dimension disappears, as in mesh::slice).
  [[nodiscard]] value_mesh slice(std::string_view dim, int index) const {
    crown::mesh kept = mesh_.slice(dim, index);
    std::vector<T> v;
    for (int r : kept) v.push_back(values_[static_cast<std::size_t>(mesh_.index_of(r))]);
    return value_mesh(std::move(kept), std::move(v));
  }

private:
  crown::mesh mesh_;
  std::vector<T> values_;
};

} // namespace crown
