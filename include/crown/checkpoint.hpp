// include/crown/checkpoint.hpp — checkpoints: dist_tensors, coarrays, replicated and
// sharded arrays and small metadata in one parallel HDF5 file (docs/checkpoint.md).
//
// Invariants: a file under its final name is complete (written under a temporary name,
// fsynced, renamed atomically, the directory fsynced); every dataset carries its element
// type, global shape and a checksum that does not depend on how it was distributed, so
// a load under another mesh, placement or rank count reads the same global array; a
// file that is corrupt, truncated or does not match what is loaded is a checkpoint_error
// naming the file, the dataset and the field, on every rank together, never loaded.
#pragma once
#include <array>
#include <crown/coarray.hpp>
#include <crown/error.hpp>
#include <crown/mesh.hpp>
#include <crown/tensor.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace crown {

/// A checkpoint that cannot be written or read: what() names the file, then the dataset
/// and field ("crown::checkpoint_error: rank 1: ck/step-2.h5: dataset 'u': checksum: ...").
class checkpoint_error : public error {
public:
  checkpoint_error(std::string file, std::string message);
  [[nodiscard]] const std::string& file() const noexcept { return context(); }
};

namespace detail {

enum class ckpt_type : std::uint8_t { f32, f64, i32, i64, u8, u32, u64 };
template <typename T>
constexpr ckpt_type ckpt_type_of() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>)
    return ckpt_type::f32;
  else if constexpr (std::is_same_v<U, double>)
    return ckpt_type::f64;
  else if constexpr (std::is_same_v<U, std::int32_t>)
    return ckpt_type::i32;
  else if constexpr (std::is_same_v<U, std::int64_t>)
    return ckpt_type::i64;
  else if constexpr (std::is_same_v<U, std::uint8_t> || std::is_same_v<U, std::byte>)
    return ckpt_type::u8;
  else if constexpr (std::is_same_v<U, std::uint32_t>)
    return ckpt_type::u32;
  else if constexpr (std::is_same_v<U, std::uint64_t>)
    return ckpt_type::u64;
  else
    static_assert(sizeof(U) == 0, "checkpoints hold float, double and (u)int8/32/64 elements");
}

/// How a dataset was laid out when it was written (its `kind` attribute).
enum class ckpt_kind : std::uint8_t { dist_tensor, coarray, replicated, sharded };

/// The part of a dataset one rank writes or reads: the box [lo, lo + count) of the global
/// array, lying at `at` inside a row-major buffer of `extents` elements (halos, padding).
/// `counted`: this copy enters the checksum (exactly one copy of each element does).
struct ckpt_piece {
  std::vector<std::size_t> lo, count, extents, at;
  void* data = nullptr;
  bool counted = true;
};

/// A dataset's description: checked against the file's attributes on load.
struct ckpt_dataset {
  std::string name;
  ckpt_kind kind = ckpt_kind::dist_tensor;
  ckpt_type type = ckpt_type::f64;
  std::vector<std::size_t> shape;
  std::string placements; ///< written; on load informative only (resharding is allowed)
  std::string mesh;       ///< likewise
};

class ckpt_file; // lib/checkpoint/checkpoint.cpp: the open HDF5 file

template <std::size_t N>
std::vector<std::size_t> as_vector(const std::array<std::size_t, N>& a) {
  return {a.begin(), a.end()};
}

/// The piece of a dist_tensor this rank holds: its own block inside the padded storage.
template <typename T, std::size_t N>
ckpt_piece tensor_piece(const dist_tensor<T, N>& t) {
  ckpt_piece p;
  const auto own = t.own();
  const auto padded = t.padded();
  for (std::size_t d = 0; d < N; ++d) {
    p.lo.push_back(own.lo[d]);
    p.count.push_back(own.extent(d));
    p.extents.push_back(padded.extent(d));
    p.at.push_back(t.halo().width[d]);
  }
  p.data = padded.data();
  p.counted = t.layout().is_primary(t.mesh().rank());
  return p;
}

/// Rank r of p holds [r*n/p, (r+1)*n/p) of a sharded array of n elements.
[[nodiscard]] inline std::size_t shard_begin(std::size_t n, int r, int p) {
  const auto ur = static_cast<std::size_t>(r), up = static_cast<std::size_t>(p);
  return n / up * ur + n % up * ur / up; // = floor(n*r/p) without overflow
}

} // namespace detail

/// Writes one checkpoint file, collectively over a mesh. Every member makes the same
/// calls in the same order. Nothing is visible under `path` until commit() returns; a
/// writer destroyed without commit() removes its temporary file.
///   crown::checkpoint_writer w(world, "ck/step-100.h5");
///   w.write("u", u);                    // a dist_tensor, one dataset in its global shape
///   w.put("step", std::int64_t{100});
///   w.commit();
class checkpoint_writer {
public:
  checkpoint_writer(const mesh& m, std::string path);
  ~checkpoint_writer();
  checkpoint_writer(checkpoint_writer&&) noexcept;
  checkpoint_writer& operator=(checkpoint_writer&&) noexcept;

  /// The global array, written by one copy of each block (placements and mesh recorded).
  template <typename T, std::size_t N>
  void write(const std::string& name, const dist_tensor<T, N>& t) {
    detail::ckpt_dataset d{name,
                           detail::ckpt_kind::dist_tensor,
                           detail::ckpt_type_of<T>(),
                           detail::as_vector(t.shape()),
                           detail::placements_text(t.placements()),
                           t.mesh().to_string()};
    write_piece(d, detail::tensor_piece(t));
  }
  /// Every image's block: a dataset of shape [images, extents...].
  template <typename T, std::size_t N>
  void write(const std::string& name, const coarray<T, N>& a) {
    write_piece(coarray_dataset<T>(name, a.num_images(), detail::as_vector(a.extents())),
                coarray_piece(a.this_image(), detail::as_vector(a.extents()), a.data()));
  }
  /// An array that is the same on every rank of the mesh (`shape` its row-major shape,
  /// the product of which is data.size()): stored once, each rank writing a slice.
  template <typename T>
  void write_replicated(const std::string& name, std::span<const T> data,
                        std::vector<std::size_t> shape) {
    write_replicated_raw(name, detail::ckpt_type_of<T>(), std::move(shape), data.data(),
                         data.size());
  }
  /// A 1-D array of `elements` split in contiguous pieces: rank r of p passes
  /// [r*elements/p, (r+1)*elements/p) (FSDP's flat parameters).
  template <typename T>
  void write_sharded(const std::string& name, std::span<const T> piece, std::size_t elements) {
    write_sharded_raw(name, detail::ckpt_type_of<T>(), elements, piece.data(), piece.size());
  }

  /// Small metadata under /meta (step, RNG states, data position, the plan): rank 0's value
  /// is stored; every rank gets it back on load.
  void put(const std::string& name, std::int64_t value);
  void put(const std::string& name, double value);
  void put(const std::string& name, std::string_view value);
  void put(const std::string& name, const char* value) { put(name, std::string_view(value)); }
  void put_bytes(const std::string& name, std::span<const std::byte> value);

  /// Closes the file, fsyncs it, renames it to its final name and fsyncs the directory
  /// (collective). Throws checkpoint_error on every rank if any of that failed.
  void commit();
  [[nodiscard]] const std::string& path() const noexcept;

  /// The type-erased write under the templates (and the C API).
  void write_piece(const detail::ckpt_dataset& d, const detail::ckpt_piece& p);
  template <typename T>
  [[nodiscard]] static detail::ckpt_dataset coarray_dataset(const std::string& name, int images,
                                                            std::vector<std::size_t> extents) {
    extents.insert(extents.begin(), static_cast<std::size_t>(images));
    return {name, detail::ckpt_kind::coarray, detail::ckpt_type_of<T>(), std::move(extents), "",
            ""};
  }
  [[nodiscard]] static detail::ckpt_piece coarray_piece(int image, std::vector<std::size_t> extents,
                                                        void* data);
  void write_replicated_raw(const std::string& name, detail::ckpt_type type,
                            std::vector<std::size_t> shape, const void* data, std::size_t elements);
  void write_sharded_raw(const std::string& name, detail::ckpt_type type, std::size_t elements,
                         const void* data, std::size_t piece);

private:
  std::unique_ptr<detail::ckpt_file> file_;
};

/// Reads one checkpoint file, collectively over a mesh (any rank count): every read
/// checks the dataset's type, shape and checksum first.
class checkpoint_reader {
public:
  checkpoint_reader(const mesh& m, std::string path);
  ~checkpoint_reader();
  checkpoint_reader(checkpoint_reader&&) noexcept;
  checkpoint_reader& operator=(checkpoint_reader&&) noexcept;

  /// Fills this rank's block of `t` (halos untouched) from the global array, whatever
  /// mesh and placements it was written with. The shape and type must match.
  template <typename T, std::size_t N>
  void read(const std::string& name, dist_tensor<T, N>& t) {
    detail::ckpt_dataset d{name,
                           detail::ckpt_kind::dist_tensor,
                           detail::ckpt_type_of<T>(),
                           detail::as_vector(t.shape()),
                           "",
                           ""};
    read_piece(d, detail::tensor_piece(t));
  }
  /// Every image's block back (same image count and extents as written).
  template <typename T, std::size_t N>
  void read(const std::string& name, coarray<T, N>& a) {
    read_piece(
        checkpoint_writer::coarray_dataset<T>(name, a.num_images(), detail::as_vector(a.extents())),
        checkpoint_writer::coarray_piece(a.this_image(), detail::as_vector(a.extents()), a.data()));
  }
  /// The whole array on every rank; `shape` must match the one written.
  template <typename T>
  void read_replicated(const std::string& name, std::span<T> out, std::vector<std::size_t> shape) {
    read_whole(name, detail::ckpt_kind::replicated, detail::ckpt_type_of<T>(), std::move(shape),
               out.data(), out.size());
  }
  /// This rank's contiguous piece [r*n/p, (r+1)*n/p) of a sharded array of n = `elements`,
  /// whatever rank count wrote it.
  template <typename T>
  [[nodiscard]] std::vector<T> read_sharded(const std::string& name, std::size_t elements) {
    const int r = mesh_rank(), p = mesh_size();
    std::vector<T> out(detail::shard_begin(elements, r + 1, p) -
                       detail::shard_begin(elements, r, p));
    read_sharded_into(name, detail::ckpt_type_of<T>(), elements, out.data(), out.size());
    return out;
  }

  [[nodiscard]] bool contains(const std::string& name) const;
  /// The global shape of a dataset (throws checkpoint_error naming it when missing).
  [[nodiscard]] std::vector<std::size_t> shape_of(const std::string& name) const;
  [[nodiscard]] std::int64_t get_int(const std::string& name) const;
  [[nodiscard]] double get_double(const std::string& name) const;
  [[nodiscard]] std::string get_string(const std::string& name) const;
  [[nodiscard]] std::vector<std::byte> get_bytes(const std::string& name) const;
  [[nodiscard]] const std::string& path() const noexcept;

  /// The type-erased reads under the templates (and the C API).
  void read_piece(const detail::ckpt_dataset& d, const detail::ckpt_piece& p);
  void read_whole(const std::string& name, detail::ckpt_kind kind, detail::ckpt_type type,
                  std::vector<std::size_t> shape, void* data, std::size_t elements);
  void read_sharded_into(const std::string& name, detail::ckpt_type type, std::size_t elements,
                         void* data, std::size_t piece);

private:
  [[nodiscard]] int mesh_rank() const;
  [[nodiscard]] int mesh_size() const;
  std::unique_ptr<detail::ckpt_file> file_;
};

/// Reads every dataset of a checkpoint and checks its checksum (collective; the work is
/// split across the ranks). Throws checkpoint_error naming the file, dataset and field.
void verify_checkpoint(const mesh& m, const std::string& path);

/// A directory of checkpoints named step-<12 digits>.h5, keeping the newest `keep`.
class checkpoint_dir {
public:
  /// Collective: creates the directory (and its parents) when missing.
  checkpoint_dir(const mesh& m, std::string dir, int keep = 2);
  [[nodiscard]] std::string path_of(std::int64_t step) const;
  /// A writer for `step`; commit(w) makes it visible and then removes the oldest
  /// checkpoints beyond `keep` (and temporary files a killed write left behind).
  [[nodiscard]] checkpoint_writer begin(std::int64_t step) const;
  void commit(checkpoint_writer& w) const;

  struct found {
    std::string path;
    std::int64_t step = 0;
  };
  /// Collective: the newest checkpoint that verifies, or none. Each newer one that does
  /// not is reported on rank 0's stderr and, when `rejected` is given, listed there
  /// ("<file>: <reason>").
  [[nodiscard]] std::optional<found>
  newest_valid(std::vector<std::string>* rejected = nullptr) const;
  [[nodiscard]] const std::string& dir() const noexcept { return dir_; }

private:
  mesh mesh_;
  std::string dir_;
  int keep_;
};

} // namespace crown
