! A coindex beyond num_images() stops the job with a message naming the image.
program caf_bad_image
  implicit none
  real :: a(4)[*]
  a = 0
  sync all
  a(:)[num_images() + 2] = 1
end program
