// A stand-in for a program compiled by gfortran 15, whose coarray interface libcrown_caf
// does not implement: it imports one of gfortran 15's entry points (never reached) and
// its .comment section names GCC 15.1.0, as gfortran 15's objects do. libcrown_caf must
// refuse it when it starts, naming that version, not fail to link or run astray.
extern "C" {
void _gfortran_caf_init(int*, char***);
void _gfortran_caf_get_from_remote();
}
__asm__(".section .comment\n.string \"GCC: (GNU) 15.1.0\"\n.previous");

int main(int argc, char** argv) {
  _gfortran_caf_init(&argc, &argv);
  if (argc < 0) _gfortran_caf_get_from_remote();
  return 0;
}
