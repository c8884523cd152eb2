# SPDX-License-Identifier: MIT
# Writes and installs cumemsaver.pc at install time (included by install(CODE) from the top
# CMakeLists.txt), so that its paths are those of the prefix actually installed to.
# In: CMAKE_INSTALL_PREFIX (the install's), CMS_PC_IN, CMS_PC_TMP, CMS_PC_LIBDIR and
# CMS_PC_INCLUDEDIR (GNUInstallDirs values: relative to the prefix, or absolute),
# CMS_PC_VERSION, CMS_PC_RELOCATABLE (the environment variable CMS_PKGCONFIG_RELOCATABLE,
# when set, overrides it).
#  - absolute (default): prefix=/usr, libdir=${prefix}/lib/x86_64-linux-gnu; an absolute
#    libdir or includedir is written as it is;
#  - relocatable: prefix=${pcfiledir}/../.., libdir and includedir below ${prefix}; not
#    possible with an absolute libdir or includedir (then absolute, with a message).
if(DEFINED ENV{CMS_PKGCONFIG_RELOCATABLE})
  set(CMS_PC_RELOCATABLE "$ENV{CMS_PKGCONFIG_RELOCATABLE}")
endif()
set(_prefix "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "(.)/+$" "\\1" _prefix "${_prefix}")
foreach(_d LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMS_PC_${_d}}")
    set(_full_${_d} "${CMS_PC_${_d}}")
    set(CMS_PC_${_d}_VALUE "${CMS_PC_${_d}}")
    set(_absolute_dir 1)
  else()
    set(_full_${_d} "${_prefix}/${CMS_PC_${_d}}")
    set(CMS_PC_${_d}_VALUE "\${prefix}/${CMS_PC_${_d}}")
  endif()
endforeach()
set(_pcdir "${_full_LIBDIR}/pkgconfig")
if(CMS_PC_RELOCATABLE AND _absolute_dir)
  message(STATUS "cumemsaver.pc: absolute paths (an absolute libdir or includedir cannot be "
                 "relative to the .pc file)")
  set(CMS_PC_RELOCATABLE OFF)
endif()
if(CMS_PC_RELOCATABLE)
  file(RELATIVE_PATH _rel "${_pcdir}" "${_prefix}")
  string(REGEX REPLACE "/$" "" _rel "${_rel}")
  set(CMS_PC_PREFIX "\${pcfiledir}/${_rel}")
else()
  set(CMS_PC_PREFIX "${_prefix}")
endif()
configure_file("${CMS_PC_IN}" "${CMS_PC_TMP}/cumemsaver.pc" @ONLY)
file(INSTALL DESTINATION "${_pcdir}" TYPE FILE FILES "${CMS_PC_TMP}/cumemsaver.pc")
