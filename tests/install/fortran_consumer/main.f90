! A Fortran program built against an installed Crown: a ring put and a co_sum.
program fortran_consumer
  use crown
  use, intrinsic :: iso_fortran_env, only: real64
  implicit none
  real(real64), pointer :: a(:)
  real(real64) :: total(1)
  integer :: me, n
  call crown_init()
  me = crown_this_image()
  n = crown_num_images()
  call crown_allocate(a, [1])
  call crown_put(a, modulo(me, n) + 1, [real(me, real64)])
  call crown_sync_all()
  total = a
  call crown_co_sum(total)
  if (me == 1) write (*, '(a,i0,a,f0.1)') "fortran consumer: ", n, " images, sum ", total(1)
  call crown_deallocate(a)
  call crown_finalize()
end program
