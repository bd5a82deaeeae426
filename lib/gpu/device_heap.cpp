// The device symmetric heap: made at start-up on the rank's GPU, mapped by its host.
#include "device_heap.hpp"
#include "cuda_error.hpp"
#include "device_startup.hpp"
#include "host_agreement.hpp"
#include "pointer_checks.hpp"
#include <crown/error.hpp>
#include <crown/log.hpp>
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

device_heap::device_buffer::~device_buffer() {
  if (p) (void)cudaFree(p);
}

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
  backend_ = std::make_unique<cuda_backend>(device_, peers_.data(), st.size);
}

device_heap::~device_heap() {
  views_.clear();
  backend_.reset(); // synchronises Crown's stream
  memory_.reset();  // unmaps the peers, meets them, frees this rank's memory
}

cuda_backend& device_heap::backend_for(int world_rank, std::string_view op) const {
  if (world_rank < 0 || world_rank >= world_size())
    throw argument_error(std::string(op), "rank " + std::to_string(world_rank) +
                                              " is out of range [0, " +
                                              std::to_string(world_size()) + ")");
  if (!peers_[static_cast<std::size_t>(world_rank)])
    throw state_error(std::string(op),
                      "the device heap of rank " + std::to_string(world_rank) + " (host " +
                          hosts_[static_cast<std::size_t>(world_rank)] +
                          ") is not mapped here (host " +
                          hosts_[static_cast<std::size_t>(current_rank())] +
                          "): device memory on other hosts, or of ranks without a device "
                          "heap, is not reachable yet (the cross-host device path is part 2, "
                          "issue 16)");
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
  if (slot) return slot->p;
  auto table = std::make_unique<device_buffer>();
  const device_guard on(device_);
  const std::size_t bytes = bases.size() * sizeof(std::byte*);
  check_cuda(cudaMalloc(&table->p, bytes),
             std::string(what) + ": cudaMalloc(" + std::to_string(bytes) + " bytes, view table)");
  check_cuda(cudaMemcpy(table->p, bases.data(), bytes, cudaMemcpyHostToDevice),
             std::string(what) + ": cudaMemcpy(view table)");
  slot = std::move(table);
  return slot->p;
}

void device_heap::forget_views(std::uint64_t offset) noexcept {
  const std::lock_guard lock(mutex);
  std::erase_if(views_, [&](const auto& v) { return v.first.first == offset; });
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

void start_device_heap(runtime_state& st) {
  // Without a visible GPU there is no device memory to pass by mistake: no checks.
  g_check_host_buffers = st.cfg.check == 1 && st.topo->host().gpus > 0;
  g_device_heap.reset();
  std::string why = reason_for_none(st);
  const int gpu = st.topo->self().gpu;
  // The ranks of this host that get a device heap map each other's.
  MPI_Comm group = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(st.host_comm.get(), why.empty() ? 0 : MPI_UNDEFINED, st.rank, &group),
            "MPI_Comm_split(device heap)");
  if (!why.empty()) {
    g_no_device_heap = why;
    return;
  }
  comm_handle owned(group);
  // Each step that can fail on one rank ends in an agreement over the group, so that no
  // rank walks into the group's next collective alone.
  std::string problem;
  std::optional<device_guard> on;
  try {
    on.emplace(gpu);
    check_cuda(cudaFree(nullptr), "creating the CUDA context"); // once, at start-up
  } catch (const error& e) {
    problem = e.what();
  }
  if (auto p = first_problem(group, problem); !p.empty())
    throw state_error("device heap on GPU " + std::to_string(gpu), p);
  std::unique_ptr<device_memory> memory;
  std::string not_vmm = "CROWN_GPU_MAPPING=ipc";
  if (st.cfg.gpu_mapping != gpu_mapping_choice::ipc) {
    try {
      memory = map_vmm(group, gpu, st.cfg.gpu_heap_size, not_vmm);
    } catch (const state_error& e) { // the descriptor exchange failed on every rank
      not_vmm = e.what();
    }
    if (!memory && st.cfg.gpu_mapping == gpu_mapping_choice::vmm)
      throw config_error("CROWN_GPU_MAPPING", "vmm was asked for, but " + not_vmm);
  }
  if (!memory) {
    if (st.cfg.gpu_mapping == gpu_mapping_choice::automatic)
      log(log_level::info, "device heap: CUDA VMM unavailable (", not_vmm, "), using CUDA IPC");
    memory = map_ipc(group, gpu, st.cfg.gpu_heap_size);
  }
  auto heap = std::make_unique<device_heap>(st, owned.release(), std::move(memory), gpu);
  if (st.rank == 0)
    log(log_level::info, "device heap: ", heap->size(), " bytes per rank on GPU ", gpu,
        ", same-host peers mapped with ", heap->mapping());
  g_device_heap = std::move(heap);
}

void stop_device_heap() noexcept {
  g_device_heap.reset();
  g_no_device_heap = "no crown::runtime is active";
  g_check_host_buffers = false;
}

const char* device_heap_mapping() noexcept {
  return g_device_heap ? g_device_heap->mapping() : nullptr;
}

} // namespace crown::detail
