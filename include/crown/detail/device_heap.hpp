// include/crown/detail/device_heap.hpp — the non-template ABI under coarray<T, N,
// memory_kind::cuda>: the device symmetric heap (one per rank, on the rank's GPU,
// mapped by the ranks of its host at start-up). Implemented in lib/gpu/ (CUDA builds;
// elsewhere every call throws, naming the missing CUDA).
#pragma once
#include <crown/config.hpp>
#include <crown/detail/heap.hpp>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

struct CUstream_st; // cudaStream_t is CUstream_st*: no CUDA header needed here

namespace crown::detail {

/// Collective over the members of `m`: the same offset in every member's device heap,
/// zeroed. Throws on every member when some member has no device heap (naming it and
/// why: no GPU visible, CROWN_GPU_HEAP_SIZE=0, built without CUDA), when sizes or types
/// differ (unless CROWN_CHECK=0), or when the block does not fit (heap exhausted).
heap_block device_allocate(const mesh& m, std::size_t bytes, std::uint64_t type_tag,
                           std::string_view what);
/// Collective: completes this rank's device traffic, synchronises, frees.
void device_release(const mesh& m, const heap_block& b) noexcept;

/// This rank's device address of a device-heap offset (nullptr without a device heap).
std::byte* device_address(std::uint64_t offset) noexcept;
/// `world_rank`'s device heap at `offset` as mapped here, or nullptr when that rank is
/// on another host (or has no device heap).
std::byte* device_peer_address(int world_rank, std::uint64_t offset) noexcept;
/// The CUDA device of this rank's device heap, or -1.
int device_ordinal() noexcept;
/// crown::device_link: "self", "mapped", "staged" or "none".
const char* device_link_to(int world_rank) noexcept;

/// Blocking transfers between `world_rank`'s device heap and `buffer` (host or device
/// memory, of any process-local kind): return once the data is at the target (put) or
/// here (get).
void device_put(int world_rank, std::uint64_t offset, const void* src, std::size_t bytes);
void device_get(int world_rank, std::uint64_t offset, void* dst, std::size_t bytes);
void device_put_strided(int world_rank, const strided& s, const void* packed);
void device_get_strided(int world_rank, const strided& s, void* packed);

/// Starts a transfer and adds it to `into`. `stream` nullptr: on Crown's own stream (the
/// transfer overlaps the caller's work; sync_all, quiet and event::post complete it).
/// Any other handle (cudaStreamLegacy and cudaStreamPerThread for the default streams
/// too): in that stream's order, the completion holding an event recorded after it;
/// such a transfer completes with that stream (its completion, a stream or device
/// synchronisation), never from sync_all. Stream-ordered transfers need device or
/// page-locked host buffers (argument_error otherwise).
void device_start(bool put, int world_rank, std::uint64_t offset, void* buffer, std::size_t bytes,
                  CUstream_st* stream, completion& into);
void device_start_strided(bool put, int world_rank, const strided& s, void* packed,
                          CUstream_st* stream, completion& into);

/// Atomic on a 4- or 8-byte word of `world_rank`'s device heap, executed by the GPU
/// (atomic with kernels' atomics on the same word, the owner's too). Returns the
/// previous value's bits.
std::uint64_t device_atomic(int world_rank, std::uint64_t offset, atomic_op op, int width,
                            bool floating, std::uint64_t operand, std::uint64_t compare);

/// Put-with-notify: the put completes at the target, then `add` is added to the int64
/// word at `flag` — in the host heap (`device_flag` false: crown::event counters; `cpu`
/// as heap_block::cpu_atomics) or in the target's device heap (`device_flag` true: a
/// word kernels wait on with crown::device::wait_until).
void device_put_notify(int world_rank, std::uint64_t offset, const void* src, std::size_t bytes,
                       std::uint64_t flag, std::int64_t add, bool device_flag, bool cpu);

/// Completes every device transfer this rank started on Crown's stream.
void device_quiet();

/// One box of device_copy_boxes: `extent` elements between two row-major blocks of the
/// call's `dims` (1-3) dimensions (the first `dims` entries of each array count),
/// extents `from_ext` and `to_ext`, from `from_at` to `to_at`.
struct box_copy {
  const void* from = nullptr;
  void* to = nullptr;
  std::size_t from_ext[3] = {}, from_at[3] = {}, to_ext[3] = {}, to_at[3] = {}, extent[3] = {};
};

/// Copies every box, of `elem`-byte elements: either side host memory, this rank's
/// device memory or a mapped peer's (dist_tensor's halos and redistribution). Boxes
/// between device heaps (this rank's, mapped peers') go as CROWN_GPU_HALOS says (copies:
/// one copy per plane on Crown's stream; kernel: one kernel over all of them), the
/// others by copies; returns once every box is done (serving other ranks' requests
/// while it waits), also when it throws.
void device_copy_boxes(std::size_t elem, std::size_t dims, std::span<const box_copy> boxes);
/// How device_copy_boxes copies boxes between device heaps: CROWN_GPU_HALOS at start-up,
/// or what set_device_halos chose since (crown-bench gpu measures both).
gpu_halos_choice device_halos() noexcept;
void set_device_halos(gpu_halos_choice how) noexcept;
/// Lowers the widest pitch Crown gives one 2-D copy (cudaDevAttrMaxPitch, about 2 GiB)
/// to `bytes`, 0 restoring the device's: tests take the path of rows one copy each,
/// which a strided block with rows further apart than that takes.
void set_device_copy_pitch_limit(std::size_t bytes) noexcept;
/// Strided blocks and boxes whose copies went a row each for the pitch limit (tests
/// check that the path ran).
std::uint64_t device_row_split_copies() noexcept;
/// Box copy kernels this process launched (tests and benchmarks check the path ran).
std::uint64_t device_box_kernel_launches() noexcept;

/// A device array of `m`'s members' base addresses of the block at `offset` (image
/// order), for kernel views; made once per block and freed with it. Throws when an
/// image lies on another host (its memory is not mapped here).
void* device_view_table(const mesh& m, std::uint64_t offset, std::string_view what);

/// True when `p` points to device memory (cudaPointerGetAttributes); false without CUDA.
bool is_device_pointer(const void* p) noexcept;

} // namespace crown::detail
