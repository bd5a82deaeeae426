// Crown's C API (include/crown/crown.h) over the C++ library: type-erased coarrays on
// the heap ABI, every exception turned into a status code and a thread-local message.
#include <array>
#include <complex>
#include <crown/checkpoint.hpp>
#include <crown/collectives.hpp>
#include <crown/crown.h>
#include <crown/detail/checked.hpp>
#include <crown/detail/fault.hpp>
#include <crown/detail/heap.hpp>
#include <crown/detail/types.hpp>
#include <crown/event.hpp>
#include <crown/lock.hpp>
#include <crown/runtime.hpp>
#include <crown/section.hpp>
#include <crown/sync.hpp>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

struct crown_coarray {
  crown::mesh team;
  int type;
  int rank;
  std::array<std::size_t, 3> extents;
  std::size_t elements;
  crown::detail::heap_block block;
};
struct crown_checkpoint {
  std::optional<crown::checkpoint_writer> w;
  std::optional<crown::checkpoint_reader> r;
};
struct crown_event {
  crown::event e;
};
struct crown_lock {
  crown::image_lock l;
};

namespace {

thread_local std::string t_error;
std::unique_ptr<crown::runtime> g_runtime;
std::mutex g_locals_mutex;
std::map<const void*, crown_coarray*> g_locals; // local block -> coarray (crown_coarray_of)

/// Runs f, turning what it throws into a status and the thread's error message.
template <typename F>
int guarded(F&& f) {
  try {
    t_error.clear();
    f();
    return CROWN_OK;
  } catch (const crown::checkpoint_error& e) {
    t_error = e.what();
    return CROWN_ERR_CHECKPOINT;
  } catch (const crown::argument_error& e) {
    t_error = e.what();
    return CROWN_ERR_ARGUMENT;
  } catch (const crown::mpi_error& e) {
    t_error = e.what();
    return CROWN_ERR_MPI;
  } catch (const crown::resource_error& e) {
    t_error = e.what();
    return CROWN_ERR_RESOURCE;
  } catch (const crown::error& e) {
    t_error = e.what();
    return CROWN_ERR_STATE;
  } catch (const std::exception& e) {
    t_error = e.what();
    return CROWN_ERR_OTHER;
  } catch (...) {
    t_error = "unknown exception";
    return CROWN_ERR_OTHER;
  }
}

const crown::mesh& world(const char* what) {
  if (!g_runtime) throw crown::state_error(what, "crown_init has not been called");
  return g_runtime->world();
}

/// Calls f with a value of the C++ type for `type` (for dispatch).
template <typename F>
void with_type(int type, const char* what, F&& f) {
  switch (type) {
  case CROWN_INT32:
    return f(std::int32_t{});
  case CROWN_INT64:
    return f(std::int64_t{});
  case CROWN_FLOAT:
    return f(float{});
  case CROWN_DOUBLE:
    return f(double{});
  case CROWN_COMPLEX_FLOAT:
    return f(std::complex<float>{});
  case CROWN_COMPLEX_DOUBLE:
    return f(std::complex<double>{});
  }
  throw crown::argument_error(what, "unknown element type " + std::to_string(type));
}

const crown_coarray& live(const crown_coarray* a, const char* what) {
  if (!a) throw crown::argument_error(what, "a null coarray handle");
  return *a;
}

std::string describe(const crown_coarray& a, const char* op, int image) {
  std::string text = op;
  text += " on coarray(";
  for (int d = 0; d < a.rank; ++d) {
    if (d) text += ',';
    text += std::to_string(a.extents[static_cast<std::size_t>(d)]);
  }
  text += ") of image ";
  text += std::to_string(image);
  return text;
}

int world_rank_of(const crown_coarray& a, int image, const char* op) {
  if (image < 0 || image >= a.team.size())
    throw crown::argument_error(describe(a, op, image),
                                "image out of range [0, " + std::to_string(a.team.size()) + ")");
  return a.team.ranks()[static_cast<std::size_t>(image)];
}

template <std::size_t N, typename What>
crown::detail::strided section_of(const crown_coarray& a, const size_t* begin, const size_t* end,
                                  const size_t* stride, const What& what) {
  crown::section<N> s;
  std::array<std::size_t, N> extents;
  for (std::size_t d = 0; d < N; ++d) {
    s[d] = {begin[d], end[d], stride ? stride[d] : 1};
    extents[d] = a.extents[d];
  }
  return crown::detail::section_layout(s, extents, crown_type_size(a.type), a.block, what);
}

crown::detail::strided section(const crown_coarray& a, int image, const size_t* begin,
                               const size_t* end, const size_t* stride, const char* op) {
  const auto what = [&] { return describe(a, op, image); }; // for an error only
  if (!begin || !end) throw crown::argument_error(what(), "null section bounds");
  switch (a.rank) {
  case 1:
    return section_of<1>(a, begin, end, stride, what);
  case 2:
    return section_of<2>(a, begin, end, stride, what);
  default:
    return section_of<3>(a, begin, end, stride, what);
  }
}

template <typename Reduce>
int reduction(int type, void* data, size_t count, int image, const char* what, Reduce reduce) {
  return guarded([&] {
    const crown::mesh& m = world(what);
    if (!data && count) throw crown::argument_error(what, "null data");
    if (image < -1 || image >= m.size())
      throw crown::argument_error(what, "result image " + std::to_string(image) +
                                            " out of range [0, " + std::to_string(m.size()) + ")");
    with_type(type, what, [&](auto zero) {
      using T = decltype(zero);
      reduce(m, std::span<T>(static_cast<T*>(data), count), image);
    });
  });
}

} // namespace

extern "C" {

const char* crown_last_error(void) { return t_error.c_str(); }

size_t crown_type_size(int type) {
  std::size_t bytes = 0;
  try {
    with_type(type, "crown_type_size", [&](auto zero) { bytes = sizeof(zero); });
  } catch (...) {}
  return bytes;
}

int crown_init(int* argc, char*** argv) {
  return guarded([&] {
    if (g_runtime) throw crown::state_error("crown_init", "Crown is already initialised");
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (initialised) {
      g_runtime = std::make_unique<crown::runtime>(MPI_COMM_WORLD);
    } else if (argc && argv) {
      g_runtime = std::make_unique<crown::runtime>(*argc, *argv);
    } else {
      g_runtime = std::make_unique<crown::runtime>();
    }
  });
}

int crown_finalize(void) {
  return guarded([] {
    if (!g_runtime) throw crown::state_error("crown_finalize", "crown_init has not been called");
    crown::sync_all(g_runtime->world());
    { // coarrays never freed die with the runtime (their memory goes with its heap)
      const std::lock_guard lock(g_locals_mutex);
      for (auto& [local, a] : g_locals) delete a;
      g_locals.clear();
    }
    g_runtime.reset();
  });
}

int crown_initialized(void) { return g_runtime ? 1 : 0; }
int crown_this_image(void) { return g_runtime ? g_runtime->rank() : -1; }
int crown_num_images(void) { return g_runtime ? g_runtime->size() : 0; }

int crown_coarray_allocate(int type, int rank, const size_t* extents, crown_coarray** out,
                           void** local) {
  return guarded([&] {
    const char* what = "crown_coarray_allocate";
    const crown::mesh& m = world(what);
    if (!out || !local || !extents) throw crown::argument_error(what, "null argument");
    if (rank < 1 || rank > 3)
      throw crown::argument_error(what, "rank " + std::to_string(rank) + " (allowed: 1 to 3)");
    const std::size_t elem = crown_type_size(type);
    if (!elem) throw crown::argument_error(what, "unknown element type " + std::to_string(type));
    auto a = std::make_unique<crown_coarray>(
        crown_coarray{m, type, rank, {1, 1, 1}, 1, crown::detail::heap_block{}});
    for (int d = 0; d < rank; ++d) a->extents[static_cast<std::size_t>(d)] = extents[d];
    // Saturated, never wrapped: the heap refuses an impossible size on every image alike.
    a->elements = crown::detail::element_count(
        std::span<const std::size_t>(a->extents.data(), static_cast<std::size_t>(rank)));
    // The tag makes a mismatch of type or rank between images an error on all of them,
    // naming both types.
    std::uint64_t tag = 0;
    with_type(type, what, [&](auto zero) {
      using T = decltype(zero);
      tag = rank == 1   ? crown::detail::type_tag<T, 1>()
            : rank == 2 ? crown::detail::type_tag<T, 2>()
                        : crown::detail::type_tag<T, 3>();
    });
    a->block = crown::detail::heap_allocate(m, crown::detail::saturating_mul(a->elements, elem),
                                            tag, describe(*a, what, m.rank()));
    *local = crown::detail::heap_address(a->block.offset);
    *out = a.get();
    const std::lock_guard lock(g_locals_mutex);
    g_locals[*local] = a.release();
  });
}

int crown_coarray_free(crown_coarray* a) {
  return guarded([&] {
    const crown_coarray& c = live(a, "crown_coarray_free");
    crown::detail::heap_release(c.team, c.block);
    {
      const std::lock_guard lock(g_locals_mutex);
      g_locals.erase(crown::detail::heap_address(c.block.offset));
    }
    delete a;
  });
}

crown_coarray* crown_coarray_of(const void* local) {
  const std::lock_guard lock(g_locals_mutex);
  const auto it = g_locals.find(local);
  return it == g_locals.end() ? nullptr : it->second;
}

size_t crown_coarray_elements(const crown_coarray* a) { return a ? a->elements : 0; }

int crown_put(const crown_coarray* a, int image, const void* src) {
  return guarded([&] {
    crown::detail::fault_point_reached(crown::fault_point::put);
    const crown_coarray& c = live(a, "crown_put");
    const int rank = world_rank_of(c, image, "put");
    crown::detail::remote_put(rank, c.block.offset, src, c.elements * crown_type_size(c.type));
  });
}

int crown_get(const crown_coarray* a, int image, void* dst) {
  return guarded([&] {
    const crown_coarray& c = live(a, "crown_get");
    const int rank = world_rank_of(c, image, "get");
    crown::detail::remote_get(rank, c.block.offset, dst, c.elements * crown_type_size(c.type));
  });
}

int crown_put_section(const crown_coarray* a, int image, const size_t* begin, const size_t* end,
                      const size_t* stride, const void* packed) {
  return guarded([&] {
    crown::detail::fault_point_reached(crown::fault_point::put);
    const crown_coarray& c = live(a, "crown_put_section");
    const int rank = world_rank_of(c, image, "put");
    crown::detail::remote_put_strided(rank, section(c, image, begin, end, stride, "put"), packed);
  });
}

int crown_get_section(const crown_coarray* a, int image, const size_t* begin, const size_t* end,
                      const size_t* stride, void* packed) {
  return guarded([&] {
    const crown_coarray& c = live(a, "crown_get_section");
    const int rank = world_rank_of(c, image, "get");
    crown::detail::remote_get_strided(rank, section(c, image, begin, end, stride, "get"), packed);
  });
}

int crown_sync_all(void) {
  return guarded([] { crown::sync_all(world("crown_sync_all")); });
}

int crown_sync_images(const int* images, int count) {
  return guarded([&] {
    const crown::mesh& m = world("crown_sync_images");
    if (count < 0 || (count > 0 && !images))
      throw crown::argument_error("crown_sync_images", "a bad image list");
    crown::sync_images(m, std::span<const int>(images, static_cast<std::size_t>(count)));
  });
}

int crown_sync_memory(void) {
  return guarded([] {
    (void)world("crown_sync_memory");
    crown::sync_memory();
  });
}

int crown_event_create(crown_event** out) {
  return guarded([&] {
    if (!out) throw crown::argument_error("crown_event_create", "null argument");
    *out = new crown_event{crown::event(world("crown_event_create"))};
  });
}
int crown_event_free(crown_event* e) {
  return guarded([&] {
    if (!e) throw crown::argument_error("crown_event_free", "a null event");
    crown::sync_all(e->e.team()); // nobody posts to a freed event
    delete e;
  });
}
int crown_event_post(crown_event* e, int image) {
  return guarded([&] {
    if (!e) throw crown::argument_error("crown_event_post", "a null event");
    e->e.post(image);
  });
}
int crown_event_wait(crown_event* e, int64_t until) {
  return guarded([&] {
    if (!e) throw crown::argument_error("crown_event_wait", "a null event");
    e->e.wait(until);
  });
}
int crown_event_query(crown_event* e, int64_t* count) {
  return guarded([&] {
    if (!e || !count) throw crown::argument_error("crown_event_query", "null argument");
    *count = e->e.query();
  });
}

int crown_lock_create(crown_lock** out) {
  return guarded([&] {
    if (!out) throw crown::argument_error("crown_lock_create", "null argument");
    *out = new crown_lock{crown::image_lock(world("crown_lock_create"))};
  });
}
int crown_lock_free(crown_lock* l) {
  return guarded([&] {
    if (!l) throw crown::argument_error("crown_lock_free", "a null lock");
    crown::sync_all(world("crown_lock_free"));
    delete l;
  });
}
int crown_lock_acquire(crown_lock* l, int image) {
  return guarded([&] {
    if (!l) throw crown::argument_error("crown_lock_acquire", "a null lock");
    l->l.lock(image);
  });
}
int crown_lock_release(crown_lock* l, int image) {
  return guarded([&] {
    if (!l) throw crown::argument_error("crown_lock_release", "a null lock");
    l->l.unlock(image);
  });
}

int crown_atomic(const crown_coarray* a, int image, size_t element, int op, int64_t value,
                 int64_t compare, int64_t* old) {
  return guarded([&] {
    const crown_coarray& c = live(a, "crown_atomic");
    const int rank = world_rank_of(c, image, "atomic");
    if (c.type != CROWN_INT32 && c.type != CROWN_INT64)
      throw crown::argument_error(describe(c, "atomic", image),
                                  "atomics need an int32 or int64 coarray");
    if (element >= c.elements)
      throw crown::argument_error(describe(c, "atomic", image),
                                  "element " + std::to_string(element) + " out of range [0, " +
                                      std::to_string(c.elements) + ")");
    using crown::detail::atomic_op;
    constexpr std::array<atomic_op, 8> ops{{atomic_op::load, atomic_op::store, atomic_op::load,
                                            atomic_op::add, atomic_op::bit_and, atomic_op::bit_or,
                                            atomic_op::bit_xor, atomic_op::compare_swap}};
    if (op < CROWN_ATOMIC_DEFINE || op > CROWN_ATOMIC_CAS)
      throw crown::argument_error(describe(c, "atomic", image),
                                  "unknown operation " + std::to_string(op));
    const atomic_op o = ops[static_cast<std::size_t>(op)]; // indexed by crown_atomic_op
    const int width = c.type == CROWN_INT32 ? 4 : 8;
    const std::uint64_t result = crown::detail::remote_atomic(
        rank, c.block.offset + element * static_cast<std::size_t>(width), o, width, false,
        static_cast<std::uint64_t>(value), static_cast<std::uint64_t>(compare),
        c.block.cpu_atomics);
    if (old)
      *old = width == 4 ? static_cast<std::int32_t>(static_cast<std::uint32_t>(result))
                        : static_cast<std::int64_t>(result);
  });
}

int crown_co_sum(int type, void* data, size_t count, int result_image) {
  return reduction(
      type, data, count, result_image, "crown_co_sum",
      [](const crown::mesh& m, auto span, int image) { crown::co_sum(m, span, image); });
}
int crown_co_min(int type, void* data, size_t count, int result_image) {
  return reduction(
      type, data, count, result_image, "crown_co_min",
      [](const crown::mesh& m, auto span, int image) { crown::co_min(m, span, image); });
}
int crown_co_max(int type, void* data, size_t count, int result_image) {
  return reduction(
      type, data, count, result_image, "crown_co_max",
      [](const crown::mesh& m, auto span, int image) { crown::co_max(m, span, image); });
}
int crown_co_broadcast(int type, void* data, size_t count, int source_image) {
  return guarded([&] {
    const crown::mesh& m = world("crown_co_broadcast");
    if (source_image < 0 || source_image >= m.size())
      throw crown::argument_error("crown_co_broadcast",
                                  "source image " + std::to_string(source_image) +
                                      " out of range [0, " + std::to_string(m.size()) + ")");
    const std::size_t bytes = crown::detail::saturating_mul(count, crown_type_size(type));
    if (bytes == crown::detail::size_overflow)
      throw crown::resource_error("crown_co_broadcast",
                                  std::to_string(count) + " elements exceed 2^64 bytes");
    crown::detail::co_broadcast_bytes(m, data, bytes, source_image, "crown_co_broadcast");
  });
}

} // extern "C"

// ------------------------------------------------------------------ checkpoints

namespace {

crown::detail::ckpt_type checkpoint_type(int type, const char* what) {
  switch (type) {
  case CROWN_INT32:
    return crown::detail::ckpt_type::i32;
  case CROWN_INT64:
    return crown::detail::ckpt_type::i64;
  case CROWN_FLOAT:
    return crown::detail::ckpt_type::f32;
  case CROWN_DOUBLE:
    return crown::detail::ckpt_type::f64;
  }
  throw crown::argument_error(what, "element type " + std::to_string(type) +
                                        " (checkpoints hold int32, int64, float and double)");
}

crown::checkpoint_writer& writer_of(crown_checkpoint* c, const char* what) {
  if (!c || !c->w) throw crown::argument_error(what, "not a checkpoint opened for writing");
  return *c->w;
}
crown::checkpoint_reader& reader_of(crown_checkpoint* c, const char* what) {
  if (!c || !c->r) throw crown::argument_error(what, "not a checkpoint opened for reading");
  return *c->r;
}
std::string name_of(const char* name, const char* what) {
  if (!name) throw crown::argument_error(what, "a null name");
  return name;
}
std::vector<std::size_t> shape_of(int ndim, const size_t* shape, const char* what) {
  if (ndim < 1 || !shape) throw crown::argument_error(what, "a shape needs ndim >= 1 extents");
  return {shape, shape + ndim};
}
std::size_t elements_of(const std::vector<std::size_t>& shape) {
  std::size_t n = 1;
  for (std::size_t e : shape) n *= e;
  return n;
}
/// The coarray's dataset and this image's piece (its whole block).
std::pair<crown::detail::ckpt_dataset, crown::detail::ckpt_piece>
coarray_layout(const crown_coarray& a, const std::string& name, const char* what) {
  std::vector<std::size_t> extents(a.extents.begin(), a.extents.begin() + a.rank);
  crown::detail::ckpt_dataset d{
      name, crown::detail::ckpt_kind::coarray, checkpoint_type(a.type, what), extents, "", ""};
  d.shape.insert(d.shape.begin(), static_cast<std::size_t>(a.team.size()));
  return {d, crown::checkpoint_writer::coarray_piece(a.team.rank(), extents,
                                                     crown::detail::heap_address(a.block.offset))};
}
void copy_out(const std::string& text, char* out, std::size_t size, const char* what) {
  if (!out || size <= text.size())
    throw crown::argument_error(what, "room for " + std::to_string(size) + " characters, " +
                                          std::to_string(text.size() + 1) + " needed");
  std::memcpy(out, text.c_str(), text.size() + 1);
}

} // namespace

int crown_checkpoint_create(const char* path, crown_checkpoint** out) {
  return guarded([&] {
    const char* what = "crown_checkpoint_create";
    if (!out) throw crown::argument_error(what, "null argument");
    auto c = std::make_unique<crown_checkpoint>();
    c->w.emplace(world(what), name_of(path, what));
    *out = c.release();
  });
}
int crown_checkpoint_open(const char* path, crown_checkpoint** out) {
  return guarded([&] {
    const char* what = "crown_checkpoint_open";
    if (!out) throw crown::argument_error(what, "null argument");
    auto c = std::make_unique<crown_checkpoint>();
    c->r.emplace(world(what), name_of(path, what));
    *out = c.release();
  });
}
int crown_checkpoint_commit(crown_checkpoint* c) {
  return guarded([&] { writer_of(c, "crown_checkpoint_commit").commit(); });
}
int crown_checkpoint_close(crown_checkpoint* c) {
  return guarded([&] { delete c; });
}
int crown_checkpoint_write_coarray(crown_checkpoint* c, const char* name, const crown_coarray* a) {
  return guarded([&] {
    const char* what = "crown_checkpoint_write_coarray";
    const auto [d, p] = coarray_layout(live(a, what), name_of(name, what), what);
    writer_of(c, what).write_piece(d, p);
  });
}
int crown_checkpoint_read_coarray(crown_checkpoint* c, const char* name, const crown_coarray* a) {
  return guarded([&] {
    const char* what = "crown_checkpoint_read_coarray";
    const auto [d, p] = coarray_layout(live(a, what), name_of(name, what), what);
    reader_of(c, what).read_piece(d, p);
  });
}
int crown_checkpoint_piece(size_t global, size_t* begin, size_t* end) {
  return guarded([&] {
    const crown::mesh& m = world("crown_checkpoint_piece");
    if (!begin || !end) throw crown::argument_error("crown_checkpoint_piece", "null argument");
    *begin = crown::detail::shard_begin(global, m.rank(), m.size());
    *end = crown::detail::shard_begin(global, m.rank() + 1, m.size());
  });
}
int crown_checkpoint_write_sharded(crown_checkpoint* c, const char* name, int type,
                                   const void* piece, size_t count, size_t global) {
  return guarded([&] {
    const char* what = "crown_checkpoint_write_sharded";
    writer_of(c, what).write_sharded_raw(name_of(name, what), checkpoint_type(type, what), global,
                                         piece, count);
  });
}
int crown_checkpoint_read_sharded(crown_checkpoint* c, const char* name, int type, void* piece,
                                  size_t count, size_t global) {
  return guarded([&] {
    const char* what = "crown_checkpoint_read_sharded";
    reader_of(c, what).read_sharded_into(name_of(name, what), checkpoint_type(type, what), global,
                                         piece, count);
  });
}
int crown_checkpoint_write_replicated(crown_checkpoint* c, const char* name, int type,
                                      const void* data, int ndim, const size_t* shape) {
  return guarded([&] {
    const char* what = "crown_checkpoint_write_replicated";
    auto s = shape_of(ndim, shape, what);
    const std::size_t n = elements_of(s);
    writer_of(c, what).write_replicated_raw(name_of(name, what), checkpoint_type(type, what),
                                            std::move(s), data, n);
  });
}
int crown_checkpoint_read_replicated(crown_checkpoint* c, const char* name, int type, void* data,
                                     int ndim, const size_t* shape) {
  return guarded([&] {
    const char* what = "crown_checkpoint_read_replicated";
    auto s = shape_of(ndim, shape, what);
    const std::size_t n = elements_of(s);
    reader_of(c, what).read_whole(name_of(name, what), crown::detail::ckpt_kind::replicated,
                                  checkpoint_type(type, what), std::move(s), data, n);
  });
}
int crown_checkpoint_put_int(crown_checkpoint* c, const char* name, int64_t value) {
  return guarded([&] {
    const char* what = "crown_checkpoint_put_int";
    writer_of(c, what).put(name_of(name, what), std::int64_t{value});
  });
}
int crown_checkpoint_get_int(crown_checkpoint* c, const char* name, int64_t* value) {
  return guarded([&] {
    const char* what = "crown_checkpoint_get_int";
    if (!value) throw crown::argument_error(what, "null argument");
    *value = reader_of(c, what).get_int(name_of(name, what));
  });
}
int crown_checkpoint_put_double(crown_checkpoint* c, const char* name, double value) {
  return guarded([&] {
    const char* what = "crown_checkpoint_put_double";
    writer_of(c, what).put(name_of(name, what), value);
  });
}
int crown_checkpoint_get_double(crown_checkpoint* c, const char* name, double* value) {
  return guarded([&] {
    const char* what = "crown_checkpoint_get_double";
    if (!value) throw crown::argument_error(what, "null argument");
    *value = reader_of(c, what).get_double(name_of(name, what));
  });
}
int crown_checkpoint_newest(const char* dir, char* path, size_t size, int64_t* step) {
  return guarded([&] {
    const char* what = "crown_checkpoint_newest";
    if (!step) throw crown::argument_error(what, "null argument");
    const auto found = crown::checkpoint_dir(world(what), name_of(dir, what), 0).newest_valid();
    copy_out(found ? found->path : "", path, size, what);
    *step = found ? found->step : -1;
  });
}
int crown_checkpoint_step_path(const char* dir, int64_t step, char* path, size_t size) {
  return guarded([&] {
    const char* what = "crown_checkpoint_step_path";
    copy_out(crown::checkpoint_dir(world(what), name_of(dir, what), 0).path_of(step), path, size,
             what);
  });
}
