#!/usr/bin/env bash
# Installs exactly what stallprof needs to build, test and profile, from
# Debian's packages, and uPlot (the report's chart library) from npm at the
# version pinned in third_party/package-lock.json. Idempotent: skips apt and
# npm when everything is present.
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES=(build-essential cmake pkg-config libcli11-dev libfmt-dev libspdlog-dev libeigen3-dev
  libglpk-dev libprotobuf-dev protobuf-compiler zlib1g-dev libdeflate-dev catch2 nlohmann-json3-dev libbenchmark-dev python3-dev util-linux-extra python3-torch python3-numpy python3-torchvision python3-pil python3-lmdb python3-h5py libtcmalloc-minimal4
  util-linux procps)
# Optional extras for the HTML report screenshot test.
if [ "${STALLPROF_WITH_BROWSER:-1}" = 1 ]; then PACKAGES+=(chromium); fi
# clang for the fuzz part of scripts/test_sanitize.sh (libFuzzer ships with it;
# about 180 MB installed, Debian 12: clang 14). Without it the fuzz targets
# fall back to the deterministic mutation driver.
if [ "${STALLPROF_WITH_CLANG:-1}" = 1 ]; then PACKAGES+=(clang); fi
# npm for uPlot (zoomable charts in the HTML report; without it the charts are
# static SVG). Debian's npm only where no npm is there already (a NodeSource
# nodejs ships its own and conflicts with Debian's).
WITH_UPLOT=${STALLPROF_WITH_UPLOT:-1}
if [ "$WITH_UPLOT" = 1 ] && ! command -v npm >/dev/null; then PACKAGES+=(npm); fi

# uPlot into third_party/node_modules (ignored by git), checked against the
# lockfile's integrity hash; the build copies it beside the binary.
install_uplot() {
  [ "$WITH_UPLOT" = 1 ] || return 0
  local have
  have=$(sed -n 's/^ *"version": "\(.*\)".*/\1/p' third_party/node_modules/uplot/package.json 2>/dev/null || true)
  if [ "$have" = "1.6.32" ]; then echo "setup: uPlot $have present"; return 0; fi
  echo "setup: installing uPlot 1.6.32 from npm into third_party/node_modules"
  # Not fatal: a report never needs uPlot (its charts are then static SVG, and
  # e2e: test_report_long_run skips saying why).
  (cd third_party && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
    echo "setup: warning: npm could not install uPlot: the report's charts will be static SVG" >&2
}
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  install_uplot
  exit 0
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
install_uplot
