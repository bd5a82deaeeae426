// lib/transport/host_collectives.hpp — co_sum/co_min/co_max among ranks of one host.
#pragma once
#include <crown/collectives.hpp>
#include <crown/mesh.hpp>
#include <cstddef>
#include <mpi.h>

namespace crown::detail {

/// Reduces among members that all reach each other's heap by load/store, through
/// flags and buffers in the symmetric heap instead of MPI: small data (<= 4 KiB) is
/// reduced whole by every image after one flag barrier; heap data at one offset on
/// every member is reduced in place, each image its share; anything else goes through
/// heap buffers in chunks. Elements are combined in image order, so every image gets
/// bitwise the same result. Returns false, on every member alike, when some member is
/// not reachable by load/store or `type` is not a plain number type.
bool reduce_on_host(const mesh& m, void* data, std::size_t count, MPI_Datatype type,
                    std::size_t elem_size, reduction op, int result_image);

/// Drops the per-mesh flag and buffer blocks (the heap they live in is going away).
void forget_host_scratch() noexcept;

} // namespace crown::detail
