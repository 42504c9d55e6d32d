#!/usr/bin/env bash
# Installed like a real tool: `cmake --install` into a temporary prefix puts
# every file where a Debian user looks for it, and the installed `stallprof run`,
# with the build and source trees hidden (a tmpfs over each, in a private mount
# namespace: as if both were deleted), profiles a real PyTorch job from another
# working directory through the installed Python hook (extension + bootstrap),
# then `analyze` and `report` read the trace.
source "$(dirname "$0")/lib.sh"
need_torch
if unshare --mount true 2>/dev/null; then
  NS=(unshare --mount)
elif unshare --user --map-root-user --mount true 2>/dev/null; then
  NS=(unshare --user --map-root-user --mount)
else
  skip "no private mount namespace (unshare --mount needs root or user namespaces) to hide the build and source trees"
fi

PREFIX="$TMP/prefix"
install_stallprof "$PREFIX"
for f in bin/stallprof include/stallprof/client.h share/doc/stallprof/README.md share/doc/stallprof/analysis.md; do
  [ -f "$PREFIX/$f" ] || fail "$f is not installed"
done
for f in libstallprof_client.so libstallprof_client.so.0 pkgconfig/stallprof-client.pc cmake/stallprof/stallprofConfig.cmake \
  cmake/stallprof/stallprofTargets.cmake stallprof/python/bootstrap/sitecustomize.py stallprof/python/stallprof/hook.py; do
  [ -e "$INSTALLED_LIBDIR/$f" ] || fail "<libdir>/$f is not installed"
done
compgen -G "$INSTALLED_LIBDIR/stallprof/python/stallprof/_stallprof*.so" >/dev/null || fail "the Python extension is not installed"

# The job lives outside both trees; stallprof is run by its full path from there.
mkdir "$TMP/job"
cp "$WORKLOADS/synthetic.py" "$TMP/job/train.py"
cat >"$TMP/job/where.py" <<'PY'
import stallprof
print("stallprof from", stallprof.__file__, "client", stallprof.client_kind())
PY
cat >"$TMP/job/run.sh" <<SH
set -eu
mount -t tmpfs -o size=1m stallprof-hidden-build "$STALLPROF_BUILD_DIR"
mount -t tmpfs -o size=1m stallprof-hidden-source "$STALLPROF_SOURCE_DIR"
[ -z "\$(ls -A "$STALLPROF_SOURCE_DIR")" ] || { echo "the source tree is still visible"; exit 1; }
cd "$TMP/job"
SP="$PREFIX/bin/stallprof"
"\$SP" run -o where.pb -- "$PY" where.py > where.txt 2> where.err
"\$SP" run -o trace.pb -- "$PY" train.py --workers 2 --batches 12 --batch-size 4 --prep-cpu-ms 1 > train.txt 2> train.err
"\$SP" analyze trace.pb > analysis.txt
"\$SP" analyze --json trace.pb > analysis.json
"\$SP" report trace.pb -o report.html
SH
"${NS[@]}" bash "$TMP/job/run.sh" >"$TMP/ns.log" 2>&1 || {
  cat "$TMP/ns.log" "$TMP/job/"*.err >&2 2>/dev/null
  fail "the installed stallprof failed with the build and source trees hidden"
}
cd "$TMP/job"
# The hook came from the prefix, through the C extension (not the ctypes fallback).
grep -q "stallprof from $INSTALLED_LIBDIR/stallprof/python/stallprof/__init__.py client cext" where.txt ||
  fail "the job did not load the installed hook: $(cat where.txt where.err)"
! grep -q "hook not found" train.err || fail "run did not find the installed hook: $(cat train.err)"
"$PY" - <<'PY' || fail "the analysis of the installed run is incomplete: $(cat analysis.txt)"
import json
d = json.load(open("analysis.json"))
assert d["traces"][0]["quality"]["clients"] == ["python-cext"], d["traces"][0]["quality"]["clients"]
train = [l for l in d["loaders"] if l["name"] == "train"]
assert train and train[0]["iterations"] == 12, [(l["name"], l["iterations"]) for l in d["loaders"]]
assert len([w for w in train[0]["workers"] if not w["in_main_process"]]) == 2, train[0]["workers"]
PY
grep -q "<svg" report.html || fail "report.html has no plot"
echo "installed stallprof profiled, analyzed and reported a job with the build and source trees hidden"
