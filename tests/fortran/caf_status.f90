! Image status: the last image STOPs early, holding a lock; SYNC ALL, SYNC IMAGES, co_sum
! and LOCK with STAT= then return STAT_STOPPED_IMAGE on the others, and IMAGE_STATUS and STOPPED_IMAGES see
! it; FAILED_IMAGES is empty; RANDOM_INIT gives the same or distinct sequences across
! images as asked. Prints "PASS caf_status" on image 1.
program caf_status
  use caf_checks
  use iso_fortran_env, only: stat_stopped_image, lock_type
  implicit none
  integer :: me, n, st, i, others(64)
  type(lock_type) :: held[*]
  integer, allocatable :: stopped(:), failed(:)
  me = this_image()
  n = num_images()
  call check(image_status(me) == 0, "a running image's status")
  failed = failed_images()
  call check(size(failed) == 0, "no failed images")
  deallocate(failed)
  call random_case(.true., .false.)
  call random_case(.true., .true.)
  call random_case(.false., .false.)
  call random_case(.false., .true.)
  ! The result goes out before the last image stops: after that no collective runs.
  call finish("caf_status")
  if (n > 1 .and. me == n) then
    lock (held[1]) ! and never unlocks it
    stop
  end if
  ! The others learn it from an image control statement or collective with STAT=
  ! (STAT_STOPPED_IMAGE) instead of waiting for ever.
  if (n == 1) stop
  sync all (stat=st)
  if (st /= stat_stopped_image) error stop "sync all did not report the stopped image"
  sync images (n, stat=st)
  if (st /= stat_stopped_image) error stop "sync images did not report the stopped image"
  sync images (*, stat=st)
  if (st /= stat_stopped_image) error stop "sync images (*) did not report it"
  call co_sum(me, stat=st)
  if (st /= stat_stopped_image) error stop "co_sum did not report the stopped image"
  if (image_status(n) /= stat_stopped_image) error stop "image_status is wrong"
  if (me == 1) then ! the lock's holder has stopped: STAT_STOPPED_IMAGE, not a wait
    lock (held[1], stat=st)
    if (st /= stat_stopped_image) error stop "lock held by a stopped image: no stat"
  end if
  stopped = stopped_images()
  ! Exactly image n on every image, even where another has already reached its end (it
  ! did its part in everything this image did with it, so it is not known to have ended).
  if (size(stopped) /= 1 .or. .not. any(stopped == n)) then
    print *, "image", me, "stopped_images:", stopped
    error stop "stopped_images is wrong"
  end if
  if (me == 1) print '(a,i0)', "stopped images seen: ", size(stopped)
  deallocate(stopped)
  ! Images other than the stopped one still synchronise among themselves.
  if (n > 2) then
    others(1:n - 2) = [(i, i = 2, n - 1)] ! not a constructor in the statement: gfortran
    if (me == 1) sync images (others(1:n - 2)) ! leaks its temporary
    if (me > 1) sync images (1)
  end if
contains
  ! Same numbers on every image unless image_distinct.
  subroutine random_case(repeatable, distinct)
    logical, intent(in) :: repeatable, distinct
    real :: x(4), lo(4), hi(4)
    character(len=40) :: what
    call random_init(repeatable, distinct)
    call random_number(x)
    lo = x
    hi = x
    call co_min(lo)
    call co_max(hi)
    write (what, '(a,l1,a,l1,a)') "random_init(", repeatable, ", ", distinct, ")"
    if (distinct) then
      call check(n == 1 .or. any(lo /= hi), trim(what) // ": different numbers")
    else
      call check(all(lo == hi), trim(what) // ": the same numbers everywhere")
    end if
  end subroutine
end program
