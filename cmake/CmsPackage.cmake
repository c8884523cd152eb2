# SPDX-License-Identifier: MIT
# Debian packages with CPack (`cpack -G DEB` in a build configured with
# -DCMAKE_INSTALL_PREFIX=/usr; tools/scripts/test-packages.sh, docs/packaging.md), one per
# install component:
#   runtime -> libcumemsaver1     libcumemsaver.so.1 (SONAME), the preload and simulation
#                                 libraries in <libdir>/cumemsaver/; shlibs and symbols files
#   dev     -> libcumemsaver-dev  headers, the .so link, .a (CMS_BUILD_STATIC), .pc, CMake
#                                 package, cumemsaver(7)
#   tools   -> cumemsaver-tools   cmsctl, cms-bench and their manual pages
# Each package carries /usr/share/doc/<package>/copyright (the MIT licence) and
# changelog.Debian.gz; libcumemsaver1 also the project's CHANGELOG.md as changelog.gz. These
# go into the packages only, not into a plain `cmake --install`.
# Also the target `uninstall` (cmake/CmsUninstall.cmake), for top-level builds as the packages.
include(${CMAKE_CURRENT_LIST_DIR}/CmsUninstall.cmake)

set(CMS_DEB_RUNTIME libcumemsaver${PROJECT_VERSION_MAJOR})
set(CMS_DEB_DEV libcumemsaver-dev)
set(CMS_DEB_TOOLS cumemsaver-tools)
set(CMS_DEB_REVISION 1)
set(CMS_DEB_MAINTAINER "The cumemsaver authors <cumemsaver@users.noreply.github.com>")
set(_deb ${PROJECT_BINARY_DIR}/debian)
set(_src ${PROJECT_SOURCE_DIR}/packaging/debian)

# changelog.Debian.gz, compressed as Debian policy wants it (gzip -9n: no name, no time).
configure_file(${_src}/changelog.in ${_deb}/changelog.Debian @ONLY)
find_program(CMS_GZIP gzip)
if(CMS_GZIP)
  execute_process(COMMAND ${CMS_GZIP} -9nf -k ${_deb}/changelog.Debian)
endif()

# The symbols file, from the linker version script: each node CMS_X.Y is the release X.Y.0
# that introduced its functions.
file(STRINGS ${PROJECT_SOURCE_DIR}/abi/cumemsaver.map _map)
set(_symbols "libcumemsaver.so.${PROJECT_VERSION_MAJOR} ${CMS_DEB_RUNTIME} #MINVER#\n")
set(_node "")
foreach(_line IN LISTS _map)
  if(_line MATCHES "^(CMS_([0-9]+)\\.([0-9]+)) {")
    set(_node ${CMAKE_MATCH_1})
    set(_ver ${CMAKE_MATCH_2}.${CMAKE_MATCH_3}.0)
    string(APPEND _symbols " ${_node}@${_node} ${_ver}\n")
  elseif(_node AND _line MATCHES "^[ \t]+(cms_[a-z0-9_]+);$")
    string(APPEND _symbols " ${CMAKE_MATCH_1}@${_node} ${_ver}\n")
  elseif(_line MATCHES "^}")
    set(_node "")
  endif()
endforeach()
file(WRITE ${_deb}/symbols "${_symbols}")
# dpkg-deb wants control files 0644 and maintainer scripts 0755.
file(CHMOD ${_deb}/symbols PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
file(COPY ${_src}/triggers DESTINATION ${_deb}
     FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
if(CMS_GZIP) # the upstream changelog, as Debian names it
  execute_process(COMMAND ${CMS_GZIP} -9nc ${PROJECT_SOURCE_DIR}/CHANGELOG.md
                  OUTPUT_FILE ${_deb}/changelog.gz)
endif()

# The files only a Debian package has (/usr/share/doc/<package>/): EXCLUDE_FROM_ALL, so a
# plain `cmake --install` leaves them out; CPack installs component by component, which
# includes them.
foreach(_c runtime dev tools)
  string(TOUPPER ${_c} _C)
  set(_pkg ${CMS_DEB_${_C}})
  install(FILES ${_src}/copyright ${_deb}/changelog.Debian.gz
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${_pkg} COMPONENT ${_c} EXCLUDE_FROM_ALL)
  set(CPACK_DEBIAN_${_C}_PACKAGE_NAME ${_pkg})
  set(CPACK_DEBIAN_${_C}_FILE_NAME DEB-DEFAULT)
endforeach()
install(FILES ${_deb}/changelog.gz
        DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${CMS_DEB_RUNTIME} COMPONENT runtime
        EXCLUDE_FROM_ALL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME cumemsaver)
set(CPACK_PACKAGE_VENDOR "The cumemsaver authors")
set(CPACK_PACKAGE_CONTACT "${CMS_DEB_MAINTAINER}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_COMPONENTS_ALL runtime dev tools)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${CMS_DEB_REVISION})
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${CMS_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/cumemsaver/cumemsaver")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SOURCE cumemsaver)
# Depends from the ELF files (dpkg-shlibdeps), and between the packages: the tools need the
# library of this very version (they compile the driver loader and wire protocol in).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_DEV_PACKAGE_SHLIBDEPS OFF) # no ELF file of its own but the .a
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR})
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS OFF)
set(_exact "${CMS_DEB_RUNTIME} (= ${PROJECT_VERSION}-${CMS_DEB_REVISION})")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${_exact}")
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "${_exact}")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION utils)
# shlibs (libcumemsaver 1 libcumemsaver1 (>= 1.1.0)) and symbols for the library package;
# The ldconfig trigger (lintian wants it); CPack adds postinst/postrm scripts that run ldconfig
# as well (lintian warns maintscript-calls-ldconfig; harmless).
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA "${_deb}/symbols;${_deb}/triggers")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_STRIP_FILES ON) # debug information belongs in -dbgsym packages, not here
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
    "release GPU memory and take it back at the same virtual addresses
cumemsaver releases the physical memory behind tagged regions of CUDA device
memory (model weights, KV cache) and maps it back at the same virtual
addresses, so that CUDA graphs and raw pointers stay valid. Content is
discarded, zeroed, saved to host memory or to disk, per region.

This package holds the shared library, the LD_PRELOAD interposer of
cudaMalloc/cudaFree and a host simulation of the CUDA driver for tests.")
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "release GPU memory and keep its addresses - development files
cumemsaver releases the physical memory behind tagged regions of CUDA device
memory and maps it back at the same virtual addresses.

This package holds the C headers, the link library, pkg-config and CMake
package files, and the cumemsaver(7) manual page.")
set(CPACK_DEBIAN_TOOLS_DESCRIPTION
    "release GPU memory and keep its addresses - command-line tools
cumemsaver releases the physical memory behind tagged regions of CUDA device
memory and maps it back at the same virtual addresses.

This package holds cmsctl (demo, and pause/resume/status of a running
process through its control socket) and cms-bench (measurements).")
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "${CPACK_DEBIAN_RUNTIME_DESCRIPTION}")
set(CPACK_COMPONENT_DEV_DESCRIPTION "${CPACK_DEBIAN_DEV_DESCRIPTION}")
set(CPACK_COMPONENT_TOOLS_DESCRIPTION "${CPACK_DEBIAN_TOOLS_DESCRIPTION}")
set(CPACK_PACKAGE_FILE_NAME cumemsaver-${PROJECT_VERSION})
include(CPack)
