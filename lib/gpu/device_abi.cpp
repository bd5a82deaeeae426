// The device-heap ABI (include/crown/detail/device_heap.hpp): collective allocation,
// transfers, atomics, put-with-notify and kernel-view tables, each checked and then
// handed to the backend chosen for the target rank at start-up.
#include "../mesh/crown_comm.hpp"
#include "../transport/agreement.hpp"
#include "../transport/offset_agreement.hpp"
#include "../transport/transfer.hpp"
#include "cuda_error.hpp"
#include "device_boxes.hpp"
#include "device_heap.hpp"
#include "strided_copies.hpp"
#include <algorithm>
#include <atomic>
#include <crown/detail/device_heap.hpp>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <crown/log.hpp>
#include <crown/mesh.hpp>
#include <cstdio>
#include <exception>
#include <utility>
#include <vector>

namespace crown::detail {
namespace {

constexpr std::size_t alignment = 256; // cudaMalloc's: any element type, vector loads

void check_range(const device_heap& h, std::uint64_t offset, std::size_t bytes,
                 std::string_view op) {
  if (offset > h.size() || bytes > h.size() - offset)
    throw argument_error(std::string(op), "bytes [" + std::to_string(offset) + ", " +
                                              std::to_string(offset + bytes) +
                                              ") fall outside the device heap of " +
                                              std::to_string(h.size()) + " bytes");
}

std::atomic<gpu_halos_choice> g_halos{gpu_halos_choice::copies};
std::atomic<std::uint64_t> g_box_launches{0};

/// Enqueues box `b` on `stream` as copies: one per plane, or one per row where a plane's
/// rows are no single cudaMemcpy2D (a pitch above `max_pitch`); a plane that is one run
/// goes as one plain copy.
void enqueue_box_copies(const box3& b, std::size_t elem, std::size_t max_pitch, cudaStream_t stream,
                        const char* op) {
  const auto plain = [&](std::byte* to, const std::byte* from, std::size_t bytes) {
    check_cuda(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, stream),
               std::string(op) + ": cudaMemcpyAsync(" + std::to_string(bytes) + " bytes)");
  };
  const std::size_t width = b.ex[2] * elem, to_pitch = b.te[2] * elem, from_pitch = b.fe[2] * elem;
  const bool by_rows =
      !b.planes_contiguous() && !fits_copy_2d(width, to_pitch, from_pitch, max_pitch);
  if (by_rows) count_row_split();
  for (std::size_t z = 0; z < b.ex[0]; ++z) {
    std::byte* const to = b.to + b.to_offset(z, 0, 0) * elem;
    const std::byte* const from = b.from + b.from_offset(z, 0, 0) * elem;
    if (b.planes_contiguous())
      plain(to, from, b.ex[1] * width);
    else if (by_rows)
      for (std::size_t y = 0; y < b.ex[1]; ++y)
        plain(to + y * to_pitch, from + y * from_pitch, width);
    else
      check_cuda(cudaMemcpy2DAsync(to, to_pitch, from, from_pitch, width, b.ex[1],
                                   cudaMemcpyDefault, stream),
                 std::string(op) + ": cudaMemcpy2DAsync(" + std::to_string(b.ex[1]) + " rows of " +
                     std::to_string(width) + " bytes)");
  }
}

/// Checks a caller's buffer for a device transfer: memory of another GPU that this
/// rank's GPU cannot reach is refused (always; device paths check every buffer), and
/// so is pageable host memory for stream-ordered transfers (`stream_ordered`), which
/// would make the copy synchronous and its stream order meaningless.
void check_buffer(const device_heap& h, const void* p, std::size_t bytes, bool stream_ordered,
                  std::string_view op) {
  if (bytes == 0) return;
  cudaPointerAttributes a{};
  // Unregistered host memory answers cudaSuccess (CUDA 11+); a failure is the GPU's (a
  // sticky error), not "pageable memory".
  if (const cudaError_t rc = cudaPointerGetAttributes(&a, p); rc == cudaErrorInvalidValue) {
    (void)cudaGetLastError();
    a.type = cudaMemoryTypeUnregistered;
  } else {
    check_cuda(rc, std::string(op) + ": cudaPointerGetAttributes of the caller's buffer");
  }
  if (a.type == cudaMemoryTypeDevice && a.device != h.device()) {
    int can = 0;
    (void)cudaDeviceCanAccessPeer(&can, h.device(), a.device);
    (void)cudaGetLastError();
    if (!can)
      throw argument_error(std::string(op),
                           "the buffer at " + std::to_string(reinterpret_cast<std::uintptr_t>(p)) +
                               " is memory of GPU " + std::to_string(a.device) +
                               ", which this rank's GPU " + std::to_string(h.device()) +
                               " cannot reach");
  }
  if (stream_ordered && a.type == cudaMemoryTypeUnregistered)
    throw argument_error(std::string(op),
                         "the buffer at " + std::to_string(reinterpret_cast<std::uintptr_t>(p)) +
                             " (" + std::to_string(bytes) +
                             " bytes) is pageable host memory: a stream-ordered transfer "
                             "needs device memory or page-locked host memory "
                             "(cudaMallocHost, cudaHostRegister)");
}

bool check_strided(const device_heap& h, const strided& s, std::string_view op,
                   std::size_t* packed_bytes) {
  std::size_t last = 0, total = 1;
  for (std::size_t d = 0; d < s.dims; ++d) {
    total *= s.count[d];
    last += (s.count[d] ? s.count[d] - 1 : 0) * s.stride[d];
  }
  *packed_bytes = total * s.elem;
  if (total == 0) return false;
  check_range(h, s.offset, last + s.elem, op);
  return true;
}

/// Where a checked transfer goes: a mapped peer's backend, or the staged path to a
/// rank on another host; neither when there is nothing to move.
struct device_route {
  cuda_backend* mapped = nullptr;
  staged_device* staged = nullptr;
};

device_route route_to(device_heap& h, int rank, std::string_view op) {
  if (staged_device* s = h.staged_for(rank, op)) return {nullptr, s};
  return {&h.backend_for(rank, op), nullptr};
}

/// Refuses a caller's stream that cannot carry this heap's copies (before anything moves,
/// so that no transfer is left half-done, to a mapped peer or a staged one).
void check_stream(const device_heap& h, cudaStream_t stream, const char* op) {
  if (std::string problem = stream_device_problem(stream, h.device()); !problem.empty())
    throw argument_error(op, std::move(problem));
}

/// The route for a contiguous transfer once the range, the target and the buffer are
/// checked.
device_route checked_contiguous(device_heap& h, int rank, std::uint64_t offset, void* buffer,
                                std::size_t bytes, bool stream_ordered, const char* op) {
  check_range(h, offset, bytes, op);
  const device_route to = route_to(h, rank, op);
  check_buffer(h, buffer, bytes, stream_ordered, op);
  return bytes == 0 ? device_route{} : to;
}

/// The same for a strided section (an empty section moves nothing).
device_route checked_strided(device_heap& h, int rank, const strided& s, void* packed,
                             bool stream_ordered, const char* op) {
  std::size_t bytes = 0;
  if (!check_strided(h, s, op, &bytes)) return {};
  const device_route to = route_to(h, rank, op);
  check_buffer(h, packed, bytes, stream_ordered, op);
  return to;
}

/// A transfer to a rank on another host: complete when this returns, its device copies
/// on `stream` after the stream's earlier work.
void staged(const device_route& to, bool put, int rank, std::span<const run> runs, void* buffer,
            cudaStream_t stream) {
  to.staged->transfer(put, rank, runs, static_cast<std::byte*>(buffer), stream);
}

void blocking(bool put, int rank, std::uint64_t offset, void* buffer, std::size_t bytes,
              const char* op) {
  device_heap& h = active_device_heap(op);
  const device_route to = checked_contiguous(h, rank, offset, buffer, bytes, false, op);
  const run r{offset, bytes};
  if (to.staged) return staged(to, put, rank, {&r, 1}, buffer, h.stream());
  if (to.mapped) to.mapped->copy(put, rank, {&r, 1}, static_cast<std::byte*>(buffer));
}

void blocking_strided(bool put, int rank, const strided& s, void* packed, const char* op) {
  device_heap& h = active_device_heap(op);
  const device_route to = checked_strided(h, rank, s, packed, false, op);
  if (to.staged) return staged(to, put, rank, runs_of(s), packed, h.stream());
  if (!to.mapped) return;
  async_handle done =
      to.mapped->start_strided(h.stream(), put, rank, s, static_cast<std::byte*>(packed));
  wait_remote(*done, op);
}

/// The offset every member agrees on, or every member throws (device heap exhausted).
std::uint64_t agree_on_device(device_heap& h, MPI_Comm comm, std::size_t rounded,
                              const std::string& op) {
  const std::uint64_t offset = agree_on_offset(h.space, comm, rounded, op);
  if (offset >= h.space.capacity())
    throw resource_error(
        op, "device heap exhausted: " + std::to_string(rounded) +
                " bytes needed on every member, device heap " + std::to_string(h.size()) +
                " bytes per rank on GPU " + std::to_string(h.device()) + ", " +
                std::to_string(h.space.in_use()) + " in use here, largest free block here " +
                std::to_string(h.space.largest_free()) + "; raise CROWN_GPU_HEAP_SIZE");
  return offset;
}

} // namespace

std::string image_and_rank(const mesh& m, int image) {
  return "image " + std::to_string(image) + " (rank " +
         std::to_string(m.ranks()[static_cast<std::size_t>(image)]) + ")";
}

std::pair<int, std::string> first_member_problem(const mesh& m, MPI_Comm comm,
                                                 const std::string& problem,
                                                 const std::string& what) {
  int first = problem.empty() ? m.size() : m.rank();
  MPI_Request r;
  complete(MPI_Iallreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm, &r), r,
           "MPI_Allreduce(" + what + ")");
  if (first == m.size()) return {-1, {}};
  char text[512] = {};
  if (first == m.rank()) std::snprintf(text, sizeof text, "%s", problem.c_str());
  complete(MPI_Ibcast(text, sizeof text, MPI_CHAR, first, comm, &r), r, "MPI_Bcast(" + what + ")");
  return {first, text};
}

void require_device_heaps(const mesh& m, MPI_Comm comm, const std::string& op) {
  std::string why;
  if (find_device_heap(&why))
    why.clear();
  else if (why.empty())
    why = "no device heap";
  const auto [first, text] = first_member_problem(m, comm, why, op + ": device heaps");
  if (first < 0) return;
  throw state_error(op, "memory_kind::cuda needs a device heap on every member, but " +
                            image_and_rank(m, first) + " has none: " + text);
}

heap_block device_allocate(const mesh& m, std::size_t bytes, std::uint64_t type_tag,
                           std::string_view what) {
  const std::string op = std::string(what) + " on " + m.to_string();
  MPI_Comm comm = crown_comm(m); // throws for non-members
  require_device_heaps(m, comm, op);
  device_heap& h = active_device_heap(op);
  const std::size_t rounded =
      (std::max<std::size_t>(bytes, 1) + alignment - 1) / alignment * alignment;
  if (current_state() && current_state()->cfg.check != 0)
    check_same_arguments(m,
                         {{"size in bytes", static_cast<long long>(bytes)},
                          {"element type", static_cast<long long>(type_tag >> 1)}},
                         op);
  heap_block b{0, bytes, false};
  {
    const std::lock_guard lock(h.mutex);
    b.offset = agree_on_device(h, comm, rounded, op);
    h.space.take(b.offset, rounded);
  }
  std::string problem;
  try {
    const device_guard on(h.device());
    check_cuda(cudaMemsetAsync(h.local(b.offset), 0, rounded, h.stream()),
               op + ": cudaMemsetAsync(" + std::to_string(rounded) + " bytes)");
    check_cuda(cudaStreamSynchronize(h.stream()), op + ": cudaStreamSynchronize");
  } catch (const std::exception& e) {
    problem = e.what();
  }
  // Agreed before anyone throws: a member that threw alone would leave the others in
  // the barrier below.
  if (const auto [first, text] = first_member_problem(m, comm, problem, op + ": clearing");
      first >= 0) {
    {
      const std::lock_guard lock(h.mutex);
      h.space.give(b.offset);
    }
    throw state_error(op,
                      "clearing the new block failed on " + image_and_rank(m, first) + ": " + text);
  }
  crown_barrier(m); // nobody writes into a block before its owner has cleared it
  return b;
}

void device_release(const mesh& m, const heap_block& b) noexcept {
  try {
    device_heap& h = active_device_heap("free");
    try {
      h.local_backend().quiet();
    } catch (const std::exception& e) { // logged; this rank still meets the others below
      log(log_level::error, "freeing a device allocation: ", e.what());
    }
    crown_barrier(m); // no member frees while another may still access the block
    h.forget_views(b.offset);
    const std::lock_guard lock(h.mutex);
    h.space.give(b.offset);
  } catch (const std::exception& e) {
    log(log_level::error, "freeing a device allocation failed: ", e.what());
  }
}

std::byte* device_address(std::uint64_t offset) noexcept {
  device_heap* h = find_device_heap();
  return h ? h->local(offset) : nullptr;
}

std::byte* device_peer_address(int world_rank, std::uint64_t offset) noexcept {
  device_heap* h = find_device_heap();
  return h && world_rank >= 0 && world_rank < h->world_size() ? h->peer(world_rank, offset)
                                                              : nullptr;
}

int device_ordinal() noexcept {
  device_heap* h = find_device_heap();
  return h ? h->device() : -1;
}

const char* device_link_to(int world_rank) noexcept {
  device_heap* h = find_device_heap();
  return h ? h->link_to(world_rank) : "none";
}

void device_put(int world_rank, std::uint64_t offset, const void* src, std::size_t bytes) {
  blocking(true, world_rank, offset, const_cast<void*>(src), bytes, "device put");
}

void device_get(int world_rank, std::uint64_t offset, void* dst, std::size_t bytes) {
  blocking(false, world_rank, offset, dst, bytes, "device get");
}

void device_put_strided(int world_rank, const strided& s, const void* packed) {
  blocking_strided(true, world_rank, s, const_cast<void*>(packed), "device put (section)");
}

void device_get_strided(int world_rank, const strided& s, void* packed) {
  blocking_strided(false, world_rank, s, packed, "device get (section)");
}

void device_start(bool put, int world_rank, std::uint64_t offset, void* buffer, std::size_t bytes,
                  CUstream_st* stream, completion& into) {
  const char* op = put ? "device put_async" : "device get_async";
  device_heap& h = active_device_heap(op);
  check_stream(h, stream, op);
  const device_route to =
      checked_contiguous(h, world_rank, offset, buffer, bytes, stream != nullptr, op);
  const run r{offset, bytes};
  if (to.staged) return staged(to, put, world_rank, {&r, 1}, buffer, stream ? stream : h.stream());
  if (!to.mapped) return;
  into.add(to.mapped->start_on(stream ? stream : h.stream(), put, world_rank, {&r, 1},
                               static_cast<std::byte*>(buffer)));
}

void device_start_strided(bool put, int world_rank, const strided& s, void* packed,
                          CUstream_st* stream, completion& into) {
  const char* op = put ? "device put_async (section)" : "device get_async (section)";
  device_heap& h = active_device_heap(op);
  check_stream(h, stream, op);
  const device_route to = checked_strided(h, world_rank, s, packed, stream != nullptr, op);
  if (to.staged)
    return staged(to, put, world_rank, runs_of(s), packed, stream ? stream : h.stream());
  if (!to.mapped) return;
  into.add(to.mapped->start_strided(stream ? stream : h.stream(), put, world_rank, s,
                                    static_cast<std::byte*>(packed)));
}

std::uint64_t device_atomic(int world_rank, std::uint64_t offset, atomic_op op, int width,
                            bool floating, std::uint64_t operand, std::uint64_t compare) {
  device_heap& h = active_device_heap("device atomic");
  check_range(h, offset, static_cast<std::size_t>(width), "device atomic");
  if (offset % static_cast<std::uint64_t>(width) != 0)
    throw argument_error("device atomic at offset " + std::to_string(offset),
                         "the word is not aligned to its size " + std::to_string(width));
  return h.backend_for(world_rank, "device atomic")
      .atomic(world_rank, offset, op, width, floating, operand, compare);
}

void device_put_notify(int world_rank, std::uint64_t offset, const void* src, std::size_t bytes,
                       std::uint64_t flag, std::int64_t add, bool device_flag, bool cpu) {
  const char* op = "device put_notify";
  device_heap& h = active_device_heap(op);
  if (!device_flag) { // the data is at the target before the host counter moves
    blocking(true, world_rank, offset, const_cast<void*>(src), bytes, op);
    (void)remote_atomic(world_rank, flag, atomic_op::add, 8, false, static_cast<std::uint64_t>(add),
                        0, cpu);
    return;
  }
  check_range(h, offset, bytes, op);
  cuda_backend& b = h.backend_for(world_rank, op);
  check_buffer(h, src, bytes, false, op);
  check_range(h, flag, sizeof(std::int64_t), "device put_notify (flag)");
  if (flag % sizeof(std::int64_t) != 0)
    throw argument_error("device put_notify: flag at offset " + std::to_string(flag),
                         "the word is not aligned to 8 bytes");
  const run r{offset, bytes};
  b.put_notify(world_rank, {&r, 1}, static_cast<const std::byte*>(src), flag, add);
}

void device_copy_boxes(std::size_t elem, std::size_t dims, std::span<const box_copy> boxes) {
  const char* op = "dist_tensor copy (device)";
  if (dims < 1 || dims > 3)
    throw argument_error(op, std::to_string(dims) + " dimensions (1 to 3 are supported)");
  device_heap& h = active_device_heap(op);
  const device_guard on(h.device());
  const bool by_kernel = g_halos.load(std::memory_order_relaxed) == gpu_halos_choice::kernel;
  const drain_on_failure drain(h.stream());
  std::vector<box3> kernel_boxes;
  std::size_t word = 8;
  for (const box_copy& c : boxes) {
    const box3 b =
        make_box3(dims, c.from, c.from_ext, c.from_at, c.to, c.to_ext, c.to_at, c.extent);
    if (b.count() == 0) continue;
    if (by_kernel && h.maps(c.from) && h.maps(c.to)) {
      kernel_boxes.push_back(b);
      word = std::min(word, box_word_bytes(b, elem));
    } else {
      enqueue_box_copies(b, elem, h.max_copy_pitch(), h.stream(), op);
    }
  }
  for (std::size_t k = 0; k < kernel_boxes.size(); k += boxes_per_launch) {
    check_cuda(launch_box_copies(h.stream(), kernel_boxes.data() + k,
                                 std::min(boxes_per_launch, kernel_boxes.size() - k), elem, word),
               std::string(op) + ": the box copy kernel (" + std::to_string(kernel_boxes.size()) +
                   " boxes of " + std::to_string(elem) + "-byte elements)");
    g_box_launches.fetch_add(1, std::memory_order_relaxed);
  }
  wait_for_gpu([&] { return cudaStreamQuery(h.stream()); }, std::string(op) + ": cudaStreamQuery");
}

gpu_halos_choice device_halos() noexcept { return g_halos.load(std::memory_order_relaxed); }
std::uint64_t device_box_kernel_launches() noexcept {
  return g_box_launches.load(std::memory_order_relaxed);
}
void set_device_halos(gpu_halos_choice how) noexcept {
  g_halos.store(how, std::memory_order_relaxed);
}

void device_quiet() {
  if (device_heap* h = find_device_heap()) h->local_backend().quiet();
}

void* device_view_table(const mesh& m, std::uint64_t offset, std::string_view what) {
  const auto ranks = m.ranks();
  return active_device_heap(what).view_table(offset, {ranks.begin(), ranks.end()}, what);
}

} // namespace crown::detail
