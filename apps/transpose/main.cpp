// transpose: the Parallel Research Kernels' distributed transpose B += A^T on Crown.
//   mpirun -np 4 crown-transpose [--order 1024] [--iterations 10]
// Validates B against the closed form and reports MB/s with 2 x 8 x order^2 bytes per
// iteration (the PRK's count); the first iteration is not timed.
#include "solver.hpp"
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string_view>

int main(int argc, char** argv) {
  crown::runtime rt(argc, argv);
  transpose::options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    char* end = nullptr;
    const long v = i + 1 < argc ? std::strtol(argv[i + 1], &end, 10) : 0;
    if ((a == "--order" || a == "--iterations") && v > 0 && v <= INT_MAX && *end == '\0') {
      (a == "--order" ? o.order = static_cast<std::size_t>(v) : o.iterations = static_cast<int>(v));
      ++i;
    } else {
      std::fprintf(stderr,
                   "transpose: bad option %s\nusage: mpirun -np P %s [--order N] "
                   "[--iterations K]\n",
                   argv[i], argv[0]);
      return 2;
    }
  }
  try {
    const transpose::result r = transpose::solve(crown::world(), o);
    if (crown::world().rank() == 0) {
      const double bytes = 2.0 * sizeof(double) * static_cast<double>(o.order) * o.order;
      std::printf("transpose order %zu, %d iterations on %d ranks\n", o.order, o.iterations,
                  crown::world().size());
      if (r.abs_error > 1e-8) {
        std::printf("ERROR: aggregate error %g exceeds 1e-8\n", r.abs_error);
        return 1;
      }
      std::printf("Solution validates\nRate (MB/s): %.1f Avg time (s): %.6f\n",
                  r.seconds > 0 ? bytes / r.seconds / 1e6 : 0.0, r.seconds);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "transpose: %s\n", e.what());
    return 1;
  }
  return 0;
}
