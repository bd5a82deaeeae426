// crown-mesh-demo: the world mesh, a 2-D reshape, slices and sub-meshes that talk
// over their own communicators. Run under mpirun or srun with any number of ranks.
#include <crown/crown.hpp>
#include <cstdio>
#include <string>
#include <vector>

namespace {

std::string ranks_of(const crown::mesh& m) {
  std::string s;
  for (int r : m) {
    s += s.empty() ? "[" : ",";
    s += std::to_string(r);
  }
  return s + "]";
}

std::string point_text(const crown::point& p) {
  std::string s;
  for (int c : p) {
    s += s.empty() ? "(" : ",";
    s += std::to_string(c);
  }
  return s + ")";
}

int sum_over(const crown::mesh& m, int value) {
  crown::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT, MPI_SUM, m.comm()),
                   "MPI_Allreduce");
  return value;
}

/// Gathers one line from every rank and prints them in mesh order on its first rank.
void print_in_order(const crown::mesh& world, const std::string& line) {
  const int n = world.size();
  int length = static_cast<int>(line.size());
  std::vector<int> lengths(n), offsets(n);
  crown::check_mpi(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, world.comm()),
                   "MPI_Gather");
  int total = 0;
  for (int i = 0; i < n; ++i) {
    offsets[i] = total;
    total += lengths[i];
  }
  std::string all(total, '\0');
  crown::check_mpi(MPI_Gatherv(line.data(), length, MPI_CHAR, all.data(), lengths.data(),
                               offsets.data(), MPI_CHAR, 0, world.comm()),
                   "MPI_Gatherv");
  if (world.rank() == 0) std::fputs(all.c_str(), stdout);
}

} // namespace

int main(int argc, char** argv) {
  try {
    crown::runtime rt(argc, argv);
    const auto& world = rt.world();
    const int n = world.size(), me = rt.rank();
    const int tp = n % 2 == 0 ? 2 : 1;
    const auto grid = world.reshape({{"dp", -1}, {"tp", tp}});
    if (me == 0) {
      std::printf("world %s ranks %s\n", world.to_string().c_str(), ranks_of(world).c_str());
      std::printf("reshaped %s\n", grid.to_string().c_str());
      for (int t = 0; t < tp; ++t)
        std::printf("slice tp=%d: %s ranks %s\n", t, grid.slice("tp", t).to_string().c_str(),
                    ranks_of(grid.slice("tp", t)).c_str());
    }
    const auto tp_group = grid.sub({"tp"});
    const auto dp_group = grid.sub({"dp"});
    const std::string line =
        "rank " + std::to_string(me) + " at " + point_text(grid.coords()) + ": tp group " +
        ranks_of(tp_group) + " sum " + std::to_string(sum_over(tp_group, me)) + ", dp group " +
        ranks_of(dp_group) + " sum " + std::to_string(sum_over(dp_group, me)) + "\n";
    print_in_order(world, line);
    world.barrier();
    if (me == 0) std::printf("mesh demo done on %d ranks\n", n);
  } catch (const crown::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
