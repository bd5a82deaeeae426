! tests/fortran/caf_component_types.f90 — derived types with allocatable components of
! every kind the native coarray tests use: arrays of rank 1 and 2, a scalar, a nested
! type, an allocatable array of a type with allocatable components, a deferred-length
! character.
module component_types
  implicit none
  type :: leaf
    integer, allocatable :: k(:)
  end type
  type :: node
    integer :: tag = 0
    integer :: fixed(3) = 0
    real(8), allocatable :: a(:)
    integer, allocatable :: m(:, :)
    integer, allocatable :: s
    type(leaf) :: inner
    type(leaf), allocatable :: leaves(:)
  end type
  type :: named
    character(len=:), allocatable :: name
  end type
end module
