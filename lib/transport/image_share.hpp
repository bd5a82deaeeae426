// lib/transport/image_share.hpp — how a reduction splits its elements between images.
#pragma once
#include <algorithm>
#include <cstddef>
#include <utility>

namespace crown::detail {

/// [begin, end) of `count` elements that image `i` of `n` reduces: ceil(count / n)
/// each, in image order, so the last images' shares are shorter or empty.
inline std::pair<std::size_t, std::size_t> image_share(std::size_t count, std::size_t n,
                                                       std::size_t i) noexcept {
  const std::size_t per = (count + n - 1) / n;
  const std::size_t begin = std::min(count, i * per);
  return {begin, std::min(count, begin + per)};
}

} // namespace crown::detail
