! co_sum, co_min, co_max and co_broadcast for every type, into every image and into
! one, scalars and arrays.
program module_collectives
  use crown
  use checks
  use, intrinsic :: iso_fortran_env, only: int32, int64, real32, real64
  implicit none
  integer(int32) :: i4(3), s4
  integer(int64) :: i8(2)
  real(real32) :: r4(2)
  real(real64) :: r8(4), x
  complex(real64) :: z(2)
  complex(real32) :: y(1)
  integer :: me, n
  call crown_init()
  me = crown_this_image()
  n = crown_num_images()
  i4 = [me, -me, 1]
  call crown_co_sum(i4)
  call expect(all(i4 == [n * (n + 1) / 2, -n * (n + 1) / 2, n]), "co_sum int32")
  s4 = me
  call crown_co_max(s4)
  call expect(s4 == n, "co_max of a scalar")
  i8 = [int(me, int64) * 2_int64**33, int(me, int64)]
  call crown_co_min(i8)
  call expect(all(i8 == [2_int64**33, 1_int64]), "co_min int64")
  r4 = [real(me, real32), -real(me, real32)]
  call crown_co_max(r4)
  call expect(all(r4 == [real(n, real32), -1.0_real32]), "co_max real32")
  r8 = real(me, real64) / 4
  call crown_co_sum(r8, result_image=n)
  if (me == n) then
    call expect(all(r8 == real(n * (n + 1), real64) / 8), "co_sum real64 into one image")
  else
    call expect(all(r8 == real(me, real64) / 4), "others keep their data")
  end if
  z = [cmplx(me, 1, real64), cmplx(0, me, real64)]
  call crown_co_sum(z)
  call expect(all(z == [cmplx(n * (n + 1) / 2, n, real64), cmplx(0, n * (n + 1) / 2, real64)]), &
              "co_sum complex")
  y = cmplx(me, me, real32)
  call crown_co_broadcast(y, n)
  call expect(y(1) == cmplx(n, n, real32), "co_broadcast complex real32")
  x = real(me, real64)
  call crown_co_broadcast(x, 1)
  call expect(x == 1.0_real64, "co_broadcast of a scalar")
  call finish("module_collectives")
end program
