# Installs transformers.js for the client tests when it is missing
# (npm ci --ignore-scripts: versions pinned by package-lock.json; the
# onnxruntime-node it depends on ships the Linux x64 runtime).
if(EXISTS "${TJS_DIR}/node_modules/@huggingface/transformers/package.json")
  message(STATUS "transformers.js present")
  return()
endif()
find_program(NPM npm REQUIRED)
execute_process(COMMAND ${NPM} ci --ignore-scripts --no-audit --no-fund
                WORKING_DIRECTORY ${TJS_DIR} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "npm ci failed in ${TJS_DIR}")
endif()
