! tests/fortran/checks.f90 — what every Fortran test program shares: count failed
! checks, and end with "PASS <name>" on image 1 or stop with the number of failures.
module checks
  use crown
  implicit none
  integer :: failures = 0
contains
  subroutine expect(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      failures = failures + 1
      write (*, '(a,i0,a,a)') "image ", crown_this_image(), ": FAILED ", what
    end if
  end subroutine
  subroutine finish(name)
    character(len=*), intent(in) :: name
    integer :: total(1)
    total(1) = failures
    call crown_co_sum(total)
    if (crown_this_image() == 1 .and. total(1) == 0) write (*, '(a,a)') "PASS ", name
    call crown_finalize()
    if (total(1) /= 0) error stop 1
  end subroutine
end module
