! A collective that some images leave early (the others than result_image of co_reduce,
! the source and inner nodes of co_broadcast), then END PROGRAM: an image that enters
! the collective after one of them has stopped must count the stopped image's part
! instead of failing with "image N has stopped". Run with "reduce" or "broadcast", many
! times (CMakeLists: repeated runs), since it is a race. Prints "PASS caf_collective_race".
program caf_collective_race
  implicit none
  integer :: f, v(3), i
  character(len=16) :: how
  call get_command_argument(1, how)
  select case (how)
  case ("reduce") ! n! in image order, on image 1 only
    f = this_image()
    call co_reduce(f, multiply, result_image=1)
    if (this_image() == 1 .and. f /= product([(i, i = 1, num_images())])) &
      error stop "co_reduce: wrong factorial"
  case ("broadcast")
    v = [this_image(), 2, 3] * merge(7, 0, this_image() == 1)
    call co_broadcast(v, 1)
    if (any(v /= [7, 14, 21])) error stop "co_broadcast: wrong values"
  case default
    error stop "run with reduce or broadcast"
  end select
  if (this_image() == 1) print '(a)', "PASS caf_collective_race"
contains
  pure integer function multiply(a, b)
    integer, intent(in) :: a, b
    multiply = a * b
  end function
end program
