// lib/transport/stream_copy.hpp — copies into shared memory that another process reads next.
#pragma once
#include <crown/detail/copy.hpp>
#include <cstddef>
#include <cstdint>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace crown::detail {

/// copy_bytes with non-temporal stores, for a buffer in the shared heap that another
/// process reads and this one rewrites soon after: an ordinary store must first take
/// each line back from the reader's cache (a round trip between cores per line, read
/// for ownership), a streaming store writes the whole line without it, and the reader
/// finds it in memory (co_sum's slots: figures at stream_from_bytes in
/// host_collectives.cpp). Visible to other processes only after
/// streamed_stores_visible(). Below 256 bytes, and for the head before the first whole
/// line and the tail after the last 16 bytes, it is copy_bytes.
inline void stream_bytes(void* dst, const void* src, std::size_t bytes) noexcept {
#if defined(__SSE2__)
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  // To a line's start: a line written partly by ordinary stores would be read for them.
  const std::size_t head = (64 - reinterpret_cast<std::uintptr_t>(d) % 64) % 64;
  if (bytes < head + 256) {
    copy_bytes(dst, src, bytes);
    return;
  }
  copy_bytes(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  auto* to = reinterpret_cast<__m128i*>(d);
  const auto* from = reinterpret_cast<const __m128i*>(s);
  for (std::size_t i = 0; i < bytes / 16; ++i) _mm_stream_si128(to + i, _mm_loadu_si128(from + i));
  copy_bytes(d + bytes / 16 * 16, s + bytes / 16 * 16, bytes % 16);
#else
  copy_bytes(dst, src, bytes);
#endif
}

/// Orders every streaming store before the stores that follow (they are weakly ordered
/// on x86: a release store alone does not publish them).
inline void streamed_stores_visible() noexcept {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

} // namespace crown::detail
