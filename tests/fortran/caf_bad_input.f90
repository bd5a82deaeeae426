! Bad input with STAT=: an allocation whose size differs between images fails on every
! image with a message naming the images and sizes; a coindexed section beyond an
! allocatable coarray's bounds stops the job with the index and bounds (see
! CMakeLists: run with an argument). Prints "PASS caf_bad_input" on image 1.
program caf_bad_input
  use caf_checks
  implicit none
  integer, allocatable :: a(:)[:], c(:)
  integer :: st, lo, right
  character(len=200) :: msg
  right = modulo(this_image(), num_images()) + 1
  msg = ""
  allocate(a(10 + merge(1, 0, this_image() == num_images() .and. num_images() > 1))[*], &
           stat=st, errmsg=msg)
  if (num_images() > 1) then
    call check(st /= 0, "a mismatched allocation fails")
    call check(index(msg, "here but") > 0, "the message names sizes and rank: " // trim(msg))
    if (allocated(a)) deallocate(a)
  else
    call check(st == 0, "one image allocates alone")
  end if
  call finish("caf_bad_input")
  if (command_argument_count() > 0) then ! out of bounds: the job ends with the message
    allocate(a(10)[*])
    lo = 0
    c = a(lo:3)[right]
  end if
end program
