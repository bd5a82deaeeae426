! A program that runs MPI itself: Crown attaches to it and leaves MPI_Finalize to it.
program module_attach
  use mpi_f08
  use crown
  use checks
  implicit none
  integer :: rank, size, total(1)
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, size)
  call crown_init()
  call expect(crown_this_image() == rank + 1, "images follow MPI ranks")
  call expect(crown_num_images() == size, "every rank is an image")
  total = 1
  call crown_co_sum(total)
  call expect(total(1) == size, "co_sum over the attached world")
  call finish("module_attach")
  call MPI_Finalize()
end program
