// lib/checkpoint/api.cpp — checkpoint_writer, checkpoint_reader and checkpoint_dir over
// ckpt_file: the replicated and sharded layouts, metadata, the directory of checkpoints.
#include "checkpoint_file.hpp"
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace crown {

using detail::ckpt_dataset;
using detail::ckpt_kind;
using detail::ckpt_piece;
using detail::ckpt_type;

namespace {

std::size_t product(const std::vector<std::size_t>& s) {
  std::size_t n = 1;
  for (std::size_t e : s) n *= e;
  return n;
}

/// Rows [r*R/p, (r+1)*R/p) of a row-major array: each rank's slice of a replicated write.
ckpt_piece row_slice(const std::vector<std::size_t>& shape, int r, int p, void* data) {
  ckpt_piece piece{std::vector<std::size_t>(shape.size(), 0), shape, shape,
                   std::vector<std::size_t>(shape.size(), 0), data,  true};
  const std::size_t lo = detail::shard_begin(shape[0], r, p),
                    hi = detail::shard_begin(shape[0], r + 1, p);
  piece.lo[0] = piece.at[0] = lo;
  piece.count[0] = hi - lo;
  return piece;
}

ckpt_piece sharded_piece(std::size_t elements, int r, int p, void* data) {
  const std::size_t lo = detail::shard_begin(elements, r, p),
                    hi = detail::shard_begin(elements, r + 1, p);
  return {{lo}, {hi - lo}, {hi - lo}, {0}, data, true};
}

} // namespace

// ------------------------------------------------------------------ writer

checkpoint_writer::checkpoint_writer(const mesh& m, std::string path)
    : file_(std::make_unique<detail::ckpt_file>(m, std::move(path), true)) {}
checkpoint_writer::~checkpoint_writer() = default;
checkpoint_writer::checkpoint_writer(checkpoint_writer&&) noexcept = default;
checkpoint_writer& checkpoint_writer::operator=(checkpoint_writer&&) noexcept = default;

void checkpoint_writer::write_piece(const ckpt_dataset& d, const ckpt_piece& p) {
  file_->write(d, p);
}

ckpt_piece checkpoint_writer::coarray_piece(int image, std::vector<std::size_t> extents,
                                            void* data) {
  ckpt_piece p;
  p.lo.assign(extents.size() + 1, 0);
  p.lo[0] = static_cast<std::size_t>(image);
  p.count = extents;
  p.count.insert(p.count.begin(), 1);
  p.extents = p.count;
  p.at.assign(extents.size() + 1, 0);
  p.data = data;
  return p;
}

void checkpoint_writer::write_replicated_raw(const std::string& name, ckpt_type type,
                                             std::vector<std::size_t> shape, const void* data,
                                             std::size_t elements) {
  const mesh& m = file_->on();
  file_->agree(shape.empty() || product(shape) != elements
                   ? "dataset '" + name + "': " + std::to_string(elements) +
                         " elements do not fill the shape given"
                   : "");
  write_piece({name, ckpt_kind::replicated, type, shape, "replicate", m.to_string()},
              row_slice(shape, m.rank(), m.size(), const_cast<void*>(data)));
}

void checkpoint_writer::write_sharded_raw(const std::string& name, ckpt_type type,
                                          std::size_t elements, const void* data,
                                          std::size_t piece) {
  const mesh& m = file_->on();
  const ckpt_piece p = sharded_piece(elements, m.rank(), m.size(), const_cast<void*>(data));
  file_->agree(p.count[0] != piece
                   ? "dataset '" + name + "': rank " + std::to_string(m.rank()) + " of " +
                         std::to_string(m.size()) + " holds " + std::to_string(p.count[0]) +
                         " of " + std::to_string(elements) + " elements, was given " +
                         std::to_string(piece)
                   : "");
  write_piece({name, ckpt_kind::sharded, type, {elements}, "shard(0)", m.to_string()}, p);
}

void checkpoint_writer::put(const std::string& name, std::int64_t value) {
  file_->put_meta(name, "int", H5T_NATIVE_INT64, &value, sizeof value, true);
}
void checkpoint_writer::put(const std::string& name, double value) {
  file_->put_meta(name, "double", H5T_NATIVE_DOUBLE, &value, sizeof value, true);
}
void checkpoint_writer::put(const std::string& name, std::string_view value) {
  // A fixed-length string of rank 0's length (h5dump prints it as text).
  std::uint64_t len = value.size();
  MPI_Bcast(&len, 1, MPI_UINT64_T, 0, file_->on().comm());
  std::string padded(value);
  padded.resize(std::max<std::size_t>(1, len), '\0');
  detail::h5_handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), padded.size());
  H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
  file_->put_meta(name, "string", type.get(), padded.data(), padded.size(), true);
}
void checkpoint_writer::put_bytes(const std::string& name, std::span<const std::byte> value) {
  file_->put_meta(name, "bytes", H5T_NATIVE_UINT8, value.data(), value.size(), false);
}

void checkpoint_writer::commit() { file_->commit(); }
const std::string& checkpoint_writer::path() const noexcept { return file_->path(); }

// ------------------------------------------------------------------ reader

checkpoint_reader::checkpoint_reader(const mesh& m, std::string path)
    : file_(std::make_unique<detail::ckpt_file>(m, std::move(path), false)) {}
checkpoint_reader::~checkpoint_reader() = default;
checkpoint_reader::checkpoint_reader(checkpoint_reader&&) noexcept = default;
checkpoint_reader& checkpoint_reader::operator=(checkpoint_reader&&) noexcept = default;

int checkpoint_reader::mesh_rank() const { return file_->on().rank(); }
int checkpoint_reader::mesh_size() const { return file_->on().size(); }

void checkpoint_reader::read_piece(const ckpt_dataset& d, const ckpt_piece& p) {
  file_->read(d, p);
}

void checkpoint_reader::read_whole(const std::string& name, ckpt_kind kind, ckpt_type type,
                                   std::vector<std::size_t> shape, void* data,
                                   std::size_t elements) {
  file_->agree(shape.empty() || product(shape) != elements
                   ? "dataset '" + name + "': " + std::to_string(elements) +
                         " elements do not fill the shape given"
                   : "");
  const std::vector<std::size_t> zero(shape.size(), 0);
  // Every rank reads the whole array; rank 0's copy is the one checksummed.
  read_piece({name, kind, type, shape, "", ""},
             {zero, shape, shape, zero, data, file_->on().rank() == 0});
}

void checkpoint_reader::read_sharded_into(const std::string& name, ckpt_type type,
                                          std::size_t elements, void* data, std::size_t piece) {
  const mesh& m = file_->on();
  const ckpt_piece p = sharded_piece(elements, m.rank(), m.size(), data);
  file_->agree(p.count[0] != piece ? "dataset '" + name + "': rank " + std::to_string(m.rank()) +
                                         " reads " + std::to_string(p.count[0]) +
                                         " elements into room for " + std::to_string(piece)
                                   : "");
  read_piece({name, ckpt_kind::sharded, type, {elements}, "", ""}, p);
}

bool checkpoint_reader::contains(const std::string& name) const { return file_->has(name); }
std::vector<std::size_t> checkpoint_reader::shape_of(const std::string& name) const {
  return file_->shape_of(name);
}

namespace {
template <typename T>
T scalar_of(const std::vector<unsigned char>& bytes) {
  T v{};
  std::memcpy(&v, bytes.data(), std::min(sizeof v, bytes.size()));
  return v;
}
} // namespace

std::int64_t checkpoint_reader::get_int(const std::string& name) const {
  return scalar_of<std::int64_t>(file_->get_meta(name, "int"));
}
double checkpoint_reader::get_double(const std::string& name) const {
  return scalar_of<double>(file_->get_meta(name, "double"));
}
std::string checkpoint_reader::get_string(const std::string& name) const {
  const auto bytes = file_->get_meta(name, "string");
  std::string s(bytes.begin(), bytes.end());
  s.resize(std::strlen(s.c_str()));
  return s;
}
std::vector<std::byte> checkpoint_reader::get_bytes(const std::string& name) const {
  const auto bytes = file_->get_meta(name, "bytes");
  std::vector<std::byte> out(bytes.size());
  if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}
const std::string& checkpoint_reader::path() const noexcept { return file_->path(); }

void verify_checkpoint(const mesh& m, const std::string& path) {
  detail::ckpt_file f(m, path, false);
  f.verify_all();
}

// ------------------------------------------------------------------ directory

namespace {

constexpr const char* step_prefix = "step-";
constexpr const char* step_suffix = ".h5";

/// The checkpoints in `dir` (step, path), newest first; temporary files aside.
std::vector<std::pair<std::int64_t, std::string>> list_steps(const std::string& dir,
                                                             std::vector<std::string>* stale) {
  std::vector<std::pair<std::int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(step_prefix, 0) != 0) continue;
    if (stale && name.size() > 4 && name.ends_with(".tmp")) {
      stale->push_back(e.path().string());
      continue;
    }
    if (!name.ends_with(step_suffix)) continue;
    const std::string digits = name.substr(5, name.size() - 5 - 3);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    out.emplace_back(std::stoll(digits), e.path().string());
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

/// Rank 0's error, or "", thrown on every rank.
void rank0_agree(const mesh& m, const std::string& dir, std::string err) {
  int len = static_cast<int>(err.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, m.comm());
  err.resize(static_cast<std::size_t>(len));
  MPI_Bcast(err.data(), len, MPI_CHAR, 0, m.comm());
  if (!err.empty()) throw checkpoint_error(dir, err);
}

} // namespace

checkpoint_dir::checkpoint_dir(const mesh& m, std::string dir, int keep)
    : mesh_(m), dir_(std::move(dir)), keep_(keep) {
  std::string err;
  if (mesh_.rank() == 0) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) err = "cannot create the directory: " + ec.message();
  }
  rank0_agree(mesh_, dir_, err);
}

std::string checkpoint_dir::path_of(std::int64_t step) const {
  char name[48];
  std::snprintf(name, sizeof name, "%s%012lld%s", step_prefix, static_cast<long long>(step),
                step_suffix);
  return (std::filesystem::path(dir_) / name).string();
}

checkpoint_writer checkpoint_dir::begin(std::int64_t step) const {
  return checkpoint_writer(mesh_, path_of(step));
}

void checkpoint_dir::commit(checkpoint_writer& w) const {
  w.commit();
  std::string err;
  if (mesh_.rank() == 0) {
    std::vector<std::string> stale;
    const auto steps = list_steps(dir_, &stale);
    for (std::size_t k = keep_ > 0 ? static_cast<std::size_t>(keep_) : steps.size();
         k < steps.size(); ++k)
      if (std::remove(steps[k].second.c_str()) != 0 && err.empty())
        err = "cannot remove " + steps[k].second + ": " + std::strerror(errno);
    for (const std::string& s : stale) std::remove(s.c_str()); // a killed write's leftovers
    if (err.empty()) err = detail::sync_directory(dir_);
  }
  rank0_agree(mesh_, dir_, err);
}

std::optional<checkpoint_dir::found>
checkpoint_dir::newest_valid(std::vector<std::string>* rejected) const {
  // Rank 0 lists; every rank verifies the same files in the same order.
  std::string listing;
  if (mesh_.rank() == 0)
    for (const auto& [step, path] : list_steps(dir_, nullptr)) listing += path + '\n';
  int len = static_cast<int>(listing.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, mesh_.comm());
  listing.resize(static_cast<std::size_t>(len));
  MPI_Bcast(listing.data(), len, MPI_CHAR, 0, mesh_.comm());
  std::size_t at = 0;
  while (at < listing.size()) {
    const std::size_t nl = listing.find('\n', at);
    const std::string path = listing.substr(at, nl - at);
    at = nl + 1;
    try {
      verify_checkpoint(mesh_, path);
      const std::string name = std::filesystem::path(path).filename().string();
      return found{path, std::stoll(name.substr(5, name.size() - 8))};
    } catch (const checkpoint_error& e) {
      if (mesh_.rank() == 0)
        std::fprintf(stderr, "crown: skipping an invalid checkpoint: %s\n", e.what());
      if (rejected) rejected->push_back(e.file() + ": " + e.message());
    }
  }
  return std::nullopt;
}

} // namespace crown
