// libcrown_caf's state: start-up, teams, tokens, failure reporting, stopped images.
#include "caf_runtime.hpp"
#include "caf_status.hpp"
#include "transport/caf_interface.hpp"
#include <algorithm>
#include <atomic>
#include <crown/crown.h>
#include <crown/runtime.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

namespace crown::caf {
namespace {

std::unique_ptr<team> g_initial;
std::vector<std::unique_ptr<team>> g_formed;
team* g_current = nullptr;
/// Every registered coarray and component token (freed at the end if the program did
/// not: static coarrays never are).
std::set<token_data*> g_tokens;
/// Where each image's heap starts in its own address space (descriptors of allocatable
/// components hold such addresses).
std::vector<std::uintptr_t> g_heap_bases;

/// An image that leaves by exit() (a libgfortran runtime error, CALL EXIT) and not by
/// STOP, END or ERROR STOP would leave the others waiting for it: end the job.
void exit_without_stop() {
  if (!g_initial) return;
  std::fflush(stdout);
  std::fprintf(stderr,
               "ERROR STOP crown caf: image %d ended without STOP or END PROGRAM (a runtime "
               "error?); ending every image\n",
               crown_this_image() + 1);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

} // namespace

void start(int* argc, char*** argv) {
  if (g_initial) return;
  check_compiler();
  if (!crown_initialized() && crown_init(argc, argv) != CROWN_OK) {
    std::fprintf(stderr, "crown caf: %s\n", crown_last_error());
    std::exit(1);
  }
  const crown::mesh& world = crown::this_runtime().world();
  init_status(world);
  g_initial = std::make_unique<team>(world, -1, nullptr);
  prepare_team(*g_initial, nullptr, 0); // its closing barrier: every state word is clear too
  const auto base = reinterpret_cast<std::uintptr_t>(crown::caf_api::heap_address(0));
  g_heap_bases.assign(static_cast<std::size_t>(world.size()), 0);
  crown::check_mpi(MPI_Allgather(&base, 1, MPI_UINT64_T, g_heap_bases.data(), 1, MPI_UINT64_T,
                                 g_initial->control),
                   "caf: MPI_Allgather");
  g_current = g_initial.get();
  std::atexit(exit_without_stop);
}

team& current_team() {
  start(nullptr, nullptr);
  return *g_current;
}
void set_current_team(team* t) { g_current = t; }

team* keep_team(std::unique_ptr<team> t) {
  g_formed.push_back(std::move(t));
  return g_formed.back().get();
}

std::vector<const team*> member_teams() {
  std::vector<const team*> all;
  if (g_initial) all.push_back(g_initial.get());
  for (const auto& t : g_formed) all.push_back(t.get());
  return all;
}

const crown::mesh& images() { return current_team().images; }

int rank_of(int image, const char* what) {
  const crown::mesh& m = images();
  if (image < 1 || image > m.size())
    throw crown::argument_error(what, "image " + std::to_string(image) +
                                          " out of range 1:" + std::to_string(m.size()));
  return m.ranks()[static_cast<std::size_t>(image - 1)];
}

int rank_or_self(int image, const char* what) {
  return image == 0 ? crown::this_runtime().rank() : rank_of(image, what);
}

void fail(int* stat, char* errmsg, std::size_t errmsg_len, const std::string& message, int code) {
  if (stat) {
    *stat = code;
    if (errmsg && errmsg_len) {
      const std::size_t n = std::min(errmsg_len, message.size());
      std::memcpy(errmsg, message.data(), n);
      std::memset(errmsg + n, ' ', errmsg_len - n); // Fortran strings are blank-padded
    }
    return;
  }
  std::fprintf(stderr, "ERROR STOP crown caf: image %d: %s\n", crown_this_image() + 1,
               message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

void prepare_team(team& t, const team* parent, int key) {
  if (parent)
    crown::check_mpi(MPI_Comm_split(parent->control, t.number, key, &t.control),
                     "form team: MPI_Comm_split");
  else
    crown::check_mpi(MPI_Comm_dup(t.images.comm(), &t.control), "caf: MPI_Comm_dup");
  const int n = t.images.size(), me = t.images.rank();
  int rounds = 0;
  while ((1 << rounds) < n) ++rounds;
  t.flags = crown::caf_api::heap_allocate(
      t.images, static_cast<std::size_t>(std::max(rounds, 1)) * 8, 0x63616604u, "sync all flags");
  std::memset(crown::caf_api::heap_address(t.flags.offset), 0,
              static_cast<std::size_t>(std::max(rounds, 1)) * 8);
  const auto word_of = [](int rank, std::uint64_t offset) {
    return reinterpret_cast<std::uint64_t*>(crown::caf_api::heap_peer_address(rank, offset));
  };
  int mapped[2] = {1, 1}; // SYNC ALL's partners, every image's heap (SYNC IMAGES)
  for (int r = 0; r < rounds && mapped[0]; ++r) {
    const int partner = t.images.ranks()[static_cast<std::size_t>((me + (1 << r)) % n)];
    t.partner_flags.push_back(word_of(partner, t.flags.offset + static_cast<std::uint64_t>(r) * 8));
    mapped[0] = t.partner_flags.back() != nullptr;
  }
  for (const int rank : t.images) mapped[1] = mapped[1] && word_of(rank, 0) != nullptr;
  // Every image must choose the same way: flags only if all partners of all images are
  // mapped (hosts of unequal size map some and not others).
  crown::check_mpi(MPI_Allreduce(MPI_IN_PLACE, mapped, 2, MPI_INT, MPI_LAND, t.control),
                   "caf: MPI_Allreduce");
  if (!mapped[0]) t.partner_flags.clear();
  if (mapped[1]) { // collective: every image has the same answer
    t.pairs = crown::caf_api::heap_allocate(t.images, static_cast<std::size_t>(n) * 8, 0x63616606u,
                                            "sync images flags");
    std::memset(crown::caf_api::heap_address(t.pairs.offset), 0, static_cast<std::size_t>(n) * 8);
    for (const int rank : t.images)
      t.pair_words.push_back(word_of(rank, t.pairs.offset + static_cast<std::uint64_t>(me) * 8));
  }
  t.syncs_with.assign(static_cast<std::size_t>(n), 0);
  const std::size_t words = 2 + static_cast<std::size_t>(n);
  t.progress = crown::caf_api::heap_allocate(t.images, words * 8, 0x63616605u, "team progress");
  std::memset(crown::caf_api::heap_address(t.progress.offset), 0, words * 8);
  crown::sync_all(t.images); // the flags are clear before anyone writes them
}

token_data* new_token(const crown::mesh& m, std::size_t bytes, bool words) {
  auto* t = new token_data{
      crown::caf_api::heap_allocate(m, bytes, 0x63616600u + (words ? 1 : 0), "coarray"), nullptr,
      m};
  g_tokens.insert(t);
  return t;
}

void delete_token(token_data* t) {
  crown::caf_api::heap_release(*t->owner, t->block);
  g_tokens.erase(t);
  delete t;
}

token_data* new_component_token() {
  auto* t = new token_data{{}, nullptr, std::nullopt, true};
  g_tokens.insert(t);
  return t;
}

bool is_component_token(const void* p) noexcept {
  const auto it = g_tokens.find(static_cast<token_data*>(const_cast<void*>(p)));
  return it != g_tokens.end() && (*it)->component;
}

/// Bytes before a component's data that hold its size (keeping the data's alignment).
constexpr std::uint64_t size_header = 16;

void* allocate_component(token_data& t, std::size_t bytes) {
  free_component(t);
  t.block.offset = crown::caf_api::heap_allocate_local(bytes + size_header,
                                                       "allocatable component of a coarray");
  t.block.bytes = bytes + size_header;
  std::byte* header = crown::caf_api::heap_address(t.block.offset);
  const std::uint64_t size = bytes;
  std::memcpy(header, &size, sizeof size);
  return header + size_header;
}

std::size_t component_size(int world_rank, std::uintptr_t address) {
  const std::int64_t data = peer_heap_offset(world_rank, address, 0);
  if (data < static_cast<std::int64_t>(size_header)) return 0;
  std::uint64_t size = 0;
  crown::caf_api::remote_get(world_rank, static_cast<std::uint64_t>(data) - size_header, &size,
                             sizeof size);
  return size;
}

void free_component(token_data& t) noexcept {
  if (!t.block.bytes) return;
  try {
    crown::caf_api::heap_quiet(); // nothing of this image's still reads or writes it
    crown::caf_api::heap_release_local(t.block.offset);
  } catch (const std::exception&) { // a double free: the offset was taken away already
  }
  t.block = {};
}

void delete_component_token(token_data* t) noexcept {
  free_component(*t);
  g_tokens.erase(t);
  delete t;
}

std::int64_t peer_heap_offset(int world_rank, std::uintptr_t address, std::size_t bytes) {
  const std::uintptr_t base = g_heap_bases.at(static_cast<std::size_t>(world_rank));
  const std::size_t size = crown::this_runtime().config().heap_size;
  if (address < base || address - base > size || bytes > size - (address - base)) return -1;
  return static_cast<std::int64_t>(address - base);
}

void release_all() noexcept {
  for (token_data* t : g_tokens) delete t; // their memory goes with the heap
  g_tokens.clear();
  g_formed.clear();
  g_current = nullptr;
  g_initial.reset();
  release_status();
}

} // namespace crown::caf
