! module crown_checkpoint: checkpoints from Fortran over the C API (crown.h,
! docs/checkpoint.md): a coarray of module crown (crown_allocate) and a distributed array
! (1-D, in contiguous pieces: image i of n holds elements crown_checkpoint_piece gives)
! saved to one parallel HDF5 file and loaded back (the pieces under any image count),
! with integer and real metadata. Every call is collective over all images. Procedures
! take optional stat= and errmsg= like module crown's: without stat a failure stops the
! program (error stop) with the message naming the file, dataset and field.
module crown_checkpoint
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int64, real32, real64
  use crown_status, only: check
  implicit none
  private

  integer, parameter, public :: CROWN_ERR_CHECKPOINT = 6

  !> An open checkpoint file (a writer from crown_checkpoint_create, a reader from
  !> crown_checkpoint_open); crown_checkpoint_close frees it.
  type, public :: crown_checkpoint_file
    private
    type(c_ptr) :: handle = c_null_ptr
  end type

  public :: crown_checkpoint_create, crown_checkpoint_open, crown_checkpoint_commit
  public :: crown_checkpoint_close, crown_checkpoint_write_coarray, crown_checkpoint_read_coarray
  public :: crown_checkpoint_piece, crown_checkpoint_write_sharded, crown_checkpoint_read_sharded
  public :: crown_checkpoint_put, crown_checkpoint_get_int, crown_checkpoint_get_real
  public :: crown_checkpoint_newest

  interface crown_checkpoint_write_sharded
    module procedure write_sharded_r8, write_sharded_r4
  end interface
  interface crown_checkpoint_read_sharded
    module procedure read_sharded_r8, read_sharded_r4
  end interface
  interface crown_checkpoint_put
    module procedure put_int, put_real
  end interface

  integer(c_int), parameter :: c_float_type = 3, c_double_type = 4

  interface
    integer(c_int) function c_create(path, out) bind(C, name="crown_checkpoint_create")
      import :: c_int, c_char, c_ptr
      character(kind=c_char), intent(in) :: path(*)
      type(c_ptr), intent(out) :: out
    end function
    integer(c_int) function c_open(path, out) bind(C, name="crown_checkpoint_open")
      import :: c_int, c_char, c_ptr
      character(kind=c_char), intent(in) :: path(*)
      type(c_ptr), intent(out) :: out
    end function
    integer(c_int) function c_commit(c) bind(C, name="crown_checkpoint_commit")
      import :: c_int, c_ptr
      type(c_ptr), value :: c
    end function
    integer(c_int) function c_close(c) bind(C, name="crown_checkpoint_close")
      import :: c_int, c_ptr
      type(c_ptr), value :: c
    end function
    type(c_ptr) function c_coarray_of(local) bind(C, name="crown_coarray_of")
      import :: c_ptr
      type(c_ptr), value :: local
    end function
    integer(c_int) function c_write_coarray(c, name, a) bind(C, name="crown_checkpoint_write_coarray")
      import :: c_int, c_char, c_ptr
      type(c_ptr), value :: c, a
      character(kind=c_char), intent(in) :: name(*)
    end function
    integer(c_int) function c_read_coarray(c, name, a) bind(C, name="crown_checkpoint_read_coarray")
      import :: c_int, c_char, c_ptr
      type(c_ptr), value :: c, a
      character(kind=c_char), intent(in) :: name(*)
    end function
    integer(c_int) function c_piece(global, first, last) bind(C, name="crown_checkpoint_piece")
      import :: c_int, c_size_t
      integer(c_size_t), value :: global
      integer(c_size_t), intent(out) :: first, last
    end function
    integer(c_int) function c_write_sharded(c, name, type, piece, count, global) &
        bind(C, name="crown_checkpoint_write_sharded")
      import :: c_int, c_char, c_ptr, c_size_t
      type(c_ptr), value :: c, piece
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), value :: type
      integer(c_size_t), value :: count, global
    end function
    integer(c_int) function c_read_sharded(c, name, type, piece, count, global) &
        bind(C, name="crown_checkpoint_read_sharded")
      import :: c_int, c_char, c_ptr, c_size_t
      type(c_ptr), value :: c, piece
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), value :: type
      integer(c_size_t), value :: count, global
    end function
    integer(c_int) function c_put_int(c, name, v) bind(C, name="crown_checkpoint_put_int")
      import :: c_int, c_char, c_ptr, c_int64_t
      type(c_ptr), value :: c
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int64_t), value :: v
    end function
    integer(c_int) function c_get_int(c, name, v) bind(C, name="crown_checkpoint_get_int")
      import :: c_int, c_char, c_ptr, c_int64_t
      type(c_ptr), value :: c
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int64_t), intent(out) :: v
    end function
    integer(c_int) function c_put_double(c, name, v) bind(C, name="crown_checkpoint_put_double")
      import :: c_int, c_char, c_ptr, c_double
      type(c_ptr), value :: c
      character(kind=c_char), intent(in) :: name(*)
      real(c_double), value :: v
    end function
    integer(c_int) function c_get_double(c, name, v) bind(C, name="crown_checkpoint_get_double")
      import :: c_int, c_char, c_ptr, c_double
      type(c_ptr), value :: c
      character(kind=c_char), intent(in) :: name(*)
      real(c_double), intent(out) :: v
    end function
    integer(c_int) function c_newest(dir, path, size, step) bind(C, name="crown_checkpoint_newest")
      import :: c_int, c_char, c_size_t, c_int64_t
      character(kind=c_char), intent(in) :: dir(*)
      character(kind=c_char), intent(out) :: path(*)
      integer(c_size_t), value :: size
      integer(c_int64_t), intent(out) :: step
    end function
  end interface

contains

  function c_str(text) result(s)
    character(len=*), intent(in) :: text
    character(kind=c_char, len=:), allocatable :: s
    s = trim(text) // c_null_char
  end function

  subroutine crown_checkpoint_create(ck, path, stat, errmsg)
    type(crown_checkpoint_file), intent(out) :: ck
    character(len=*), intent(in) :: path
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call check(c_create(c_str(path), ck%handle), stat, errmsg)
  end subroutine

  subroutine crown_checkpoint_open(ck, path, stat, errmsg)
    type(crown_checkpoint_file), intent(out) :: ck
    character(len=*), intent(in) :: path
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call check(c_open(c_str(path), ck%handle), stat, errmsg)
  end subroutine

  !> Makes a writer's file visible under its name (fsync, rename, fsync of the directory).
  subroutine crown_checkpoint_commit(ck, stat, errmsg)
    type(crown_checkpoint_file), intent(in) :: ck
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call check(c_commit(ck%handle), stat, errmsg)
  end subroutine

  subroutine crown_checkpoint_close(ck, stat, errmsg)
    type(crown_checkpoint_file), intent(inout) :: ck
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call check(c_close(ck%handle), stat, errmsg)
    ck%handle = c_null_ptr
  end subroutine

  !> A coarray of module crown (any type and rank): pass the whole pointer crown_allocate
  !> returned.
  subroutine crown_checkpoint_write_coarray(ck, name, a, stat, errmsg)
    type(crown_checkpoint_file), intent(in) :: ck
    character(len=*), intent(in) :: name
    type(*), intent(in), target :: a(*)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call check(c_write_coarray(ck%handle, c_str(name), c_coarray_of(c_loc(a))), stat, errmsg)
  end subroutine

  subroutine crown_checkpoint_read_coarray(ck, name, a, stat, errmsg)
    type(crown_checkpoint_file), intent(in) :: ck
    character(len=*), intent(in) :: name
    type(*), intent(inout), target :: a(*)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call check(c_read_coarray(ck%handle, c_str(name), c_coarray_of(c_loc(a))), stat, errmsg)
  end subroutine

  !> This image's elements first..last (1-based) of a distributed array of `global`.
  subroutine crown_checkpoint_piece(global, first, last, stat, errmsg)
    integer(int64), intent(in) :: global
    integer(int64), intent(out) :: first, last
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    integer(c_size_t) :: b, e
    call check(c_piece(int(global, c_size_t), b, e), stat, errmsg)
    first = int(b, int64) + 1
    last = int(e, int64)
  end subroutine

  subroutine write_sharded_r8(ck, name, piece, global, stat, errmsg)
    type(crown_checkpoint_file), intent(in) :: ck
    character(len=*), intent(in) :: name
    real(real64), intent(in), target, contiguous :: piece(:)
    integer(int64), intent(in) :: global
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call check(c_write_sharded(ck%handle, c_str(name), c_double_type, c_loc(piece), &
                               int(size(piece), c_size_t), int(global, c_size_t)), stat, errmsg)
  end subroutine

  subroutine write_sharded_r4(ck, name, piece, global, stat, errmsg)
    type(crown_checkpoint_file), intent(in) :: ck
    character(len=*), intent(in) :: name
    real(real32), intent(in), target, contiguous :: piece(:)
    integer(int64), intent(in) :: global
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call check(c_write_sharded(ck%handle, c_str(name), c_float_type, c_loc(piece), &
                               int(size(piece), c_size_t), int(global, c_size_t)), stat, errmsg)
  end subroutine

  subroutine read_sharded_r8(ck, name, piece, global, stat, errmsg)
    type(crown_checkpoint_file), intent(in) :: ck
    character(len=*), intent(in) :: name
    real(real64), intent(inout), target, contiguous :: piece(:)
    integer(int64), intent(in) :: global
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call check(c_read_sharded(ck%handle, c_str(name), c_double_type, c_loc(piece), &
                              int(size(piece), c_size_t), int(global, c_size_t)), stat, errmsg)
  end subroutine

  subroutine read_sharded_r4(ck, name, piece, global, stat, errmsg)
    type(crown_checkpoint_file), intent(in) :: ck
    character(len=*), intent(in) :: name
    real(real32), intent(inout), target, contiguous :: piece(:)
    integer(int64), intent(in) :: global
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call check(c_read_sharded(ck%handle, c_str(name), c_float_type, c_loc(piece), &
                              int(size(piece), c_size_t), int(global, c_size_t)), stat, errmsg)
  end subroutine

  subroutine put_int(ck, name, value, stat, errmsg)
    type(crown_checkpoint_file), intent(in) :: ck
    character(len=*), intent(in) :: name
    integer(int64), intent(in) :: value
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call check(c_put_int(ck%handle, c_str(name), int(value, c_int64_t)), stat, errmsg)
  end subroutine

  subroutine put_real(ck, name, value, stat, errmsg)
    type(crown_checkpoint_file), intent(in) :: ck
    character(len=*), intent(in) :: name
    real(real64), intent(in) :: value
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call check(c_put_double(ck%handle, c_str(name), real(value, c_double)), stat, errmsg)
  end subroutine

  subroutine crown_checkpoint_get_int(ck, name, value, stat, errmsg)
    type(crown_checkpoint_file), intent(in) :: ck
    character(len=*), intent(in) :: name
    integer(int64), intent(out) :: value
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: v
    v = 0
    call check(c_get_int(ck%handle, c_str(name), v), stat, errmsg)
    value = int(v, int64)
  end subroutine

  subroutine crown_checkpoint_get_real(ck, name, value, stat, errmsg)
    type(crown_checkpoint_file), intent(in) :: ck
    character(len=*), intent(in) :: name
    real(real64), intent(out) :: value
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    real(c_double) :: v
    v = 0
    call check(c_get_double(ck%handle, c_str(name), v), stat, errmsg)
    value = real(v, real64)
  end subroutine

  !> The newest valid checkpoint in `dir` (step-<12 digits>.h5): its path and step, or
  !> path '' and step -1 when there is none.
  subroutine crown_checkpoint_newest(dir, path, step, stat, errmsg)
    character(len=*), intent(in) :: dir
    character(len=*), intent(out) :: path
    integer(int64), intent(out) :: step
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    character(kind=c_char) :: buffer(len(path) + 1)
    integer(c_int64_t) :: s
    integer :: i
    s = -1
    buffer = c_null_char
    call check(c_newest(c_str(dir), buffer, int(size(buffer), c_size_t), s), stat, errmsg)
    path = ''
    do i = 1, len(path)
      if (buffer(i) == c_null_char) exit
      path(i:i) = buffer(i)
    end do
    step = int(s, int64)
  end subroutine

end module crown_checkpoint
