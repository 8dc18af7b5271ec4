//===- CommandLineTest.cpp - the moec command line ------------------------===//

#include "CommandLine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace moec;
using ::testing::HasSubstr;

namespace {

class Sample : public cli::Command {
public:
  Sample() : Command("sample", "A command for tests.") {
    positional("FILE", "the input", input);
    option("steps", "N", "Steps", steps).atLeast(int64_t{0});
    option("seed", "S", "Seed", seed);
    option("temperature", "T", "Temperature", temperature).atLeast(0.0);
    option("device", "DEVICE", "Device", device).oneOf({"cpu", "cuda", "emu"});
    option("save", "CKPT", "Checkpoint", save).nonEmpty();
    option("weights", "CKPT", "Weights", weights).required();
    list("program", "P", "Programs", programs);
    flag("v", "Verbose", verbose);
  }
  int run() override { return 0; }

  std::string input, device = "cpu", save, weights;
  int64_t steps = -1;
  uint64_t seed = 0;
  double temperature = 0;
  std::vector<std::string> programs;
  bool verbose = false;
};

std::string usageError(std::vector<std::string> args) {
  Sample s;
  try {
    s.parse(args);
  } catch (const cli::UsageError &e) {
    return e.what();
  }
  return "";
}

TEST(CommandLine, ParsesEveryForm) {
  Sample s;
  s.parse({"model.json", "--steps", "12", "-seed=7", "--temperature=0.5",
           "--device", "emu", "--weights", "w.safetensors", "--program", "a",
           "--program=b", "-v"});
  EXPECT_EQ(s.input, "model.json");
  EXPECT_EQ(s.steps, 12);
  EXPECT_EQ(s.seed, 7u);
  EXPECT_DOUBLE_EQ(s.temperature, 0.5);
  EXPECT_EQ(s.device, "emu");
  EXPECT_EQ(s.weights, "w.safetensors");
  EXPECT_EQ(s.programs, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(s.verbose);
  EXPECT_TRUE(s.given("seed"));
  EXPECT_FALSE(s.given("save"));
}

TEST(CommandLine, RefusesBadValuesNamingTheFlag) {
  const std::string w = "--weights=x";
  EXPECT_EQ(usageError({"f", w, "--steps", "-5"}),
            "--steps must be at least 0, got -5");
  EXPECT_EQ(usageError({"f", w, "--steps", "12x"}),
            "--steps expects an integer, got '12x'");
  EXPECT_EQ(usageError({"f", w, "--seed", "-1"}),
            "--seed must be at least 0, got -1");
  EXPECT_EQ(usageError({"f", w, "--temperature", "nan"}),
            "--temperature must be a finite number, got 'nan'");
  EXPECT_EQ(usageError({"f", w, "--temperature", "1e999"}),
            "--temperature must be a finite number, got '1e999'");
  EXPECT_EQ(usageError({"f", w, "--temperature", "-0.5"}),
            "--temperature must be at least 0, got -0.5");
  EXPECT_EQ(usageError({"f", w, "--save", ""}), "--save needs a non-empty CKPT");
  EXPECT_EQ(usageError({"f", w, "--device", "gpu"}),
            "--device must be one of cpu, cuda, emu, got 'gpu'");
  EXPECT_EQ(usageError({"f", w, "--device", "CPU"}),
            "--device must be one of cpu, cuda, emu, got 'CPU'; did you mean "
            "'cpu'?");
  EXPECT_EQ(usageError({"f", w, "--steps"}), "--steps needs a value (N)");
  EXPECT_EQ(usageError({"f", w, "--steps", "1", "--steps", "2"}),
            "--steps given more than once");
  EXPECT_EQ(usageError({"f", w, "-v=1"}), "--v takes no value, got '1'");
}

TEST(CommandLine, RefusesUnknownOptionsWithASuggestion) {
  EXPECT_EQ(usageError({"f", "--weights=x", "--stpes", "3"}),
            "unknown option '--stpes'; did you mean '--steps'?");
  EXPECT_EQ(usageError({"f", "--weights=x", "--zzz"}),
            "unknown option '--zzz'");
}

TEST(CommandLine, RefusesMissingAndExtraArguments) {
  EXPECT_EQ(usageError({"--weights=x"}), "missing FILE (the input)");
  EXPECT_EQ(usageError({"f"}), "missing --weights CKPT (Weights)");
  EXPECT_EQ(usageError({"f", "g", "--weights=x"}), "unexpected argument 'g'");
  // After --, a dash starts a file name.
  Sample s;
  s.parse({"--weights=x", "--", "-odd-name"});
  EXPECT_EQ(s.input, "-odd-name");
}

TEST(CommandLine, HelpListsEveryFlag) {
  Sample s;
  std::string help = s.help();
  EXPECT_THAT(help, HasSubstr("usage: moec sample FILE --weights CKPT "
                              "[options]"));
  for (const char *flag : {"--steps N", "--seed S", "--temperature T",
                           "--device DEVICE", "--save CKPT", "--program P",
                           "--v ", "--help"})
    EXPECT_THAT(help, HasSubstr(flag));
}

} // namespace
