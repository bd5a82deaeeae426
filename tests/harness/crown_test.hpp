// tests/harness/crown_test.hpp — small helpers shared by Crown's test suites.
#pragma once
#include <algorithm>
#include <crown/runtime.hpp>
#include <mpi.h>
#include <string>
#include <vector>

namespace crown_test {

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

/// The world mesh and this image's place in a ring over it.
inline const crown::mesh& w() { return crown::world(); }
inline int me() { return crown::world().rank(); }
inline int n() { return crown::world().size(); }
inline int right() { return (me() + 1) % n(); }
inline int left() { return (me() + n() - 1) % n(); }

/// The world in reverse order (image j is world rank n-1-j): a rank list of its own,
/// with its own communicators, and image numbers that differ from world ranks.
inline crown::mesh reversed_world() {
  std::vector<int> ranks(w().begin(), w().end());
  std::reverse(ranks.begin(), ranks.end());
  return crown::mesh({{"r", n()}}, ranks);
}

/// Values whose floating-point sum depends on the order of the terms.
inline double order_sensitive(int image, std::size_t i) {
  const double big = (i % 3 == 0) ? 1e16 : 1e3;
  return (image % 2 == 0 ? big : -big) + 1.0 / (1.0 + static_cast<double>(i + image));
}

/// True on every rank when all ranks hold bitwise the same bytes (collective over the world).
inline bool same_everywhere(const void* data, std::size_t bytes) {
  std::vector<char> mine(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
  std::vector<char> first = mine;
  MPI_Bcast(first.data(), static_cast<int>(bytes), MPI_CHAR, 0, w().comm());
  int same = first == mine;
  MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_MIN, w().comm());
  return same != 0;
}

/// what() of the `Error` that f() throws, or "no exception" (other types propagate).
template <typename Error, typename F>
std::string what_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no exception";
}

} // namespace crown_test
