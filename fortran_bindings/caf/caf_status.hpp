// fortran_bindings/caf/caf_status.hpp — whether each image runs, has stopped (STOP, END
// PROGRAM) or has failed (FAIL IMAGE), and how far an image that ended had got.
//
// An image that ends publishes, for every team it belongs to, how many collectives, SYNC
// ALLs and SYNC IMAGES with each partner it completed, then its state. Another image
// waiting for it in the k-th such operation therefore knows exactly whether its part
// was done (k <= published: keep waiting, it has arrived or will) or never will be
// (the operation ends with STAT_STOPPED_IMAGE or STAT_FAILED_IMAGE). No timeout decides.
//
// STOPPED_IMAGES and FAILED_IMAGES list the images *known* here to have ended (the
// standard's words): an image becomes known when an image control statement, collective,
// coindexed access or lock of this image finds that it ended without doing its part, and
// when IMAGE_STATUS reports it. An image that ends after doing its part in everything
// this image did with it is not known until then, so the lists do not depend on how fast
// the other images run on to their own end.
#pragma once
#include "caf_runtime.hpp"
#include <span>

namespace crown::caf {

enum class image_state : std::uint64_t { running = 0, stopped = 1, failed = 2 };

/// The operations whose progress an ending image publishes (per team).
enum class counter { collectives, sync_all, sync_images };

/// Collective over the world at start-up: the state words (all running).
void init_status(const crown::mesh& world);
/// Forgets the state words (the heap goes at the end).
void release_status() noexcept;
/// How `world_rank` stands now (IMAGE_STATUS; also what makes it known).
image_state state_of(int world_rank);
/// How `world_rank` is known here to have ended (running when it is not known to have).
image_state known_state(int world_rank) noexcept;
/// Records that `world_rank` has ended as `s` (not running).
void learn(int world_rank, image_state s) noexcept;
/// The number of images known here to have failed (cheap: a word in this image's heap
/// that each failing image increments).
std::uint64_t failures_seen() noexcept;
/// Throws image_failed when `world_rank` (another image) has failed: coindexed accesses,
/// locks and events. Costs one local load while no image has failed.
void check_reachable(int world_rank, const char* what);
/// Throws image_stopped or image_failed when `world_rank` (another image) has ended:
/// EVENT POST. Costs one local load while no image has ended.
void check_running(int world_rank, const char* what);
/// rank_of(image), checked with check_reachable.
int reachable_rank(int image, const char* what);

/// How image `image` (0-based in `t`) stands in this image's current operation of kind
/// `c`: running when it runs or ended after doing its part, else how it ended.
image_state missing_part(const team& t, int image, counter c);
/// Throws image_stopped (first) or image_failed naming the first image of `t` (of
/// `watched`, 0-based, when given) that ended before doing its part in this image's
/// current operation of kind `c` (for sync_images: with this image).
void check_partners(const team& t, const char* what, counter c, std::span<const int> watched = {});
/// Numbers a collective of `t` (co_*, FORM TEAM, coarray allocation) and checks that
/// every image of `t` is running or ended after doing its part in it.
void enter_collective(team& t, const char* what);

/// Polls `finished()` until it is true; every 64 polls, check_partners (an image that
/// ended without doing its part never will: then it throws, whatever was pending is
/// left so).
template <typename F>
void wait_for(const team& t, const char* what, counter c, std::span<const int> watched,
              F&& finished) {
  crown::caf_api::backoff pause;
  for (unsigned polls = 1; !finished(); ++polls) {
    if (polls % 64 == 0) check_partners(t, what, c, watched); // the words are cheap, not free
    pause.pause();
  }
}

/// Ends this image's part: publishes its progress in every team, tells every image that
/// one more has ended (failed), then publishes `state`.
void end_image(image_state state) noexcept;
/// Normal termination and FAIL IMAGE: waits until every image has stopped or failed.
void wait_for_all_to_end();

} // namespace crown::caf
