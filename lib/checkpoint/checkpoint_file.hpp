// lib/checkpoint/checkpoint_file.hpp — one open checkpoint file (parallel HDF5 over a
// mesh's communicator). Every failure goes through agree(): the ranks exchange whether
// any of them failed and all throw the same checkpoint_error together, so a failure on
// one rank never leaves the others waiting in a collective.
#pragma once
#include "hdf5_handle.hpp"
#include <crown/checkpoint.hpp>
#include <crown/mesh.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace crown::detail {

const char* type_name(ckpt_type t);
std::size_t type_size(ckpt_type t);
/// The checksum of a piece: the sum over its elements of a hash of (global row-major
/// index, element bits), so any split of the global array sums to the same value.
std::uint64_t piece_checksum(const ckpt_piece& p, std::size_t elem,
                             const std::vector<std::size_t>& shape);
/// fsync of a directory (after a rename or unlink in it); "" or the error.
std::string sync_directory(const std::string& dir);

class ckpt_file {
public:
  /// Collective: creates `path`.tmp (writing) or opens `path` (reading).
  ckpt_file(const mesh& m, std::string path, bool writing);
  ~ckpt_file();
  ckpt_file(const ckpt_file&) = delete;
  ckpt_file& operator=(const ckpt_file&) = delete;

  void write(const ckpt_dataset& d, const ckpt_piece& p);
  void read(const ckpt_dataset& d, const ckpt_piece& p);
  void put_meta(const std::string& name, const char* kind, hid_t type, const void* data,
                std::size_t bytes, bool scalar);
  [[nodiscard]] std::vector<unsigned char> get_meta(const std::string& name,
                                                    const char* kind) const;
  void commit();
  void verify_all();

  /// Throws the same checkpoint_error on every rank when any rank's `local_error` is set.
  void agree(const std::string& local_error) const;
  [[nodiscard]] bool has(const std::string& name) const {
    return check_name(name).empty() && H5Lexists(file_.get(), name.c_str(), H5P_DEFAULT) > 0;
  }
  [[nodiscard]] std::vector<std::size_t> shape_of(const std::string& name) const {
    agree(has(name) ? ""
                    : "dataset '" + name + "': missing (the file holds: " + dataset_names() + ")");
    h5_handle ds(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT), H5Dclose);
    return shape_in_file(ds.get());
  }
  [[nodiscard]] const mesh& on() const noexcept { return mesh_; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

private:
  std::uint64_t sum_over_mesh(std::uint64_t local) const;
  /// The transfer list of one collective H5Dwrite or H5Dread of these pieces.
  h5_handle transfer(const std::vector<std::size_t>& shape,
                     const std::vector<std::size_t>& count) const;
  void set_attr(hid_t obj, const char* name, const std::string& value);
  void set_attr(hid_t obj, const char* name, const char* value) {
    set_attr(obj, name, std::string(value));
  }
  void set_attr(hid_t obj, const char* name, std::uint64_t value);
  static std::optional<std::string> string_attr(hid_t obj, const char* name);
  static std::optional<std::uint64_t> u64_attr(hid_t obj, const char* name);
  static std::vector<std::size_t> shape_in_file(hid_t ds);
  [[nodiscard]] std::string dataset_names() const;
  [[nodiscard]] std::string check_name(const std::string& name) const;
  h5_handle open_checked(const std::string& name, ckpt_type type,
                         const std::vector<std::size_t>& shape, std::uint64_t& checksum,
                         std::string& err) const;

  mesh mesh_;
  MPI_Comm comm_;
  std::string path_, tmp_;
  bool writing_;
  bool committed_ = false;
  h5_handle file_;
  h5_handle meta_;
};

} // namespace crown::detail
