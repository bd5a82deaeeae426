! co_broadcast of a derived type with allocatable components (gfortran passes each
! allocatable component as a rank-1 view whose span and offset it leaves unset; the
! hidden token of an allocatable scalar; a nested type with allocatable components as a
! whole after its components): allocatable arrays of rank 1 and 2, an allocatable
! scalar, a fixed array, a nested type, an allocatable array of a type with allocatable
! components (not allocated, then allocated), from two images. (gfortran 12 broadcasts
! neither character components of such types nor arrays of them.) Prints
! "PASS caf_broadcast_components" on image 1.
program caf_broadcast_components
  use caf_checks
  use component_types
  implicit none
  type(node) :: x
  integer :: me, source, i
  me = this_image()
  allocate(x%a(4), x%m(2, 3), x%s, x%inner%k(5))
  x%tag = me
  x%a = me
  x%m = -me
  x%s = me
  x%fixed = me
  x%inner%k = 10 * me
  call broadcast(x, 1) ! x%leaves is not allocated
  call check(x%tag == 1 .and. all(x%a == 1) .and. .not. allocated(x%leaves), &
             "with an unallocated array of a type with allocatable components")
  allocate(x%leaves(3))
  do i = 1, 3
    allocate(x%leaves(i)%k(i))
  end do
  do source = 1, num_images(), max(num_images() - 1, 1)
    do i = 1, 3
      x%leaves(i)%k = me * i
    end do
    x%a = me
    x%inner%k = 10 * me
    call broadcast(x, source)
    call check(x%tag == source .and. all(x%a == source) .and. all(x%m == -source) .and. &
               x%s == source, "allocatable arrays and scalar from the source")
    call check(all(x%fixed == source) .and. all(x%inner%k == 10 * source), &
               "fixed array and nested allocatable component from the source")
    call check(size(x%a) == 4 .and. all(shape(x%m) == [2, 3]) .and. size(x%inner%k) == 5, &
               "shapes kept")
    do i = 1, 3
      call check(size(x%leaves(i)%k) == i .and. all(x%leaves(i)%k == source * i), &
                 "an allocatable array of a type with allocatable components")
    end do
    x%tag = me
    x%m = -me
    x%s = me
    x%fixed = me
  end do
  do i = 1, 3 ! each image frees its own memory, not the source's
    deallocate(x%leaves(i)%k)
  end do
  deallocate(x%a, x%m, x%s, x%inner%k, x%leaves)
  call finish("caf_broadcast_components")
contains
  subroutine broadcast(v, source) ! one call site: two of this type in one scope make
    type(node), intent(inout) :: v ! gfortran 12 fail (internal compiler error)
    integer, intent(in) :: source
    call co_broadcast(v, source)
  end subroutine
end program
