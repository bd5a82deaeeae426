// co_sum/co_min/co_max/co_broadcast/all_gather/reduce_scatter of device coarrays on the
// path the variant chooses (CROWN_GPU_COLLECTIVES: auto, peer, host, nccl), each
// result checked bitwise against the host collective of the same data and a serial
// fold in image order. Needs a GPU (skipped without one; the nccl variant needs one GPU
// per rank and skips naming why). Written without a GPU at hand: compiled in CI, first
// run by scripts/gpu-check on the GPU machine.
#include "rank_gpu.hpp"
#include <bit>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <crown/crown.hpp>
#include <cstdlib>
#include <cstring>
#include <harness/crown_test.hpp>
#include <limits>
#include <numeric>
#include <vector>

using crown::memory_kind;
using crown_test::me;
using crown_test::n;
using crown_test::w;

namespace {

template <typename T, std::size_t N = 1>
using dcoarray = crown::coarray<T, N, memory_kind::cuda>;

/// Image j's element k: magnitudes 2^-30 .. 2^29 and both signs, so that a sum taken in
/// another order gives other bits.
double value(int j, std::size_t k) {
  const double v = std::ldexp(1.0 + 0.1 * static_cast<double>(k % 7),
                              static_cast<int>((static_cast<std::size_t>(j) * 17 + k) % 60) - 30);
  return j % 2 ? -v : v;
}

template <typename T>
std::vector<T> values_of(int j, std::size_t count) {
  std::vector<T> v(count);
  for (std::size_t k = 0; k < count; ++k) v[k] = static_cast<T>(value(j, k));
  return v;
}

/// The sum over images in image order, element-wise (what every path must give).
template <typename T>
std::vector<T> serial_sum(std::size_t count) {
  std::vector<T> acc = values_of<T>(0, count);
  for (int j = 1; j < n(); ++j) {
    const std::vector<T> v = values_of<T>(j, count);
    for (std::size_t k = 0; k < count; ++k) acc[k] = static_cast<T>(acc[k] + v[k]);
  }
  return acc;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <typename T, std::size_t N>
std::vector<T> own_block(const dcoarray<T, N>& a) {
  std::vector<T> v(a.size());
  a.on(a.this_image()).get(v);
  return v;
}

template <typename T>
std::vector<T> download(const gpu_test::buffer& b, std::size_t count) {
  std::vector<T> v(count);
  b.download(v.data(), count * sizeof(T));
  return v;
}

crown::device_path expected_path() {
  const char* v = std::getenv("CROWN_GPU_COLLECTIVES");
  const std::string s = v ? v : "auto";
  if (s == "host") return crown::device_path::host;
  if (s == "nccl") return crown::device_path::nccl;
  if (s == "peer") return crown::device_path::peer;
  const crown::host_resources& host = crown::this_runtime().topology().host();
  if (CROWN_HAVE_NCCL && host.ranks <= host.gpus && n() > 1) return crown::device_path::nccl;
  const char* fake = std::getenv("CROWN_FAKE_HOSTS"); // images elsewhere are not mapped
  return fake && std::atoi(fake) > 1 && n() > 1 ? crown::device_path::host
                                                : crown::device_path::peer;
}

} // namespace

using gpu_test::on_the_ranks_gpu; // the macro names it unqualified
BOOST_TEST_GLOBAL_FIXTURE(on_the_ranks_gpu);

BOOST_AUTO_TEST_CASE(each_mesh_takes_the_path_its_setting_and_gpus_allow) {
  std::string why;
  const crown::device_path p = crown::device_collectives_path(w(), &why);
  if (me() == 0)
    std::printf("device collectives on %s: path %s (%s)\n", w().to_string().c_str(),
                std::string(crown::to_string(p)).c_str(), why.c_str());
  BOOST_TEST(crown::to_string(p) == crown::to_string(expected_path()));
  BOOST_TEST(!why.empty());
}

BOOST_AUTO_TEST_CASE(co_sum_of_doubles_is_bitwise_the_host_result_on_every_image) {
  dcoarray<double, 2> a(w(), {37, 11}); // 407 elements: shares of unequal length
  std::vector<double> host = values_of<double>(me(), a.size());
  a.on(me()).put(host);
  crown::co_sum(a);
  crown::co_sum(w(), std::span<double>(host)); // the host collective of the same data
  const std::vector<double> got = own_block(a);
  BOOST_TEST(same_bits(got, host));
  BOOST_TEST(same_bits(got, serial_sum<double>(a.size())));
}

BOOST_AUTO_TEST_CASE(co_sum_past_one_pass_of_the_fold_grid_is_bitwise_the_host_result) {
  // More elements than the fold kernel's grid covers at once (4096 blocks x 256
  // threads): its grid-stride loop takes a second pass; floats, every image's result.
  dcoarray<float> a(w(), (std::size_t{1} << 20) * static_cast<std::size_t>(n()) + 4099);
  std::vector<float> host = values_of<float>(me(), a.size());
  a.on(me()).put(host);
  crown::co_sum(a);
  crown::co_sum(w(), std::span<float>(host));
  const std::vector<float> got = own_block(a);
  BOOST_TEST(same_bits(got, host));
  BOOST_TEST(same_bits(got, serial_sum<float>(a.size())));
}

BOOST_AUTO_TEST_CASE(co_sum_into_one_image_leaves_the_others_as_they_were) {
  dcoarray<float> a(w(), 1000);
  const std::vector<float> mine = values_of<float>(me(), a.size());
  a.on(me()).put(mine);
  const int root = n() - 1;
  crown::co_sum(a, root);
  const std::vector<float> got = own_block(a);
  BOOST_TEST(same_bits(got, me() == root ? serial_sum<float>(a.size()) : mine));
}

/// Image j's block for the NaN sums: finite values but for element 0 (a NaN on image
/// 0), 1 (a negative NaN on the last image), 2 (inf on image 0, -inf on image 1), 3 (a
/// NaN of its own on every image: the first one's wins on the host) and 4 (a
/// signalling NaN on image 0, quieted by any add).
template <typename T, typename W>
std::vector<T> nan_block(int j) {
  std::vector<T> v = values_of<T>(j, 16);
  const W exponent = std::bit_cast<W>(std::numeric_limits<T>::infinity());
  const W quiet = exponent | (W{1} << (std::numeric_limits<T>::digits - 2));
  const W sign = W{1} << (sizeof(W) * 8 - 1);
  if (j == 0) v[0] = std::bit_cast<T>(W(quiet | 0x11));
  if (j == n() - 1) v[1] = std::bit_cast<T>(W(sign | quiet | 0x22));
  if (j < 2) v[2] = (j == 0 ? 1 : -1) * std::numeric_limits<T>::infinity();
  v[3] = std::bit_cast<T>(W(quiet | static_cast<W>(0x40 + j)));
  if (j == 0) v[4] = std::bit_cast<T>(W(exponent | 0x33));
  return v;
}

template <typename T, typename W>
void nan_sum_is_bitwise_the_host_sum() {
  dcoarray<T> a(w(), 16);
  std::vector<T> host = nan_block<T, W>(me());
  a.on(me()).put(host);
  crown::co_sum(a);
  crown::co_sum(w(), std::span<T>(host));
  const std::vector<T> got = own_block(a);
  BOOST_TEST(same_bits(got, host));
  for (std::size_t k = 0; k < 5; ++k) // the bits, to read a failure by
    BOOST_TEST_MESSAGE(k << ": device " << std::hex << std::bit_cast<W>(got[k]) << ", host "
                         << std::bit_cast<W>(host[k]));
}

BOOST_AUTO_TEST_CASE(co_sum_with_nans_and_infinities_is_bitwise_the_host_result) {
  // A GPU's add returns one canonical NaN; the host's x86 adds keep payloads and signs
  // and give a negative NaN for inf - inf: the fold builds the host's (x86_sum.hpp).
  nan_sum_is_bitwise_the_host_sum<float, std::uint32_t>();
  nan_sum_is_bitwise_the_host_sum<double, std::uint64_t>();
}

BOOST_AUTO_TEST_CASE(co_min_and_co_max_of_integers_and_doubles) {
  dcoarray<std::int64_t> i(w(), 301);
  dcoarray<std::uint32_t> u(w(), 5);
  dcoarray<double> d(w(), 64);
  std::vector<std::int64_t> iv(i.size());
  for (std::size_t k = 0; k < iv.size(); ++k)
    iv[k] = (static_cast<std::int64_t>(k) * 7919 + me() * 104729) % 1000 - 500;
  i.on(me()).put(iv);
  u.on(me()).put(std::vector<std::uint32_t>(u.size(), 4000000000u - static_cast<unsigned>(me())));
  d.on(me()).put(values_of<double>(me(), d.size()));
  crown::co_min(i);
  crown::co_max(u);
  crown::co_max(d);
  crown::co_min(w(), std::span<std::int64_t>(iv));
  BOOST_TEST(own_block(i) == iv);
  BOOST_TEST(own_block(u) == std::vector<std::uint32_t>(u.size(), 4000000000u));
  std::vector<double> dmax = values_of<double>(me(), d.size());
  crown::co_max(w(), std::span<double>(dmax));
  BOOST_TEST(same_bits(own_block(d), dmax));
}

BOOST_AUTO_TEST_CASE(co_broadcast_copies_the_source_block_everywhere) {
  dcoarray<int, 2> a(w(), {3, 5});
  std::vector<int> mine(a.size());
  std::iota(mine.begin(), mine.end(), 100 * me());
  a.on(me()).put(mine);
  const int source = n() / 2;
  crown::co_broadcast(a, source);
  std::vector<int> expect(a.size());
  std::iota(expect.begin(), expect.end(), 100 * source);
  BOOST_TEST(own_block(a) == expect);
}

BOOST_AUTO_TEST_CASE(all_gather_into_device_and_host_memory) {
  dcoarray<int> a(w(), 129);
  std::vector<int> mine(a.size());
  std::iota(mine.begin(), mine.end(), 1000 * me());
  a.on(me()).put(mine);
  std::vector<int> expect;
  for (int j = 0; j < n(); ++j)
    for (std::size_t k = 0; k < a.size(); ++k) expect.push_back(1000 * j + static_cast<int>(k));
  std::vector<int> host(expect.size());
  crown::all_gather(a, std::span<int>(host));
  BOOST_TEST(host == expect);
  gpu_test::buffer dev(expect.size() * sizeof(int));
  crown::all_gather(a, std::span<int>(static_cast<int*>(dev.get()), expect.size()));
  BOOST_TEST(download<int>(dev, expect.size()) == expect);
}

BOOST_AUTO_TEST_CASE(reduce_scatter_is_bitwise_the_host_reduce_scatter) {
  const std::size_t c = 53;
  dcoarray<double> a(w(), c * static_cast<std::size_t>(n()));
  const std::vector<double> mine = values_of<double>(me(), a.size());
  a.on(me()).put(mine);
  std::vector<double> expect(c);
  crown::reduce_scatter(w(), std::span<const double>(mine), std::span<double>(expect));
  std::vector<double> host(c);
  crown::reduce_scatter(a, std::span<double>(host));
  BOOST_TEST(same_bits(host, expect));
  gpu_test::buffer dev(c * sizeof(double));
  crown::reduce_scatter(a, std::span<double>(static_cast<double*>(dev.get()), c));
  BOOST_TEST(same_bits(download<double>(dev, c), expect));
  const std::vector<double> all = serial_sum<double>(a.size());
  BOOST_TEST(
      same_bits(expect, std::vector<double>(all.begin() + static_cast<long>(c) * me(),
                                            all.begin() + static_cast<long>(c) * (me() + 1))));
}

BOOST_AUTO_TEST_CASE(a_callers_stream_orders_the_collective_after_its_kernel) {
  dcoarray<int> a(w(), 4096);
  gpu_test::stream s;
  gpu_test::fill_iota(a.data(), a.size(), me(), s.get()); // not synchronised: co_sum follows
  crown::co_sum(a, -1, s.get());
  std::vector<int> expect(a.size());
  for (std::size_t k = 0; k < expect.size(); ++k)
    expect[k] = n() * static_cast<int>(k) + n() * (n() - 1) / 2;
  BOOST_TEST(own_block(a) == expect);
}

BOOST_AUTO_TEST_CASE(fewer_elements_than_images_still_reduce) {
  dcoarray<std::int32_t> a(w(), 1);
  a.on(me()).put(std::vector<std::int32_t>{me() + 1});
  crown::co_sum(a);
  BOOST_TEST(own_block(a) == std::vector<std::int32_t>{n() * (n() + 1) / 2});
}

BOOST_AUTO_TEST_CASE(an_image_failing_inside_a_collective_fails_it_on_every_image) {
  // The fault variant: CROWN_FAULT=throw:rank=1:at=gpu_collective strikes rank 1 inside
  // the first phase, after every image started: each image throws, none waits for it.
  const char* fault = std::getenv("CROWN_FAULT");
  if (!fault || std::string(fault).find("at=gpu_collective") == std::string::npos) {
    BOOST_TEST_MESSAGE("not the fault variant");
    return;
  }
  dcoarray<double> a(w(), 64);
  a.on(me()).put(std::vector<double>(a.size(), 1.0));
  const std::string m = crown_test::what_of<crown::error>([&] { crown::co_sum(a); });
  if (me() == 1)
    BOOST_TEST(m.find("CROWN_FAULT: injected exception at gpu_collective") != std::string::npos, m);
  else
    BOOST_TEST(m.find("co_sum of a device coarray on " + w().to_string() +
                      ": image 1 (rank 1) failed: ") != std::string::npos,
               m);
  a.on(me()).put(std::vector<double>(a.size(), 1.0)); // struck once: the mesh works on
  crown::co_sum(a);
  BOOST_TEST(own_block(a) == std::vector<double>(a.size(), static_cast<double>(n())));
}

BOOST_AUTO_TEST_CASE(bad_arguments_name_the_rank_and_the_values) {
  dcoarray<double> a(w(), 8);
  const std::string where = "rank " + std::to_string(me()) + ": ";
  BOOST_TEST(crown_test::what_of<crown::argument_error>([&] { crown::co_sum(a, n()); }) ==
             "crown::argument_error: " + where + "co_sum of a device coarray on " +
                 w().to_string() + ": result image " + std::to_string(n()) +
                 " is out of range [-1, " + std::to_string(n()) + ")");
  std::vector<double> small(8 * static_cast<std::size_t>(n()) - 1);
  BOOST_TEST(crown_test::what_of<crown::argument_error>(
                 [&] { crown::all_gather(a, std::span<double>(small)); })
                 .ends_with("the result holds " + std::to_string(small.size()) +
                            " elements but needs " + std::to_string(8 * n()) + " (" +
                            std::to_string(n()) + " images x 8)"));
  if (n() == 1) // the result would be the block itself
    BOOST_TEST(crown_test::what_of<crown::argument_error>([&] {
                 crown::all_gather(a, std::span<double>(a.data(), 8));
               }).ends_with("the result overlaps the coarray's block"));
  if (crown::detail::check_collectives() && n() > 1) {
    // CROWN_CHECK=1: an image out of range on the last image only is an error on every
    // image (not the last one throwing while the others wait in the argument check)
    const int bad = me() == n() - 1 ? n() : 0;
    BOOST_TEST(crown_test::what_of<crown::argument_error>([&] { crown::co_sum(a, bad); })
                   .find("image is " + std::to_string(bad) + " here but " +
                         std::to_string(me() == n() - 1 ? 0 : n()) + " on rank") !=
               std::string::npos);
  }
  if (!crown::detail::check_collectives() && n() > 1) {
    // Wrong on image 0 alone: agreed before anyone waits, every image throws, the
    // others naming image 0.
    const std::string m =
        crown_test::what_of<crown::argument_error>([&] { crown::co_sum(a, me() == 0 ? n() : -1); });
    const std::string range = "result image " + std::to_string(n()) + " is out of range [-1, " +
                              std::to_string(n()) + ")";
    BOOST_TEST(m.ends_with(me() == 0 ? ": " + range
                                     : ": image 0 (rank " + std::to_string(w().ranks()[0]) +
                                           "): " + range),
               m);
  }
  crown::co_sum(a); // the mesh still works: nothing was left half done
  BOOST_TEST(own_block(a) == std::vector<double>(8, 0.0));
}
