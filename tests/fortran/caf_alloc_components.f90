! Coarrays of derived types with allocatable components, allocated on each image with its
! own size: remote reads and writes of whole components, sections and elements, of rank
! 1 and 2 and scalars, with kind conversions; a nested type, an allocatable array of a
! type with allocatable components, an allocatable coarray of the type, a deferred-length
! character component; ALLOCATED() of another image's component; a copy between two
! other images; reallocation by assignment and DEALLOCATE seen from the others. With the argument "unallocated" a read
! of a component the other image has not allocated ends the job with the image and the
! cause. Prints "PASS caf_alloc_components" on image 1.
program caf_alloc_components
  use caf_checks
  use component_types
  implicit none
  type(node) :: x[*]
  type(node), allocatable :: y(:)[:]
  type(named) :: label[*]
  character(len=8) :: text
  real(8), allocatable :: r8(:)
  real, allocatable :: r4(:)
  integer, allocatable :: row(:), mm(:, :), kk(:)
  integer :: me, n, right, left, i, j, v
  character(len=16) :: how
  me = this_image()
  n = num_images()
  right = modulo(me, n) + 1
  left = modulo(me - 2, n) + 1
  call fill(x, me)
  allocate(y(2)[*])
  allocate(y(2)%a(me))
  y(2)%a = -me
  allocate(character(len=me + 1) :: label%name)
  label%name(:) = repeat(achar(iachar("a") + me - 1), me + 1) ! (:): no reallocation
  sync all

  if (command_argument_count() > 0) then
    call get_command_argument(1, how)
    if (how == "unallocated" .and. me == 1) r8 = y(1)[right]%a(:)
    sync all
  end if

  ! Reads: every size is the other image's.
  r8 = x[right]%a(:)
  call check(size(r8) == right + 2, "a whole rank-1 component has the other image's size")
  call check(all(r8 == [(right * 100 + i, i = 1, right + 2)]), "a whole rank-1 component")
  call check(x[right]%a(right + 2) == right * 100 + right + 2, "its last element")
  r8 = x[right]%a(2:right + 2:2)
  call check(all(r8 == [(right * 100 + i, i = 2, right + 2, 2)]), "a strided section")
  mm = x[right]%m(:, :)
  call check(all(shape(mm) == [2, right]), "a whole rank-2 component's shape")
  call check(all(mm == reshape([(i, i = 1, 2 * right)], [2, right]) * right), "rank-2 values")
  row = x[right]%m(2, :)
  call check(all(row == [(2 * j * right, j = 1, right)]), "a row of a rank-2 component")
  call check(x[right]%s == -right, "an allocatable scalar component")
  kk = x[right]%leaves(2)%k(:)
  call check(all(kk == [(right + 2 + i, i = 1, right + 2)]), &
             "an allocatable component of an element of an allocatable component")
  call check(allocated(x[right]%a) .and. allocated(x[right]%s), "allocated() of another image's")
  call check(allocated(x[right]%inner%k) .eqv. mod(right, 2) == 0, &
             "allocated() of a nested component allocated on even images only")
  if (mod(right, 2) == 0) then
    kk = x[right]%inner%k(:)
    call check(all(kk == [(-i, i = 1, right)]), "a nested allocatable component")
  end if
  r4 = x[right]%a(:) ! real(8) to real(4)
  call check(all(r4 == [(real(right * 100 + i), i = 1, right + 2)]), "real(8) into real(4)")
  v = x[right]%a(1) ! real(8) to integer
  call check(v == right * 100 + 1, "real(8) into an integer")
  r8 = y(2)[right]%a(:)
  call check(size(r8) == right .and. all(r8 == -right), &
             "a component of an element of an allocatable coarray")
  text = label[right]%name
  call check(text == repeat(achar(iachar("a") + right - 1), right + 1), &
             "a deferred-length character component, blank-padded")
  sync all

  ! Writes into the right neighbour's components (each of its own size).
  x[right]%a(:) = [(-real(i, 8), i = 1, right + 2)]
  x[right]%m(1, :) = [(me, j = 1, right)]
  x[right]%m(2, 1) = 2.75 ! real into an integer component: truncated
  x[right]%s = 7 * me
  x[right]%leaves(1)%k(1) = 1000 + me
  x[right]%a(1) = me ! integer into real(8)
  y(2)[right]%a(right) = 0.5_8
  label[right]%name = "Z"
  sync all
  call check(size(x%a) == me + 2, "writes keep this image's size")
  call check(x%a(1) == left .and. all(x%a(2:) == [(-real(i, 8), i = 2, me + 2)]), &
             "a whole component, then an element converted, written by the left neighbour")
  call check(all(x%m(1, :) == left) .and. x%m(2, 1) == 2 .and. x%m(2, me) == 2 * me * me, &
             "a row and an element of a rank-2 component")
  call check(x%s == 7 * left, "an allocatable scalar component written")
  call check(x%leaves(1)%k(1) == 1000 + left .and. x%leaves(1)%k(2) == me + 1 + 2, &
             "an element of a nested allocatable component written")
  call check(y(2)%a(me) == 0.5_8 .and. all(y(2)%a(:me - 1) == -me), &
             "an element in an allocatable coarray's component")
  call check(len(label%name) == me + 1 .and. label%name == "Z", &
             "a deferred-length character component written, keeping its length")
  sync all

  ! The right neighbour's first two elements into the left neighbour's (image to image),
  ! real(8) into a nested integer component.
  x[left]%leaves(2)%k(1:2) = x[right]%a(1:2)
  sync all
  call check(all(x%leaves(2)%k(1:2) == [right, -2]), "a copy between two other images")
  sync all

  ! Reallocation by assignment (of an allocated component, and of one that was not) and
  ! deallocation, seen from the left neighbour.
  x%a = [(real(me, 8), i = 1, 2 * me + 3)]
  if (mod(me, 2) == 1) x%inner%k = [me, me]
  deallocate(x%s)
  sync all
  r8 = x[right]%a(:)
  call check(size(r8) == 2 * right + 3 .and. all(r8 == right), "a reallocated component")
  kk = x[right]%inner%k(:)
  call check(size(kk) == merge(2, right, mod(right, 2) == 1) .and. &
             kk(1) == merge(right, -1, mod(right, 2) == 1), "a component allocated by assignment")
  call check(.not. allocated(x[right]%s), "a deallocated component")
  sync all
  deallocate(y)
  deallocate(r8, r4, row, mm, kk)
  call finish("caf_alloc_components")
contains
  subroutine fill(t, me) ! a coarray dummy: its components are allocated as coarrays' are
    type(node), intent(inout) :: t[*]
    integer, intent(in) :: me
    allocate(t%a(me + 2), t%m(2, me), t%s, t%leaves(2))
    t%tag = me
    t%a = [(me * 100 + i, i = 1, me + 2)]
    t%m = reshape([(i, i = 1, 2 * me)], [2, me]) * me
    t%s = -me
    do j = 1, 2
      allocate(t%leaves(j)%k(me + j))
      t%leaves(j)%k = [(me + j + i, i = 1, me + j)]
    end do
    if (mod(me, 2) == 0) then
      allocate(t%inner%k(me))
      t%inner%k = [(-i, i = 1, me)]
    end if
  end subroutine
end program
