// lib/checkpoint/checkpoint_none.cpp — a Crown built without parallel HDF5: every
// checkpoint call throws state_error saying so (the templates still compile and link).
#include <crown/checkpoint.hpp>

namespace crown {

namespace detail {
class ckpt_file {};
} // namespace detail

namespace {
[[noreturn]] void no_hdf5() {
  throw state_error("checkpoint", "this Crown was built without parallel HDF5 "
                                  "(install libhdf5-openmpi-dev and reconfigure)");
}
} // namespace

using detail::ckpt_dataset;
using detail::ckpt_kind;
using detail::ckpt_piece;
using detail::ckpt_type;

checkpoint_error::checkpoint_error(std::string file, std::string message)
    : error("crown::checkpoint_error", std::move(file), std::move(message)) {}

checkpoint_writer::checkpoint_writer(const mesh&, std::string) { no_hdf5(); }
checkpoint_writer::~checkpoint_writer() = default;
checkpoint_writer::checkpoint_writer(checkpoint_writer&&) noexcept = default;
checkpoint_writer& checkpoint_writer::operator=(checkpoint_writer&&) noexcept = default;
void checkpoint_writer::write_piece(const ckpt_dataset&, const ckpt_piece&) { no_hdf5(); }
ckpt_piece checkpoint_writer::coarray_piece(int, std::vector<std::size_t>, void*) { no_hdf5(); }
void checkpoint_writer::write_replicated_raw(const std::string&, ckpt_type,
                                             std::vector<std::size_t>, const void*, std::size_t) {
  no_hdf5();
}
void checkpoint_writer::write_sharded_raw(const std::string&, ckpt_type, std::size_t, const void*,
                                          std::size_t) {
  no_hdf5();
}
void checkpoint_writer::put(const std::string&, std::int64_t) { no_hdf5(); }
void checkpoint_writer::put(const std::string&, double) { no_hdf5(); }
void checkpoint_writer::put(const std::string&, std::string_view) { no_hdf5(); }
void checkpoint_writer::put_bytes(const std::string&, std::span<const std::byte>) { no_hdf5(); }
void checkpoint_writer::commit() { no_hdf5(); }
const std::string& checkpoint_writer::path() const noexcept { std::terminate(); }

checkpoint_reader::checkpoint_reader(const mesh&, std::string) { no_hdf5(); }
checkpoint_reader::~checkpoint_reader() = default;
checkpoint_reader::checkpoint_reader(checkpoint_reader&&) noexcept = default;
checkpoint_reader& checkpoint_reader::operator=(checkpoint_reader&&) noexcept = default;
int checkpoint_reader::mesh_rank() const { no_hdf5(); }
int checkpoint_reader::mesh_size() const { no_hdf5(); }
void checkpoint_reader::read_piece(const ckpt_dataset&, const ckpt_piece&) { no_hdf5(); }
void checkpoint_reader::read_whole(const std::string&, ckpt_kind, ckpt_type,
                                   std::vector<std::size_t>, void*, std::size_t) {
  no_hdf5();
}
void checkpoint_reader::read_sharded_into(const std::string&, ckpt_type, std::size_t, void*,
                                          std::size_t) {
  no_hdf5();
}
bool checkpoint_reader::contains(const std::string&) const { no_hdf5(); }
std::vector<std::size_t> checkpoint_reader::shape_of(const std::string&) const { no_hdf5(); }
std::int64_t checkpoint_reader::get_int(const std::string&) const { no_hdf5(); }
double checkpoint_reader::get_double(const std::string&) const { no_hdf5(); }
std::string checkpoint_reader::get_string(const std::string&) const { no_hdf5(); }
std::vector<std::byte> checkpoint_reader::get_bytes(const std::string&) const { no_hdf5(); }
const std::string& checkpoint_reader::path() const noexcept { std::terminate(); }

void verify_checkpoint(const mesh&, const std::string&) { no_hdf5(); }

checkpoint_dir::checkpoint_dir(const mesh& m, std::string dir, int keep)
    : mesh_(m), dir_(std::move(dir)), keep_(keep) {
  no_hdf5();
}
std::string checkpoint_dir::path_of(std::int64_t) const { no_hdf5(); }
checkpoint_writer checkpoint_dir::begin(std::int64_t) const { no_hdf5(); }
void checkpoint_dir::commit(checkpoint_writer&) const { no_hdf5(); }
std::optional<checkpoint_dir::found> checkpoint_dir::newest_valid(std::vector<std::string>*) const {
  no_hdf5();
}

} // namespace crown
