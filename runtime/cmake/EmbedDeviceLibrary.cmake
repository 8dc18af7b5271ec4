# Embeds the device library (runtime/device/*.cuh) into a C++ source file as
# one string, in dependency order, with a stable hash and no timestamp: the
# runtime reads no files at run time.
#
# Invoked in script mode:
#   cmake -DOUTPUT=<file.cpp> -DSOURCES="<a.cuh;b.cuh;...>" -P EmbedDeviceLibrary.cmake

set(text "")
foreach(source IN LISTS SOURCES)
  file(READ "${source}" content)
  get_filename_component(name "${source}" NAME)
  string(APPEND text "// ---- ${name} ----\n${content}\n")
endforeach()
string(SHA256 hash "${text}")
string(FIND "${text}" ")moec_devlib\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "the device library contains the raw-string delimiter")
endif()
set(out "// Generated from runtime/device by EmbedDeviceLibrary.cmake. Do not edit.\n")
string(APPEND out "#include \"moec/support/DeviceLibrary.h\"\n\n")
string(APPEND out "namespace moec {\n\n")
string(APPEND out "std::string_view deviceLibrarySource() {\n")
string(APPEND out "  static const char text[] = R\"moec_devlib(${text})moec_devlib\";\n")
string(APPEND out "  return {text, sizeof(text) - 1};\n}\n\n")
string(APPEND out "std::string_view deviceLibraryHash() { return \"${hash}\"; }\n\n")
string(APPEND out "} // namespace moec\n")
file(WRITE "${OUTPUT}.tmp" "${out}")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
