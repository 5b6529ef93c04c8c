# The shared fixtures the suite reads in place (../shared, never copied) and
# the test lists derived from them (docs/testing.md, "How a fixture joins").
#
# Every case folder of ../shared/hf-golden, ../shared/hf-golden-vlm, ... is a
# test case by construction: the lists below come from globs, not from hand
# lists, and tests/check_coverage.py (ctest `tests.coverage`) fails when a
# fixture has no test of a kind that applies to it, unless
# tests/exclusions.txt excludes it with a reason. A missing fixture folder,
# node or Python with numpy and onnx is a configure error, not skipped tests:
# a suite that passes on a clone without them would say nothing.

set(ARCHC_SHARED "${PROJECT_SOURCE_DIR}/../shared" CACHE PATH
    "The shared fixtures (hf-golden, hf-golden-vlm, ...)")
set(ARCHC_HF_GOLDEN "${ARCHC_SHARED}/hf-golden" CACHE PATH
    "Hugging Face golden fixtures")
set(ARCHC_HF_GOLDEN_VLM "${ARCHC_SHARED}/hf-golden-vlm" CACHE PATH
    "Hugging Face golden fixtures of vision-language models")
set(ARCHC_PREQUANT "${ARCHC_SHARED}/prequant" CACHE PATH
    "GPTQ, AWQ and compressed-tensors checkpoints (tests/quant)")
option(ARCHC_REQUIRE_FIXTURES
       "Stop configuring when the shared fixtures, node or python are missing"
       ON)

function(archc_require what found hint)
  if(NOT found)
    if(ARCHC_REQUIRE_FIXTURES)
      message(FATAL_ERROR "${what} is missing: ${hint} (or configure with "
                          "-DARCHC_REQUIRE_FIXTURES=OFF to build without the "
                          "fixture tests)")
    else()
      message(WARNING "${what} is missing: fixture tests are not registered")
    endif()
  endif()
endfunction()

foreach(dir ${ARCHC_HF_GOLDEN} ${ARCHC_HF_GOLDEN_VLM} ${ARCHC_PREQUANT})
  set(present FALSE)
  if(EXISTS ${dir}/index.md)
    set(present TRUE)
  endif()
  archc_require("fixture folder ${dir}" ${present}
                "the suite reads ../shared in place")
endforeach()
find_program(ARCHC_NODE node)
set(node_found FALSE)
if(ARCHC_NODE)
  set(node_found TRUE)
endif()
archc_require("node" ${node_found} "install Debian's nodejs")
set(ARCHC_REF_PYTHON /usr/bin/python3 CACHE FILEPATH
    "Python 3 with numpy and onnx (Debian's python3-numpy, python3-onnx)")
set(python_ok FALSE)
if(EXISTS ${ARCHC_REF_PYTHON})
  execute_process(COMMAND ${ARCHC_REF_PYTHON} -c "import numpy, onnx"
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(rc EQUAL 0)
    set(python_ok TRUE)
  endif()
endif()
archc_require("${ARCHC_REF_PYTHON} with numpy and onnx" ${python_ok}
              "install python3-numpy and python3-onnx")
if(node_found AND python_ok AND EXISTS ${ARCHC_HF_GOLDEN}/index.md)
  set(ARCHC_FIXTURE_TESTS TRUE)
else()
  set(ARCHC_FIXTURE_TESTS FALSE)
endif()

# archc_fixture_cases(DIR OUT_CASES OUT_CLASSES): the case folders of DIR
# (those with a config.json and expected.safetensors), sorted, and the
# architectures[0] class of each (same order).
function(archc_fixture_cases dir out_cases out_classes)
  file(GLOB configs ${dir}/*/config.json)
  list(SORT configs)
  set(cases)
  set(classes)
  foreach(cfg ${configs})
    get_filename_component(case_dir ${cfg} DIRECTORY)
    if(NOT EXISTS ${case_dir}/expected.safetensors)
      continue()
    endif()
    get_filename_component(case ${case_dir} NAME)
    file(READ ${cfg} text)
    string(JSON cls ERROR_VARIABLE err GET "${text}" architectures 0)
    if(err)
      # Python's json writes Infinity (Mamba-2's time_step_limit), which
      # CMake's parser refuses: the class by its key then.
      string(REGEX MATCH "\"architectures\"[ \t\r\n]*:[ \t\r\n]*\\[[ \t\r\n]*\"([^\"]*)\""
             found "${text}")
      set(cls "${CMAKE_MATCH_1}")
    endif()
    if(cls STREQUAL "")
      set(cls "none")
    endif()
    list(APPEND cases ${case})
    list(APPEND classes "${cls}")
  endforeach()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${dir})
  set(${out_cases} ${cases} PARENT_SCOPE)
  set(${out_classes} ${classes} PARENT_SCOPE)
endfunction()

# archc_family_representatives(CASES CLASSES OUT): one case per class (the
# `<x>-base` case when there is one, else the first), for the test kinds that
# run once per family.
function(archc_family_representatives cases classes out)
  set(picked)
  set(seen)
  list(LENGTH cases n)
  if(n EQUAL 0)
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  math(EXPR last "${n} - 1")
  # First pass: the -base cases; second: the first case of a class without.
  foreach(pass base any)
    foreach(i RANGE ${last})
      list(GET cases ${i} case)
      list(GET classes ${i} cls)
      if(cls IN_LIST seen)
        continue()
      endif()
      if(pass STREQUAL "base" AND NOT case MATCHES "-base$")
        continue()
      endif()
      list(APPEND seen ${cls})
      list(APPEND picked ${case})
    endforeach()
  endforeach()
  list(SORT picked)
  set(${out} ${picked} PARENT_SCOPE)
endfunction()

# archc_excluded(KIND CASE OUT): whether tests/exclusions.txt excludes the
# test kind for the case ("KIND CASE reason" lines).
file(STRINGS ${CMAKE_CURRENT_LIST_DIR}/exclusions.txt archc_exclusions
     REGEX "^[a-z0-9_.-]+ ")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${CMAKE_CURRENT_LIST_DIR}/exclusions.txt)
function(archc_excluded kind case out)
  set(result FALSE)
  foreach(line ${archc_exclusions})
    if(line MATCHES "^${kind} ${case} ")
      set(result TRUE)
    endif()
  endforeach()
  set(${out} ${result} PARENT_SCOPE)
endfunction()
