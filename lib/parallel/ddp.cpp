// Data parallelism (include/crown/parallel/ddp.hpp): bucket assignment, and the
// communication thread that all-reduces buckets while backward runs.
#include <algorithm>
#include <chrono>
#include <crown/collectives.hpp>
#include <crown/error.hpp>
#include <crown/log.hpp>
#include <crown/parallel/ddp.hpp>
#include <cstring>

namespace crown::parallel {

std::vector<bucket> assign_buckets(const param_layout& layout, std::size_t element_bytes,
                                   std::size_t first_cap, std::size_t cap) {
  std::vector<bucket> out;
  bucket current;
  std::size_t limit = first_cap;
  for (std::size_t i = layout.entries.size(); i-- > 0;) { // the flat array's order
    const param_entry& e = layout.entries[i];
    if (current.entries.empty()) current.offset = e.offset;
    current.entries.push_back(i);
    current.count += e.count;
    if (current.count * element_bytes >= limit) {
      out.push_back(std::move(current));
      current = {};
      limit = cap;
    }
  }
  if (!current.entries.empty()) out.push_back(std::move(current));
  return out;
}

namespace {
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
} // namespace

template <typename T>
ddp<T>::ddp(const mesh& dp, std::span<T> params, const param_layout& layout, ddp_options o)
    : dp_(dp), buckets_(assign_buckets(layout, sizeof(T), o.first_bucket_bytes, o.bucket_bytes)),
      bucket_of_(layout.entries.size()) {
  if (params.size() != layout.total)
    throw argument_error("ddp", "the parameters hold " + std::to_string(params.size()) +
                                    " elements, the layout " + std::to_string(layout.total));
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    for (std::size_t e : buckets_[b].entries) bucket_of_[e] = b;
  for (const auto& e : layout.entries) names_.push_back(e.name);
  if (dp.size() > 1 && o.heap_buckets) {
    try { // collective over dp: every image fails alike, the sizes and heaps being equal
      heap_.emplace(dp, layout.total);
    } catch (const resource_error& e) {
      if (dp.rank() == 0)
        log(log_level::info, "ddp: the gradient (", layout.total * sizeof(T),
            " bytes) does not fit the symmetric heap (CROWN_HEAP_SIZE), so its buckets live in "
            "ordinary memory: ",
            e.message());
    }
  }
  if (heap_) {
    grads_ = std::span<T>(heap_->data(), layout.total);
    heap_charge_ = tracked_bytes(buffer_kind::grads, grads_.size_bytes());
  } else {
    plain_.assign(layout.total, T(0));
    grads_ = plain_;
  }
  ready_.assign(layout.entries.size(), 0);
  pending_.resize(buckets_.size());
  for (std::size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].entries.size();
  co_broadcast(dp_, params, 0); // every replica starts from image 0's parameters
  if (dp.size() > 1) thread_ = std::thread([this] { communicate(); });
}

template <typename T>
ddp<T>::~ddp() {
  if (!thread_.joinable()) return;
  {
    // Buckets already launched are reduced first: in a job that goes on normally every
    // image launched the same ones, and an image that stopped early would leave the others
    // in a co_sum for ever. (After a failure on one image only, its peers may wait in a
    // co_sum that never completes, as PyTorch's would: the job must end.)
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return reduced_ == launched_; });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

template <typename T>
void ddp<T>::zero_grad() {
  std::memset(grads_.data(), 0, grads_.size_bytes());
}

template <typename T>
void ddp<T>::mark_ready(std::size_t entry) {
  if (!sync_ || dp_.size() == 1) return;
  if (entry >= bucket_of_.size())
    throw argument_error("ddp::mark_ready", "no parameter entry " + std::to_string(entry));
  std::lock_guard lock(mutex_);
  if (ready_[entry]) // it would launch its bucket while backward still writes another entry
    throw argument_error("ddp::mark_ready",
                         "parameter " + names_[entry] + " marked ready twice in one backward");
  ready_[entry] = 1;
  const std::size_t b = bucket_of_[entry];
  if (--pending_[b] > 0) return;
  const std::size_t before = launched_;
  while (launched_ < buckets_.size() && pending_[launched_] == 0) ++launched_;
  if (launched_ != before) cv_.notify_all();
}

template <typename T>
void ddp<T>::communicate() {
  const T divisor = T(dp_.size());
  for (;;) {
    std::size_t b;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || reduced_ < launched_; });
      if (stop_) return;
      b = reduced_;
    }
    const double start = now();
    try {
      std::span<T> g = grads_.subspan(buckets_[b].offset, buckets_[b].count);
      for (T& x : g) x /= divisor; // PyTorch divides before it sums: the sum is the mean
      co_sum(dp_, g);
    } catch (...) {
      std::lock_guard lock(mutex_);
      failure_ = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      reduce_seconds_ += now() - start;
      ++reduced_;
    }
    cv_.notify_all();
  }
}

template <typename T>
void ddp<T>::finish() {
  if (!sync_ || dp_.size() == 1) return;
  const double start = now();
  std::unique_lock lock(mutex_);
  // Every bucket launched is reduced; one that never filled is an error, not a wait.
  cv_.wait(lock, [&] { return reduced_ == launched_; });
  const std::size_t unready = buckets_.size() - launched_;
  std::string missing;
  for (std::size_t e = 0; e < names_.size() && unready > 0; ++e)
    if (!ready_[e] && missing.size() < 200) missing += (missing.empty() ? "" : ", ") + names_[e];
  timing_ = {reduce_seconds_, now() - start};
  reduce_seconds_ = 0;
  launched_ = reduced_ = 0; // ready for the next backward, also after an error
  for (std::size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].entries.size();
  std::fill(ready_.begin(), ready_.end(), 0);
  if (unready > 0)
    throw argument_error("ddp::finish",
                         std::to_string(unready) +
                             " gradient buckets never became ready: parameters not marked "
                             "ready in this backward: " +
                             missing);
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
}

template class ddp<float>;
template class ddp<double>;

} // namespace crown::parallel
