# SPDX-License-Identifier: MIT
# Uninstall what `cmake --install` installed (docs/building.md), from the install_manifest.txt
# it writes in the build directory (CMake's FAQ recipe). Two uses:
#   included (top-level builds, from cmake/CmsPackage.cmake): defines the target `uninstall`,
#     `cmake --build build --target uninstall` (as root for a system prefix);
#   as a script: cmake -DCMS_MANIFEST=build/install_manifest.txt -P cmake/CmsUninstall.cmake
# Removes every file and link listed, then the directories of the project left empty (those
# whose name contains "cumemsaver"). Fails, naming the file, when one cannot be removed.
if(CMAKE_SCRIPT_MODE_FILE)
  if(NOT CMS_MANIFEST OR NOT EXISTS "${CMS_MANIFEST}")
    message(FATAL_ERROR "uninstall: no ${CMS_MANIFEST} (run cmake --install first; it "
                        "lists what was installed)")
  endif()
  file(STRINGS "${CMS_MANIFEST}" _files)
  set(_dirs "")
  set(_n 0)
  foreach(_f IN LISTS _files)
    if(EXISTS "${_f}" OR IS_SYMLINK "${_f}")
      file(REMOVE "${_f}")
      if(EXISTS "${_f}" OR IS_SYMLINK "${_f}")
        message(FATAL_ERROR "uninstall: cannot remove ${_f}")
      endif()
      math(EXPR _n "${_n} + 1")
    endif()
    get_filename_component(_d "${_f}" DIRECTORY)
    list(APPEND _dirs "${_d}")
  endforeach()
  list(REMOVE_DUPLICATES _dirs)
  list(SORT _dirs ORDER DESCENDING) # deeper first
  foreach(_d IN LISTS _dirs)
    get_filename_component(_name "${_d}" NAME)
    file(GLOB _left "${_d}/*")
    if(IS_DIRECTORY "${_d}" AND NOT _left AND _name MATCHES "cumemsaver")
      file(REMOVE "${_d}") # an empty directory
      file(REMOVE_RECURSE "${_d}")
    endif()
  endforeach()
  message(STATUS "uninstall: removed ${_n} files listed in ${CMS_MANIFEST}")
  return()
endif()

if(NOT TARGET uninstall)
  add_custom_target(uninstall
    COMMAND ${CMAKE_COMMAND} -DCMS_MANIFEST=${PROJECT_BINARY_DIR}/install_manifest.txt
            -P ${CMAKE_CURRENT_LIST_FILE}
    COMMENT "Removing the files listed in install_manifest.txt"
    VERBATIM)
endif()
