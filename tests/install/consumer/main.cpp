// A program outside Crown's tree, built against the installed headers and library.
#include <crown/crown.hpp>
#include <cstdio>

int main(int argc, char** argv) {
  crown::runtime rt(argc, argv);
  int sum = rt.rank();
  crown::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_INT, MPI_SUM, rt.world().comm()),
                   "MPI_Allreduce");
  if (rt.rank() == 0)
    std::printf("consumer: %d ranks in %s, rank sum %d\n", rt.size(),
                rt.world().to_string().c_str(), sum);
  return 0;
}
