#!/usr/bin/env python3
"""Compiles every C++ and Fortran snippet of README.md and docs/*.md, and runs them.

A fenced block's info string says what it is:
  ```cpp                 a whole program: compiled, linked, run under mpiexec -np 2
  ```cpp np=5            ... run on 5 ranks
  ```cpp compile-only    compiled (-c) only: declarations, or a program not to run here
  ```cpp fragment        statements: placed in main() after `crown::runtime rt(argc, argv);`
                         with <crown/crown.hpp> and common standard headers; run as above
  ```fortran             a program using module crown: linked with libcrown_fortran, run
  ```fortran caf         a native coarray program, built with crown-fortran (-fcoarray=lib)
Attributes combine (`cpp fragment compile-only`, `fortran caf np=4`). Blocks in sh,
cmake, text, csv or with no language are not compiled; any other language is an error,
so no snippet escapes the check. Errors name the Markdown file and line (#line).

Usage: snippets.py CONFIG [--source-dir DIR] [--keep DIR] [--jobs N] [--list]
CONFIG holds key=value lines written by tests/docs/CMakeLists.txt (values are
shell-quoted lists).
"""
import argparse
import concurrent.futures
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

COMPILED = {"cpp", "fortran"}
NOT_COMPILED = {"", "sh", "cmake", "text", "csv", "console"}
ATTRIBUTES = {"compile-only", "fragment", "caf"}

FRAGMENT_HEAD = """#include <crown/crown.hpp>
#include <array>
#include <cstdio>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

int main(int argc, char** argv) {
  crown::runtime rt(argc, argv);
"""


class Snippet:
    def __init__(self, path, line, lang, attrs, code):
        self.path, self.line, self.lang, self.code = path, line, lang, code
        self.np, self.compile_only, self.fragment, self.caf = 2, False, False, False
        for a in attrs:
            if a.startswith("np="):
                self.np = int(a[3:])
            elif a in ATTRIBUTES:
                setattr(self, a.replace("-", "_"), True)
            else:
                raise ValueError(f"{path}:{line - 1}: unknown snippet attribute '{a}'")
        if self.caf and lang != "fortran" or self.fragment and lang != "cpp":
            raise ValueError(f"{path}:{line - 1}: '{' '.join(attrs)}' does not apply to {lang}")

    @property
    def where(self):
        return f"{self.path}:{self.line}"


def extract(root, rel):
    """Every fenced block of one Markdown file; the first code line's number is kept."""
    out, block = [], None
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        for number, text in enumerate(f, 1):
            text = text.rstrip("\n")
            fence = re.match(r"^\s*```(.*)$", text)
            if block is None:
                if fence:
                    words = fence.group(1).split()
                    lang = words[0].lower() if words else ""
                    if lang not in COMPILED | NOT_COMPILED:
                        raise ValueError(f"{rel}:{number}: code block in '{lang}': use cpp or "
                                         f"fortran (compiled) or sh/cmake/text (not)")
                    block = (lang, words[1:], number + 1, [])
            elif fence and not fence.group(1).strip():
                lang, attrs, first, lines = block
                if lang in COMPILED:
                    out.append(Snippet(rel, first, lang, attrs, "\n".join(lines) + "\n"))
                block = None
            else:
                block[3].append(text)
    if block is not None:
        raise ValueError(f"{rel}:{block[2] - 1}: code block never closed")
    return out


def source_of(s, source_dir):
    origin = os.path.join(source_dir, s.path)
    if s.lang == "fortran":
        return f'# {s.line} "{origin}"\n{s.code}'
    if s.fragment:
        return f'{FRAGMENT_HEAD}#line {s.line} "{origin}"\n{s.code}}}\n'
    return f'#line {s.line} "{origin}"\n{s.code}'


def build(s, index, cfg, work):
    """Compiles (and links) one snippet: (snippet, "program"|"compiled"|"skipped"|"failed",
    the program's path or the compiler's output)."""
    base = os.path.join(work, f"snippet{index}")
    if s.lang == "cpp":
        src = base + ".cpp"
        cmd = cfg["cxx"] + cfg["cxx_flags"]
        cmd += ["-c", src, "-o", base + ".o"] if s.compile_only else [src, "-o", base] + cfg["cxx_link"]
    elif s.caf:
        if not cfg["caf"]:
            return s, "skipped", "no libcrown_caf in this build"
        src = base + ".F90"
        cmd = cfg["caf"] + cfg["fortran_flags"] + [src, "-o", base]
    else:
        if not cfg["fc"]:
            return s, "skipped", "no Fortran in this build"
        src = base + ".F90"
        cmd = cfg["fc"] + cfg["fortran_flags"] + [src, "-o", base] + cfg["fortran_link"]
        if s.compile_only:
            cmd = cfg["fc"] + cfg["fortran_flags"] + ["-c", src, "-o", base + ".o"]
    with open(src, "w", encoding="utf-8") as f:
        f.write(source_of(s, cfg.get("docs_dir", cfg["source_dir"])[0]))
    r = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
    if r.returncode != 0:
        return s, "failed", f"$ {shlex.join(cmd)}\n{r.stdout}{r.stderr}"
    return (s, "compiled", None) if s.compile_only else (s, "program", base)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--source-dir", help="read README.md and docs/ here (self_check's fixture)")
    ap.add_argument("--keep", help="write the sources and programs here (kept)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--list", action="store_true", help="only list the snippets")
    args = ap.parse_args()
    cfg = {}
    with open(args.config, encoding="utf-8") as f:
        for line in f:
            if "=" in line:
                key, value = line.rstrip("\n").split("=", 1)
                cfg[key] = shlex.split(value)
    if args.source_dir:
        cfg["docs_dir"] = [os.path.abspath(args.source_dir)]
    root = cfg.get("docs_dir", cfg["source_dir"])[0]
    # Crown's own headers with -I (warnings apply), its dependencies' with -isystem, as
    # CMake does; the compiler's default directory is never named (it breaks #include_next).
    for d in cfg["cxx_include_dirs"]:
        if os.path.realpath(d) not in ("/usr/include", "/usr/local/include"):
            ours = any(d.startswith(cfg[k][0] + os.sep) for k in ("source_dir", "binary_dir"))
            cfg["cxx_flags"] += ["-I" + d] if ours else ["-isystem", d]
    files = ["README.md"] + sorted(
        os.path.join("docs", n) for n in os.listdir(os.path.join(root, "docs")) if n.endswith(".md"))
    try:
        snippets = [s for rel in files for s in extract(root, rel)]
    except ValueError as e:
        print(f"FAILED: {e}")
        return 1
    if args.list:
        for s in snippets:
            kind = " ".join(k for k, on in (("fragment", s.fragment), ("caf", s.caf),
                                             ("compile-only", s.compile_only)) if on)
            print(f"{s.where}: {s.lang} {kind or 'program'} np={s.np}")
        return 0

    work = args.keep or tempfile.mkdtemp(prefix="crown-snippets-")
    os.makedirs(work, exist_ok=True)
    started = time.monotonic()
    failures = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        built = list(pool.map(lambda p: build(p[1], p[0], cfg, work), enumerate(snippets)))
    compiled = time.monotonic()
    ran = 0
    for s, status, what in built:
        if status == "failed":
            failures.append(f"{s.where}: the {s.lang} snippet does not compile:\n{what}")
        if status != "program":
            continue
        program = what
        cmd = cfg["mpiexec"] + ["-np", str(s.np)] + cfg["mpiexec_flags"] + [program]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            failures.append(f"{s.where}: the snippet did not finish within 120 s: {shlex.join(cmd)}")
            continue
        ran += 1
        if r.returncode != 0:
            failures.append(f"{s.where}: the snippet exited with {r.returncode} on {s.np} ranks:\n"
                            f"{(r.stdout + r.stderr)[-4000:]}")
    if not args.keep:
        subprocess.run(["rm", "-rf", work])
    count = {k: sum(1 for b in built if b[1] == k) for k in ("program", "compiled", "skipped")}
    print(f"{len(snippets)} snippets in {len(files)} files: {count['program'] + count['compiled']} "
          f"built ({count['compiled']} compile-only), {ran} ran, {count['skipped']} skipped "
          f"(no Fortran or libcrown_caf in this build); compiling {compiled - started:.0f} s, "
          f"running {time.monotonic() - compiled:.0f} s")
    for f in failures:
        print(f"FAILED: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
