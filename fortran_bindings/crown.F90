! fortran_bindings/crown.F90 — module crown: Crown from Fortran, over the C API
! (include/crown/crown.h). Images are numbered from 1, as in Fortran; coarrays are
! pointers to this image's block, column-major, of int32, int64, real32, real64 or
! complex kinds, rank 1 to 3.
!
! Every procedure that can fail takes optional stat= and errmsg=: with stat present a
! failure sets it (non-zero) and errmsg, without it the program stops with the message
! (error stop), naming the image and the values.
module crown
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int32, int64, real32, real64
  use crown_status, only: check, fail, c_message
  implicit none
  private

  integer, parameter, public :: CROWN_OK = 0, CROWN_ERR_ARGUMENT = 1, CROWN_ERR_STATE = 2, &
                                CROWN_ERR_MPI = 3, CROWN_ERR_OTHER = 4, CROWN_ERR_RESOURCE = 5
  integer, parameter, public :: crown_atomic_define = 1, crown_atomic_ref = 2, &
                                crown_atomic_add = 3, crown_atomic_and = 4, crown_atomic_or = 5, &
                                crown_atomic_xor = 6, crown_atomic_cas = 7

  !> A counter on every image (crown_event_create, _post, _wait, _query, _free).
  type, public :: crown_event
    private
    type(c_ptr) :: handle = c_null_ptr
  end type
  !> One lock per image (crown_lock_create, _acquire, _release, _free).
  type, public :: crown_lock
    private
    type(c_ptr) :: handle = c_null_ptr
  end type

  public :: crown_init, crown_finalize, crown_this_image, crown_num_images
  public :: crown_allocate, crown_deallocate, crown_put, crown_get
  public :: crown_put_section, crown_get_section
  public :: crown_sync_all, crown_sync_images, crown_sync_memory
  public :: crown_event_create, crown_event_free, crown_event_post, crown_event_wait
  public :: crown_event_query
  public :: crown_lock_create, crown_lock_free, crown_lock_acquire, crown_lock_release
  public :: crown_atomic, crown_co_sum, crown_co_min, crown_co_max, crown_co_broadcast

  interface crown_allocate
    module procedure &
      crown_allocate_i4_1, crown_allocate_i4_2, crown_allocate_i4_3,&
      crown_allocate_i8_1, crown_allocate_i8_2, crown_allocate_i8_3,&
      crown_allocate_r4_1, crown_allocate_r4_2, crown_allocate_r4_3,&
      crown_allocate_r8_1, crown_allocate_r8_2, crown_allocate_r8_3,&
      crown_allocate_c4_1, crown_allocate_c4_2, crown_allocate_c4_3,&
      crown_allocate_c8_1, crown_allocate_c8_2, crown_allocate_c8_3
  end interface
  interface crown_deallocate
    module procedure &
      crown_deallocate_i4_1, crown_deallocate_i4_2, crown_deallocate_i4_3,&
      crown_deallocate_i8_1, crown_deallocate_i8_2, crown_deallocate_i8_3,&
      crown_deallocate_r4_1, crown_deallocate_r4_2, crown_deallocate_r4_3,&
      crown_deallocate_r8_1, crown_deallocate_r8_2, crown_deallocate_r8_3,&
      crown_deallocate_c4_1, crown_deallocate_c4_2, crown_deallocate_c4_3,&
      crown_deallocate_c8_1, crown_deallocate_c8_2, crown_deallocate_c8_3
  end interface
  interface crown_put
    module procedure crown_put_i4, crown_put_i8, crown_put_r4, crown_put_r8, crown_put_c4, &
                     crown_put_c8
  end interface
  interface crown_get
    module procedure crown_get_i4, crown_get_i8, crown_get_r4, crown_get_r8, crown_get_c4, &
                     crown_get_c8
  end interface
  interface crown_put_section
    module procedure crown_put_section_i4, crown_put_section_i8, crown_put_section_r4, &
                     crown_put_section_r8, crown_put_section_c4, crown_put_section_c8
  end interface
  interface crown_get_section
    module procedure crown_get_section_i4, crown_get_section_i8, crown_get_section_r4, &
                     crown_get_section_r8, crown_get_section_c4, crown_get_section_c8
  end interface
  interface crown_co_sum
    module procedure crown_co_sum_i4, crown_co_sum_i8, crown_co_sum_r4, crown_co_sum_r8, &
                     crown_co_sum_c4, crown_co_sum_c8
  end interface
  interface crown_co_broadcast
    module procedure crown_co_broadcast_i4, crown_co_broadcast_i8, crown_co_broadcast_r4, &
                     crown_co_broadcast_r8, crown_co_broadcast_c4, crown_co_broadcast_c8
  end interface
  interface crown_co_min
    module procedure crown_co_min_i4, crown_co_min_i8, crown_co_min_r4, crown_co_min_r8
  end interface
  interface crown_co_max
    module procedure crown_co_max_i4, crown_co_max_i8, crown_co_max_r4, crown_co_max_r8
  end interface
  interface crown_atomic
    module procedure crown_atomic_i4, crown_atomic_i8
  end interface

  ! The C API.
  interface
    integer(c_int) function c_init(argc, argv) bind(C, name="crown_init")
      import :: c_int, c_ptr
      type(c_ptr), value :: argc, argv
    end function
    integer(c_int) function c_finalize() bind(C, name="crown_finalize")
      import :: c_int
    end function
    integer(c_int) function c_this_image() bind(C, name="crown_this_image")
      import :: c_int
    end function
    integer(c_int) function c_num_images() bind(C, name="crown_num_images")
      import :: c_int
    end function
    integer(c_int) function c_coarray_allocate(type, rank, extents, out, local) &
        bind(C, name="crown_coarray_allocate")
      import :: c_int, c_size_t, c_ptr
      integer(c_int), value :: type, rank
      integer(c_size_t), intent(in) :: extents(*)
      type(c_ptr), intent(out) :: out, local
    end function
    integer(c_int) function c_coarray_free(a) bind(C, name="crown_coarray_free")
      import :: c_int, c_ptr
      type(c_ptr), value :: a
    end function
    type(c_ptr) function c_coarray_of(local) bind(C, name="crown_coarray_of")
      import :: c_ptr
      type(c_ptr), value :: local
    end function
    integer(c_size_t) function c_coarray_elements(a) bind(C, name="crown_coarray_elements")
      import :: c_size_t, c_ptr
      type(c_ptr), value :: a
    end function
    integer(c_int) function c_put(a, image, src) bind(C, name="crown_put")
      import :: c_int, c_ptr
      type(c_ptr), value :: a, src
      integer(c_int), value :: image
    end function
    integer(c_int) function c_get(a, image, dst) bind(C, name="crown_get")
      import :: c_int, c_ptr
      type(c_ptr), value :: a, dst
      integer(c_int), value :: image
    end function
    integer(c_int) function c_put_section(a, image, b, e, s, src) &
        bind(C, name="crown_put_section")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: a, src
      integer(c_int), value :: image
      integer(c_size_t), intent(in) :: b(*), e(*), s(*)
    end function
    integer(c_int) function c_get_section(a, image, b, e, s, dst) &
        bind(C, name="crown_get_section")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: a, dst
      integer(c_int), value :: image
      integer(c_size_t), intent(in) :: b(*), e(*), s(*)
    end function
    integer(c_int) function c_sync_all() bind(C, name="crown_sync_all")
      import :: c_int
    end function
    integer(c_int) function c_sync_images(images, count) bind(C, name="crown_sync_images")
      import :: c_int
      integer(c_int), intent(in) :: images(*)
      integer(c_int), value :: count
    end function
    integer(c_int) function c_sync_memory() bind(C, name="crown_sync_memory")
      import :: c_int
    end function
    integer(c_int) function c_event_create(out) bind(C, name="crown_event_create")
      import :: c_int, c_ptr
      type(c_ptr), intent(out) :: out
    end function
    integer(c_int) function c_event_free(e) bind(C, name="crown_event_free")
      import :: c_int, c_ptr
      type(c_ptr), value :: e
    end function
    integer(c_int) function c_event_post(e, image) bind(C, name="crown_event_post")
      import :: c_int, c_ptr
      type(c_ptr), value :: e
      integer(c_int), value :: image
    end function
    integer(c_int) function c_event_wait(e, until) bind(C, name="crown_event_wait")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: e
      integer(c_int64_t), value :: until
    end function
    integer(c_int) function c_event_query(e, count) bind(C, name="crown_event_query")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: e
      integer(c_int64_t), intent(out) :: count
    end function
    integer(c_int) function c_lock_create(out) bind(C, name="crown_lock_create")
      import :: c_int, c_ptr
      type(c_ptr), intent(out) :: out
    end function
    integer(c_int) function c_lock_free(l) bind(C, name="crown_lock_free")
      import :: c_int, c_ptr
      type(c_ptr), value :: l
    end function
    integer(c_int) function c_lock_acquire(l, image) bind(C, name="crown_lock_acquire")
      import :: c_int, c_ptr
      type(c_ptr), value :: l
      integer(c_int), value :: image
    end function
    integer(c_int) function c_lock_release(l, image) bind(C, name="crown_lock_release")
      import :: c_int, c_ptr
      type(c_ptr), value :: l
      integer(c_int), value :: image
    end function
    integer(c_int) function c_atomic(a, image, element, op, value, compare, old) &
        bind(C, name="crown_atomic")
      import :: c_int, c_ptr, c_size_t, c_int64_t
      type(c_ptr), value :: a
      integer(c_int), value :: image, op
      integer(c_size_t), value :: element
      integer(c_int64_t), value :: value, compare
      integer(c_int64_t), intent(out) :: old
    end function
    integer(c_int) function c_co_sum(type, data, count, image) bind(C, name="crown_co_sum")
      import :: c_int, c_ptr, c_size_t
      integer(c_int), value :: type, image
      type(c_ptr), value :: data
      integer(c_size_t), value :: count
    end function
    integer(c_int) function c_co_min(type, data, count, image) bind(C, name="crown_co_min")
      import :: c_int, c_ptr, c_size_t
      integer(c_int), value :: type, image
      type(c_ptr), value :: data
      integer(c_size_t), value :: count
    end function
    integer(c_int) function c_co_max(type, data, count, image) bind(C, name="crown_co_max")
      import :: c_int, c_ptr, c_size_t
      integer(c_int), value :: type, image
      type(c_ptr), value :: data
      integer(c_size_t), value :: count
    end function
    integer(c_int) function c_co_broadcast(type, data, count, image) &
        bind(C, name="crown_co_broadcast")
      import :: c_int, c_ptr, c_size_t
      integer(c_int), value :: type, image
      type(c_ptr), value :: data
      integer(c_size_t), value :: count
    end function
  end interface

contains

  ! ------------------------------------------------------------------ errors


  function str(i) result(text)
    integer, intent(in) :: i
    character(len=:), allocatable :: text
    character(len=24) :: buffer
    write (buffer, '(i0)') i
    text = trim(buffer)
  end function



  !> The coarray whose block starts at `first`, or a failure naming `what`.
  logical function find(first, handle, what, stat, errmsg)
    type(c_ptr), intent(in) :: first
    type(c_ptr), intent(out) :: handle
    character(len=*), intent(in) :: what
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    handle = c_null_ptr
    if (c_associated(first)) handle = c_coarray_of(first)
    find = c_associated(handle)
    if (.not. find) call fail(CROWN_ERR_ARGUMENT, what // ": the array is not a coarray from " // &
                              "crown_allocate (pass the whole pointer it returned)", stat, errmsg)
  end function

  logical function same_size(handle, n, what, stat, errmsg)
    type(c_ptr), intent(in) :: handle
    integer, intent(in) :: n
    character(len=*), intent(in) :: what
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    same_size = int(c_coarray_elements(handle)) == n
    if (.not. same_size) call fail(CROWN_ERR_ARGUMENT, what // ": " // str(n) // &
                                   " elements given for a block of " // &
                                   str(int(c_coarray_elements(handle))), stat, errmsg)
  end function

  !> Fortran bounds (1-based, inclusive, column-major) to C's (0-based, half-open,
  !> row-major), checking that the buffer holds as many elements as the section.
  logical function to_section(r, lower, upper, stride, n, b, e, s, what, stat, errmsg)
    integer, intent(in) :: r, lower(:), upper(:), stride(:), n
    integer(c_size_t), intent(out) :: b(3), e(3), s(3)
    character(len=*), intent(in) :: what
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    integer :: d, count
    to_section = .false.
    if (size(lower) /= r .or. size(upper) /= r .or. size(stride) /= r) then
      call fail(CROWN_ERR_ARGUMENT, what // ": bounds for " // str(size(lower)) // &
                " dimensions on a rank-" // str(r) // " coarray", stat, errmsg)
      return
    end if
    count = 1
    do d = 1, r
      if (lower(d) < 1 .or. stride(d) < 1) then
        call fail(CROWN_ERR_ARGUMENT, what // ": dimension " // str(d) // " lower bound " // &
                  str(lower(d)) // ", stride " // str(stride(d)) // " (both must be >= 1)", &
                  stat, errmsg)
        return
      end if
      count = count * max(0, (upper(d) - lower(d)) / stride(d) + 1)
      b(r - d + 1) = int(lower(d) - 1, c_size_t)
      e(r - d + 1) = int(max(upper(d), lower(d) - 1), c_size_t)
      s(r - d + 1) = int(stride(d), c_size_t)
    end do
    if (count /= n) then
      call fail(CROWN_ERR_ARGUMENT, what // ": the section has " // str(count) // &
                " elements, the buffer " // str(n), stat, errmsg)
      return
    end if
    to_section = .true.
  end function

  !> A column-major index (1-based) as a linear element number (0-based).
  logical function linear_index(extents, index, element, stat, errmsg)
    integer, intent(in) :: extents(:), index(:)
    integer(c_size_t), intent(out) :: element
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    integer :: d
    linear_index = .false.
    if (size(index) /= size(extents)) then
      call fail(CROWN_ERR_ARGUMENT, "crown_atomic: an index of " // str(size(index)) // &
                " subscripts for a rank-" // str(size(extents)) // " coarray", stat, errmsg)
      return
    end if
    element = 0
    do d = size(extents), 1, -1
      if (index(d) < 1 .or. index(d) > extents(d)) then
        call fail(CROWN_ERR_ARGUMENT, "crown_atomic: subscript " // str(index(d)) // &
                  " of dimension " // str(d) // " outside 1:" // str(extents(d)), stat, errmsg)
        return
      end if
      element = element * int(extents(d), c_size_t) + int(index(d) - 1, c_size_t)
    end do
    linear_index = .true.
  end function

  !> Allocates a coarray block of `shape` (column-major: C gets the extents reversed).
  integer function allocate_block(code, shape, local) result(rc)
    integer(c_int), intent(in) :: code
    integer, intent(in) :: shape(:)
    type(c_ptr), intent(out) :: local
    integer(c_size_t) :: extents(3)
    type(c_ptr) :: handle
    integer :: d
    do d = 1, size(shape)
      extents(size(shape) - d + 1) = int(shape(d), c_size_t)
    end do
    rc = int(c_coarray_allocate(code, int(size(shape), c_int), extents, handle, local))
  end function

  !> Fortran image numbers run from 1 to num_images.
  logical function valid_image(image, what, stat, errmsg)
    integer, intent(in) :: image
    character(len=*), intent(in) :: what
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    valid_image = image >= 1 .and. image <= crown_num_images()
    if (.not. valid_image) call fail(CROWN_ERR_ARGUMENT, what // " on image " // str(image) // &
                                     ": image out of range 1:" // str(crown_num_images()), &
                                     stat, errmsg)
  end function

  integer(c_int) function target_image(image)
    integer, intent(in), optional :: image
    target_image = -1
    if (present(image)) target_image = int(image - 1, c_int)
  end function

  ! ------------------------------------------------------------------ runtime

  !> Starts Crown (and MPI unless the program initialised it already).
  subroutine crown_init(stat, errmsg)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call check(c_init(c_null_ptr, c_null_ptr), stat, errmsg)
  end subroutine

  subroutine crown_finalize(stat, errmsg)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call check(c_finalize(), stat, errmsg)
  end subroutine

  integer function crown_this_image()
    crown_this_image = int(c_this_image()) + 1
  end function

  integer function crown_num_images()
    crown_num_images = int(c_num_images())
  end function

  ! ------------------------------------------------------------------ image control

  subroutine crown_sync_all(stat, errmsg)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call check(c_sync_all(), stat, errmsg)
  end subroutine

  !> Pairwise with every image in `images` (1-based).
  subroutine crown_sync_images(images, stat, errmsg)
    integer, intent(in) :: images(:)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    integer(c_int) :: zero_based(max(1, size(images)))
    zero_based(1:size(images)) = int(images - 1, c_int)
    call check(c_sync_images(zero_based, int(size(images), c_int)), stat, errmsg)
  end subroutine

  subroutine crown_sync_memory(stat, errmsg)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call check(c_sync_memory(), stat, errmsg)
  end subroutine

  subroutine crown_event_create(e, stat, errmsg)
    type(crown_event), intent(out) :: e
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call check(c_event_create(e%handle), stat, errmsg)
  end subroutine
  subroutine crown_event_free(e, stat, errmsg)
    type(crown_event), intent(inout) :: e
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call check(c_event_free(e%handle), stat, errmsg)
    e%handle = c_null_ptr
  end subroutine
  subroutine crown_event_post(e, image, stat, errmsg)
    type(crown_event), intent(in) :: e
    integer, intent(in) :: image
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    if (.not. valid_image(image, "crown_event_post", stat, errmsg)) return
    call check(c_event_post(e%handle, int(image - 1, c_int)), stat, errmsg)
  end subroutine
  subroutine crown_event_wait(e, until_count, stat, errmsg)
    type(crown_event), intent(in) :: e
    integer, intent(in), optional :: until_count
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: until
    until = 1
    if (present(until_count)) until = int(until_count, c_int64_t)
    call check(c_event_wait(e%handle, until), stat, errmsg)
  end subroutine
  integer function crown_event_query(e, stat, errmsg)
    type(crown_event), intent(in) :: e
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: count
    count = 0
    call check(c_event_query(e%handle, count), stat, errmsg)
    crown_event_query = int(count)
  end function

  subroutine crown_lock_create(l, stat, errmsg)
    type(crown_lock), intent(out) :: l
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call check(c_lock_create(l%handle), stat, errmsg)
  end subroutine
  subroutine crown_lock_free(l, stat, errmsg)
    type(crown_lock), intent(inout) :: l
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call check(c_lock_free(l%handle), stat, errmsg)
    l%handle = c_null_ptr
  end subroutine
  subroutine crown_lock_acquire(l, image, stat, errmsg)
    type(crown_lock), intent(in) :: l
    integer, intent(in) :: image
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    if (.not. valid_image(image, "crown_lock_acquire", stat, errmsg)) return
    call check(c_lock_acquire(l%handle, int(image - 1, c_int)), stat, errmsg)
  end subroutine
  subroutine crown_lock_release(l, image, stat, errmsg)
    type(crown_lock), intent(in) :: l
    integer, intent(in) :: image
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    if (.not. valid_image(image, "crown_lock_release", stat, errmsg)) return
    call check(c_lock_release(l%handle, int(image - 1, c_int)), stat, errmsg)
  end subroutine

  ! ------------------------------------------------------------------ per type

#define N(name) name/**/i4
#define ELEM integer(int32)
#define CODE 1_c_int
#include "crown_typed.inc"
#define DIMS (:)
#define RANK 1
#define NR(name) name/**/i4/**/_1
#include "crown_rank.inc"
#undef DIMS
#undef RANK
#undef NR
#define DIMS (:,:)
#define RANK 2
#define NR(name) name/**/i4/**/_2
#include "crown_rank.inc"
#undef DIMS
#undef RANK
#undef NR
#define DIMS (:,:,:)
#define RANK 3
#define NR(name) name/**/i4/**/_3
#include "crown_rank.inc"
#undef DIMS
#undef RANK
#undef NR
#include "crown_ordered.inc"
#include "crown_atomic.inc"
#undef N
#undef ELEM
#undef CODE
#define N(name) name/**/i8
#define ELEM integer(int64)
#define CODE 2_c_int
#include "crown_typed.inc"
#define DIMS (:)
#define RANK 1
#define NR(name) name/**/i8/**/_1
#include "crown_rank.inc"
#undef DIMS
#undef RANK
#undef NR
#define DIMS (:,:)
#define RANK 2
#define NR(name) name/**/i8/**/_2
#include "crown_rank.inc"
#undef DIMS
#undef RANK
#undef NR
#define DIMS (:,:,:)
#define RANK 3
#define NR(name) name/**/i8/**/_3
#include "crown_rank.inc"
#undef DIMS
#undef RANK
#undef NR
#include "crown_ordered.inc"
#include "crown_atomic.inc"
#undef N
#undef ELEM
#undef CODE
#define N(name) name/**/r4
#define ELEM real(real32)
#define CODE 3_c_int
#include "crown_typed.inc"
#define DIMS (:)
#define RANK 1
#define NR(name) name/**/r4/**/_1
#include "crown_rank.inc"
#undef DIMS
#undef RANK
#undef NR
#define DIMS (:,:)
#define RANK 2
#define NR(name) name/**/r4/**/_2
#include "crown_rank.inc"
#undef DIMS
#undef RANK
#undef NR
#define DIMS (:,:,:)
#define RANK 3
#define NR(name) name/**/r4/**/_3
#include "crown_rank.inc"
#undef DIMS
#undef RANK
#undef NR
#include "crown_ordered.inc"
#undef N
#undef ELEM
#undef CODE
#define N(name) name/**/r8
#define ELEM real(real64)
#define CODE 4_c_int
#include "crown_typed.inc"
#define DIMS (:)
#define RANK 1
#define NR(name) name/**/r8/**/_1
#include "crown_rank.inc"
#undef DIMS
#undef RANK
#undef NR
#define DIMS (:,:)
#define RANK 2
#define NR(name) name/**/r8/**/_2
#include "crown_rank.inc"
#undef DIMS
#undef RANK
#undef NR
#define DIMS (:,:,:)
#define RANK 3
#define NR(name) name/**/r8/**/_3
#include "crown_rank.inc"
#undef DIMS
#undef RANK
#undef NR
#include "crown_ordered.inc"
#undef N
#undef ELEM
#undef CODE
#define N(name) name/**/c4
#define ELEM complex(real32)
#define CODE 5_c_int
#include "crown_typed.inc"
#define DIMS (:)
#define RANK 1
#define NR(name) name/**/c4/**/_1
#include "crown_rank.inc"
#undef DIMS
#undef RANK
#undef NR
#define DIMS (:,:)
#define RANK 2
#define NR(name) name/**/c4/**/_2
#include "crown_rank.inc"
#undef DIMS
#undef RANK
#undef NR
#define DIMS (:,:,:)
#define RANK 3
#define NR(name) name/**/c4/**/_3
#include "crown_rank.inc"
#undef DIMS
#undef RANK
#undef NR
#undef N
#undef ELEM
#undef CODE
#define N(name) name/**/c8
#define ELEM complex(real64)
#define CODE 6_c_int
#include "crown_typed.inc"
#define DIMS (:)
#define RANK 1
#define NR(name) name/**/c8/**/_1
#include "crown_rank.inc"
#undef DIMS
#undef RANK
#undef NR
#define DIMS (:,:)
#define RANK 2
#define NR(name) name/**/c8/**/_2
#include "crown_rank.inc"
#undef DIMS
#undef RANK
#undef NR
#define DIMS (:,:,:)
#define RANK 3
#define NR(name) name/**/c8/**/_3
#include "crown_rank.inc"
#undef DIMS
#undef RANK
#undef NR
#undef N
#undef ELEM
#undef CODE

end module crown
