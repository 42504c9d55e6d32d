#!/usr/bin/env bash
# The Debian package: `cpack -G DEB` on the tested build gives
# stallprof_<version>_<arch>.deb with every file under /usr where a Debian user
# looks for it and its runtime packages as Depends; unpacked elsewhere (the
# paths inside are relative, so no install is needed to try it), its
# stallprof profiles a job through its own Python hook. Installing it for
# real: `apt install ./stallprof_*.deb` (README).
source "$(dirname "$0")/lib.sh"
command -v cpack >/dev/null || skip "no cpack"
command -v dpkg-shlibdeps >/dev/null || skip "no dpkg-shlibdeps (dpkg-dev) to compute the package's Depends"
cpack --config "$STALLPROF_BUILD_DIR/CPackConfig.cmake" -G DEB -B "$TMP/deb" >"$TMP/cpack.log" 2>&1 ||
  { cat "$TMP/cpack.log" >&2; fail "cpack -G DEB failed"; }
DEB=$(ls "$TMP"/deb/stallprof_*.deb) || fail "cpack wrote no stallprof_*.deb: $(ls "$TMP/deb")"

dpkg-deb -c "$DEB" | awk '{print $6}' | sed 's|^\./|/|' >"$TMP/contents"
libdir=$(sed -n 's|^\(/usr/lib[^ ]*\)/libstallprof_client\.so\.0$|\1|p' "$TMP/contents")
[ -n "$libdir" ] || fail "no libstallprof_client.so.0 under /usr/lib: $(cat "$TMP/contents")"
for f in /usr/bin/stallprof /usr/include/stallprof/client.h /usr/share/doc/stallprof/README.md \
  "$libdir/libstallprof_client.so" "$libdir/pkgconfig/stallprof-client.pc" "$libdir/cmake/stallprof/stallprofConfig.cmake" \
  "$libdir/stallprof/python/bootstrap/sitecustomize.py" "$libdir/stallprof/python/stallprof/hook.py"; do
  grep -qx "$f" "$TMP/contents" || fail "$f is not in the package"
done
grep -q "^$libdir/stallprof/python/stallprof/_stallprof.*\.so$" "$TMP/contents" || fail "the Python extension is not in the package"
! grep -q "__pycache__\|/usr/local\|/tests/\|/bench/" "$TMP/contents" || fail "the package holds files it should not: $(grep "__pycache__\|/usr/local\|/tests/\|/bench/" "$TMP/contents")"
depends=$(dpkg-deb -f "$DEB" Depends)
for p in libc6 libprotobuf python3; do
  [[ "$depends" == *"$p"* ]] || fail "Depends lacks $p: $depends"
done

# Unpacked into a directory of its own, run from another one.
dpkg-deb -x "$DEB" "$TMP/root"
mkdir "$TMP/job" && cd "$TMP/job"
"$TMP/root/usr/bin/stallprof" run -o t.pb -- "$PY" -c 'import stallprof; print(stallprof.__file__, stallprof.client_kind())' \
  >where.txt 2>where.err || fail "the packaged stallprof run failed: $(cat where.err)"
grep -qx "$TMP/root$libdir/stallprof/python/stallprof/__init__.py cext" where.txt ||
  fail "the job did not load the packaged hook: $(cat where.txt where.err)"
echo "$(basename "$DEB"): contents, Depends ($depends) and a profiled run from its files are right"
