! Native coarray Fortran on Crown (gfortran -fcoarray=lib, libcrown_caf): static and
! allocatable coarrays, whole arrays and strided multi-dimensional sections both ways,
! a scalar into a section, kind conversion, sync all / sync images, co_sum, co_min,
! co_max, co_broadcast. Prints "PASS caf_basics" on image 1.
program caf_basics
  use caf_checks
  implicit none
  real(8) :: a(6, 5)[*]
  integer :: k(10)[*]
  real(8), allocatable :: c(:, :, :)[:]
  real(8) :: part(3, 2), expected(6, 5), cube(2, 2, 2)
  integer :: me, n, right, left, i, total(3)
  real :: r(10)
  me = this_image()
  n = num_images()
  right = modulo(me, n) + 1
  left = modulo(me - 2, n) + 1
  a = -1
  k = 0
  allocate(c(4, 3, 5)[*])
  c = -1
  sync all

  ! a(1:5:2, 2:5:3)[right] = part  (rows 1, 3, 5; columns 2 and 5)
  part = reshape([(real(me * 10 + i, 8), i = 1, 6)], [3, 2])
  a(1:5:2, 2:5:3)[right] = part
  k(2:10:4)[right] = [me, me + 1, me + 2]
  cube = real(me, 8)
  c(2:3, 1:3:2, 4:5)[right] = cube
  sync all
  expected = -1
  expected(1:5:2, 2:5:3) = reshape([(real(left * 10 + i, 8), i = 1, 6)], [3, 2])
  call check(all(a == expected), "2-d strided put")
  call check(all(k([2, 6, 10]) == [left, left + 1, left + 2]) .and. count(k /= 0) == 3, &
             "1-d strided put")
  call check(all(c(2:3, 1:3:2, 4:5) == real(left, 8)) .and. count(c == real(left, 8)) == 8, &
             "3-d section of an allocatable coarray")
  sync all

  ! get: the section this image put on the right neighbour comes back.
  part = 0
  part = a(1:5:2, 2:5:3)[right]
  call check(all(part == reshape([(real(me * 10 + i, 8), i = 1, 6)], [3, 2])), "2-d strided get")
  ! kind conversion: integers from a coarray into reals, and a scalar into a section.
  r = k(:)[right]
  call check(r(6) == real(me + 1), "integer to real on get")
  sync all
  a(:, 1)[right] = 7
  sync all
  call check(all(a(:, 1) == 7.0d0), "scalar into a section")

  ! sync images: image 1 with every other, the others with image 1.
  if (me == 1) then
    sync images(*)
  else
    sync images(1)
  end if

  total = [me, -me, 1]
  call co_sum(total)
  call check(all(total == [n * (n + 1) / 2, -n * (n + 1) / 2, n]), "co_sum")
  total = [me, -me, 1]
  call co_max(total)
  call check(all(total == [n, -1, 1]), "co_max")
  total = [me, -me, 1]
  call co_min(total, result_image=1)
  if (me == 1) call check(all(total == [1, -n, 1]), "co_min into image 1")
  cube = real(me, 8)
  call co_broadcast(cube, source_image=n)
  call check(all(cube == real(n, 8)), "co_broadcast")
  deallocate(c)
  sync all

  ! Source and target overlap on this image (gfortran's may_require_tmp): the
  ! assignment sees the source as it was before.
  k = [(i, i = 1, 10)]
  k(2:10)[me] = k(1:9)
  call check(all(k == [1, (i, i = 1, 9)]), "put overlapping its source")
  k = [(i, i = 1, 10)]
  k(2:10) = k(1:9)[me]
  call check(all(k == [1, (i, i = 1, 9)]), "get overlapping its target")
  k = [(i, i = 1, 10)]
  k(1:9)[me] = k(2:10)[me]
  call check(all(k == [(i, i = 2, 10), 10]), "copy overlapping on one image")
  ! SYNC MEMORY orders this image's coindexed write before the SYNC ALL that follows.
  sync all
  k(1)[right] = -me
  sync memory
  sync all
  call check(k(1) == -left, "sync memory")
  sync all

  call finish("caf_basics")
end program
