#!/usr/bin/env bash
# Builds xgrammar (structured outputs' grammar engine, see README: Dependencies) from its PyPI
# source distribution, pinned by version and sha256, as a static C++ library without its Python
# bindings, into build/deps/xgrammar-<version>. CMake finds it there (MINIVLLM_XGRAMMAR_DIR).
# Idempotent: does nothing when that version is installed.
set -euo pipefail
version=0.2.8
sha256=8305646fd2b319d6c3003f51a1665e54cbbe9cba1fb636bc41d0b46434ccbb80
root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="$root/build/deps/xgrammar-$version"
[ -f "$prefix/lib/libxgrammar.a" ] && exit 0
work="$root/build/deps/src"
mkdir -p "$work"
tarball="$work/xgrammar-$version.tar.gz"
if [ ! -f "$tarball" ] || ! echo "$sha256  $tarball" | sha256sum -c --status; then
  python="$root/build/venv/bin/python3"
  [ -x "$python" ] || python=python3
  # The sdist only (--no-binary): its C++ sources and CMake build. Preparing its metadata makes pip
  # fetch the build backend into a throwaway environment; nothing is installed.
  "$python" -m pip download --quiet --no-deps --no-binary xgrammar "xgrammar==$version" -d "$work"
fi
echo "$sha256  $tarball" | sha256sum -c --status || { echo "xgrammar-$version.tar.gz: sha256 mismatch" >&2; exit 1; }
rm -rf "$work/xgrammar-$version" && tar xzf "$tarball" -C "$work"
# Its CMakeLists reads config.cmake from the build folder first (else cmake/config.cmake, which
# turns the Python bindings on): ours keeps them, its tests and its tracing off.
mkdir -p "$work/build-$version"
printf 'set(XGRAMMAR_BUILD_PYTHON_BINDINGS OFF)\nset(XGRAMMAR_BUILD_CXX_TESTS OFF)\nset(XGRAMMAR_ENABLE_CPPTRACE OFF)\n' \
  >"$work/build-$version/config.cmake"
# -fno-lto: its default -flto=auto would leave GIMPLE in the archive for our link to compile again;
# -Wno-error: its -Werror would fail the build on a newer compiler's new warnings in its code.
cmake -S "$work/xgrammar-$version" -B "$work/build-$version" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DXGRAMMAR_BUILD_PYTHON_BINDINGS=OFF -DXGRAMMAR_BUILD_CXX_TESTS=OFF \
  -DCMAKE_CXX_FLAGS="-fno-lto -Wno-error" -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
cmake --build "$work/build-$version" --target xgrammar
cmake --install "$work/build-$version" >/dev/null
rm -rf "$work/xgrammar-$version" "$work/build-$version"
