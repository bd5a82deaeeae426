! Coarrays of derived type (no allocatable components): whole values both ways, a
! component of a scalar, a component across an array of them (a strided walk by the
! type's size), an element of an array component, an allocatable coarray of the type,
! kind conversion into a component, and image-to-image copies. Prints
! "PASS caf_derived" on image 1.
program caf_derived
  use caf_checks
  implicit none
  type :: particle
    real :: x
    integer :: tag(4)
    real(8) :: w(3, 2)
  end type
  type(particle) :: s[*], many(5)[*], got, one
  type(particle), allocatable :: dyn(:)[:]
  integer, allocatable :: tags(:)
  real, allocatable :: xs(:)
  real(8) :: row(2)
  integer :: me, n, right, left, i
  me = this_image()
  n = num_images()
  right = modulo(me, n) + 1
  left = modulo(me - 2, n) + 1
  allocate(dyn(3)[*])
  s = particle(real(me), [(me * 10 + i, i = 1, 4)], reshape([(real(me * 100 + i, 8), i = 1, 6)], [3, 2]))
  do i = 1, 5
    many(i) = particle(real(me * 10 + i), [(me * 100 + i, i = 1, 4)], 0)
  end do
  dyn = particle(-1.0, -1, -1)
  sync all

  ! get: a whole value, a scalar component, a section of an array component
  got = s[right]
  call check(got%x == real(right) .and. all(got%tag == [(right * 10 + i, i = 1, 4)]) .and. &
             got%w(3, 2) == real(right * 100 + 6, 8), "whole derived value")
  call check(s[right]%tag(3) == right * 10 + 3, "element of an array component")
  row = s[right]%w(2, :)
  call check(all(row == [real(right * 100 + 2, 8), real(right * 100 + 5, 8)]), &
             "strided section of an array component")
  xs = many(:)[right]%x
  call check(size(xs) == 5 .and. all(xs == [(real(right * 10 + i), i = 1, 5)]), &
             "one component across an array of the type")
  tags = many(2:5:3)[right]%tag(4)
  call check(size(tags) == 2 .and. all(tags == [right * 100 + 4, right * 100 + 4]), &
             "element of an array component across a strided section")
  sync all

  ! put: a component of the right neighbour's array, an integer into a real component,
  ! and a whole value into an allocatable coarray of the type
  many(:)[right]%x = [(real(me * 1000 + i), i = 1, 5)]
  many(4)[right]%tag(1) = 7 * me
  s[right]%x = me * 3 ! integer to real on the way
  one = particle(real(me), me, real(me, 8))
  dyn(2)[right] = one
  dyn(3)[right]%tag(2:3) = [me, -me]
  sync all
  call check(all(many(:)%x == [(real(left * 1000 + i), i = 1, 5)]), "put into a component section")
  call check(many(4)%tag(1) == 7 * left .and. many(4)%tag(2) == me * 100 + 2, &
             "put into one element of an array component")
  call check(s%x == real(left * 3), "integer into a real component")
  call check(dyn(2)%x == real(left) .and. all(dyn(2)%tag == left) .and. all(dyn(2)%w == left), &
             "whole value into an allocatable coarray of the type")
  call check(all(dyn(3)%tag == [-1, left, -left, -1]) .and. dyn(1)%x == -1.0, &
             "section of a component of an allocatable coarray")
  sync all

  ! image to image: the right neighbour's value into the left neighbour's
  many(1:2)[left] = many(4:5)[right]
  sync all
  call check(many(1)%tag(1) == 7 * right .and. many(2)%x == real(right * 1000 + 5), &
             "copy between two other images")
  call co_broadcast(one, 1)
  call check(one%x == 1.0 .and. all(one%tag == 1), "co_broadcast of a derived value")
  sync all
  deallocate(dyn, xs, tags)
  call finish("caf_derived")
end program
