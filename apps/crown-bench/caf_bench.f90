! crown-caf-bench: native coarray Fortran figures for `crown-bench fortran`. The same
! source is built twice, against libcrown_caf (crown-caf-bench) and against
! OpenCoarrays (crown-caf-bench-opencoarrays); scripts/bench-fortran runs both and
! crown-bench prints them side by side.
!   mpirun -np 2 crown-caf-bench [--smoke]
! Image 1 drives the one-sided figures into image 2; collectives, the transpose and
! heat2d run on every image. Prints one line per figure, `caf,op,bytes,unit,value`,
! each the median of 11 batches (3 with --smoke): us per operation, GB/s, MB/s (the
! transpose, counted as the PRK counts) or MLUP/s; and heat2d's checksum
! (`caf,heat2d_checksum,n,sum,<%.17g>`), which must be bitwise the same everywhere.
program crown_caf_bench
  use, intrinsic :: iso_fortran_env, only: real64, int64, error_unit, output_unit
  use heat2d_solver, only: squarest, solve, wtime, g17
  implicit none
  integer :: batches = 11, k
  logical :: smoke = .false.
  character(64) :: arg
  integer(int64), parameter :: kib = 1024, mib = 1024 * 1024

  do k = 1, command_argument_count()
    call get_command_argument(k, arg)
    if (arg == '--smoke') then
      smoke = .true.
      batches = 3
    else
      if (this_image() == 1) write (error_unit, '(a)') 'crown-caf-bench: unknown option ' &
        //trim(arg)//'; usage: mpirun -np 2 crown-caf-bench [--smoke]'
      stop 2, quiet=.true.
    end if
  end do
  if (num_images() /= 2) then
    if (this_image() == 1) write (error_unit, '(a)') 'crown-caf-bench: run it on exactly 2 images'
    stop 2, quiet=.true.
  end if

  call contiguous([4 * kib, 64 * kib, mib, 32 * mib])
  call latency()
  call strided(merge(256, 1024, smoke))
  call collectives([8_int64, 8 * mib])
  call transpose(merge(256, 1024, smoke), 2)
  call heat2d(merge(256, 2048, smoke), merge(10, 50, smoke))

contains

  !> One figure, from image 1.
  subroutine emit(op, bytes, unit, value)
    character(*), intent(in) :: op, unit
    integer(int64), intent(in) :: bytes
    real(real64), intent(in) :: value
    character(32) :: b, v
    write (b, '(i0)') bytes
    write (v, '(es12.5)') value
    write (*, '(a)') 'caf,'//op//','//trim(b)//','//unit//','//trim(adjustl(v))
    flush (output_unit)
  end subroutine emit

  !> The median of t (sorted in place), as crown-bench takes it.
  real(real64) function median(t)
    real(real64), intent(inout) :: t(:)
    integer :: i, j
    real(real64) :: x
    do i = 2, size(t)
      x = t(i)
      j = i - 1
      do while (j >= 1)
        if (t(j) <= x) exit
        t(j + 1) = t(j)
        j = j - 1
      end do
      t(j + 1) = x
    end do
    median = t(size(t) / 2 + 1)
  end function median

  !> Operations per batch for a transfer of `bytes`: about 256 MiB per batch (8 MiB
  !> smoke), 4 to 5000 (200 smoke), as crown-bench's ops_for.
  integer function ops_for(bytes)
    integer(int64), intent(in) :: bytes
    integer(int64) :: budget
    budget = merge(8 * mib, 256 * mib, smoke)
    ops_for = int(min(max(budget / max(bytes, 1_int64), 4_int64), merge(200_int64, 5000_int64, smoke)))
  end function ops_for

  !> put_bw and get_bw: a(1:m)[2] = b(1:m) and b(1:m) = a(1:m)[2], each batch ended by
  !> `sync memory` (its transfers complete).
  subroutine contiguous(sizes)
    integer(int64), intent(in) :: sizes(:)
    real(real64), allocatable :: a(:)[:], b(:)
    real(real64) :: t(batches), t0
    integer :: s, i, j, m, ops, written
    integer(int64) :: bytes
    m = int(maxval(sizes) / 8)
    written = int(maxval(sizes, mask=.not. (smoke .and. sizes > mib)) / 8)
    allocate (a(m)[*], b(m))
    a = 0 ! the puts write 1s, which the gets then read back
    b = 1
    sync all
    if (this_image() == 1) then
      do s = 1, size(sizes)
        bytes = sizes(s)
        if (smoke .and. bytes > mib) cycle
        m = int(bytes / 8)
        ops = ops_for(bytes)
        a(1:m)[2] = b(1:m)
        do j = 1, batches
          t0 = wtime()
          do i = 1, ops
            a(1:m)[2] = b(1:m)
          end do
          sync memory
          t(j) = (wtime() - t0) / ops
        end do
        call emit('put_bw', bytes, 'GB/s', real(bytes, real64) / median(t) / 1e9_real64)
        b(1:m) = -1
        b(1:m) = a(1:m)[2]
        do j = 1, batches
          t0 = wtime()
          do i = 1, ops
            b(1:m) = a(1:m)[2]
          end do
          sync memory
          t(j) = (wtime() - t0) / ops
        end do
        call emit('get_bw', bytes, 'GB/s', real(bytes, real64) / median(t) / 1e9_real64)
        if (any(b(1:m) /= 1)) error stop 'crown-caf-bench: get_bw read wrong data'
        b(1:m) = 1
      end do
    end if
    sync all
    if (this_image() == 2 .and. (any(a(1:written) /= 1) .or. any(a(written + 1:) /= 0))) &
      error stop 'crown-caf-bench: put_bw wrote wrong data'
    deallocate (a)
  end subroutine contiguous

  !> put_latency and get_latency (8 bytes: a(1)[2] = x, x = a(1)[2]) and sync_all.
  subroutine latency()
    real(real64), allocatable :: a(:)[:]
    real(real64) :: t(batches), t0, x
    integer :: i, j, ops
    allocate (a(1)[*])
    a = 0
    ops = merge(200, 5000, smoke)
    x = 0
    sync all
    if (this_image() == 1) then
      a(1)[2] = x
      do j = 1, batches
        t0 = wtime()
        do i = 1, ops
          x = x + 1
          a(1)[2] = x
        end do
        sync memory
        t(j) = (wtime() - t0) / ops
      end do
      call emit('put_latency', 8_int64, 'us', median(t) * 1e6_real64)
      x = -1 ! the gets must bring the last value put back
      x = a(1)[2]
      do j = 1, batches
        t0 = wtime()
        do i = 1, ops
          x = a(1)[2]
        end do
        t(j) = (wtime() - t0) / ops
      end do
      call emit('get_latency', 8_int64, 'us', median(t) * 1e6_real64)
      if (x /= real(batches * ops, real64)) error stop 'crown-caf-bench: get_latency read wrong data'
    end if
    sync all
    do j = 1, batches
      t0 = wtime()
      do i = 1, ops
        sync all
      end do
      t(j) = (wtime() - t0) / ops
    end do
    if (this_image() == 1) call emit('sync_all', 0_int64, 'us', median(t) * 1e6_real64)
    deallocate (a)
  end subroutine latency

  !> strided_put_bw and strided_get_bw: every other element of every column of an
  !> n x n array, a(1:n:2, :)[2] = b(1:n:2, :) and back; bytes counts what moves. Four
  !> transfers per batch (OpenCoarrays moves such sections one element at a time).
  subroutine strided(n)
    integer, intent(in) :: n
    real(real64), allocatable :: a(:, :)[:], b(:, :)
    real(real64) :: t(batches), t0
    integer :: i, j, ops
    integer(int64) :: bytes
    allocate (a(n, n)[*], b(n, n))
    a = 0
    b = 1
    bytes = int(n / 2, int64) * n * 8
    ops = 4
    sync all
    if (this_image() == 1) then
      a(1:n:2, :)[2] = b(1:n:2, :)
      do j = 1, batches
        t0 = wtime()
        do i = 1, ops
          a(1:n:2, :)[2] = b(1:n:2, :)
        end do
        sync memory
        t(j) = (wtime() - t0) / ops
      end do
      call emit('strided_put_bw', bytes, 'GB/s', real(bytes, real64) / median(t) / 1e9_real64)
      b = 2
      b(1:n:2, :) = a(1:n:2, :)[2]
      do j = 1, batches
        t0 = wtime()
        do i = 1, ops
          b(1:n:2, :) = a(1:n:2, :)[2]
        end do
        sync memory
        t(j) = (wtime() - t0) / ops
      end do
      call emit('strided_get_bw', bytes, 'GB/s', real(bytes, real64) / median(t) / 1e9_real64)
      if (any(b(1:n:2, :) /= 1) .or. any(b(2:n:2, :) /= 2)) &
        error stop 'crown-caf-bench: strided_get_bw read wrong data'
    end if
    sync all
    if (this_image() == 2) then
      if (any(a(1:n:2, :) /= 1) .or. any(a(2:n:2, :) /= 0)) &
        error stop 'crown-caf-bench: strided_put_bw wrote wrong data'
    end if
    deallocate (a)
  end subroutine strided

  !> co_sum of one double (as many calls per batch as a latency) and of a million (4).
  subroutine collectives(sizes)
    integer(int64), intent(in) :: sizes(:)
    real(real64), allocatable :: v(:)
    real(real64) :: t(batches), t0
    integer :: s, i, j, m, ops
    do s = 1, size(sizes)
      m = int(sizes(s) / 8)
      allocate (v(m))
      v = 0
      ops = merge(4, merge(200, 5000, smoke), m > 1)
      call co_sum(v)
      do j = 1, batches
        sync all
        t0 = wtime()
        do i = 1, ops
          call co_sum(v)
        end do
        t(j) = (wtime() - t0) / ops
      end do
      if (this_image() == 1) call emit('co_sum', sizes(s), 'us', median(t) * 1e6_real64)
      v = 1
      call co_sum(v)
      if (any(v /= num_images())) error stop 'crown-caf-bench: co_sum gave a wrong sum'
      deallocate (v)
    end do
  end subroutine collectives

  !> The Parallel Research Kernels' transpose, B += A^T then A += 1, the PRK coarray
  !> way: A and B split by columns; each image gets from every image (itself too) the
  !> block of A whose rows are its columns, a strided get, and adds its transpose.
  !> Validated against the closed form; MB/s with 2 x 8 x order^2 bytes per iteration.
  subroutine transpose(order, iterations)
    integer, intent(in) :: order, iterations
    integer, parameter :: tile = 32
    real(real64), allocatable :: a(:, :)[:], b(:, :), work(:, :)
    real(real64) :: t(batches), t0, error, done
    integer :: me, np, cb, q, phase, i, j, it, ii, jt, batch, col
    me = this_image() - 1
    np = num_images()
    if (mod(order, np) /= 0) error stop 'crown-caf-bench: transpose order not divisible by images'
    cb = order / np
    allocate (a(order, cb)[*], b(order, cb), work(cb, cb))
    do j = 1, cb
      do i = 1, order
        a(i, j) = real(me * cb + j - 1, real64) * order + (i - 1)
      end do
    end do
    b = 0
    done = 0
    do batch = 0, batches ! batch 0 warms up
      sync all
      t0 = wtime()
      do it = 1, iterations
        sync all ! A is complete
        do phase = 0, np - 1
          q = mod(me + phase, np)
          work = a(me * cb + 1:(me + 1) * cb, 1:cb)[q + 1]
          do jt = 1, cb, tile
            do ii = 1, cb, tile
              do j = jt, min(cb, jt + tile - 1)
                do i = ii, min(cb, ii + tile - 1)
                  b(q * cb + i, j) = b(q * cb + i, j) + work(j, i)
                end do
              end do
            end do
          end do
        end do
        sync all ! nobody reads A any more
        a = a + 1
      end do
      if (batch > 0) t(batch) = (wtime() - t0) / iterations
      done = done + iterations
    end do
    ! B(I, J) = k * A0(J, I) + k (k - 1) / 2 after k iterations, A0(I, J) = (J-1) order + I-1.
    error = 0
    do j = 1, cb
      col = me * cb + j
      do i = 1, order
        error = error + abs(b(i, j) - (done * (real(i - 1, real64) * order + (col - 1)) &
                                       + done * (done - 1) / 2))
      end do
    end do
    call co_sum(error)
    if (error > 1e-8_real64) error stop 'crown-caf-bench: transpose does not validate'
    if (this_image() == 1) call emit('transpose', int(order, int64), 'MB/s', &
                                     2 * 8 * real(order, real64)**2 / median(t) / 1e6_real64)
    deallocate (a)
  end subroutine transpose

  !> heat2d_fortran's solver, n x n cells, `iterations` steps per batch.
  subroutine heat2d(n, iterations)
    integer, intent(in) :: n, iterations
    real(real64) :: t(batches), seconds, checksum
    integer :: rows, cols, j
    call squarest(num_images(), rows, cols)
    call solve(n, iterations, rows, cols, seconds, checksum)
    do j = 1, batches
      call solve(n, iterations, rows, cols, seconds, checksum)
      t(j) = seconds
    end do
    if (this_image() == 1) then
      call emit('heat2d', int(n, int64), 'MLUP/s', &
                real(n, real64)**2 * iterations / median(t) / 1e6_real64)
      write (*, '(a,i0,a)') 'caf,heat2d_checksum,', n, ',sum,'//g17(checksum)
    end if
  end subroutine heat2d

end program crown_caf_bench
