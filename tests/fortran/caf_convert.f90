! Conversions on coindexed assignment, as intrinsic assignment converts: character
! lengths (blank-padded or truncated, default and ISO 10646 kinds), complex from real
! and real from complex, logical kinds; collectives of integer(1) and integer(2), and
! co_min/co_max of ISO 10646 strings by character code. Prints "PASS caf_convert".
program caf_convert
  use caf_checks
  implicit none
  integer, parameter :: ucs4 = selected_char_kind('ISO_10646')
  character(len=10) :: s[*]
  character(len=3) :: short
  character(kind=ucs4, len=4) :: u[*], v
  complex(8) :: z(1)[*] ! not a scalar: gfortran 12 miscomputes z[i]'s offset (docs/fortran.md)
  real(8) :: r
  real(4) :: r4[*]
  integer(8) :: big
  logical(8) :: l8[*]
  logical(1) :: l1
  integer(1) :: small(2)
  integer(2) :: medium
  integer :: me, n, right, left
  me = this_image()
  n = num_images()
  right = modulo(me, n) + 1
  left = modulo(me - 2, n) + 1
  s = repeat('x', 10)
  u = ucs4_'????'
  z = (0, 0)
  l8 = .false.
  sync all
  s[right] = 'ab'
  u[right] = char(196, ucs4) ! A-umlaut
  z(1)[right] = real(me, 8) + 0.5_8
  l1 = .true.
  l8[right] = l1
  sync all
  call check(s == 'ab' .and. len_trim(s) == 2 .and. s /= 'ab' // achar(0), "a shorter string is blank-padded")
  call check(u == char(196, ucs4) // ucs4_'   ', "ISO 10646 string blank-padded")
  call check(z(1) == cmplx(left + 0.5_8, 0, 8), "real(8) into complex(8)")
  call check(logical(l8), "logical(1) into logical(8)")
  sync all
  s = 'abcdefghij'
  sync all
  short = s[right]
  call check(short == 'abc', "a longer string is truncated")
  r = z(1)[right]
  call check(r == real(me, 8) + 0.5_8, "complex(8) into real(8): the real part")
  sync all

  small = [int(me, 1), int(-me, 1)]
  call co_sum(small)
  call check(all(small == [n * (n + 1) / 2, -n * (n + 1) / 2]), "co_sum of integer(1)")
  medium = int(me * 1000, 2)
  call co_max(medium)
  call check(medium == n * 1000, "co_max of integer(2)")
  ! U+0100 sorts after U+00FF by code, not by its little-endian bytes
  v = merge(char(256, ucs4) // ucs4_'   ', char(255, ucs4) // ucs4_'   ', me == 1)
  call co_max(v)
  call check(v(1:1) == char(256, ucs4), "co_max of ISO 10646 strings by code")
  ! Between the default and ISO 10646 kinds, character by character.
  sync all
  s = repeat('x', 10)
  u = ucs4_'????'
  sync all
  u[right] = 'ab'
  s[right] = ucs4_'pq'
  sync all
  call check(u == ucs4_'ab  ', "default kind into ISO 10646")
  call check(s == 'pq', "ISO 10646 into the default kind")
  sync all
  short = u[right]
  v = s[right]
  call check(short == 'ab ' .and. v == ucs4_'pq  ', "gets between the two kinds")
  ! integer(8) into real(4) rounds once, as the local assignment does
  big = 2_8**60 + 2_8**36 + 1
  r4[right] = big
  sync all
  call check(r4 == real(big, 4), "integer(8) into real(4), rounded once")
  call finish("caf_convert")
end program
