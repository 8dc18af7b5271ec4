//===- TokenizerCommand.cpp - moec tokenizer ------------------------------===//
//
// `moec tokenizer train` builds a SentencePiece model from text files;
// `encode` and `decode` show what a model makes of text and ids.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "moec/Error.h"
#include "moec/Tokenizer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <iostream>
#include <sstream>

namespace moec::driver {
namespace {

class TokenizerCommand : public cli::Command {
public:
  TokenizerCommand()
      : Command("tokenizer",
                "Train a SentencePiece tokenizer, or encode and decode "
                "with one.") {
    positional("ACTION", "train, encode or decode", action);
    list("input", "FILE", "train: a text file, one sentence per line "
                          "(repeat for more)",
         inputs);
    option("model", "FILE",
           "The model file: written by train, read by encode and decode",
           model)
        .required()
        .nonEmpty();
    option("type", "TYPE", "train: bpe (default) or unigram", type)
        .oneOf({"bpe", "unigram"});
    option("vocab-size", "N", "train: pieces in the vocabulary (default 8000)",
           vocabSize)
        .atLeast(int64_t{8});
    option("character-coverage", "C",
           "train: share of characters covered (default 1.0)",
           characterCoverage)
        .atLeast(0.5);
    option("sentences", "N",
           "train: sentences sampled from the input (default 0: all)",
           sentences)
        .atLeast(int64_t{0});
    option("seed", "S", "train: the sampling seed (default 0)", seed);
    option("text", "TEXT", "encode: the text (default: standard input)", text);
    option("ids", "IDS",
           "decode: space-separated ids (default: standard input)", ids);
  }

  int run() override {
    if (action == "train")
      return train();
    std::unique_ptr<Tokenizer> tokenizer = loadSentencePiece(model);
    if (action == "encode") {
      std::string value = given("text") ? text : readStdin();
      std::cout << fmt::format("{}\n", fmt::join(tokenizer->encode(value),
                                                 " "));
      return 0;
    }
    if (action == "decode") {
      std::istringstream in(given("ids") ? ids : readStdin());
      std::vector<int32_t> list;
      for (std::string word; in >> word;) {
        int64_t id = cli::parseInteger("an id", word);
        if (id < 0 || id >= tokenizer->size())
          throw Error(fmt::format("id {} is outside the tokenizer's [0, {})",
                                  id, tokenizer->size()));
        list.push_back(static_cast<int32_t>(id));
      }
      std::cout << tokenizer->decode(list) << "\n";
      return 0;
    }
    throw Error(fmt::format("unknown tokenizer action '{}' (train, encode or "
                            "decode)",
                            action));
  }

private:
  int train() {
    TokenizerTrainOptions o;
    o.inputs = inputs;
    o.output = model;
    o.type = type;
    o.vocabSize = vocabSize;
    o.characterCoverage = characterCoverage;
    o.sentences = sentences;
    o.seed = seed;
    trainSentencePiece(o);
    std::unique_ptr<Tokenizer> trained = loadSentencePiece(model);
    std::cout << fmt::format("wrote {}: {}\n", model, trained->describe());
    return 0;
  }

  static std::string readStdin() {
    std::ostringstream all;
    all << std::cin.rdbuf();
    std::string s = all.str();
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r'))
      s.pop_back();
    return s;
  }

  std::string action, model, type = "bpe", text, ids;
  std::vector<std::string> inputs;
  int64_t vocabSize = 8000, sentences = 0;
  double characterCoverage = 1.0;
  uint64_t seed = 0;
};

} // namespace

std::unique_ptr<cli::Command> makeTokenizerCommand() {
  return std::make_unique<TokenizerCommand>();
}

} // namespace moec::driver
