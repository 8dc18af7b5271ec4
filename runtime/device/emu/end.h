//===- end.h - emu prelude: the end -----------------------------*- C++ -*-===//
//
// Closes the include guard that prelude.h opens; the last part.
//
//===----------------------------------------------------------------------===//

#endif // MOEC_EMU_PRELUDE_H
