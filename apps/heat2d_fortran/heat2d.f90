! heat2d_fortran: apps/heat2d in native coarray Fortran (heat2d_solver.f90), for
! libcrown_caf (gfortran -fcoarray=lib) and OpenCoarrays (caf) alike.
!   mpirun -np 4 crown-heat2d-fortran [--n 1024] [--iterations 100] [--mesh 2x2]
!                                     [--checkpoint-every N] [--checkpoint-dir DIR]
!                                     [--keep N] [--resume]
! Prints the throughput in million lattice updates per second and `checksum <sum>`
! (as C's %.17g), the sum of all cells in global row-major order: bitwise the same for
! any image count and grid, and the same as heat2d's (the C++ app). The checkpoint
! options are crown-heat2d's (heat2d_checkpoint.f90: a file per image, resumed at the same
! image count and mesh); with --checkpoint-every, SIGTERM or SIGUSR1 makes every image
! checkpoint after the iteration they agree on and stop with 75 (crown::stop_exit_status);
! --resume continues there, with the uninterrupted run's checksum to the last bit.
program heat2d_fortran
  use, intrinsic :: iso_fortran_env, only: real64, int64, error_unit
  use heat2d_solver, only: squarest, g17, fixed
  use heat2d_checkpoint, only: checkpointing, run, install_stop_signals, stop_signal_name, &
                               stop_exit_status
  implicit none
  integer :: n = 1024, iterations = 100, rows = 0, cols = 0, i, x, count, first, stopped
  logical :: ok, signals
  type(checkpointing), save :: ck
  ! Static (save): -fcoarray=lib finalises after the program's frame has gone, where
  ! LeakSanitizer would report an allocation held there.
  character(:), allocatable, save :: option, value, signal
  real(real64) :: seconds, checksum, updates

  ck%dir = 'heat2d-fortran-checkpoints'
  count = command_argument_count()
  i = 1
  do while (i <= count)
    option = argument(i)
    value = ''
    if (i < count) value = argument(i + 1)
    select case (option)
    case ('--n')
      n = number(option, value)
    case ('--iterations')
      iterations = number(option, value)
    case ('--mesh')
      x = index(value, 'x')
      ok = x >= 2 .and. x < len(value) .and. len(value) <= 19
      if (ok) ok = verify(value(1:x - 1), '0123456789') == 0 .and. & ! .and. does not
                   verify(value(x + 1:), '0123456789') == 0 ! short-circuit: checked apart
      if (.not. ok) call usage('--mesh needs ROWSxCOLS, e.g. 2x2', 2)
      rows = number(option, value(1:x - 1))
      cols = number(option, value(x + 1:))
    case ('--checkpoint-every')
      ck%every = number(option, value)
    case ('--keep')
      ck%keep = number(option, value)
    case ('--checkpoint-dir')
      if (len(value) == 0) call usage('--checkpoint-dir needs a directory', 2)
      ck%dir = value
    case ('--resume')
      ck%resume = .true.
      i = i - 1 ! no value
    case default
      call usage('unknown option '//option, 2)
    end select
    i = i + 2
  end do
  if (rows == 0) call squarest(num_images(), rows, cols)
  if (rows * cols /= num_images()) call usage('mesh '//str(rows)//'x'//str(cols)//' for ' &
                                              //str(num_images())//' images', 1)
  if (n < rows .or. n < cols) call usage('grid '//str(n)//' x '//str(n)//' too small for a ' &
                                         //str(rows)//'x'//str(cols)//' mesh (every image needs' &
                                         //' at least one row and one column)', 1)

  signals = ck%every > 0 ! stop signals need somewhere to checkpoint
  if (signals) then
    if (.not. install_stop_signals()) stop 2, quiet=.true.
  end if

  call run(n, iterations, rows, cols, ck, signals, first, stopped, seconds, checksum)
  if (stopped > 0) then
    if (this_image() == 1) then
      signal = stop_signal_name()
      if (signal == 'none') signal = 'a stop signal on another image'
      write (*, '(a)') 'heat2d_fortran: '//signal//': checkpointed after iteration '// &
        str(stopped)//' in '//ck%dir//'; stopping (exit '//str(stop_exit_status)// &
        '), --resume continues'
    end if
    stop stop_exit_status, quiet=.true.
  end if
  if (this_image() == 1) then
    updates = real(n, real64) * real(n, real64) * real(iterations - first, real64)
    write (*, '(a)') 'heat2d '//str(n)//' x '//str(n)//', '//str(iterations)// &
      ' iterations on a '//str(rows)//'x'//str(cols)//' mesh of images'
    write (*, '(a)') 'time '//fixed(seconds, 4)//' s, '//fixed(updates / seconds / 1e6_real64, 1) &
      //' MLUP/s'
    write (*, '(a)') 'checksum '//g17(checksum)
  end if

contains

  function argument(k) result(text)
    integer, intent(in) :: k
    character(:), allocatable :: text
    integer :: length
    call get_command_argument(k, length=length)
    allocate (character(length) :: text)
    call get_command_argument(k, text)
  end function argument

  function str(k) result(text)
    integer, intent(in) :: k
    character(:), allocatable :: text
    character(16) :: buffer
    write (buffer, '(i0)') k
    text = trim(buffer)
  end function str

  !> A whole number from 1 to huge(0), or usage.
  integer function number(flag, text)
    character(*), intent(in) :: flag, text
    integer(int64) :: v
    integer :: status
    v = 0
    status = 1
    if (len(text) >= 1 .and. len(text) <= 10 .and. verify(text, '0123456789') == 0) &
      read (text, *, iostat=status) v
    if (status /= 0 .or. v < 1 .or. v > huge(0)) &
      call usage(flag//' needs a number from 1 to '//str(huge(0)), 2)
    number = int(v)
  end function number

  !> Every image takes this path (the options are the same everywhere); image 1 says why.
  subroutine usage(problem, code)
    character(*), intent(in) :: problem
    integer, intent(in) :: code
    character(256) :: program
    if (this_image() == 1) then
      call get_command_argument(0, program)
      write (error_unit, '(a)') 'heat2d_fortran: '//problem
      write (error_unit, '(a)') 'usage: mpirun -np P '//trim(program)// &
        ' [--n N] [--iterations K] [--mesh RxC] [--checkpoint-every N]'// &
        ' [--checkpoint-dir DIR] [--keep N] [--resume]'
    end if
    if (code == 1) stop 1, quiet=.true.
    stop 2, quiet=.true.
  end subroutine usage

end program heat2d_fortran
