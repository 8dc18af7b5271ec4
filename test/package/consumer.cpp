//===- consumer.cpp - runs a bundle with the installed runtime ------------===//
//
// Loads a bundle compiled by `moec compile`, takes two training steps and
// prints the losses: proof that the installed headers, library and package
// config are complete.
//
//===----------------------------------------------------------------------===//

#include <moec/Error.h>
#include <moec/Session.h>

#include <cstdio>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer BUNDLE\n");
    return 2;
  }
  try {
    moec::Session session(moec::Bundle::load(argv[1]));
    auto data = moec::openDataSource(session.bundle().data(),
                                     session.bundle().model().vocab,
                                     session.seed());
    for (int i = 0; i < 2; ++i) {
      moec::StepResult r = session.trainStep(data->batch(i, 2, 16));
      std::printf("step %lld loss %.4f\n", static_cast<long long>(r.step),
                  r.scalars.at("loss"));
    }
    return 0;
  } catch (const moec::Error &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
