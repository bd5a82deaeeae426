// coarray<T,N>: transfers of blocks, elements and strided sections, allocation, bad input.
#include <boost/test/unit_test.hpp>
#include <crown/crown.hpp>
#include <harness/crown_test.hpp>
#include <numeric>

using namespace crown_test; // w(), me(), n(), left(), right(), what_of()

namespace {

double f(int image, std::size_t i, std::size_t j, std::size_t k) {
  return image * 1000000.0 + static_cast<double>(i * 10000 + j * 100 + k);
}
} // namespace

BOOST_AUTO_TEST_CASE(ring_shift_moves_every_element) {
  crown::coarray<int> a(w(), 1000);
  BOOST_TEST(a.num_images() == n());
  BOOST_TEST(a.this_image() == me());
  for (int v : a.flat()) BOOST_TEST(v == 0); // allocations start zeroed
  crown::sync_all(w());                      // ... and nobody writes before all have looked
  std::vector<int> mine(1000);
  std::iota(mine.begin(), mine.end(), me() * 1000);
  a.on(right()).put(mine);
  crown::sync_all(w());
  for (int i = 0; i < 1000; ++i) BOOST_TEST(a.local()[i] == left() * 1000 + i);
  std::vector<int> back(1000);
  a[right()].get(back); // what I put there
  BOOST_TEST(back == mine);
  crown::sync_all(w());
}

BOOST_AUTO_TEST_CASE(all_to_all_single_elements) {
  crown::coarray<std::int64_t> a(w(), static_cast<std::size_t>(n()));
  for (int t = 0; t < n(); ++t) a.on(t).put({static_cast<std::size_t>(me())}, 100 * me() + t);
  crown::sync_all();
  for (int s = 0; s < n(); ++s) BOOST_TEST(a(s) == 100 * s + me());
  for (int t = 0; t < n(); ++t)
    BOOST_TEST(a.on(t).get({static_cast<std::size_t>(me())}) == 100 * me() + t);
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(strided_sections_in_every_dimension) {
  crown::coarray<double, 3> a(w(), {4, 5, 6});
  auto v = a.local();
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 5; ++j)
      for (std::size_t k = 0; k < 6; ++k) v(i, j, k) = f(me(), i, j, k);
  crown::sync_all();
  const std::vector<crown::section<3>> sections = {
      {{{1, 4, 2}, {0, 5, 3}, {2, 6, 1}}}, // strides in the outer dimensions
      {{{0, 4, 1}, {1, 5, 1}, {0, 6, 2}}}, // innermost stride
      {{{3, 4, 1}, {0, 5, 1}, {0, 6, 1}}}, // one whole plane: a single run
      {{{0, 4, 3}, {4, 5, 1}, {5, 6, 1}}}, // single elements
      {{{2, 2, 1}, {0, 5, 1}, {0, 6, 1}}}, // empty
  };
  for (const auto& s : sections) {
    std::vector<double> expected;
    for (std::size_t i = s[0].begin; i < s[0].end; i += s[0].stride)
      for (std::size_t j = s[1].begin; j < s[1].end; j += s[1].stride)
        for (std::size_t k = s[2].begin; k < s[2].end; k += s[2].stride)
          expected.push_back(f(right(), i, j, k));
    std::vector<double> got(expected.size(), -1.0);
    a.on(right()).get(s, got);
    BOOST_TEST(got == expected, boost::test_tools::per_element());
  }
  crown::sync_all();

  // put a section into a zeroed neighbour; only the section changes
  crown::coarray<double, 2> b(w(), {6, 7});
  const crown::section<2> s{{{1, 6, 2}, {0, 7, 3}}};
  std::vector<double> values;
  for (std::size_t i = 1; i < 6; i += 2)
    for (std::size_t j = 0; j < 7; j += 3) values.push_back(f(me(), i, j, 0));
  b.on(right()).put(s, values);
  crown::sync_all();
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 7; ++j) {
      const bool in = i % 2 == 1 && j % 3 == 0;
      BOOST_TEST(b(i, j) == (in ? f(left(), i, j, 0) : 0.0));
    }
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(large_transfers_are_chunked) {
  crown::detail::set_transfer_chunk_bytes(1000); // force many chunks on the transport path
  crown::coarray<std::uint32_t, 2> a(w(), {64, 1024});
  std::vector<std::uint32_t> mine(a.size());
  std::iota(mine.begin(), mine.end(), static_cast<std::uint32_t>(me()) << 20);
  a.on(right()).put(mine);
  crown::sync_all();
  bool all_ok = true;
  for (std::size_t i = 0; i < a.size(); ++i)
    all_ok = all_ok && a.flat()[i] == (static_cast<std::uint32_t>(left()) << 20) + i;
  BOOST_TEST(all_ok);
  std::vector<std::uint32_t> column(64);
  a.on(right()).get({{{0, 64, 1}, {5, 6, 1}}}, column);
  for (std::size_t i = 0; i < 64; ++i)
    BOOST_TEST(column[i] == (static_cast<std::uint32_t>(me()) << 20) + i * 1024 + 5);
  crown::detail::set_transfer_chunk_bytes(std::size_t{1} << 30);
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(sub_mesh_allocations_need_only_their_members) {
  const int c = n() % 2 == 0 ? 2 : 1;
  const auto grid = w().reshape({{"row", -1}, {"col", c}});
  const auto row = grid.sub({"col"});
  const auto col = grid.sub({"row"});
  // Different rows allocate different amounts first, so the heaps diverge; the column
  // allocation must still agree on one offset among its members.
  std::vector<crown::coarray<char>> filler;
  for (int k = 0; k <= grid.coordinate("row"); ++k) filler.emplace_back(row, 100 + 64 * k);
  crown::coarray<int> a(col, 4);
  BOOST_TEST(a.num_images() == col.size());
  const int below = (a.this_image() + 1) % a.num_images();
  a.on(below).put({0}, 7 + me());
  crown::sync_all(col);
  const int above = (a.this_image() + a.num_images() - 1) % a.num_images();
  BOOST_TEST(a(0) == 7 + col.ranks()[above]);
  crown::sync_all(col);
}

BOOST_AUTO_TEST_CASE(bad_input_names_rank_and_values) {
  crown::coarray<double, 2> a(w(), {4, 4});
  auto m = what_of<crown::argument_error>([&] { (void)a.on(n()); });
  BOOST_TEST(m.find("access to image " + std::to_string(n()) + ": image out of range [0, " +
                    std::to_string(n()) + ")") != std::string::npos,
             m);
  BOOST_TEST(m.find("rank " + std::to_string(me())) != std::string::npos, m);
  BOOST_CHECK_THROW((void)a.on(-1), crown::argument_error);
  std::vector<double> buf(6);
  m = what_of<crown::argument_error>([&] { a.on(right()).get({{{0, 5, 1}, {0, 4, 1}}}, buf); });
  BOOST_TEST(m.find("dimension 0 range [0, 5) is outside the extent 4") != std::string::npos, m);
  m = what_of<crown::argument_error>([&] { a.on(right()).get({{{0, 4, 0}, {0, 4, 1}}}, buf); });
  BOOST_TEST(m.find("dimension 0 has stride 0") != std::string::npos, m);
  m = what_of<crown::argument_error>([&] {
    a.on(right()).get({{{0, 4, 1}, {0, 4, static_cast<std::size_t>(-2)}}}, buf);
  });
  BOOST_TEST(m.find("dimension 1 has stride -2 (strides are >= 1)") != std::string::npos, m);
  m = what_of<crown::argument_error>([&] { a.on(right()).get({{{0, 2, 1}, {0, 2, 1}}}, buf); });
  BOOST_TEST(m.find("the section has 4 elements but 6 were given") != std::string::npos, m);
  m = what_of<crown::argument_error>([&] { a.on(right()).put(buf); });
  BOOST_TEST(m.find("6 elements given for a block of 16") != std::string::npos, m);
  m = what_of<crown::argument_error>([&] { (void)a.on(right()).get({4, 0}); });
  BOOST_TEST(m.find("index 4 of dimension 0 is out of range [0, 4)") != std::string::npos, m);

  // allocations that differ between ranks: every rank throws, naming a differing rank
  if (n() > 1) {
    const std::size_t size = me() == 0 ? 11 : 10;
    m = what_of<crown::argument_error>([&] { crown::coarray<float> bad(w(), size); });
    const std::string other = me() == 0 ? "10" : "11";
    BOOST_TEST(m.find("size in bytes is " + std::to_string(size * 4) + " here but " +
                      std::to_string(std::stoi(other) * 4) + " on rank") != std::string::npos,
               m);
    m = what_of<crown::argument_error>([&] {
      if (me() == 0)
        crown::coarray<float> bad(w(), 10);
      else
        crown::coarray<std::int32_t> bad(w(), 10);
    });
    BOOST_TEST(m.find("element type is") != std::string::npos, m);
  }
  // a heap that cannot hold the block: every rank throws and says what to raise
  const std::size_t heap = crown::this_runtime().config().heap_size;
  m = what_of<crown::error>([&] { crown::coarray<char> huge(w(), heap + 1); });
  BOOST_TEST(m.find("symmetric heap full") != std::string::npos, m);
  BOOST_TEST(m.find("raise CROWN_HEAP_SIZE") != std::string::npos, m);
  // the failed attempts left the heap usable
  crown::coarray<int> after(w(), 3);
  after.on(right()).put({2}, me());
  crown::sync_all();
  BOOST_TEST(after(2) == left());

  crown::coarray<int> moved(w(), 2);
  crown::coarray<int> target(std::move(moved));
  m = what_of<crown::state_error>([&] { (void)moved.data(); });
  BOOST_TEST(m.find("used after it was moved from") != std::string::npos, m);
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(global_pointers_cross_ranks) {
  auto mine = crown::allocate<std::int64_t>(4);
  BOOST_TEST(mine.rank() == me());
  BOOST_TEST(mine.local() != nullptr);
  // pass the pointer to the right neighbour over MPI; it writes and adds into it
  std::uint64_t wire[2] = {static_cast<std::uint64_t>(mine.rank()), mine.offset()}, theirs[2];
  MPI_Sendrecv(wire, 2, MPI_UINT64_T, right(), 5, theirs, 2, MPI_UINT64_T, left(), 5, w().comm(),
               MPI_STATUS_IGNORE);
  const crown::global_ptr<std::int64_t> from_left(static_cast<int>(theirs[0]), theirs[1]);
  BOOST_TEST(from_left.rank() == left());
  crown::sync_all();
  // each rank writes into the pointer it received (owned by its left neighbour)
  (from_left + 1).put(static_cast<std::int64_t>(100 + me()));
  (void)(from_left + 2).fetch_add(5);
  crown::sync_all();
  const std::int64_t got = (mine + 1).get();
  BOOST_TEST(got == 100 + right());
  BOOST_TEST((mine + 2).fetch_add(0) == 5);
  crown::sync_all();
  if (n() > 1) {
    const auto m = what_of<crown::argument_error>([&] { crown::deallocate(from_left); });
    BOOST_TEST(m.find("only the owning rank can free it") != std::string::npos, m);
  }
  crown::deallocate(mine);
  const auto m = what_of<crown::argument_error>([&] { crown::deallocate(mine); });
  BOOST_TEST(m.find("freed twice, or never allocated") != std::string::npos, m);
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(async_transfers_complete_locally_then_remotely) {
  crown::coarray<double> a(w(), 4096), b(w(), 4096);
  std::vector<double> x(4096, me() + 0.5), y(4096, me() + 0.25);
  std::vector<crown::completion> pending;
  pending.push_back(a.on(right()).put_async(x));
  pending.push_back(b.on(right()).put_async(y));
  pending[0] += std::move(pending[1]); // merged: waiting on one waits on both
  BOOST_TEST(pending[1].done());
  pending[0].wait_local();
  std::fill(x.begin(), x.end(), -1.0); // the source may be reused after local completion
  crown::wait_all(pending);
  crown::sync_all();
  BOOST_TEST(a(4095) == left() + 0.5);
  BOOST_TEST(b(0) == left() + 0.25);
  std::vector<double> back(4096);
  {
    auto c = a.on(left()).get_async(back); // completes at the latest when it goes out of scope
  }
  BOOST_TEST(back[17] == (left() + n() - 1) % n() + 0.5); // what my left neighbour's left put
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(async_sections_complete_like_blocks) {
  // Every other column of rows 1, 3, 5 into the right neighbour, and the same section
  // back from the left one; several in flight at once.
  crown::coarray<std::int64_t, 2> a(w(), {7, 9});
  const crown::section<2> s{{{1, 7, 2}, {0, 9, 2}}};     // 3 x 5 elements
  const crown::section<2> other{{{0, 6, 2}, {1, 9, 2}}}; // 3 x 4, disjoint from s
  std::vector<std::int64_t> out(15), in(15, -1), again(12);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = me() * 1000 + static_cast<std::int64_t>(i);
  for (std::size_t i = 0; i < again.size(); ++i) again[i] = -static_cast<std::int64_t>(i) - 1;
  crown::completion c = a.on(right()).put_async(s, out);
  c.wait();
  crown::sync_all();
  for (std::size_t r = 0; r < 3; ++r)
    for (std::size_t k = 0; k < 5; ++k)
      BOOST_TEST(a(1 + 2 * r, 2 * k) == left() * 1000 + static_cast<std::int64_t>(r * 5 + k));
  BOOST_TEST(a(0, 0) == 0); // outside the section: untouched
  BOOST_TEST(a(1, 1) == 0);
  crown::sync_all();
  {
    std::vector<crown::completion> both;
    both.push_back(a.on(left()).get_async(s, in));
    both.push_back(a.on(me()).put_async(other, again)); // while the left reads s
    crown::wait_all(both);
  }
  const int left_of_left = (left() + n() - 1) % n();
  for (std::size_t i = 0; i < in.size(); ++i)
    BOOST_TEST(in[i] == left_of_left * 1000 + static_cast<std::int64_t>(i));
  crown::sync_all();
  BOOST_TEST(a(4, 7) == -12);
  const auto m = what_of<crown::argument_error>(
      [&] { (void)a.on(0).put_async(s, std::span<const std::int64_t>(again).subspan(0, 3)); });
  BOOST_TEST(m.find("the section has 15 elements but 3") != std::string::npos, m);
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(memory_kinds_without_a_heap_are_refused) {
  // Device memory needs a device heap on every member (a GPU, CROWN_GPU_HEAP_SIZE > 0);
  // without one, asking for it is a clear error on every member, not a silent host
  // allocation (tests/gpu/test_no_device.cpp checks the whole message).
  int gpus = crown::this_runtime().topology().host().gpus;
  MPI_Allreduce(MPI_IN_PLACE, &gpus, 1, MPI_INT, MPI_MIN, w().comm());
  if (gpus == 0) {
    const auto m = what_of<crown::state_error>(
        [] { crown::coarray<float, 1, crown::memory_kind::cuda> d(crown::world(), 16); });
    BOOST_TEST(m.find("memory_kind::cuda needs a device heap") != std::string::npos, m);
  }
  crown::coarray<float, 1, crown::memory_kind::host> h(w(), 16); // the default, spelled out
  BOOST_TEST(h.size() == 16u);
}

BOOST_AUTO_TEST_CASE(fence_orders_asynchronous_puts_to_one_target) {
  // Two asynchronous puts to the same elements with a fence between them: the second
  // lands last on every backend, and quiet (sync_all) completes both without a wait().
  crown::coarray<std::int64_t> a(w(), 4096);
  std::vector<std::int64_t> first(4096, 1), second(4096, 2);
  crown::sync_all();
  {
    crown::completion c1 = a.on(right()).put_async(first);
    crown::fence();
    crown::completion c2 = a.on(right()).put_async(second);
    crown::sync_all(); // completes both, and orders them before every image's loads
    BOOST_TEST(c1.test());
    BOOST_TEST(c2.test());
  }
  BOOST_TEST(a(0) == 2);
  BOOST_TEST(a(4095) == 2);
  crown::sync_all();
}
