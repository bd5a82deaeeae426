// include/crown/detail/copy.hpp — memcpy, minus one pathology of glibc's memcpy.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace crown::detail {

/// Whether the CPU reports ERMS (fast `rep movsb`), which is when glibc's memcpy copies
/// mid-sized blocks with it. Read once.
inline bool cpu_has_erms() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  static const bool erms = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) != 0 && (b & (1u << 9)) != 0;
  }();
  return erms;
#else
  return false;
#endif
}

/// copy_in_pieces' piece: below every rep movsb threshold of glibc.
inline constexpr std::size_t copy_piece_bytes = 2048;

/// memcpy in pieces of copy_piece_bytes.
inline void copy_in_pieces(void* dst, const void* src, std::size_t bytes) noexcept {
  constexpr std::size_t piece = copy_piece_bytes;
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  while (bytes > 0) {
    std::size_t n = bytes < piece ? bytes : piece;
    // A size the compiler cannot see: a known 2048 it inlines as `rep movsq`, which is
    // as slow as rep movsb here.
    asm("" : "+r"(n));
    std::memcpy(d, s, n);
    d += n;
    s += n;
    bytes -= n;
  }
}

/// Below which size copy_bytes copies a skewed block in pieces on this CPU: 0 without
/// ERMS; else 2 MiB, lowered to the size from which a whole memcpy at skew 16 clearly
/// beat the pieces (< 0.8x their time) in a probe of 4 KiB..64 KiB in this process's
/// own buffers, best of 3 (0.3-0.5 ms, once, at the first skewed copy). On a
/// Zen 5 EPYC (family 26) rep movsb has no skew pathology and the pieces halve the
/// speed from 64 KiB up (65 GB/s against 98-128 whole) while beating it below (155
/// against 99 at 4 KiB): the probe finds 64 KiB. On the CPUs of copy_bytes' comment the
/// whole copy never wins and nothing changes. One probe per process (lib/runtime/copy.cpp).
std::size_t pieces_below() noexcept;

/// std::memcpy of `bytes` from `src` to `dst` (not overlapping). On CPUs with fast
/// `rep movsb` glibc copies blocks from a few KiB to about the L2 size with it, and on
/// AMD Zen 2-4 that runs at 1.5 GB/s instead of 40 when the destination lies 1-31 bytes
/// past the source modulo 4096 (measured here for 4 KiB..256 KiB, glibc 2.36). A heap
/// block starts on a page and a malloc'd buffer 16 bytes past one, so a get into a
/// std::vector hit it every time. Copied in 2 KiB pieces, below every rep movsb
/// threshold, glibc stays on its vector loop (52-55 GB/s at 4-8 KiB, 25-39 above).
/// Intel's is slow there too, depending on where the source lines are: on Sapphire
/// Rapids a 4 KiB get at skew 16 from a peer's block just written by puts took 136 ns
/// with memcpy, 32 ns in pieces (a private source: 40 ns either way). Where the CPU
/// does not report ERMS, glibc never uses rep movsb and the pieces only cost: on a Zen 2
/// VM without it, 16 KiB at skew 16 ran at 79 GB/s in pieces, 89 GB/s whole. Where a
/// whole copy is faster after all, pieces_below() says from which size.
inline void copy_bytes(void* dst, const void* src, std::size_t bytes) noexcept {
  const std::uintptr_t skew =
      (reinterpret_cast<std::uintptr_t>(dst) - reinterpret_cast<std::uintptr_t>(src)) & 4095;
  // From 2 MiB up glibc streams with non-temporal stores, which the skew does not slow.
  if (bytes <= copy_piece_bytes || skew == 0 || skew >= 64 || bytes >= pieces_below()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  copy_in_pieces(dst, src, bytes);
}

} // namespace crown::detail
