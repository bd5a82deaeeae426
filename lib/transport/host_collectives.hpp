// lib/transport/host_collectives.hpp — co_sum/co_min/co_max among ranks of one host.
#pragma once
#include "test_hooks.hpp"
#include <chrono>
#include <crown/collectives.hpp>
#include <crown/config.hpp>
#include <crown/mesh.hpp>
#include <cstddef>
#include <cstdint>
#include <mpi.h>
#include <optional>
#include <sys/types.h>

namespace crown::detail {

/// Reduces among members that all reach each other's heap by load/store, with flag
/// barriers and buffers in the symmetric heap instead of MPI: up to 56 bytes the values
/// travel in the arrival flag's cache line; up to 2 KiB every image reduces all values
/// after one flag barrier; heap data at one offset on every member is reduced in place,
/// each image its share; ordinary memory above 64 KiB to every image is read from the
/// other processes with one kernel copy (process_vm_readv) where CROWN_SINGLE_COPY and the
/// ptrace rules allow (probed at the first such reduction of a mesh); anything
/// else goes through heap buffers in chunks. Elements are combined in image order, so every image
/// gets bitwise the same result. Returns false, on every member alike, when some member is not
/// reachable by load/store or `type` is not a plain number type.
bool reduce_on_host(const mesh& m, void* data, std::size_t count, MPI_Datatype type,
                    std::size_t elem_size, reduction op, int result_image);

/// Heap held by the co_* scratch blocks on this rank (one per distinct mesh that reduced
/// on one host, kept for reuse until the runtime ends): heap-full messages count it.
struct host_scratch_usage {
  std::size_t bytes = 0;
  std::size_t meshes = 0;
};
host_scratch_usage host_scratch_in_use() noexcept;

/// Drops the per-mesh flag and buffer blocks (the heap they live in is going away) and
/// takes back the ptrace grant, if the probe made one.
void forget_host_scratch() noexcept;

/// Whether kernel copies between processes (process_vm_*) may be tried at all:
/// CROWN_SINGLE_COPY, and the tests' switch (set_host_single_copy).
bool single_copy_enabled() noexcept;
/// Lets any process of this user read and write this one (PR_SET_PTRACER_ANY) where
/// Yama's scope 1 would refuse it, as Open MPI's vader and UCX's cma do; taken back by
/// forget_host_scratch at the runtime's end. Nothing where Yama does not decide.
void grant_process_access() noexcept;

/// Copies `bytes` at `remote` in process `pid` to `local` with one kernel copy
/// (process_vm_readv); false when it did not move them all.
bool read_process(pid_t pid, std::uint64_t remote, void* local, std::size_t bytes);

/// Best of three (after a warm-up of each) of a kernel copy of `bytes` at `remote` in
/// process `pid` into `local`, and of copy_bytes from `mapped` into `local`: whether
/// kernel copies pay here (co_* of ordinary memory, remote_buffer's staging slots).
/// nullopt when a kernel copy failed.
struct copy_times {
  std::chrono::steady_clock::duration kernel, copy;
};
std::optional<copy_times> time_kernel_copy(pid_t pid, std::uint64_t remote, const void* mapped,
                                           void* local, std::size_t bytes);

/// Applies CROWN_SINGLE_COPY (at runtime start, the same on every rank).
void configure_host_collectives(const config& c) noexcept;

} // namespace crown::detail
