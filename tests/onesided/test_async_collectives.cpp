// co_sum_async, co_min_async, co_max_async, co_broadcast_async: serial references,
// bitwise agreement, several in flight beside blocking collectives, bad input.
#include <boost/test/unit_test.hpp>
#include <crown/crown.hpp>
#include <harness/crown_test.hpp>

using namespace crown_test; // w(), me(), n(), what_of(), same_everywhere(), reversed_world()

namespace {

/// ((x0 + x1) + x2) + ... in image order, as the library promises.
double image_order_sum(std::size_t i, int images) {
  double s = order_sensitive(0, i);
  for (int j = 1; j < images; ++j) s = s + order_sensitive(j, i);
  return s;
}

} // namespace

BOOST_AUTO_TEST_CASE(sums_match_the_image_order_reference_bitwise) {
  for (const crown::mesh& m : {w(), reversed_world()}) {
    for (std::size_t c : {std::size_t{1}, std::size_t{7}, std::size_t{1001}, std::size_t{10007}}) {
      std::vector<double> v(c);
      for (std::size_t i = 0; i < c; ++i) v[i] = order_sensitive(m.rank(), i);
      crown::completion done = crown::co_sum_async(m, std::span(v));
      done.wait();
      bool ok = true;
      for (std::size_t i = 0; i < c; ++i) ok = ok && v[i] == image_order_sum(i, m.size());
      BOOST_TEST(ok, m << ", count " << c);
      BOOST_TEST(same_everywhere(v.data(), c * sizeof(double)));
    }
  }
}

BOOST_AUTO_TEST_CASE(integer_and_extremum_reductions_are_exact) {
  const std::size_t c = 333;
  std::vector<std::int64_t> s(c), lo(c), hi(c);
  std::vector<float> flo(c), fhi(c);
  for (std::size_t i = 0; i < c; ++i) {
    s[i] = lo[i] = hi[i] = static_cast<std::int64_t>((i * 7919 + me() * 104729) % 1000003);
    flo[i] = fhi[i] = static_cast<float>(s[i]) * 0.5f;
  }
  crown::completion all = crown::co_sum_async(w(), std::span(s));
  all += crown::co_min_async(w(), std::span(lo));
  all += crown::co_max_async(w(), std::span(hi));
  all += crown::co_min_async(w(), std::span(flo));
  all += crown::co_max_async(w(), std::span(fhi));
  all.wait();
  bool ok = true;
  for (std::size_t i = 0; i < c; ++i) {
    std::int64_t sum = 0, mn = INT64_MAX, mx = INT64_MIN;
    for (int r = 0; r < n(); ++r) {
      const auto v = static_cast<std::int64_t>((i * 7919 + r * 104729) % 1000003);
      sum += v;
      mn = std::min(mn, v);
      mx = std::max(mx, v);
    }
    ok = ok && s[i] == sum && lo[i] == mn && hi[i] == mx &&
         flo[i] == static_cast<float>(mn) * 0.5f && fhi[i] == static_cast<float>(mx) * 0.5f;
  }
  BOOST_TEST(ok);
}

BOOST_AUTO_TEST_CASE(several_in_flight_beside_blocking_collectives) {
  // Started in one order, finished in another, with blocking collectives, an
  // allocation and another mesh's collectives in between; image 0 tests its first
  // completion eagerly while the others only reach it through the next collective.
  const crown::mesh r = reversed_world();
  std::vector<double> a(1001), b(17);
  std::vector<int> c(5, 0);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = order_sensitive(me(), i);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = order_sensitive(r.rank(), i);
  if (me() == n() - 1) c = {1, 2, 3, 4, 5};
  crown::completion first = crown::co_sum_async(w(), std::span(a));
  crown::completion second = crown::co_sum_async(r, std::span(b));
  if (me() == 0)
    while (!first.test()) {}
  double x = 1.0;
  crown::co_sum(w(), x); // blocking, on the same mesh as `first`
  crown::completion third = crown::co_broadcast_async(w(), std::span(c), n() - 1);
  crown::coarray<int> block(w(), 4);
  third.wait();
  second.wait();
  first.wait();
  bool ok = x == static_cast<double>(n());
  for (std::size_t i = 0; i < a.size(); ++i) ok = ok && a[i] == image_order_sum(i, n());
  for (std::size_t i = 0; i < b.size(); ++i) ok = ok && b[i] == image_order_sum(i, n());
  for (int i = 0; i < 5; ++i) ok = ok && c[static_cast<std::size_t>(i)] == i + 1;
  BOOST_TEST(ok);
}

BOOST_AUTO_TEST_CASE(a_completion_destroyed_unwaited_still_delivers) {
  std::vector<double> v(100);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = order_sensitive(me(), i);
  { crown::completion forgotten = crown::co_sum_async(w(), std::span(v)); }
  bool ok = true;
  for (std::size_t i = 0; i < v.size(); ++i) ok = ok && v[i] == image_order_sum(i, n());
  BOOST_TEST(ok);
}

BOOST_AUTO_TEST_CASE(bad_input_is_an_error_on_every_image) {
  std::vector<int> v(3);
  auto m = what_of<crown::argument_error>(
      [&] { crown::completion c = crown::co_broadcast_async(w(), std::span(v), n()); });
  BOOST_TEST(m.find("co_broadcast_async on " + w().to_string() + ": image " + std::to_string(n()) +
                    " is out of range") != std::string::npos,
             m);
  std::vector<std::complex<double>> z(2);
  m = what_of<crown::argument_error>(
      [&] { crown::completion c = crown::co_min_async(w(), std::span(z)); });
  BOOST_TEST(m.find("complex numbers are unordered") != std::string::npos, m);
  if (crown::detail::check_collectives() && n() > 1) {
    std::vector<double> d(me() == 0 ? 3 : 4);
    m = what_of<crown::argument_error>(
        [&] { crown::completion c = crown::co_sum_async(w(), std::span(d)); });
    BOOST_TEST(m.find("count is " + std::to_string(d.size()) + " here but") != std::string::npos,
               m);
    // An image out of range on the last image only: an error on every image, not the
    // last one throwing while the others wait in the broadcast.
    const int source = me() == n() - 1 ? n() : 0;
    m = what_of<crown::argument_error>(
        [&] { crown::completion c = crown::co_broadcast_async(w(), std::span(v), source); });
    BOOST_TEST(m.find("source_image is " + std::to_string(source) + " here but " +
                      std::to_string(me() == n() - 1 ? 0 : n()) + " on rank") != std::string::npos,
               m);
  }
}
