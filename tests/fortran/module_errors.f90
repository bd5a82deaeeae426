! Bad input gets stat= and a message naming image and values, on the image that made
! the mistake; a mismatched allocation fails on every image.
program module_errors
  use crown
  use checks
  use, intrinsic :: iso_fortran_env, only: real64, int32
  implicit none
  real(real64), pointer :: a(:,:), odd(:)
  real(real64) :: buf(2, 3), small(4), plain(6)
  character(len=200) :: msg, expected
  integer :: me, n, stat
  call crown_init()
  me = crown_this_image()
  n = crown_num_images()
  call crown_allocate(a, [2, 3])
  buf = 1
  msg = ""
  call crown_put(a, n + 1, buf, stat=stat, errmsg=msg)
  call expect(stat == CROWN_ERR_ARGUMENT, "image out of range: stat")
  write (expected, '(a,i0,a,i0)') "crown_put on image ", n + 1, ": image out of range 1:", n
  call expect(index(msg, trim(expected)) > 0, "image out of range: " // trim(msg))
  call crown_get(a, 0, buf, stat=stat, errmsg=msg)
  call expect(stat /= 0 .and. index(msg, "crown_get on image 0: image out of range") > 0, &
              "image 0: " // trim(msg))
  call crown_put(a, 1, small, stat=stat, errmsg=msg)
  call expect(stat /= 0 .and. index(msg, "4 elements given for a block of 6") > 0, &
              "size mismatch: " // trim(msg))
  call crown_put_section(a, 1, [1, 1], [3, 3], [1, 1], plain(1:6), stat=stat, errmsg=msg)
  call expect(stat /= 0, "section beyond the block: stat")
  call expect(index(msg, "section") > 0, "section beyond the block: " // trim(msg))
  call crown_put_section(a, 1, [1, 1], [2, 3], [1, 1], small, stat=stat, errmsg=msg)
  call expect(stat /= 0 .and. index(msg, "the section has 6 elements, the buffer 4") > 0, &
              "section size: " // trim(msg))
  call crown_put(plain, 1, plain, stat=stat, errmsg=msg)
  call expect(stat /= 0 .and. index(msg, "not a coarray") > 0, "not a coarray: " // trim(msg))
  ! A mismatched allocation: image 1 asks for another size.
  if (me == 1) then
    call crown_allocate(odd, [3], stat=stat, errmsg=msg)
  else
    call crown_allocate(odd, [4], stat=stat, errmsg=msg)
  end if
  if (n > 1) then
    call expect(stat /= 0, "mismatched allocation fails on every image")
    call expect(index(msg, "rank") > 0 .or. index(msg, "size") > 0, "mismatch: " // trim(msg))
  end if
  call crown_sync_all()
  call crown_deallocate(a)
  call finish("module_errors")
end program
