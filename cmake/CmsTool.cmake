# SPDX-License-Identifier: MIT
# cms_tool(NAME SOURCES file... [LIBS lib...] [IPC] [INSTALL]): one program of the tree
# (cmsctl, cms-bench, the IPC demo, the lab's experiments), built the same way for all:
#  - links libcumemsaver and compiles the driver loader in again ($<TARGET_OBJECTS:
#    cms_driver_obj>; IPC: the wire protocol and socket transport too, cms_ipc_obj), so that
#    it can make its own driver calls through the library the context loads; headers
#    through CMS_TOOL_INCLUDES;
#  - links cms_tool_common (tools/common: sizes, option errors, where the simulation is)
#    and LIBS;
#  - is built into CMS_TOOL_BINDIR (<build>/bin) with an rpath to the library there, and
#    to ../lib installed ($ORIGIN/CMS_TOOL_LIB_REL; none for /usr, CMS_SYSTEM_PREFIX);
#    INSTALL: installed into bin/.
# Every program lands in the one directory CMS_TOOL_BINDIR, so that cms_tool_common's
# relative path to the host simulation (CMS_SIM_BUILD_REL) holds for all of them.

set(CMS_TOOL_BINDIR ${PROJECT_BINARY_DIR}/bin)
file(RELATIVE_PATH CMS_TOOL_LIB_REL "${CMAKE_INSTALL_FULL_BINDIR}" "${CMAKE_INSTALL_FULL_LIBDIR}")

function(cms_tool name)
  cmake_parse_arguments(T "IPC;INSTALL" "" "SOURCES;LIBS" ${ARGN})
  set(objects $<TARGET_OBJECTS:cms_driver_obj>)
  if(T_IPC)
    list(APPEND objects $<TARGET_OBJECTS:cms_ipc_obj>)
  endif()
  add_executable(${name} ${T_SOURCES} ${objects})
  target_include_directories(${name} PRIVATE ${CMS_TOOL_INCLUDES} ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_definitions(${name} PRIVATE _GNU_SOURCE)
  target_link_libraries(${name} PRIVATE ${T_LIBS} cms_tool_common cumemsaver Threads::Threads
                        ${CMAKE_DL_LIBS})
  set_target_properties(${name} PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${CMS_TOOL_BINDIR}
    BUILD_RPATH "$<TARGET_FILE_DIR:cumemsaver>"
    INSTALL_RPATH "")
  if(NOT CMS_SYSTEM_PREFIX)
    set_target_properties(${name} PROPERTIES INSTALL_RPATH "$ORIGIN/${CMS_TOOL_LIB_REL}")
  endif()
  if(TARGET cumemsaver-sim)
    add_dependencies(${name} cumemsaver-sim) # found next to it at run time (tool_sim_path)
  endif()
  if(T_INSTALL)
    install(TARGETS ${name} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
  endif()
endfunction()
