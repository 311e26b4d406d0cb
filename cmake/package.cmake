# The man pages, the installed documentation and the Debian package (scripts/package.sh).
#
# Man pages: floodgate(8) is written by hand (man/floodgate.8, the version filled in);
# floodgate.toml(5) is generated from docs/configuration.md (scripts/gen_manpage.py), so the
# page says what the reference says. Both are gzipped, as Debian installs man pages.
#
# With FLOODGATE_PACKAGE=ON (scripts/package.sh sets it), `cmake --install` and `cpack -G DEB`
# also install the files an installed system needs: /etc/floodgate/floodgate.toml (a conffile:
# an upgrade keeps the operator's edits) and /etc/logrotate.d/floodgate. Without it, the example
# configuration goes to the documentation only, so a `cmake --install` never overwrites an
# edited /etc file. The license: LICENSE, or in the package the Debian copyright file (below).

find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(man_dir ${PROJECT_BINARY_DIR}/man)
configure_file(man/floodgate.8 ${man_dir}/floodgate.8 @ONLY)
add_custom_command(OUTPUT ${man_dir}/floodgate.8.gz ${man_dir}/floodgate.toml.5.gz
  COMMAND ${Python3_EXECUTABLE} -B ${PROJECT_SOURCE_DIR}/scripts/gen_manpage.py
          ${PROJECT_SOURCE_DIR}/docs/configuration.md ${man_dir}/floodgate.toml.5
          --version ${PROJECT_VERSION}
  COMMAND sh -c "gzip -9n -c floodgate.8 > floodgate.8.gz && gzip -9n -c floodgate.toml.5 > floodgate.toml.5.gz"
  WORKING_DIRECTORY ${man_dir}
  DEPENDS ${PROJECT_SOURCE_DIR}/scripts/gen_manpage.py ${PROJECT_SOURCE_DIR}/docs/configuration.md
          ${man_dir}/floodgate.8
  COMMENT "man pages floodgate(8) and floodgate.toml(5)" VERBATIM)
add_custom_target(floodgate_man ALL DEPENDS ${man_dir}/floodgate.8.gz ${man_dir}/floodgate.toml.5.gz)
install(FILES ${man_dir}/floodgate.8.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
install(FILES ${man_dir}/floodgate.toml.5.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man5)

# What an operator reads, under /usr/share/doc/floodgate/ (the project's own notes, STATUS and
# BENCHMARKS, stay in the source tree).
install(FILES README.md CHANGELOG.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES docs/configuration.md docs/operations.md docs/metrics.md docs/resilience.md
  docs/http.md docs/architecture.md DESTINATION ${CMAKE_INSTALL_DOCDIR})

# The license goes with the documentation once: a plain install gets LICENSE; the Debian package
# gets it as /usr/share/doc/floodgate/copyright (packaging/debian/copyright, Debian's
# machine-readable format, which also names the code compiled in from elsewhere) and not as a
# second file, which lintian reports (extra-license-file).
option(FLOODGATE_PACKAGE "Install /etc/floodgate/floodgate.toml and /etc/logrotate.d/floodgate (the Debian package)" OFF)
if(NOT FLOODGATE_PACKAGE)
  install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
  return()
endif()
install(FILES packaging/debian/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})

# CMAKE_INSTALL_FULL_SYSCONFDIR is /etc for the prefix /usr (GNUInstallDirs).
install(FILES config/floodgate.toml DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/floodgate)
install(FILES config/floodgate.logrotate DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/logrotate.d
  RENAME floodgate)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME floodgate)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "floodgate maintainers <floodgate@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "HTTP/1.1 reverse proxy built for overload control")
# The extended description (CPack puts the summary above it and indents it as dpkg wants).
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
  "floodgate forwards HTTP/1.1 requests to pools of backends and, when the offered\nload is more than the backends can take, keeps serving what fits at healthy\nlatency and turns the rest away at once with a status that says why.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION httpd)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://floodgate.invalid/")
# The shared libraries' packages, as dpkg-shlibdeps finds them (libsystemd0, liburing2, libssl3,
# libstdc++6, libc6); systemd for systemd-sysusers in postinst.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "systemd")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "logrotate")
# The binary stripped, its debug symbols in floodgate-dbgsym (.ddeb) under /usr/lib/debug/.build-id
# (the build must carry them: scripts/package.sh builds RelWithDebInfo). Not with
# CPACK_STRIP_FILES, which would strip before the split.
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/packaging/debian/conffiles
  ${PROJECT_SOURCE_DIR}/packaging/debian/postinst
  ${PROJECT_SOURCE_DIR}/packaging/debian/prerm
  ${PROJECT_SOURCE_DIR}/packaging/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_OUTPUT_FILE_PREFIX ${PROJECT_BINARY_DIR}/packages)
include(CPack)
