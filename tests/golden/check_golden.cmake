# One golden case (docs/golden.md): simulate tests/golden/<case>/scenario.yaml and compare the
# timeline with expected.timeline byte for byte; on a difference print a unified diff and how to
# regenerate.
#   cmake -DMOESIM=<moesim> -DCASE_DIR=<tests/golden/case> -DOUT=<file> -P check_golden.cmake
# A whole-step case has step.args instead: `moesim simulate` flags on one line (paths relative to
# the case folder, presets by name), run in the case folder.
if(EXISTS ${CASE_DIR}/step.args)
  # One line of flags without quotes, read as regenerate.sh reads it (bash `read -a`).
  file(STRINGS ${CASE_DIR}/step.args lines)
  list(LENGTH lines count)
  if(NOT count EQUAL 1)
    message(FATAL_ERROR "${CASE_DIR}/step.args: must be one line of flags, has ${count}")
  endif()
  if(lines MATCHES "[\"']")
    message(FATAL_ERROR "${CASE_DIR}/step.args: no quotes (the flags are split at spaces)")
  endif()
  separate_arguments(args UNIX_COMMAND "${lines}")
  execute_process(COMMAND ${MOESIM} simulate ${args} --timeline ${OUT} WORKING_DIRECTORY ${CASE_DIR}
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  set(what "moesim simulate ${lines}")
else()
  execute_process(COMMAND ${MOESIM} simulate --run ${CASE_DIR}/scenario.yaml --timeline ${OUT}
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  set(what "moesim simulate --run ${CASE_DIR}/scenario.yaml")
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${what} exited ${rc}:\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${CASE_DIR}/expected.timeline ${OUT} RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  get_filename_component(case ${CASE_DIR} NAME)
  find_program(DIFF diff)
  find_program(HEAD head)
  if(DIFF AND HEAD)
    message("--- expected, +++ now (the first 200 lines of the diff):")
    execute_process(COMMAND ${DIFF} -u ${CASE_DIR}/expected.timeline ${OUT} COMMAND ${HEAD} -n 200)
  endif()
  message(FATAL_ERROR "the timeline of golden case ${case} changed. If the change is intended, regenerate "
                      "it in a commit of its own that says why: tests/golden/regenerate.sh BUILD_DIR ${case}")
endif()
