! apps/heat2d_fortran/heat2d_checkpoint.f90 — crown-heat2d-fortran's driver with
! checkpoints and stop signals (heat2d_solver's setup/advance/field_checksum around them).
!
! Checkpoints: every `every` iterations each image writes its owned cells to its own file,
! DIR/heat2d-<iteration, 12 digits>.<image, 5 digits>, unformatted stream: a header
! (magic, version, n, rows, cols, images, image, iteration, block rows, block columns),
! the cells, the magic again; written as <file>.tmp and renamed, so a file under its
! final name is whole. Once every image has renamed its file, image 1 commits the
! checkpoint: DIR/latest (written as latest.tmp, renamed) lists the newest `keep`
! iterations; each image then deletes its file of the one that dropped out. --resume reads
! the newest iteration in DIR/latest (none: from the start) at the same n, image count
! and mesh (per-image files: another image count is refused, naming the image and file).
!
! Stop signals: SIGTERM and SIGUSR1 set a flag (crown::stop_signals through the C shim
! stop_signals.cpp: Fortran has no signal handling); after every iteration the images
! agree on it (co_max), so every image checkpoints after the same iteration and the
! program stops with 75 (crown::stop_exit_status). CROWN_STOP_GRACE applies as in C++: a
! signalled image that does not reach agreement in time (a peer died) ends by the signal.
module heat2d_checkpoint
  use, intrinsic :: iso_c_binding, only: c_int, c_char, c_null_char
  use, intrinsic :: iso_fortran_env, only: real64, int64, error_unit
  use heat2d_solver, only: setup, advance, block_shape, get_block, set_block, field_checksum, &
                           teardown, wtime
  implicit none
  private
  public :: checkpointing, run, install_stop_signals, stop_signal_name

  integer, parameter, public :: stop_exit_status = 75 ! crown::stop_exit_status (EX_TEMPFAIL)
  integer(int64), parameter :: magic = 4848415432444350_int64, version = 1

  type, public :: checkpointing
    integer :: every = 0 ! 0: none
    character(:), allocatable :: dir
    logical :: resume = .false.
    integer :: keep = 2
  end type

  ! The committed checkpoints' iterations, oldest first (the same on every image).
  integer, allocatable, save :: committed(:)

  interface
    integer(c_int) function c_stop_install() bind(C, name='heat2d_stop_install')
      import :: c_int
    end function
    integer(c_int) function c_stop_received() bind(C, name='heat2d_stop_received')
      import :: c_int
    end function
    subroutine c_stop_signal_name(out, size) bind(C, name='heat2d_stop_signal_name')
      import :: c_int, c_char
      character(kind=c_char), intent(out) :: out(*)
      integer(c_int), value :: size
    end subroutine
    subroutine c_stop_done() bind(C, name='heat2d_stop_done')
    end subroutine
    subroutine c_stop_pause(on) bind(C, name='heat2d_stop_pause')
      import :: c_int
      integer(c_int), value :: on
    end subroutine
    integer(c_int) function c_mkdir(path, mode) bind(C, name='mkdir')
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: path(*)
      integer(c_int), value :: mode
    end function
    integer(c_int) function c_rename(from, to) bind(C, name='rename')
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: from(*), to(*)
    end function
  end interface

contains

  !> Installs the SIGTERM/SIGUSR1 handlers; false (after saying why) on a bad
  !> CROWN_STOP_GRACE.
  logical function install_stop_signals()
    install_stop_signals = c_stop_install() == 0
  end function install_stop_signals

  !> This image's stop signal: 'SIGTERM', 'SIGUSR1' or 'none'.
  function stop_signal_name() result(name)
    character(:), allocatable :: name
    character(kind=c_char) :: buffer(16)
    integer :: i
    call c_stop_signal_name(buffer, 16_c_int)
    name = ''
    do i = 1, 16
      if (buffer(i) == ' ') exit
      name = name//buffer(i)
    end do
  end function stop_signal_name

  !> Collective: n x n cells, `iterations` iterations on a rows x cols image grid, with
  !> the checkpoints `ck` asks for and, with `signals`, stop signals. stopped > 0: left
  !> on a stop signal after that many iterations, checkpointed (no checksum); first: the
  !> iteration the run started from; seconds: the slowest image's.
  subroutine run(n, iterations, rows, cols, ck, signals, first, stopped, seconds, checksum)
    integer, intent(in) :: n, iterations, rows, cols
    type(checkpointing), intent(in) :: ck
    logical, intent(in) :: signals
    integer, intent(out) :: first, stopped
    real(real64), intent(out) :: seconds, checksum
    integer :: it, flag
    logical :: due, last

    call setup(n, rows, cols)
    committed = [integer ::]
    first = 0
    if (ck%resume) first = resume(ck, n, rows, cols)
    if (ck%every > 0 .and. this_image() == 1) call make_directory(ck%dir)
    stopped = 0
    sync all
    seconds = wtime()
    do it = first, iterations - 1
      call advance(it, it + 1)
      last = it + 1 == iterations
      due = ck%every > 0 .and. mod(it + 1, max(ck%every, 1)) == 0 .and. .not. last
      if (due) then ! a checkpoint may take long: the stop deadline waits meanwhile
        if (signals) call c_stop_pause(1_c_int)
        call save(ck, it + 1, n, rows, cols)
        if (signals) call c_stop_pause(0_c_int)
      end if
      if (signals .and. .not. last) then
        flag = c_stop_received()
        call co_max(flag)
        if (flag /= 0) then ! every image stops after this iteration
          call c_stop_done()
          if (.not. due) call save(ck, it + 1, n, rows, cols)
          stopped = it + 1
          exit
        end if
      end if
    end do
    if (signals .and. stopped == 0) call c_stop_done() ! the gather and output: no deadline
    seconds = wtime() - seconds
    call co_max(seconds)
    checksum = 0.0_real64
    if (stopped == 0) checksum = field_checksum(iterations)
    call teardown()
  end subroutine run

  !> DIR/heat2d-<iteration>.<image>
  function file_name(dir, iteration, image) result(path)
    character(*), intent(in) :: dir
    integer, intent(in) :: iteration, image
    character(:), allocatable :: path
    character(32) :: buffer
    write (buffer, '(a,i12.12,a,i5.5)') 'heat2d-', iteration, '.', image
    path = dir//'/'//trim(buffer)
  end function file_name

  !> mkdir -p (errors show when the files are written).
  subroutine make_directory(dir)
    character(*), intent(in) :: dir
    integer :: i
    integer(c_int) :: rc
    do i = 2, len(dir)
      if (dir(i:i) == '/') rc = c_mkdir(dir(1:i - 1)//c_null_char, int(o'777', c_int))
    end do
    rc = c_mkdir(dir//c_null_char, int(o'777', c_int))
  end subroutine make_directory

  !> Collective: ok on every image, or every image stops (1) after the images where it
  !> is not have said why.
  subroutine agree(ok, message)
    logical, intent(in) :: ok
    character(*), intent(in) :: message
    integer :: bad
    bad = merge(0, 1, ok)
    call co_max(bad)
    if (bad == 0) return
    if (.not. ok) write (error_unit, '(a,i0,a)') 'heat2d_fortran: image ', this_image(), ': '// &
      message
    stop 1, quiet=.true.
  end subroutine agree

  !> Collective: writes and commits the checkpoint after `iteration`.
  subroutine save(ck, iteration, n, rows, cols)
    type(checkpointing), intent(in) :: ck
    integer, intent(in) :: iteration, n, rows, cols
    real(real64), allocatable :: block(:, :)
    character(:), allocatable :: path
    character(256) :: message
    integer :: r, c, i0, j0, unit, status, k
    integer, allocatable :: dropped(:)

    call block_shape(r, c, i0, j0)
    allocate (block(c, r))
    call get_block(iteration, block)
    path = file_name(ck%dir, iteration, this_image())
    message = ''
    open (newunit=unit, file=path//'.tmp', access='stream', form='unformatted', &
          status='replace', action='write', iostat=status, iomsg=message)
    if (status == 0) then
      write (unit, iostat=status, iomsg=message) magic, version, int(n, int64), &
        int(rows, int64), int(cols, int64), int(num_images(), int64), &
        int(this_image(), int64), int(iteration, int64), int(r, int64), int(c, int64), block, magic
      if (status == 0) then
        close (unit, iostat=status, iomsg=message)
      else
        close (unit)
      end if
    end if
    if (status == 0 .and. c_rename(path//'.tmp'//c_null_char, path//c_null_char) /= 0) then
      status = 1
      message = 'rename to its final name failed'
    end if
    call agree(status == 0, 'cannot write '//path//'.tmp: '//trim(message))
    sync all ! every image's file is whole under its final name: commit
    committed = [committed, iteration]
    k = max(size(committed) - ck%keep, 0) ! the oldest k drop out
    dropped = committed(1:k)
    committed = committed(k + 1:)
    if (this_image() == 1) call write_latest(ck%dir, committed)
    sync all ! latest no longer names the dropped checkpoints
    do k = 1, size(dropped)
      open (newunit=unit, file=file_name(ck%dir, dropped(k), this_image()), status='old', &
            iostat=status)
      if (status == 0) close (unit, status='delete')
    end do
  end subroutine save

  !> DIR/latest: the committed iterations, oldest first (written whole, then renamed).
  subroutine write_latest(dir, iterations)
    character(*), intent(in) :: dir
    integer, intent(in) :: iterations(:)
    integer :: unit, status, i
    character(256) :: message
    message = ''
    open (newunit=unit, file=dir//'/latest.tmp', status='replace', action='write', &
          iostat=status, iomsg=message)
    if (status == 0) then
      write (unit, '(i0)', iostat=status, iomsg=message) size(iterations)
      do i = 1, size(iterations)
        if (status == 0) write (unit, '(i0)', iostat=status, iomsg=message) iterations(i)
      end do
      close (unit)
    end if
    if (status == 0 .and. c_rename(dir//'/latest.tmp'//c_null_char, &
                                   dir//'/latest'//c_null_char) /= 0) status = 1
    if (status /= 0) then ! image 1 alone: the others are past their last collective
      write (error_unit, '(a)') 'heat2d_fortran: image 1: cannot write '//dir//'/latest: '// &
        trim(message)
      error stop 1
    end if
  end subroutine write_latest

  !> Collective: reads the newest committed checkpoint into the field; its iteration, or
  !> 0 when DIR/latest does not exist.
  integer function resume(ck, n, rows, cols)
    type(checkpointing), intent(in) :: ck
    integer, intent(in) :: n, rows, cols
    integer :: count, unit, status, r, c, i0, j0
    integer(int64) :: header(10), trailer
    integer, allocatable :: iterations(:)
    real(real64), allocatable :: block(:, :)
    character(:), allocatable :: path
    character(512) :: message
    logical :: found, ok, opened

    count = 0
    if (this_image() == 1) then
      inquire (file=ck%dir//'/latest', exist=found)
      if (found) then
        open (newunit=unit, file=ck%dir//'/latest', status='old', action='read', iostat=status)
        if (status == 0) read (unit, *, iostat=status) count
        if (status == 0 .and. count > 0) then
          allocate (iterations(count))
          read (unit, *, iostat=status) iterations
        end if
        if (status /= 0) count = -1
        close (unit)
      end if
    end if
    call co_broadcast(count, source_image=1)
    call agree(count >= 0, ck%dir//'/latest is unreadable')
    resume = 0
    if (count == 0) return
    if (.not. allocated(iterations)) allocate (iterations(count))
    call co_broadcast(iterations, source_image=1)
    resume = iterations(count)
    committed = iterations

    call block_shape(r, c, i0, j0)
    allocate (block(c, r))
    path = file_name(ck%dir, resume, this_image())
    message = ''
    open (newunit=unit, file=path, access='stream', form='unformatted', status='old', &
          action='read', iostat=status, iomsg=message)
    ok = status == 0
    opened = ok
    if (ok) then
      read (unit, iostat=status, iomsg=message) header
      ok = status == 0
      if (ok) ok = header(1) == magic .and. header(2) == version
      if (.not. ok) message = 'not a heat2d_fortran checkpoint (version 1)'
    end if
    if (ok) then
      ok = header(3) == n .and. header(4) == rows .and. header(5) == cols .and. &
           header(6) == num_images() .and. header(7) == this_image() .and. header(8) == resume &
           .and. header(9) == r .and. header(10) == c
      if (.not. ok) write (message, '(a,4(i0,a),i0,a,3(i0,a),i0,a)') 'written for n = ', &
        header(3), ' on a ', header(4), 'x', header(5), ' mesh of ', header(6), &
        ' images (image ', header(7), '), not n = ', n, ' on ', rows, 'x', cols, ' of ', &
        num_images(), ' (resume at the n, image count and mesh that wrote it)'
    end if
    if (ok) then
      read (unit, iostat=status, iomsg=message) block, trailer
      ok = status == 0
      if (ok) ok = trailer == magic
      if (.not. ok .and. status == 0) message = 'its end marker is wrong'
    end if
    if (opened) close (unit)
    call agree(ok, '--resume: '//path//': '//trim(message))
    call set_block(resume, block)
    if (this_image() == 1) write (*, '(a,i0)') 'resumed from '//file_name(ck%dir, resume, 1)// &
      ' at iteration ', resume
  end function resume

end module heat2d_checkpoint
