// The device heap's memory: CUDA VMM with POSIX file-descriptor handles, or legacy IPC.
#include "device_memory.hpp"
#include "cuda_error.hpp"
#include "driver_api.hpp"
#include "fd_exchange.hpp"
#include "host_agreement.hpp"
#include <crown/error.hpp>
#include <cstdint>
#include <cstring>
#include <cuda_runtime_api.h>

namespace crown::detail {
namespace {

int host_rank(MPI_Comm host, int* size = nullptr) {
  int r = 0;
  check_mpi(MPI_Comm_rank(host, &r), "MPI_Comm_rank");
  if (size) check_mpi(MPI_Comm_size(host, size), "MPI_Comm_size");
  return r;
}

/// Meets the other ranks of the host before memory is freed (they unmapped theirs).
void meet(MPI_Comm host) noexcept {
  int finalized = 1;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Barrier(host);
}

} // namespace

device_memory::device_memory(MPI_Comm host, std::size_t bytes) : size_(bytes) {
  int size = 0;
  me_ = host_rank(host, &size);
  bases_.assign(static_cast<std::size_t>(size), nullptr);
}

namespace {

// ---- CUDA VMM ------------------------------------------------------------------------

/// One physical allocation handle (created here or imported from a peer's descriptor),
/// mapped at a reserved address range with read/write access for `device`. RAII: the
/// destructor unmaps, frees the range and releases the handle, in that order.
class vmm_mapping {
public:
  vmm_mapping(const driver_api& d, CUmemGenericAllocationHandle handle, std::size_t bytes,
              std::size_t alignment, int device, const std::string& what)
      : d_(d), handle_(handle), bytes_(bytes) {
    try {
      check_cu(d_.reserve(&address_, bytes, alignment, 0, 0),
               "cuMemAddressReserve(" + std::to_string(bytes) + " bytes) for " + what);
      check_cu(d_.map(address_, bytes, 0, handle_, 0), "cuMemMap(" + what + ")");
      mapped_ = true;
      CUmemAccessDesc access{};
      access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      access.location.id = device;
      access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      check_cu(d_.set_access(address_, bytes, &access, 1),
               "cuMemSetAccess(" + what + ", read/write for GPU " + std::to_string(device) + ")");
    } catch (...) {
      release();
      throw;
    }
  }
  ~vmm_mapping() { release(); }
  vmm_mapping(const vmm_mapping&) = delete;
  vmm_mapping& operator=(const vmm_mapping&) = delete;
  [[nodiscard]] std::byte* base() const noexcept {
    return reinterpret_cast<std::byte*>(static_cast<std::uintptr_t>(address_));
  }

private:
  void release() noexcept {
    if (mapped_) (void)d_.unmap(address_, bytes_);
    if (address_) (void)d_.address_free(address_, bytes_);
    (void)d_.release(handle_);
    mapped_ = false;
    address_ = 0;
  }

  const driver_api& d_;
  CUmemGenericAllocationHandle handle_;
  std::size_t bytes_;
  CUdeviceptr address_ = 0;
  bool mapped_ = false;
};

class vmm_memory final : public device_memory {
public:
  vmm_memory(MPI_Comm host, std::size_t bytes) : device_memory(host, bytes), host_(host) {
    maps_.resize(bases_.size());
  }
  ~vmm_memory() override {
    for (std::size_t r = 0; r < maps_.size(); ++r)
      if (static_cast<int>(r) != me_) maps_[r].reset();
    meet(host_);
    maps_.clear();
  }
  [[nodiscard]] const char* kind() const noexcept override { return "vmm"; }
  void adopt(int rank, std::unique_ptr<vmm_mapping> m) {
    bases_[static_cast<std::size_t>(rank)] = m->base();
    maps_[static_cast<std::size_t>(rank)] = std::move(m);
  }

private:
  MPI_Comm host_;
  std::vector<std::unique_ptr<vmm_mapping>> maps_;
};

/// A handle not yet owned by a mapping (released unless handed over).
struct pending_handle {
  const driver_api* d = nullptr;
  CUmemGenericAllocationHandle h = 0;
  bool held = false;
  ~pending_handle() {
    if (held) (void)d->release(h);
  }
  CUmemGenericAllocationHandle take() {
    held = false;
    return h;
  }
};

} // namespace

std::unique_ptr<device_memory> map_vmm(MPI_Comm host, int device, std::size_t bytes,
                                       std::string& why_not) {
  std::string problem;
  const driver_api* d = driver(&problem);
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  unsigned long long granularity = 0;
  if (d) {
    CUdevice dev = 0;
    int vmm = 0, fd_handles = 0;
    std::size_t g = 0;
    if (d->device_get(&dev, device) != CUDA_SUCCESS ||
        d->device_attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) !=
            CUDA_SUCCESS ||
        d->device_attribute(&fd_handles,
                            CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                            dev) != CUDA_SUCCESS)
      problem = "cuDeviceGetAttribute failed on GPU " + std::to_string(device);
    else if (!vmm || !fd_handles)
      problem = "GPU " + std::to_string(device) +
                " lacks virtual memory management or file-descriptor handles";
    else if (d->granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS)
      problem = "cuMemGetAllocationGranularity failed on GPU " + std::to_string(device);
    granularity = g;
  }
  if (!(why_not = first_problem(host, problem)).empty()) return nullptr;

  // Every rank reserves the same size at the same alignment, so that peers map it whole.
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &granularity, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, host),
            "MPI_Allreduce(VMM granularity)");
  const std::size_t rounded = (bytes + granularity - 1) / granularity * granularity;
  auto memory = std::make_unique<vmm_memory>(host, rounded);
  pending_handle mine{d};
  unique_fd exported;
  if (CUresult rc = d->create(&mine.h, rounded, &prop, 0); rc != CUDA_SUCCESS) {
    problem = "cuMemCreate(" + std::to_string(rounded) + " bytes on GPU " + std::to_string(device) +
              "): " + driver_error_text(rc);
  } else {
    mine.held = true;
    int fd = -1;
    if (CUresult e = d->export_handle(&fd, mine.h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        e != CUDA_SUCCESS)
      problem = "cuMemExportToShareableHandle(POSIX fd): " + driver_error_text(e);
    exported = unique_fd(fd);
  }
  if (!(why_not = first_problem(host, problem)).empty()) return nullptr;

  const int me = host_rank(host);
  std::vector<unique_fd> peers = exchange_fds(host, exported.get());
  try {
    memory->adopt(me, std::make_unique<vmm_mapping>(*d, mine.take(), rounded, granularity, device,
                                                    "this rank's device heap"));
    for (std::size_t r = 0; r < peers.size(); ++r) {
      if (static_cast<int>(r) == me) continue;
      pending_handle imported{d};
      void* os_handle = reinterpret_cast<void*>(static_cast<std::intptr_t>(peers[r].get()));
      check_cu(d->import_handle(&imported.h, os_handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
               "cuMemImportFromShareableHandle(device heap of host rank " + std::to_string(r) +
                   ")");
      imported.held = true;
      peers[r].reset(); // the handle keeps the memory; the descriptor is no longer needed
      memory->adopt(static_cast<int>(r), std::make_unique<vmm_mapping>(
                                             *d, imported.take(), rounded, granularity, device,
                                             "the device heap of host rank " + std::to_string(r)));
    }
  } catch (const std::exception& e) {
    problem = e.what();
  }
  if (!(why_not = first_problem(host, problem)).empty()) return nullptr;
  return memory;
}

// ---- legacy CUDA IPC -----------------------------------------------------------------

namespace {

class ipc_memory final : public device_memory {
public:
  ipc_memory(MPI_Comm host, std::size_t bytes) : device_memory(host, bytes), host_(host) {}
  ~ipc_memory() override {
    for (std::size_t r = 0; r < bases_.size(); ++r)
      if (static_cast<int>(r) != me_ && bases_[r]) (void)cudaIpcCloseMemHandle(bases_[r]);
    meet(host_); // nobody frees memory another rank still has open
    if (local()) (void)cudaFree(local());
  }
  [[nodiscard]] const char* kind() const noexcept override { return "ipc"; }
  void set(int rank, void* p) {
    bases_[static_cast<std::size_t>(rank)] = static_cast<std::byte*>(p);
  }

private:
  MPI_Comm host_;
};

} // namespace

std::unique_ptr<device_memory> map_ipc(MPI_Comm host, int device, std::size_t bytes) {
  int size = 0;
  const int me = host_rank(host, &size);
  auto memory = std::make_unique<ipc_memory>(host, bytes);
  std::string problem;
  cudaIpcMemHandle_t mine{};
  try {
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes)");
    memory->set(me, p);
    check_cuda(cudaIpcGetMemHandle(&mine, p), "cudaIpcGetMemHandle");
  } catch (const std::exception& e) {
    problem = e.what();
  }
  if (auto p = first_problem(host, problem); !p.empty())
    throw state_error("device heap (CUDA IPC) on GPU " + std::to_string(device), p);
  std::vector<cudaIpcMemHandle_t> all(static_cast<std::size_t>(size));
  check_mpi(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, host),
            "MPI_Allgather(CUDA IPC handles)");
  try {
    for (int r = 0; r < size; ++r) {
      if (r == me) continue;
      void* p = nullptr;
      check_cuda(cudaIpcOpenMemHandle(&p, all[static_cast<std::size_t>(r)],
                                      cudaIpcMemLazyEnablePeerAccess),
                 "cudaIpcOpenMemHandle(device heap of host rank " + std::to_string(r) + ")");
      memory->set(r, p);
    }
  } catch (const std::exception& e) {
    problem = e.what();
  }
  if (auto p = first_problem(host, problem); !p.empty())
    throw state_error("device heap (CUDA IPC) on GPU " + std::to_string(device), p);
  return memory;
}

} // namespace crown::detail
