// The controller channel (lib/actor/channel.hpp) against notices that lie: a notice
// announces a large body that follows; a false one (no body, or a body of another
// size) must cost no memory and leave the channel working. Once, a notice of 2 GiB made
// the receiver allocate and zero 2 GiB before anything was checked.
#include "actor/channel.hpp"
#include "actor/protocol.hpp"
#include <any>
#include <boost/test/unit_test.hpp>
#include <crown/actor/arguments.hpp>
#include <cstring>
#include <mpi.h>
#include <numeric>
#include <optional>
#include <sys/resource.h>
#include <vector>

namespace {

long max_resident_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

/// A channel over a private copy of MPI_COMM_SELF: this process talks to itself, over
/// MPI alone or (`with_mailbox`) with its small messages through a 64 KiB mailbox.
struct self_channel {
  MPI_Comm comm = MPI_COMM_NULL;
  std::optional<crown::detail::channel> ch;
  std::vector<std::byte> box;
  explicit self_channel(bool with_mailbox = false) {
    MPI_Comm_dup(MPI_COMM_SELF, &comm);
    crown::detail::mailbox_map boxes;
    if (with_mailbox) {
      box.resize(crown::detail::mailbox::block_bytes(crown::detail::mailbox::min_capacity));
      boxes = {box.data(), {box.data()}, crown::detail::mailbox::min_capacity};
    }
    ch.emplace(comm, boxes);
  }
  ~self_channel() {
    ch.reset();
    MPI_Comm_free(&comm);
  }
  /// Polls for a while; true if a message arrived.
  bool receive(crown::detail::channel::incoming& m) {
    for (int i = 0; i < 2000; ++i)
      if (ch->receive(m)) return true;
    return false;
  }
  /// Sent without waiting (a large message to oneself completes only once received).
  void send_raw(const std::vector<std::byte>& bytes, int tag) {
    MPI_Request r;
    MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, 0, tag, comm, &r);
    sends.push_back(r);
  }
  void wait_sends() {
    MPI_Waitall(static_cast<int>(sends.size()), sends.data(), MPI_STATUSES_IGNORE);
    sends.clear();
  }
  std::vector<MPI_Request> sends;
};

constexpr int small_tag = 1, large_tag = 2; // channel.cpp's tags

} // namespace

BOOST_AUTO_TEST_CASE(a_notice_without_a_body_allocates_nothing) {
  self_channel c;
  std::vector<std::byte> notice;
  crown::detail::encode_notice(0x7fffffff, notice); // "2 GiB follow" — and nothing does
  const long before = max_resident_kib();
  c.send_raw(notice, small_tag);
  crown::detail::channel::incoming m;
  BOOST_TEST(!c.receive(m));
  const long grown_mib = (max_resident_kib() - before) / 1024;
  BOOST_TEST(grown_mib < 64, "the false notice cost " << grown_mib << " MiB");
  c.wait_sends();
}

BOOST_AUTO_TEST_CASE(a_body_of_another_size_is_dropped_and_the_channel_still_works) {
  self_channel c;
  std::vector<std::byte> notice, body(40000, std::byte{7});
  crown::detail::encode_notice(50000, notice);
  c.send_raw(notice, small_tag);
  c.send_raw(body, large_tag);
  crown::detail::channel::incoming m;
  BOOST_TEST(!c.receive(m));
  c.wait_sends(); // the false body was consumed
  // a real large message, then a small one, arrive whole and in order
  auto big = c.ch->acquire(100000);
  big->resize(100000);
  for (std::size_t i = 0; i < big->size(); ++i) (*big)[i] = static_cast<std::byte>(i % 251);
  c.ch->send(big, 0);
  auto small = c.ch->acquire(8);
  small->assign(8, std::byte{3});
  c.ch->send(small, 0);
  BOOST_TEST_REQUIRE(c.receive(m));
  BOOST_TEST(m.bytes.size() == 100000u);
  BOOST_TEST((std::memcmp(m.bytes.data(), big->data(), big->size()) == 0));
  BOOST_TEST_REQUIRE(c.receive(m));
  BOOST_TEST(m.bytes.size() == 8u);
  c.ch->drain_sends();
}

BOOST_AUTO_TEST_CASE(notices_of_impossible_sizes_are_refused) {
  using crown::detail::notice_bytes;
  std::vector<std::byte> n;
  for (std::uint64_t bytes :
       {std::uint64_t{0}, std::uint64_t{16384}, std::uint64_t{1} << 31, ~std::uint64_t{0}}) {
    crown::detail::encode_notice(bytes, n);
    BOOST_TEST(notice_bytes(n, 16384).value_or(99) == 0u, bytes);
  }
  crown::detail::encode_notice(16385, n);
  BOOST_TEST(notice_bytes(n, 16384).value_or(0) == 16385u);
  n.push_back(std::byte{0}); // 17 bytes: an ordinary message
  BOOST_TEST(!notice_bytes(n, 16384));
}

// Attachments (large arguments beside a command) arrive in pieces on a tag of the
// sender's; pieces of another size than the command announced are named, not taken.
namespace {

/// Receives attachments of `sizes` (pieces of 4 KiB) from itself until they are done.
std::shared_ptr<crown::detail::bulk_in> receive_all(self_channel& s, int tag,
                                                    std::vector<std::uint64_t> sizes) {
  auto b = s.ch->receive_bulk(0, tag, sizes, 4096, {}, 0);
  for (int i = 0; i < 100000 && !b->complete(); ++i) s.ch->progress_bulk();
  return b;
}

} // namespace

BOOST_AUTO_TEST_CASE(attachments_arrive_whole_and_aligned) {
  self_channel s;
  std::vector<std::byte> first(10000), second(3);
  for (std::size_t i = 0; i < first.size(); ++i) first[i] = std::byte(i * 7);
  second = {std::byte{1}, std::byte{2}, std::byte{3}};
  const int tag = s.ch->next_bulk_tag();
  const std::span<const std::byte> parts[] = {first, second};
  const auto last = s.ch->send_bulk(parts, 4096, 0, tag, {});
  const auto b = receive_all(s, tag, {first.size(), second.size()});
  BOOST_TEST(b->complete());
  BOOST_TEST(b->failure() == "");
  const auto parts_in = b->arrived().parts;
  BOOST_TEST_REQUIRE(parts_in.size() == 2u);
  BOOST_TEST(std::memcmp(parts_in[0].data(), first.data(), first.size()) == 0);
  BOOST_TEST(std::memcmp(parts_in[1].data(), second.data(), second.size()) == 0);
  BOOST_TEST(reinterpret_cast<std::uintptr_t>(parts_in[1].data()) % 64 == 0u);
  for (int i = 0; i < 1000 && !s.ch->sent(last); ++i) s.ch->poll_sends();
  BOOST_TEST(s.ch->sent(last));
}

// Plain bytes land in blocks kept from earlier commands: the smallest with room, so a
// small attachment does not take the block a large one comes back for.
BOOST_AUTO_TEST_CASE(plain_attachments_land_in_the_smallest_kept_block_with_room) {
  self_channel s;
  const auto arrive = [&](std::size_t bytes, int seed) {
    std::vector<std::byte> data(bytes);
    for (std::size_t i = 0; i < bytes; ++i) data[i] = std::byte(i * 13 + seed);
    const int tag = s.ch->next_bulk_tag();
    const std::span<const std::byte> parts[] = {data};
    const auto last = s.ch->send_bulk(parts, 64 << 10, 0, tag, {});
    auto b = s.ch->receive_bulk(0, tag, std::vector<std::uint64_t>{bytes}, 64 << 10, {}, 0);
    for (int i = 0; i < 100000 && !b->complete(); ++i) s.ch->progress_bulk();
    for (int i = 0; i < 1000 && !s.ch->sent(last); ++i) s.ch->poll_sends();
    BOOST_TEST_REQUIRE(b->complete());
    BOOST_TEST_REQUIRE(s.ch->sent(last)); // `data` may go
    BOOST_TEST_REQUIRE(b->arrived().parts.size() == 1u);
    BOOST_TEST(std::memcmp(b->arrived().parts[0].data(), data.data(), bytes) == 0);
    return b;
  };
  const auto at = [](const auto& b) { return b->arrived().parts[0].data(); };
  // Two blocks larger than any this process kept before, held at once, then given back.
  auto large = arrive(300 << 10, 1), medium = arrive(100 << 10, 2);
  const std::byte* const large_at = at(large);
  const std::byte* const medium_at = at(medium);
  BOOST_TEST(large_at != medium_at);
  large.reset();
  medium.reset();
  const auto small = arrive(50 << 10, 3);
  BOOST_TEST(at(small) == medium_at);
  const auto again = arrive(200 << 10, 4);
  BOOST_TEST(at(again) == large_at);
}

// An attachment whose sender names its element type lands in a std::vector of it, which
// the vector parameter reading it takes (no copy) and gives back for the next one.
BOOST_AUTO_TEST_CASE(typed_attachments_land_in_the_vector_a_parameter_takes) {
  using namespace crown::detail;
  self_channel s;
  std::vector<double> values((100 << 10) / 8);
  std::vector<std::byte> raw(5000, std::byte{9});
  const auto send_and_receive = [&](double first) {
    std::iota(values.begin(), values.end(), first);
    const int tag = s.ch->next_bulk_tag();
    const std::span<const std::byte> parts[] = {std::as_bytes(std::span(values)), raw};
    const auto last = s.ch->send_bulk(parts, 4096, 0, tag, {});
    const std::uint8_t elements[] = {bulk_element_code<double>(), 0};
    auto b = s.ch->receive_bulk(0, tag, std::vector<std::uint64_t>{values.size() * 8, raw.size()},
                                4096, {}, 0, elements);
    for (int i = 0; i < 100000 && !b->complete(); ++i) s.ch->progress_bulk();
    for (int i = 0; i < 1000 && !s.ch->sent(last); ++i) s.ch->poll_sends();
    BOOST_TEST_REQUIRE(b->complete());
    return b;
  };
  auto b = send_and_receive(1.0);
  const auto arrived = b->arrived();
  BOOST_TEST_REQUIRE(arrived.vectors.size() == 2u);
  BOOST_TEST(!arrived.vectors[1].has_value()); // bytes alone
  BOOST_TEST(std::memcmp(arrived.parts[1].data(), raw.data(), raw.size()) == 0);
  const auto* landed = std::any_cast<std::vector<double>>(&arrived.vectors[0]);
  BOOST_TEST_REQUIRE(landed);
  BOOST_TEST(*landed == values);
  const double* at = landed->data();
  BOOST_TEST(static_cast<const void*>(arrived.parts[0].data()) == static_cast<const void*>(at));
  // Two parameters naming attachment 0: the first takes the vector, the second is refused.
  std::vector<std::byte> args;
  byte_writer w(args);
  for (int twice = 0; twice < 2; ++twice)
    w(std::uint8_t{1}, std::uint64_t{values.size()}, std::uint32_t{0});
  byte_reader r(args, arrived);
  auto taken = load_param<std::vector<double>>(r);
  BOOST_TEST(taken.data() == at);
  BOOST_TEST(taken == values);
  BOOST_CHECK_THROW((void)load_param<std::span<const double>>(r), malformed_message);
  // Given back, it is where the next attachment of its type lands.
  keep_arrived_vector(std::any(std::move(taken)));
  b = send_and_receive(-5.0);
  landed = std::any_cast<std::vector<double>>(&b->arrived().vectors[0]);
  BOOST_TEST_REQUIRE(landed);
  BOOST_TEST(landed->data() == at);
  BOOST_TEST(*landed == values);
  // A vector not taken goes back when its command is done; a size that is not a whole
  // number of elements arrives as bytes.
  b.reset();
  values.resize(values.size() - 1);
  const int tag = s.ch->next_bulk_tag();
  std::vector<std::byte> odd(values.size() * 8 + 3, std::byte{4});
  const std::span<const std::byte> parts[] = {odd};
  const auto last = s.ch->send_bulk(parts, 4096, 0, tag, {});
  const std::uint8_t elements[] = {bulk_element_code<double>()};
  b = s.ch->receive_bulk(0, tag, std::vector<std::uint64_t>{odd.size()}, 4096, {}, 0, elements);
  for (int i = 0; i < 100000 && !b->complete(); ++i) s.ch->progress_bulk();
  for (int i = 0; i < 1000 && !s.ch->sent(last); ++i) s.ch->poll_sends();
  BOOST_TEST(!b->arrived().vectors[0].has_value());
  BOOST_TEST(std::memcmp(b->arrived().parts[0].data(), odd.data(), odd.size()) == 0);
}

BOOST_AUTO_TEST_CASE(a_piece_of_another_size_is_named) {
  self_channel s;
  const int tag = s.ch->next_bulk_tag();
  std::vector<std::byte> short_piece(100), long_piece(5000);
  s.send_raw(short_piece, tag); // announced: 4096
  const auto b = receive_all(s, tag, {4096});
  BOOST_TEST(b->complete());
  BOOST_TEST(
      b->failure() ==
      "piece 0 of its arguments from rank 0 held 100 bytes where the command announced 4096");
  s.send_raw(long_piece, tag); // announced: 4096; received whole, then dropped
  const auto c = receive_all(s, tag, {4096});
  BOOST_TEST(c->complete());
  BOOST_TEST(
      c->failure() ==
      "piece 0 of its arguments from rank 0 held 5000 bytes where the command announced 4096");
  s.wait_sends();
}

BOOST_AUTO_TEST_CASE(attachments_too_large_for_memory_are_received_and_dropped) {
  self_channel s;
  const int tag = s.ch->next_bulk_tag();
  // 1 TiB announced (the largest a command may): no memory for it, so each piece that
  // comes is received into scratch space and the sender is not left waiting (this
  // relies on the kernel refusing 1 TiB, as its default overcommit heuristic does).
  std::vector<std::byte> piece(4096);
  s.send_raw(piece, tag);
  s.send_raw(piece, tag);
  auto b = s.ch->receive_bulk(0, tag, std::vector<std::uint64_t>{std::uint64_t{1} << 40}, 1u << 26,
                              {}, 0);
  BOOST_TEST(b->failure() == "rank 0 has no memory for 1099511627776 bytes of arguments");
  for (int i = 0; i < 1000; ++i) s.ch->progress_bulk(); // both pieces received, one by one
  b.reset();                                            // the receive still posted is cancelled
  s.wait_sends();
}

// Through a mailbox: messages up to half the ring and notices go through it, larger
// bodies over MPI; a ring that fills keeps the rest queued, and nothing overtakes anything.
namespace {

crown::detail::message_buffer filled(crown::detail::channel& ch, std::size_t bytes, int seed) {
  auto b = ch.acquire(bytes);
  b->resize(bytes);
  for (std::size_t i = 0; i < bytes; ++i) (*b)[i] = static_cast<std::byte>((i + seed) % 251);
  return b;
}

/// Receives until a message arrives (sends polled meanwhile, as control_core does).
bool receive_polling(self_channel& c, crown::detail::channel::incoming& m) {
  for (int i = 0; i < 20000; ++i) {
    c.ch->poll_sends();
    if (c.ch->receive(m)) return true;
  }
  return false;
}

} // namespace

BOOST_AUTO_TEST_CASE(through_a_mailbox_nothing_overtakes_and_a_full_ring_loses_nothing) {
  self_channel c(true);
  // a large one (notice through the ring, body over MPI), one over an MPI slot but within
  // half the ring (whole through it), a small one, then 200 of 1000 bytes and a few of
  // 20,000: over three times what the 64 KiB ring holds, so most wait in the channel's
  // queue; every third sent as a copy (send_copy, as ports do), which must not overtake
  std::vector<std::size_t> sizes{100000, 20000, 8};
  for (int i = 0; i < 200; ++i) sizes.push_back(i % 50 == 7 ? 20000 : 1000);
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const auto b = filled(*c.ch, sizes[k], static_cast<int>(k));
    if (k % 3 == 2)
      c.ch->send_copy(*b, 0);
    else
      c.ch->send(b, 0);
  }
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    crown::detail::channel::incoming m;
    BOOST_TEST_REQUIRE(receive_polling(c, m), "message " << k << " never came");
    BOOST_TEST_REQUIRE(m.bytes.size() == sizes[k], "message " << k);
    const auto expected = filled(*c.ch, sizes[k], static_cast<int>(k));
    BOOST_TEST((std::memcmp(m.bytes.data(), expected->data(), sizes[k]) == 0), "message " << k);
    BOOST_TEST(m.source == 0);
    c.ch->recycle(std::move(m.owned));
  }
  c.ch->drain_sends();
}

BOOST_AUTO_TEST_CASE(a_mailbox_message_from_outside_the_session_is_dropped) {
  self_channel c(true);
  crown::detail::mailbox forger(c.box.data(), crown::detail::mailbox::min_capacity);
  const std::vector<std::byte> forged(40, std::byte{9});
  BOOST_TEST_REQUIRE(forger.try_send(5, forged)); // rank 5 of a session of 1
  c.ch->send(filled(*c.ch, 16, 1), 0);
  crown::detail::channel::incoming m;
  BOOST_TEST_REQUIRE(receive_polling(c, m));
  BOOST_TEST(m.bytes.size() == 16u); // the forged one was dropped (and logged)
  c.ch->recycle(std::move(m.owned));
}

BOOST_AUTO_TEST_CASE(leaving_never_waits_for_ever_on_a_mailbox_nobody_empties) {
  self_channel c(true);
  for (int k = 0; k < 200; ++k) c.ch->send(filled(*c.ch, 1000, k), 0); // three ringfuls
  // Nobody receives: the channel gives the rest up after its patience, naming the rank
  // (were it to wait for ever, the test's timeout would fail it).
  c.ch->drain_sends(std::chrono::milliseconds(200));
  // What had fitted is still there, whole and in order; nothing after it.
  int taken = 0;
  crown::detail::channel::incoming m;
  for (; c.ch->receive(m); ++taken) {
    BOOST_TEST_REQUIRE(m.bytes.size() == 1000u);
    const auto expected = filled(*c.ch, 1000, taken);
    BOOST_TEST((std::memcmp(m.bytes.data(), expected->data(), 1000) == 0), "message " << taken);
    c.ch->recycle(std::move(m.owned));
  }
  BOOST_TEST(taken > 0);
  BOOST_TEST(taken < 200);
}
