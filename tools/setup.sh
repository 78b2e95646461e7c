#!/usr/bin/env bash
# Installs what building simd needs on a Debian/Ubuntu machine and is not
# there yet: libclang (RocksDB's bindgen step) and a C++ compiler. Rust itself
# comes from rustup (https://rustup.rs). Safe to run again: does nothing when
# everything is present.
set -euo pipefail

need=()
# libclang itself (libclang.so, libclang-14.so.1 …), not libclang-cpp, which
# LLVM's runtime packages bring without it and bindgen cannot use.
if ! ls /usr/lib/llvm-*/lib/libclang.so* /usr/lib/llvm-*/lib/libclang-[0-9]*.so* >/dev/null 2>&1 &&
   ! ldconfig -p 2>/dev/null | grep -Eq 'libclang(-[0-9][.0-9]*)?\.so'; then
  need+=(libclang-dev)
fi
command -v c++ >/dev/null 2>&1 || need+=(g++)
# jemalloc (the binary's allocator) is built with its configure script and make.
command -v make >/dev/null 2>&1 || need+=(make)
command -v cargo >/dev/null 2>&1 || { echo "setup: cargo not found; install Rust from https://rustup.rs first" >&2; exit 1; }

if [ ${#need[@]} -gt 0 ]; then
  as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "setup: need root to install ${need[*]} (apt-get install -y ${need[*]})" >&2; exit 1; }
    as_root=(sudo)
  fi
  echo "setup: installing ${need[*]}" >&2
  "${as_root[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq "${need[@]}" >/dev/null
fi
