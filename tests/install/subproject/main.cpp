// A program whose project builds Crown itself, with add_subdirectory: a ring put on a
// coarray, checked on every image.
#include <crown/crown.hpp>
#include <cstdio>
#include <numeric>
#include <vector>

int main(int argc, char** argv) {
  crown::runtime rt(argc, argv);
  const crown::mesh& w = rt.world();
  const int me = w.rank(), n = w.size(), right = (me + 1) % n, left = (me + n - 1) % n;
  constexpr int count = 1000;
  crown::coarray<int> a(w, count);
  std::vector<int> mine(count);
  std::iota(mine.begin(), mine.end(), me * count);
  a.on(right).put(mine);
  crown::sync_all(w);
  int wrong = 0;
  for (int i = 0; i < count; ++i) wrong += a(i) != left * count + i;
  crown::co_sum(w, wrong);
  if (me == 0) std::printf("subproject: %d images, ring put, %d wrong elements\n", n, wrong);
  return wrong == 0 ? 0 : 1;
}
