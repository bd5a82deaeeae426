// libcrown_caf's state: start-up, teams, tokens, failure reporting, stopped images.
#include "caf_runtime.hpp"
#include <crown/crown.h>
#include <crown/detail/heap.hpp>
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
/// Every registered coarray (freed at the end if the program did not: static coarrays
/// never are).
std::set<token_data*> g_tokens;
/// One word per image, set when that image begins a normal STOP.
detail::heap_block g_stopped;

} // namespace

void start(int* argc, char*** argv) {
  if (g_initial) return;
  if (!crown_initialized() && crown_init(argc, argv) != CROWN_OK) {
    std::fprintf(stderr, "crown caf: %s\n", crown_last_error());
    std::exit(1);
  }
  const crown::mesh& world = crown::this_runtime().world();
  g_initial = std::make_unique<team>(team{world, -1, nullptr});
  g_current = g_initial.get();
  g_stopped = detail::heap_allocate(world, sizeof(std::int64_t), 0x63616602u, "stop flags");
  std::memset(detail::heap_address(g_stopped.offset), 0, sizeof(std::int64_t));
  crown::sync_all(world); // every flag is clear before anyone may stop
}

team& current_team() {
  start(nullptr, nullptr);
  return *g_current;
}
void set_current_team(team* t) { g_current = t; }

team* keep_team(team t) {
  g_formed.push_back(std::make_unique<team>(std::move(t)));
  return g_formed.back().get();
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

void fail(int* stat, char* errmsg, std::size_t errmsg_len, const std::string& message) {
  if (stat) {
    *stat = 1;
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

void mark_stopped() noexcept {
  if (!g_initial) return;
  (void)detail::remote_atomic(crown::this_runtime().rank(), g_stopped.offset,
                              detail::atomic_op::store, 8, false, 1, 0, g_stopped.cpu_atomics);
}

bool has_stopped(int rank) {
  start(nullptr, nullptr);
  return detail::remote_atomic(rank, g_stopped.offset, detail::atomic_op::load, 8, false, 0, 0,
                               g_stopped.cpu_atomics) != 0;
}

token_data* new_token(const crown::mesh& m, std::size_t bytes, bool words) {
  auto* t = new token_data{
      detail::heap_allocate(m, bytes, 0x63616600u + (words ? 1 : 0), "coarray"), nullptr, m};
  g_tokens.insert(t);
  return t;
}

void delete_token(token_data* t) {
  detail::heap_release(t->owner, t->block);
  g_tokens.erase(t);
  delete t;
}

void release_all() noexcept {
  for (token_data* t : g_tokens) delete t; // their memory goes with the heap
  g_tokens.clear();
  g_formed.clear();
  g_current = nullptr;
  g_initial.reset();
}

} // namespace crown::caf
