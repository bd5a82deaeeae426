// lib/transport/shm_backend.hpp — the same-host backend: loads, stores and memcpy into
// a peer's slice of the shared segment. Inline, so the fast path has no virtual call.
#pragma once
#include "transfer.hpp"
#include <crown/detail/copy.hpp>
#include <span>

namespace crown::detail::shm_backend {

/// Copies `runs` of the heap at `base` to or from consecutive bytes of `packed`.
inline void transfer(bool put, std::byte* base, std::span<const run> runs, std::byte* packed) {
  for (const run& r : runs) {
    if (put)
      copy_bytes(base + r.offset, packed, r.bytes);
    else
      copy_bytes(packed, base + r.offset, r.bytes);
    packed += r.bytes;
  }
}

/// Copies one strided block between the heap at `base` and a packed buffer. The inner
/// loop copies whole rows when they are contiguous, else one element at a time with a
/// fixed-size copy the compiler turns into a move.
template <bool Put>
void copy_strided(std::byte* base, const strided& s, std::byte* packed) {
  const std::size_t inner = s.dims - 1;
  const bool rows = s.stride[inner] == s.elem;
  const std::size_t row_bytes = s.count[inner] * s.elem;
  std::size_t outer[2] = {1, 1}, outer_stride[2] = {0, 0};
  for (std::size_t d = 0; d < inner; ++d) {
    outer[2 - inner + d] = s.count[d];
    outer_stride[2 - inner + d] = s.stride[d];
  }
  auto move = [&](std::byte* heap, std::size_t bytes) {
    if (Put)
      copy_bytes(heap, packed, bytes);
    else
      copy_bytes(packed, heap, bytes);
    packed += bytes;
  };
  for (std::size_t i = 0; i < outer[0]; ++i)
    for (std::size_t j = 0; j < outer[1]; ++j) {
      std::byte* row = base + s.offset + i * outer_stride[0] + j * outer_stride[1];
      if (rows) {
        move(row, row_bytes);
      } else if (s.elem == 8) {
        for (std::size_t k = 0; k < s.count[inner]; ++k) move(row + k * s.stride[inner], 8);
      } else if (s.elem == 4) {
        for (std::size_t k = 0; k < s.count[inner]; ++k) move(row + k * s.stride[inner], 4);
      } else {
        for (std::size_t k = 0; k < s.count[inner]; ++k) move(row + k * s.stride[inner], s.elem);
      }
    }
}

inline void transfer_strided(bool put, std::byte* base, const strided& s, std::byte* packed) {
  if (put)
    copy_strided<true>(base, s, packed);
  else
    copy_strided<false>(base, s, packed);
}

/// Atomics are CPU atomics on the mapped word: cpu_atomic_any (transfer.hpp).

} // namespace crown::detail::shm_backend
