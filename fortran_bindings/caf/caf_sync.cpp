// SYNC ALL and SYNC IMAGES (caf_sync.hpp).
#include "caf_sync.hpp"
#include "caf_status.hpp"
#include "transport/caf_interface.hpp"
#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace crown::caf {
namespace {

/// Buffers of sends to images that ended, which MPI may still read.
std::vector<std::unique_ptr<std::uint32_t[]>> g_abandoned;

/// The dissemination barrier over the flag words (every image mapped here).
void flag_barrier(team& t, const char* what) {
  auto* mine = reinterpret_cast<std::uint64_t*>(crown::caf_api::heap_address(t.flags.offset));
  for (std::size_t r = 0; r < t.partner_flags.size(); ++r) {
    std::atomic_ref<std::uint64_t>(*t.partner_flags[r]).store(t.syncs, std::memory_order_release);
    wait_for(t, what, counter::sync_all, {}, [&] {
      return std::atomic_ref<std::uint64_t>(mine[r]).load(std::memory_order_acquire) >= t.syncs;
    });
  }
}

/// MPI_Ibarrier on the team's own communicator.
void message_barrier(team& t, const char* what) {
  MPI_Request barrier;
  crown::check_mpi(MPI_Ibarrier(t.control, &barrier), what);
  wait_for(t, what, counter::sync_all, {}, [&] {
    int done = 0;
    crown::check_mpi(MPI_Test(&barrier, &done, MPI_STATUS_IGNORE), what);
    return done != 0;
  }); // left pending when an image ended without its part
}

/// The images of `t` other than this one that have not ended (0-based).
std::vector<int> running_partners(const team& t) {
  std::vector<int> partners;
  for (int i = 0; i < t.images.size(); ++i)
    if (i != t.images.rank() &&
        state_of(t.images.ranks()[static_cast<std::size_t>(i)]) == image_state::running)
      partners.push_back(i);
  return partners;
}

} // namespace

void sync_team(team& t, const char* what) {
  crown::caf_api::heap_quiet();
  ++t.syncs;
  try {
    if (failures_seen() != 0) check_partners(t, what, counter::sync_all); // no barrier with it
    if (!t.partner_flags.empty() || t.images.size() == 1)
      flag_barrier(t, what);
    else
      message_barrier(t, what);
  } catch (const image_failed&) {
    // The images that have not failed synchronise among themselves, then report it. A
    // failed image never comes back, so every later SYNC ALL of the team ends here too.
    const std::vector<int> partners = running_partners(t);
    sync_partners(t, partners);
    throw;
  }
  crown::caf_api::heap_sync_local();
}

namespace {

/// Waits until `arrived(i)` holds for every partner i, going on with the others when
/// partners fail and naming the first failed one at the end (as image_failed); an image
/// that stopped ends the wait at once (image_stopped, from wait_for).
template <typename Arrived>
void await_partners(team& t, std::span<const int> partners, Arrived&& arrived) {
  const std::size_t n = partners.size();
  std::vector<bool> done(n, false);
  std::vector<int> watched(partners.begin(), partners.end()); // less those given up
  std::size_t left = n;
  int failed = -1; // a partner that failed without its part: reported at the end
  const auto finished = [&] {
    for (std::size_t i = 0; i < n; ++i)
      if (!done[i] && arrived(i)) {
        done[i] = true;
        --left;
      }
    return left == 0;
  };
  for (bool waiting = true; waiting;) {
    try {
      wait_for(t, "sync images", counter::sync_images, watched, finished);
      waiting = false;
    } catch (const image_failed&) { // go on with the others, then report it
      for (std::size_t i = 0; i < n; ++i) {
        if (done[i] || missing_part(t, partners[i], counter::sync_images) != image_state::failed)
          continue;
        if (failed < 0) failed = partners[i];
        done[i] = true;
        --left;
        std::erase(watched, partners[i]);
      }
    }
  }
  if (failed >= 0)
    throw image_failed("sync images", "image " + std::to_string(failed + 1) + " has failed");
}

/// SYNC IMAGES over flag words (every image mapped here): this image's count of SYNC
/// IMAGES with each partner goes into the partner's word for it, and the partner's count
/// is awaited in this image's word for the partner. The counts only grow and every image
/// writes its count before it waits, so the k-th SYNC IMAGES of one pairs with the k-th
/// of the other. Over messages a pair took 0.62-0.90 us, twice OpenCoarrays' time.
void sync_by_flags(team& t, std::span<const int> partners) {
  auto* mine = reinterpret_cast<std::uint64_t*>(crown::caf_api::heap_address(t.pairs.offset));
  std::vector<std::uint32_t> expect(partners.size());
  for (std::size_t i = 0; i < partners.size(); ++i) {
    const auto p = static_cast<std::size_t>(partners[i]);
    expect[i] = ++t.syncs_with[p];
    std::atomic_ref<std::uint64_t>(*t.pair_words[p]).store(expect[i], std::memory_order_release);
  }
  await_partners(t, partners, [&](std::size_t i) {
    const auto p = static_cast<std::size_t>(partners[i]);
    // Counts are 32-bit and wrap: the partner's is at or past ours when the difference,
    // taken modulo 2^32, is not negative (two counts are never 2^31 apart).
    const auto theirs = static_cast<std::uint32_t>(
        std::atomic_ref<std::uint64_t>(mine[p]).load(std::memory_order_acquire));
    return static_cast<std::int32_t>(theirs - expect[i]) >= 0;
  });
}

/// SYNC IMAGES over the team's communicator: a message to and from each partner.
void sync_by_messages(team& t, std::span<const int> partners) {
  constexpr int tag = 7101;
  const std::size_t n = partners.size();
  // Sent values live on the heap: a send to an image that has ended is never completed,
  // and its buffer must outlive this call (kept in g_abandoned then).
  auto owned = std::make_unique<std::uint32_t[]>(n);
  std::uint32_t* sent = owned.get();
  std::vector<std::uint32_t> got(n);
  std::vector<MPI_Request> sends(n), receives(n);
  const auto post_receive = [&](std::size_t i) {
    crown::check_mpi(MPI_Irecv(&got[i], 1, MPI_UINT32_T, partners[i], tag, t.control, &receives[i]),
                     "sync images: MPI_Irecv");
  };
  for (std::size_t i = 0; i < n; ++i) {
    sent[i] = ++t.syncs_with[static_cast<std::size_t>(partners[i])];
    crown::check_mpi(MPI_Isend(&sent[i], 1, MPI_UINT32_T, partners[i], tag, t.control, &sends[i]),
                     "sync images: MPI_Isend");
    post_receive(i);
  }
  // Sends to the partners that answered complete (a failed one's may never).
  const auto wait_answered_sends = [&] {
    for (std::size_t i = 0; i < n; ++i)
      if (receives[i] == MPI_REQUEST_NULL)
        crown::check_mpi(MPI_Wait(&sends[i], MPI_STATUS_IGNORE), "sync images: MPI_Wait");
  };
  try {
    try {
      await_partners(t, partners, [&](std::size_t i) {
        int arrived = 0;
        crown::check_mpi(MPI_Test(&receives[i], &arrived, MPI_STATUS_IGNORE), "sync images");
        if (!arrived) return false;
        if (got[i] == sent[i]) return true;
        post_receive(i); // from an earlier SYNC IMAGES that failed
        return false;
      });
    } catch (const image_failed&) {
      wait_answered_sends();
      throw;
    }
    wait_answered_sends();
  } catch (...) { // image_stopped or image_failed, or an MPI error: nothing posted may outlive this
    for (std::size_t i = 0; i < n; ++i) {
      if (receives[i] != MPI_REQUEST_NULL) {
        MPI_Cancel(&receives[i]);
        MPI_Wait(&receives[i], MPI_STATUS_IGNORE); // got[] dies with this call
      }
      if (sends[i] != MPI_REQUEST_NULL) MPI_Request_free(&sends[i]);
    }
    g_abandoned.push_back(std::move(owned)); // sends to an ended image may never complete
    throw;
  }
}

} // namespace

void sync_partners(team& t, std::span<const int> partners) {
  crown::caf_api::heap_quiet();
  if (!t.pair_words.empty())
    sync_by_flags(t, partners);
  else
    sync_by_messages(t, partners);
  crown::caf_api::heap_sync_local();
}

} // namespace crown::caf
