! FAIL IMAGE ends the job with a message (no image can fail and leave the others
! running without fault-tolerant MPI); STOP with a number ends normally with it.
program caf_fail_image
  implicit none
  sync all
  if (command_argument_count() > 0) stop 3
  if (this_image() == num_images()) fail image
  sync all
end program
