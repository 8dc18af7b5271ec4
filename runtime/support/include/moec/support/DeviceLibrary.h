//===- DeviceLibrary.h - the embedded CUDA device library -------*- C++ -*-===//
//
// The hand-written CUDA building blocks every generated kernel is compiled
// with (runtime/device/*.cuh), embedded at build time. The compiler records
// the hash in each bundle; the runtime refuses kernels generated against a
// different library.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_SUPPORT_DEVICELIBRARY_H
#define MOEC_SUPPORT_DEVICELIBRARY_H

#include <string_view>

namespace moec {

/// The device library's source, all headers in dependency order.
std::string_view deviceLibrarySource();
/// SHA-256 of deviceLibrarySource(), in hex.
std::string_view deviceLibraryHash();

} // namespace moec

#endif // MOEC_SUPPORT_DEVICELIBRARY_H
