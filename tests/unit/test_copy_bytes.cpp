// crown::detail::copy_bytes (include/crown/detail/copy.hpp): the same bytes as memcpy for
// every skew between destination and source and every size around its two thresholds
// (2 KiB pieces, 2 MiB), and nothing written outside the destination; stream_bytes
// (lib/transport/stream_copy.hpp) the same at every destination offset within a line.
#include "transport/stream_copy.hpp"
#include <boost/test/unit_test.hpp>
#include <crown/detail/copy.hpp>
#include <cstdint>
#include <vector>

BOOST_AUTO_TEST_CASE(copies_exactly_the_bytes_at_every_skew_and_size) {
  const std::vector<std::size_t> sizes{0,
                                       1,
                                       63,
                                       2047,
                                       2048,
                                       2049,
                                       4095,
                                       4096,
                                       4097,
                                       6150,
                                       8192,
                                       65543,
                                       (std::size_t{2} << 20) - 1,
                                       std::size_t{2} << 20};
  constexpr std::size_t guard = 128;
  std::vector<std::uint8_t> src((std::size_t{2} << 20) + 4096);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 131 + 7);
  // Page-aligned source; the destination at skews 0..127 (the slow band is 1..63).
  std::uint8_t* from = src.data() + (4096 - reinterpret_cast<std::uintptr_t>(src.data()) % 4096);
  std::vector<std::uint8_t> out((std::size_t{2} << 20) + 3 * 4096);
  for (const std::size_t bytes : sizes)
    for (std::size_t skew = 0; skew < 128; skew += (bytes > 65536 ? 17 : 1)) {
      std::uint8_t* page =
          out.data() + (4096 - reinterpret_cast<std::uintptr_t>(out.data()) % 4096) + 4096;
      std::uint8_t* to = page + skew;
      std::fill(to - guard, to + bytes + guard, std::uint8_t{0xEE});
      crown::detail::copy_bytes(to, from, bytes);
      bool same = true;
      for (std::size_t i = 0; i < bytes && same; ++i) same = to[i] == from[i];
      BOOST_TEST(same, bytes << " bytes at skew " << skew << " differ from the source");
      bool untouched = true;
      for (std::size_t i = 1; i <= guard; ++i)
        untouched =
            untouched && to[-static_cast<std::ptrdiff_t>(i)] == 0xEE && to[bytes + i - 1] == 0xEE;
      BOOST_TEST(untouched, bytes << " bytes at skew " << skew << " wrote outside the copy");
    }
}

BOOST_AUTO_TEST_CASE(streamed_copies_are_exact_at_every_offset_in_a_line) {
  // Sizes around its fallback (below the head + 256 bytes), odd tails, and a slot share.
  constexpr std::size_t guard = 64;
  std::vector<std::uint8_t> src(140000), out(140000 + 4 * guard);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 151 + 3);
  std::uint8_t* const line = out.data() + (64 - reinterpret_cast<std::uintptr_t>(out.data()) % 64);
  for (const std::size_t bytes :
       {std::size_t{0}, std::size_t{1}, std::size_t{255}, std::size_t{256}, std::size_t{300},
        std::size_t{319}, std::size_t{320}, std::size_t{600}, std::size_t{2048}, std::size_t{2052},
        std::size_t{131072}, std::size_t{131075}})
    for (std::size_t offset = 0; offset < 64; ++offset) {
      std::uint8_t* to = line + guard + offset;
      std::fill(to - guard, to + bytes + guard, std::uint8_t{0xEE});
      crown::detail::stream_bytes(to, src.data() + offset % 13, bytes);
      crown::detail::streamed_stores_visible();
      bool same = true, untouched = true;
      for (std::size_t i = 0; i < bytes && same; ++i) same = to[i] == src[i + offset % 13];
      for (std::size_t i = 1; i <= guard; ++i)
        untouched =
            untouched && to[-static_cast<std::ptrdiff_t>(i)] == 0xEE && to[bytes + i - 1] == 0xEE;
      BOOST_TEST(same, bytes << " bytes streamed at offset " << offset << " differ");
      BOOST_TEST(untouched, bytes << " bytes streamed at offset " << offset << " wrote outside");
    }
}
