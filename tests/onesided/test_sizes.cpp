// Sizes near 2^63 and 2^64: coarray extents, sections, global_ptr allocations and the C
// API. Every impossible size is an error on every image and nothing is written outside
// a block: a canary coarray on every image is checked after each case. (A coarray of
// 2^61 doubles once "allocated" 0 bytes, and a put to its legal index 8 overwrote the
// next coarray on the neighbour.) The harness gives MPI; crown_init starts the runtime,
// which the C++ API then uses too.
#include <boost/test/unit_test.hpp>
#include <crown/crown.h>
#include <crown/crown.hpp>
#include <cstdint>
#include <harness/crown_test.hpp>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

using namespace crown_test;

namespace {

constexpr std::size_t max_size = std::numeric_limits<std::size_t>::max();
constexpr std::size_t p61 = std::size_t{1} << 61, p62 = std::size_t{1} << 62,
                      p63 = std::size_t{1} << 63;

struct c_runtime {
  c_runtime() {
    if (crown_init(nullptr, nullptr) != CROWN_OK) throw std::runtime_error(crown_last_error());
  }
  ~c_runtime() { crown_finalize(); }
};

/// A block on every image that no case may touch: 1000 + image, everywhere.
struct canary {
  crown::coarray<std::int64_t> words{w(), 64};
  canary() {
    for (auto& x : words.flat()) x = 1000 + me();
    crown::sync_all();
  }
  /// True when this image's canary is intact (after a sync_all: every image's writes are done).
  bool intact() {
    crown::sync_all();
    for (auto x : words.flat())
      if (x != 1000 + me()) return false;
    return true;
  }
};

} // namespace

BOOST_GLOBAL_FIXTURE(c_runtime);

BOOST_AUTO_TEST_CASE(coarray_extents_that_overflow_are_refused_everywhere) {
  canary c;
  std::string m = what_of<crown::resource_error>([&] {
    crown::coarray<double> huge(w(), p61); // 2^64 bytes: once wrapped to 0
    crown::coarray<std::int64_t> next(w(), 8);
    huge.on(right()).put({8}, 42.0); // a legal index of the huge block
    crown::sync_all();
    BOOST_TEST(next(0) == 0, "a put to coarray<double>(2^61) index 8 wrote into the next block");
  });
  BOOST_TEST(m.find("crown::resource_error: rank " + std::to_string(me())) == 0u, m);
  BOOST_TEST(m.find("coarray<double,1>(2305843009213693952)") != std::string::npos, m);
  BOOST_TEST(m.find("exceeds 2^64") != std::string::npos, m);
  BOOST_TEST(c.intact());

  const std::vector<std::array<std::size_t, 3>> cases{
      {p63, 1, 1},
      {max_size, 1, 1},
      {p61 + 1, 1, 1},
      {std::size_t{1} << 32, 1u << 31, 2},
      {p62, 2, 1},
      {3, p62, 5},
      {1u << 21, 1u << 21, 1u << 21},
      {max_size, max_size, max_size},
      {p63, 2, 0}}; // a zero extent after an overflow
  for (const auto& e : cases) {
    const bool empty = e[0] == 0 || e[1] == 0 || e[2] == 0;
    m = what_of<crown::resource_error>([&] {
      crown::coarray<double, 3> a(w(), e);
      if (!empty) a.on(right()).put({0, 0, 1}, 1.0); // never reached unless the block is real
    });
    if (empty) // 0 elements are a real (empty) block, whatever the other extents
      BOOST_TEST(m == "no exception", e[0] << "x" << e[1] << "x" << e[2] << ": " << m);
    else
      BOOST_TEST(m.find("exceeds 2^64") != std::string::npos,
                 e[0] << "x" << e[1] << "x" << e[2] << ": " << m);
    BOOST_TEST(c.intact(), e[0] << "x" << e[1] << "x" << e[2]);
  }
  // Sizes that fit 64 bits but no heap: refused before any rounding, with the heap's size.
  const std::size_t heap = crown::this_runtime().config().heap_size;
  for (std::size_t n : {heap / 8 + 1, (max_size - 32) / 8, max_size / 8}) {
    m = what_of<crown::resource_error>([&] { crown::coarray<double> a(w(), n); });
    BOOST_TEST(m.find("can never fit") != std::string::npos, n << ": " << m);
    BOOST_TEST(c.intact());
  }
  // ... and the heap still works
  crown::coarray<int> after(w(), 4);
  after.on(right()).put({3}, me());
  crown::sync_all();
  BOOST_TEST(after(3) == left());
}

BOOST_AUTO_TEST_CASE(sections_near_two_to_the_63_stay_in_the_block) {
  canary c;
  const std::array<std::size_t, 3> extents{3, 4, 5};
  crown::coarray<std::int64_t, 3> a(w(), extents);
  for (std::size_t i = 0; i < a.size(); ++i) a.flat()[i] = static_cast<std::int64_t>(i);
  crown::sync_all();
  const std::size_t odd[] = {
      0, 1, 2, 3, 4, 5, 6, p62 - 1, p62, p62 + 1, p63 - 1, p63, p63 + 1, max_size - 1, max_size};
  std::mt19937_64 pick(12345); // the same sections on every image
  auto any = [&] {             // mostly small values, so that some sections are valid
    return pick() % 4 != 0 ? odd[pick() % 7] : odd[7 + pick() % (std::size(odd) - 7)];
  };
  int valid = 0;
  for (int round = 0; round < 400; ++round) {
    crown::section<3> s;
    std::size_t count = 1;
    bool inside = true;
    for (std::size_t d = 0; d < 3; ++d) {
      s[d] = {any(), any(), any()};
      inside = inside && s[d].stride >= 1 && s[d].stride <= p62 && s[d].begin <= s[d].end &&
               s[d].end <= extents[d];
      count = crown::detail::saturating_mul(count, s[d].count());
    }
    std::vector<std::int64_t> got(inside ? count : 7, -1);
    const std::string m =
        what_of<crown::argument_error>([&] { a.on(right()).get(s, std::span(got)); });
    BOOST_TEST((m == "no exception") == inside, crown::detail::section_text(s) << ": " << m);
    if (inside && m == "no exception") {
      ++valid;
      std::size_t k = 0; // the elements a serial walk of the section finds
      for (std::size_t i = s[0].begin; i < s[0].end; i += s[0].stride)
        for (std::size_t j = s[1].begin; j < s[1].end; j += s[1].stride)
          for (std::size_t l = s[2].begin; l < s[2].end; l += s[2].stride)
            BOOST_TEST(got[k++] == static_cast<std::int64_t>((i * 4 + j) * 5 + l));
      a.on(right()).put(s, std::span<const std::int64_t>(got)); // the same values back
    }
  }
  BOOST_TEST(valid > 0);
  BOOST_TEST(c.intact());
  for (std::size_t i = 0; i < a.size(); ++i)
    BOOST_TEST(a.flat()[i] == static_cast<std::int64_t>(i));
}

BOOST_AUTO_TEST_CASE(global_ptr_allocations_that_overflow_are_refused) {
  canary c;
  for (std::size_t n : {p61, p63, max_size, max_size / 8 + 1}) {
    const std::string m = what_of<crown::resource_error>([&] { (void)crown::allocate<double>(n); });
    BOOST_TEST(m.find("crown::allocate") != std::string::npos, n << ": " << m);
  }
  const auto p = crown::allocate<double>(4);
  p.put(1.5);
  BOOST_TEST(p.get() == 1.5);
  crown::deallocate(p);
  BOOST_TEST(c.intact());
}

BOOST_AUTO_TEST_CASE(the_c_api_refuses_huge_extents) {
  canary c;
  const std::vector<std::vector<size_t>> cases{{p61},
                                               {p63},
                                               {max_size},
                                               {1u << 31, std::size_t{1} << 32},
                                               {p62, 4, 1},
                                               {3, p62, 5},
                                               {max_size, max_size, max_size}};
  for (const auto& e : cases) {
    crown_coarray* a = nullptr;
    void* local = nullptr;
    const int rc =
        crown_coarray_allocate(CROWN_DOUBLE, static_cast<int>(e.size()), e.data(), &a, &local);
    BOOST_TEST(rc == CROWN_ERR_RESOURCE, e[0] << " (" << e.size() << " dims): " << rc);
    BOOST_TEST(std::string(crown_last_error()).find("exceeds 2^64") != std::string::npos,
               crown_last_error());
    BOOST_TEST(!a);
    BOOST_TEST(c.intact());
  }
  // A real block with sections far outside it: refused, nothing written.
  const size_t extents[2] = {4, 6};
  crown_coarray* a = nullptr;
  void* local = nullptr;
  BOOST_REQUIRE(crown_coarray_allocate(CROWN_INT64, 2, extents, &a, &local) == CROWN_OK);
  std::vector<std::int64_t> buffer(8, 7);
  const size_t begins[][2] = {{p63, 0}, {0, max_size - 1}, {3, 5}, {0, 0}};
  const size_t ends[][2] = {{p63 + 2, 1}, {1, max_size}, {4, 6}, {4, 6}};
  const size_t strides[][2] = {{1, 1}, {1, 1}, {p62, p62}, {p62 + 1, 1}};
  const int expected[] = {CROWN_ERR_ARGUMENT, CROWN_ERR_ARGUMENT, CROWN_OK, CROWN_ERR_ARGUMENT};
  for (std::size_t k = 0; k < std::size(expected); ++k) {
    const int rc = crown_put_section(a, right(), begins[k], ends[k], strides[k], buffer.data());
    BOOST_TEST(rc == expected[k], "section " << k << ": " << crown_last_error());
  }
  BOOST_TEST(crown_sync_all() == CROWN_OK);
  const auto* mine = static_cast<const std::int64_t*>(local);
  for (std::size_t i = 0; i < 24; ++i) BOOST_TEST(mine[i] == (i == 23 ? 7 : 0), "element " << i);
  BOOST_TEST(crown_co_broadcast(CROWN_DOUBLE, buffer.data(), max_size / 2, 0) ==
             CROWN_ERR_RESOURCE);
  BOOST_TEST(crown_coarray_free(a) == CROWN_OK);
  BOOST_TEST(c.intact());
}
