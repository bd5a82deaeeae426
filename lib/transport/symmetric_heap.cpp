// The host symmetric heap: free space bookkeeping, the shared segment, the choice of backend.
#include "symmetric_heap.hpp"
#include "../runtime/runtime_state.hpp"
#include "active_messages.hpp"
#include "buffer_registry.hpp"
#include "mpi_window.hpp"
#include "staged_transfer.hpp"
#include <crown/build_config.hpp>
#if CROWN_HAVE_UCX
#include "ucx_transport.hpp"
#endif
#include <algorithm>
#include <crown/error.hpp>
#include <crown/log.hpp>

namespace crown::detail {

free_list::free_list(std::size_t capacity) : capacity_(capacity) { free_[0] = capacity; }

std::uint64_t free_list::first_fit_from(std::uint64_t from, std::size_t bytes) const {
  auto it = free_.upper_bound(from);
  if (it != free_.begin()) --it; // the block that may contain `from`
  for (; it != free_.end(); ++it) {
    const std::uint64_t start = std::max<std::uint64_t>(it->first, from);
    if (start < it->first + it->second && it->first + it->second - start >= bytes) return start;
  }
  return capacity_;
}

std::uint64_t free_list::last_fit(std::size_t bytes) const {
  for (auto it = free_.rbegin(); it != free_.rend(); ++it)
    if (it->second >= bytes) return it->first + it->second - bytes;
  return capacity_;
}

void free_list::take(std::uint64_t offset, std::size_t bytes) {
  auto it = std::prev(free_.upper_bound(offset));
  const std::uint64_t start = it->first, end = it->first + it->second;
  free_.erase(it);
  if (start < offset) free_[start] = offset - start;
  if (offset + bytes < end) free_[offset + bytes] = end - (offset + bytes);
  used_[offset] = bytes;
  in_use_ += bytes;
}

bool free_list::give(std::uint64_t offset) {
  const auto used = used_.find(offset);
  if (used == used_.end()) return false;
  std::uint64_t start = offset, end = offset + used->second;
  in_use_ -= used->second;
  used_.erase(used);
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == end) {
    end += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto before = std::prev(next);
    if (before->first + before->second == start) {
      start = before->first;
      free_.erase(before);
    }
  }
  free_[start] = end - start;
  return true;
}

std::size_t free_list::largest_free() const {
  std::size_t best = 0;
  for (const auto& [offset, bytes] : free_) best = std::max(best, bytes);
  return best;
}

std::size_t free_list::block_bytes(std::uint64_t offset) const {
  const auto used = used_.find(offset);
  return used == used_.end() ? 0 : used->second;
}

symmetric_heap::symmetric_heap(runtime_state& st)
    : space(st.cfg.heap_size), size_(st.cfg.heap_size) {
  const auto& topo = *st.topo;
  MPI_Comm segment_comm = st.cfg.shm ? st.host_comm.get() : MPI_COMM_SELF;
  segment_ = std::make_unique<shm_segment>(segment_comm, size_);
  int segment_rank = 0;
  check_mpi(MPI_Comm_rank(segment_comm, &segment_rank), "MPI_Comm_rank");
  mine_ = segment_->slice(segment_rank);
  peers_.assign(static_cast<std::size_t>(st.size), nullptr);
  peers_[static_cast<std::size_t>(st.rank)] = mine_;
  if (st.cfg.shm)
    for (const auto& p : topo.all())
      if (p.host_index == topo.self().host_index)
        peers_[static_cast<std::size_t>(p.rank)] = segment_->slice(p.local_rank);
}

void symmetric_heap::connect(runtime_state& st) {
  choose_transport(st);
  // The same choice on every rank, so this is collective too.
  messages_ = dynamic_cast<active_messages*>(transport_.get());
#if CROWN_HAVE_UCX
  if (auto* ucx = dynamic_cast<ucx_transport*>(transport_.get())) messages_ = &ucx->messages();
#endif
  if (!messages_ && st.size > 1) {
    own_messages_ = std::make_unique<active_messages>(st.world_comm.get(), mine_, size_);
    messages_ = own_messages_.get();
  }
}

bool symmetric_heap::progress() noexcept {
  const bool moved = transport_ && transport_->progress();
  // Without a transport of their own, only remote_buffer and device-heap requests come
  // this way: no MPI call in the waits of a rank that expects neither.
  return (own_messages_ && (buffers_registered() || device_requests_served()) &&
          own_messages_->progress()) ||
         moved;
}

bool symmetric_heap::transport_lists_cuda_memory() const noexcept {
#if CROWN_HAVE_UCX
  if (const auto* ucx = dynamic_cast<const ucx_transport*>(transport_.get()))
    return ucx->lists_cuda_memory();
#endif
  return false;
}

void symmetric_heap::choose_transport(runtime_state& st) {
  // Every rank must take the same decision: each transport's set-up is collective.
  int need_transport = std::count(peers_.begin(), peers_.end(), nullptr) > 0;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &need_transport, 1, MPI_INT, MPI_MAX, st.world_comm.get()),
            "MPI_Allreduce(heap transport)");
  auto& chosen = st.transports;
  const auto because = [&](std::string why) {
    chosen.heap_transport = transport_ ? transport_->name() : "none";
    chosen.heap_transport_why = std::move(why);
  };
  if (!need_transport)
    return because(st.size == 1 ? "a single rank" : "every rank shares memory with every other");
  // CROWN_TRANSPORT: ucx = UCX RMA driven by Crown's progress engine; am = requests over
  // two-sided MPI; mpi = one MPI window; auto = ucx when built with it and UCX starts on
  // every rank (it serves requests without MPI calls, so a progress thread serves them
  // below MPI_THREAD_MULTIPLE too), else the window when MPI can make one, else am.
  const auto choice = st.cfg.transport;
  const std::string asked = "CROWN_TRANSPORT=" + std::string(to_string(choice));
  std::string no_ucx = "built without UCX";
  if (choice == transport_choice::ucx || choice == transport_choice::automatic) {
#if CROWN_HAVE_UCX
    try {
      transport_ = std::make_unique<ucx_transport>(st.world_comm.get(), mine_, size_);
      return because(choice == transport_choice::ucx
                         ? asked
                         : asked + ": UCX is built in and started on every rank");
    } catch (const state_error& e) {
      if (choice == transport_choice::ucx) throw;
      log(log_level::info, "UCX transport unavailable, trying the MPI window: ", e.what());
      no_ucx = std::string("UCX did not start: ") + e.what();
    }
#else
    if (choice == transport_choice::ucx)
      throw config_error("CROWN_TRANSPORT", "ucx was asked for, but this Crown was built "
                                            "without UCX (install libucx-dev and rebuild)");
#endif
  }
  if (choice == transport_choice::am) {
    use_active_messages(st);
    return because(asked);
  }
  if (!st.transports.mpi_rma)
    no_transport_reason_ = st.transports.mpi_rma_problem;
  else if ((transport_ =
                mpi_window::create(st.world_comm.get(), mine_, size_, no_transport_reason_)))
    return because(choice == transport_choice::mpi ? asked : asked + ": " + no_ucx);
  if (choice == transport_choice::automatic) {
    use_active_messages(st);
    return because(asked + ": " + no_ucx + ", and no MPI window (" + no_transport_reason_ + ")");
  }
  because(asked + ", but no MPI window: " + no_transport_reason_);
}

void symmetric_heap::use_active_messages(runtime_state& st) {
  transport_ = std::make_unique<active_messages>(st.world_comm.get(), mine_, size_);
}

symmetric_heap::~symmetric_heap() = default;

backend& symmetric_heap::backend_for(int rank) const {
  if (!transport_)
    throw state_error("one-sided access to rank " + std::to_string(rank),
                      "that rank is not reachable by load/store and there is no transport: " +
                          no_transport_reason_);
  return *transport_;
}

} // namespace crown::detail
