#!/usr/bin/env bash
# Installs exactly what stallprof needs to build, test and profile, from
# Debian's packages. Idempotent: skips apt when everything is present.
set -euo pipefail
PACKAGES=(build-essential cmake pkg-config libcli11-dev libfmt-dev libspdlog-dev libeigen3-dev
  libglpk-dev libprotobuf-dev protobuf-compiler zlib1g-dev catch2 nlohmann-json3-dev libbenchmark-dev python3-dev util-linux-extra python3-torch python3-numpy python3-torchvision python3-pil
  util-linux procps)
# Optional extras for the HTML report screenshot test.
if [ "${STALLPROF_WITH_BROWSER:-1}" = 1 ]; then PACKAGES+=(chromium); fi
# clang for the fuzz part of scripts/test_sanitize.sh (libFuzzer ships with it;
# about 180 MB installed, Debian 12: clang 14). Without it the fuzz targets
# fall back to the deterministic mutation driver.
if [ "${STALLPROF_WITH_CLANG:-1}" = 1 ]; then PACKAGES+=(clang); fi
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
