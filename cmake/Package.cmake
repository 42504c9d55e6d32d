# The Debian package: `cpack -G DEB` in the build tree writes
# stallprof_<version>_<arch>.deb, installable with `apt install ./stallprof_*.deb`.
# It holds what `cmake --install` puts under /usr (CPack installs with prefix
# /usr whatever CMAKE_INSTALL_PREFIX says; every installed path that refers to
# another one is relative, so the same files work under both).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME stallprof)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "stallprof maintainers <stallprof@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "profiler and what-if analyzer for data stalls in PyTorch training")
set(CPACK_PACKAGE_DESCRIPTION "stallprof wraps an unmodified PyTorch training process (stallprof run -- python3 train.py),
records its input pipeline through shared memory, and tells how much of the step
time is spent waiting for data, why, and which DataLoader settings, cores and
cache would remove the stall. Includes the C client library, its header,
pkg-config and CMake files, and the Python hook.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# Stripped like Debian's own packages (the build tree keeps the debug info).
set(CPACK_STRIP_FILES ON)
# Shared-library dependencies of the binaries (libprotobuf, libglpk, libfmt,
# ...) are computed by dpkg-shlibdeps from the files themselves; the Python
# hook needs the interpreter the extension was built for, and is only useful
# with torch.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR})
set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3-torch")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "chromium")
include(CPack)
