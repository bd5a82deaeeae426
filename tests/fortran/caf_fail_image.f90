! FAIL IMAGE ends the job with a message (no image can fail and leave the others
! running without fault-tolerant MPI); STOP with a number ends normally with it; a
! runtime error on one image ends every image instead of leaving them waiting.
program caf_fail_image
  implicit none
  character(len=8) :: how
  integer :: bad
  sync all
  how = ''
  if (command_argument_count() > 0) call get_command_argument(1, how)
  if (how == 'stop') stop 3
  if (how == 'runtime') then ! a libgfortran runtime error on image 1 ends it by exit()
    if (this_image() == 1) read (how, '(i8)') bad
    sync all
  end if
  if (this_image() == num_images()) fail image
  sync all
end program
