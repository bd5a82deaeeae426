// include/crown/lock.hpp — Fortran-style locks (one per image of a mesh) and critical sections.
#pragma once
#include <crown/coarray.hpp>
#include <crown/detail/wait.hpp>
#include <cstdint>
#include <utility>

namespace crown {

/// A lock variable on every image of a mesh; any image may lock any image's lock.
/// The word holds 0 when free, else 1 + the holder's image index. Locking gives
/// acquire semantics (what the previous holder wrote is visible), unlocking release.
/// Collective construction.
class image_lock {
public:
  explicit image_lock(const mesh& m) : words_(m, 1) {}
  image_lock() : image_lock(crown::world()) {}

  void lock(int image) {
    detail::backoff pause(detail::wait_site{"lock (held by another image)", -1, &team()});
    while (!try_lock(image)) pause.pause();
  }
  /// True if this image now holds `image`'s lock.
  bool try_lock(int image) {
    const std::int64_t me = words_.this_image() + 1;
    const std::int64_t previous = words_.on(image).compare_and_swap({0}, 0, me);
    if (previous == me) throw state_error(what(image), "this image already holds the lock");
    if (previous != 0) return false;
    detail::heap_sync_local();
    return true;
  }
  void unlock(int image) {
    detail::heap_quiet();
    const std::int64_t me = words_.this_image() + 1;
    const std::int64_t previous = words_.on(image).compare_and_swap({0}, me, 0);
    if (previous != me)
      throw state_error(what(image), previous == 0 ? "unlock of a lock that is not held"
                                                   : "unlock of a lock held by image " +
                                                         std::to_string(previous - 1));
  }

  [[nodiscard]] const mesh& team() const noexcept { return words_.team(); }

private:
  std::string what(int image) const {
    return "lock on image " + std::to_string(image) + " of " + words_.team().to_string() +
           " (this image " + std::to_string(words_.this_image()) + ")";
  }
  coarray<std::int64_t> words_;
};

/// A critical section over a mesh: at most one image runs `f` at a time.
class critical {
public:
  explicit critical(const mesh& m) : lock_(m) {}
  critical() : critical(crown::world()) {}
  template <typename F>
  decltype(auto) operator()(F&& f) {
    lock_.lock(0);
    struct release {
      image_lock& l;
      ~release() { l.unlock(0); }
    } guard{lock_};
    return std::forward<F>(f)();
  }

private:
  image_lock lock_;
};

} // namespace crown
