! Strided sections of 1-, 2- and 3-d coarrays, put and get, against the serial result.
program module_sections
  use crown
  use checks
  use, intrinsic :: iso_fortran_env, only: real64, int32
  implicit none
  real(real64), pointer :: a(:,:), b(:,:,:)
  integer(int32), pointer :: v(:)
  real(real64) :: expected(6, 5), part(3, 2), cube(2, 2, 2)
  integer :: me, n, right, left, i
  call crown_init()
  me = crown_this_image()
  n = crown_num_images()
  right = modulo(me, n) + 1
  left = modulo(me - 2, n) + 1
  call crown_allocate(a, [6, 5])
  call crown_allocate(b, [4, 3, 5])
  call crown_allocate(v, [10])
  a = -1
  b = -1
  v = 0
  call crown_sync_all()
  ! a(1:5:2, 2:5:3)[right] = part   (rows 1,3,5; columns 2,5)
  part = reshape([(real(me * 10 + i, real64), i = 1, 6)], [3, 2])
  call crown_put_section(a, right, [1, 2], [5, 5], [2, 3], part)
  ! b(2:3, 1:3:2, 4:5)[right] = cube, a 2 x 2 x 2 section
  cube = real(me, real64)
  call crown_put_section(b, right, [2, 1, 4], [3, 3, 5], [1, 2, 1], cube)
  call crown_put_section(v, right, [2], [10], [4], [me, me + 1, me + 2])
  call crown_sync_all()
  expected = -1
  expected(1:5:2, 2:5:3) = reshape([(real(left * 10 + i, real64), i = 1, 6)], [3, 2])
  call expect(all(a == expected), "2-d strided put")
  call expect(all(b(2:3, 1:3:2, 4:5) == real(left, real64)), "3-d section put")
  call expect(count(b == real(left, real64)) == 8, "3-d put touches nothing else")
  call expect(all(v([2, 6, 10]) == [left, left + 1, left + 2]) .and. count(v /= 0) == 3, &
              "1-d strided put")
  ! get back the right neighbour's section: what this image put there.
  part = 0
  call crown_get_section(a, right, [1, 2], [5, 5], [2, 3], part)
  call expect(all(part == reshape([(real(me * 10 + i, real64), i = 1, 6)], [3, 2])), &
              "2-d strided get")
  call crown_get_section(b, right, [3, 3, 5], [3, 3, 5], [1, 1, 1], cube(1:1, 1:1, 1:1))
  call expect(cube(1, 1, 1) == real(me, real64), "single-element section")
  call crown_sync_all()
  call finish("module_sections")
end program
