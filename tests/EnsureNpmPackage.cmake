# Installs a test folder's npm packages when PACKAGE is missing from
# DIR/node_modules (cmake -DDIR=... -DPACKAGE=... -P EnsureNpmPackage.cmake).
# npm ci --ignore-scripts: the versions package-lock.json pins, no install
# scripts (onnxruntime-node ships the Linux x64 runtime; puppeteer-core
# downloads no browser, the browser test drives Debian's chromium).
if(EXISTS "${DIR}/node_modules/${PACKAGE}/package.json")
  message(STATUS "${PACKAGE} present")
  return()
endif()
find_program(NPM npm REQUIRED)
execute_process(COMMAND ${NPM} ci --ignore-scripts --no-audit --no-fund
                WORKING_DIRECTORY ${DIR} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "npm ci failed in ${DIR}")
endif()
