// apps/heat2d/gpu_solver.hpp — crown-heat2d --gpu: the field in device memory (gpu_solver.cpp,
// built only where CMake found CUDA: HEAT2D_HAVE_CUDA).
#pragma once
#include "solver.hpp"

namespace heat2d {

/// solve() with both fields in device coarrays (coarray<double, 2, memory_kind::cuda>,
/// each rank's block on its GPU) and the update as a CUDA kernel: each iteration puts the
/// border rows and (packed) columns of the current field into the neighbours' halos with
/// device-coarray puts, syncs with the neighbours, and updates every owned cell. The
/// checksum is bitwise solve()'s (stencil.hpp). A host dist_tensor of the same layout
/// stages the field for checkpoints (the same files as solve()'s: either resumes the
/// other's), --resume and the gather. Collective over `world`; throws on every rank when
/// some rank has no device heap (no GPU visible, CROWN_GPU_HEAP_SIZE=0), naming it and why.
result solve_gpu(const crown::mesh& world, const options& o, bool keep_field,
                 const checkpointing& ck = {}, const crown::stop_signals* stop = nullptr);

} // namespace heat2d
