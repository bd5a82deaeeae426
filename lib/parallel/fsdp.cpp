// Fully-sharded data parallelism (include/crown/parallel/fsdp.hpp): shards, the all-gathers
// and reduce-scatters around each unit, and the thread that runs them in order.
#include <algorithm>
#include <chrono>
#include <crown/block_collectives.hpp>
#include <crown/collectives.hpp>
#include <crown/error.hpp>
#include <crown/log.hpp>
#include <crown/parallel/fsdp.hpp>
#include <crown/runtime.hpp>
#include <cstring>
#include <map>

namespace crown::parallel {

namespace {
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
constexpr std::size_t none = ~std::size_t{0};
} // namespace

namespace {
/// The data-parallel ranks of `dp` by host (dp order), checked for HYBRID_SHARD: at least
/// two hosts, the same number on each. Pure: the topology is known to every rank.
std::map<int, std::vector<int>> hybrid_hosts(const mesh& dp) {
  const auto& where = this_runtime().topology().all();
  std::map<int, std::vector<int>> by_host;
  for (int r : dp.ranks()) by_host[where[std::size_t(r)].host_index].push_back(r);
  const std::string plan = "plan fsdp=hybrid (HYBRID_SHARD)";
  const auto host = [&](int r) { return where[std::size_t(r)].host; };
  if (by_host.size() < 2)
    throw argument_error(plan, "shards within a host and replicates across hosts, but all " +
                                   std::to_string(dp.size()) +
                                   " data-parallel ranks run on one host (" + host(dp.ranks()[0]) +
                                   "): use fsdp=full, or run on several hosts");
  for (const auto& [index, ranks] : by_host)
    if (ranks.size() != by_host.begin()->second.size())
      throw argument_error(plan, "needs the same number of data-parallel ranks on every host; " +
                                     host(by_host.begin()->second[0]) + " has " +
                                     std::to_string(by_host.begin()->second.size()) + ", " +
                                     host(ranks[0]) + " has " + std::to_string(ranks.size()));
  return by_host;
}
} // namespace

void check_fsdp_groups(const mesh& plan_mesh, fsdp_strategy s) {
  if (s != fsdp_strategy::hybrid_shard) return;
  for (int p = 0; p < plan_mesh.size("pp"); ++p)
    for (int t = 0; t < plan_mesh.size("tp"); ++t)
      (void)hybrid_hosts(plan_mesh.slice("pp", p).slice("tp", t));
}

fsdp_groups make_fsdp_groups(const mesh& dp, fsdp_strategy s) {
  const int me = this_runtime().rank();
  if (s != fsdp_strategy::hybrid_shard) return {dp, mesh({{"dp", 1}}, {me})};
  const auto by_host = hybrid_hosts(dp);
  std::vector<int> across;
  std::size_t place = 0;
  const std::vector<int>* mine = nullptr;
  for (const auto& [host, ranks] : by_host)
    if (const auto it = std::find(ranks.begin(), ranks.end(), me); it != ranks.end()) {
      mine = &ranks;
      place = std::size_t(it - ranks.begin());
    }
  for (const auto& [host, ranks] : by_host) across.push_back(ranks[place]);
  return {mesh({{"dp", int(mine->size())}}, *mine), mesh({{"dp", int(across.size())}}, across)};
}

template <typename T>
fsdp<T>::fsdp(const mesh& dp, fsdp_strategy s, const param_layout& layout, std::uint64_t seed)
    : strategy_(s), dp_(dp), groups_(make_fsdp_groups(dp, s)), head_(layout.head) {
  if (s == fsdp_strategy::no_shard)
    throw argument_error("fsdp", "NO_SHARD shards nothing: it is DDP (ddp<T>)");
  const mesh& shard = groups_.shard;
  const auto n = std::size_t(shard.size());
  std::size_t total = 0;
  for (const auto& u : layout.units) {
    unit_shard sh{u.count, (u.count + n - 1) / n * n, 0, total};
    sh.shard = sh.padded / n;
    total += sh.shard;
    max_padded_ = std::max(max_padded_, sh.padded);
    shards_.push_back(sh);
  }
  if (n > 1) {
    try { // collective over the shard group: every rank fails alike, the sizes being equal
      heap_.emplace(shard, total);
      for (int k = 0; k < 2; ++k) heap_slots_.emplace_back(shard, max_padded_);
    } catch (const resource_error& e) {
      heap_slots_.clear();
      heap_.reset();
      if (shard.rank() == 0)
        log(log_level::info, "fsdp: the shards (", total * sizeof(T),
            " bytes) and two gradient "
            "slots (",
            2 * max_padded_ * sizeof(T),
            " bytes) do not fit the symmetric heap "
            "(CROWN_HEAP_SIZE), so they live in ordinary memory: ",
            e.message());
    }
  }
  if (heap_) {
    params_ = std::span<T>(heap_->data(), total);
    heap_charge_ = tracked_bytes(buffer_kind::params, total * sizeof(T));
    for (auto& slot : heap_slots_) slots_.emplace_back(slot.data(), max_padded_);
    slot_charge_ = tracked_bytes(buffer_kind::gathered, 2 * max_padded_ * sizeof(T));
  } else {
    plain_.resize(total);
    params_ = plain_;
    for (int k = 0; k < 2; ++k) {
      plain_slots_.push_back(tracked<T>(buffer_kind::gathered, max_padded_));
      slots_.emplace_back(plain_slots_.back());
    }
  }
  // Each unit whole for a moment, to cut this rank's shard out of it.
  auto whole = tracked<T>(buffer_kind::gathered);
  const std::size_t r = std::size_t(shard.rank());
  for (std::size_t u = 0; u < shards_.size(); ++u) {
    const unit_shard& sh = shards_[u];
    whole.assign(sh.padded, T(0));
    initialise_unit<T>(layout, seed, u, std::span<T>(whole).first(sh.count));
    std::copy_n(whole.begin() + std::ptrdiff_t(r * sh.shard), sh.shard,
                params_.begin() + std::ptrdiff_t(sh.offset));
  }
  grads_.assign(total, T(0));
  scattered_.assign(max_padded_ / n, T(0));
  state_.assign(shards_.size(), unit_state::sharded);
  gathered_.assign(shards_.size(), tracked<T>(buffer_kind::gathered));
  slot_of_.assign(shards_.size(), 0);
  slot_busy_.assign(2, 0);
  if (dp.size() > 1) thread_ = std::thread([this] { communicate(); });
}

template <typename T>
fsdp<T>::~fsdp() {
  if (!thread_.joinable()) return;
  {
    // Queued collectives run first: every rank queued the same ones (see ddp's destructor).
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return queue_.empty(); });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

template <typename T>
void fsdp<T>::zero_grad() {
  std::fill(grads_.begin(), grads_.end(), T(0));
}

template <typename T>
void fsdp<T>::run(const task& t) {
  const unit_shard& sh = shards_[t.unit];
  const double start = now();
  if (t.gather) {
    const std::span<T> all(t.dest, sh.padded);
    if (heap_)
      all_gather(*heap_, sh.offset, all);
    else
      all_gather(groups_.shard, std::span<const T>(params_.subspan(sh.offset, sh.shard)), all);
  } else {
    const std::span<T> g = slots_[t.slot].first(sh.padded);
    const T divisor = T(dp_.size());
    for (T& x : g) x /= divisor; // as DDP: divided first, so the sum is the mean
    const std::span<T> out = std::span<T>(scattered_).first(sh.shard);
    if (heap_)
      reduce_scatter(heap_slots_[t.slot], 0, out);
    else
      reduce_scatter(groups_.shard, std::span<const T>(g), out);
    if (groups_.replicate.size() > 1) co_sum(groups_.replicate, out); // HYBRID_SHARD
    T* sum = grads_.data() + sh.offset;
    for (std::size_t k = 0; k < sh.shard; ++k) sum[k] += out[k];
  }
  const double seconds = now() - start;
  std::lock_guard lock(mutex_);
  if (t.gather) {
    state_[t.unit] = unit_state::gathered;
    running_.gather_seconds += seconds;
    ++running_.gathers;
  } else {
    slot_busy_[t.slot] = 0;
    running_.scatter_seconds += seconds;
    ++running_.scatters;
  }
}

template <typename T>
void fsdp<T>::enqueue(task t) {
  if (!thread_.joinable()) { // one rank: nothing to overlap
    run(t);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(t);
  }
  cv_.notify_all();
}

template <typename T>
void fsdp<T>::communicate() {
  for (;;) {
    task t;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      t = queue_.front();
    }
    try {
      // After a failure the collectives no longer pair up with the peers': skip the rest
      // (the waiters rethrow the failure).
      if (!failure_) run(t);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!failure_) failure_ = std::current_exception();
      if (t.gather)
        state_[t.unit] = unit_state::gathered; // wake its waiter, who rethrows
      else
        slot_busy_[t.slot] = 0;
    }
    {
      std::lock_guard lock(mutex_);
      queue_.pop_front();
    }
    cv_.notify_all();
  }
}

template <typename T>
void fsdp<T>::wait_until(std::unique_lock<std::mutex>& lock, const auto& done) {
  const double start = now();
  cv_.wait(lock, [&] { return failure_ || done(); });
  running_.exposed_seconds += now() - start;
  if (failure_) std::rethrow_exception(failure_);
}

template <typename T>
std::span<const T> fsdp<T>::acquire(std::size_t unit, pass p) {
  auto fetch = [&](std::size_t u) {
    {
      std::lock_guard lock(mutex_);
      if (state_[u] != unit_state::sharded) return;
      state_[u] = unit_state::in_flight;
      peak_units_ = std::max(peak_units_, ++units_held_);
    }
    gathered_[u] = unit_buffer(shards_[u].padded);
    enqueue({true, u, 0, gathered_[u].data()});
  };
  // A forward begins (at the last unit) while the head of a forward without backward
  // (evaluation, sampling) is still held: give it back first, or three units are held.
  if (p == pass::forward && unit + 1 == shards_.size() && strategy_ != fsdp_strategy::shard_grad_op)
    free_unit(0);
  fetch(unit);
  // Prefetch the unit the pass needs next: forward goes from the embeddings (the last
  // unit) to the head (unit 0), backward the other way.
  const std::size_t next = p == pass::forward ? (unit == 0 ? none : unit - 1)
                                              : (unit + 1 < shards_.size() ? unit + 1 : none);
  if (next != none) fetch(next);
  std::unique_lock lock(mutex_);
  wait_until(lock, [&] { return state_[unit] == unit_state::gathered; });
  return {gathered_[unit].data(), shards_[unit].count};
}

template <typename T>
std::span<T> fsdp<T>::gradient(std::size_t unit) {
  // Slots alternate in backward's order, the same on every rank (the one-sided
  // reduce-scatter reads each peer's slot at the same offset).
  const std::size_t s = std::exchange(next_slot_, (next_slot_ + 1) % slots_.size());
  {
    std::unique_lock lock(mutex_);
    wait_until(lock, [&] { return slot_busy_[s] == 0; });
  }
  slot_of_[unit] = s;
  const std::span<T> g = slots_[s].first(shards_[unit].padded);
  std::fill(g.begin(), g.end(), T(0)); // the padding too: it is reduced with the rest
  return g.first(shards_[unit].count);
}

template <typename T>
tracked_vector<T> fsdp<T>::unit_buffer(std::size_t n) {
  const auto fits = std::find_if(spare_.begin(), spare_.end(),
                                 [&](const tracked_vector<T>& b) { return b.capacity() >= n; });
  if (fits == spare_.end()) {
    spare_.clear();
    return tracked<T>(buffer_kind::gathered, n);
  }
  tracked_vector<T> b = std::move(*fits);
  spare_.erase(fits);
  b.resize(n);
  return b;
}

template <typename T>
void fsdp<T>::free_unit(std::size_t unit) {
  {
    std::lock_guard lock(mutex_);
    if (state_[unit] != unit_state::gathered) return;
    state_[unit] = unit_state::sharded;
    --units_held_;
  }
  tracked_vector<T> b = std::exchange(gathered_[unit], tracked<T>(buffer_kind::gathered));
  if (spare_.size() < 2) spare_.push_back(std::move(b));
}

template <typename T>
void fsdp<T>::release(std::size_t unit, pass p) {
  if (p == pass::backward) {
    const std::size_t s = slot_of_[unit];
    {
      std::lock_guard lock(mutex_);
      slot_busy_[s] = 1;
    }
    enqueue({false, unit, s, nullptr});
    free_unit(unit);
    return;
  }
  // SHARD_GRAD_OP keeps parameters gathered from forward to backward; the others keep only
  // the head, whose backward comes right after its forward (PyTorch's root unit), and only
  // on the last pipeline stage (elsewhere unit 0 is a block).
  if (strategy_ != fsdp_strategy::shard_grad_op && !(unit == 0 && head_)) free_unit(unit);
}

template <typename T>
void fsdp<T>::finish() {
  std::unique_lock lock(mutex_);
  wait_until(lock, [&] { return queue_.empty(); });
  timing_ = std::exchange(running_, {});
}

template <typename T>
void fsdp<T>::reshard() {
  {
    std::unique_lock lock(mutex_);
    wait_until(lock, [&] { return queue_.empty(); });
  }
  for (std::size_t u = 0; u < shards_.size(); ++u) free_unit(u);
  spare_.clear(); // between steps nothing gathered is held
}

template class fsdp<float>;
template class fsdp<double>;

} // namespace crown::parallel
