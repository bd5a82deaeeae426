// include/crown/parallel/ddp.hpp — data parallelism with PyTorch DDP's semantics: parameters
// broadcast from one rank, gradients averaged by bucketed all-reduce started while backward
// still runs, gradients living in the buckets, no_sync for gradient accumulation.
#pragma once
#include <condition_variable>
#include <crown/coarray.hpp>
#include <crown/mesh.hpp>
#include <crown/parallel/gpt.hpp>
#include <crown/parallel/memory.hpp>
#include <cstddef>
#include <exception>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

namespace crown::parallel {

/// A contiguous range of the flat gradient array, reduced as one.
struct bucket {
  std::size_t offset = 0, count = 0; ///< elements of the flat array
  std::vector<std::size_t> entries;  ///< parameter entries, in ready order
  friend bool operator==(const bucket&, const bucket&) = default;
};

/// PyTorch's compute_bucket_assignment_by_size, over the layout's flat array (reverse
/// parameter order): entries are added in that order and a bucket closes once it holds at
/// least its cap, the first `first_cap` bytes, every later one `cap` bytes (PyTorch's
/// defaults: 1 MiB, then 25 MiB). A parameter is never split. Pure: the same on every rank.
[[nodiscard]] std::vector<bucket> assign_buckets(const param_layout& layout,
                                                 std::size_t element_bytes,
                                                 std::size_t first_cap = std::size_t{1} << 20,
                                                 std::size_t cap = std::size_t{25} << 20);

struct ddp_options {
  std::size_t first_bucket_bytes = std::size_t{1} << 20;
  std::size_t bucket_bytes = std::size_t{25} << 20;
  bool heap_buckets = true; ///< gradients in the symmetric heap when they fit (co_sum's fast path)
};

/// Where the time of the last synchronised backward went.
struct ddp_timing {
  double reduce_seconds = 0;  ///< the buckets' all-reduces, start to end, summed
  double exposed_seconds = 0; ///< of that, what finish() waited after backward ended
  [[nodiscard]] double hidden_fraction() const noexcept {
    return reduce_seconds > 0 ? 1 - exposed_seconds / reduce_seconds : 0;
  }
};

/// DDP over the images of `dp`. Collective over `dp` at construction: image 0's
/// parameters are broadcast to the others. The gradient is one flat array laid out like
/// the parameters (PyTorch's gradient_as_bucket_view=True): in the symmetric heap when
/// `heap_buckets` and it fits, else in ordinary memory. During backward, mark_ready(entry)
/// counts an entry's gradient as final; a bucket whose entries are all final is
/// all-reduced by a communication thread, buckets strictly in index order (the same on
/// every image), each pre-divided by dp as PyTorch does, so the sum is the mean. finish()
/// waits for every bucket; afterwards every image holds bitwise the same gradient.
/// Buckets are not rebuilt after the first step: a manual backward makes gradients ready
/// exactly in reverse parameter order, the order they were assigned in.
/// On a one-image mesh nothing is communicated and no thread runs.
template <typename T>
class ddp {
public:
  ddp(const mesh& dp, std::span<T> params, const param_layout& layout, ddp_options o = {});
  ~ddp();
  ddp(const ddp&) = delete;
  ddp& operator=(const ddp&) = delete;

  [[nodiscard]] std::span<T> grads() noexcept { return grads_; }
  [[nodiscard]] const std::vector<bucket>& buckets() const noexcept { return buckets_; }
  [[nodiscard]] bool grads_in_heap() const noexcept { return heap_.has_value(); }
  [[nodiscard]] const mesh& team() const noexcept { return dp_; }
  void zero_grad();

  /// The backward hook: entry's gradient is final for this backward. A second mark of
  /// the same entry is an argument_error (it would start its bucket too early).
  void mark_ready(std::size_t entry);
  /// Waits until every bucket is reduced; throws argument_error naming the entries whose
  /// gradients never became ready, and rethrows a failure of the reduction.
  void finish();

  /// While the guard lives, backward accumulates gradients locally and nothing is
  /// reduced (PyTorch's no_sync()); the first synchronised backward after it reduces
  /// the sum.
  class no_sync_guard {
  public:
    explicit no_sync_guard(ddp& d) noexcept : d_(&d) { d.sync_ = false; }
    no_sync_guard(no_sync_guard&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
    no_sync_guard(const no_sync_guard&) = delete;
    no_sync_guard& operator=(const no_sync_guard&) = delete;
    no_sync_guard& operator=(no_sync_guard&&) = delete;
    ~no_sync_guard() {
      if (d_) d_->sync_ = true;
    }

  private:
    ddp* d_;
  };
  [[nodiscard]] no_sync_guard no_sync() noexcept { return no_sync_guard(*this); }

  [[nodiscard]] const ddp_timing& last_timing() const noexcept { return timing_; }

private:
  void communicate();
  mesh dp_;
  std::vector<bucket> buckets_;
  std::vector<std::size_t> bucket_of_; // entry -> bucket
  std::vector<std::string> names_;     // entry -> name, for errors
  std::optional<coarray<T>> heap_;
  tracked_bytes heap_charge_;
  tracked_vector<T> plain_ = tracked<T>(buffer_kind::grads);
  std::span<T> grads_;
  bool sync_ = true;
  // Shared with the communication thread, under mutex_.
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::size_t> pending_; // per bucket: entries not yet final
  std::vector<char> ready_;          // per entry: final in this backward
  std::size_t launched_ = 0;         // buckets handed to the thread (a prefix)
  std::size_t reduced_ = 0;          // buckets reduced
  bool stop_ = false;
  double reduce_seconds_ = 0;
  std::exception_ptr failure_;
  ddp_timing timing_;
  std::thread thread_;
};

} // namespace crown::parallel
