// remote_buffer (issue 19): ordinary memory of one rank read and written by the others.
// Every rank registers a vector, the handles travel through MPI as cereal bytes, and
// each rank reads and writes its neighbours' memory; values checked against what the
// owner put there. CROWNTEST_BUFFER_PATHS lists the paths a variant must use towards
// other ranks (process_vm, ucx, am), and every listed one must be seen by some rank.
#include "transport/am_codec.hpp"   // am_status, for the owner's answers
#include "transport/test_hooks.hpp" // crown::detail knobs, not installed
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cereal/archives/binary.hpp>
#include <chrono>
#include <crown/crown.hpp>
#include <crown/remote_buffer.hpp>
#include <cstdlib>
#include <harness/crown_test.hpp>
#include <mpi.h>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace crown_test; // w(), me(), n(), left(), right(), what_of()

namespace {

constexpr std::size_t count = 10000;

double value_of(int rank, std::size_t i) { return rank * 1e6 + static_cast<double>(i); }

std::vector<double> owned_values(int rank, std::size_t elements = count) {
  std::vector<double> v(elements);
  for (std::size_t i = 0; i < elements; ++i) v[i] = value_of(rank, i);
  return v;
}

/// Every rank's handle, as every rank received it: serialised, sent through MPI,
/// read back (so none of them owns, except the caller's own original).
template <typename T, typename U = T>
std::vector<crown::remote_buffer<U>> exchange(const crown::remote_buffer<T>& mine) {
  std::ostringstream out;
  {
    cereal::BinaryOutputArchive ar(out);
    ar(mine);
  }
  const std::string bytes = out.str();
  int len = static_cast<int>(bytes.size());
  std::vector<int> lens(static_cast<std::size_t>(n())), at(static_cast<std::size_t>(n()));
  MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, w().comm());
  int total = 0;
  for (int r = 0; r < n(); ++r) {
    at[static_cast<std::size_t>(r)] = total;
    total += lens[static_cast<std::size_t>(r)];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  MPI_Allgatherv(bytes.data(), len, MPI_BYTE, all.data(), lens.data(), at.data(), MPI_BYTE,
                 w().comm());
  std::vector<crown::remote_buffer<U>> handles(static_cast<std::size_t>(n()));
  for (int r = 0; r < n(); ++r) {
    std::istringstream in(all.substr(static_cast<std::size_t>(at[static_cast<std::size_t>(r)]),
                                     static_cast<std::size_t>(lens[static_cast<std::size_t>(r)])));
    cereal::BinaryInputArchive ar(in);
    ar(handles[static_cast<std::size_t>(r)]);
  }
  return handles;
}

std::set<std::string> expected_paths() {
  std::set<std::string> paths;
  if (const char* env = std::getenv("CROWNTEST_BUFFER_PATHS")) {
    std::stringstream list(env);
    for (std::string p; std::getline(list, p, ',');) paths.insert(p);
  }
  return paths;
}

/// `f` must throw E (what_of returns "no exception" otherwise).
template <typename E, typename F>
void expect_throw(F&& f) {
  BOOST_TEST(what_of<E>(std::forward<F>(f)) != "no exception");
}

} // namespace

BOOST_AUTO_TEST_CASE(every_rank_reads_every_buffer_whole_and_in_part) {
  auto data = owned_values(me());
  const crown::remote_buffer<double> mine(std::span<double>(data), "values");
  BOOST_TEST(mine.owns());
  BOOST_TEST(mine.size() == count);
  BOOST_TEST(mine.rank() == me());
  const auto handles = exchange(mine);
  for (int r = 0; r < n(); ++r) {
    const auto& b = handles[static_cast<std::size_t>(r)];
    BOOST_TEST(!b.owns());
    BOOST_TEST(b.rank() == r);
    BOOST_TEST(b.label() == "values");
    std::vector<double> whole(count, -1.0);
    b.read_into(whole);
    BOOST_TEST(whole == owned_values(r), boost::test_tools::per_element());
    std::vector<double> part(7, -1.0);
    b.read_into(part, count - 7); // the last seven
    for (std::size_t i = 0; i < part.size(); ++i) BOOST_TEST(part[i] == value_of(r, count - 7 + i));
  }
  crown::sync_all(w()); // nobody drops its buffer while another still reads it
}

BOOST_AUTO_TEST_CASE(writes_land_in_the_owners_memory) {
  auto data = owned_values(me());
  const crown::remote_buffer<double> mine(std::span<double>(data), "target");
  const auto handles = exchange(mine);
  // Each rank writes [100 * (me + 1), +50) of its right neighbour's buffer.
  std::vector<double> mark(50);
  std::iota(mark.begin(), mark.end(), -1000.0 * (me() + 1));
  handles[static_cast<std::size_t>(right())].write_from(std::span<const double>(mark),
                                                        100 * static_cast<std::size_t>(me() + 1));
  crown::sync_all(w());
  const std::size_t from = 100 * static_cast<std::size_t>(left() + 1);
  for (std::size_t i = 0; i < count; ++i) {
    const bool marked = i >= from && i < from + 50;
    const double expected =
        marked ? -1000.0 * (left() + 1) + static_cast<double>(i - from) : value_of(me(), i);
    if (data[i] != expected) {
      BOOST_TEST(data[i] == expected, "element " << i);
      break;
    }
  }
  crown::sync_all(w());
}

BOOST_AUTO_TEST_CASE(each_path_is_the_one_the_configuration_asks_for) {
  std::vector<double> data(16);
  const crown::remote_buffer<double> mine{std::span<double>(data)};
  const auto handles = exchange(mine);
  BOOST_TEST(std::string(handles[static_cast<std::size_t>(me())].path()) == "local");
  const std::set<std::string> allowed = expected_paths();
  int seen[4] = {0, 0, 0, 0};
  const std::string names[4] = {"process_vm", "ucx", "am", "staged"};
  for (int r = 0; r < n(); ++r) {
    if (r == me()) continue;
    const std::string path = handles[static_cast<std::size_t>(r)].path();
    BOOST_TEST(allowed.count(path) == 1u,
               "rank " << me() << " reaches rank " << r << " by " << path);
    for (int k = 0; k < 4; ++k) seen[k] += path == names[k];
  }
  MPI_Allreduce(MPI_IN_PLACE, seen, 4, MPI_INT, MPI_SUM, w().comm());
  if (n() > 1)
    for (int k = 0; k < 4; ++k)
      BOOST_TEST((seen[k] > 0) == (allowed.count(names[k]) == 1), names[k] << " seen " << seen[k]);
  crown::sync_all(w());
}

BOOST_AUTO_TEST_CASE(a_batch_runs_in_order_across_buffers) {
  auto a = owned_values(me(), 64);
  std::vector<double> b(32, 0.0);
  const crown::remote_buffer<double> ra(std::span<double>(a), "a");
  const crown::remote_buffer<double> rb(std::span<double>(b), "b");
  const auto as = exchange(ra);
  const auto bs = exchange(rb);
  crown::sync_all(w());
  if (me() == 0) {
    const int t = n() - 1; // the last rank's buffers
    const auto& ta = as[static_cast<std::size_t>(t)];
    const auto& tb = bs[static_cast<std::size_t>(t)];
    const std::vector<double> ones(8, 1.5), twos(4, 2.5);
    std::vector<double> first(8), again(8), head(4), tail(16);
    crown::buffer_batch batch;
    batch
        .read_into(ta, std::span<double>(first), 0) // before the write: the owner's values
        .write_from(ta, std::span<const double>(ones), 0)
        .read_into(ta, std::span<double>(again), 0) // after it: the write's
        .write_from(tb, std::span<const double>(twos), 28)
        .read_into(tb, std::span<double>(head), 28)
        .read_into(ta, std::span<double>(tail), 48);
    BOOST_TEST(batch.size() == 6u);
    batch.run();
    BOOST_TEST(batch.size() == 0u);
    for (std::size_t i = 0; i < 8; ++i) BOOST_TEST(first[i] == value_of(t, i));
    BOOST_TEST(again == ones, boost::test_tools::per_element());
    BOOST_TEST(head == twos, boost::test_tools::per_element());
    for (std::size_t i = 0; i < 16; ++i) BOOST_TEST(tail[i] == value_of(t, 48 + i));
  }
  crown::sync_all(w());
  if (me() == n() - 1) {
    for (std::size_t i = 0; i < 8; ++i) BOOST_TEST(a[i] == 1.5);
    for (std::size_t i = 28; i < 32; ++i) BOOST_TEST(b[i] == 2.5);
    BOOST_TEST(b[27] == 0.0);
  }
  crown::sync_all(w());
}

BOOST_AUTO_TEST_CASE(large_transfers_arrive_whole) {
  const std::size_t big = (17 << 20) / sizeof(double) + 3; // several 4 MiB requests
  std::vector<double> data(big);
  for (std::size_t i = 0; i < big; ++i)
    data[i] = static_cast<double>(me()) + 1e-7 * double(i % 997);
  const crown::remote_buffer<double> mine(std::span<double>(data), "big");
  const auto handles = exchange(mine);
  const auto& theirs = handles[static_cast<std::size_t>(right())];
  std::vector<double> got(big, -1.0);
  theirs.read_into(got);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < big; ++i)
    wrong += got[i] != static_cast<double>(right()) + 1e-7 * double(i % 997);
  BOOST_TEST(wrong == 0u);
  crown::sync_all(w());
  // Written back negated, then checked by the owner.
  for (double& x : got) x = -x;
  theirs.write_from(std::span<const double>(got));
  crown::sync_all(w());
  wrong = 0;
  for (std::size_t i = 0; i < big; ++i)
    wrong += data[i] != -(static_cast<double>(me()) + 1e-7 * double(i % 997));
  BOOST_TEST(wrong == 0u);
  crown::sync_all(w());
}

BOOST_AUTO_TEST_CASE(an_access_outside_the_buffer_names_it_and_moves_nothing) {
  auto data = owned_values(me(), 100);
  const crown::remote_buffer<double> mine(std::span<double>(data), "small");
  const auto handles = exchange(mine);
  const auto& theirs = handles[static_cast<std::size_t>(right())];
  std::vector<double> out(10, -1.0);
  const std::string why = what_of<crown::argument_error>([&] { theirs.read_into(out, 95); });
  BOOST_TEST(why.find("remote_buffer 'small' of rank " + std::to_string(right())) !=
                 std::string::npos,
             why);
  BOOST_TEST(why.find("[760, 840) fall outside the buffer") != std::string::npos, why);
  BOOST_TEST(out == std::vector<double>(10, -1.0), boost::test_tools::per_element());
  expect_throw<crown::argument_error>(
      [&] { theirs.write_from(std::span<const double>(out), std::size_t{1} << 61); });
  crown::sync_all(w());
  BOOST_TEST(data == owned_values(me(), 100), boost::test_tools::per_element());
  // An empty handle reaches nothing.
  const crown::remote_buffer<double> none;
  BOOST_TEST(!none.valid());
  expect_throw<crown::state_error>([&] { none.read_into(out); });
  crown::sync_all(w());
}

BOOST_AUTO_TEST_CASE(a_buffer_used_after_its_owner_dropped_it_fails_naming_it) {
  auto data = owned_values(me(), 100);
  crown::remote_buffer<double> mine(std::span<double>(data), "dropped");
  const auto handles = exchange(mine);
  {
    const crown::remote_buffer<double> copy = mine; // the owner's copies share it
    BOOST_TEST(copy.owns());
    mine = crown::remote_buffer<double>();
    std::vector<double> x(1);
    copy.read_into(x, 3);
    BOOST_TEST(x[0] == value_of(me(), 3));
  } // the last owning copy: freed
  crown::sync_all(w());
  std::vector<double> out(4, -1.0);
  for (int r = 0; r < n(); ++r) {
    const auto& b = handles[static_cast<std::size_t>(r)];
    const std::string why = what_of<crown::state_error>([&] { b.read_into(out); });
    BOOST_TEST(
        why.find("remote_buffer 'dropped' of rank " + std::to_string(r)) != std::string::npos, why);
    BOOST_TEST(why.find("its owner freed it") != std::string::npos, why);
    expect_throw<crown::state_error>([&] { b.write_from(std::span<const double>(out)); });
  }
  BOOST_TEST(data == owned_values(me(), 100), boost::test_tools::per_element());
  BOOST_TEST(out == std::vector<double>(4, -1.0), boost::test_tools::per_element());
  crown::sync_all(w());
  // A new buffer reuses the liveness word with the next generation: the old handles stay
  // refused, the new one works.
  std::vector<double> fresh(4, 42.0);
  crown::remote_buffer<double> again(std::span<double>(fresh), "again");
  const auto new_handles = exchange(again);
  for (int r = 0; r < n(); ++r) {
    expect_throw<crown::state_error>([&] { handles[static_cast<std::size_t>(r)].read_into(out); });
    new_handles[static_cast<std::size_t>(r)].read_into(out);
    BOOST_TEST(out == std::vector<double>(4, 42.0), boost::test_tools::per_element());
  }
  crown::sync_all(w());
  again.drop();
  BOOST_TEST(!again.owns());
  expect_throw<crown::state_error>([&] { again.read_into(out); });
  crown::sync_all(w());
}

BOOST_AUTO_TEST_CASE(a_handle_read_back_as_another_type_is_refused) {
  std::vector<double> data(8);
  const crown::remote_buffer<double> mine(std::span<double>(data), "typed");
  const std::string why =
      what_of<crown::argument_error>([&] { (void)exchange<double, float>(mine); });
  BOOST_TEST(why.find("elements of 8 bytes") != std::string::npos, why);
  crown::sync_all(w());
}

// The owners sit in their own MPI call (not Crown's) while rank 0 reads and writes their
// memory: kernel copies and UCX need nothing from them, requests need their progress
// thread, and so do the staging slots (an owner on this host, CROWN_SINGLE_COPY=0).
// Skipped where neither is the case (no progress thread).
BOOST_AUTO_TEST_CASE(owners_blocked_in_their_own_mpi_calls_are_still_reached) {
  auto data = owned_values(me(), 512);
  const crown::remote_buffer<double> mine(std::span<double>(data), "busy");
  const auto handles = exchange(mine);
  int reachable = 1;
  if (me() == 0)
    for (int r = 1; r < n(); ++r)
      if (const std::string path = handles[static_cast<std::size_t>(r)].path();
          (path == "am" || path == "staged") && !crown::this_runtime().transports().progress_thread)
        reachable = 0;
  MPI_Bcast(&reachable, 1, MPI_INT, 0, w().comm());
  if (!reachable) return;
  if (me() == 0) {
    for (int r = 1; r < n(); ++r) {
      const auto& b = handles[static_cast<std::size_t>(r)];
      std::vector<double> got(512);
      b.read_into(got);
      BOOST_TEST(got == owned_values(r, 512), boost::test_tools::per_element());
      const std::vector<double> mark(1, -5.0);
      b.write_from(mark, 511);
    }
  }
  MPI_Barrier(w().comm()); // the application's own MPI: no Crown call on the owners
  if (me() != 0) BOOST_TEST(data[511] == -5.0);
  crown::sync_all(w());
}

// The staging slots (lib/transport/host_staging.hpp) for transfers of every size: each
// rank reads its right neighbour's buffer whole (several chunks, an odd tail) and in
// part at odd offsets, writes part of it back negated and reads that back in one batch;
// the owner checks its memory. Owners on this rank's host copy through the slots, the
// others are reached as before; everyone is inside Crown (serving) throughout.
BOOST_AUTO_TEST_CASE(staged_transfers_through_the_reader_s_heap_arrive_whole) {
  crown::detail::set_host_staging_from(0);
  const std::size_t big = (3 << 20) / sizeof(double) + 5;
  auto data = owned_values(me(), big);
  const crown::remote_buffer<double> mine(std::span<double>(data), "staged");
  const auto handles = exchange(mine);
  const auto& theirs = handles[static_cast<std::size_t>(right())];
  const std::uint64_t posted_before = crown::detail::host_staging_posted();
  std::vector<double> got(big, -1.0);
  theirs.read_into(got);
  BOOST_TEST(got == owned_values(right(), big), boost::test_tools::per_element());
  std::vector<double> part(70001, -1.0);
  theirs.read_into(part, 12345);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < part.size(); ++i) wrong += part[i] != value_of(right(), 12345 + i);
  BOOST_TEST(wrong == 0u);
  std::vector<double> negated(part.size()), again(part.size(), 0.0);
  for (std::size_t i = 0; i < part.size(); ++i) negated[i] = -part[i];
  crown::buffer_batch batch;
  batch.write_from(theirs, std::span<const double>(negated), 12345)
      .read_into(theirs, std::span<double>(again), 12345); // after the write: its values
  batch.run();
  BOOST_TEST(again == negated, boost::test_tools::per_element());
  // The first request to the owner was a message; serving it, the owner began to watch
  // this rank's slots, and the later ones were posted there. (An owner descheduled for
  // 10 ms is left to kernel copies for a second: reading again after forgetting that
  // posts again.)
  if (const std::string path = theirs.path();
      crown::detail::heap_peer_address(right(), 0) && (path == "process_vm" || path == "staged")) {
    for (int again = 0; again < 20 && crown::detail::host_staging_posted() == posted_before;
         ++again) {
      crown::detail::set_host_staging_from(0);
      theirs.read_into(part, 12345);
    }
    BOOST_TEST(crown::detail::host_staging_posted() > posted_before);
  }
  crown::sync_all(w());
  wrong = 0;
  for (std::size_t i = 0; i < big; ++i) {
    const bool written = i >= 12345 && i < 12345 + part.size();
    wrong += data[i] != (written ? -value_of(me(), i) : value_of(me(), i));
  }
  BOOST_TEST(wrong == 0u);
  crown::detail::set_host_staging_from(std::nullopt);
  crown::sync_all(w());
}

BOOST_AUTO_TEST_CASE(a_full_heap_counts_the_staging_slots) {
  // A rank's first staged transfer takes slots in its heap until the runtime ends; an
  // allocation that fails later says how much of the heap they hold.
  // Every rank alike (the steps below are collective): staged only among one host's ranks.
  if (n() == 1 || !crown::detail::world_shares_memory()) return;
  crown::detail::set_host_staging_from(0);
  auto data = owned_values(me(), 1 << 16);
  const crown::remote_buffer<double> mine(std::span<double>(data), "staged");
  const auto handles = exchange(mine);
  std::vector<double> got(data.size(), -1.0);
  handles[static_cast<std::size_t>(right())].read_into(got);
  BOOST_TEST(got == owned_values(right(), data.size()), boost::test_tools::per_element());
  crown::detail::set_host_staging_from(std::nullopt);
  const std::size_t slots = crown::detail::host_staging_in_use();
  const std::size_t heap = crown::this_runtime().config().heap_size;
  // The whole heap: never free with the buffer's own block in it, slots or not.
  const auto m = what_of<crown::resource_error>([&] { crown::coarray<char> a(w(), heap); });
  BOOST_TEST(m.find("symmetric heap full") != std::string::npos, m);
  // Staged unless this variant's transport reads the owner's memory another way.
  const std::string named = std::to_string(slots) + " bytes are remote_buffer's staging slots";
  if (slots > 0)
    BOOST_TEST(m.find(named) != std::string::npos, m);
  else
    BOOST_TEST(m.find("staging slots") == std::string::npos, m);
  crown::sync_all(w());
}

// A request posted in a reader's slot is the reader's to write, so the owner checks
// it: a chunk larger than a slot, an unknown flag, a buffer it does not have (or not of
// that generation) and bytes outside the buffer are refused with their status, and
// nothing moves; a well-formed line is served.
BOOST_AUTO_TEST_CASE(malformed_posted_staged_requests_are_refused_and_move_nothing) {
  crown::detail::set_host_staging_from(0);
  const std::size_t elements = 65536; // 512 KiB: larger than a slot
  auto data = owned_values(me(), elements);
  const crown::remote_buffer<double> mine(std::span<double>(data), "posted");
  const auto handles = exchange(mine);
  const auto& theirs = handles[static_cast<std::size_t>(right())];
  std::vector<double> got(elements, -1.0);
  theirs.read_into(got); // a message at first: from now on its owner watches our slots
  theirs.read_into(got);
  BOOST_TEST(got == owned_values(right(), elements), boost::test_tools::per_element());
  using crown::detail::am_status;
  const auto& d = theirs.descriptor();
  const std::uint64_t put = std::uint64_t{1} << 32, bytes = elements * sizeof(double);
  const std::pair<crown::detail::raw_staged_line, am_status> cases[] = {
      {{d.id, 0, (256 << 10) + 1, d.generation | put}, am_status::refused}, // beyond the slot
      {{d.id, 0, 64, d.generation | std::uint64_t{1} << 40}, am_status::refused},
      {{d.id + 1000, 0, 64, d.generation | put}, am_status::buffer_freed},
      {{d.id, 0, 64, (d.generation + 1) | put}, am_status::buffer_freed},
      {{d.id, bytes - 8, 16, d.generation | put}, am_status::outside_buffer},
      {{d.id, 8, 8, d.generation}, am_status::ok}, // a get of one element
  };
  const bool staged = crown::detail::heap_peer_address(right(), 0) && right() != me() &&
                      std::string(theirs.path()) == "process_vm"; // otherwise no slots
  // The owner watches once it served the first message (late, if it was descheduled).
  bool watched = false;
  for (int again = 0; staged && again < 50 && !watched; ++again) {
    watched = crown::detail::post_raw_staged_line(right(), {d.id, 0, 8, d.generation}).has_value();
    if (!watched) {
      crown::detail::set_host_staging_from(0);
      theirs.read_into(got);
    }
  }
  BOOST_TEST(watched == staged);
  for (const auto& [line, expected] : cases) {
    if (!watched) break;
    const auto status = crown::detail::post_raw_staged_line(right(), line);
    BOOST_TEST(status.has_value());
    if (!status) break;
    BOOST_TEST(*status == static_cast<int>(expected),
               "line for " << line.bytes << " bytes at " << line.offset << ": " << *status);
  }
  crown::sync_all(w());
  BOOST_TEST(data == owned_values(me(), elements), boost::test_tools::per_element());
  crown::detail::set_host_staging_from(std::nullopt);
  crown::sync_all(w());
}

// An owner on this host that waits in its own MPI call does not serve its reader's
// staged chunks: after 10 ms they are cancelled and kernel copies move them and the
// rest. Rank 0 then writes through the same slots (on a thread of its own) and only
// then lets rank 1 go: back in Crown, rank 1 meets its cancelled requests first and
// must refuse them, not copy its old values into slots that now hold the write's.
// Twice: with the requests posted in the slots (rank 1 watches them once it served one)
// and, rank 0 having forgotten that, as active messages that rank 1 receives late.
// Only where kernel copies reach the owner (elsewhere staged transfers wait for it).
BOOST_AUTO_TEST_CASE(an_owner_away_from_crown_delays_staged_transfers_only_briefly) {
  const std::size_t elements = (1 << 20) / sizeof(double); // four chunks: every slot
  auto data = owned_values(me(), elements);
  const crown::remote_buffer<double> mine(std::span<double>(data), "away");
  const auto handles = exchange(mine);
  int kernel = n() > 1 && std::string(handles[1].path()) == "process_vm";
  MPI_Bcast(&kernel, 1, MPI_INT, 0, w().comm());
  if (!kernel) return;
  MPI_Comm go; // the application's own messages, apart from Crown's
  MPI_Comm_dup(w().comm(), &go);
  for (const bool messages : {false, true}) {
    crown::detail::set_host_staging_from(0);
    const std::vector<double> written(elements, messages ? 8.0 : 7.0);
    if (me() == 0) {
      if (messages) crown::detail::forget_slot_watchers();
      const std::uint64_t posted_before = crown::detail::host_staging_posted();
      std::vector<double> got(elements, -1.0);
      handles[1].read_into(got); // cancelled after 10 ms, read by the kernel
      BOOST_TEST(got == owned_values(1, elements), boost::test_tools::per_element());
      crown::detail::set_host_staging_from(0); // forgets that rank 1 was slow
      std::thread writer([&] { handles[1].write_from(std::span<const double>(written)); });
      std::this_thread::sleep_for(std::chrono::milliseconds(2)); // the slots are filled by now
      MPI_Send(nullptr, 0, MPI_BYTE, 1, 0, go);
      writer.join();
      if (messages) BOOST_TEST(crown::detail::host_staging_posted() == posted_before);
    } else if (me() == 1) {
      MPI_Recv(nullptr, 0, MPI_BYTE, 0, 0, go, MPI_STATUS_IGNORE);
    }
    crown::sync_all(w());
    if (me() == 1) {
      BOOST_TEST(data == written, boost::test_tools::per_element());
      const auto fresh = owned_values(1, elements);
      std::copy(fresh.begin(), fresh.end(), data.begin()); // the same memory: mine covers it
    }
    crown::sync_all(w());
  }
  crown::detail::set_host_staging_from(std::nullopt);
  MPI_Comm_free(&go);
  crown::sync_all(w());
}

// Rank 0 drops its buffer while every other rank writes and reads it as fast as it can:
// each access either completes whole or fails naming the buffer, and no write lands
// after the drop (the owner overwrites the memory then and checks it stayed so).
BOOST_AUTO_TEST_CASE(a_drop_during_accesses_loses_no_write_and_takes_none_after) {
  std::vector<double> data(4096, 0.0);
  crown::remote_buffer<double> mine(std::span<double>(data), "contended");
  const auto handles = exchange(mine);
  crown::sync_all(w());
  if (me() == 0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    while (std::chrono::steady_clock::now() < until) crown::progress(); // serve meanwhile
    mine.drop(); // waits for the accesses in progress
    std::fill(data.begin(), data.end(), 777.0);
  } else {
    const auto& b = handles[0];
    const std::vector<double> mark(4096, static_cast<double>(me()));
    std::vector<double> back(4096);
    bool freed = false;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    long accesses = 0;
    while (!freed && std::chrono::steady_clock::now() < give_up) {
      try {
        b.write_from(mark);
        b.read_into(back);
        accesses += 2;
      } catch (const crown::state_error& e) {
        freed =
            std::string(e.what()).find("remote_buffer 'contended' of rank 0") != std::string::npos;
        BOOST_TEST(freed, e.what());
        break;
      }
    }
    BOOST_TEST(freed);
    BOOST_TEST_MESSAGE("rank " << me() << ": " << accesses << " accesses before the drop");
  }
  crown::sync_all(w());
  if (me() == 0)
    BOOST_TEST(std::count(data.begin(), data.end(), 777.0) == 4096, "a write after the drop");
  crown::sync_all(w());
}
