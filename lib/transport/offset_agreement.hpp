// lib/transport/offset_agreement.hpp — the offset a collective allocation takes in every
// member's heap (host and device heaps alike).
#pragma once
#include "symmetric_heap.hpp"
#include <cstdint>
#include <mpi.h>
#include <string>

namespace crown::detail {

/// Collective over `comm`: the lowest offset where `bytes` fit in every member's `space`.
/// Members propose, take the maximum, re-propose at or above it, until every proposal
/// agrees; space.capacity() on every member when some member has no room (each member
/// sees the same maximum, so all of them fail together). The caller holds the heap's
/// lock and takes the block.
std::uint64_t agree_on_offset(const free_list& space, MPI_Comm comm, std::size_t bytes,
                              const std::string& op);

} // namespace crown::detail
