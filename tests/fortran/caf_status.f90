! Image status queries: IMAGE_STATUS and STOPPED_IMAGES see an image that has stopped
! (the last one STOPs early), FAILED_IMAGES is empty, RANDOM_INIT gives the same or
! distinct sequences across images as asked. Prints "PASS caf_status" on image 1.
program caf_status
  use caf_checks
  use iso_fortran_env, only: stat_stopped_image
  implicit none
  integer :: me, n
  integer, allocatable :: stopped(:), failed(:)
  me = this_image()
  n = num_images()
  call check(image_status(me) == 0, "a running image's status")
  failed = failed_images()
  call check(size(failed) == 0, "no failed images")
  call random_case(.true., .false.)
  call random_case(.true., .true.)
  call random_case(.false., .false.)
  call random_case(.false., .true.)
  ! The result goes out before the last image stops: after that no collective runs.
  call finish("caf_status")
  if (n > 1 .and. me == n) stop
  if (me == 1 .and. n > 1) then
    do while (image_status(n) /= stat_stopped_image)
    end do
    stopped = stopped_images()
    if (size(stopped) /= 1 .or. stopped(1) /= n) error stop "stopped_images is wrong"
    print '(a,i0)', "stopped images seen: ", size(stopped)
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
