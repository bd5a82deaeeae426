! One image STOPs while the others go on: image first, middle or last (argument 1:
! first, middle, last; last when absent). With STAT= (argument 2 absent or "stat"), SYNC
! ALL, SYNC IMAGES (*), co_sum and EVENT POST to it report STAT_STOPPED_IMAGE on every
! other image, and
! STOPPED_IMAGES (of kind 4, 1 and 8) lists exactly that image there, however fast the
! others run on to their own end; FAILED_IMAGES is empty; the others still synchronise
! among themselves. The lowest running image gathers the checks without collectives and
! prints "PASS caf_stopped_images". Argument 2 "nostat": SYNC ALL without STAT= ends the
! job naming the stopped image; "nostat_images": SYNC IMAGES does.
program caf_stopped_images
  use iso_fortran_env, only: stat_stopped_image, event_type
  implicit none
  integer :: me, n, s, st, lowest, i, report(64)[*], bad
  type(event_type) :: ping[*]
  integer, allocatable :: list(:), others(:)
  integer(1), allocatable :: list1(:)
  integer(8), allocatable :: list8(:)
  character(len=16) :: where, how
  where = 'last'
  how = 'stat'
  if (command_argument_count() > 0) call get_command_argument(1, where)
  if (command_argument_count() > 1) call get_command_argument(2, how)
  me = this_image()
  n = num_images()
  bad = 0
  report = 0
  s = n
  if (where == 'first') s = 1
  if (where == 'middle') s = (n + 1) / 2
  lowest = merge(2, 1, s == 1)
  others = pack([(i, i = 1, n)], [(i /= s .and. i /= me, i = 1, n)]) ! running, not me
  list = stopped_images()
  call check(size(list) == 0, "no image has stopped before the STOP")
  sync all
  if (n == 1) then ! no one would be left to see it
    print '(a)', "PASS caf_stopped_images"
    stop
  end if
  if (me == s) stop

  if (how == 'nostat') sync all ! error termination: image s has stopped
  if (how == 'nostat_images') sync images (s)
  sync all (stat=st)
  call check(st == stat_stopped_image, "sync all reports the stopped image")
  call check_lists("after sync all")
  sync images (others, stat=st) ! the running images still synchronise
  call check(st == 0, "sync images among the running images")
  sync images (*, stat=st)
  call check(st == stat_stopped_image, "sync images (*) reports the stopped image")
  call co_sum(me, stat=st)
  call check(st == stat_stopped_image, "co_sum reports the stopped image")
  event post (ping[s], stat=st)
  call check(st == stat_stopped_image, "event post to the stopped image")
  call check_lists("after sync images (*), co_sum and event post")
  call check(image_status(s) == stat_stopped_image, "image_status of the stopped image")
  call check_lists("after image_status")

  report(me)[lowest] = bad ! gathered without collectives (they report the stopped image)
  if (me == lowest) then
    sync images (others)
    if (all(report(1:n) == 0)) print '(a,i0,a,i0)', "PASS caf_stopped_images: image ", s, &
                                                    " of ", n
  else
    sync images (lowest)
  end if
contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (ok) return
    bad = bad + 1
    print '(a,i0,a,a)', "image ", me, ": FAILED ", what
  end subroutine
  ! Exactly image s is known to have stopped, in every kind; none has failed.
  subroutine check_lists(when)
    character(len=*), intent(in) :: when
    list = stopped_images()
    list1 = stopped_images(kind=1)
    list8 = stopped_images(kind=8)
    if (size(list) /= 1) print '(a,i0,a,*(1x,i0))', "image ", me, ": stopped_images", list
    call check(size(list) == 1, "stopped_images has one entry " // when)
    if (size(list) == 1) call check(list(1) == s, "stopped_images names it " // when)
    call check(size(list1) == 1, "stopped_images(kind=1) has one entry " // when)
    if (size(list1) == 1) call check(list1(1) == s, "stopped_images(kind=1) names it " // when)
    call check(size(list8) == 1, "stopped_images(kind=8) has one entry " // when)
    if (size(list8) == 1) call check(list8(1) == s, "stopped_images(kind=8) names it " // when)
    call check(size(failed_images()) == 0, "failed_images is empty " // when)
    call check(num_images(failed=.true.) == 0, "num_images(failed=.true.) " // when)
    call check(image_status(me) == 0, "this image runs " // when)
  end subroutine
end program
