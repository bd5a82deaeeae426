! module crown_checkpoint: a coarray and a distributed array (float and double pieces)
! saved, committed and loaded back, metadata, the newest checkpoint of a directory, and
! a missing dataset refused with CROWN_ERR_CHECKPOINT and a message naming it.
program fortran_checkpoint
  use crown
  use crown_checkpoint
  use, intrinsic :: iso_fortran_env, only: int64, real32, real64
  implicit none
  real(real64), pointer :: a(:,:)
  real(real64), allocatable :: d(:)
  real(real32), allocatable :: f(:)
  type(crown_checkpoint_file) :: ck
  integer(int64), parameter :: global = 1001
  integer(int64) :: first, last, i, step
  real(real64) :: lr
  integer :: me, n, stat, failures
  character(len=256) :: path, newest, msg
  call crown_init()
  me = crown_this_image()
  n = crown_num_images()
  failures = 0
  write (path, '(a,i0,a)') 'f_checkpoint.np', n, '/step-000000000003.h5'
  call execute_command_line('mkdir -p ' // path(1:index(path, '/') - 1))
  call crown_sync_all()

  call crown_allocate(a, [3, 4])
  a = reshape([(real(me * 100 + i, real64), i = 1, 12)], [3, 4])
  call crown_checkpoint_piece(global, first, last)
  d = [(real(i, real64) * 0.5_real64, i = first, last)]
  f = [(real(i, real32) * 2.0_real32, i = first, last)]

  call crown_checkpoint_create(ck, path)
  call crown_checkpoint_write_coarray(ck, 'a', a)
  call crown_checkpoint_write_sharded(ck, 'd', d, global)
  call crown_checkpoint_write_sharded(ck, 'f', f, global)
  call crown_checkpoint_put(ck, 'step', 3_int64)
  call crown_checkpoint_put(ck, 'lr', 0.125_real64)
  call crown_checkpoint_commit(ck)
  call crown_checkpoint_close(ck)

  call crown_checkpoint_newest(path(1:index(path, '/') - 1), newest, step)
  if (step /= 3 .or. trim(newest) /= trim(path)) call fail('newest: ' // trim(newest))
  a = -1
  d = -1
  f = -1
  call crown_checkpoint_open(ck, newest)
  call crown_checkpoint_read_coarray(ck, 'a', a)
  call crown_checkpoint_read_sharded(ck, 'd', d, global)
  call crown_checkpoint_read_sharded(ck, 'f', f, global)
  call crown_checkpoint_get_int(ck, 'step', step)
  call crown_checkpoint_get_real(ck, 'lr', lr)
  if (any(a /= reshape([(real(me * 100 + i, real64), i = 1, 12)], [3, 4]))) call fail('coarray')
  if (any(d /= [(real(i, real64) * 0.5_real64, i = first, last)])) call fail('double piece')
  if (any(f /= [(real(i, real32) * 2.0_real32, i = first, last)])) call fail('float piece')
  if (step /= 3 .or. lr /= 0.125_real64) call fail('metadata')
  msg = ''
  call crown_checkpoint_read_coarray(ck, 'nope', a, stat=stat, errmsg=msg)
  if (stat /= CROWN_ERR_CHECKPOINT .or. index(msg, "dataset 'nope': missing") == 0) &
    call fail('missing dataset: ' // trim(msg))
  call crown_checkpoint_close(ck)
  call crown_deallocate(a)
  call crown_co_sum(failures)
  if (me == 1 .and. failures == 0) print '(a)', 'PASS fortran_checkpoint'
  call crown_finalize()
contains
  subroutine fail(what)
    character(len=*), intent(in) :: what
    failures = failures + 1
    print '(a,i0,a,a)', 'image ', me, ': FAILED ', what
  end subroutine
end program
