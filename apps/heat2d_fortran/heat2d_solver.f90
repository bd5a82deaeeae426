! apps/heat2d_fortran/heat2d_solver.f90 — heat2d (apps/heat2d/problem.hpp) in native
! coarray Fortran: plain coarrays only, so it builds with any -fcoarray=lib runtime
! (libcrown_caf or OpenCoarrays). n x n cells with fixed edges (the value just outside
! the grid: 1.0 above the top row, else 0.5 left of the left column, else 0.0), all
! cells 0 at the start, and the explicit 5-point update
!   v = u + k * ((north + south) + (west + east) - 4 * u),   k = 0.2,
! evaluated in exactly that order. Compiled with -ffp-contract=off, every cell's value
! is the same for any decomposition, so the checksum (the sum of all cells in global
! row-major order) is bitwise the C++ app's.
!
! The images form a rows x cols grid, image k at (row (k-1)/cols, column mod(k-1,cols)),
! each owning a balanced block (the first mod(n,parts) blocks one larger). A block is
! stored with one halo cell on every side and rows contiguous, as in C:
! u(column, row, buffer); two buffers alternate. Each iteration puts the block's
! border rows and columns (a strided section) into the neighbours' halos, then
! `sync images` with the neighbours, then updates. setup/advance/field_checksum/teardown
! are the pieces of solve() for a driver that checkpoints between iterations
! (heat2d_checkpoint.f90): get_block/set_block read and write the owned cells.
module heat2d_solver
  use, intrinsic :: iso_fortran_env, only: real64, int64
  implicit none
  private
  public :: squarest, block_range, solve, wtime, g17, fixed
  public :: setup, advance, block_shape, get_block, set_block, field_checksum, teardown

  real(real64), parameter :: diffusion = 0.2_real64 ! k above (stable below 0.25)

  ! The field between setup() and teardown(): this image's block, both buffers.
  real(real64), allocatable :: u(:, :, :)[:]
  integer :: n_ = 0, rows_ = 0, cols_ = 0 ! the grid and the image grid
  integer :: i0 = 0, j0 = 0, r = 0, c = 0 ! this block's first row and column, its size
  integer :: north = 0, south = 0, west = 0, east = 0 ! neighbour images (0: none)
  integer :: north_rows = 0, west_cols = 0 ! the north and west neighbours' block sizes
  integer :: neighbours(4) = 0, count = 0

contains

  !> The squarest rows x cols with rows * cols = images (rows <= cols).
  subroutine squarest(images, rows, cols)
    integer, intent(in) :: images
    integer, intent(out) :: rows, cols
    integer :: r
    rows = 1
    do r = 1, images
      if (r * r > images) exit
      if (mod(images, r) == 0) rows = r
    end do
    cols = images / rows
  end subroutine squarest

  !> Block k (from 0) of n cells split into `parts`: first cell lo (from 0) and size.
  subroutine block_range(n, parts, k, lo, size)
    integer, intent(in) :: n, parts, k
    integer, intent(out) :: lo, size
    size = n / parts
    lo = k * size + min(k, mod(n, parts))
    if (k < mod(n, parts)) size = size + 1
  end subroutine block_range

  !> Seconds since an arbitrary start.
  function wtime() result(t)
    real(real64) :: t
    integer(int64) :: count, rate
    call system_clock(count, rate)
    t = real(count, real64) / real(rate, real64)
  end function wtime

  !> The fixed value just outside the grid at row i, column j (from 0).
  pure function edge_value(i, j) result(v)
    integer, intent(in) :: i, j
    real(real64) :: v
    if (i < 0) then
      v = 1.0_real64
    else if (j < 0) then
      v = 0.5_real64
    else
      v = 0.0_real64
    end if
  end function edge_value

  !> One step on an r x c block (halo included in the bounds): v = u + k * (...).
  subroutine update(u, v, c, r)
    integer, intent(in) :: c, r
    real(real64), contiguous, intent(in) :: u(0:, 0:)
    real(real64), contiguous, intent(inout) :: v(0:, 0:)
    integer :: i, j
    do i = 1, r
      do j = 1, c
        v(j, i) = u(j, i) + diffusion * ((u(j, i - 1) + u(j, i + 1)) + (u(j - 1, i) + u(j + 1, i)) &
                                         - 4.0_real64 * u(j, i))
      end do
    end do
  end subroutine update

  !> Collective over all images, which must number rows * cols, with n >= rows and
  !> n >= cols: allocates this image's block (both buffers, fixed edges set, cells 0)
  !> and works out its neighbours. teardown() frees it.
  subroutine setup(n, rows, cols)
    integer, intent(in) :: n, rows, cols
    integer :: me, rmax, cmax, i, j, b, k

    n_ = n
    rows_ = rows
    cols_ = cols
    me = this_image()
    call block_range(n, rows, (me - 1) / cols, i0, r)
    call block_range(n, cols, mod(me - 1, cols), j0, c)
    rmax = (n + rows - 1) / rows
    cmax = (n + cols - 1) / cols
    allocate (u(0:cmax + 1, 0:rmax + 1, 0:1)[*])
    do b = 0, 1
      do i = 0, rmax + 1
        do j = 0, cmax + 1
          if (i0 + i - 1 < 0 .or. j0 + j - 1 < 0 .or. i0 + i - 1 >= n .or. j0 + j - 1 >= n) then
            u(j, i, b) = edge_value(i0 + i - 1, j0 + j - 1)
          else
            u(j, i, b) = 0.0_real64
          end if
        end do
      end do
    end do
    north = 0
    south = 0
    west = 0
    east = 0
    count = 0
    if ((me - 1) / cols > 0) then
      north = me - cols
      call block_range(n, rows, (me - 1) / cols - 1, k, north_rows)
      count = count + 1
      neighbours(count) = north
    end if
    if ((me - 1) / cols < rows - 1) then
      south = me + cols
      count = count + 1
      neighbours(count) = south
    end if
    if (mod(me - 1, cols) > 0) then
      west = me - 1
      call block_range(n, cols, mod(me - 1, cols) - 1, k, west_cols)
      count = count + 1
      neighbours(count) = west
    end if
    if (mod(me - 1, cols) < cols - 1) then
      east = me + 1
      count = count + 1
      neighbours(count) = east
    end if
  end subroutine setup

  !> Collective: iterations first .. last - 1 (the field after iteration `it` is in
  !> buffer mod(it, 2)).
  subroutine advance(first, last)
    integer, intent(in) :: first, last
    integer :: it, cur
    do it = first, last - 1
      cur = mod(it, 2)
      if (north > 0) u(1:c, north_rows + 1, cur)[north] = u(1:c, 1, cur)
      if (south > 0) u(1:c, 0, cur)[south] = u(1:c, r, cur)
      if (west > 0) u(west_cols + 1, 1:r, cur)[west] = u(1, 1:r, cur)
      if (east > 0) u(0, 1:r, cur)[east] = u(c, 1:r, cur)
      if (count > 0) sync images (neighbours(1:count))
      call update(u(:, :, cur), u(:, :, 1 - cur), c, r)
    end do
  end subroutine advance

  !> This image's block: rows x cols cells, the first at row i0, column j0 (from 0).
  subroutine block_shape(rows, cols, first_row, first_col)
    integer, intent(out) :: rows, cols, first_row, first_col
    rows = r
    cols = c
    first_row = i0
    first_col = j0
  end subroutine block_shape

  !> The owned cells after `iterations` iterations, block(column, row) (local).
  subroutine get_block(iterations, block)
    integer, intent(in) :: iterations
    real(real64), intent(out) :: block(:, :)
    block = u(1:c, 1:r, mod(iterations, 2))
  end subroutine get_block

  !> Sets the owned cells as they are after `iterations` iterations (local; a
  !> synchronisation follows before any image reads them: the next advance's).
  subroutine set_block(iterations, block)
    integer, intent(in) :: iterations
    real(real64), intent(in) :: block(:, :)
    u(1:c, 1:r, mod(iterations, 2)) = block
  end subroutine set_block

  !> Collective: the sum of all cells after `iterations` iterations, in global row-major
  !> order, on every image (image 1 gathers the blocks).
  function field_checksum(iterations) result(checksum)
    integer, intent(in) :: iterations
    real(real64) :: checksum
    real(real64), allocatable :: field(:, :)
    integer :: cur, k, ki0, kj0, kr, kc, i, j
    cur = mod(iterations, 2)
    sync all
    checksum = 0.0_real64
    if (this_image() == 1) then
      allocate (field(n_, n_)) ! field(column, row)
      do k = 1, num_images()
        call block_range(n_, rows_, (k - 1) / cols_, ki0, kr)
        call block_range(n_, cols_, mod(k - 1, cols_), kj0, kc)
        field(kj0 + 1:kj0 + kc, ki0 + 1:ki0 + kr) = u(1:kc, 1:kr, cur)[k]
      end do
      do i = 1, n_
        do j = 1, n_
          checksum = checksum + field(j, i)
        end do
      end do
    end if
    call co_broadcast(checksum, source_image=1)
  end function field_checksum

  !> Collective: frees the block.
  subroutine teardown()
    sync all ! image 1 may still be reading the blocks
    deallocate (u)
  end subroutine teardown

  !> Collective over all images, which must number rows * cols, with n >= rows and
  !> n >= cols. Returns the slowest image's seconds for the iterations and, on every
  !> image, the checksum.
  subroutine solve(n, iterations, rows, cols, seconds, checksum)
    integer, intent(in) :: n, iterations, rows, cols
    real(real64), intent(out) :: seconds, checksum
    call setup(n, rows, cols)
    sync all
    seconds = wtime()
    call advance(0, iterations)
    seconds = wtime() - seconds
    call co_max(seconds)
    checksum = field_checksum(iterations)
    call teardown()
  end subroutine solve

  !> x as C's printf("%.17g") writes it (finite x): 17 significant digits, trailing
  !> zeros dropped, an exponent only below 1e-4 or from 1e17.
  function g17(x) result(text)
    real(real64), intent(in) :: x
    character(:), allocatable :: text
    character(40) :: buffer
    character(17) :: digits
    character(:), allocatable :: minus
    integer :: e, at, last
    write (buffer, '(es25.16e3)') x
    buffer = adjustl(buffer)
    minus = ''
    if (buffer(1:1) == '-') then
      minus = '-'
      buffer = buffer(2:)
    end if
    at = index(buffer, 'E')
    if (at /= 19) then ! Infinity or NaN
      text = trim(buffer)
      return
    end if
    digits = buffer(1:1)//buffer(3:18)
    read (buffer(at + 1:), *) e
    last = len_trim(digits)
    do while (last > 1 .and. digits(last:last) == '0')
      last = last - 1
    end do
    if (e >= -4 .and. e < 17) then
      if (e < 0) then
        text = minus//'0.'//repeat('0', -e - 1)//digits(1:last)
      else if (last <= e + 1) then
        text = minus//digits(1:last)//repeat('0', e + 1 - last)
      else
        text = minus//digits(1:e + 1)//'.'//digits(e + 2:last)
      end if
    else
      text = digits(1:1)
      if (last > 1) text = text//'.'//digits(2:last)
      write (buffer, '(i0.2)') abs(e)
      text = minus//text//merge('e-', 'e+', e < 0)//trim(adjustl(buffer))
    end if
  end function g17

  !> x >= 0 with `places` decimals, as C's "%.<places>f" writes it.
  function fixed(x, places) result(text)
    real(real64), intent(in) :: x
    integer, intent(in) :: places
    character(:), allocatable :: text
    character(40) :: buffer, form
    write (form, '(a,i0,a)') '(f0.', places, ')'
    write (buffer, form) x
    text = trim(adjustl(buffer))
    if (text(1:1) == '.') text = '0'//text
  end function fixed

end module heat2d_solver
