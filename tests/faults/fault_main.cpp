// The job the fault suite breaks on purpose (CROWN_FAULT): an SPMD loop of puts, co_sum
// and sync_all, or a controller calling actors. Run as `fault_main spmd|spmd_catch|control|slow`;
// further arguments are ignored (the suite tags each job with one).
#include <chrono>
#include <crown/crown.hpp>
#include <cstdio>
#include <string_view>
#include <thread>
#include <vector>

namespace {

struct worker {
  int step(int i) const { return i + crown::this_actor().index; }
  static constexpr auto endpoints = crown::endpoints(&worker::step);
};

int spmd() {
  const crown::mesh& w = crown::world();
  crown::coarray<double> a(w, 1024);
  const std::vector<double> v(1024, 1.0);
  for (int step = 0; step < 20; ++step) {
    a.on((w.rank() + 1) % w.size()).put(v);
    double s = step;
    crown::co_sum(w, s);
    crown::sync_all(w);
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  const std::string_view mode = argc > 1 ? argv[1] : "spmd";
  crown::runtime rt(argc, argv);
  if (mode == "spmd") return spmd(); // an injected exception escapes main here
  if (mode == "slow") {              // rank 1 computes for 2.5 s: the others' barrier is reported
    if (rt.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    crown::sync_all();
    return 0;
  }
  if (mode == "spmd_catch") {
    try {
      return spmd();
    } catch (const std::exception& e) { // the others are left waiting for this rank
      std::fprintf(stderr, "rank %d gives up: %s\n", rt.rank(), e.what());
      return 1;
    }
  }
  return rt.control([](crown::controller& c) {
    auto workers = c.workers().spawn<worker>("workers");
    for (int i = 0; i < 20; ++i) (void)workers.call(&worker::step, i).get();
  });
}
