! Native coarray image control and atomics on libcrown_caf: critical, lock/unlock
! (with acquired_lock= and stat=), events, atomic_add/or/cas/define/ref, a coindexed
! copy between two images (sendget). Prints "PASS caf_sync" on image 1.
program caf_sync
  use iso_fortran_env
  use caf_checks
  implicit none
  integer :: counter[*], total[*], got, me, n, i, st
  integer(atomic_int_kind) :: word[*], flags[*], old
  type(lock_type) :: guard[*]
  type(event_type) :: ready[*]
  integer :: posts
  real :: a(6)[*]
  logical :: acquired
  me = this_image()
  n = num_images()
  counter = 0
  total = 0
  call atomic_define(word, 0)
  call atomic_define(flags, 0)
  a = real(me)
  sync all

  do i = 1, 5 ! an unprotected read-modify-write of image 1's counter, made safe
    critical
      got = counter[1]
      counter[1] = got + 1
    end critical
  end do
  do i = 1, 3
    lock(guard[1])
    got = total[1]
    total[1] = got + me
    unlock(guard[1])
  end do
  sync all
  if (me == 1) call check(counter == 5 * n, "critical")
  if (me == 1) call check(total == 3 * n * (n + 1) / 2, "lock")

  ! acquired_lock= and stat= on a lock this image holds.
  if (me == 1) then
    lock(guard[1], acquired_lock=acquired)
    call check(acquired, "acquired_lock")
    lock(guard[1], stat=st)
    call check(st == stat_locked, "stat_locked on a held lock")
    unlock(guard[1])
    unlock(guard[1], stat=st)
    call check(st == stat_unlocked, "stat_unlocked")
  end if
  sync all

  ! events: everyone posts to image 1, which waits for all posts at once; then image 1
  ! posts twice to the last image, which counts them with event_query first.
  event post(ready[1])
  if (me == 1) event wait(ready, until_count=n)
  sync all
  if (me == 1) then
    event post(ready[n])
    event post(ready[n])
  end if
  if (me == n) then
    posts = 0
    do while (posts < 2)
      call event_query(ready, posts)
    end do
    call check(posts == 2, "event_query counts the posts")
    event wait(ready, until_count=2)
    call event_query(ready, posts)
    call check(posts == 0, "event wait consumes them")
  end if
  sync all

  call atomic_add(word[n], int(me, atomic_int_kind))
  call atomic_or(flags[n], int(2**(me - 1), atomic_int_kind))
  sync all
  if (me == n) then
    call atomic_ref(old, word)
    call check(old == n * (n + 1) / 2, "atomic_add")
    call check(flags == 2**n - 1, "atomic_or")
  end if
  sync all
  if (me == 1) then
    call atomic_cas(word[n], old, int(n * (n + 1) / 2, atomic_int_kind), 100_atomic_int_kind)
    call check(old == n * (n + 1) / 2, "atomic_cas sees the sum")
    call atomic_cas(word[n], old, 1_atomic_int_kind, 7_atomic_int_kind)
    call atomic_ref(old, word[n])
    call check(old == 100, "a failed compare-and-swap changes nothing")
  end if

  ! a(2:3)[image 1] = a(4:5)[image n], copied by a third party (image 1's view)
  sync all
  if (me == 1) a(2:3)[1] = a(4:5)[n]
  sync all
  if (me == 1) call check(all(a(2:3) == real(n)) .and. a(1) == 1.0, "coindexed copy")

  call finish("caf_sync")
end program
