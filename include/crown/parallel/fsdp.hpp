// include/crown/parallel/fsdp.hpp — fully-sharded data parallelism with PyTorch FSDP's
// strategies: every unit's parameters, gradient and optimizer state are sharded over the
// data-parallel ranks; a unit is all-gathered before its forward and its backward and its
// gradient reduce-scattered after its backward, by a communication thread, while the next
// unit is prefetched.
#pragma once
#include <condition_variable>
#include <crown/coarray.hpp>
#include <crown/mesh.hpp>
#include <crown/parallel/gpt.hpp>
#include <crown/parallel/memory.hpp>
#include <crown/parallel/plan.hpp>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

namespace crown::parallel {

/// The meshes a strategy shards and replicates over: FULL_SHARD and SHARD_GRAD_OP shard
/// over all of `dp`; HYBRID_SHARD shards within each host and replicates across hosts
/// (the data-parallel ranks of one host, in dp order; the ranks at the same place on
/// every host). Throws argument_error, the same on every rank and before any
/// communication, for HYBRID_SHARD on one host or on hosts with unequal numbers of ranks.
struct fsdp_groups {
  mesh shard, replicate;
};
[[nodiscard]] fsdp_groups make_fsdp_groups(const mesh& dp, fsdp_strategy s);
/// The same check for every data-parallel group of a plan's mesh {pp, dp, tp}, so that
/// every rank of the job fails alike, whichever group is spread badly over the hosts.
void check_fsdp_groups(const mesh& plan_mesh, fsdp_strategy s);

/// How one unit is cut: `padded` = count rounded up to a multiple of the shard group's
/// size (zeros at the end, as PyTorch pads a FlatParameter), so every rank holds `shard`
/// = padded / ranks elements, at `offset` in its shard arrays.
struct unit_shard {
  std::size_t count = 0, padded = 0, shard = 0, offset = 0;
};

/// What the last step's communication cost (seconds summed over calls, bytes gathered
/// and reduce-scattered on this rank), and how much of it the step waited for.
struct fsdp_timing {
  double gather_seconds = 0, scatter_seconds = 0, exposed_seconds = 0;
  std::size_t gathers = 0, scatters = 0;
};

/// FSDP over the data-parallel mesh `dp` with strategy full_shard, shard_grad_op or
/// hybrid_shard (no_shard is ddp<T>). Collective over `dp` at construction. Each rank
/// initialises its shards from `seed` unit by unit (bitwise what gpt::initialise gives
/// the whole model), so no rank ever holds the whole model. Parameter shards live in the
/// symmetric heap when they fit (one-sided all-gathers), else in ordinary memory (MPI).
/// Gradients are pre-divided by dp and summed in image order (as ddp<T>), so every rank's
/// shards of the gradient equal the matching part of DDP's. Micro-batches accumulate:
/// every backward reduce-scatters and adds into the sharded gradient.
template <typename T>
class fsdp final : public unit_source<T> {
public:
  fsdp(const mesh& dp, fsdp_strategy s, const param_layout& layout, std::uint64_t seed);
  ~fsdp() override;
  fsdp(const fsdp&) = delete;
  fsdp& operator=(const fsdp&) = delete;

  /// This rank's shards of every unit, one after another (what the optimizer updates).
  [[nodiscard]] std::span<T> shard_params() noexcept { return params_; }
  [[nodiscard]] std::span<const T> shard_params() const noexcept { return params_; }
  [[nodiscard]] std::span<T> shard_grads() noexcept { return grads_; }
  [[nodiscard]] const std::vector<unit_shard>& shards() const noexcept { return shards_; }
  [[nodiscard]] const fsdp_groups& groups() const noexcept { return groups_; }
  [[nodiscard]] fsdp_strategy strategy() const noexcept { return strategy_; }
  [[nodiscard]] bool shards_in_heap() const noexcept { return heap_.has_value(); }
  void zero_grad();

  std::span<const T> acquire(std::size_t unit, pass p) override;
  std::span<T> gradient(std::size_t unit) override;
  void release(std::size_t unit, pass p) override;

  /// Waits for every reduce-scatter (rethrowing a failure of one); then the sharded
  /// gradient is final.
  void finish();
  /// Frees every gathered unit (SHARD_GRAD_OP keeps them from forward to backward; after
  /// a forward without backward, and before the optimizer changes the shards, none may stay).
  void reshard();
  /// The most parameter units held gathered at once since construction.
  [[nodiscard]] std::size_t peak_gathered_units() const noexcept { return peak_units_; }
  [[nodiscard]] const fsdp_timing& last_timing() const noexcept { return timing_; }

private:
  enum class unit_state { sharded, in_flight, gathered };
  struct task {
    bool gather; // else reduce-scatter
    std::size_t unit = 0, slot = 0;
    T* dest = nullptr; // a gather's destination (its unit's buffer)
  };
  void enqueue(task t);
  void run(const task& t);
  void communicate();
  void wait_until(std::unique_lock<std::mutex>& lock, const auto& done);
  void free_unit(std::size_t unit);
  /// A buffer of n elements for a gathered unit: a spare one reused (no fresh pages to
  /// fault in) when one is large enough, else a new one (spares too small are freed first,
  /// so FULL_SHARD never holds more than two buffers).
  tracked_vector<T> unit_buffer(std::size_t n);

  fsdp_strategy strategy_;
  mesh dp_;
  fsdp_groups groups_;
  bool head_; // this part holds the head (unit 0): the last pipeline stage
  std::vector<unit_shard> shards_;
  std::size_t max_padded_ = 0;
  std::optional<coarray<T>> heap_; // parameter shards, when they fit
  tracked_bytes heap_charge_, slot_charge_;
  tracked_vector<T> plain_ = tracked<T>(buffer_kind::params);
  std::span<T> params_;
  tracked_vector<T> grads_ = tracked<T>(buffer_kind::grads);
  // Two unsharded gradient slots: one filled by backward while the other is reduce-scattered.
  std::vector<coarray<T>> heap_slots_;
  std::vector<tracked_vector<T>> plain_slots_;
  std::vector<std::span<T>> slots_;
  std::size_t next_slot_ = 0;
  std::vector<std::size_t> slot_of_; // unit -> the slot its gradient is in
  tracked_vector<T> scattered_ = tracked<T>(buffer_kind::gathered); // one unit's shard
  // Shared with the communication thread, under mutex_.
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<task> queue_;
  std::vector<unit_state> state_;
  std::vector<tracked_vector<T>> gathered_; // per unit, while gathered or in flight
  std::vector<tracked_vector<T>> spare_;    // freed unit buffers kept for the next (<= 2)
  std::vector<char> slot_busy_;
  std::size_t units_held_ = 0, peak_units_ = 0;
  bool stop_ = false;
  std::exception_ptr failure_;
  fsdp_timing timing_, running_;
  std::thread thread_;
};

} // namespace crown::parallel
