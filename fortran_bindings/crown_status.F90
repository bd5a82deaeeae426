! fortran_bindings/crown_status.F90 — module crown_status: how module crown and module
! crown_checkpoint report a failure of the C API (the C side's message into stat= and
! errmsg=, or error stop). Internal to libcrown_fortran: no public API of its own.
module crown_status
  use, intrinsic :: iso_c_binding
  implicit none
  private
  public :: check, fail, c_message

  interface
    type(c_ptr) function c_last_error() bind(C, name="crown_last_error")
      import :: c_ptr
    end function
    integer(c_size_t) function c_strlen(s) bind(C, name="strlen")
      import :: c_size_t, c_ptr
      type(c_ptr), value :: s
    end function
  end interface

contains

  !> The C side's message for the last failure on this thread.
  function c_message() result(text)
    character(len=:), allocatable :: text
    type(c_ptr) :: p
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    p = c_last_error()
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: text)
    do i = 1, n
      text(i:i) = chars(i)
    end do
  end function

  !> Reports a failure: into stat and errmsg when stat is present, else error stop.
  subroutine fail(code, message, stat, errmsg)
    integer, intent(in) :: code
    character(len=*), intent(in) :: message
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    if (present(errmsg)) errmsg = message
    if (present(stat)) then
      stat = code
      return
    end if
    error stop "crown: " // message
  end subroutine

  subroutine check(rc, stat, errmsg)
    integer(c_int), intent(in) :: rc
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    if (rc /= 0) then
      call fail(int(rc), c_message(), stat, errmsg)
    else if (present(stat)) then
      stat = 0
    end if
  end subroutine

end module crown_status
