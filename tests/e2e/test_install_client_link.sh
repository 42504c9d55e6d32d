#!/usr/bin/env bash
# C/C++ programs link the installed client the usual ways: `pkg-config
# --cflags --libs stallprof-client` and CMake's find_package(stallprof)
# (target stallprof::client); both programs record under the installed
# `stallprof run`.
source "$(dirname "$0")/lib.sh"
command -v cc >/dev/null || skip "no C compiler"
command -v pkg-config >/dev/null || skip "no pkg-config"
PREFIX="$TMP/prefix"
install_stallprof "$PREFIX"
SP="$PREFIX/bin/stallprof"
mkdir "$TMP/src"
cd "$TMP/src"
cat >loader.c <<'C'
#include <stallprof/client.h>
#include <stdio.h>
/* loader NAME: 50 spans named NAME; exits 9 when not recording. */
int main(int argc, char** argv) {
  (void)argc;
  uint32_t id = stallprof_name(argv[1]);
  for (uint64_t i = 0; i < 50; ++i) stallprof_span_complete(id, stallprof_now_ns(), 1000, i, 0);
  return stallprof_enabled() ? 0 : 9;
}
C

export PKG_CONFIG_PATH="$INSTALLED_LIBDIR/pkgconfig"
flags=$(pkg-config --cflags --libs stallprof-client) || fail "pkg-config does not know stallprof-client"
# shellcheck disable=SC2086  # the flags are words
cc loader.c -o loader_pc $flags -Wl,-rpath,"$(pkg-config --variable=libdir stallprof-client)" ||
  fail "cc with pkg-config's flags ($flags) failed"
readelf -d loader_pc > loader_pc.dyn || fail "readelf cannot read loader_pc"
grep -q 'NEEDED.*libstallprof_client.so.0' loader_pc.dyn || fail "loader_pc does not need the client by its SONAME"

cat >CMakeLists.txt <<'CM'
cmake_minimum_required(VERSION 3.16)
project(loader C)
find_package(stallprof 0.1 REQUIRED)
add_executable(loader_cmake loader.c)
target_link_libraries(loader_cmake PRIVATE stallprof::client)
CM
cmake -S . -B build -DCMAKE_PREFIX_PATH="$PREFIX" >cmake.log 2>&1 && cmake --build build >>cmake.log 2>&1 ||
  { cat cmake.log >&2; fail "find_package(stallprof) + stallprof::client failed"; }

cd "$TMP"
"$SP" run -q -o pc.pb -- "$TMP/src/loader_pc" from_pkgconfig || fail "the pkg-config program did not record (exit $?)"
"$SP" run -q -o cmake.pb -- "$TMP/src/build/loader_cmake" from_cmake || fail "the CMake program did not record (exit $?)"
"$STALLPROF_BUILD_DIR/trace_check" --names pc.pb > pc.names || fail "trace_check cannot read pc.pb"
grep -q "^name from_pkgconfig " pc.names || fail "pc.pb has no from_pkgconfig spans"
"$STALLPROF_BUILD_DIR/trace_check" --names cmake.pb > cmake.names || fail "trace_check cannot read cmake.pb"
grep -q "^name from_cmake " cmake.names || fail "cmake.pb has no from_cmake spans"
echo "pkg-config and find_package(stallprof) programs recorded under the installed stallprof run"
