! Error paths of image termination: after FAIL IMAGE a SYNC ALL without STAT= ends the
! job naming the failed image (caf_failed_images handles it with STAT=); STOP with a
! number ends normally with it; a runtime error on one image ends every image instead
! of leaving them waiting.
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
