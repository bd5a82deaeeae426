// include/crown/event.hpp — Fortran-style events: post to an image, wait on your own.
#pragma once
#include <crown/coarray.hpp>
#include <crown/detail/wait.hpp>
#include <cstdint>

namespace crown {

/// One event variable (a counter) on every image of a mesh. post(img) completes this
/// image's earlier puts and then increments img's counter, so data put before a post
/// is visible to the image that waits for it. Collective construction.
class event {
public:
  explicit event(const mesh& m) : counts_(m, 1) {}
  event() : event(crown::world()) {}

  /// Increments `image`'s counter after this image's earlier transfers completed.
  void post(int image) {
    detail::heap_quiet();
    (void)counts_.on(image).fetch_add({0}, 1);
  }
  /// Waits until this image's counter reaches `until`, then takes `until` off it.
  void wait(std::int64_t until = 1) {
    if (until < 1)
      throw argument_error("event::wait(" + std::to_string(until) + ")",
                           "the count to wait for must be >= 1");
    const auto self = counts_.on(counts_.this_image());
    detail::backoff pause(detail::wait_site{"event wait (for posts)", -1, &counts_.team()});
    while (self.atomic_ref({0}) < until) pause.pause();
    (void)self.fetch_add({0}, -until);
    detail::heap_sync_local();
  }
  /// Posts not yet waited for on this image.
  [[nodiscard]] std::int64_t query() const {
    return counts_.on(counts_.this_image()).atomic_ref({0});
  }

  [[nodiscard]] const mesh& team() const noexcept { return counts_.team(); }
  /// Heap placement of the counters (put_notify adds to them directly).
  [[nodiscard]] const detail::heap_block& counter_block() const noexcept { return counts_.block(); }

private:
  coarray<std::int64_t> counts_;
};

/// Put-with-notify: puts `src` into `target`'s block, then posts `notify` on the same
/// rank, so whoever waits on that event there finds the data in place. One round trip
/// where the transport can (active messages send both at once); earlier asynchronous
/// transfers are not covered (use post(), which completes them first).
template <typename T, std::size_t N, memory_kind K>
void put_notify(const image_ref<T, N, K>& target, std::span<const T> src, event& notify) {
  target.check_count(src.size(), "put_notify");
  (void)notify.team().index_of(target.world_rank()); // argument_error if not a member
  const detail::heap_block& counter = notify.counter_block();
  if constexpr (K == memory_kind::cuda) // device data, host counter: the data lands first
    detail::device_put_notify(target.world_rank(), target.a_->block().offset, src.data(),
                              src.size_bytes(), counter.offset, 1, false, counter.cpu_atomics);
  else
    detail::remote_put_notify(target.world_rank(), target.a_->block().offset, src.data(),
                              src.size_bytes(), counter.offset, 1, counter.cpu_atomics);
}

} // namespace crown
