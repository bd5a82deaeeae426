// Image control and atomics: sync_images, events, locks, critical, atomic operations.
#include "transport/test_hooks.hpp" // crown::detail knobs, not installed
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <crown/crown.hpp>
#include <harness/crown_test.hpp>

using namespace crown_test; // w(), me(), n(), left(), right(), what_of()

namespace {
constexpr int adds = 10000;
} // namespace

BOOST_AUTO_TEST_CASE(atomics_on_the_own_image) {
  // Through a cross-host transport an image's atomics on its own block go through the
  // transport too (UCX 1.13's self path got bitwise fetch operations wrong).
  crown::coarray<std::int64_t> a(w(), 1);
  crown::coarray<std::int32_t> b(w(), 1);
  const auto mine64 = a.on(me());
  const auto mine32 = b.on(me());
  mine64.atomic_define({0}, 12);
  BOOST_TEST(mine64.fetch_xor({0}, 5) == 12);
  BOOST_TEST(mine64.fetch_or({0}, 0x30) == 9);
  BOOST_TEST(mine64.fetch_and({0}, 0x21) == 0x39);
  BOOST_TEST(mine64.atomic_ref({0}) == 0x21);
  mine32.atomic_define({0}, -1);
  BOOST_TEST(mine32.fetch_and({0}, 0x0FF0) == -1);
  BOOST_TEST(mine32.fetch_xor({0}, 0x00F0) == 0x0FF0);
  BOOST_TEST(mine32.fetch_or({0}, 1) == 0x0F00);
  BOOST_TEST(mine32.atomic_ref({0}) == 0x0F01);
  BOOST_TEST(mine32.fetch_add({0}, 2) == 0x0F01);
  BOOST_TEST(b(0) == 0x0F03);
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(sync_images_orders_neighbours) {
  crown::coarray<int> a(w(), 1);
  std::vector<int> neighbours{left()};
  if (right() != left()) neighbours.push_back(right());
  for (int round = 1; round <= 20; ++round) {
    a.on(right()).put({0}, round * 100 + me());
    crown::sync_images(w(), neighbours);
    BOOST_TEST(a(0) == round * 100 + left());
    crown::sync_images(w(), neighbours); // nobody overwrites before it was read
  }
  auto m = what_of<crown::argument_error>([] { crown::sync_images(w(), {n()}); });
  BOOST_TEST(m.find("image " + std::to_string(n()) + " is out of range") != std::string::npos, m);
  m = what_of<crown::argument_error>([] { crown::sync_images(w(), {0, 0}); });
  BOOST_TEST(m.find("image 0 is named twice") != std::string::npos, m);
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(events_carry_a_producer_consumer_chain) {
  // Image 0 starts a token; each image waits for it, adds its index and passes it on.
  crown::coarray<std::int64_t> token(w(), 1);
  crown::event arrived(w());
  for (int lap = 0; lap < 5; ++lap) {
    if (me() != 0 || lap > 0) arrived.wait();
    const std::int64_t value = token(0) + me();
    if (me() != n() - 1 || lap < 4) {
      token.on(right()).put({0}, value);
      arrived.post(right());
    } else {
      // after 5 laps the token holds 5 * (0 + 1 + ... + n-1)
      BOOST_TEST(value == 5LL * n() * (n() - 1) / 2);
    }
  }
  crown::sync_all();
  // put-with-notify: the data is in place when the event arrives
  crown::coarray<int> box(w(), 64);
  crown::event full(w());
  std::vector<int> payload(64, 10 * me() + 1);
  crown::put_notify(box.on(right()), std::span<const int>(payload), full);
  full.wait();
  for (int v : box.flat()) BOOST_TEST(v == 10 * left() + 1);
  crown::sync_all();
  // counts: everyone posts twice to image 0, which waits for all of them at once
  crown::event e(w());
  e.post(0);
  e.post(0);
  if (me() == 0) {
    e.wait(2 * n());
    BOOST_TEST(e.query() == 0);
  }
  crown::sync_all();
  BOOST_CHECK_THROW(e.wait(0), crown::argument_error);
}

BOOST_AUTO_TEST_CASE(atomic_counter_is_exact) {
  crown::coarray<std::int64_t> counter(w(), 1);
  for (int i = 0; i < adds; ++i) (void)counter.on(0).fetch_add({0}, 1);
  crown::sync_all();
  BOOST_TEST(counter.on(0).atomic_ref({0}) == static_cast<std::int64_t>(adds) * n());
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(lock_protected_counter_is_exact) {
  crown::coarray<std::int64_t> counter(w(), 1);
  crown::image_lock lock(w());
  const int iterations = adds / 10; // each iteration is several transfers; the total stays exact
  for (int i = 0; i < iterations; ++i) {
    lock.lock(0);
    const std::int64_t v = counter.on(0).get({0});
    counter.on(0).put({0}, v + 1);
    lock.unlock(0);
  }
  crown::sync_all();
  BOOST_TEST(counter.on(0).get({0}) == static_cast<std::int64_t>(iterations) * n());
  // misuse: unlocking what is not held, locking twice
  auto m = what_of<crown::state_error>([&] { lock.unlock(right()); });
  BOOST_TEST(m.find("unlock of a lock that is not held") != std::string::npos, m);
  crown::sync_all(); // everyone has seen the free lock before any is taken
  lock.lock(me());
  m = what_of<crown::state_error>([&] { (void)lock.try_lock(me()); });
  BOOST_TEST(m.find("this image already holds the lock") != std::string::npos, m);
  crown::sync_all();
  if (n() > 1) {
    m = what_of<crown::state_error>([&] { lock.unlock(right()); }); // held by its owner
    BOOST_TEST(m.find("unlock of a lock held by image " + std::to_string(right())) !=
                   std::string::npos,
               m);
  }
  crown::sync_all();
  lock.unlock(me());
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(critical_sections_serialise) {
  crown::critical section(w());
  crown::coarray<int> log(w(), 1);
  for (int i = 0; i < 50; ++i)
    section([&] {
      const int v = log.on(0).get({0});
      log.on(0).put({0}, v + 1);
    });
  crown::sync_all();
  BOOST_TEST(log.on(0).get({0}) == 50 * n());
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(every_atomic_operation) {
  crown::coarray<std::int32_t> i32(w(), 4);
  crown::coarray<std::int64_t> i64(w(), 4);
  crown::coarray<double> f64(w(), 2);
  const auto t32 = i32.on(right());
  const auto t64 = i64.on(right());
  t32.atomic_define({0}, 0x0F0F);
  BOOST_TEST(t32.atomic_ref({0}) == 0x0F0F);
  BOOST_TEST(t32.fetch_and({0}, 0x00FF) == 0x0F0F);
  BOOST_TEST(t32.fetch_or({0}, 0x1000) == 0x000F);
  BOOST_TEST(t32.fetch_xor({0}, 0x1001) == 0x100F);
  BOOST_TEST(t32.atomic_ref({0}) == 0x000E);
  BOOST_TEST(t32.swap({0}, -7) == 0x000E);
  BOOST_TEST(t32.compare_and_swap({0}, -7, 9) == -7); // swapped
  BOOST_TEST(t32.compare_and_swap({0}, -7, 11) == 9); // not swapped
  BOOST_TEST(t32.atomic_ref({0}) == 9);
  t64.atomic_define({3}, std::int64_t{1} << 40);
  BOOST_TEST(t64.fetch_add({3}, -1) == std::int64_t{1} << 40);
  BOOST_TEST(t64.atomic_ref({3}) == (std::int64_t{1} << 40) - 1);
  // everyone adds to image 0's double
  (void)f64.on(0).fetch_add({1}, 0.5);
  crown::sync_all();
  BOOST_TEST(f64.on(0).atomic_ref({1}) == 0.5 * n());
  // mixed operations from every image on one word stay atomic with each other
  for (int k = 0; k < 200; ++k) {
    (void)i64.on(0).fetch_add({0}, 3);
    (void)i64.on(0).fetch_xor({0}, 0); // a no-op through a different operation
    (void)i64.on(0).fetch_add({0}, -1);
  }
  crown::sync_all();
  BOOST_TEST(i64.on(0).atomic_ref({0}) == 400 * n());
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(malformed_active_messages_are_refused) {
  // Only with CROWN_TRANSPORT=am and a rank that rank 0 reaches through it; decided the
  // same way on every rank.
  MPI_Comm am = crown::detail::active_message_comm();
  const auto& rt = crown::this_runtime();
  int target = -1;
  for (int r = 1; r < n() && target < 0; ++r)
    if (!rt.config().shm || rt.topology().all()[r].host_index != rt.topology().all()[0].host_index)
      target = r;
  if (am == MPI_COMM_NULL || target < 0) return;
  crown::coarray<std::int64_t> canary(w(), 4);
  for (std::size_t i = 0; i < 4; ++i) canary(i) = 1000 + me();
  crown::sync_all();
  if (me() == 0) {
    // 1: too short for a header; 2: a hostile run count; 3: a put far outside the heap.
    // Layout of a request: {kind u32, id u32, runs u64, bytes u64, offset, operand,
    // compare u64, op u32, width u16, floating u16} then runs {offset u64, bytes u64}.
    // 4: truncated after the id (12 bytes): once refused on id 0's tag, so that its
    // origin, waiting on id 9's, waited for ever. 5: a staged get whose data would lie
    // before its ticket word (offset 4); 6: a well-formed one, from a rank whose heap the
    // target does not map (another host, or no shared memory).
    std::vector<std::vector<std::uint64_t>> bad;
    bad.push_back({});
    bad.push_back({1 | (std::uint64_t{7} << 32), std::uint64_t{1} << 60, 8, 0, 0, 0, 0});
    bad.push_back({1 | (std::uint64_t{8} << 32), 1, 8, 0, 0, 0, 0, std::uint64_t{1} << 40, 8, 42});
    bad.push_back({2 | (std::uint64_t{9} << 32), 1});
    bad.push_back({11 | (std::uint64_t{10} << 32), 1, 8, 1, 4, 0, 1, 0, 8});
    bad.push_back({11 | (std::uint64_t{11} << 32), 1, 8, 1, 64, 0, 1, 0, 8});
    constexpr int unreadable_tag = 32003; // tags::am_unreadable (lib/runtime/tags.hpp)
    const int tags[] = {unreadable_tag, 2 + 7, 2 + 8, 2 + 9, 2 + 10, 2 + 11};
    const int sizes[] = {3, 56, 80, 12, 72, 72};
    for (std::size_t k = 0; k < bad.size(); ++k) {
      std::uint64_t status[2] = {0, 0};
      MPI_Request reply;
      MPI_Irecv(status, 16, MPI_BYTE, target, tags[k], am, &reply);
      const char junk[3] = {1, 2, 3};
      MPI_Send(k == 0 ? static_cast<const void*>(junk) : bad[k].data(), sizes[k], MPI_BYTE, target,
               1, am);
      int done = 0;
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!done && std::chrono::steady_clock::now() < until) {
        MPI_Test(&reply, &done, MPI_STATUS_IGNORE);
        crown::detail::progress();
      }
      BOOST_TEST(done, "request " << k << ": no refusal on tag " << tags[k] << " within 20 s");
      if (!done) { // leave nothing posted
        MPI_Cancel(&reply);
        MPI_Wait(&reply, MPI_STATUS_IGNORE);
      }
      BOOST_TEST((status[0] == 1u || status[1] == 1u), "request " << k << " was not refused");
    }
  }
  crown::sync_all(); // the target served (and refused) them while waiting here
  for (std::size_t i = 0; i < 4; ++i) BOOST_TEST(canary(i) == 1000 + me()); // nothing was written
  crown::sync_all(); // everyone has looked before anyone writes again
  // and the transport still works afterwards
  canary.on(right()).put({0}, 7);
  crown::sync_all();
  BOOST_TEST(canary(0) == 7);
}

BOOST_AUTO_TEST_CASE(new_communicators_do_not_deadlock_with_pending_requests) {
  // Rank 0 puts to every other rank, then allocates on a new mesh; the others allocate
  // on that mesh at once, so they are busy creating its communicator while rank 0's
  // puts wait to be served. Repeated with fresh meshes to give the race a chance.
  crown::coarray<int> a(w(), static_cast<std::size_t>(n()));
  for (int round = 0; round < 5 && n() > 1; ++round) {
    std::vector<int> order;
    for (int r = 0; r < n(); ++r) order.push_back((r + round + 1) % n()); // a new rank order
    const crown::mesh rotated({{"r", n()}}, order);
    if (me() == 0)
      for (int t = 1; t < n(); ++t) a.on(t).put({0}, round + 1);
    crown::coarray<int> b(rotated, 1);
    b.on((b.this_image() + 1) % n()).put({0}, me());
    crown::sync_all(rotated);
    BOOST_TEST(b(0) == order[(b.this_image() + n() - 1) % n()]);
    crown::sync_all();
    if (me() != 0) BOOST_TEST(a(0) == round + 1);
  }
}
