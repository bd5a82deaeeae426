! Without stat=, a failure stops the program with the message.
program module_error_stop
  use crown
  use, intrinsic :: iso_fortran_env, only: real64
  implicit none
  real(real64), pointer :: a(:)
  call crown_init()
  call crown_allocate(a, [4])
  call crown_put(a, crown_num_images() + 3, [1.0_real64, 2.0_real64, 3.0_real64, 4.0_real64])
  print *, "not reached"
end program
