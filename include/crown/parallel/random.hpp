// include/crown/parallel/random.hpp — the random numbers of training: a counter-based
// generator (SplitMix64), so that a value depends only on the seed and its index, never
// on the library, the rank count or how many values were drawn before.
#pragma once
#include <cmath>
#include <cstdint>

namespace crown::parallel {

/// SplitMix64's output function: a 64-bit mix of `x` (Steele, Lea and Flood, 2014).
[[nodiscard]] constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// A uniform double in [0, 1) from `x` (53 bits).
[[nodiscard]] constexpr double unit_interval(std::uint64_t x) noexcept {
  return double(mix64(x) >> 11) * 0x1.0p-53;
}

/// Standard normal numbers by Box-Muller over a SplitMix64 stream.
class normal_source {
public:
  explicit normal_source(std::uint64_t seed) noexcept : state_(mix64(seed)) {}
  /// The stream from its value number `skip` on (values come in pairs from two draws).
  normal_source(std::uint64_t seed, std::uint64_t skip) noexcept
      : state_(mix64(seed) + skip / 2 * 2) {
    if (skip % 2) (void)next();
  }
  double next() noexcept {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = 1.0 - unit_interval(state_++); // (0, 1]: log is finite
    const double u2 = unit_interval(state_++);
    const double r = std::sqrt(-2.0 * std::log(u1)), a = 6.283185307179586 * u2;
    spare_ = r * std::sin(a);
    has_spare_ = true;
    return r * std::cos(a);
  }

private:
  std::uint64_t state_;
  double spare_ = 0;
  bool has_spare_ = false;
};

} // namespace crown::parallel
