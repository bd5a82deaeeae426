// The probe behind copy_bytes' choice between whole and 2 KiB pieces
// (include/crown/detail/copy.hpp).
#include <algorithm>
#include <chrono>
#include <crown/detail/copy.hpp>
#include <cstdlib>

namespace crown::detail {

std::size_t pieces_below() noexcept {
  static const std::size_t below = []() -> std::size_t {
    if (!cpu_has_erms()) return 0;
    constexpr std::size_t all = std::size_t{2} << 20, largest = std::size_t{64} << 10;
    auto* buffer = static_cast<std::byte*>(std::aligned_alloc(4096, 2 * largest + 8192));
    if (!buffer) return all;
    std::memset(buffer, 1, 2 * largest + 8192);
    const std::byte* src = buffer;
    std::byte* dst = buffer + largest + 4096 + 16;
    const auto seconds = [&](bool whole, std::size_t bytes) {
      double best = 1e30;
      const std::size_t times = largest / bytes;
      for (int round = 0; round < 3; ++round) {
        const auto start = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < times; ++i) {
          if (whole)
            std::memcpy(dst, src, bytes);
          else
            copy_in_pieces(dst, src, bytes);
          asm volatile("" ::: "memory"); // every copy happens
        }
        best = std::min(
            best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      return best;
    };
    // From the largest size down: the whole copy from where it wins on, up through ties,
    // until the pieces clearly win.
    std::size_t from = all;
    for (std::size_t bytes = largest; bytes >= 4096; bytes /= 4) {
      const double ratio = seconds(true, bytes) / seconds(false, bytes);
      if (ratio < 0.8)
        from = bytes;
      else if (ratio > 1.1)
        break;
    }
    std::free(buffer);
    return from;
  }();
  return below;
}

} // namespace crown::detail
