! A coarray program that also calls MPI on MPI_COMM_WORLD between coarray statements,
! compiled by crown-fortran (which adds MPI's Fortran modules and libraries): `use mpi`
! in one module, `use mpi_f08` in another. Crown starts MPI before the program's first
! statement, so the program neither initialises nor finalises it; image i is rank i - 1.
! Prints "PASS caf_with_mpi" on image 1.
module through_mpi
  use mpi
  implicit none
  private
  public :: world_rank, world_sum, mpi_started
contains
  integer function world_rank()
    integer :: ierr
    call MPI_Comm_rank(MPI_COMM_WORLD, world_rank, ierr)
  end function
  integer function world_sum(x)
    integer, intent(in) :: x
    integer :: ierr
    call MPI_Allreduce(x, world_sum, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  end function
  logical function mpi_started()
    integer :: ierr
    call MPI_Initialized(mpi_started, ierr)
  end function
end module

module through_mpi_f08
  use mpi_f08
  implicit none
  private
  public :: from_rank0, world_size
contains
  integer function from_rank0(x) ! MPI_Bcast of x from rank 0
    integer, intent(in) :: x
    from_rank0 = x
    call MPI_Bcast(from_rank0, 1, MPI_INTEGER, 0, MPI_COMM_WORLD)
  end function
  integer function world_size()
    call MPI_Comm_size(MPI_COMM_WORLD, world_size)
  end function
end module

program caf_with_mpi
  use caf_checks
  use through_mpi
  use through_mpi_f08
  implicit none
  integer :: x[*], me, n, right, total
  me = this_image()
  n = num_images()
  right = modulo(me, n) + 1
  call check(mpi_started(), "MPI is initialised when the program starts")
  call check(world_rank() == me - 1 .and. world_size() == n, "image i is rank i - 1")
  x = 10 * me
  sync all
  total = world_sum(x[right]) ! coindexed values summed by MPI
  call check(total == 5 * n * (n + 1), "MPI_Allreduce of coindexed values")
  x[right] = from_rank0(-me) ! an MPI broadcast written into a coarray
  sync all
  call check(x == -1, "MPI_Bcast through mpi_f08, then a coindexed write")
  total = me
  call co_sum(total)
  call check(total == world_sum(me), "co_sum and MPI_Allreduce agree")
  call finish("caf_with_mpi")
end program
