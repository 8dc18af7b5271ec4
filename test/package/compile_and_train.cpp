//===- compile_and_train.cpp - compiles a spec with the installed compiler -===//
//
// Compiles a .moe spec with moec::compileFile, takes two training steps and
// prints the losses: proof that the installed compiler library, its header
// and the package config are complete.
//
//===----------------------------------------------------------------------===//

#include <moec/Compiler.h>
#include <moec/Error.h>
#include <moec/Session.h>

#include <cstdio>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: compile_and_train SPEC.moe\n");
    return 2;
  }
  try {
    moec::Session session(moec::compileFile(argv[1]));
    auto data = moec::openDataSource(session.bundle().data(),
                                     session.bundle().model().vocab,
                                     session.seed());
    for (int i = 0; i < 2; ++i) {
      moec::StepResult r = session.trainStep(data->batch(i, 2, 16));
      std::printf("compiled step %lld loss %.4f\n",
                  static_cast<long long>(r.step), r.scalars.at("loss"));
    }
    // A bad spec is a moec::Error with located diagnostics.
    try {
      moec::compileSource("moe 1\nmodel m {\n", "bad.moe");
      std::printf("a bad spec compiled\n");
      return 1;
    } catch (const moec::Error &e) {
      std::printf("bad spec refused: %.40s\n", e.what());
    }
    return 0;
  } catch (const moec::Error &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
