! SYNC IMAGES naming an image twice (the standard forbids it): STAT= is 3 (OpenCoarrays'
! value) and ERRMSG= names the image, before any image is waited for, with the
! duplicate this image, another image, or out of range; the images then synchronise as
! usual. Without STAT= (argument "nostat") image 1 ends the job with that message.
program caf_sync_duplicates
  use caf_checks
  implicit none
  integer :: me, n, st
  character(len=80) :: msg
  character(len=8) :: how
  me = this_image()
  n = num_images()
  how = ''
  if (command_argument_count() > 0) call get_command_argument(1, how)
  if (how == 'nostat' .and. me == 1) sync images ([n, 1, n])

  msg = ''
  sync images ([n, me, n], stat=st, errmsg=msg) ! nothing waits: the set is refused
  call check(st == 3, "stat of a duplicated other image")
  call check(msg == "sync images: image " // itoa(n) // " appears more than once in the image set", &
             "errmsg names the duplicated image: " // trim(msg))
  sync images ([me, me], stat=st, errmsg=msg)
  call check(st == 3, "stat of this image twice")
  call check(index(msg, "image " // itoa(me) // " appears more than once") > 0, &
             "errmsg names this image: " // trim(msg))
  sync images ([n + 2, n + 1, n + 2], stat=st, errmsg=msg)
  call check(st == 3, "a duplicate out of range is a duplicate first")
  call check(index(msg, "image " // itoa(n + 2) // " appears") > 0, "errmsg names it")
  sync images (*, stat=st) ! the images still synchronise
  call check(st == 0, "sync images (*) afterwards")
  call finish("caf_sync_duplicates")
contains
  function itoa(i) result(text)
    integer, intent(in) :: i
    character(len=:), allocatable :: text
    character(len=12) :: buffer
    write (buffer, '(i0)') i
    text = trim(buffer)
  end function
end program
