# Writes OUT (a header defining FLOODGATE_REVISION) with the source tree's git revision, at every
# build, rewriting it only when the revision changes so that nothing rebuilds without cause.
# FLOODGATE_REVISION set on the command line wins (a package built from a tarball); a tree that
# is not a git checkout says "unknown"; uncommitted changes add "-dirty".
if(DEFINED REVISION AND NOT REVISION STREQUAL "")
  set(rev "${REVISION}")
else()
  execute_process(COMMAND git -C "${SRC}" rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR rev STREQUAL "")
    set(rev "unknown")
  else()
    execute_process(COMMAND git -C "${SRC}" status --porcelain --untracked-files=no
                    OUTPUT_VARIABLE changes ERROR_QUIET)
    if(NOT changes STREQUAL "")
      string(APPEND rev "-dirty")
    endif()
  endif()
endif()
set(text "// Written by cmake/revision.cmake at build time.\n#pragma once\n#define FLOODGATE_REVISION \"${rev}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
