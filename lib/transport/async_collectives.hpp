// lib/transport/async_collectives.hpp — co_*_async: collectives in flight on a mesh.
#pragma once
#include <crown/collectives.hpp>
#include <crown/mesh.hpp>
#include <cstddef>
#include <memory>
#include <mpi.h>

namespace crown::detail {

/// A collective in flight on a mesh's private communicator. advance() tests its MPI
/// request (and, once it completed, runs the local step that finishes the result) and
/// is true once the result is in the caller's buffer; it throws mpi_error naming the
/// collective. Destroying one that is still in flight finishes it first (the other
/// members take part regardless, and MPI may still use the buffers).
class collective_request {
public:
  virtual ~collective_request() = default;
  virtual bool advance() = 0;
  /// A member's world rank this one waits on (named if the wait stalls).
  [[nodiscard]] virtual int peer() const noexcept = 0;
};

/// Starts a reduction of `count` elements in place into every image. With `fold` null
/// the operation is exact (integers) and one MPI_Iallreduce; otherwise (floating point)
/// one MPI_Iallgather of every image's data, folded in image order with `fold` by every
/// image, so that every image holds bitwise the same result. Null when there is nothing
/// to exchange (one image, or no elements).
std::unique_ptr<collective_request> start_reduction(const mesh& m, void* data, std::size_t count,
                                                    MPI_Datatype type, std::size_t elem_size,
                                                    reduction op, fold_fn fold, const char* name);

/// Starts a broadcast of `bytes` from `source_image` (one MPI_Ibcast).
std::unique_ptr<collective_request> start_broadcast(const mesh& m, void* data, std::size_t bytes,
                                                    int source_image, const char* name);

/// On a thread that may call MPI (may_call_mpi_here): while a collective is in flight,
/// drives MPI's progress engine once (the collective needs every member's MPI to
/// advance); otherwise once every 64 calls (messages this rank received may still owe
/// their senders a last step).
/// Crown's waits call it on every poll (the progress hook), so an image that waits in a
/// Crown call that makes no MPI call itself (a flag barrier, an event, a lock) still
/// serves the collectives and the messages others wait for.
void progress_collectives() noexcept;

} // namespace crown::detail
