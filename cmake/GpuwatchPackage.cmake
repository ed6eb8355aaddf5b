# `cpack -G DEB` in a build tree (after `cmake --build`): gpuwatch_<version>_<arch>.deb,
# the files of `cmake --install` (cmake/GpuwatchInstall.cmake, and every other
# install() rule of the project) under /usr, stripped.
#   sudo apt install ./gpuwatch_0.1.0_amd64.deb     sudo apt remove gpuwatch
# tests/install/run_deb_test.sh (ctest `deb_package`) builds it, installs it
# into a fresh root, runs the installed `gpuwatch run` there and removes it.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpuwatch)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "gpuwatch developers")
set(CPACK_PACKAGE_CONTACT "gpuwatch developers <dev@gpuwatch.invalid>" CACHE STRING
  "The Debian package's Maintainer")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "in-process CUDA memory and transfer profiler and leak detector")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
  "gpuwatch loads into a CUDA program with no code change (gpuwatch run, or
LD_PRELOAD of libgpuwatch.so) and sees every device allocation and free, every
host-device copy and every kernel launch through CUPTI. It reports the memory
still live at exit by allocation site (file:line and stack), growth per
training step, transfer findings and phases, and serves live metrics.
This package holds the gpuwatch command, libgpuwatch.so, the C API's headers,
the CMake and pkg-config files, the Python package (under gpuwatch run) and
the documentation. CUDA itself (the driver, CUPTI) is not a Debian package
and is not a dependency.")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # gpuwatch_<version>_<arch>.deb
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
# The libraries bin/gpuwatch links (protobuf, zlib, prometheus-cpp, libc ...)
# come from dpkg-shlibdeps; libgpuwatch.so dlopens the two it walks and
# symbolizes stacks with, which no tool can see.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libdw1, libunwind8")
# prerm: Python's __pycache__ folders, written next to the package's modules
# when `gpuwatch run` runs Python as root, are no file of the package; they go
# before the package does, so that `apt remove` leaves nothing behind.
configure_file(${CMAKE_CURRENT_LIST_DIR}/deb/prerm.in ${CMAKE_BINARY_DIR}/cmake/deb/prerm @ONLY)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_BINARY_DIR}/cmake/deb/prerm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# The node exporter's systemd unit and its user (packaging/systemd/), under
# lib/systemd/system and lib/sysusers.d of the prefix (/usr in the package),
# its ExecStart naming the installed command: written at install time, when
# the prefix is known (cpack installs under /usr, `cmake --install` where
# told). tests/prometheus/check_unit.sh checks both with systemd-analyze.
install(CODE "
  set(GPUWATCH_BIN \"\${CMAKE_INSTALL_PREFIX}/bin/gpuwatch\")
  message(STATUS \"Installing: \$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/systemd/system/gpuwatch-exporter.service\")
  configure_file(\"${PROJECT_SOURCE_DIR}/packaging/systemd/gpuwatch-exporter.service.in\"
    \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/systemd/system/gpuwatch-exporter.service\" @ONLY)")
install(FILES ${PROJECT_SOURCE_DIR}/packaging/systemd/gpuwatch.sysusers.conf
  DESTINATION lib/sysusers.d RENAME gpuwatch.conf)
include(CPack)
