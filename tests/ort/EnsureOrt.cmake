# Installs onnxruntime-node for the ORT tests when it is missing
# (npm ci --ignore-scripts: the package ships the Linux x64 runtime).
if(EXISTS "${ORT_DIR}/node_modules/onnxruntime-node/package.json")
  message(STATUS "onnxruntime-node present")
  return()
endif()
find_program(NPM npm REQUIRED)
execute_process(COMMAND ${NPM} ci --ignore-scripts --no-audit --no-fund
                WORKING_DIRECTORY ${ORT_DIR} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "npm ci failed in ${ORT_DIR}")
endif()
