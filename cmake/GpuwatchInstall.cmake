# `cmake --install BUILD --prefix P`: what a user of gpuwatch needs, nothing
# of the tests or the simulator.
#   P/bin/gpuwatch                     the command
#   P/lib/libgpuwatch.so               the library to preload; its public API
#   P/include/gpuwatch/gpuwatch.h      the public C API
#   P/lib/cmake/gpuwatch/              find_package(gpuwatch): gpuwatch::gpuwatch
#   P/lib/pkgconfig/gpuwatch.pc        pkg-config gpuwatch
#   P/share/gpuwatch/python/gpuwatch/  the Python package (`gpuwatch run` puts
#                                      P/share/gpuwatch/python on PYTHONPATH)
#   P/share/doc/gpuwatch/              README.md and docs/ (as README.md links them)
# The directories are fixed (not GNUInstallDirs' multiarch libdir) because
# `gpuwatch run` finds the library at <its directory>/../lib, and both package
# files locate the prefix relative to themselves, so a prefix can be moved.
# The Debian package (cmake/GpuwatchPackage.cmake) holds the same files under /usr.
include(CMakePackageConfigHelpers)

# The Python wheel (python/pyproject.toml; scikit-build-core sets SKBUILD): the
# command, the library and the Python package in the environment's bin/, lib/
# and share/gpuwatch/python, the layout above, so that the command finds the
# other two as it does in any prefix. Component `wheel` only: the wheel
# installs that and no other (no headers, CMake or pkg-config files, docs).
if(SKBUILD)
  install(TARGETS gpuwatch LIBRARY DESTINATION ${SKBUILD_DATA_DIR}/lib COMPONENT wheel)
  install(TARGETS gpuwatch_cli RUNTIME DESTINATION ${SKBUILD_SCRIPTS_DIR} COMPONENT wheel)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/gpuwatch
    DESTINATION ${SKBUILD_DATA_DIR}/share/gpuwatch/python COMPONENT wheel FILES_MATCHING PATTERN "*.py")
  return()
endif()

install(TARGETS gpuwatch EXPORT gpuwatchTargets
  LIBRARY DESTINATION lib
  INCLUDES DESTINATION include)
install(TARGETS gpuwatch_cli RUNTIME DESTINATION bin)
install(FILES ${PROJECT_SOURCE_DIR}/include/gpuwatch/gpuwatch.h
  ${PROJECT_SOURCE_DIR}/include/gpuwatch/gtest.h DESTINATION include/gpuwatch)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/gpuwatch DESTINATION share/gpuwatch/python
  FILES_MATCHING PATTERN "*.py")

install(EXPORT gpuwatchTargets NAMESPACE gpuwatch:: DESTINATION lib/cmake/gpuwatch)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/gpuwatchConfig.cmake.in
  ${CMAKE_BINARY_DIR}/cmake/gpuwatchConfig.cmake
  INSTALL_DESTINATION lib/cmake/gpuwatch)
# 0.x: a new minor version may change the API.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/gpuwatchConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/gpuwatchConfig.cmake
  ${CMAKE_BINARY_DIR}/cmake/gpuwatchConfigVersion.cmake
  DESTINATION lib/cmake/gpuwatch)

configure_file(${CMAKE_CURRENT_LIST_DIR}/gpuwatch.pc.in ${CMAKE_BINARY_DIR}/cmake/gpuwatch.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/cmake/gpuwatch.pc DESTINATION lib/pkgconfig)

install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION share/doc/gpuwatch)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs DESTINATION share/doc/gpuwatch)  # README.md links docs/
