# Generates the name tables of the fake CUPTI (cuptiGetCallbackName, cuptiGetResultString)
# from the CUPTI headers of the toolkit in use, at configure time.

function(_gwsim_enum_entries header prefix keep_prefix out_var)
  file(STRINGS "${header}" lines REGEX "^[ \t]*${prefix}[A-Za-z0-9_]+[ \t]*=[ \t]*[0-9]+")
  set(entries "")
  foreach(line IN LISTS lines)
    if(line MATCHES "${prefix}([A-Za-z0-9_]+)[ \t]*=[ \t]*([0-9]+)")
      set(name "${CMAKE_MATCH_1}")
      set(value "${CMAKE_MATCH_2}")
      if(NOT name STREQUAL "INVALID" AND NOT name STREQUAL "SIZE")
        if(keep_prefix)
          set(name "${prefix}${name}")
        endif()
        string(APPEND entries "    {${value}u, \"${name}\"},\n")
      endif()
    endif()
  endforeach()
  set(${out_var} "${entries}" PARENT_SCOPE)
endfunction()

# gwsim_generate_cupti_names(<cupti include dir> <output file>)
function(gwsim_generate_cupti_names include_dir output)
  _gwsim_enum_entries("${include_dir}/cupti_runtime_cbid.h" "CUPTI_RUNTIME_TRACE_CBID_" FALSE
                      runtime)
  _gwsim_enum_entries("${include_dir}/cupti_driver_cbid.h" "CUPTI_DRIVER_TRACE_CBID_" FALSE
                      driver)
  _gwsim_enum_entries("${include_dir}/cupti_result.h" "CUPTI_" TRUE results)
  if(runtime STREQUAL "" OR driver STREQUAL "" OR results STREQUAL "")
    message(FATAL_ERROR "gwsim: could not read the CUPTI enums under ${include_dir}")
  endif()
  file(CONFIGURE OUTPUT "${output}" CONTENT
"// Generated at configure time by tests/sim/cmake/GwsimCuptiNames.cmake from
// ${include_dir}. Do not edit.
static const NameEntry kRuntimeNames[] = {
${runtime}};
static const NameEntry kDriverNames[] = {
${driver}};
static const NameEntry kResultNames[] = {
${results}};
" @ONLY)
endfunction()
