// Which gfortran's coarray interface a program expects. libcrown_caf implements gfortran
// 11 to 14's. gfortran 15 replaced get/send/sendget (*_by_ref) with accessor functions
// that the program registers and the library calls on the image that holds the data
// (_gfortran_caf_register_accessor, get_from_remote, send_to_remote,
// transfer_between_remotes, ...). A program built by gfortran 15 or later therefore
// links against libcrown_caf (those entry points are defined here) and stops when it
// starts, with the compiler's version read from the executable's .comment section,
// instead of failing to link or running with the wrong interface.
#include "caf_runtime.hpp"
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <elf.h>
#include <fstream>
#include <mpi.h>
#include <string>
#include <string_view>
#include <vector>

namespace crown::caf {
namespace {

/// The entry points only gfortran 15 and later call.
constexpr std::array<std::string_view, 7> newer_interface = {
    "_gfortran_caf_register_accessor",
    "_gfortran_caf_register_accessors_finish",
    "_gfortran_caf_get_remote_function_index",
    "_gfortran_caf_get_from_remote",
    "_gfortran_caf_send_to_remote",
    "_gfortran_caf_transfer_between_remotes",
    "_gfortran_caf_is_present_on_remote"};

/// The executable's ELF header and sections, read on demand (it may be large).
struct elf_file {
  std::ifstream in{"/proc/self/exe", std::ios::binary};
  Elf64_Ehdr header{};
  std::vector<Elf64_Shdr> sections;

  elf_file() {
    if (!in.read(reinterpret_cast<char*>(&header), sizeof header) ||
        std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64)
      return;
    sections.resize(header.e_shnum);
    in.seekg(static_cast<std::streamoff>(header.e_shoff));
    if (!in.read(reinterpret_cast<char*>(sections.data()),
                 static_cast<std::streamsize>(sections.size() * sizeof(Elf64_Shdr))))
      sections.clear();
  }
  std::string contents(std::size_t i) {
    if (i >= sections.size() || sections[i].sh_type == SHT_NOBITS) return {};
    std::string text(sections[i].sh_size, '\0');
    in.clear();
    in.seekg(static_cast<std::streamoff>(sections[i].sh_offset));
    if (!in.read(text.data(), static_cast<std::streamsize>(text.size()))) return {};
    return text;
  }
};

/// Whether the executable imports one of gfortran 15's entry points.
bool imports_newer_interface(elf_file& f) {
  for (std::size_t i = 0; i < f.sections.size(); ++i) {
    const Elf64_Shdr& s = f.sections[i];
    if (s.sh_type != SHT_DYNSYM) continue;
    const std::string names = f.contents(s.sh_link), table = f.contents(i);
    for (std::size_t at = 0; at + sizeof(Elf64_Sym) <= table.size(); at += sizeof(Elf64_Sym)) {
      Elf64_Sym sym;
      std::memcpy(&sym, table.data() + at, sizeof sym);
      if (sym.st_shndx != SHN_UNDEF || sym.st_name >= names.size()) continue;
      const std::string_view name(names.c_str() + sym.st_name);
      if (std::find(newer_interface.begin(), newer_interface.end(), name) != newer_interface.end())
        return true;
    }
  }
  return false;
}

/// The newest "GCC: (...) X.Y.Z" of the executable's .comment section ("" if none).
std::string newest_gcc(elf_file& f) {
  const std::string names = f.contents(f.header.e_shstrndx);
  std::string newest;
  int newest_major = -1;
  for (std::size_t i = 0; i < f.sections.size(); ++i) {
    const Elf64_Shdr& s = f.sections[i];
    if (s.sh_name >= names.size() || std::string_view(names.c_str() + s.sh_name) != ".comment")
      continue;
    const std::string text = f.contents(i);
    for (std::size_t at = 0; at < text.size();) {
      const std::string_view entry(text.data() + at, strnlen(text.data() + at, text.size() - at));
      at += entry.size() + 1;
      if (!entry.starts_with("GCC:")) continue;
      const std::string_view version = entry.substr(entry.rfind(' ') + 1);
      const int major = std::atoi(std::string(version).c_str());
      if (major > newest_major) {
        newest_major = major;
        newest = version;
      }
    }
  }
  return newest;
}

[[noreturn]] void refuse() {
  elf_file f;
  const std::string version = newest_gcc(f);
  std::fprintf(stderr,
               "ERROR STOP crown caf: this program was compiled by gfortran %s, whose coarray "
               "interface (_gfortran_caf_get_from_remote, send_to_remote, "
               "transfer_between_remotes, register_accessor) libcrown_caf does not implement; "
               "it implements gfortran 11 to 14's: compile the program with one of those\n",
               version.empty() ? "15 or later" : version.c_str());
  std::fflush(stderr);
  int started = 0;
  MPI_Initialized(&started);
  if (started) MPI_Abort(MPI_COMM_WORLD, 1); // no image may wait for this one
  std::exit(1);
}

} // namespace

void check_compiler() {
  elf_file f;
  if (imports_newer_interface(f)) refuse();
}

} // namespace crown::caf

extern "C" {
// gfortran 15's entry points: only code built by it calls them (check_compiler refuses
// such a program at start-up when the executable itself calls them).
void _gfortran_caf_register_accessor() { crown::caf::refuse(); }
void _gfortran_caf_register_accessors_finish() { crown::caf::refuse(); }
void _gfortran_caf_get_remote_function_index() { crown::caf::refuse(); }
void _gfortran_caf_get_from_remote() { crown::caf::refuse(); }
void _gfortran_caf_send_to_remote() { crown::caf::refuse(); }
void _gfortran_caf_transfer_between_remotes() { crown::caf::refuse(); }
void _gfortran_caf_is_present_on_remote() { crown::caf::refuse(); }
}
