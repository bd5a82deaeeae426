// heat2d: the 2-D heat equation (explicit 5-point update, fixed edges) on an n x n
// grid, a dist_tensor with halos over a rows x cols mesh of all ranks.
//   mpirun -np 4 crown-heat2d [--n 1024] [--iterations 100] [--mesh 2x2] [--no-overlap]
//                             [--png heat2d.png]
// Prints the throughput in million lattice updates per second and `checksum <sum>`,
// the sum of all cells in global order: bitwise the same for any rank count and mesh.
#include "heatmap_png.hpp"
#include "solver.hpp"
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void usage(const char* program, const std::string& problem) {
  std::fprintf(stderr,
               "heat2d: %s\nusage: mpirun -np P %s [--n N] [--iterations K] [--mesh RxC] "
               "[--no-overlap] [--png FILE]\n",
               problem.c_str(), program);
  std::exit(2);
}

std::size_t number(const char* program, const char* flag, const char* text) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (!*text || *end || v == 0 || v > INT_MAX)
    usage(program, std::string(flag) + " needs a number from 1 to " + std::to_string(INT_MAX));
  return static_cast<std::size_t>(v);
}

} // namespace

int main(int argc, char** argv) {
  crown::runtime rt(argc, argv);
  heat2d::options o;
  std::string png;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--n") {
      o.n = number(argv[0], "--n", next), ++i;
    } else if (a == "--iterations") {
      o.iterations = static_cast<int>(number(argv[0], "--iterations", next)), ++i;
    } else if (a == "--mesh") {
      if (std::sscanf(next, "%dx%d", &o.rows, &o.cols) != 2 || o.rows < 1 || o.cols < 1)
        usage(argv[0], "--mesh needs ROWSxCOLS, e.g. 2x2");
      ++i;
    } else if (a == "--no-overlap") {
      o.overlap = false;
    } else if (a == "--png") {
      png = next, ++i;
      if (png.empty()) usage(argv[0], "--png needs a file name");
    } else {
      usage(argv[0], "unknown option " + std::string(a));
    }
  }
  try {
    const heat2d::result r = heat2d::solve(crown::world(), o, !png.empty());
    if (crown::world().rank() == 0) {
      const auto [rows, cols] =
          o.rows > 0 ? std::pair{o.rows, o.cols} : heat2d::squarest(crown::world().size());
      const double updates = static_cast<double>(o.n) * static_cast<double>(o.n) * o.iterations;
      std::printf("heat2d %zu x %zu, %d iterations on a %dx%d mesh%s\n", o.n, o.n, o.iterations,
                  rows, cols, o.overlap ? " (halo exchange overlapped)" : "");
      std::printf("time %.4f s, %.1f MLUP/s\n", r.seconds, updates / r.seconds / 1e6);
      std::printf("checksum %.17g\n", r.checksum);
      if (!png.empty()) {
        heat2d::write_heatmap_png(png, r.field, o.n, o.n, 0.0, 1.0);
        std::printf("wrote %s\n", png.c_str());
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "heat2d: %s\n", e.what());
    return 1;
  }
  return 0;
}
