// include/crown/sync.hpp — image control: sync_all, sync_images, sync_memory.
#pragma once
#include <crown/mesh.hpp>
#include <initializer_list>
#include <span>

namespace crown {

/// Completes this image's outstanding one-sided traffic, waits for every member of
/// `m`, and makes what they wrote before their sync_all visible to this image's loads.
void sync_all(const mesh& m);
/// sync_all over the world mesh.
void sync_all();
/// The same pairwise: waits until every image in `images` (indices in `m`) has called
/// sync_images naming this image. Duplicates or indices outside the mesh throw.
void sync_images(const mesh& m, std::span<const int> images);
inline void sync_images(const mesh& m, std::initializer_list<int> images) {
  sync_images(m, std::span<const int>(images.begin(), images.size()));
}
/// Completes this image's outstanding traffic and orders its memory accesses, without
/// waiting for anyone (Fortran's sync memory).
void sync_memory();
/// Orders this image's earlier puts before its later ones at every target, without
/// waiting for them where the transport can (OpenSHMEM's shmem_fence).
void fence();
/// Serves other ranks' one-sided requests and advances this rank's own transfers once.
/// Every Crown call does this; call it from long phases outside Crown when no progress
/// thread runs (see docs/memory-model.md, "Progress").
void progress();

} // namespace crown
