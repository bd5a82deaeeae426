// crown-heat2d --gpu (gpu_solver.hpp): device coarrays, halos by device puts, a CUDA stencil.
#include "gpu_solver.hpp"
#include "gpu_kernels.hpp"
#include <crown/detail/device_heap.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace heat2d {
namespace {

using device_field = crown::coarray<double, 2, crown::memory_kind::cuda>;

/// One halo put: `count` elements at `from` (an offset into the current field's block,
/// or into the packed columns) into section `to` of `image`'s block.
struct halo_put {
  int image;
  crown::section<2> to;
  bool packed; ///< from the packed-column buffer, not the field
  std::size_t from;
  std::size_t count;
};

/// The puts that fill the neighbours' halos from this rank's block (padded coordinates,
/// `pitch` per row): its first and last owned rows into the north and south neighbours'
/// halo rows, its first and last owned columns (packed at 0 and rows) into the west and
/// east neighbours' halo columns. Corners are not needed by the 5-point update.
std::vector<halo_put> plan_puts(const crown::dist_tensor<double, 2>& t, std::size_t pitch) {
  const auto& l = t.layout();
  const auto own = t.own();
  const int me = t.mesh().rank();
  const std::size_t r = own.extent(0), c = own.extent(1), n0 = t.shape()[0], n1 = t.shape()[1];
  std::vector<halo_put> puts;
  if (own.lo[0] > 0) { // north: into its halo row below its last owned row
    const int img = l.owner({own.lo[0] - 1, own.lo[1]}, me);
    const std::size_t row = l.block_of(img).extent(0) + 1;
    puts.push_back({img, {{row, row + 1, 1}, {1, c + 1, 1}}, false, pitch + 1, c});
  }
  if (own.hi[0] < n0) { // south: into its halo row 0
    const int img = l.owner({own.hi[0], own.lo[1]}, me);
    puts.push_back({img, {{0, 1, 1}, {1, c + 1, 1}}, false, r * pitch + 1, c});
  }
  if (own.lo[1] > 0) { // west: into its halo column right of its last owned column
    const int img = l.owner({own.lo[0], own.lo[1] - 1}, me);
    const std::size_t col = l.block_of(img).extent(1) + 1;
    puts.push_back({img, {{1, r + 1, 1}, {col, col + 1, 1}}, true, 0, r});
  }
  if (own.hi[1] < n1) { // east: into its halo column 0
    const int img = l.owner({own.lo[0], own.hi[1]}, me);
    puts.push_back({img, {{1, r + 1, 1}, {0, 1, 1}}, true, r, r});
  }
  return puts;
}

} // namespace

result solve_gpu(const crown::mesh& world, const options& o, bool keep_field,
                 const checkpointing& ck, const crown::stop_signals* stop) {
  const crown::mesh m = run_mesh(world, o);
  // The host copy: fixed edges, checkpoints, --resume and the gather.
  crown::dist_tensor<double, 2> host(m, {o.n, o.n}, placements(), halo);
  set_edges(host);
  const crown::view<double, 2> p = host.padded(); // the same extents on every rank
  const std::size_t pitch = p.extent(1), bytes = p.extent(0) * pitch * sizeof(double);
  // Construction throws on every rank where one has no GPU; halo puts to images on other
  // hosts are staged through host memory.
  device_field a(m, {p.extent(0), pitch});
  device_field b(m, {p.extent(0), pitch});
  const std::size_t r = host.own().extent(0), c = host.own().extent(1);
  // Agreed before anyone throws: a rank that failed alone would leave the others in the
  // first halo exchange while it met them in the coarrays' deallocation.
  std::optional<gpu::stream> s;
  std::optional<gpu::buffer> columns; // the west and east owned columns, packed
  std::string why;                    // this rank's failure
  try {
    gpu::use_device(crown::detail::device_ordinal()); // the GPU of Crown's device heap
    s.emplace();
    columns.emplace(2 * r);
  } catch (const std::exception& e) {
    why = e.what();
  }
  int failed = why.empty() ? m.size() : m.rank(); // the first image that failed
  crown::co_min(m, failed);
  if (failed < m.size())
    throw std::runtime_error(!why.empty() ? why
                                          : "heat2d --gpu: image " + std::to_string(failed) +
                                                " failed to set up its GPU stream or buffer");
  const std::vector<halo_put> puts = plan_puts(host, pitch);
  std::vector<int> neighbours;
  for (const halo_put& h : puts) neighbours.push_back(h.image);

  const std::optional<crown::checkpoint_dir> dir = checkpoints(m, ck);
  const int first = ck.resume ? resume(*dir, host, o) : 0;
  gpu::copy(a.data(), p.data(), bytes, s->get()); // edges (and the resumed field) in both
  gpu::copy(b.data(), p.data(), bytes, s->get());
  device_field* u = &a;
  device_field* v = &b;
  const auto to_host = [&] { gpu::copy(p.data(), u->data(), bytes, s->get()); };
  const loop_result loop = iterate(
      m, o, ck, dir.has_value(), stop, first,
      [&] {
        for (const halo_put& h : puts)
          if (h.packed)
            gpu::pack_column(u->data(), pitch, r, h.from == 0 ? 1 : c, columns->data() + h.from,
                             s->get());
        s->synchronize(); // the last update and the packing are done: the borders are ready
        for (const halo_put& h : puts) {
          const double* from = (h.packed ? columns->data() : u->data()) + h.from;
          u->on(h.image).put(h.to, std::span<const double>(from, h.count)); // blocking
        }
        if (!neighbours.empty()) crown::sync_images(m, neighbours); // their borders are here
        gpu::update(u->data(), v->data(), pitch, r, c, s->get());
        std::swap(u, v);
      },
      [&](int it) {
        to_host();
        save(*dir, host, o, it);
      });
  to_host(); // waits for the last update
  return finish(m, host, keep_field, loop);
}

} // namespace heat2d
