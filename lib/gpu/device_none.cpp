// The device-heap ABI in builds without CUDA: no device heap; every use says why.
#include "collective_path.hpp"
#include "device_startup.hpp"
#include "pointer_checks.hpp"
#include <crown/detail/device_heap.hpp>
#include <crown/error.hpp>

namespace crown::detail {
namespace {
[[noreturn]] void no_cuda(std::string_view op) {
  throw state_error(std::string(op), "memory_kind::cuda needs a device heap, but this Crown was "
                                     "built without CUDA (no nvcc found at configure time)");
}
} // namespace

std::atomic<bool> g_check_host_buffers{false};
void refuse_device_buffer(const void*, std::size_t, const char*) {}
bool is_device_pointer(const void*) noexcept { return false; }
void start_device_heap(runtime_state&) {}
void stop_device_heap() noexcept {}
const char* device_heap_mapping() noexcept { return nullptr; }

heap_block device_allocate(const mesh&, std::size_t, std::uint64_t, std::string_view what) {
  no_cuda(what);
}
void device_release(const mesh&, const heap_block&) noexcept {}
std::byte* device_address(std::uint64_t) noexcept { return nullptr; }
std::byte* device_peer_address(int, std::uint64_t) noexcept { return nullptr; }
int device_ordinal() noexcept { return -1; }
const char* device_link_to(int) noexcept { return "none"; }
void device_put(int, std::uint64_t, const void*, std::size_t) { no_cuda("device put"); }
void device_get(int, std::uint64_t, void*, std::size_t) { no_cuda("device get"); }
void device_put_strided(int, const strided&, const void*) { no_cuda("device put"); }
void device_get_strided(int, const strided&, void*) { no_cuda("device get"); }
void device_start(bool, int, std::uint64_t, void*, std::size_t, CUstream_st*, completion&) {
  no_cuda("device transfer");
}
void device_start_strided(bool, int, const strided&, void*, CUstream_st*, completion&) {
  no_cuda("device transfer");
}
std::uint64_t device_atomic(int, std::uint64_t, atomic_op, int, bool, std::uint64_t,
                            std::uint64_t) {
  no_cuda("device atomic");
}
void device_put_notify(int, std::uint64_t, const void*, std::size_t, std::uint64_t, std::int64_t,
                       bool, bool) {
  no_cuda("device put_notify");
}
void device_quiet() {}
void device_copy_boxes(std::size_t, std::size_t, std::span<const box_copy>) {
  no_cuda("dist_tensor copy (device)");
}
gpu_halos_choice device_halos() noexcept { return gpu_halos_choice::copies; }
void set_device_copy_pitch_limit(std::size_t) noexcept {}
std::uint64_t device_row_split_copies() noexcept { return 0; }
void set_device_halos(gpu_halos_choice) noexcept {}
std::uint64_t device_box_kernel_launches() noexcept { return 0; }
void* device_view_table(const mesh&, std::uint64_t, std::string_view what) { no_cuda(what); }

void run_device_collective(const device_collective& c) {
  // A bad argument reads the same with or without CUDA.
  if (const std::string problem = device_collective_problem(c); !problem.empty())
    throw argument_error(device_collective_what(c), problem);
  no_cuda(device_collective_what(c));
}
device_path device_collectives_path(const mesh& m, std::string*) {
  no_cuda("device collectives on " + m.to_string());
}

} // namespace crown::detail
