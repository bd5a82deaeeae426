! Image control and atomics: sync images in pairs, events, locks guarding a
! read-modify-write on image 1, and every atomic operation on int32 and int64.
program module_sync
  use crown
  use checks
  use, intrinsic :: iso_fortran_env, only: int32, int64
  implicit none
  integer(int64), pointer :: counter(:), word(:)
  integer(int32), pointer :: flags(:)
  integer(int64) :: value(1), old
  integer(int32) :: old32
  type(crown_event) :: ready
  type(crown_lock) :: guard
  integer :: me, n, i, k
  call crown_init()
  me = crown_this_image()
  n = crown_num_images()
  call crown_allocate(counter, [1])
  call crown_allocate(word, [2])
  call crown_allocate(flags, [4])
  counter = 0
  word = 0
  flags = 0
  call crown_event_create(ready)
  call crown_lock_create(guard)
  call crown_sync_all()

  ! sync images: image 1 with everybody else, the others with image 1 only.
  if (me == 1) then
    call crown_sync_images([(i, i = 2, n)])
  else
    call crown_sync_images([1])
  end if

  ! Events: everybody posts to image 1, which waits for all of the posts at once.
  call crown_event_post(ready, 1)
  if (me == 1) then
    call crown_event_wait(ready, n)
    call expect(crown_event_query(ready) == 0, "event count consumed")
  end if
  call crown_sync_all()

  ! Locks: 5 unprotected read-modify-writes per image on image 1's counter.
  do k = 1, 5
    call crown_lock_acquire(guard, 1)
    call crown_get(counter, 1, value)
    value = value + 1
    call crown_put(counter, 1, value)
    call crown_lock_release(guard, 1)
  end do
  call crown_sync_all()
  if (me == 1) call expect(counter(1) == 5 * n, "lock-protected counter")

  ! Atomics on image n's words.
  call crown_atomic(word, n, [1], crown_atomic_add, int(me, int64), old)
  call crown_atomic(flags, n, [2], crown_atomic_or, int(2**(me - 1), int32), old32)
  call crown_sync_all()
  if (me == n) then
    call expect(word(1) == int(n * (n + 1) / 2, int64), "atomic add")
    call expect(flags(2) == 2**n - 1, "atomic or")
  end if
  call crown_sync_all()
  if (me == 1) then
    call crown_atomic(word, n, [2], crown_atomic_define, 12_int64)
    call crown_atomic(word, n, [2], crown_atomic_xor, 5_int64, old)
    call expect(old == 12, "xor returns the old value")
    call crown_atomic(word, n, [2], crown_atomic_and, 12_int64, old)
    call expect(old == 9, "12 xor 5 = 9")
    call crown_atomic(word, n, [2], crown_atomic_cas, 100_int64, old, compare=8_int64)
    call expect(old == 8, "9 and 12 = 8, compare-and-swap sees it")
    call crown_atomic(word, n, [2], crown_atomic_cas, 200_int64, old, compare=8_int64)
    call crown_atomic(word, n, [2], crown_atomic_ref, 0_int64, old)
    call expect(old == 100, "a failed compare-and-swap changes nothing")
  end if
  call crown_sync_all()
  call crown_event_free(ready)
  call crown_lock_free(guard)
  call finish("module_sync")
end program
