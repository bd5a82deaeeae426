// dist_tensor<T, N, memory_kind::cuda> against the host dist_tensor of the same data
// (itself tested against serial references in tests/tensor): padded blocks after halo
// exchanges of every width and periodicity, redistribution, gather, scatter, fill,
// get/set and the reductions. Needs a GPU (skipped without one): compiled in CI, run by
// scripts/gpu-check; the fake2 variant puts half the images on another pretend host, the
// halo_kernel variant copies same-host boxes by the box copy kernel.
#include "kernels.hpp"
#include "rank_gpu.hpp"
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <complex>
#include <crown/crown.hpp>
#include <cstdint>
#include <cstdlib>
#include <harness/crown_test.hpp>
#include <string>
#include <type_traits>
#include <vector>

using crown::memory_kind;
using crown_test::n;
using crown_test::w;

namespace {

template <std::size_t N>
using dtensor = crown::dist_tensor<double, N, memory_kind::cuda>;
template <std::size_t N>
using htensor = crown::dist_tensor<double, N>;
template <std::size_t N>
using idx = std::array<std::size_t, N>;

template <std::size_t N>
std::size_t elements(const idx<N>& e) {
  std::size_t c = 1;
  for (std::size_t x : e) c *= x;
  return c;
}

/// Row-major position + 1, with a fraction that survives no wrong copy.
template <std::size_t N>
std::vector<double> positions(const idx<N>& shape) {
  std::vector<double> v(elements(shape));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i + 1) + 0.125;
  return v;
}

template <std::size_t N>
std::vector<double> padded_of(const dtensor<N>& t) {
  std::vector<double> h(elements(t.padded_extents()));
  gpu_test::download(h.data(), t.data(), h.size() * sizeof(double));
  return h;
}

template <std::size_t N>
std::vector<double> padded_of(const htensor<N>& t) {
  const auto p = t.padded();
  return {p.data(), p.data() + elements(t.padded_extents())};
}

/// The world as one dimension, and as two where the rank count allows.
std::vector<crown::mesh> meshes() {
  std::vector<crown::mesh> out{w().reshape({{"x", n()}})};
  if (n() % 2 == 0) out.push_back(w().reshape({{"r", 2}, {"c", n() / 2}}));
  return out;
}

/// The same data and halos in host and device memory: padded blocks (halos included)
/// equal, element for element, after the exchange.
template <std::size_t N>
void same_halos(const crown::mesh& m, const idx<N>& shape, std::vector<crown::placement> p,
                crown::halo_spec<N> h, bool overlap) {
  htensor<N> host(m, shape, p, h);
  dtensor<N> device(m, shape, p, h);
  const auto all = positions(shape);
  host.scatter(all);
  device.scatter(all);
  if (overlap) {
    device.exchange_halos_start();
    BOOST_TEST(device.exchange_halos_test() == device.exchange_halos_test()); // no change
    device.exchange_halos_finish();
  } else {
    device.exchange_halos();
  }
  host.exchange_halos();
  BOOST_TEST((padded_of(device) == padded_of(host)), m << " halo " << h.width[0] << " periodic "
                                                       << h.periodic[0] << " overlap " << overlap);
}

} // namespace

using gpu_test::on_the_ranks_gpu; // the macro names it unqualified
BOOST_TEST_GLOBAL_FIXTURE(on_the_ranks_gpu);

BOOST_AUTO_TEST_CASE(halos_of_every_width_and_periodicity_match_the_host_tensor) {
  for (const crown::mesh& m : meshes())
    for (const bool periodic : {false, true})
      for (const std::size_t width : {1u, 2u})
        for (const bool overlap : {false, true}) {
          same_halos<1>(m, {19}, std::vector<crown::placement>(m.ndim(), crown::shard(0)),
                        {{width}, {periodic}}, overlap);
          same_halos<2>(m, {9, 11},
                        m.ndim() == 1
                            ? std::vector<crown::placement>{crown::shard(1)}
                            : std::vector<crown::placement>{crown::shard(0), crown::shard(1)},
                        {{width, 1}, {periodic, !periodic}}, overlap);
          same_halos<3>(m, {7, 5, 10},
                        m.ndim() == 1
                            ? std::vector<crown::placement>{crown::shard(2)}
                            : std::vector<crown::placement>{crown::shard(2), crown::shard(0)},
                        {{1, width, 1}, {periodic, periodic, true}}, overlap);
        }
}

BOOST_AUTO_TEST_CASE(halo_boxes_go_row_by_row_where_a_pitch_passes_the_limit) {
  // Lowered to 8 bytes (a GPU's is about 2 GiB): the column halos' planes, whose rows lie
  // 44 or more bytes apart, go as one copy per row.
  const std::uint64_t splits = crown::detail::device_row_split_copies();
  const gpu_test::pitch_limit lowered(8);
  for (const crown::mesh& m : meshes()) {
    same_halos<2>(m, {9, 11},
                  m.ndim() == 1 ? std::vector<crown::placement>{crown::shard(1)}
                                : std::vector<crown::placement>{crown::shard(0), crown::shard(1)},
                  {{1, 2}, {true, false}}, false);
    same_halos<3>(m, {7, 5, 10}, std::vector<crown::placement>(m.ndim(), crown::shard(0)),
                  {{1, 1, 2}, {false, true, true}}, true);
  }
  // The 3-D tensor's periodic columns wrap around each image's own block: copies by rows,
  // unless CROWN_GPU_HALOS=kernel moves boxes between device heaps.
  if (crown::detail::device_halos() == crown::gpu_halos_choice::copies)
    BOOST_TEST(crown::detail::device_row_split_copies() > splits);
}

// The halo_kernel variant runs this suite with CROWN_GPU_HALOS=kernel: its boxes between
// device heaps then go by the box copy kernel (launched, as the counter shows), the
// others by copies; elements of 1, 2, 4, 8 and 16 bytes move in words of their own size
// or smaller.
template <typename T>
void same_halos_of(const crown::mesh& m) {
  const idx<2> shape{9, 11};
  const crown::halo_spec<2> h{{1, 2}, {true, true}};
  const std::vector<crown::placement> p =
      m.ndim() == 1 ? std::vector<crown::placement>{crown::shard(1)}
                    : std::vector<crown::placement>{crown::shard(0), crown::shard(1)};
  crown::dist_tensor<T, 2> host(m, shape, p, h);
  crown::dist_tensor<T, 2, memory_kind::cuda> device(m, shape, p, h);
  std::vector<T> all(elements(shape));
  for (std::size_t i = 0; i < all.size(); ++i) { // every byte of an element differs from 0
    if constexpr (std::is_same_v<T, std::complex<double>>)
      all[i] = T(static_cast<double>(i % 120 + 1), static_cast<double>(i % 7 + 1));
    else
      all[i] = static_cast<T>(i % 120 + 1);
  }
  host.scatter(all);
  device.scatter(all);
  host.exchange_halos();
  device.exchange_halos();
  const auto pe = host.padded_extents();
  std::vector<T> got(elements(pe));
  gpu_test::download(got.data(), device.data(), got.size() * sizeof(T));
  const auto want = host.padded();
  BOOST_TEST((got == std::vector<T>(want.data(), want.data() + got.size())),
             m << " " << sizeof(T) << "-byte elements");
}

BOOST_AUTO_TEST_CASE(box_copies_go_the_way_crown_gpu_halos_says) {
  const char* set = std::getenv("CROWN_GPU_HALOS");
  const std::string expected = set ? set : "copies";
  BOOST_TEST(crown::to_string(crown::detail::device_halos()) == expected);
  const std::uint64_t before = crown::detail::device_box_kernel_launches();
  for (const crown::mesh& m : meshes()) {
    same_halos_of<std::uint8_t>(m);
    same_halos_of<std::int16_t>(m);
    same_halos_of<float>(m);
    same_halos_of<double>(m);
    same_halos_of<std::complex<double>>(m);
  }
  // Periodic halos: every image copies some box from a mapped heap (its own at least).
  const std::uint64_t launched = crown::detail::device_box_kernel_launches() - before;
  BOOST_TEST_MESSAGE("rank " << w().rank() << ": box copies by " << expected << ", " << launched
                             << " kernel launches");
  if (expected == "kernel")
    BOOST_TEST(launched > 0u);
  else
    BOOST_TEST(launched == 0u);
}

BOOST_AUTO_TEST_CASE(redistribution_gather_and_scatter_keep_every_element) {
  const idx<2> shape{12, 13};
  const auto all = positions(shape);
  for (const crown::mesh& m : meshes()) {
    dtensor<2> a(m, shape, std::vector<crown::placement>(m.ndim(), crown::shard(0)),
                 {{1, 1}, {true, false}});
    a.scatter(all);
    BOOST_TEST((a.gather(0) == (m.rank() == 0 ? all : std::vector<double>{})));
    const auto b = a.redistribute(std::vector<crown::placement>(m.ndim(), crown::shard(1)));
    BOOST_TEST((b.gather(n() - 1) == (m.rank() == n() - 1 ? all : std::vector<double>{})));
    const auto c = b.redistribute(std::vector<crown::placement>(m.ndim(), crown::replicate()));
    BOOST_TEST((padded_of(c) == all)); // every image holds the whole array, no halos
    std::vector<double> region(3 * 4);
    b.read(crown::box<2>{{2, 5}, {5, 9}}, region);
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t j = 0; j < 4; ++j)
        BOOST_TEST(region[i * 4 + j] == all[(2 + i) * 13 + 5 + j]);
  }
  // Onto another mesh shape over the same ranks.
  const auto ms = meshes();
  if (ms.size() > 1) {
    dtensor<2> a(ms[0], shape, {crown::shard(0)});
    a.scatter(all);
    const auto b = a.redistribute(ms[1], {crown::shard(1), crown::shard(0)});
    BOOST_TEST((b.gather(0) == (ms[1].rank() == 0 ? all : std::vector<double>{})));
  }
}

BOOST_AUTO_TEST_CASE(fill_get_set_and_reductions_go_through_host_memory) {
  const crown::mesh m = w().reshape({{"x", n()}});
  dtensor<2> t(m, {6, 7}, {crown::shard(1)}, {{1, 1}, {false, false}});
  t.fill(2.5);
  BOOST_TEST(t.sum() == 2.5 * 42);
  BOOST_TEST(t.max() == 2.5);
  crown::sync_all(m);
  if (m.rank() == 0) t.set({5, 6}, 9.0); // another image's element for n() > 1
  crown::sync_all(m);
  BOOST_TEST(t.get({5, 6}) == 9.0);
  BOOST_TEST(t.get({0, 0}) == 2.5);
  BOOST_TEST(t.max() == 9.0);
  BOOST_TEST(std::abs(t.norm2() - std::sqrt(41 * 2.5 * 2.5 + 81.0)) < 1e-12);
  // Halos are not owned: fill leaves them, the exchange fills them.
  const auto before = padded_of(t);
  BOOST_TEST(before.front() == 0.0);
  // A replicated tensor counts each element once.
  dtensor<1> r(m, {10}, {crown::replicate()});
  r.fill(1.0);
  BOOST_TEST(r.sum() == 10.0);
}
