// all_gather and reduce_scatter against serial references, on ordinary memory and on
// coarrays, on the world and on a mesh whose image order differs from world order.
#include "transport/test_hooks.hpp" // crown::detail knobs, not installed
#include <boost/test/unit_test.hpp>
#include <crown/crown.hpp>
#include <cstring>
#include <harness/crown_test.hpp>
#include <numeric>

using namespace crown_test; // w(), me(), n(), what_of(), reversed_world(), order_sensitive()

namespace {

std::int64_t count_term(int image, std::size_t i) {
  return static_cast<std::int64_t>(i * 7919 + static_cast<std::size_t>(image) * 104729) % 1000003;
}

const std::size_t counts[] = {0, 1, 7, 1001, 10007};

} // namespace

BOOST_AUTO_TEST_CASE(all_gather_of_ordinary_memory_matches_the_serial_reference) {
  for (const crown::mesh& m : {w(), reversed_world()}) {
    const int img = m.rank(), imgs = m.size();
    for (std::size_t c : counts) {
      std::vector<double> mine(c);
      for (std::size_t i = 0; i < c; ++i) mine[i] = order_sensitive(img, i);
      std::vector<double> all(c * static_cast<std::size_t>(imgs), -1.0);
      crown::all_gather(m, std::span<const double>(mine), std::span(all));
      bool ok = true;
      for (int j = 0; j < imgs; ++j)
        for (std::size_t i = 0; i < c; ++i)
          ok = ok && all[static_cast<std::size_t>(j) * c + i] == order_sensitive(j, i);
      BOOST_TEST(ok, m << ", count " << c);
      BOOST_TEST(same_everywhere(all.data(), all.size() * sizeof(double)));
    }
    struct pair {
      int a;
      char b;
    };
    const pair p{img * 10, static_cast<char>('a' + img)};
    std::vector<pair> pairs(static_cast<std::size_t>(imgs));
    crown::all_gather(m, std::span<const pair>(&p, 1), std::span(pairs));
    for (int j = 0; j < imgs; ++j) {
      BOOST_TEST(pairs[static_cast<std::size_t>(j)].a == j * 10);
      BOOST_TEST(pairs[static_cast<std::size_t>(j)].b == static_cast<char>('a' + j));
    }
  }
}

BOOST_AUTO_TEST_CASE(all_gather_of_a_coarray_sees_puts_made_before_it) {
  for (const crown::mesh& m : {w(), reversed_world()}) {
    const int img = m.rank(), imgs = m.size();
    crown::coarray<std::int64_t, 2> a(m, {3, 5}); // 15 elements per image
    std::vector<std::int64_t> mine(15);
    for (std::size_t i = 0; i < 15; ++i) mine[i] = count_term(img, i);
    // Each image writes its values into its right neighbour's block; all_gather
    // synchronises first, so it gathers what the puts left there.
    a.on((img + 1) % imgs).put(mine);
    std::vector<std::int64_t> all(15 * static_cast<std::size_t>(imgs));
    crown::all_gather(a, std::span(all));
    bool ok = true;
    for (int j = 0; j < imgs; ++j) // image j's block holds its left neighbour's values
      for (std::size_t i = 0; i < 15; ++i)
        ok =
            ok && all[static_cast<std::size_t>(j) * 15 + i] == count_term((j + imgs - 1) % imgs, i);
    BOOST_TEST(ok, m);
  }
}

BOOST_AUTO_TEST_CASE(reduce_scatter_folds_in_image_order_everywhere) {
  for (const crown::mesh& m : {w(), reversed_world()}) {
    const int img = m.rank(), imgs = m.size();
    for (std::size_t c : counts) {
      const std::size_t total = c * static_cast<std::size_t>(imgs);
      std::vector<double> in(total);
      for (std::size_t i = 0; i < total; ++i) in[i] = order_sensitive(img, i);
      std::vector<double> out(c, -1.0);
      crown::reduce_scatter(m, std::span<const double>(in), std::span(out));
      // Coarray path: the same values in the heap; the result must be bitwise the same.
      crown::coarray<double> a(m, total);
      std::memcpy(a.data(), in.data(), total * sizeof(double));
      std::vector<double> from_heap(c, -2.0);
      crown::reduce_scatter(a, std::span(from_heap));
      bool ok = true;
      for (std::size_t k = 0; k < c; ++k) {
        const std::size_t at = static_cast<std::size_t>(img) * c + k;
        double expected = order_sensitive(0, at);
        for (int j = 1; j < imgs; ++j) expected = expected + order_sensitive(j, at);
        ok = ok && out[k] == expected && from_heap[k] == expected;
      }
      BOOST_TEST(ok, m << ", count " << c);
    }
  }
}

BOOST_AUTO_TEST_CASE(reduce_scatter_with_integers_and_a_non_commutative_operation) {
  const crown::mesh m = reversed_world();
  const int img = m.rank(), imgs = m.size();
  const std::size_t c = 13, total = c * static_cast<std::size_t>(imgs);
  auto op = [](std::int64_t a, std::int64_t b) { return (a * 3 + b) % 1000000007; };
  std::vector<std::int64_t> in(total);
  for (std::size_t i = 0; i < total; ++i) in[i] = count_term(img, i);
  std::vector<std::int64_t> sum(c), folded(c);
  crown::reduce_scatter(m, std::span<const std::int64_t>(in), std::span(sum));
  crown::reduce_scatter(m, std::span<const std::int64_t>(in), std::span(folded), op);
  crown::coarray<std::int64_t> a(m, total);
  std::copy(in.begin(), in.end(), a.data());
  std::vector<std::int64_t> folded_heap(c);
  crown::reduce_scatter(a, std::span(folded_heap), op);
  bool ok = true;
  for (std::size_t k = 0; k < c; ++k) {
    const std::size_t at = static_cast<std::size_t>(img) * c + k;
    std::int64_t s = 0, f = count_term(0, at);
    for (int j = 0; j < imgs; ++j) s += count_term(j, at);
    for (int j = 1; j < imgs; ++j) f = op(f, count_term(j, at));
    ok = ok && sum[k] == s && folded[k] == f && folded_heap[k] == f;
  }
  BOOST_TEST(ok);
}

BOOST_AUTO_TEST_CASE(pieces_above_the_chunk_size_reassemble_exactly) {
  // MPI counts are int: blocks above one piece go in several calls. Lowered here so
  // that a few KiB exercise it.
  const std::size_t before = crown::detail::transfer_chunk_bytes();
  crown::detail::set_transfer_chunk_bytes(1000);
  const std::size_t c = 1001; // 8008 bytes per image: 9 pieces, the last short
  std::vector<double> mine(c), all(c * static_cast<std::size_t>(n()));
  for (std::size_t i = 0; i < c; ++i) mine[i] = order_sensitive(me(), i);
  crown::all_gather(w(), std::span<const double>(mine), std::span(all));
  std::vector<double> in(c * static_cast<std::size_t>(n())), out(c);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = order_sensitive(me(), i);
  crown::reduce_scatter(w(), std::span<const double>(in), std::span(out));
  crown::detail::set_transfer_chunk_bytes(before);
  bool ok = true;
  for (int j = 0; j < n(); ++j)
    for (std::size_t i = 0; i < c; ++i)
      ok = ok && all[static_cast<std::size_t>(j) * c + i] == order_sensitive(j, i);
  for (std::size_t k = 0; k < c; ++k) {
    const std::size_t at = static_cast<std::size_t>(me()) * c + k;
    double expected = order_sensitive(0, at);
    for (int j = 1; j < n(); ++j) expected = expected + order_sensitive(j, at);
    ok = ok && out[k] == expected;
  }
  BOOST_TEST(ok);
}

BOOST_AUTO_TEST_CASE(bad_sizes_and_overlaps_are_errors_on_every_image) {
  // The same bad input on every image: every image throws before communicating.
  const std::string count = std::to_string(n());
  std::vector<int> mine(3), all(3 * static_cast<std::size_t>(n()) + 1);
  auto m = what_of<crown::argument_error>(
      [&] { crown::all_gather(w(), std::span<const int>(mine), std::span(all)); });
  BOOST_TEST(m.find("all_gather on " + w().to_string() + ": the result holds " +
                    std::to_string(all.size()) + " elements but needs " + std::to_string(3 * n()) +
                    " (" + count + " images x 3)") != std::string::npos,
             m);
  BOOST_TEST(m.find("rank " + std::to_string(crown::this_runtime().rank())) != std::string::npos,
             m);
  std::vector<double> in(5 * static_cast<std::size_t>(n()) - 1), out(5);
  m = what_of<crown::argument_error>(
      [&] { crown::reduce_scatter(w(), std::span<const double>(in), std::span(out)); });
  BOOST_TEST(m.find("reduce_scatter on " + w().to_string() + ": the input holds " +
                    std::to_string(in.size()) + " elements but needs " + std::to_string(5 * n())) !=
                 std::string::npos,
             m);
  // The input inside the result.
  std::vector<int> buffer(4 * static_cast<std::size_t>(n()));
  m = what_of<crown::argument_error>(
      [&] { crown::all_gather(w(), std::span<const int>(buffer.data(), 4), std::span(buffer)); });
  BOOST_TEST(m.find("overlap") != std::string::npos, m);
  crown::coarray<float> a(w(), 6 * static_cast<std::size_t>(n()) + 1);
  std::vector<float> piece(6);
  m = what_of<crown::argument_error>([&] { crown::reduce_scatter(a, std::span(piece)); });
  BOOST_TEST(m.find("reduce_scatter of a coarray on " + w().to_string() +
                    ": the coarray's block holds " + std::to_string(a.size())) != std::string::npos,
             m);
  std::vector<float> gathered(a.size()); // one image's worth, not n
  if (n() > 1) {
    m = what_of<crown::argument_error>([&] { crown::all_gather(a, std::span(gathered)); });
    BOOST_TEST(m.find("needs " + std::to_string(a.size() * static_cast<std::size_t>(n()))) !=
                   std::string::npos,
               m);
  }
  // and the collectives still work afterwards
  std::vector<int> one{me()}, every(static_cast<std::size_t>(n()));
  crown::all_gather(w(), std::span<const int>(one), std::span(every));
  for (int j = 0; j < n(); ++j) BOOST_TEST(every[static_cast<std::size_t>(j)] == j);
}

BOOST_AUTO_TEST_CASE(counts_that_differ_between_images_are_named_under_crown_check) {
  if (!crown::detail::check_collectives() || n() < 2) return;
  // CROWN_CHECK=1: image 0 contributes 3 elements, the others 4; every image learns it.
  const std::size_t c = me() == 0 ? 3 : 4;
  std::vector<int> mine(c), all(c * static_cast<std::size_t>(n()));
  const auto m = what_of<crown::argument_error>(
      [&] { crown::all_gather(w(), std::span<const int>(mine), std::span(all)); });
  BOOST_TEST(m.find("count is " + std::to_string(c) + " here but " + (me() == 0 ? "4" : "3") +
                    " on rank ") != std::string::npos,
             m);
  std::vector<double> in(4 * static_cast<std::size_t>(n())), out(4);
  std::vector<double> wrong_in(me() == 0 ? in.size() + 1 : in.size());
  const auto r = what_of<crown::argument_error>(
      [&] { crown::reduce_scatter(w(), std::span<const double>(wrong_in), std::span(out)); });
  BOOST_TEST(r.find("size of the other buffer is") != std::string::npos, r);
}
