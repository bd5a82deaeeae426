// co_* collectives against serial references; bitwise agreement between images.
#include "transport/test_hooks.hpp" // crown::detail knobs, not installed
#include <bit>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <crown/crown.hpp>
#include <cstring>
#include <harness/crown_test.hpp>

using namespace crown_test; // w(), me(), n(), left(), right(), what_of(), same_everywhere()

BOOST_AUTO_TEST_CASE(sum_min_max_match_serial_references) {
  std::vector<std::int64_t> a(1000), lo(1000), hi(1000);
  for (int i = 0; i < 1000; ++i) a[i] = lo[i] = hi[i] = (me() + 1) * (i % 7) - me();
  crown::co_sum(w(), std::span(a));
  crown::co_min(w(), std::span(lo));
  crown::co_max(w(), std::span(hi));
  for (int i = 0; i < 1000; ++i) {
    std::int64_t sum = 0, mn = INT64_MAX, mx = INT64_MIN;
    for (int r = 0; r < n(); ++r) {
      const std::int64_t v = (r + 1) * (i % 7) - r;
      sum += v;
      mn = std::min(mn, v);
      mx = std::max(mx, v);
    }
    BOOST_TEST(a[i] == sum);
    BOOST_TEST(lo[i] == mn);
    BOOST_TEST(hi[i] == mx);
  }
  double x = 0.1 * (me() + 1);
  crown::co_sum(w(), x);
  double serial = 0;
  for (int r = 0; r < n(); ++r) serial += 0.1 * (r + 1);
  BOOST_TEST(x == serial, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(same_everywhere(&x, sizeof x));
}

BOOST_AUTO_TEST_CASE(nans_and_infinities_in_sums_come_back_as_x86_gives_them) {
#if !defined(__x86_64__)
  BOOST_TEST_MESSAGE("not an x86-64 host: its NaNs follow other rules");
  return;
#endif
  // What a device co_sum must match bit for bit (its fold builds these: lib/gpu/x86_sum.hpp),
  // in the cases any order of the adds gives alike (the host paths differ in order).
  const std::uint64_t quiet = 0x7ff8'0000'0000'0000u, sign = std::uint64_t{1} << 63;
  std::vector<double> v(4, 1.0 + me());
  if (me() == 0) v[0] = std::bit_cast<double>(quiet | 0x11);              // a NaN's payload
  if (me() == n() - 1) v[1] = std::bit_cast<double>(sign | quiet | 0x22); // and its sign
  if (me() < 2) v[2] = me() == 0 ? INFINITY : -INFINITY;                  // invalid
  if (me() == 0) v[3] = std::bit_cast<double>(0x7ff0'0000'0000'0033u);    // signalling
  crown::co_sum(w(), std::span(v));
  const auto bits = [&](int k) {
    return std::bit_cast<std::uint64_t>(v[static_cast<std::size_t>(k)]);
  };
  BOOST_TEST(bits(0) == (quiet | 0x11));
  BOOST_TEST(bits(1) == (sign | quiet | 0x22));
  if (n() > 1) {
    BOOST_TEST(bits(2) == 0xfff8'0000'0000'0000u); // x86's default NaN: negative
    BOOST_TEST(bits(3) == (quiet | 0x33));         // quieted
  } else {                                         // one image: nothing is added
    BOOST_TEST(v[2] == INFINITY);
    BOOST_TEST(bits(3) == 0x7ff0'0000'0000'0033u);
  }
}

BOOST_AUTO_TEST_CASE(floating_sums_are_bitwise_identical_everywhere) {
  std::vector<double> v(4096);
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = 1.0 / (1.0 + static_cast<double>(i) * (me() + 3));
  crown::co_sum(w(), std::span(v));
  BOOST_TEST(same_everywhere(v.data(), v.size() * sizeof(double)));
}

BOOST_AUTO_TEST_CASE(result_image_only_receives) {
  for (int root = 0; root < n(); ++root) {
    int v = me() + 1;
    crown::co_sum(w(), v, root);
    BOOST_TEST(v == (me() == root ? n() * (n() + 1) / 2 : me() + 1));
  }
}

BOOST_AUTO_TEST_CASE(broadcast_from_every_source) {
  for (int src = 0; src < n(); ++src) {
    std::array<float, 3> v{float(me()), float(me() * 2), -1.0f};
    crown::co_broadcast(w(), std::span<float>(v), src);
    BOOST_TEST(v[0] == float(src));
    BOOST_TEST(v[1] == float(src * 2));
  }
  struct pair {
    int a;
    double b;
  } p{me(), me() * 0.5};
  crown::co_broadcast(w(), p, n() - 1);
  BOOST_TEST(p.a == n() - 1);
  BOOST_TEST(p.b == (n() - 1) * 0.5);
}

BOOST_AUTO_TEST_CASE(user_reductions_apply_in_image_order) {
  // Not commutative: appending digits. Image order gives 0123... on every image.
  std::int64_t digits = me();
  crown::co_reduce(w(), digits, [](std::int64_t a, std::int64_t b) { return a * 10 + b; });
  std::int64_t expected = 0;
  for (int r = 0; r < n(); ++r) expected = expected * 10 + r;
  BOOST_TEST(digits == expected);
  // element-wise on arrays, into one image
  std::vector<int> v{me(), 2 * me()};
  crown::co_reduce(
      w(), std::span(v), [](int a, int b) { return a - b; }, 0);
  if (me() == 0) {
    int first = 0, second = 0;
    for (int r = 1; r < n(); ++r) {
      first -= r;
      second -= 2 * r;
    }
    BOOST_TEST(v[0] == first);
    BOOST_TEST(v[1] == second);
  } else {
    BOOST_TEST(v[0] == me()); // untouched elsewhere
  }
}

BOOST_AUTO_TEST_CASE(coarray_data_reduces_in_place) {
  crown::coarray<double> a(w(), 100);
  for (std::size_t i = 0; i < 100; ++i) a(i) = static_cast<double>(i) * (me() + 1);
  crown::co_sum(w(), a.flat());
  for (std::size_t i = 0; i < 100; ++i)
    BOOST_TEST(a(i) == static_cast<double>(i) * n() * (n() + 1) / 2);
}

BOOST_AUTO_TEST_CASE(large_heap_reductions_take_the_shared_path_and_agree) {
  // Above 16 KiB, heap data shared by every member is reduced in place through shared
  // memory; elsewhere (CROWN_SHM=0, pretend hosts) through MPI. Same answers either way.
  const std::size_t count = 10007; // not a multiple of the rank count
  crown::coarray<double> sum(w(), count);
  crown::coarray<std::int64_t> lo(w(), count), hi(w(), count);
  for (std::size_t i = 0; i < count; ++i) {
    sum(i) = 1.0 / (1.0 + static_cast<double>(i + 1) * (me() + 1));
    lo(i) = hi(i) =
        static_cast<std::int64_t>((i * 7919 + static_cast<std::size_t>(me()) * 104729) % 1000003);
  }
  crown::co_sum(w(), sum.flat());
  crown::co_min(w(), lo.flat());
  crown::co_max(w(), hi.flat());
  bool ok = true;
  for (std::size_t i = 0; i < count; ++i) {
    double s = 0; // image order, as the library promises
    std::int64_t mn = INT64_MAX, mx = INT64_MIN;
    for (int r = 0; r < n(); ++r) {
      s += 1.0 / (1.0 + static_cast<double>(i + 1) * (r + 1));
      const auto v =
          static_cast<std::int64_t>((i * 7919 + static_cast<std::size_t>(r) * 104729) % 1000003);
      mn = std::min(mn, v);
      mx = std::max(mx, v);
    }
    ok = ok && std::abs(sum(i) - s) <= 1e-12 * std::abs(s) && lo(i) == mn && hi(i) == mx;
  }
  BOOST_TEST(ok);
  BOOST_TEST(same_everywhere(sum.data(), count * sizeof(double)));
  crown::sync_all();
}

/// Puts the host paths' test switches back as a test ends, even by an exception.
struct host_paths_restored {
  ~host_paths_restored() {
    crown::detail::set_host_single_copy(true);
    crown::detail::set_host_streaming(std::nullopt);
  }
};

BOOST_AUTO_TEST_CASE(every_size_and_place_reduces_to_the_serial_result) {
  // Sizes around the host paths' edges (56 B: values in the flag line; 2 KiB: reduced
  // whole by every image; 64 KiB: kernel copies above; 256 KiB: one buffer chunk), in
  // ordinary memory, in the heap at one offset, in the heap at different offsets on
  // different images, and in ordinary memory on even images but the heap on odd ones;
  // to all images and to one; with and without kernel copies.
  auto value = [](std::size_t i, int r) { return 1.0 / (1.0 + double(i % 1000) * (r + 2)); };
  crown::coarray<double> heap(w(), 100003);
  crown::coarray<double> skew(w(), 100003 + 8);
  crown::coarray<double> odd_in_heap(w(), 100003);
  const host_paths_restored at_exit;
  // Kernel copies; then the slots, written with ordinary and with streaming stores.
  for (const int way : {0, 1, 2}) {
    crown::detail::set_host_single_copy(way == 0);
    crown::detail::set_host_streaming(way == 0 ? std::nullopt : std::optional(way == 2));
    for (std::size_t count :
         {std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{255}, std::size_t{256},
          std::size_t{513}, std::size_t{8193}, std::size_t{32769}, std::size_t{100003}}) {
      for (int root = -1; root < std::min(n(), 2); ++root) {
        std::vector<double> plain(count), even_plain(count);
        const std::size_t shift = static_cast<std::size_t>(me() % 2); // offsets differ
        std::span<double> in_heap(heap.data(), count), skewed(skew.data() + shift, count);
        const std::span<double> mixed =
            me() % 2 ? std::span(odd_in_heap.data(), count) : std::span(even_plain);
        for (std::size_t i = 0; i < count; ++i)
          plain[i] = in_heap[i] = skewed[i] = mixed[i] = value(i, me());
        crown::co_sum(w(), std::span(plain), root);
        crown::co_sum(w(), in_heap, root);
        crown::co_sum(w(), skewed, root);
        crown::co_sum(w(), mixed, root);
        bool ok = true;
        for (std::size_t i = 0; i < count; ++i) {
          double expected = value(i, me());
          if (root < 0 || root == me()) {
            expected = 0.0;
            for (int r = 0; r < n(); ++r) expected += value(i, r);
          }
          const double tol = 1e-12 * std::abs(expected);
          ok = ok && std::abs(plain[i] - expected) <= tol &&
               std::abs(in_heap[i] - expected) <= tol && std::abs(skewed[i] - expected) <= tol &&
               std::abs(mixed[i] - expected) <= tol;
        }
        BOOST_TEST(ok, "count " << count << ", result_image " << root << ", way " << way);
        if (root < 0) {
          BOOST_TEST(same_everywhere(plain.data(), count * sizeof(double)));
          BOOST_TEST(std::memcmp(plain.data(), in_heap.data(), count * sizeof(double)) == 0);
        }
      }
    }
  }
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(four_byte_elements_through_streamed_slots) {
  // Shares of 4-byte elements start where streamed copies need a head and a tail.
  const host_paths_restored at_exit;
  crown::detail::set_host_single_copy(false);
  for (const bool stream : {false, true}) {
    crown::detail::set_host_streaming(stream);
    for (const std::size_t count : {std::size_t{16385}, std::size_t{70001}}) {
      std::vector<float> v(count);
      for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<float>(i % 7 + me());
      crown::co_sum(w(), std::span(v));
      bool ok = true;
      for (std::size_t i = 0; i < count; ++i) // small integers: exact in float
        ok = ok && v[i] == static_cast<float>(n() * (i % 7) + n() * (n() - 1) / 2);
      BOOST_TEST(ok, count << " floats, streamed " << stream);
    }
  }
}

BOOST_AUTO_TEST_CASE(first_reductions_on_a_new_mesh_agree_on_their_path) {
  // The first large reduction on a mesh follows the probe for kernel copies; every
  // image must take the same path (a race here once gave silently wrong sums).
  std::vector<int> ranks(w().begin(), w().end());
  std::reverse(ranks.begin(), ranks.end()); // a rank list no earlier test used
  const crown::mesh reversed({{"r", n()}}, ranks);
  for (int round = 0; round < 20; ++round) {
    std::vector<double> v(40000, 1.0 + reversed.rank() + round);
    crown::co_sum(reversed, std::span(v));
    double expected = 0;
    for (int r = 0; r < n(); ++r) expected += 1.0 + r + round;
    BOOST_TEST((v.front() == expected && v.back() == expected), "round " << round);
  }
}

BOOST_AUTO_TEST_CASE(bad_arguments) {
  int v = 1;
  auto m = what_of<crown::argument_error>([&] { crown::co_sum(w(), v, n()); });
  BOOST_TEST(m.find("image " + std::to_string(n()) + " is out of range") != std::string::npos, m);
  m = what_of<crown::argument_error>([&] { crown::co_broadcast(w(), v, -1); });
  BOOST_TEST(m.find("image -1 is out of range") != std::string::npos, m);
  if (crown::detail::check_collectives() && n() > 1) {
    // CROWN_CHECK=1: a count that differs on one image is caught on every image
    std::vector<int> data(me() == 0 ? 3 : 4, 1);
    m = what_of<crown::argument_error>([&] { crown::co_sum(w(), std::span(data)); });
    BOOST_TEST(m.find("count is " + std::to_string(data.size()) + " here but") != std::string::npos,
               m);
    // An image out of range on the last image only is an error on every image (it was
    // one image throwing while the others waited in the argument check).
    const int last = n() - 1, bad = me() == last ? n() : 0, good_elsewhere = me() == last ? 0 : n();
    const std::string differs =
        " is " + std::to_string(bad) + " here but " + std::to_string(good_elsewhere) + " on rank";
    m = what_of<crown::argument_error>([&] { crown::co_sum(w(), v, bad); });
    BOOST_TEST(m.find("result_image" + differs) != std::string::npos, m);
    m = what_of<crown::argument_error>([&] { crown::co_broadcast(w(), v, bad); });
    BOOST_TEST(m.find("source_image" + differs) != std::string::npos, m);
    m = what_of<crown::argument_error>([&] {
      crown::co_reduce(
          w(), v, [](int a, int b) { return a * b; }, bad);
    });
    BOOST_TEST(m.find("result_image" + differs) != std::string::npos, m);
    // element types that differ are named, not given as hashes
    m = what_of<crown::argument_error>([&] {
      if (me() == 0) {
        double x = 1;
        crown::co_sum(w(), x);
      } else {
        float x = 1;
        crown::co_sum(w(), x);
      }
    });
    BOOST_TEST(m.find(me() == 0
                          ? "element type is double here but float on rank 1"
                          : "element type is float here but double on rank 0") != std::string::npos,
               m);
  }
}

BOOST_AUTO_TEST_CASE(a_full_heap_counts_the_scratch_of_reductions) {
  // Reductions among ranks of one host keep 1 MiB of heap per distinct mesh; a later
  // allocation that fails for want of it says so (it once gave no hint).
  if (!crown::detail::world_shares_memory()) return; // no host scratch: MPI reduces
  const crown::mesh reversed = w().reshape({{"r", n()}});
  int x = 1;
  crown::co_sum(w(), x);
  crown::co_sum(reversed, x);
  const std::size_t heap = crown::this_runtime().config().heap_size;
  const auto m = what_of<crown::resource_error>([&] { crown::coarray<char> a(w(), heap - 4096); });
  BOOST_TEST(m.find("symmetric heap full") != std::string::npos, m);
  BOOST_TEST(m.find("bytes are the co_* scratch of") != std::string::npos, m);
}

BOOST_AUTO_TEST_CASE(back_to_back_reductions_are_never_taken_for_a_count_mismatch) {
  // An image that is one reduction ahead has already written the next flag word when a
  // slower image looks at it; that once read as "the images passed different counts"
  // (8 bytes here but 8 bytes), within 40,000-60,000 scalar sums at 2 ranks. Scalars
  // first, then tiny, one-barrier and chunked sizes in turn, so each path's word runs
  // ahead of another's.
  const std::size_t counts[] = {1, 1, 100, 1, 40000, 7, 100};
  std::vector<double> v(40000);
  int wrong = 0;
  const int rounds = crown::detail::world_shares_memory() ? 400000 : 2000; // else MPI's path
  for (int i = 0; i < rounds; ++i) {
    const std::size_t count = i >= rounds / 2 && i % 8 == 7 ? counts[(i / 8) % 7] : 1;
    const double mine = (me() + 1) * (i % 5);
    std::fill_n(v.begin(), count, mine);
    crown::co_sum(w(), std::span(v.data(), count));
    const double expected = n() * (n() + 1) / 2 * (i % 5);
    if (v[0] != expected || v[count - 1] != expected) ++wrong;
  }
  BOOST_TEST(wrong == 0);
}

BOOST_AUTO_TEST_CASE(counts_that_differ_fail_on_every_image_without_the_check) {
  // Always on, even without CROWN_CHECK=1: the count travels in the flag words of the
  // reductions among ranks of one host (once, a different count hung every image).
  if (n() < 2 || !crown::detail::world_shares_memory()) return;
  const std::pair<std::size_t, std::size_t> cases[] = {
      {3, 4},            // both in the flag line's tiny exchange
      {3, 100},          // tiny on image 0, one barrier and slots on the others
      {0, 1},            // nothing at all on image 0
      {500, 70000},      // slots on image 0, in place or kernel copies on the others
      {100000, 100001}}; // both large (sizes compared by a 19-bit hash)
  for (const auto& [mine, others] : cases) {
    std::vector<double> v(me() == 0 ? mine : others, 1.0);
    const auto m = what_of<crown::argument_error>([&] { crown::co_sum(w(), std::span(v)); });
    const std::string said =
        crown::detail::check_collectives()
            ? "count is " + std::to_string(v.size()) + " here but" // CROWN_CHECK=1
            : "the images passed different counts";
    BOOST_TEST(m.find(said) != std::string::npos, mine << " vs " << others << ": " << m);
    // and the next reduction on the mesh works
    int x = 1;
    crown::co_sum(w(), x);
    BOOST_TEST(x == n());
  }
}
