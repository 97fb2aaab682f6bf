#!/usr/bin/env bash
# Installs what cilkview-rs and its tests need and is missing, on Debian 12 (bookworm): C and C++
# compilers with libc's headers and static library, qemu-user (counting by emulation where there is no hardware counter), gnuplot-nox,
# clang, gfortran, oneTBB (libtbb-dev), valgrind, libgomp, GNU time. As root, or through sudo. Checks the Rust toolchain.
# Used by scripts/quickstart.sh and scripts/test.sh (and so by CI); safe to run again.
# Usage: scripts/setup.sh [build|test]   (the Rust needed: 1.85 to build, 1.88 for the tests)
set -euo pipefail
cd "$(dirname "$0")/.."

# The Rust the workspace needs: Cargo.toml's rust-version to build; the tests' dev-dependencies
# (proptest) need 1.88.
case "${1:-build}" in
    build) need_rust=1.85 ;;
    test) need_rust=1.88 ;;
    *) echo "usage: scripts/setup.sh [build|test]" >&2; exit 2 ;;
esac
if ! command -v cargo >/dev/null; then
    echo "setup: no cargo in PATH: install Rust $need_rust or newer (https://rustup.rs), then run this again" >&2
    exit 1
fi
have_rust=$(rustc --version | awk '{print $2}')
if [ "$(printf '%s\n%s\n' "$need_rust" "${have_rust%%-*}" | sort -V | head -1)" != "$need_rust" ]; then
    echo "setup: rustc $have_rust is older than $need_rust: run \`rustup update\` (or install a newer Rust)" >&2
    exit 1
fi

missing=()
# A C compiler, the C++ one (the tests build C++ fixtures with g++ and clang++), and libc's
# headers and static library (static programs: the quick start, the fixtures). gcc only
# recommends libc6-dev, which --no-install-recommends skips: it is checked by compiling.
command -v cc >/dev/null || missing+=(gcc)
command -v g++ >/dev/null || missing+=(g++)
if ! command -v cc >/dev/null ||
    ! printf '#include <stdio.h>\nint main(void){return 0;}\n' | cc -static -x c - -o /dev/null 2>/dev/null; then
    missing+=(libc6-dev)
fi
# Counting by emulation (--counter emulate, and auto on machines without a hardware counter):
# Debian bookworm's qemu-user 7.2 accepts TCG plugins (newer Debian builds are static and do not).
command -v qemu-x86_64 >/dev/null || missing+=(qemu-user)
command -v gnuplot >/dev/null || missing+=(gnuplot-nox)
# clang, and LLVM's OpenMP runtime, libomp: run --openmp measures clang -fopenmp programs
# through it (tests/openmp_clang.rs).
if ! command -v clang >/dev/null; then
    missing+=(clang libomp-dev)
elif ! echo 'int main(void){return 0;}' | clang -fopenmp -x c - -o /dev/null 2>/dev/null; then
    missing+=(libomp-dev)
fi
# gfortran: a Fortran OpenMP program under run --openmp (tests/openmp_fortran.rs).
command -v gfortran >/dev/null || missing+=(gfortran)
# oneTBB's headers and libtbb: run --tbb measures programs linked with -ltbb (tests/tbb.rs).
if ! command -v g++ >/dev/null ||
    ! printf '#include <oneapi/tbb/version.h>\nint main(){return 0;}\n' |
    g++ -x c++ - -Wl,--no-as-needed -ltbb -o /dev/null 2>/dev/null; then
    missing+=(libtbb-dev)
fi
command -v valgrind >/dev/null || missing+=(valgrind)
[ -x /usr/bin/time ] || missing+=(time)
# `script` runs the progress test in a pseudo-terminal (util-linux's bsdutils, essential on Debian).
command -v script >/dev/null || missing+=(bsdutils)
# man renders the man page in its test.
command -v man >/dev/null || missing+=(man-db)
# OpenMP fixtures (bench tests) are built with gcc -fopenmp: libgomp.
if command -v cc >/dev/null && ! echo 'int main(void){return 0;}' | cc -fopenmp -x c - -o /dev/null 2>/dev/null; then
    missing+=(libgomp1 libgcc-12-dev)
fi

if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
        sudo=()
    elif command -v sudo >/dev/null; then
        sudo=(sudo)
    else
        echo "setup: missing ${missing[*]}, and this is neither root nor has sudo: as root, run" >&2
        echo "  apt-get update && apt-get install --no-install-recommends ${missing[*]}" >&2
        exit 1
    fi
    echo "setup: installing ${missing[*]} (apt-get)" >&2
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
