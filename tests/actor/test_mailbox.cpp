// The mailbox (lib/actor/mailbox.hpp), the ring in shared memory through which the
// controller's messages travel between ranks of one host: every rank sends to every
// rank (itself too) at once through a ring small enough to fill and wrap many times;
// each message must arrive whole, once, and in its sender's order.
#include "actor/mailbox.hpp"
#include <boost/test/unit_test.hpp>
#include <crown/error.hpp>
#include <cstring>
#include <mpi.h>
#include <vector>

using crown::detail::mailbox;

namespace {

/// One mailbox block per rank of this host, in memory they all map.
struct host_mailboxes {
  static constexpr std::size_t capacity = mailbox::min_capacity;
  MPI_Comm host = MPI_COMM_NULL;
  MPI_Win win = MPI_WIN_NULL;
  int me = 0, n = 0;
  std::vector<std::byte*> blocks;
  host_mailboxes() {
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
    MPI_Comm_rank(host, &me);
    MPI_Comm_size(host, &n);
    std::byte* mine = nullptr;
    MPI_Win_allocate_shared(static_cast<MPI_Aint>(mailbox::block_bytes(capacity)), 1, MPI_INFO_NULL,
                            host, &mine, &win);
    std::memset(mine, 0, mailbox::block_bytes(capacity));
    for (int r = 0; r < n; ++r) {
      MPI_Aint size = 0;
      int unit = 0;
      std::byte* base = nullptr;
      MPI_Win_shared_query(win, r, &size, &unit, &base);
      blocks.push_back(base);
    }
    MPI_Barrier(host); // zeroed everywhere before anyone sends
  }
  ~host_mailboxes() {
    MPI_Barrier(host);
    MPI_Win_free(&win);
    MPI_Comm_free(&host);
  }
};

/// Message `seq` from `source`: its size (empty, one cell, many cells, the largest) and
/// its bytes.
std::size_t size_of(int source, int seq, std::size_t largest) {
  if (seq % 97 == 0) return largest;
  return static_cast<std::size_t>((seq * 131 + source * 17) % 1500);
}
std::byte byte_of(int source, int seq, std::size_t i) {
  return static_cast<std::byte>((source * 31 + seq * 7 + static_cast<int>(i)) & 0xff);
}

} // namespace

BOOST_AUTO_TEST_CASE(every_message_arrives_whole_once_and_in_its_senders_order) {
  host_mailboxes h;
  std::vector<mailbox> to;
  for (std::byte* b : h.blocks) to.emplace_back(b, h.capacity);
  mailbox inbox(h.blocks[static_cast<std::size_t>(h.me)], h.capacity);
  const std::size_t largest = inbox.max_message();
  BOOST_TEST_REQUIRE(largest >= std::size_t{16} << 10); // the channel's largest inline message
  constexpr int per_pair = 3000; // ~2 MiB per pair through a 64 KiB ring: it fills and wraps
  std::vector<int> next_send(static_cast<std::size_t>(h.n), 0), next_seen(h.n, 0);
  std::vector<std::byte> out, in;
  long received = 0, refused = 0;
  const long expected = static_cast<long>(per_pair) * h.n;
  int bad = 0;
  while (received < expected ||
         next_send != std::vector<int>(static_cast<std::size_t>(h.n), per_pair)) {
    for (int d = 0; d < h.n; ++d) { // a burst to each rank per pass (more than a ring holds)
      int& seq = next_send[static_cast<std::size_t>(d)];
      for (int k = 0; k < 100 && seq < per_pair; ++k) {
        out.resize(size_of(h.me, seq, largest));
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = byte_of(h.me, seq, i);
        if (!to[static_cast<std::size_t>(d)].try_send(h.me, out)) {
          ++refused;
          break;
        }
        ++seq;
      }
    }
    int source = -1;
    std::size_t bytes = 0;
    while (inbox.receive([&](int from, std::size_t size) {
      source = from;
      bytes = size;
      in.resize(size);
      return in.data();
    })) {
      ++received;
      BOOST_TEST_REQUIRE((source >= 0 && source < h.n));
      const int seq = next_seen[static_cast<std::size_t>(source)]++;
      if (bytes != size_of(source, seq, largest) && bad++ < 5)
        BOOST_TEST(bytes == size_of(source, seq, largest), "message " << seq << " from " << source);
      for (std::size_t i = 0; i < bytes && i < in.size(); ++i)
        if (in[i] != byte_of(source, seq, i)) {
          if (bad++ < 5) BOOST_ERROR("message " << seq << " from " << source << " byte " << i);
          break;
        }
    }
  }
  BOOST_TEST(bad == 0);
  for (int s = 0; s < h.n; ++s) BOOST_TEST(next_seen[static_cast<std::size_t>(s)] == per_pair);
  BOOST_TEST(refused > 0, "the ring never filled: the test did not reach the full case");
}

BOOST_AUTO_TEST_CASE(a_record_no_sender_wrote_is_named_not_taken) {
  std::vector<std::byte> block(mailbox::block_bytes(mailbox::min_capacity));
  mailbox inbox(block.data(), mailbox::min_capacity);
  const std::uint64_t stamp = 1;        // a complete record at cell 0 ...
  const std::uint32_t bytes = 1u << 30; // ... of more than the ring holds
  std::memcpy(block.data() + mailbox::control_bytes, &stamp, sizeof stamp);
  std::memcpy(block.data() + mailbox::control_bytes + sizeof stamp, &bytes, sizeof bytes);
  try {
    inbox.receive([](int, std::size_t) -> std::byte* { return nullptr; });
    BOOST_ERROR("no error");
  } catch (const crown::state_error& e) {
    BOOST_TEST(std::string(e.what()).find("claims 1073741824 bytes from rank 0, which no sender "
                                          "wrote: this rank's symmetric heap was overwritten") !=
                   std::string::npos,
               e.what());
  }
}

BOOST_AUTO_TEST_CASE(sizes_below_the_minimum_give_no_mailbox) {
  BOOST_TEST(mailbox::capacity_for(0) == 0u);
  BOOST_TEST(mailbox::capacity_for((64 << 10) - 1) == 0u);
  BOOST_TEST(mailbox::capacity_for(64 << 10) == std::size_t{64} << 10);
  BOOST_TEST(mailbox::capacity_for((256 << 10) + 5) == std::size_t{256} << 10);
}
