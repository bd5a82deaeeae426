// Randomised differential test: a seeded sequence of puts, gets (blocks, elements and
// strided sections) and syncs, applied through Crown and to a serial model of every
// image's memory, compared after each epoch.
#include <boost/test/unit_test.hpp>
#include <crown/crown.hpp>
#include <random>

namespace {

constexpr std::size_t rows = 8, cols = 24; // per image

struct op {
  int origin, target;
  crown::section<2> s;
};

crown::section<2> random_section(std::mt19937& rng) {
  crown::section<2> s;
  const std::size_t extents[2] = {rows, cols};
  for (int d = 0; d < 2; ++d) {
    const std::size_t b = rng() % extents[d];
    const std::size_t e = b + 1 + rng() % (extents[d] - b);
    s[d] = {b, e, 1 + rng() % 3};
  }
  return s;
}

template <typename F>
void for_each_index(const crown::section<2>& s, F&& f) {
  for (std::size_t i = s[0].begin; i < s[0].end; i += s[0].stride)
    for (std::size_t j = s[1].begin; j < s[1].end; j += s[1].stride) f(i, j);
}

} // namespace

BOOST_AUTO_TEST_CASE(random_transfers_match_a_serial_model) {
  const auto& w = crown::world();
  const int n = w.size(), me = w.rank();
  crown::coarray<std::int64_t, 2> a(w, {rows, cols});
  std::vector<std::vector<std::int64_t>> model(n, std::vector<std::int64_t>(rows * cols, 0));
  std::mt19937 rng(20261130); // the same sequence on every rank
  std::int64_t stamp = 1;
  int mismatches = 0;
  for (int epoch = 0; epoch < 30; ++epoch) {
    // Write phase: each origin writes only to its own band of rows in any target, so
    // no two images write one element in the same epoch (that would be a race).
    std::vector<op> ops;
    for (int k = 0; k < 4 * n; ++k) {
      op o{static_cast<int>(rng() % n), static_cast<int>(rng() % n), random_section(rng)};
      const std::size_t band = rows / static_cast<std::size_t>(std::min(n, 8));
      const std::size_t lo = std::min<std::size_t>(o.origin, 7) * band;
      o.s[0] = {lo + o.s[0].begin % band, lo + band, o.s[0].stride};
      if (o.origin >= 8) continue;
      ops.push_back(o);
    }
    for (const auto& o : ops) {
      std::vector<std::int64_t> values;
      for_each_index(o.s, [&](std::size_t i, std::size_t j) {
        values.push_back(stamp * 1000 + static_cast<std::int64_t>(i * cols + j));
        model[o.target][i * cols + j] = values.back();
      });
      if (o.origin == me) {
        if (values.size() == 1)
          a.on(o.target).put({o.s[0].begin, o.s[1].begin}, values[0]);
        else
          a.on(o.target).put(o.s, values);
      }
      ++stamp;
    }
    crown::sync_all(w);
    for (std::size_t k = 0; k < rows * cols; ++k) mismatches += a.flat()[k] != model[me][k];
    // Read phase: random sections of random images, checked against the model.
    for (int k = 0; k < 6; ++k) {
      const int target = static_cast<int>(rng() % n);
      const auto s = random_section(rng);
      std::vector<std::int64_t> expected;
      for_each_index(s, [&](std::size_t i, std::size_t j) {
        expected.push_back(model[target][i * cols + j]);
      });
      std::vector<std::int64_t> got(expected.size());
      a.on(target).get(s, got);
      mismatches += got != expected;
    }
    crown::sync_all(w);
  }
  BOOST_TEST(mismatches == 0);
}
