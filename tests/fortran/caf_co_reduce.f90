! co_reduce with user operations compiled every way gfortran passes them: integer
! arrays by reference, real(8) by value, complex, character (the result by reference,
! hidden lengths), a derived type returned in memory; into all images and into one.
! Also co_min/co_max of character strings. Prints "PASS caf_co_reduce" on image 1.
module reductions
  implicit none
  type :: stats ! 24 bytes: returned through a hidden pointer
    integer(8) :: count
    real(8) :: total, largest
  end type
contains
  pure integer function add(a, b)
    integer, intent(in) :: a, b
    add = a + b
  end function
  pure real(8) function keep_left(a, b) ! associative, not commutative: order shows
    real(8), value :: a, b
    keep_left = a + 0 * b
  end function
  pure complex(8) function multiply(a, b)
    complex(8), intent(in) :: a, b
    multiply = a * b
  end function
  pure function longer(a, b) result(c)
    character(len=5), intent(in) :: a, b
    character(len=5) :: c
    c = merge(a, b, len_trim(a) >= len_trim(b))
  end function
  pure function merge_stats(a, b) result(c)
    type(stats), intent(in) :: a, b
    type(stats) :: c
    c = stats(a%count + b%count, a%total + b%total, max(a%largest, b%largest))
  end function
  pure integer(8) function concat_digits(a, b) ! image order: 1 then 2 then 3 ...
    integer(8), intent(in) :: a, b
    concat_digits = a * 10 + b
  end function
end module

program caf_co_reduce
  use caf_checks
  use reductions
  implicit none
  integer :: v(3), me, n, i
  integer(8) :: digits, expected_digits
  real(8) :: first
  complex(8) :: z
  character(len=5) :: word, low, high
  type(stats) :: s
  me = this_image()
  n = num_images()

  v = [me, 2 * me, -me]
  call co_reduce(v, add)
  call check(all(v == [n * (n + 1) / 2, n * (n + 1), -n * (n + 1) / 2]), "integer array by reference")

  first = real(me, 8)
  call co_reduce(first, keep_left)
  call check(first == 1.0_8, "real(8) by value, image order")

  z = cmplx(0, 1, 8) ! i**n
  call co_reduce(z, multiply)
  call check(abs(z - cmplx(0, 1, 8)**n) < 1e-12_8, "complex")

  word = repeat("x", min(me, 5))
  call co_reduce(word, longer)
  call check(word == repeat("x", min(n, 5)), "character, result by reference")

  s = stats(1, real(me, 8), real(me, 8))
  call co_reduce(s, merge_stats)
  call check(s%count == n .and. s%total == real(n * (n + 1) / 2, 8) .and. s%largest == real(n, 8), &
             "derived type of 24 bytes")

  digits = me
  expected_digits = 0
  do i = 1, n
    expected_digits = expected_digits * 10 + i
  end do
  call co_reduce(digits, concat_digits, result_image=n)
  if (me == n) call check(digits == expected_digits, "result_image gets the ordered result")
  if (me /= n .and. n > 1) call check(digits == me, "other images keep their value")

  low = achar(iachar("a") + me - 1) // "zz"
  high = low
  call co_min(low)
  call co_max(high)
  call check(low == "azz" .and. high == achar(iachar("a") + n - 1) // "zz", "co_min/co_max of strings")
  call finish("caf_co_reduce")
end program
