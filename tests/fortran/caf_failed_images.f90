! FAIL IMAGE within one job: the last image takes a lock on image 1, then fails. The
! others see STAT_FAILED_IMAGE from SYNC ALL, SYNC IMAGES, co_sum, LOCK (of the lock it
! holds, and of a lock on it), events, atomics and coindexed reads from it (gfortran 12
! passes no STAT= for a coindexed write: one to a failed image ends the job);
! IMAGE_STATUS, FAILED_IMAGES and NUM_IMAGES(FAILED=) report it; and they still move data
! and synchronise among themselves. The program then ends normally. The survivors' result
! is gathered on image 1 without collectives (a collective of the initial team reports
! the failure): "PASS caf_failed_images".
program caf_failed_images
  use iso_fortran_env, only: stat_failed_image, lock_type, event_type, atomic_int_kind
  implicit none
  integer :: x[*], got[*], report(64)[*], bad, me, n, st, v, left, right
  integer(atomic_int_kind) :: word[*]
  type(lock_type) :: held[*], spare[*]
  type(event_type) :: ping[*]
  integer, allocatable :: failed(:)
  me = this_image()
  n = num_images()
  bad = 0
  report = 0
  x = 10 * me
  got = 0
  call atomic_define(word, 0)
  sync all
  if (n == 1) then ! no one would be left
    print '(a)', "PASS caf_failed_images"
    stop
  end if
  if (me == n) then
    lock (held[1])
    fail image
    call check(.false., "the failed image went on")
  end if

  sync all (stat=st)
  call check(st == stat_failed_image, "sync all reports the failed image")
  call check(image_status(n) == stat_failed_image, "image_status of the failed image")
  call check(image_status(me) == 0, "image_status of a running image")
  failed = failed_images()
  call check(size(failed) == 1, "failed_images has one entry")
  if (size(failed) == 1) call check(failed(1) == n, "failed_images names it")
  call check(num_images(failed=.true.) == 1, "num_images(failed=.true.)")
  call check(num_images(failed=.false.) == n - 1, "num_images(failed=.false.)")
  call check(size(stopped_images()) == 0, "a failed image is not stopped")

  v = x[n, stat=st]
  call check(st == stat_failed_image, "a read from the failed image")
  call atomic_define(word[n], 1, stat=st)
  call check(st == stat_failed_image, "an atomic on the failed image")
  event post (ping[n], stat=st)
  call check(st == stat_failed_image, "event post to the failed image")
  lock (spare[n], stat=st)
  call check(st == stat_failed_image, "a lock on the failed image")
  if (me == 1) then
    lock (held[1], stat=st)
    call check(st == stat_failed_image, "a lock the failed image holds")
  end if
  call co_sum(v, stat=st)
  call check(st == stat_failed_image, "co_sum reports the failed image")
  sync images (n, stat=st)
  call check(st == stat_failed_image, "sync images with the failed image")

  ! The survivors still move data and synchronise: a ring among images 1..n-1.
  right = modulo(me, n - 1) + 1
  left = modulo(me - 2, n - 1) + 1
  v = x[left, stat=st]
  call check(st == 0 .and. v == 10 * left, "a read from a running image")
  got[right] = me
  sync images (*, stat=st)
  call check(st == stat_failed_image, "sync images (*) reports it")
  call check(got == left, "sync images (*) orders the survivors' writes")
  sync all (stat=st) ! every image has read got before it changes
  got[right] = -me
  sync all (stat=st)
  call check(st == stat_failed_image, "a later sync all reports it again")
  call check(got == -left, "sync all orders the survivors' writes")

  deallocate(failed)
  report(me)[1, stat=st] = bad
  sync all (stat=st)
  if (me == 1 .and. all(report(1:n - 1) == 0)) print '(a)', "PASS caf_failed_images"
contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (ok) return
    bad = bad + 1
    print '(a,i0,a,a)', "image ", this_image(), ": FAILED ", what
  end subroutine
end program
