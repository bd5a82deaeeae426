! Vector subscripts on coindexed objects (gfortran passes them beside the descriptor):
! gets and puts of 1-d and 2-d selections with repeated and unordered indices, lower
! bounds other than 1, an allocatable coarray, and a copy between images. Prints
! "PASS caf_vector" on image 1.
program caf_vector
  use caf_checks
  implicit none
  integer :: a(0:9, -1:4)[*], b(2, 3), line(4), me, n, right, left, i, j
  integer, allocatable :: z(:)[:]
  integer :: iv(2), jv(3), kv(4)
  me = this_image()
  n = num_images()
  right = modulo(me, n) + 1
  left = modulo(me - 2, n) + 1
  allocate(z(20)[*])
  do j = -1, 4
    do i = 0, 9
      a(i, j) = me * 1000 + i * 10 + j
    end do
  end do
  z = [(me * 100 + i, i = 1, 20)]
  sync all
  iv = [7, 2]
  jv = [4, -1, 4]
  b = a(iv, jv)[right]
  call check(all(b == reshape([(((right * 1000 + iv(i) * 10 + jv(j)), i = 1, 2), j = 1, 3)], &
             [2, 3])), "2-d get with two vector subscripts")
  b(:, 1) = a(iv, 2)[right]
  call check(all(b(:, 1) == [right * 1000 + 72, right * 1000 + 22]), "vector and a scalar index")
  kv = [20, 1, 5, 5]
  line = z(kv)[right]
  call check(all(line == right * 100 + kv), "allocatable coarray, repeated indices")
  sync all
  z(kv(1:3))[right] = [-me, -2 * me, -3 * me]
  a(iv, 0:1)[right] = reshape([1, 2, 3, 4] * me, [2, 2])
  sync all
  call check(z(20) == -left .and. z(1) == -2 * left .and. z(5) == -3 * left .and. &
             z(2) == me * 100 + 2, "put through a vector subscript")
  call check(a(7, 0) == left .and. a(2, 0) == 2 * left .and. a(7, 1) == 3 * left .and. &
             a(2, 1) == 4 * left .and. a(3, 0) == me * 1000 + 30, "2-d put, vector and range")
  sync all
  ! z([1, 5]) on the left neighbour = z([20, 2]) on the right one
  jv(1:2) = [20, 2]
  z(kv(2:3))[left] = z(jv(1:2))[right]
  sync all
  i = modulo(right, n) + 1 ! the image two to the right wrote here, from its right neighbour
  call check(z(1) == -right .and. z(5) == i * 100 + 2 .and. z(20) == -left, &
             "copy between images by vector subscripts")
  sync all
  deallocate(z)
  call finish("caf_vector")
end program
