// coarray<T, N, memory_kind::cuda> between the ranks of one GPU machine: every transfer
// form, atomics, put-with-notify, the kernel view, and the errors. Needs a GPU (skipped
// without one). Written without a GPU at hand: compiled in CI, first run by
// scripts/gpu-check on the GPU machine.
#include "rank_gpu.hpp"
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <crown/crown.hpp>
#include <cstdlib>
#include <harness/crown_test.hpp>
#include <numeric>
#include <vector>

using crown::memory_kind;
using crown_test::left;
using crown_test::me;
using crown_test::n;
using crown_test::right;
using crown_test::w;

namespace {

template <typename T, std::size_t N = 1>
using dcoarray = crown::coarray<T, N, memory_kind::cuda>;

std::vector<int> iota_from(int base, std::size_t count) {
  std::vector<int> v(count);
  std::iota(v.begin(), v.end(), base);
  return v;
}

std::vector<int> own_block(const dcoarray<int>& a) {
  std::vector<int> v(a.size());
  a.on(a.this_image()).get(v);
  return v;
}

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::string(v) == value;
}

} // namespace

using gpu_test::on_the_ranks_gpu; // the macro names it unqualified
BOOST_TEST_GLOBAL_FIXTURE(on_the_ranks_gpu);

BOOST_AUTO_TEST_CASE(whole_blocks_move_between_host_and_device_memory) {
  dcoarray<int> a(w(), 1000);
  a.on(right()).put(iota_from(me() * 1000, 1000));
  crown::sync_all();
  BOOST_TEST(own_block(a) == iota_from(left() * 1000, 1000));

  // Device source and device destination.
  gpu_test::buffer src(1000 * sizeof(int)), dst(1000 * sizeof(int));
  gpu_test::fill_iota(static_cast<int*>(src.get()), 1000, -me() * 1000, nullptr);
  gpu_test::synchronize();
  crown::sync_all();
  a.on(right()).put({static_cast<const int*>(src.get()), 1000});
  crown::sync_all();
  a.on(me()).get({static_cast<int*>(dst.get()), 1000});
  std::vector<int> seen(1000);
  dst.download(seen.data(), seen.size() * sizeof(int));
  BOOST_TEST(seen == iota_from(-left() * 1000, 1000));
}

BOOST_AUTO_TEST_CASE(elements_and_strided_sections) {
  dcoarray<int, 2> a(w(), {8, 10});
  a.on(right()).put({7, 9}, 100 + me());
  const crown::section<2> s{crown::triplet{1, 7, 2}, crown::triplet{0, 10, 3}}; // 3 x 4
  const std::vector<int> packed = iota_from(10 * me(), 12);
  a.on(right()).put(s, packed);
  crown::sync_all();
  BOOST_TEST(a.on(me()).get({7, 9}) == 100 + left());
  std::vector<int> back(12);
  a.on(me()).get(s, back);
  BOOST_TEST(back == iota_from(10 * left(), 12));
  // An element outside the section stays zero; rows 1..5 step 2 of column 3 are set.
  BOOST_TEST(a.on(me()).get({0, 0}) == 0);
  BOOST_TEST(a.on(me()).get({3, 3}) == 10 * left() + 5);
  // A contiguous-rows section (whole rows 2..4) through the other 2-D path.
  const crown::section<2> rows{crown::triplet{2, 4, 1}, crown::all(10)};
  a.on(right()).put(rows, iota_from(500, 20));
  crown::sync_all();
  std::vector<int> r(20);
  a.on(me()).get(rows, r);
  BOOST_TEST(r == iota_from(500, 20));
  // Pitches past the device's limit (lowered to 8 bytes here; about 2 GiB on a GPU): an
  // element per copy for `s` (12-byte pitch), a row per copy for `rows`. The same
  // sections, other values. The gets went by rows, and the puts unless staged (another
  // host's image: the slots carry runs, not rows).
  const bool right_staged = std::string(crown::detail::device_link_to(right())) == "staged";
  const std::uint64_t splits = crown::detail::device_row_split_copies();
  {
    const gpu_test::pitch_limit lowered(8);
    crown::sync_all();
    a.on(right()).put(s, iota_from(-10 * me(), 12));
    a.on(right()).put(rows, iota_from(900, 20));
    crown::sync_all();
    a.on(me()).get(s, back);
    a.on(me()).get(rows, r);
  }
  BOOST_TEST(crown::detail::device_row_split_copies() - splits == (right_staged ? 2u : 4u));
  BOOST_TEST(back == iota_from(-10 * left(), 12));
  BOOST_TEST(r == iota_from(900, 20));
  BOOST_TEST(a.on(me()).get({0, 0}) == 0);
}

BOOST_AUTO_TEST_CASE(asynchronous_and_stream_ordered_transfers) {
  dcoarray<int> a(w(), 4096);
  std::vector<int> mine = iota_from(me(), 4096);
  {
    crown::completion c = a.on(right()).put_async(mine);
    c.wait();
  }
  crown::sync_all();
  std::vector<int> got(4096);
  crown::completion g = a.on(me()).get_async(got);
  g.wait_local();
  BOOST_TEST(got == iota_from(left(), 4096));
  crown::sync_all();

  // A kernel produces the source on a stream; the put follows it in that stream's order
  // with no host synchronisation in between.
  gpu_test::stream s;
  gpu_test::buffer src(4096 * sizeof(int));
  gpu_test::fill_iota(static_cast<int*>(src.get()), 4096, 7 * me(), s.get());
  crown::completion c =
      a.on(right()).put_async({static_cast<const int*>(src.get()), 4096}, s.get());
  c.wait();
  crown::sync_all();
  BOOST_TEST(own_block(a) == iota_from(7 * left(), 4096));

  // Stream-ordered get into page-locked memory.
  int* pinned = static_cast<int*>(gpu_test::pinned_alloc(4096 * sizeof(int)));
  crown::completion back = a.on(me()).get_async({pinned, 4096}, s.get());
  s.synchronize();
  BOOST_TEST(back.test());
  BOOST_TEST(std::vector<int>(pinned, pinned + 4096) == iota_from(7 * left(), 4096));
  gpu_test::pinned_free(pinned);

  // Pageable memory with a stream is refused, naming the buffer.
  const std::string m = crown_test::what_of<crown::argument_error>(
      [&] { (void)a.on(right()).put_async(mine, s.get()); });
  BOOST_TEST(m.find("is pageable host memory: a stream-ordered transfer needs device memory or "
                    "page-locked host memory") != std::string::npos,
             m);
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(a_null_stream_is_crowns_stream_for_every_overload) {
  dcoarray<int, 2> a(w(), {4, 8});
  // nullptr is Crown's stream, as no stream at all: pageable memory is accepted, and
  // sync_all completes the transfers (the whole block and a section alike).
  const std::vector<int> mine = iota_from(100 * me(), 32);
  crown::completion whole = a.on(right()).put_async(mine, nullptr);
  crown::sync_all();
  BOOST_TEST(whole.test());
  std::vector<int> seen(32);
  a.on(me()).get(seen);
  BOOST_TEST(seen == iota_from(100 * left(), 32));
  crown::sync_all();
  const std::vector<int> row = iota_from(-8 * me(), 8);
  const crown::section<2> second_row{crown::triplet{1, 2, 1}, crown::all(8)};
  crown::completion part = a.on(right()).put_async(second_row, row, nullptr);
  crown::sync_all();
  BOOST_TEST(part.test());
  a.on(me()).get(seen);
  BOOST_TEST(std::vector<int>(seen.begin() + 8, seen.begin() + 16) == iota_from(-8 * left(), 8));
  crown::sync_all();
}

template <typename T>
void every_kernel_operation() {
  dcoarray<T> a(w(), 4);
  gpu_test::buffer out(10 * sizeof(T));
  gpu_test::every_operation(a.device(), static_cast<T*>(out.get()));
  std::vector<T> seen(10);
  out.download(seen.data(), 10 * sizeof(T));
  const std::vector<T> expected{T(5), T(7), T(9), T(0), T(3), T(9), T(9), T(n()), T(5), T(9)};
  // As doubles (exact for these): streams print no char32_t or wchar_t in C++20.
  BOOST_TEST(std::vector<double>(seen.begin(), seen.end()) ==
                 std::vector<double>(expected.begin(), expected.end()),
             boost::test_tools::per_element());
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(every_kernel_operation_for_every_element_type) {
  every_kernel_operation<int>();
  every_kernel_operation<unsigned>();
  every_kernel_operation<long long>();
  every_kernel_operation<unsigned long long>();
  every_kernel_operation<std::int64_t>();
  every_kernel_operation<float>();
  every_kernel_operation<double>();
  every_kernel_operation<char32_t>(); // 4-byte integers that are not int or unsigned
  every_kernel_operation<wchar_t>();
}

BOOST_AUTO_TEST_CASE(view_tables_are_reused_after_their_block_is_freed) {
  // More views than the area holds at once (256 world-sized tables): each is freed with
  // its block, so the area never fills.
  for (int i = 0; i < 300; ++i) {
    dcoarray<int> a(w(), 4);
    const auto v = a.device();
    BOOST_TEST_REQUIRE(v.bases == a.device().bases); // made once per block
  }
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(atomics_on_int32_and_int64_from_every_image) {
  dcoarray<std::int64_t> c64(w(), 2);
  dcoarray<std::int32_t> c32(w(), 2);
  for (int i = 0; i < 10; ++i) {
    (void)c64.on(0).fetch_add({0}, 3);
    (void)c32.on(n() - 1).fetch_add({1}, -2);
  }
  // Compare-and-swap: exactly one image claims each slot.
  const std::int64_t prior = c64.on(0).compare_and_swap({1}, 0, me() + 1);
  int claimed = prior == 0;
  MPI_Allreduce(MPI_IN_PLACE, &claimed, 1, MPI_INT, MPI_SUM, w().comm());
  crown::sync_all();
  BOOST_TEST(claimed == 1);
  BOOST_TEST(c64.on(0).atomic_ref({0}) == 30 * n());
  BOOST_TEST(c32.on(n() - 1).atomic_ref({1}) == -20 * n());
  BOOST_TEST(c64.on(0).atomic_ref({1}) >= 1);
  BOOST_TEST(c32.on(right()).swap({0}, 5) == 0);
  crown::sync_all();
  BOOST_TEST(c32.on(me()).atomic_ref({0}) == 5);
}

BOOST_AUTO_TEST_CASE(put_notify_posts_an_event_after_the_data) {
  dcoarray<int> a(w(), 2048);
  crown::event arrived(w());
  crown::put_notify(a.on(right()), std::span<const int>(iota_from(me() * 3, 2048)), arrived);
  arrived.wait();
  BOOST_TEST(own_block(a) == iota_from(left() * 3, 2048));
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(a_kernel_waits_for_a_host_put_with_signal) {
  constexpr std::size_t count = 512;
  dcoarray<double> data(w(), count);
  dcoarray<std::int64_t> flags(w(), 4);
  gpu_test::stream s;
  gpu_test::buffer out(count * sizeof(double));
  gpu_test::wait_then_copy(flags.device(), 2, 1, data.device(), static_cast<double*>(out.get()),
                           count, s.get());
  {
    // While the kernel spins: allocating, the first device() (its table upload), a
    // transfer on Crown's stream, sync_all and freeing must not wait behind it.
    dcoarray<int> other(w(), 8);
    BOOST_TEST(other.device().num_images == n());
    other.on(right()).put(iota_from(me(), 8));
    crown::sync_all();
    BOOST_TEST(own_block(other) == iota_from(left(), 8));
  }
  crown::sync_all(); // every waiting kernel is queued before anyone signals
  std::vector<double> mine(count);
  for (std::size_t i = 0; i < count; ++i) mine[i] = me() + 0.5 * static_cast<double>(i);
  data.on(right()).put_signal(std::span<const double>(mine), flags, {2});
  s.synchronize();
  std::vector<double> seen(count);
  out.download(seen.data(), count * sizeof(double));
  for (std::size_t i = 0; i < count; ++i)
    BOOST_TEST(seen[i] == left() + 0.5 * static_cast<double>(i));
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(kernels_store_into_and_load_from_other_images) {
  dcoarray<int, 2> a(w(), {16, 32});
  const auto v = a.device();
  BOOST_TEST(v.num_images == n());
  BOOST_TEST(v.this_image == me());
  gpu_test::store_to_image(v, right());
  crown::sync_all();
  gpu_test::buffer out(16 * 32 * sizeof(int));
  gpu_test::load_from_image(v, me(), static_cast<int*>(out.get()));
  std::vector<int> seen(16 * 32);
  out.download(seen.data(), seen.size() * sizeof(int));
  BOOST_TEST(seen == iota_from(1000 * left(), 16 * 32));
  // Reading another image's block from a kernel.
  gpu_test::load_from_image(v, right(), static_cast<int*>(out.get()));
  out.download(seen.data(), seen.size() * sizeof(int));
  BOOST_TEST(seen == iota_from(1000 * me(), 16 * 32));
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(kernel_atomics_meet_host_atomics) {
  dcoarray<std::int64_t> c(w(), 3);
  gpu_test::add_everywhere(c.device(), 1, 32);
  (void)c.on(right()).fetch_add({1}, 100);
  crown::sync_all();
  BOOST_TEST(c.on(me()).atomic_ref({1}) == 32 * n() + 100);
}

BOOST_AUTO_TEST_CASE(a_kernel_puts_and_signals_another_image) {
  constexpr std::size_t count = 300;
  dcoarray<double> from(w(), count), to(w(), count);
  dcoarray<std::int64_t> flags(w(), 1);
  std::vector<double> mine(count);
  for (std::size_t i = 0; i < count; ++i) mine[i] = 2.0 * me() + static_cast<double>(i);
  from.on(me()).put(mine);
  crown::sync_all();
  gpu_test::kernel_put_signal(from.device(), to.device(), right(), count, flags.device(), 0);
  crown::detail::backoff pause;
  while (flags.on(me()).atomic_ref({0}) < 1) pause.pause();
  std::vector<double> seen(count);
  to.on(me()).get(seen);
  for (std::size_t i = 0; i < count; ++i)
    BOOST_TEST(seen[i] == 2.0 * left() + static_cast<double>(i));
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(bad_input_is_named) {
  dcoarray<int, 2> a(w(), {4, 5});
  BOOST_TEST(crown_test::what_of<crown::argument_error>([&] {
               (void)a.on(n());
             }).find("image out of range [0, " + std::to_string(n()) + ")") != std::string::npos);
  BOOST_TEST(crown_test::what_of<crown::argument_error>([&] {
               (void)a.on(0).get({4, 0});
             }).find("index 4 of dimension 0 is out of range [0, 4)") != std::string::npos);
  BOOST_TEST(crown_test::what_of<crown::argument_error>([&] {
               a.on(0).put(std::vector<int>(19));
             }).find("19 elements given for a block of 20") != std::string::npos);
  // Device heap exhausted: named on every member, with the heap's size and GPU.
  const std::string full =
      crown_test::what_of<crown::error>([] { dcoarray<char> huge(w(), std::size_t{1} << 44); });
  BOOST_TEST(full.find("device heap exhausted: ") != std::string::npos, full);
  BOOST_TEST(full.find("raise CROWN_GPU_HEAP_SIZE") != std::string::npos, full);
  BOOST_TEST(full.find("on GPU " + std::to_string(crown::detail::device_ordinal())) !=
             std::string::npos);
  // The heap still works afterwards.
  dcoarray<int> after(w(), 8);
  after.on(right()).put({3}, 42);
  crown::sync_all();
  BOOST_TEST(after.on(me()).get({3}) == 42);
}

namespace {
boost::test_tools::assertion_result two_gpus_visible(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result r = gpu_test::device_count() >= 2;
  r.message() << "needs a second GPU for a stream of another GPU (" << gpu_test::device_count()
              << " visible)";
  return r;
}
} // namespace

BOOST_AUTO_TEST_CASE(a_stream_of_another_gpu_is_refused_before_anything_moves,
                     *boost::unit_test::precondition(two_gpus_visible)) {
  dcoarray<int> a(w(), 64);
  const int mine = crown::detail::device_ordinal();
  gpu_test::use_device((mine + 1) % gpu_test::device_count());
  gpu_test::stream other;
  gpu_test::use_device(mine);
  const std::vector<int> data = iota_from(5, 64);
  int* pinned = static_cast<int*>(gpu_test::pinned_alloc(64 * sizeof(int)));
  std::copy(data.begin(), data.end(), pinned);
  const std::string what = crown_test::what_of<crown::argument_error>([&] {
    (void)a.on(right()).put_async({pinned, 64}, other.get()).wait();
  });
  BOOST_TEST(what.find("the stream belongs to GPU ") != std::string::npos, what);
  BOOST_TEST(what.find("device heap is on GPU " + std::to_string(mine)) != std::string::npos, what);
  gpu_test::pinned_free(pinned);
  crown::sync_all();
  BOOST_TEST(own_block(a) == std::vector<int>(64, 0)); // nothing was put
}

BOOST_AUTO_TEST_CASE(device_memory_in_a_host_coarray_is_refused_under_check) {
  if (!env_is("CROWN_CHECK", "1")) return; // the checks cost a driver call: CROWN_CHECK=1 only
  crown::coarray<int> h(w(), 16);
  gpu_test::buffer dev(16 * sizeof(int));
  const std::string m = crown_test::what_of<crown::argument_error>([&] {
    h.on(right()).put({static_cast<const int*>(dev.get()), 16});
  });
  BOOST_TEST(m.find("(CROWN_CHECK=1): the buffer at ") != std::string::npos, m);
  BOOST_TEST(m.find("is device memory of GPU ") != std::string::npos, m);
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(images_on_other_hosts_are_reached_by_staged_transfers) {
  const auto& topo = crown::this_runtime().topology();
  if (!topo.multi_host() || n() % 2 != 0) return; // CROWN_FAKE_HOSTS=2 at 2 and 4 ranks runs this
  const int other = (me() + n() / 2) % n(); // hosts split block-wise: the same partner both ways
  BOOST_TEST_REQUIRE(topo.all()[other].host_index != topo.self().host_index);
  const auto& t = crown::this_runtime().transports();
  BOOST_TEST_MESSAGE("device memory off-host: " << t.device_offhost << " (" << t.device_offhost_why
                                                << ")");
  BOOST_TEST(t.device_offhost == "staged");
  BOOST_TEST(std::string(crown::device_link(other)) == "staged");
  BOOST_TEST(std::string(crown::device_link(me())) == "self");
  for (const auto& p : topo.all())
    if (p.host_index == topo.self().host_index && p.rank != me())
      BOOST_TEST(std::string(crown::device_link(p.rank)) == "mapped");

  // 5 MiB and 12 bytes: five full 1 MiB chunks and a short one through four slots.
  const std::size_t count = (std::size_t{5} << 20) / sizeof(int) + 3;
  dcoarray<int> a(w(), count);
  a.on(other).put(iota_from(7 * me(), count)); // from pageable host memory, sent as it is
  crown::sync_all();
  BOOST_TEST(own_block(a) == iota_from(7 * other, count));
  // Device memory both ways, through the staging slots.
  gpu_test::buffer src(count * sizeof(int)), dst(count * sizeof(int));
  gpu_test::fill_iota(static_cast<int*>(src.get()), count, -3 * me(), nullptr);
  gpu_test::synchronize();
  crown::sync_all();
  a.on(other).put({static_cast<const int*>(src.get()), count});
  crown::sync_all();
  a.on(other).get({static_cast<int*>(dst.get()), count}); // what this rank put there
  std::vector<int> seen(count);
  dst.download(seen.data(), count * sizeof(int));
  BOOST_TEST(seen == iota_from(-3 * me(), count));
  crown::sync_all();

  // Elements and a strided section, put and read back across.
  dcoarray<int, 2> b(w(), {8, 10});
  const crown::section<2> s{crown::triplet{1, 7, 2}, crown::triplet{0, 10, 3}}; // 3 x 4
  b.on(other).put(s, iota_from(10 * me(), 12));
  b.on(other).put({7, 9}, 100 + me());
  crown::sync_all();
  std::vector<int> back(12);
  b.on(other).get(s, back);
  BOOST_TEST(back == iota_from(10 * me(), 12));
  BOOST_TEST(b.on(other).get({7, 9}) == 100 + me());
  BOOST_TEST(b.on(me()).get({3, 3}) == 10 * other + 5);
  BOOST_TEST(b.on(me()).get({0, 1}) == 0); // outside the section: untouched

  // A section of device memory (1.4 MB) whose 3,980-byte rows straddle the 1 MiB chunks:
  // chunks of several runs, a run split between two, through the slots both ways.
  dcoarray<int, 2> big(w(), {700, 1000});
  const crown::section<2> rows{crown::triplet{1, 699, 2}, crown::triplet{3, 998, 1}};
  const std::size_t cells = std::size_t{349} * 995;
  gpu_test::buffer from(cells * sizeof(int)), into(cells * sizeof(int));
  gpu_test::fill_iota(static_cast<int*>(from.get()), cells, 5 * me(), nullptr);
  gpu_test::synchronize();
  big.on(other).put(rows, std::span<const int>(static_cast<const int*>(from.get()), cells));
  crown::sync_all();
  big.on(other).get(rows, std::span<int>(static_cast<int*>(into.get()), cells));
  std::vector<int> got(cells);
  into.download(got.data(), cells * sizeof(int));
  BOOST_TEST(got == iota_from(5 * me(), cells));
  BOOST_TEST(big.on(me()).get({1, 3}) == 5 * other); // the partner's first cell
  BOOST_TEST(big.on(me()).get({697, 997}) == 5 * other + static_cast<int>(cells) - 1);
  BOOST_TEST(big.on(me()).get({2, 3}) == 0);   // a row between: untouched
  BOOST_TEST(big.on(me()).get({1, 998}) == 0); // past the section's columns
  crown::sync_all();

  // Stream order: a kernel fills the source on a stream and the put follows it there;
  // a cross-host transfer is complete when put_async returns.
  gpu_test::stream st;
  gpu_test::fill_iota(static_cast<int*>(src.get()), count, 11 * me(), st.get());
  crown::completion c =
      a.on(other).put_async({static_cast<const int*>(src.get()), count}, st.get());
  BOOST_TEST(c.test());
  crown::sync_all();
  BOOST_TEST(own_block(a) == iota_from(11 * other, count));
  int* pinned = static_cast<int*>(gpu_test::pinned_alloc(count * sizeof(int)));
  crown::completion g = a.on(other).get_async({pinned, count}, st.get());
  st.synchronize();
  BOOST_TEST(g.test());
  BOOST_TEST(std::vector<int>(pinned, pinned + count) == iota_from(11 * me(), count));
  gpu_test::pinned_free(pinned);

  // What staged transfers do not carry, named.
  dcoarray<std::int64_t> f(w(), 4);
  const std::string atomic =
      crown_test::what_of<crown::state_error>([&] { (void)f.on(other).fetch_add({0}, 1); });
  BOOST_TEST(atomic.find("is reached by staged transfers, which carry puts and gets only") !=
                 std::string::npos,
             atomic);
  const std::string view = crown_test::what_of<crown::argument_error>([&] { (void)a.device(); });
  BOOST_TEST(view.find("a kernel view reaches images of its own host only") != std::string::npos,
             view);
  crown::sync_all();
}
