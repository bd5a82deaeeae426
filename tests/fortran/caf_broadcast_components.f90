! co_broadcast of a derived type with allocatable components (gfortran passes each
! allocatable component as a rank-1 view whose span and offset it leaves unset; the
! hidden token of an allocatable scalar; a nested type with allocatable components as a
! whole after its components): allocatable arrays of rank 1 and 2, an allocatable
! scalar, a fixed array, a nested type, twice, from two images. (gfortran 12 broadcasts
! neither character components of such types nor arrays of them.) Prints
! "PASS caf_broadcast_components" on image 1.
module broadcast_types
  implicit none
  type :: inner
    integer, allocatable :: k(:)
  end type
  type :: outer
    integer :: n = 0
    real(8), allocatable :: a(:)
    integer, allocatable :: m(:, :)
    real, allocatable :: s
    integer :: fixed(3) = 0
    type(inner) :: nested
  end type
end module

program caf_broadcast_components
  use caf_checks
  use broadcast_types
  implicit none
  type(outer) :: x
  integer :: me, source
  me = this_image()
  allocate(x%a(4), x%m(2, 3), x%s, x%nested%k(5))
  x%n = me
  x%a = me
  x%m = -me
  x%s = me
  x%fixed = me
  x%nested%k = 10 * me
  do source = 1, num_images(), max(num_images() - 1, 1)
    x%a = me
    x%nested%k = 10 * me
    call co_broadcast(x, source)
    call check(x%n == source .and. all(x%a == source) .and. all(x%m == -source) .and. &
               x%s == source, "allocatable arrays and scalar from the source")
    call check(all(x%fixed == source) .and. all(x%nested%k == 10 * source), &
               "fixed array and nested allocatable component from the source")
    call check(size(x%a) == 4 .and. all(shape(x%m) == [2, 3]) .and. size(x%nested%k) == 5, &
               "shapes kept")
    x%n = me
    x%m = -me
    x%s = me
    x%fixed = me
  end do
  deallocate(x%a, x%m, x%s, x%nested%k) ! each image frees its own memory, not the source's
  call finish("caf_broadcast_components")
end program
