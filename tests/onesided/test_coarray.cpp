// coarray<T,N>: transfers of blocks, elements and strided sections, allocation, bad input.
#include "transport/test_hooks.hpp" // crown::detail knobs, not installed
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
    // named, not given as hashes ("element type is 3300480254996884758 here but ...")
    BOOST_TEST(m.find(me() == 0
                          ? "element type is float here but int on rank 1"
                          : "element type is int here but float on rank 0") != std::string::npos,
               m);
    m = what_of<crown::argument_error>([&] {
      if (me() == 0)
        crown::coarray<double, 2> bad(w(), {2, 5});
      else
        crown::coarray<double> bad(w(), 10);
    });
    BOOST_TEST(m.find(me() == 0 ? "element type is double in 2 dimensions here but double on"
                                : "element type is double here but double in 2 dimensions on") !=
                   std::string::npos,
               m);
  }
  // a heap that cannot hold the block: every rank throws and says what to raise
  const std::size_t heap = crown::this_runtime().config().heap_size;
  m = what_of<crown::resource_error>([&] { crown::coarray<char> huge(w(), heap + 1); });
  BOOST_TEST(m.find("can never fit") != std::string::npos, m);
  BOOST_TEST(m.find("raise CROWN_HEAP_SIZE") != std::string::npos, m);
  m = what_of<crown::resource_error>([&] {
    crown::coarray<char> half(w(), heap / 2 + 1);
    crown::coarray<char> another(w(), heap / 2);
  });
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

// Sections are written with one brace per dimension; the old triple-brace spelling and a
// std::array of triplets name the same elements.
BOOST_AUTO_TEST_CASE(sections_take_one_brace_per_dimension) {
  const std::size_t rows = 5, cols = 7;
  crown::coarray<double, 2> a(w(), {rows, cols});
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) a(i, j) = f(me(), i, 0, j);
  crown::sync_all();
  std::vector<double> mine(3 * 3), old(3 * 3), from_array(3 * 3);
  a.on(right()).get({{0, rows, 2}, {0, cols, 3}}, mine); // a(0:5:2, 0:7:3)[right]
  a.on(right()).get({{{0, rows, 2}, {0, cols, 3}}}, old);
  a.on(right()).get(crown::section<2>(std::array<crown::triplet, 2>{{{0, rows, 2}, {0, cols, 3}}}),
                    from_array);
  std::size_t k = 0;
  for (std::size_t i = 0; i < rows; i += 2)
    for (std::size_t j = 0; j < cols; j += 3) BOOST_TEST(mine[k++] == f(right(), i, 0, j));
  BOOST_TEST(old == mine);
  BOOST_TEST(from_array == mine);
  std::vector<double> row(cols);
  a.on(left()).get({{1, 2}, crown::all(cols)}, row); // stride 1 by default
  for (std::size_t j = 0; j < cols; ++j) BOOST_TEST(row[j] == f(left(), 1, 0, j));
  crown::sync_all();

  crown::coarray<int> line(w(), 10); // 1-D: one triplet in braces
  std::vector<int> odd{1, 3, 5, 7, 9};
  line.on(right()).put({{1, 10, 2}}, odd);
  crown::coarray<int, 3> cube(w(), {2, 3, 4});
  std::vector<int> corner(2 * 2 * 2, me() + 1);
  cube.on(left()).put({{0, 2}, {0, 3, 2}, {1, 4, 2}}, corner);
  crown::sync_all();
  for (std::size_t i = 0; i < 10; ++i) BOOST_TEST(line(i) == (i % 2 ? static_cast<int>(i) : 0));
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t l = 0; l < 4; ++l)
        BOOST_TEST(cube(i, j, l) == (j % 2 == 0 && l % 2 == 1 ? right() + 1 : 0));
  crown::sync_all();
}

// Move assignment frees the target's block collectively and takes the source's; a
// leaked block would fill the heap within three rounds here.
BOOST_AUTO_TEST_CASE(move_assignment_frees_the_old_block_and_takes_the_new_one) {
  const std::size_t third = crown::this_runtime().config().heap_size / 3;
  crown::coarray<char> big(w(), third);
  for (int round = 0; round < 6; ++round) {
    big = crown::coarray<char>(w(), third); // a temporary: its block becomes big's
    big.on(right()).put({static_cast<std::size_t>(round)}, static_cast<char>('a' + me()));
    crown::sync_all();
    BOOST_TEST(big(static_cast<std::size_t>(round)) == static_cast<char>('a' + left()));
    BOOST_TEST(big.size() == third);
  }

  crown::coarray<int, 2> a(w(), {2, 2});
  crown::coarray<int, 2> b(w(), {3, 4});
  std::vector<int> mine(12);
  std::iota(mine.begin(), mine.end(), 100 * me());
  b.on(right()).put(mine);
  crown::sync_all();
  a = std::move(b);
  BOOST_TEST((a.extents() == std::array<std::size_t, 2>{3, 4}));
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j)
      BOOST_TEST(a(i, j) == 100 * left() + static_cast<int>(i * 4 + j));
  auto m = what_of<crown::state_error>([&] { (void)b.on(0); });
  BOOST_TEST(m.find("used after it was moved from") != std::string::npos, m);
  // the moved-from source may be assigned again
  b = crown::coarray<int, 2>(w(), {1, 1});
  b.on(left()).put({0, 0}, me());
  crown::sync_all();
  BOOST_TEST(b(0, 0) == right());
}

// Moving between coarrays of different meshes: the target's old block is freed over
// its old mesh (every member of that mesh assigns), and it then lives on the source's.
BOOST_AUTO_TEST_CASE(move_assignment_across_meshes_adopts_the_source_mesh) {
  std::vector<int> same_parity; // world ranks
  for (int r = world_rank() % 2; r < n(); r += 2) same_parity.push_back(r);
  const crown::mesh half({{"x", static_cast<int>(same_parity.size())}}, same_parity);
  const int hn = half.size(), hme = half.rank();
  crown::coarray<double> a(w(), 4);
  crown::coarray<double> b(half, 3);
  b.on((hme + 1) % hn).put(std::vector<double>{1.0 * hme, 2.0 * hme, 3.0 * hme});
  crown::sync_all(half);
  a = std::move(b); // every world rank assigns: a's old block is the world's
  BOOST_TEST(a.team() == half);
  BOOST_TEST(a.num_images() == hn);
  BOOST_TEST(a.size() == 3u);
  const int hleft = (hme + hn - 1) % hn;
  for (std::size_t i = 0; i < 3; ++i) BOOST_TEST(a(i) == (i + 1.0) * hleft);
  crown::sync_all(half);
}

// Bad input: a moved-from source empties the target (after freeing its block); self
// assignment changes nothing; swap is local, so one image may swap alone.
BOOST_AUTO_TEST_CASE(moved_from_sources_self_assignment_and_lone_swaps) {
  crown::coarray<int> a(w(), 5), gone(w(), 5);
  crown::coarray<int> taker(std::move(gone));
  a.on(right()).put({4}, me());
  crown::sync_all();
  crown::coarray<int>& alias = a;
  a = std::move(alias);
  BOOST_TEST(a(4) == left());
  a = std::move(gone);
  auto m = what_of<crown::state_error>([&] { (void)a.flat(); });
  BOOST_TEST(m.find("coarray<int32_t,1>: used after it was moved from") != std::string::npos, m);

  crown::coarray<int> u(w(), 3), v(w(), 3);
  u(0) = 1;
  v(0) = 2;
  if (me() == 0) { // no other image takes part: a collective here would hang
    std::swap(u, v);
    BOOST_TEST(u(0) == 2);
    u.swap(v);
    BOOST_TEST(u(0) == 1);
  }
  crown::sync_all();
  BOOST_TEST(u(0) == 1);
}

// Double buffering: every image writes its right neighbour's `next` from its own `cur`,
// then all swap; after k rounds each image holds the value from k images to its left.
BOOST_AUTO_TEST_CASE(swap_double_buffers_a_ring_shift) {
  crown::coarray<int> cur(w(), 1), next(w(), 1);
  cur(0) = me();
  for (int round = 1; round <= 5; ++round) {
    next.on(right()).put({0}, cur(0));
    crown::sync_all();
    std::swap(cur, next);
    BOOST_TEST(cur(0) == ((me() - round) % n() + n()) % n());
    crown::sync_all(); // nobody overwrites next (the old cur) before its owner read it
  }
  using std::swap;
  swap(cur, next); // the ADL swap: the same exchange
  BOOST_TEST(next(0) == ((me() - 5) % n() + n()) % n());
}
