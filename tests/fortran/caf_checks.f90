! tests/fortran/caf_checks.f90 — what the native coarray test programs share: count
! failed checks, and end with "PASS <name>" on image 1 or error stop.
module caf_checks
  implicit none
  integer :: failures = 0
contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      failures = failures + 1
      print '(a,i0,a,a)', "image ", this_image(), ": FAILED ", what
    end if
  end subroutine
  subroutine finish(name)
    character(len=*), intent(in) :: name
    integer :: total
    total = failures
    call co_sum(total)
    if (this_image() == 1 .and. total == 0) print '(a,a)', "PASS ", name
    if (total /= 0) error stop 1
  end subroutine
end module
