// include/crown/view.hpp — a non-owning, row-major N-d view: pointer + extents, no hidden cost.
#pragma once
#include <array>
#include <cstddef>
#include <span>

namespace crown {

/// Like a layout_right mdspan: operator() computes one offset and dereferences,
/// nothing else (no bounds checks, no indirection).
template <typename T, std::size_t N>
class view {
public:
  using extents_type = std::array<std::size_t, N>;
  constexpr view(T* data, const extents_type& extents) noexcept : data_(data), extents_(extents) {}

  template <typename... I>
  requires(sizeof...(I) == N) [[nodiscard]] constexpr T& operator()(I... index) const noexcept {
    const std::array<std::size_t, N> i{static_cast<std::size_t>(index)...};
    std::size_t offset = i[0];
    for (std::size_t d = 1; d < N; ++d) offset = offset * extents_[d] + i[d];
    return data_[offset];
  }
  [[nodiscard]] constexpr T& operator[](std::size_t i) const noexcept requires(N == 1) {
    return data_[i];
  }
  [[nodiscard]] constexpr std::size_t extent(std::size_t d) const noexcept { return extents_[d]; }
  [[nodiscard]] constexpr const extents_type& extents() const noexcept { return extents_; }
  [[nodiscard]] constexpr std::size_t size() const noexcept {
    std::size_t n = 1;
    for (std::size_t e : extents_) n *= e;
    return n;
  }
  [[nodiscard]] constexpr T* data() const noexcept { return data_; }
  [[nodiscard]] constexpr std::span<T> flat() const noexcept { return {data_, size()}; }
  [[nodiscard]] constexpr T* begin() const noexcept { return data_; }
  [[nodiscard]] constexpr T* end() const noexcept { return data_ + size(); }

private:
  T* data_;
  extents_type extents_;
};

} // namespace crown
