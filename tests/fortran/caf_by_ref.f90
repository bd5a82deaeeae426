! Coindexed reads into allocatable variables (gfortran's get_by_ref): sections of a
! static coarray, of an allocatable coarray with open bounds, a whole rank-2 block, and
! the reallocation of the left-hand side. Prints "PASS caf_by_ref" on image 1.
program caf_by_ref
  use caf_checks
  implicit none
  real :: a(10, 4)[*]
  real, allocatable :: b(:)[:], c(:), d(:, :), e(:, :)[:]
  integer :: me, n, right, i, j
  me = this_image()
  n = num_images()
  right = modulo(me, n) + 1
  allocate(b(7)[*])
  do j = 1, 4
    do i = 1, 10
      a(i, j) = me * 1000 + i + 10 * j
    end do
  end do
  b = [(me * 100 + i, i = 1, 7)]
  sync all
  c = a(2:9:3, 2)[right]
  call check(size(c) == 3 .and. all(c == [(right * 1000 + i + 20, i = 2, 8, 3)]), "static section")
  d = a(:, :)[right]
  call check(all(shape(d) == [10, 4]) .and. d(10, 4) == right * 1000 + 50 .and. &
             d(1, 1) == right * 1000 + 11, "whole rank-2 block, reallocated")
  c = b(:)[right]
  call check(size(c) == 7 .and. all(c == [(right * 100 + i, i = 1, 7)]), "allocatable coarray")
  c = b(3:)[right]
  call check(size(c) == 5 .and. c(1) == right * 100 + 3 .and. lbound(c, 1) == 1, "open end")
  c = b(:4:2)[right]
  call check(size(c) == 2 .and. all(c == [right * 100 + 1, right * 100 + 3]), "open start, strided")
  ! Omitted bounds with a stride (gfortran's "full" reference keeps the stride), and a
  ! negative stride without bounds, which Fortran makes empty.
  c = b(::2)[right]
  call check(size(c) == 4 .and. all(c == [(right * 100 + i, i = 1, 7, 2)]), "full range, stride 2")
  c = b(::-3)[right]
  call check(size(c) == 0, "b(::-3) is empty")
  c = b(7:1:-3)[right]
  call check(size(c) == 3 .and. all(c == [right * 100 + 7, right * 100 + 4, right * 100 + 1]), &
             "negative stride with bounds")
  allocate(e(4, 3)[*])
  e = reshape([(real(me * 100 + i), i = 1, 12)], [4, 3])
  sync all
  d = e(::2, 3:1:-1)[right]
  call check(all(shape(d) == [2, 3]) .and. d(1, 1) == right * 100 + 9 .and. &
             d(2, 3) == right * 100 + 3, "2-d: stride 2 and reversed columns")
  sync all
  deallocate(b, c, d, e)
  call finish("caf_by_ref")
end program
