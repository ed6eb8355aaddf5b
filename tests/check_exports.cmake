cmake_policy(SET CMP0057 NEW)
# Fails unless every dynamic symbol libgpuwatch.so defines is gpuwatch_*,
# InitializeInjection (CUDA's), InitializeInjectionNvtx2 and
# InitializeInjectionNvtxExtension (NVTX's), or one of the CUPTI entry points
# and dlsym through which other CUPTI clients share CUPTI (interpose/cupti/cupti_exports.cc)
# (run as: cmake -DLIB=path -P check_exports.cmake).
execute_process(COMMAND nm -D --defined-only ${LIB} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${LIB}")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(names)
foreach(line IN LISTS lines)
  if(line MATCHES "^[0-9a-f]+ [A-Za-z] (.+)$")
    list(APPEND names ${CMAKE_MATCH_1})
  endif()
endforeach()
set(unexpected)
foreach(name IN LISTS names)
  if(NOT name MATCHES "^(gpuwatch_[A-Za-z0-9_]+|InitializeInjection|InitializeInjectionNvtx2|InitializeInjectionNvtxExtension|dlsym|cupti(Subscribe|Subscribe_v2|Unsubscribe|EnableCallback|EnableDomain|EnableAllDomains|GetCallbackState|Finalize|ActivityRegisterCallbacks|ActivityEnable|ActivityDisable|ActivityFlushAll|ActivityGetNextRecord|ActivityGetNumDroppedRecords|ActivitySetAttribute|ActivityGetAttribute))$")
    list(APPEND unexpected ${name})
  endif()
endforeach()
if(unexpected)
  message(FATAL_ERROR "libgpuwatch.so exports more than its API: ${unexpected}")
endif()
foreach(required InitializeInjection InitializeInjectionNvtx2 InitializeInjectionNvtxExtension gpuwatch_version gpuwatch_is_active gpuwatch_snapshot
                 gpuwatch_mark gpuwatch_pause gpuwatch_resume gpuwatch_live gpuwatch_point
                 gpuwatch_live_since gpuwatch_torch_blocks gpuwatch_phase_push gpuwatch_phase_pop dlsym cuptiSubscribe
                 cuptiSubscribe_v2 cuptiActivityRegisterCallbacks cuptiFinalize)
  if(NOT required IN_LIST names)
    message(FATAL_ERROR "libgpuwatch.so does not export ${required}")
  endif()
endforeach()
list(LENGTH names count)
message(STATUS "libgpuwatch.so exports ${count} symbols: ${names}")
