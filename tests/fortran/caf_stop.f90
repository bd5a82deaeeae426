! STOP on every image ends the program normally with its message; ERROR STOP ends it
! on every image with a non-zero status (caf_bad_image tests the latter).
program caf_stop
  implicit none
  real :: a(2)[*]
  a = this_image()
  sync all
  if (this_image() == 1) print '(a,i0)', "images: ", num_images()
  stop "done"
end program
