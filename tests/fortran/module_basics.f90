! Coarrays of every type and rank: allocation, whole-block put and get around a ring,
! this_image/num_images (1-based), deallocation.
program module_basics
  use crown
  use checks
  use, intrinsic :: iso_fortran_env, only: int32, int64, real32, real64
  implicit none
  real(real64), pointer :: a1(:), a2(:,:), a3(:,:,:)
  integer(int32), pointer :: i1(:)
  integer(int64), pointer :: l2(:,:)
  real(real32), pointer :: r3(:,:,:)
  complex(real64), pointer :: z1(:)
  complex(real32), pointer :: y2(:,:)
  real(real64) :: buf2(3, 4)
  integer :: me, n, right, left, i, j
  call crown_init()
  me = crown_this_image()
  n = crown_num_images()
  right = modulo(me, n) + 1
  left = modulo(me - 2, n) + 1
  call expect(me >= 1 .and. me <= n, "this_image in 1..num_images")

  call crown_allocate(a1, [5])
  call crown_allocate(a2, [3, 4])
  call crown_allocate(a3, [2, 3, 2])
  call crown_allocate(i1, [7])
  call crown_allocate(l2, [2, 2])
  call crown_allocate(r3, [2, 2, 2])
  call crown_allocate(z1, [3])
  call crown_allocate(y2, [2, 3])
  call expect(all(shape(a2) == [3, 4]) .and. size(a3) == 12, "shapes")
  a1 = 0; a2 = 0; a3 = 0; i1 = 0; l2 = 0; r3 = 0; z1 = 0; y2 = 0
  call crown_sync_all()

  ! Every image writes its number into the right neighbour's blocks.
  call crown_put(a1, right, [(real(me * 10 + i, real64), i = 1, 5)])
  buf2 = reshape([(real(me * 100 + i, real64), i = 1, 12)], [3, 4])
  call crown_put(a2, right, buf2)
  call crown_put(a3, right, reshape([(real(me, real64), i = 1, 12)], [2, 3, 2]))
  call crown_put(i1, right, [(me + i, i = 1, 7)])
  call crown_put(l2, right, reshape([(int(me, int64) * 2_int64**40, i = 1, 4)], [2, 2]))
  call crown_put(r3, right, reshape([(real(me, real32) / 2, i = 1, 8)], [2, 2, 2]))
  call crown_put(z1, right, [(cmplx(me, -i, real64), i = 1, 3)])
  call crown_put(y2, right, reshape([(cmplx(i, me, real32), i = 1, 6)], [2, 3]))
  call crown_sync_all()
  call expect(all(a1 == [(real(left * 10 + i, real64), i = 1, 5)]), "real64 rank 1")
  do j = 1, 4
    do i = 1, 3
      call expect(a2(i, j) == real(left * 100 + i + 3 * (j - 1), real64), "real64 rank 2, column-major")
    end do
  end do
  call expect(all(a3 == real(left, real64)), "real64 rank 3")
  call expect(all(i1 == [(left + i, i = 1, 7)]), "int32")
  call expect(all(l2 == int(left, int64) * 2_int64**40), "int64 beyond 32 bits")
  call expect(all(r3 == real(left, real32) / 2), "real32")
  call expect(all(z1 == [(cmplx(left, -i, real64), i = 1, 3)]), "complex real64")
  call expect(all(y2 == reshape([(cmplx(i, left, real32), i = 1, 6)], [2, 3])), "complex real32")

  ! get: read the left neighbour's block of a2, which holds what its left wrote.
  call crown_get(a2, left, buf2)
  call expect(buf2(3, 4) == real(modulo(left - 2, n) + 1, real64) * 100 + 12, "get of a whole block")
  call crown_sync_all()

  call crown_deallocate(a1)
  call crown_deallocate(a2)
  call crown_deallocate(a3)
  call crown_deallocate(i1)
  call crown_deallocate(l2)
  call crown_deallocate(r3)
  call crown_deallocate(z1)
  call crown_deallocate(y2)
  call expect(.not. associated(a2), "deallocate nullifies")
  call finish("module_basics")
end program
