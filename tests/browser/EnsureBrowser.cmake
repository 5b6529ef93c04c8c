# Installs puppeteer-core for the browser test when it is missing
# (npm ci --ignore-scripts: the version pinned by package-lock.json; it
# downloads no browser, the test drives Debian's chromium).
if(EXISTS "${BROWSER_DIR}/node_modules/puppeteer-core/package.json")
  message(STATUS "puppeteer-core present")
  return()
endif()
find_program(NPM npm REQUIRED)
execute_process(COMMAND ${NPM} ci --ignore-scripts --no-audit --no-fund
                WORKING_DIRECTORY ${BROWSER_DIR} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "npm ci failed in ${BROWSER_DIR}")
endif()
