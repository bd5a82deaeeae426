! Teams as gfortran 12 emits them: FORM TEAM by parity, CHANGE TEAM (image numbers,
! num_images, coindices, sync all and collectives relative to the team), a coarray
! allocated inside the team, SYNC TEAM, TEAM_NUMBER, END TEAM; a NEW_INDEX-free
! reordering check and nested teams. Prints "PASS caf_teams" on image 1.
program caf_teams
  use caf_checks
  use iso_fortran_env, only: team_type
  implicit none
  type(team_type) :: parity, halves, first4
  integer :: slot[*], me, n, number, sub_me, sub_n, total, expected, i
  integer, allocatable :: inside(:)[:]
  me = this_image()
  n = num_images()
  number = 2 - mod(me, 2) ! odd images form team 1, even images team 2
  slot = 0
  call check(team_number() == -1, "the initial team's number")
  form team (number, parity)
  call check(team_number(parity) == number, "team_number of a formed team")
  change team (parity)
    sub_me = this_image()
    sub_n = num_images()
    call check(team_number() == number, "team_number inside the team")
    call check(sub_me == (me + 1) / 2, "image number relative to the team")
    call check(sub_n == merge((n + 1) / 2, n / 2, number == 1), "num_images of the team")
    call check(num_images(distance=1) == n, "num_images of the parent team")
    ! image 1 of the team is world image 1 (odd) or 2 (even)
    slot[1] = slot[1] + 0 ! touch it
    sync all
    if (sub_me == sub_n) slot[1] = 100 * number + sub_n
    sync all
    if (sub_me == 1) call check(slot == 100 * number + sub_n, "coindex relative to the team")
    total = me
    call co_sum(total)
    expected = 0
    do i = number, n, 2
      expected = expected + i
    end do
    call check(total == expected, "co_sum over the team")
    allocate(inside(4)[*]) ! collective over the team only
    inside = sub_me
    sync team (parity)
    inside(2)[modulo(sub_me, sub_n) + 1] = -sub_me
    sync all
    call check(inside(2) == -(modulo(sub_me - 2, sub_n) + 1) .and. inside(1) == sub_me, &
               "allocatable coarray of the team")
    sync all
    deallocate(inside)
    form team (1 + merge(0, 1, sub_me <= (sub_n + 1) / 2), halves)
    change team (halves)
      call check(num_images() <= (sub_n + 1) / 2 .and. team_number() >= 1, "nested team")
      sync all
    end team
  end team
  call check(this_image() == me .and. num_images() == n .and. team_number() == -1, &
             "back in the initial team")
  ! Images 1-4 and the rest: with CROWN_FAKE_HOSTS=2 at 5 images the first team spans
  ! hosts of 3 and 1 images, where images see different partners as mapped.
  form team (merge(1, 2, me <= 4), first4)
  change team (first4)
    sync all
    total = 1
    call co_sum(total)
    call check(total == merge(min(n, 4), n - 4, me <= 4), "a team over hosts of unequal size")
    sync all
  end team
  sync all
  call finish("caf_teams")
end program
