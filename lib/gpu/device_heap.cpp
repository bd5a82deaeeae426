// The device symmetric heap: made at start-up on the rank's GPU, mapped by its host.
#include "device_heap.hpp"
#include "../transport/heap_state.hpp"
#include "cuda_error.hpp"
#include "device_startup.hpp"
#include "host_agreement.hpp"
#include "offhost_path.hpp"
#include "pointer_checks.hpp"
#include <crown/detail/device_heap.hpp>
#include <crown/detail/fault.hpp>
#include <crown/error.hpp>
#include <crown/log.hpp>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace crown::detail {
namespace {

std::unique_ptr<device_heap> g_device_heap;
std::string g_no_device_heap = "no crown::runtime is active";

/// Why this rank gets no device heap, or empty when it should have one.
std::string reason_for_none(const runtime_state& st) {
  if (st.cfg.gpu_heap_size == 0) return "CROWN_GPU_HEAP_SIZE=0 turned the device heap off";
  if (st.topo->self().gpu >= 0) return {};
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();
  return "no GPU is visible to this rank (cudaGetDeviceCount: " +
         std::string(rc == cudaSuccess
                         ? std::to_string(count) + " devices"
                         : std::string(cudaGetErrorName(rc)) + ", " + cudaGetErrorString(rc)) +
         ")";
}

} // namespace

device_heap::device_heap(runtime_state& st, MPI_Comm group, std::unique_ptr<device_memory> memory,
                         int device)
    : space(memory->size()), group_(group), device_(device), memory_(std::move(memory)) {
  peers_.assign(static_cast<std::size_t>(st.size), nullptr);
  int members = 0;
  check_mpi(MPI_Comm_size(group, &members), "MPI_Comm_size");
  std::vector<int> world_ranks(static_cast<std::size_t>(members));
  check_mpi(MPI_Allgather(&st.rank, 1, MPI_INT, world_ranks.data(), 1, MPI_INT, group),
            "MPI_Allgather(device heap members)");
  for (int i = 0; i < members; ++i)
    peers_[static_cast<std::size_t>(world_ranks[static_cast<std::size_t>(i)])] = memory_->peer(i);
  for (const auto& p : st.topo->all()) hosts_.push_back(p.host);
  // Agreed over the group: a member that threw alone would leave the others in the
  // barrier its memory's destructor meets them in.
  std::string problem;
  try {
    const device_guard on(device_);
    backend_ = std::make_unique<cuda_backend>(device_, peers_.data(), st.size);
    // Room for 256 tables over the whole world, at least 256 KiB.
    views_area_ = std::make_unique<view_area>(std::max<std::size_t>(
        std::size_t{1} << 18, std::size_t{256} * sizeof(std::byte*) * peers_.size()));
  } catch (const std::exception& e) {
    problem = e.what();
  }
  if (auto p = first_problem(group, problem); !p.empty()) {
    views_area_.reset();
    backend_.reset();
    throw state_error("device heap on GPU " + std::to_string(device_), p);
  }
}

device_heap::view_area::view_area(std::size_t bytes) : slots_(bytes) {
  void* d = nullptr;
  check_cuda(cudaMalloc(&d, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes, view area)");
  device_ = static_cast<std::byte*>(d);
  void* h = nullptr;
  if (const cudaError_t rc = cudaHostAlloc(&h, bytes, cudaHostAllocDefault); rc != cudaSuccess) {
    (void)cudaFree(d);
    check_cuda(rc, "cudaHostAlloc(" + std::to_string(bytes) + " bytes, view staging)");
  }
  staging_ = static_cast<std::byte*>(h);
}

device_heap::view_area::~view_area() {
  (void)cudaFreeHost(staging_);
  (void)cudaFree(device_); // at shutdown, after Crown's stream was synchronised
}

void* device_heap::view_area::upload(const std::vector<std::byte*>& bases, cudaStream_t stream,
                                     std::string_view what) {
  const std::size_t bytes = bases.size() * sizeof(std::byte*);
  const std::uint64_t at = slots_.first_fit_from(0, bytes);
  if (at >= slots_.capacity())
    throw resource_error(std::string(what),
                         "the area for kernel-view tables is full (" +
                             std::to_string(slots_.capacity()) + " bytes, " +
                             std::to_string(slots_.in_use()) +
                             " in use): free device coarrays whose views are no longer used");
  slots_.take(at, std::max<std::size_t>(bytes, 1));
  try {
    std::memcpy(staging_ + at, bases.data(), bytes);
    check_cuda(cudaMemcpyAsync(device_ + at, staging_ + at, bytes, cudaMemcpyHostToDevice, stream),
               std::string(what) + ": cudaMemcpyAsync(view table, " + std::to_string(bytes) +
                   " bytes)");
    // Only Crown's stream: the table is complete before any kernel the caller launches.
    check_cuda(cudaStreamSynchronize(stream), std::string(what) + ": cudaStreamSynchronize");
  } catch (...) {
    slots_.give(at);
    throw;
  }
  return device_ + at;
}

void device_heap::view_area::release(void* table) noexcept {
  (void)slots_.give(static_cast<std::uint64_t>(static_cast<std::byte*>(table) - device_));
}

device_heap::~device_heap() {
  // On the heap's GPU: streams, mappings and memory are freed in its context, whatever
  // device the application left current (a close in another context fails unseen).
  std::optional<device_guard> on;
  try {
    on.emplace(device_);
  } catch (const error&) { // then free what the current device lets go
  }
  staged_.reset(); // no request is served once the memory starts going
  views_.clear();
  backend_.reset(); // synchronises Crown's stream
  views_area_.reset();
  memory_.reset(); // unmaps the peers, meets them, frees this rank's memory
}

void device_heap::reach_other_hosts(const std::vector<int>& has_heap, active_messages* am) {
  staged_.reset();
  has_heap_ = has_heap;
  for (std::size_t r = 0; r < has_heap.size(); ++r)
    if (has_heap[r] && !peers_[r] && am) {
      staged_ = std::make_unique<staged_device>(*this, *am);
      return;
    }
}

const char* device_heap::link_to(int world_rank) const noexcept {
  if (world_rank < 0 || world_rank >= world_size()) return "none";
  const auto r = static_cast<std::size_t>(world_rank);
  return device_link(world_rank == current_rank(), peers_[r] != nullptr, true,
                     r < has_heap_.size() && has_heap_[r] != 0, staged_ != nullptr);
}

staged_device* device_heap::staged_for(int world_rank, std::string_view op) const {
  if (world_rank >= 0 && world_rank < world_size() &&
      staged_to(static_cast<std::size_t>(world_rank)))
    return staged_.get();
  (void)backend_for(world_rank, op); // throws, naming why, unless the rank is mapped
  return nullptr;
}

cuda_backend& device_heap::backend_for(int world_rank, std::string_view op) const {
  if (world_rank < 0 || world_rank >= world_size())
    throw argument_error(std::string(op), "rank " + std::to_string(world_rank) +
                                              " is out of range [0, " +
                                              std::to_string(world_size()) + ")");
  const auto r = static_cast<std::size_t>(world_rank);
  if (!peers_[r]) {
    const std::string where = "rank " + std::to_string(world_rank) + " (host " + hosts_[r] +
                              ", not this rank's host " +
                              hosts_[static_cast<std::size_t>(current_rank())] + ")";
    if (r < has_heap_.size() && !has_heap_[r])
      throw state_error(std::string(op), where + " has no device heap");
    throw state_error(std::string(op),
                      staged_to(r)
                          ? where + " is reached by staged transfers, which carry puts and "
                                    "gets only: device atomics, put_notify with a device flag "
                                    "and kernel views need the same-host mapping"
                          : where + " is not reachable: no active messages to carry requests");
  }
  return *backend_;
}

void* device_heap::view_table(std::uint64_t offset, const std::vector<int>& ranks,
                              std::string_view what) {
  std::vector<std::byte*> bases;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    std::byte* b = peer(ranks[i], offset);
    if (!b)
      throw argument_error(std::string(what),
                           "image " + std::to_string(i) + " (rank " + std::to_string(ranks[i]) +
                               ", host " + hosts_[static_cast<std::size_t>(ranks[i])] +
                               ") is not on this rank's host (" +
                               hosts_[static_cast<std::size_t>(current_rank())] +
                               "): a kernel view reaches images of its own host only");
    bases.push_back(b);
  }
  const std::lock_guard lock(mutex);
  auto& slot = views_[{offset, ranks}];
  if (!slot) {
    const device_guard on(device_);
    try {
      slot = views_area_->upload(bases, stream(), what);
    } catch (...) {
      views_.erase({offset, ranks});
      throw;
    }
  }
  return slot;
}

void device_heap::forget_views(std::uint64_t offset) noexcept {
  const std::lock_guard lock(mutex);
  std::erase_if(views_, [&](const auto& v) {
    if (v.first.first != offset) return false;
    views_area_->release(v.second);
    return true;
  });
}

device_heap* find_device_heap(std::string* why) noexcept {
  if (!g_device_heap && why) *why = g_no_device_heap;
  return g_device_heap.get();
}

device_heap& active_device_heap(std::string_view op) {
  std::string why;
  if (device_heap* h = find_device_heap(&why)) return *h;
  throw state_error(std::string(op), "this rank has no device heap: " + why);
}

namespace {

/// Collective over `group` (this host's ranks that make a device heap): the heap, or a
/// throw on every member.
std::unique_ptr<device_heap> make_device_heap(runtime_state& st, comm_handle group, int gpu) {
  // Each step that can fail on one rank ends in an agreement over the group, so that no
  // rank walks into the group's next collective alone.
  std::string problem;
  std::optional<device_guard> on;
  try {
    on.emplace(gpu);
    check_cuda(cudaFree(nullptr), "creating the CUDA context"); // once, at start-up
  } catch (const std::exception& e) {
    problem = e.what();
  }
  if (auto p = first_problem(group.get(), problem); !p.empty())
    throw state_error("device heap on GPU " + std::to_string(gpu), p);
  std::unique_ptr<device_memory> memory;
  std::string not_vmm = "CROWN_GPU_MAPPING=ipc";
  if (st.cfg.gpu_mapping != gpu_mapping_choice::ipc) {
    try {
      memory = map_vmm(group.get(), gpu, st.cfg.gpu_heap_size, not_vmm);
    } catch (const state_error& e) { // the descriptor exchange failed on every rank
      not_vmm = e.what();
    }
    if (!memory && st.cfg.gpu_mapping == gpu_mapping_choice::vmm)
      throw config_error("CROWN_GPU_MAPPING", "vmm was asked for, but " + not_vmm);
  }
  if (!memory) {
    if (st.cfg.gpu_mapping == gpu_mapping_choice::automatic)
      log(log_level::info, "device heap: CUDA VMM unavailable (", not_vmm, "), using CUDA IPC");
    memory = map_ipc(group.get(), gpu, st.cfg.gpu_heap_size);
  }
  return std::make_unique<device_heap>(st, group.release(), std::move(memory), gpu);
}

/// The device-heap settings were chosen (environment or a config that is not the
/// default): a failed set-up then ends the start-up instead of running without.
bool settings_chosen(const config& c) {
  return std::getenv("CROWN_GPU_HEAP_SIZE") || std::getenv("CROWN_GPU_MAPPING") ||
         c.gpu_heap_size != config{}.gpu_heap_size ||
         c.gpu_mapping != gpu_mapping_choice::automatic;
}

} // namespace

void start_device_heap(runtime_state& st) {
  set_device_halos(st.cfg.gpu_halos);
  // Without a visible GPU there is no device memory to pass by mistake: no checks.
  g_check_host_buffers = st.cfg.check == 1 && st.topo->host().gpus > 0;
  g_device_heap.reset();
  std::string problem; // why this rank's set-up failed
  try {
    fault_point_reached(fault_point::gpu_heap); // a test hook: as if the set-up failed here
  } catch (const std::exception& e) {
    problem = e.what();
  }
  const std::string none = reason_for_none(st); // by design, not a failure
  // The ranks of this host that make a device heap map each other's.
  MPI_Comm group = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(st.host_comm.get(), none.empty() && problem.empty() ? 0 : MPI_UNDEFINED,
                           st.rank, &group),
            "MPI_Comm_split(device heap)");
  std::unique_ptr<device_heap> heap;
  if (group != MPI_COMM_NULL) {
    try {
      heap = make_device_heap(st, comm_handle(group), st.topo->self().gpu);
    } catch (const std::exception& e) { // thrown on every member of the group
      problem = e.what();
    }
  }
  // Decided together over the world: a failure anywhere means no device heap anywhere
  // (an allocation needs one on every member); the usable size is the world's smallest
  // (VMM rounds to the granularity of each host, IPC does not).
  const std::string failed = first_problem(st.world_comm.get(), problem);
  unsigned long long agreed[2] = {heap ? heap->size() : ~0ULL, settings_chosen(st.cfg) ? 0ULL : 1};
  check_mpi(
      MPI_Allreduce(MPI_IN_PLACE, agreed, 2, MPI_UNSIGNED_LONG_LONG, MPI_MIN, st.world_comm.get()),
      "MPI_Allreduce(device heap size)");
  if (!failed.empty()) {
    heap.reset(); // every member of a group frees together (they meet in the destructor)
    if (agreed[1] == 0)
      throw state_error("device heap", failed + " (CROWN_GPU_HEAP_SIZE or CROWN_GPU_MAPPING "
                                                "was set: a failed device heap ends the start-up)");
    g_no_device_heap = "the device heap failed at start-up on " + failed +
                       "; Crown runs without one (set CROWN_GPU_HEAP_SIZE or CROWN_GPU_MAPPING "
                       "to make such a failure end the start-up)";
    if (st.rank == 0) log(log_level::warn, "device heap: ", g_no_device_heap);
    st.transports.device_offhost_why = g_no_device_heap;
    return;
  }
  std::vector<int> has_heap(static_cast<std::size_t>(st.size));
  const int mine = heap != nullptr;
  check_mpi(MPI_Allgather(&mine, 1, MPI_INT, has_heap.data(), 1, MPI_INT, st.world_comm.get()),
            "MPI_Allgather(device heaps)");
  // The staged path, agreed over the world (ranks without a heap take part): a rank that
  // cannot serve must not be asked.
  symmetric_heap* host_heap = active_heap();
  std::string no_staging;
  if (heap) {
    heap->limit(agreed[0]);
    try {
      heap->reach_other_hosts(has_heap, host_heap ? host_heap->messages() : nullptr);
    } catch (const std::exception& e) {
      no_staging = e.what();
    }
  }
  no_staging = first_problem(st.world_comm.get(), no_staging);
  if (!heap) {
    g_no_device_heap = none;
    st.transports.device_offhost_why = "this rank has no device heap: " + none;
    return;
  }
  if (!no_staging.empty()) heap->reach_other_hosts(has_heap, nullptr);
  offhost_facts facts{probe_mpi_cuda(), host_heap && host_heap->transport_lists_cuda_memory(), 0};
  for (int r = 0; r < st.size; ++r)
    facts.staged_peers += std::string_view(heap->link_to(r)) == "staged";
  const offhost_choice choice = choose_offhost_path(facts);
  st.transports.device_offhost = choice.path;
  st.transports.device_offhost_why =
      no_staging.empty() ? choice.why : "the staged path failed to start on " + no_staging;
  if (st.rank == 0)
    log(log_level::info, "device heap: ", heap->size(), " bytes per rank on GPU ", heap->device(),
        ", same-host peers mapped with ", heap->mapping());
  g_device_heap = std::move(heap);
}

void stop_device_heap() noexcept {
  forget_device_collectives();
  g_device_heap.reset();
  g_no_device_heap = "no crown::runtime is active";
  g_check_host_buffers = false;
}

const char* device_heap_mapping() noexcept {
  return g_device_heap ? g_device_heap->mapping() : nullptr;
}

} // namespace crown::detail
