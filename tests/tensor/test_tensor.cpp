// dist_tensor: layouts, redistribution round trips between every pair of placements
// (1-D to 3-D, uneven sizes, two mesh shapes), gather/scatter, global access, halos of
// every width and periodicity with corners, reductions, and the errors bad input gets.
// Every value is checked against the global index it belongs to.
#include <boost/test/unit_test.hpp>
#include <crown/crown.hpp>
#include <functional>
#include <harness/crown_test.hpp>

using namespace crown_test; // w(), me(), n(), what_of()

namespace {

template <std::size_t N>
using index = std::array<std::size_t, N>;

/// The value every test stores at a global index: its row-major position + 1.
template <std::size_t N>
double value_at(const index<N>& i, const index<N>& shape) {
  std::size_t v = 0;
  for (std::size_t d = 0; d < N; ++d) v = v * shape[d] + i[d];
  return static_cast<double>(v + 1);
}

/// Every placement list for a mesh of `dims` dimensions and an N-d tensor.
template <std::size_t N>
std::vector<std::vector<crown::placement>> all_placements(std::size_t dims) {
  std::vector<std::vector<crown::placement>> out{{}};
  for (std::size_t md = 0; md < dims; ++md) {
    std::vector<std::vector<crown::placement>> next;
    for (const auto& prefix : out) {
      for (int d = -1; d < static_cast<int>(N); ++d) {
        auto p = prefix;
        p.push_back(d < 0 ? crown::replicate() : crown::shard(d));
        next.push_back(std::move(p));
      }
    }
    out = std::move(next);
  }
  return out;
}

/// The meshes the tests lay tensors over: the world as one dimension, and as two.
std::vector<crown::mesh> meshes() {
  std::vector<crown::mesh> out{w().reshape({{"x", n()}})};
  const int rows = n() % 2 == 0 ? 2 : 1;
  out.push_back(w().reshape({{"r", rows}, {"c", n() / rows}}));
  return out;
}

template <std::size_t N>
void fill_with_positions(crown::dist_tensor<double, N>& t) {
  t.apply([&](const index<N>& i, double& x) { x = value_at(i, t.shape()); });
}

template <std::size_t N>
std::size_t wrong_elements(const crown::dist_tensor<double, N>& t) {
  std::size_t wrong = 0;
  crown::detail::for_each_index(t.own(), [&](const index<N>& i) {
    std::array<std::ptrdiff_t, N> o;
    for (std::size_t d = 0; d < N; ++d) o[d] = static_cast<std::ptrdiff_t>(i[d] - t.own().lo[d]);
    const double x = std::apply([&](auto... k) { return t.local(k...); }, o);
    if (x != value_at(i, t.shape())) ++wrong;
  });
  return wrong;
}

template <std::size_t N>
void round_trips(const index<N>& shape) {
  for (const crown::mesh& m : meshes()) {
    const auto all = all_placements<N>(m.ndim());
    for (const auto& from : all) {
      crown::dist_tensor<double, N> a(m, shape, from);
      fill_with_positions(a);
      for (const auto& to : all) {
        const auto b = a.redistribute(to);
        BOOST_TEST(wrong_elements(b) == 0u, crown::detail::placements_text(from)
                                                << " -> " << crown::detail::placements_text(to)
                                                << " on " << m);
        const auto back = b.redistribute(from);
        BOOST_TEST(wrong_elements(back) == 0u);
      }
      const auto whole = a.gather(m.size() - 1);
      if (m.rank() == m.size() - 1) {
        BOOST_TEST(whole.size() == a.layout().elements());
        for (std::size_t k = 0; k < whole.size(); ++k) BOOST_TEST(whole[k] == k + 1.0);
      } else {
        BOOST_TEST(whole.empty());
      }
    }
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(blocks_are_ceil_sized_with_a_short_last_one) {
  const crown::tensor_layout<1> l(w().reshape({{"x", n()}}), {10}, {crown::shard(0)});
  const std::size_t b = (10 + n() - 1) / n();
  std::size_t covered = 0;
  for (int j = 0; j < n(); ++j) {
    const auto blk = l.block_of(j);
    BOOST_TEST(blk.lo[0] == std::min<std::size_t>(10, j * b));
    covered += blk.size();
    for (std::size_t i = blk.lo[0]; i < blk.hi[0]; ++i) BOOST_TEST(l.owner({i}, 0) == j);
  }
  BOOST_TEST(covered == 10u);
  // Replicated: every image holds everything, and the nearest copy is its own.
  const crown::tensor_layout<2> r(w().reshape({{"x", n()}}), {3, 4}, {crown::replicate()});
  BOOST_TEST(r.block_of(me()).size() == 12u);
  BOOST_TEST(r.owner({2, 3}, me()) == me());
  BOOST_TEST(r.replicas_of(0).size() == static_cast<std::size_t>(n()));
}

BOOST_AUTO_TEST_CASE(redistribute_round_trips_1d) { round_trips<1>({7}); }
BOOST_AUTO_TEST_CASE(redistribute_round_trips_2d) { round_trips<2>({5, 6}); }
BOOST_AUTO_TEST_CASE(redistribute_round_trips_3d) { round_trips<3>({3, 4, 5}); }

BOOST_AUTO_TEST_CASE(redistribute_to_another_mesh_shape_over_the_same_ranks) {
  const auto ms = meshes();
  crown::dist_tensor<double, 2> a(ms[0], {9, 5}, {crown::shard(0)});
  fill_with_positions(a);
  const auto b = a.redistribute(ms[1], {crown::shard(1), crown::shard(0)});
  BOOST_TEST(b.mesh() == ms[1]);
  BOOST_TEST(wrong_elements(b) == 0u);
  const auto c = b.redistribute(ms[0], {crown::replicate()});
  BOOST_TEST(wrong_elements(c) == 0u);
  BOOST_TEST(c.own().size() == 45u);
  if (n() > 1) { // refused before anything collective happens, on every image
    const crown::mesh part({{"x", 1}}, {0});
    const auto m =
        what_of<crown::argument_error>([&] { (void)a.redistribute(part, {crown::replicate()}); });
    BOOST_TEST(m.find("the meshes must hold the same ranks") != std::string::npos, m);
  }
}

BOOST_AUTO_TEST_CASE(scatter_then_gather_and_global_access) {
  crown::dist_tensor<double, 2> t(w().reshape({{"x", n()}}), {6, 7}, {crown::shard(1)});
  std::vector<double> all(42);
  for (std::size_t k = 0; k < all.size(); ++k) all[k] = k + 1.0;
  t.scatter(me() == 0 ? std::span<const double>(all) : std::span<const double>{}, 0);
  BOOST_TEST(wrong_elements(t) == 0u);
  BOOST_TEST(t.get({5, 6}) == 42.0); // remote on most images
  BOOST_TEST(t.get({0, 0}) == 1.0);
  crown::sync_all(t.mesh());
  if (me() == n() - 1) t.set({2, 0}, -5.0); // image 0's block: a remote put
  crown::sync_all(t.mesh());
  BOOST_TEST(t.get({2, 0}) == -5.0);
  const auto g = t.gather(0);
  if (me() == 0) BOOST_TEST(g[2 * 7] == -5.0);
  std::vector<double> region(4 * 5); // rows 1..4, columns 2..6: across every block
  t.read({{1, 2}, {5, 7}}, region);
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t c = 0; c < 5; ++c)
      BOOST_TEST(region[r * 5 + c] == (r + 1) * 7 + (c + 2) + 1.0);
  auto m = what_of<crown::argument_error>([&] { (void)t.get({6, 0}); });
  BOOST_TEST(m.find("global index [6, 0] is out of range along dimension 0") != std::string::npos,
             m);
  m = what_of<crown::argument_error>([&] { // wrong size on image 0: every image throws
    t.scatter(me() == 0 ? std::span<const double>(all).first(41) : std::span<const double>{}, 0);
  });
  BOOST_TEST(m.find("41 elements given for shape [6, 7] (42 elements)") != std::string::npos, m);
  m = what_of<crown::argument_error>([&] { t.read({{0, 0}, {7, 1}}, region); });
  BOOST_TEST(m.find("region [0, 0] to [7, 1] is not inside the array") != std::string::npos, m);
  m = what_of<crown::argument_error>([&] { (void)t.gather(n()); });
  BOOST_TEST(m.find("image " + std::to_string(n()) + " is out of range") != std::string::npos, m);
}

BOOST_AUTO_TEST_CASE(replicated_copies_stay_equal_under_set) {
  crown::dist_tensor<double, 1> t(w().reshape({{"x", n()}}), {4}, {crown::replicate()});
  t.fill(0);
  crown::sync_all(t.mesh());
  if (me() == 0) t.set({3}, 9.0); // every copy
  crown::sync_all(t.mesh());
  BOOST_TEST(t.local(3) == 9.0);
  BOOST_TEST(t.sum() == 9.0); // each block counted once
}

BOOST_AUTO_TEST_CASE(elementwise_helpers_and_reductions_match_serial) {
  for (const crown::mesh& m : meshes()) {
    for (const auto& p : all_placements<2>(m.ndim())) {
      crown::dist_tensor<double, 2> x(m, {7, 3}, p), y(m, {7, 3}, p);
      fill_with_positions(x);
      y.fill(1.0);
      y.axpy(2.0, x); // y = 1 + 2 x
      double sum = 0, max = 0, squares = 0;
      for (int k = 1; k <= 21; ++k) {
        sum += 1 + 2.0 * k;
        max = std::max(max, 1 + 2.0 * k);
        squares += (1 + 2.0 * k) * (1 + 2.0 * k);
      }
      BOOST_TEST(y.sum() == sum);
      BOOST_TEST(y.max() == max);
      BOOST_TEST(y.norm2() == std::sqrt(squares), boost::test_tools::tolerance(1e-12));
      crown::dist_tensor<double, 2> z(m, {7, 3}, p);
      z.copy_from(y);
      BOOST_TEST(z.sum() == sum);
    }
  }
}

namespace {

/// Fills with positions, sets every halo cell to -1, exchanges, and counts halo cells
/// that do not show the right neighbour's value (or that changed beyond an edge).
template <std::size_t N>
std::size_t wrong_halo_cells(const crown::mesh& m, const index<N>& shape,
                             std::vector<crown::placement> p, crown::halo_spec<N> h, bool overlap) {
  crown::dist_tensor<double, N> t(m, shape, std::move(p), h);
  for (double& x : t.padded()) x = -1;
  fill_with_positions(t);
  if (overlap) {
    t.exchange_halos_start();
    t.exchange_halos_finish();
  } else {
    t.exchange_halos();
  }
  if (t.own().empty()) return 0;
  std::size_t wrong = 0;
  const auto ext = t.padded().extents();
  crown::box<N> everything;
  everything.hi = ext;
  crown::detail::for_each_index(everything, [&](const index<N>& at) {
    bool inside = true, shown = true;
    index<N> g{};
    for (std::size_t d = 0; d < N; ++d) {
      const auto o = static_cast<std::ptrdiff_t>(at[d]) - static_cast<std::ptrdiff_t>(h.width[d]);
      if (o < 0 || o >= static_cast<std::ptrdiff_t>(t.own().extent(d))) inside = false;
      if (at[d] >= h.width[d] + t.own().extent(d) + h.width[d]) shown = false; // padding only
      auto gi = static_cast<std::ptrdiff_t>(t.own().lo[d]) + o;
      const auto nd = static_cast<std::ptrdiff_t>(shape[d]);
      if (gi < 0 || gi >= nd) {
        if (!h.periodic[d]) shown = false;
        gi = (gi % nd + nd) % nd;
      }
      g[d] = static_cast<std::size_t>(gi);
    }
    if (inside) return;
    const double x = std::apply([&](auto... k) { return t.padded()(k...); }, at);
    if (x != (shown ? value_at(g, shape) : -1.0)) ++wrong;
  });
  return wrong;
}

} // namespace

BOOST_AUTO_TEST_CASE(halos_of_every_width_and_periodicity_with_corners) {
  for (const crown::mesh& m : meshes()) {
    for (const bool periodic : {false, true}) {
      for (const std::size_t width : {1u, 2u}) {
        for (const bool overlap : {false, true}) {
          crown::halo_spec<1> h1{{width}, {periodic}};
          const std::vector<crown::placement> p1(m.ndim(), crown::shard(0)); // nested on 2-D
          BOOST_TEST(wrong_halo_cells<1>(m, {19}, p1, h1, overlap) == 0u);
          crown::halo_spec<2> h2{{width, 1}, {periodic, !periodic}};
          auto p2 = m.ndim() == 1 ? std::vector<crown::placement>{crown::shard(1)}
                                  : std::vector<crown::placement>{crown::shard(0), crown::shard(1)};
          BOOST_TEST(wrong_halo_cells<2>(m, {9, 11}, p2, h2, overlap) == 0u,
                     m << " width " << width << " periodic " << periodic);
          crown::halo_spec<3> h3{{1, width, 1}, {periodic, periodic, true}};
          auto p3 = m.ndim() == 1 ? std::vector<crown::placement>{crown::shard(2)}
                                  : std::vector<crown::placement>{crown::shard(2), crown::shard(0)};
          BOOST_TEST(wrong_halo_cells<3>(m, {7, 5, 10}, p3, h3, overlap) == 0u,
                     m << " width " << width << " periodic " << periodic);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_input_is_refused_naming_the_values) {
  const auto x = w().reshape({{"x", n()}});
  auto m = what_of<crown::argument_error>([&] {
    crown::dist_tensor<double, 2> t(x, {4, 4}, {crown::shard(0), crown::shard(1)});
  });
  BOOST_TEST(m.find("2 placements for 1 mesh dimensions") != std::string::npos, m);
  m = what_of<crown::argument_error>([&] {
    crown::dist_tensor<double, 2> t(x, {4, 4}, {crown::shard(2)});
  });
  BOOST_TEST(m.find("shard(2) names a tensor dimension outside [0, 2)") != std::string::npos, m);
  m = what_of<crown::argument_error>([&] {
    crown::dist_tensor<double, 1> t(x, {2 * static_cast<std::size_t>(n())}, {crown::shard(0)},
                                    {{3}, {false}});
  });
  BOOST_TEST(m.find("halo width 3 along dimension 0 exceeds the smallest block there (2 of") !=
                 std::string::npos,
             m);
  crown::dist_tensor<double, 1> a(x, {8}, {crown::shard(0)}), b(x, {9}, {crown::shard(0)});
  m = what_of<crown::argument_error>([&] { a.axpy(1.0, b); });
  BOOST_TEST(m.find("shapes or distributions differ: [8] {shard(0)}") != std::string::npos, m);
  m = what_of<crown::state_error>([&] { a.exchange_halos_finish(); });
  BOOST_TEST(m.find("no exchange was started") != std::string::npos, m);
}

// `u = u.redistribute(...)`: move assignment frees u's old block (collectively) and
// takes the new layout, on the same mesh or on another mesh over the same ranks.
BOOST_AUTO_TEST_CASE(move_assignment_takes_a_redistributed_tensor) {
  const auto ms = meshes();
  crown::dist_tensor<double, 2> u(ms[0], {9, 5}, {crown::shard(0)});
  fill_with_positions(u);
  u = u.redistribute({crown::shard(1)});
  BOOST_TEST((u.placements() == std::vector<crown::placement>{crown::shard(1)}));
  BOOST_TEST(wrong_elements(u) == 0u);
  u = u.redistribute(ms[1], {crown::shard(1), crown::shard(0)});
  BOOST_TEST(u.mesh() == ms[1]);
  BOOST_TEST(wrong_elements(u) == 0u);
  u = u.redistribute(ms[0], {crown::replicate()});
  BOOST_TEST(u.own().size() == 45u);
  BOOST_TEST(wrong_elements(u) == 0u);
  const auto whole = u.gather(0);
  if (me() == 0)
    for (std::size_t k = 0; k < whole.size(); ++k) BOOST_TEST(whole[k] == k + 1.0);
}

// std::swap(u, v) for double buffering: a periodic 1-D averaging stencil whose halos
// cross ranks every step, checked against the same stencil computed serially.
BOOST_AUTO_TEST_CASE(swap_double_buffers_a_stencil) {
  const std::size_t len = 4 * static_cast<std::size_t>(n()) + 3, steps = 6;
  const auto line = w().reshape({{"x", n()}});
  crown::dist_tensor<double, 1> u(line, {len}, {crown::shard(0)}, {{1}, {true}});
  crown::dist_tensor<double, 1> v(line, {len}, {crown::shard(0)}, {{1}, {true}});
  std::vector<double> serial(len);
  for (std::size_t i = 0; i < len; ++i) serial[i] = static_cast<double>(i * i % 7);
  u.apply([&](const auto& i, double& x) { x = serial[i[0]]; });
  for (std::size_t s = 0; s < steps; ++s) {
    u.exchange_halos();
    const auto own = static_cast<std::ptrdiff_t>(u.own().extent(0));
    for (std::ptrdiff_t i = 0; i < own; ++i)
      v.local(i) = (u.local(i - 1) + 2 * u.local(i) + u.local(i + 1)) / 4;
    std::swap(u, v);
    std::vector<double> next(len);
    for (std::size_t i = 0; i < len; ++i)
      next[i] = (serial[(i + len - 1) % len] + 2 * serial[i] + serial[(i + 1) % len]) / 4;
    serial = next;
  }
  const auto whole = u.gather(0);
  if (me() == 0) BOOST_TEST(whole == serial, boost::test_tools::per_element());
}

// Bad input: assigning to a tensor whose halo exchange is in flight is refused before
// anything is freed (the exchange then finishes normally); a moved-from tensor refuses
// access; a swap is local, so one image may swap alone.
BOOST_AUTO_TEST_CASE(assignment_during_a_halo_exchange_and_moved_from_tensors) {
  const auto line = w().reshape({{"x", n()}});
  const std::size_t len = 3 * static_cast<std::size_t>(n());
  crown::dist_tensor<double, 1> t(line, {len}, {crown::shard(0)}, {{1}, {true}});
  fill_with_positions(t);
  t.exchange_halos_start();
  auto m = what_of<crown::state_error>(
      [&] { t = crown::dist_tensor<double, 1>(line, {len}, {crown::shard(0)}); });
  BOOST_TEST(m.find("the target's halo exchange is in flight") != std::string::npos, m);
  t.exchange_halos_finish();
  BOOST_TEST(t.local(-1) == value_at<1>({(t.own().lo[0] + len - 1) % len}, {len}));
  BOOST_TEST(wrong_elements(t) == 0u);

  crown::dist_tensor<double, 1> taker(std::move(t));
  m = what_of<crown::state_error>([&] { (void)t.padded(); });
  BOOST_TEST(m.find("used after it was moved from") != std::string::npos, m);
  BOOST_TEST(wrong_elements(taker) == 0u);

  crown::dist_tensor<double, 1> a(line, {len}, {crown::shard(0)}),
      b(line, {len}, {crown::replicate()});
  if (me() == 0) { // no other image takes part: a collective here would hang
    std::swap(a, b);
    BOOST_TEST(a.own().size() == len);
    a.swap(b);
  }
  crown::sync_all(line);
  BOOST_TEST(a.own().size() == 3u);
}
