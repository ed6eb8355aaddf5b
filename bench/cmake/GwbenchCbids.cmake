# gwbench_generate_cbids(<output>): writes the callback ids gpuwatch enables,
# read from the X-macro lists GPUWATCH_RUNTIME_CBIDS and GPUWATCH_DRIVER_CBIDS
# in interpose/callbacks.cc, as GWBENCH_RT(name) / GWBENCH_DRV(name) lines.
# Used by the null CUPTI client (bench/) and the callback recorder
# (tests/gpu/), so that neither can drift from what gpuwatch enables. The file
# is rewritten only when its content changes; configure reruns when
# callbacks.cc changes.
function(gwbench_generate_cbids output)
  set(callbacks_cc ${PROJECT_SOURCE_DIR}/interpose/callbacks.cc)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${callbacks_cc})
  file(READ ${callbacks_cc} src)
  set(inc "// Generated from interpose/callbacks.cc by bench/cmake/GwbenchCbids.cmake.\n")
  foreach(list RUNTIME DRIVER)
    # The macro's body: its #define line and every continuation line after it.
    string(REGEX MATCH "#define GPUWATCH_${list}_CBIDS\\(X\\)[^\n]*\n([^\n]*\\\\\n)*[^\n]*\n"
           block "${src}")
    string(REGEX MATCHALL "X\\([A-Za-z0-9_]+\\)" items "${block}")
    list(LENGTH items count)
    if(count EQUAL 0)
      message(FATAL_ERROR "no GPUWATCH_${list}_CBIDS list found in ${callbacks_cc}")
    endif()
    set(macro GWBENCH_RT)
    if(list STREQUAL "DRIVER")
      set(macro GWBENCH_DRV)
    endif()
    foreach(item IN LISTS items)
      string(REGEX REPLACE "^X" "${macro}" item "${item}")
      string(APPEND inc "${item}\n")
    endforeach()
  endforeach()
  file(CONFIGURE OUTPUT ${output} CONTENT "${inc}" @ONLY)
endfunction()
