//===- StandardOutput.h - checked writes to standard output -----*- C++ -*-===//
//
// std::cout normally drops write errors: a bundle compiled to a full disk
// would exit 0. moec routes std::cout through a buffer that records the
// first failed write, and main() turns it into an error. A reader that goes
// away (`moec train ... | head -1`) is not one: SIGPIPE is ignored, the rest
// of the output is dropped, and the command still finishes its work (a
// training run still saves its checkpoint).
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TOOLS_MOEC_STANDARDOUTPUT_H
#define MOEC_TOOLS_MOEC_STANDARDOUTPUT_H

#include <string>

namespace moec::driver {

/// Ignores SIGPIPE and SIGXFSZ and makes std::cout report its write errors.
void installCheckedStandardOutput();

/// Flushes std::cout; the error to report, or "" when every write
/// succeeded or the only failure was a closed pipe.
std::string standardOutputError();

} // namespace moec::driver

#endif // MOEC_TOOLS_MOEC_STANDARDOUTPUT_H
