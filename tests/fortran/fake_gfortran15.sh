#!/bin/sh
# Stands in for gfortran 15 (crown-fortran asks the compiler's version first).
[ "$1" = -dumpversion ] && echo 15.1.0
exit 0
