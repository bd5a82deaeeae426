// Staged transfers (issue 41, the cross-host device path) without a GPU: the origin's
// pipeline through page-locked slots and the owner's device server, run here with host
// memory on both sides (slots filled with memcpy, a "device heap" that is a vector), so
// that the chunking, the requests, their service at the owner and every refusal cross
// real ranks in CI. The GPU test (tests/gpu, CROWN_FAKE_HOSTS=2) runs the same path with
// cudaMemcpyAsync into a real device heap.
#include "transport/heap_state.hpp"      // crown::detail::active_heap
#include "transport/staged_transfer.hpp" // not installed: lib/ on a private include path
#include "transport/symmetric_heap.hpp"
#include <boost/test/unit_test.hpp>
#include <crown/crown.hpp>
#include <crown/remote_buffer.hpp>
#include <cstring>
#include <harness/crown_test.hpp>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

using namespace crown_test; // w(), me(), n(), left(), right(), what_of()
using crown::detail::am_status;
using crown::detail::run;
using crown::detail::staging;

namespace {

constexpr std::size_t heap_bytes = std::size_t{1} << 20;

/// A host vector in place of this rank's device heap, served as the device layer's
/// server serves one: the request's bytes through host memory of the server's own.
struct fake_device_heap {
  std::vector<std::byte> memory = std::vector<std::byte>(heap_bytes, std::byte{0});
  std::vector<std::byte> host; ///< the server's staging memory
  int served = 0;
  fake_device_heap() {
    crown::detail::set_device_server(
        [this](bool put, std::span<const run> runs,
               const std::function<void(std::byte*)>& network) -> am_status {
          std::size_t total = 0;
          for (const run& r : runs) {
            if (r.offset > memory.size() || r.bytes > memory.size() - r.offset)
              return am_status::outside_device_heap;
            total += r.bytes;
          }
          if (!runs.empty() && runs[0].offset == failing_offset) return am_status::device_failed;
          host.resize(total);
          if (put) network(host.data());
          std::size_t at = 0;
          for (const run& r : runs) {
            if (put)
              std::memcpy(memory.data() + r.offset, host.data() + at, r.bytes);
            else
              std::memcpy(host.data() + at, memory.data() + r.offset, r.bytes);
            at += r.bytes;
          }
          if (!put) network(host.data());
          ++served;
          return am_status::ok;
        });
  }
  ~fake_device_heap() { crown::detail::set_device_server({}); }
  fake_device_heap(const fake_device_heap&) = delete;
  fake_device_heap& operator=(const fake_device_heap&) = delete;
  static constexpr std::uint64_t failing_offset = heap_bytes - 8;
};

/// Slots of host memory filled and drained with memcpy; `finish` checks that each copy
/// it waits for was started and not yet waited for.
struct host_slots {
  explicit host_slots(std::byte* packed, std::size_t count, std::size_t bytes)
      : memory(count, std::vector<std::byte>(bytes)), started(count, 0) {
    for (auto& m : memory) slots.push_back(m.data());
    how.slots = slots;
    how.slot_bytes = bytes;
    how.fill = [this, packed](std::byte* slot, std::size_t at, std::size_t b) {
      std::memcpy(slot, packed + at, b);
      mark(slot, 1);
    };
    how.drain = [this, packed](std::byte* slot, std::size_t at, std::size_t b) {
      std::memcpy(packed + at, slot, b);
      mark(slot, 1);
    };
    how.finish = [this](std::byte* slot) { mark(slot, -1); };
  }
  void mark(std::byte* slot, int change) {
    for (std::size_t s = 0; s < slots.size(); ++s)
      if (slots[s] == slot) {
        started[s] += change;
        if (started[s] < 0 || started[s] > 1) ++misuse;
        ++copies;
      }
  }
  std::vector<std::vector<std::byte>> memory;
  std::vector<std::byte*> slots;
  std::vector<int> started;
  int copies = 0, misuse = 0;
  staging how;
};

crown::detail::active_messages* messages() {
  return crown::detail::active_heap("staged transfer test").messages();
}

std::byte byte_of(int rank, std::size_t i) {
  return static_cast<std::byte>((static_cast<std::size_t>(rank) * 131 + i * 7 + i / 251) & 0xff);
}

/// Runs of the target: small ones (inline requests) between large ones (apart), with
/// gaps, 216 KiB in all.
std::vector<run> scattered_runs() {
  std::vector<run> runs;
  std::uint64_t at = 64;
  for (std::size_t k = 0; k < 20; ++k) {
    const std::size_t bytes = k % 4 == 3 ? 40 * 1024 + k : 1000 + 13 * k;
    runs.push_back({at, bytes});
    at += bytes + 24 + k;
  }
  return runs;
}

std::size_t total_of(const std::vector<run>& runs) {
  std::size_t t = 0;
  for (const run& r : runs) t += r.bytes;
  return t;
}

} // namespace

BOOST_AUTO_TEST_CASE(plan_staging_cuts_runs_where_chunks_end) {
  using crown::detail::plan_staging;
  const std::vector<run> runs{{0, 10}, {100, 0}, {200, 7}, {300, 25}};
  const auto chunks = plan_staging(runs, 8);
  // 42 bytes in chunks of 8: 6 chunks, the last of 2.
  BOOST_TEST_REQUIRE(chunks.size() == 6u);
  BOOST_TEST(chunks[0].packed_offset == 0u);
  BOOST_TEST(chunks[0].runs.size() == 1u);
  BOOST_TEST(chunks[0].runs[0].offset == 0u);
  BOOST_TEST(chunks[0].runs[0].bytes == 8u);
  // chunk 1: the last 2 bytes of run 0, then 6 of run 2 (the empty run 1 dropped)
  BOOST_TEST_REQUIRE(chunks[1].runs.size() == 2u);
  BOOST_TEST(chunks[1].runs[0].offset == 8u);
  BOOST_TEST(chunks[1].runs[0].bytes == 2u);
  BOOST_TEST(chunks[1].runs[1].offset == 200u);
  BOOST_TEST(chunks[1].runs[1].bytes == 6u);
  BOOST_TEST(chunks[2].runs[0].offset == 206u);
  BOOST_TEST(chunks[2].runs[1].offset == 300u);
  BOOST_TEST(chunks[2].runs[1].bytes == 7u);
  BOOST_TEST(chunks[5].packed_offset == 40u);
  BOOST_TEST(chunks[5].bytes == 2u);
  BOOST_TEST(chunks[5].runs[0].offset == 323u);
  std::size_t packed = 0;
  for (const auto& c : chunks) {
    BOOST_TEST(c.packed_offset == packed);
    std::size_t b = 0;
    for (const run& r : c.runs) b += r.bytes;
    BOOST_TEST(b == c.bytes);
    packed += c.bytes;
  }
  BOOST_TEST(packed == 42u);
  BOOST_TEST(plan_staging(runs, 1000).size() == 1u);
  BOOST_TEST(plan_staging(std::vector<run>{{5, 0}}, 8).empty());
  BOOST_TEST(what_of<crown::argument_error>([&] {
               (void)plan_staging(runs, 0);
             }).find("chunks of 0 bytes") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(staged_puts_and_gets_cross_ranks_through_the_owners_server) {
  if (!messages()) return; // one rank: no active messages, nothing off-host to reach
  fake_device_heap heap;
  crown::sync_all(); // every server is in place before anyone asks
  const auto runs = scattered_runs();
  const std::size_t total = total_of(runs);
  std::vector<std::byte> out(total);
  for (std::size_t i = 0; i < total; ++i) out[i] = byte_of(me(), i);
  {
    constexpr std::size_t slot_bytes = 64 * 1024; // 216 KiB through three 64 KiB slots
    host_slots slots(out.data(), 3, slot_bytes);
    crown::detail::staged_transfer(*messages(), true, right(), runs, out.data(), slots.how);
    BOOST_TEST(slots.misuse == 0);
    const auto chunks = static_cast<int>((total + slot_bytes - 1) / slot_bytes);
    BOOST_TEST(slots.copies == 2 * chunks); // each chunk filled and finished once
  }
  crown::sync_all(); // serves the neighbours' requests while it waits
  std::size_t at = 0, wrong = 0;
  for (const run& r : runs)
    for (std::size_t i = 0; i < r.bytes; ++i, ++at)
      wrong += heap.memory[r.offset + i] != byte_of(left(), at);
  BOOST_TEST(wrong == 0u, wrong << " bytes from rank " << left() << " differ");
  // Bytes between the runs were not touched.
  BOOST_TEST((heap.memory[0] == std::byte{0} && heap.memory[runs[1].offset - 1] == std::byte{0}));
  BOOST_TEST(heap.served >= 1);
  // Read back from the right neighbour through slots, and straight into host memory.
  for (const std::size_t slot_count : {std::size_t{2}, std::size_t{4}, std::size_t{0}}) {
    std::vector<std::byte> back(total, std::byte{0xee});
    host_slots slots(back.data(), slot_count, 48 * 1024);
    crown::detail::staged_transfer(*messages(), false, right(), runs, back.data(), slots.how);
    BOOST_TEST(slots.misuse == 0);
    BOOST_TEST((back == out), "get with " << slot_count << " slots from rank " << right());
  }
  // Nothing to move: no request, no wait on an empty list.
  std::vector<std::byte> none;
  crown::detail::staged_transfer(*messages(), true, right(), {}, none.data(), {});
  host_slots unused(none.data(), 2, 1024);
  crown::detail::staged_transfer(*messages(), false, right(), {}, none.data(), unused.how);
  BOOST_TEST(unused.copies == 0);
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(refusals_name_the_target_and_the_cause) {
  if (!messages()) return;
  // A registered remote_buffer makes every rank serve requests in its waits, also once
  // the device servers are gone (below).
  std::vector<int> keep(4);
  const crown::remote_buffer<int> serving(keep);
  const int target = right();
  {
    fake_device_heap heap;
    crown::sync_all();
    std::vector<std::byte> bytes(4096);
    host_slots slots(bytes.data(), 2, 1024);
    const std::vector<run> outside{{heap_bytes - 16, 32}};
    const std::string why = what_of<crown::argument_error>([&] {
      crown::detail::staged_transfer(*messages(), true, target, outside, bytes.data(), slots.how);
    });
    BOOST_TEST(why.find("rank " + std::to_string(target)) != std::string::npos, why);
    BOOST_TEST(why.find("outside its device heap") != std::string::npos, why);
    const std::vector<run> failing{{fake_device_heap::failing_offset, 8}};
    const std::string failed = what_of<crown::error>([&] {
      crown::detail::staged_transfer(*messages(), false, target, failing, bytes.data(), {});
    });
    BOOST_TEST(failed.find("GPU failed to copy") != std::string::npos, failed);
    crown::sync_all(); // nobody removes a server while another still uses it
  }
  crown::sync_all(); // every server is gone before anyone asks again
  std::vector<std::byte> bytes(64);
  const std::vector<run> inside{{0, 64}};
  const std::string none = what_of<crown::state_error>(
      [&] { crown::detail::staged_transfer(*messages(), true, target, inside, bytes.data(), {}); });
  BOOST_TEST(none.find("rank " + std::to_string(target)) != std::string::npos, none);
  BOOST_TEST(none.find("serves no device heap") != std::string::npos, none);
  crown::sync_all();
  // The transport still works after the refusals.
  crown::coarray<int> c(w(), 1);
  c.on(right()).put({0}, me());
  crown::sync_all();
  BOOST_TEST(c(0) == left());
}
