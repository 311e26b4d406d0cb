# Precompiled headers (docs/testing.md, "Build time"). Nearly every translation unit parses
# the same third-party headers (libstdc++, whose <chrono> alone brings <sstream>; Boost.Asio;
# OpenSSL; spdlog and fmt), which is most of what compiling floodgate costs. They are
# precompiled twice per build: once by floodgate_pch, whose header every library in src/
# reuses, and once by floodgate_test_pch (the same headers and GoogleTest, GoogleMock), which
# every unit-test executable reuses. A reused precompiled header needs the same compile
# definitions everywhere, so the definitions of spdlog, fmt, toml++ and llhttp apply to every
# target (they only change anything where those headers are included).
#
# -DFLOODGATE_PCH=OFF builds without; the fuzz build never uses them (its flags are its own),
# nor does clang-tidy's compilation database (scripts/tidy.sh), so that a file that forgets an
# #include still fails there.
option(FLOODGATE_PCH "Precompile the third-party headers most files include" ON)
if(FLOODGATE_FUZZ OR CMAKE_DISABLE_PRECOMPILE_HEADERS)
  set(FLOODGATE_PCH OFF)
endif()

foreach(dep spdlog::spdlog fmt::fmt)
  get_target_property(defs ${dep} INTERFACE_COMPILE_DEFINITIONS)
  if(defs)
    add_compile_definitions(${defs})
  endif()
endforeach()
add_compile_definitions(TOML_HEADER_ONLY=0 TOML_SHARED_LIB=1 LLHTTP_STRICT_MODE=1)
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND FLOODGATE_PCH)
  # ccache caches clang's precompiled header only without its timestamp check.
  add_compile_options(-Xclang -fno-pch-timestamp)
endif()

set(floodgate_pch_headers
  <algorithm> <array> <atomic> <chrono> <cstddef> <cstdint> <cstring> <deque> <functional>
  <map> <memory> <mutex> <optional> <span> <string> <string_view> <thread> <utility> <vector>
  <boost/asio/io_context.hpp> <boost/asio/ip/tcp.hpp> <boost/asio/steady_timer.hpp>
  <boost/system/error_code.hpp> <openssl/ssl.h> <fmt/format.h> <spdlog/spdlog.h>)

# floodgate_use_pch(TARGET [OWNER]): TARGET's C++ files include OWNER's precompiled header
# (default floodgate_pch, the libraries'; the unit tests name floodgate_test_pch).
function(floodgate_use_pch target)
  set(owner floodgate_pch)
  if(ARGC GREATER 1)
    set(owner ${ARGV1})
  endif()
  if(FLOODGATE_PCH)
    target_precompile_headers(${target} REUSE_FROM ${owner})
  endif()
endfunction()

# floodgate_pch_owner(NAME HEADERS... [LIBS ...]): an empty library that builds the header.
function(floodgate_pch_owner name)
  cmake_parse_arguments(arg "" "" "HEADERS;LIBS" ${ARGN})
  if(NOT FLOODGATE_PCH)
    return()
  endif()
  add_library(${name} STATIC ${PROJECT_SOURCE_DIR}/cmake/pch_owner.cpp)
  target_link_libraries(${name} PRIVATE floodgate_warnings Boost::headers OpenSSL::SSL
    spdlog::spdlog Threads::Threads ${arg_LIBS})
  target_precompile_headers(${name} PRIVATE ${arg_HEADERS})
endfunction()
