//===- FrontendTest.cpp - tests of the .moe parser and evaluator ----------===//
//
// Each test parses a small .moe text with parseSpec and checks the SpecFile
// it evaluates to, or the diagnostics it reports (captured with a
// ScopedDiagnosticHandler, as "line:col: message").
//
//===----------------------------------------------------------------------===//

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "moec/Frontend/Evaluator.h"
#include "moec/Frontend/ReadSpec.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "gtest/gtest.h"
#include <cmath>
#include <string>
#include <vector>

using namespace moec::frontend;

namespace {

/// Parses one text and keeps its buffer alive, so that the SMRanges in the
/// result can be read back.
class Harness {
public:
  explicit Harness(llvm::StringRef text) {
    sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(text, "test.moe"), llvm::SMLoc());
    mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
      errors.push_back(format(d));
      for (const mlir::Diagnostic &note : d.getNotes())
        notes.push_back(format(note));
      return mlir::success();
    });
    spec = parseSpec(sourceMgr, &context);
  }

  /// The source text of `range`.
  std::string text(llvm::SMRange range) const {
    return std::string(range.Start.getPointer(),
                       range.End.getPointer() - range.Start.getPointer());
  }

  std::optional<SpecFile> spec;
  std::vector<std::string> errors;
  std::vector<std::string> notes;

private:
  static std::string format(const mlir::Diagnostic &d) {
    std::string where;
    if (auto loc = llvm::dyn_cast<mlir::FileLineColLoc>(d.getLocation()))
      where = std::to_string(loc.getLine()) + ":" +
              std::to_string(loc.getColumn()) + ": ";
    return where + d.str();
  }

  llvm::SourceMgr sourceMgr;
  mlir::MLIRContext context;
};

/// The setting `name` of `node`, or null.
const SpecSetting *find(const SpecNode &node, llvm::StringRef name) {
  for (const SpecSetting &setting : node.settings)
    if (setting.name == name)
      return &setting;
  return nullptr;
}

/// The kinds of `node`'s children.
std::vector<std::string> childKinds(const SpecNode &node) {
  std::vector<std::string> kinds;
  for (const SpecNode &child : node.children)
    kinds.push_back(child.kind);
  return kinds;
}

/// Evaluates `expr` as the value of a setting; fails the test on errors.
SpecValue eval(const std::string &expr) {
  Harness h("moe 1\nt { v = " + expr + " }\n");
  EXPECT_TRUE(h.spec.has_value()) << expr;
  EXPECT_TRUE(h.errors.empty()) << expr << ": " << h.errors.front();
  if (!h.spec)
    return {};
  SpecValue value = h.spec->sections.front().settings.front().value;
  value.range = {}; // Points into the harness's buffer, which dies here.
  return value;
}

/// The errors reported when evaluating `expr` as a setting's value.
std::vector<std::string> evalErrors(const std::string &expr) {
  Harness h("moe 1\nt { v = " + expr + " }\n");
  EXPECT_FALSE(h.spec.has_value()) << expr;
  return h.errors;
}

void expectInt(const std::string &expr, int64_t expected) {
  SpecValue value = eval(expr);
  EXPECT_EQ(value.kind, SpecValue::Kind::Int) << expr;
  EXPECT_EQ(value.intValue, expected) << expr;
}

void expectFloat(const std::string &expr, double expected) {
  SpecValue value = eval(expr);
  EXPECT_EQ(value.kind, SpecValue::Kind::Float) << expr;
  EXPECT_DOUBLE_EQ(value.floatValue, expected) << expr;
}

void expectBool(const std::string &expr, bool expected) {
  SpecValue value = eval(expr);
  EXPECT_EQ(value.kind, SpecValue::Kind::Bool) << expr;
  EXPECT_EQ(value.boolValue, expected) << expr;
}

const char *const kExample = R"(moe 1
let d = 128
let heads = 4
let layers = 4
let experts = 8

model lm {
  kind = decoder
  vocab = 256
  d_model = d
  max_seq = 128
  norm = layer_norm(eps = 1e-5)
  repeat layers as i {
    attention(heads = heads)
    if i % 2 == 1 {
      moe(experts = experts, k = 2, hidden = 4 * d, activation = gelu_tanh,
          capacity = none, gate = raw)
    } else {
      ffn(hidden = 4 * d, activation = gelu_tanh)
    }
  }
}

train {
  optimizer = adamw(lr = 3e-3, betas = [0.9, 0.98], eps = 1e-9, weight_decay = 0.01)
  schedule = inverse_sqrt(warmup = 50)
  batch = 16
  seq_len = 64
  steps = 300
  seed = 1
  balance_loss = 0.01
  z_loss = 0.001
}

data {
  source = synthetic("grammar")
}
)";

//===----------------------------------------------------------------------===//
// The example
//===----------------------------------------------------------------------===//

TEST(FrontendTest, ExampleSections) {
  Harness h(kExample);
  ASSERT_TRUE(h.spec) << h.errors.front();
  EXPECT_EQ(h.spec->version, "1");
  EXPECT_EQ(h.text(h.spec->versionRange), "moe 1");
  ASSERT_EQ(h.spec->sections.size(), 3u);
  const SpecNode &model = h.spec->sections[0];
  EXPECT_EQ(model.kind, "model");
  EXPECT_EQ(model.label, "lm");
  EXPECT_EQ(h.spec->sections[1].kind, "train");
  EXPECT_EQ(h.spec->sections[1].label, "");
  EXPECT_EQ(h.spec->sections[2].kind, "data");

  std::vector<std::string> names;
  for (const SpecSetting &setting : model.settings)
    names.push_back(setting.name);
  EXPECT_EQ(names, (std::vector<std::string>{"kind", "vocab", "d_model",
                                             "max_seq", "norm"}));
  EXPECT_EQ(find(model, "kind")->value.kind, SpecValue::Kind::Symbol);
  EXPECT_EQ(find(model, "kind")->value.text, "decoder");
  EXPECT_EQ(find(model, "d_model")->value.intValue, 128);
  const SpecValue &norm = find(model, "norm")->value;
  EXPECT_EQ(norm.kind, SpecValue::Kind::Call);
  EXPECT_EQ(norm.text, "layer_norm");
  ASSERT_EQ(norm.args.size(), 1u);
  EXPECT_EQ(norm.args[0].name, "eps");
  EXPECT_DOUBLE_EQ(norm.args[0].value.floatValue, 1e-5);
}

TEST(FrontendTest, ExampleRepeatAndIf) {
  Harness h(kExample);
  ASSERT_TRUE(h.spec);
  const SpecNode &model = h.spec->sections[0];
  ASSERT_EQ(model.children.size(), 4u);
  for (int64_t i = 0; i < 4; ++i) {
    const SpecNode &block = model.children[i];
    EXPECT_EQ(block.kind, "block");
    EXPECT_EQ(block.index, i);
    EXPECT_TRUE(block.settings.empty());
    std::vector<std::string> expected = {"attention",
                                         i % 2 == 1 ? "moe" : "ffn"};
    EXPECT_EQ(childKinds(block), expected) << "block " << i;
    EXPECT_EQ(find(block.children[0], "heads")->value.intValue, 4);
  }
  const SpecNode &moe = model.children[1].children[1];
  EXPECT_EQ(find(moe, "experts")->value.intValue, 8);
  EXPECT_EQ(find(moe, "k")->value.intValue, 2);
  EXPECT_EQ(find(moe, "hidden")->value.intValue, 512);
  EXPECT_EQ(find(moe, "activation")->value.text, "gelu_tanh");
  EXPECT_EQ(find(moe, "capacity")->value.kind, SpecValue::Kind::Symbol);
  EXPECT_EQ(find(moe, "capacity")->value.text, "none");
  EXPECT_EQ(find(moe, "gate")->value.text, "raw");
  const SpecNode &ffn = model.children[0].children[1];
  EXPECT_EQ(find(ffn, "hidden")->value.intValue, 512);
}

TEST(FrontendTest, ExampleCallValues) {
  Harness h(kExample);
  ASSERT_TRUE(h.spec);
  const SpecValue &optimizer = find(h.spec->sections[1], "optimizer")->value;
  EXPECT_EQ(optimizer.kind, SpecValue::Kind::Call);
  EXPECT_EQ(optimizer.text, "adamw");
  ASSERT_EQ(optimizer.args.size(), 4u);
  EXPECT_EQ(optimizer.args[1].name, "betas");
  const SpecValue &betas = optimizer.args[1].value;
  ASSERT_EQ(betas.kind, SpecValue::Kind::List);
  ASSERT_EQ(betas.list.size(), 2u);
  EXPECT_DOUBLE_EQ(betas.list[0].floatValue, 0.9);
  EXPECT_DOUBLE_EQ(betas.list[1].floatValue, 0.98);

  const SpecValue &source = find(h.spec->sections[2], "source")->value;
  EXPECT_EQ(source.text, "synthetic");
  ASSERT_EQ(source.args.size(), 1u);
  EXPECT_EQ(source.args[0].name, "");
  EXPECT_EQ(source.args[0].value.kind, SpecValue::Kind::String);
  EXPECT_EQ(source.args[0].value.text, "grammar");
  // A positional argument's name range is its value's.
  EXPECT_EQ(h.text(source.args[0].nameRange), "\"grammar\"");
}

TEST(FrontendTest, Ranges) {
  Harness h(kExample);
  ASSERT_TRUE(h.spec);
  const SpecNode &model = h.spec->sections[0];
  EXPECT_EQ(h.text(model.range).substr(0, 10), "model lm {");
  EXPECT_EQ(h.text(model.range).back(), '}');
  const SpecSetting *dModel = find(model, "d_model");
  EXPECT_EQ(h.text(dModel->nameRange), "d_model");
  // A constant's value is located where it is used.
  EXPECT_EQ(h.text(dModel->value.range), "d");
  EXPECT_EQ(h.text(find(model, "norm")->value.range), "layer_norm(eps = 1e-5)");
  const SpecNode &block = model.children[1];
  EXPECT_EQ(h.text(block.range).substr(0, 21), "repeat layers as i {\n");
  const SpecNode &moe = block.children[1];
  EXPECT_EQ(h.text(moe.range).substr(0, 4), "moe(");
  EXPECT_EQ(h.text(moe.range).back(), ')');
  EXPECT_EQ(h.text(find(moe, "hidden")->value.range), "4 * d");
  EXPECT_EQ(h.text(find(moe, "hidden")->nameRange), "hidden");
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

TEST(FrontendTest, Literals) {
  expectInt("128", 128);
  expectInt("1_000_000", 1000000);
  expectInt("9223372036854775807", INT64_MAX);
  expectFloat("3e-4", 3e-4);
  expectFloat("0.5", 0.5);
  expectFloat("1.", 1.0);
  expectFloat("1.5E+2", 150.0);
  expectBool("true", true);
  expectBool("false", false);
  SpecValue text = eval(R"("a\"b\\c\nd\te")");
  EXPECT_EQ(text.kind, SpecValue::Kind::String);
  EXPECT_EQ(text.text, "a\"b\\c\nd\te");
}

TEST(FrontendTest, Precedence) {
  expectInt("1 + 2 * 3", 7);
  expectInt("(1 + 2) * 3", 9);
  expectInt("10 - 2 - 3", 5);
  expectInt("2 ** 3 ** 2", 512);
  expectInt("-2 ** 2", -4);
  expectInt("(-2) ** 2", 4);
  expectInt("- - 3", 3);
  expectInt("2 * 3 % 4", 2);
  expectBool("1 + 1 == 2", true);
  expectBool("not 1 == 2", true);
  expectBool("true or false and false", true);
  expectBool("(true or false) and false", false);
  expectBool("not true or true", true);
  expectBool("1 < 2 and 2 < 3", true);
}

TEST(FrontendTest, ArithmeticTypes) {
  expectInt("2 + 3", 5);
  expectFloat("2 + 3.0", 5.0);
  expectFloat("6 / 2", 3.0);
  expectFloat("7 / 2", 3.5);
  expectInt("7 // 2", 3);
  expectInt("-7 // 2", -4);
  expectInt("7 // -2", -4);
  expectFloat("7.5 // 2", 3.0);
  expectInt("-7 % 3", 2);
  expectInt("7 % -3", -2);
  expectInt("-9223372036854775807 - 1 % -1", -9223372036854775807);
  expectFloat("7.5 % 2", 1.5);
  expectFloat("-1.5 % 1", 0.5);
  expectInt("2 ** 62", int64_t(1) << 62);
  expectInt("0 ** 0", 1);
  expectInt("(-3) ** 3", -27);
  expectFloat("2 ** -1", 0.5);
  expectFloat("4 ** 0.5", 2.0);
  expectInt("-9223372036854775807 - 1", INT64_MIN);
  expectFloat("-1.5", -1.5);
}

TEST(FrontendTest, Comparisons) {
  expectBool("1 == 1.0", true);
  expectBool("2 != 2", false);
  expectBool("1 <= 1", true);
  expectBool("2.5 > 2", true);
  expectBool("3 >= 4", false);
  expectBool("\"a\" == \"a\"", true);
  expectBool("\"a\" != \"b\"", true);
  expectBool("true == false", false);
}

TEST(FrontendTest, ShortCircuit) {
  expectBool("false and 1 // 0 == 0", false);
  expectBool("true or 1 // 0 == 0", true);
  expectBool("true or nobody", true);
}

TEST(FrontendTest, Builtins) {
  expectInt("min(3, 1, 2)", 1);
  expectInt("max(3, 1, 2)", 3);
  expectFloat("max(1, 2.5)", 2.5);
  expectFloat("min(1, 2.5)", 1.0);
  expectInt("min([4, 2])", 2);
  expectInt("ceil(2.1)", 3);
  expectInt("ceil(3)", 3);
  expectInt("floor(-2.1)", -3);
  expectInt("int(-2.7)", -2);
  expectInt("int(2.7)", 2);
  expectFloat("float(3)", 3.0);
  // Round half to even.
  expectInt("round(0.5)", 0);
  expectInt("round(1.5)", 2);
  expectInt("round(2.5)", 2);
  expectInt("round(3.5)", 4);
  expectInt("round(-2.5)", -2);
  expectInt("round(2.51)", 3);
  expectInt("round(-0.4)", 0);
}

TEST(FrontendTest, BuiltinErrors) {
  EXPECT_EQ(
      evalErrors("ceil(1, 2)"),
      (std::vector<std::string>{"2:9: ceil() takes 1 argument, found 2"}));
  EXPECT_EQ(evalErrors("min()"),
            (std::vector<std::string>{"2:9: min() needs at least one number"}));
  EXPECT_EQ(evalErrors("max(a = 1)"),
            (std::vector<std::string>{"2:13: max() takes no named arguments"}));
  EXPECT_EQ(evalErrors("float(\"x\")"),
            (std::vector<std::string>{"2:15: float() needs numbers, found "
                                      "string"}));
  EXPECT_EQ(evalErrors("int(1e19)"),
            (std::vector<std::string>{"2:9: int(1e+19) does not fit in a "
                                      "64-bit int"}));
  EXPECT_EQ(evalErrors("min(x, 1)"),
            (std::vector<std::string>{"2:13: unknown name 'x'"}));
}

TEST(FrontendTest, CallValues) {
  SpecValue call = eval("adamw(lr = 1e-3, 5, betas = [0.9], f(g = h))");
  ASSERT_EQ(call.kind, SpecValue::Kind::Call);
  EXPECT_EQ(call.text, "adamw");
  ASSERT_EQ(call.args.size(), 4u);
  EXPECT_EQ(call.args[0].name, "lr");
  EXPECT_DOUBLE_EQ(call.args[0].value.floatValue, 1e-3);
  EXPECT_EQ(call.args[1].name, "");
  EXPECT_EQ(call.args[1].value.intValue, 5);
  EXPECT_EQ(call.args[2].value.kind, SpecValue::Kind::List);
  const SpecValue &inner = call.args[3].value;
  EXPECT_EQ(inner.kind, SpecValue::Kind::Call);
  EXPECT_EQ(inner.text, "f");
  EXPECT_EQ(inner.args[0].name, "g");
  EXPECT_EQ(inner.args[0].value.kind, SpecValue::Kind::Symbol);
  EXPECT_EQ(eval("none()").args.size(), 0u);
}

TEST(FrontendTest, Lists) {
  SpecValue list = eval("[[1, 2], [], [gelu, \"x\",],]");
  ASSERT_EQ(list.kind, SpecValue::Kind::List);
  ASSERT_EQ(list.list.size(), 3u);
  EXPECT_EQ(list.list[0].list.size(), 2u);
  EXPECT_EQ(list.list[0].list[1].intValue, 2);
  EXPECT_TRUE(list.list[1].list.empty());
  EXPECT_EQ(list.list[2].list[0].kind, SpecValue::Kind::Symbol);
  EXPECT_EQ(list.list[2].list[1].text, "x");
  EXPECT_EQ(eval("[]").list.size(), 0u);
}

TEST(FrontendTest, ValueErrors) {
  EXPECT_EQ(evalErrors("9223372036854775807 + 1"),
            (std::vector<std::string>{
                "2:29: integer overflow: 9223372036854775807 + 1 does not fit "
                "in a 64-bit int"}));
  EXPECT_EQ(evalErrors("3037000500 * 3037000500"),
            (std::vector<std::string>{
                "2:20: integer overflow: 3037000500 * 3037000500 does not fit "
                "in a 64-bit int"}));
  EXPECT_EQ(evalErrors("2 ** 63"),
            (std::vector<std::string>{"2:11: integer overflow: 2 ** 63 does "
                                      "not fit in a 64-bit int"}));
  EXPECT_EQ(evalErrors("-(-9223372036854775807 - 1)"),
            (std::vector<std::string>{
                "2:9: integer overflow: -(-9223372036854775808) does not fit "
                "in a 64-bit int"}));
  EXPECT_EQ(evalErrors("(-9223372036854775807 - 1) // -1"),
            (std::vector<std::string>{
                "2:36: integer overflow: -9223372036854775808 // -1 does not "
                "fit in a 64-bit int"}));
  EXPECT_EQ(evalErrors("1 / 0"),
            (std::vector<std::string>{"2:11: division by zero: 1 / 0"}));
  EXPECT_EQ(evalErrors("1.5 / 0.0"),
            (std::vector<std::string>{"2:13: division by zero: 1.5 / 0.0"}));
  EXPECT_EQ(evalErrors("5 % 0"),
            (std::vector<std::string>{"2:11: modulo by zero: 5 % 0"}));
  EXPECT_EQ(evalErrors("1e200 * 1e200"),
            (std::vector<std::string>{
                "2:15: 1e+200 * 1e+200 is too large for a 64-bit float"}));
  EXPECT_EQ(evalErrors("[1] + 1"),
            (std::vector<std::string>{
                "2:13: operands of '+' must be numbers, found list and int"}));
  EXPECT_EQ(evalErrors("true and 1"),
            (std::vector<std::string>{
                "2:18: operands of 'and' must be bools, found int 1"}));
}

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

TEST(FrontendTest, SymbolsAndSuggestions) {
  Harness h("moe 1\nlet hidden = 4\nt {\n  a = gelu\n  b = hiden\n"
            "  c = hidden\n}\n");
  ASSERT_TRUE(h.spec);
  const SpecNode &t = h.spec->sections[0];
  EXPECT_EQ(find(t, "a")->value.kind, SpecValue::Kind::Symbol);
  EXPECT_EQ(find(t, "a")->value.text, "gelu");
  EXPECT_EQ(find(t, "a")->value.suggestion, "");
  EXPECT_EQ(find(t, "b")->value.kind, SpecValue::Kind::Symbol);
  EXPECT_EQ(find(t, "b")->value.suggestion, "hidden");
  EXPECT_EQ(find(t, "c")->value.kind, SpecValue::Kind::Int);
}

TEST(FrontendTest, UnknownNamesInOperands) {
  Harness h("moe 1\nlet hidden = 4\nt {\n  a = hiden * 2\n  b = -gelu\n"
            "  c = xx + yy\n  repeat layerz { }\n  if flag { }\n}\n");
  EXPECT_FALSE(h.spec);
  EXPECT_EQ(h.errors, (std::vector<std::string>{
                          "4:7: unknown name 'hiden'; did you mean 'hidden'?",
                          "5:8: unknown name 'gelu'",
                          "6:7: unknown name 'xx'",
                          "6:12: unknown name 'yy'",
                          "7:10: unknown name 'layerz'",
                          "8:6: unknown name 'flag'",
                      }));
}

TEST(FrontendTest, ScopesAndShadowing) {
  Harness h(R"(moe 1
let d = 1
s {
  a = d
  let d = 2
  b = d
  blk { let d = 3, c = d }
  e = d
  repeat 2 as i { let d = i * 10; x = d }
}
t { f = d, g = i }
)");
  ASSERT_TRUE(h.spec) << h.errors.front();
  const SpecNode &s = h.spec->sections[0];
  EXPECT_EQ(find(s, "a")->value.intValue, 1);
  EXPECT_EQ(find(s, "b")->value.intValue, 2);
  EXPECT_EQ(find(s.children[0], "c")->value.intValue, 3);
  EXPECT_EQ(find(s, "e")->value.intValue, 2);
  EXPECT_EQ(find(s.children[1], "x")->value.intValue, 0);
  EXPECT_EQ(find(s.children[2], "x")->value.intValue, 10);
  const SpecNode &t = h.spec->sections[1];
  EXPECT_EQ(find(t, "f")->value.intValue, 1);
  // The loop variable is gone after its body: `i` is a symbol again.
  EXPECT_EQ(find(t, "g")->value.kind, SpecValue::Kind::Symbol);
}

TEST(FrontendTest, Redefinition) {
  Harness h("moe 1\nlet d = 1\nlet d = 2\nt {\n  repeat 2 as i {\n"
            "    let i = 1\n  }\n}\n");
  EXPECT_FALSE(h.spec);
  EXPECT_EQ(h.errors, (std::vector<std::string>{"3:5: redefinition of 'd'",
                                                "6:9: redefinition of 'i'"}));
  EXPECT_EQ(h.notes,
            (std::vector<std::string>{"2:5: previous definition is here",
                                      "5:15: previous definition is here"}));
}

TEST(FrontendTest, FailedConstantDoesNotCascade) {
  Harness h("moe 1\nlet a = 1 // 0\nlet b = a * 2\nlet c =\n"
            "t { x = a + b + c, y = [a], z = f(c) }\n");
  EXPECT_FALSE(h.spec);
  EXPECT_EQ(h.errors, (std::vector<std::string>{
                          "4:8: expected an expression, found 't'",
                          "2:11: division by zero: 1 // 0",
                      }));
}

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

TEST(FrontendTest, IfSplicesIntoEnclosingNode) {
  Harness h(R"(moe 1
m {
  repeat 3 as i {
    if i == 0 { a = 1; x() }
    else if i == 1 { b = 2 y() z() }
    else { c = 3 }
    if false { never() }
  }
  if true { top = 1 }
}
)");
  ASSERT_TRUE(h.spec) << h.errors.front();
  const SpecNode &m = h.spec->sections[0];
  ASSERT_EQ(m.children.size(), 3u);
  EXPECT_EQ(find(m, "top")->value.intValue, 1);
  EXPECT_EQ(find(m.children[0], "a")->value.intValue, 1);
  EXPECT_EQ(childKinds(m.children[0]), std::vector<std::string>{"x"});
  EXPECT_EQ(find(m.children[1], "b")->value.intValue, 2);
  EXPECT_EQ(childKinds(m.children[1]), (std::vector<std::string>{"y", "z"}));
  EXPECT_EQ(find(m.children[2], "c")->value.intValue, 3);
  EXPECT_TRUE(m.children[2].children.empty());
}

TEST(FrontendTest, LayerStatements) {
  Harness h(R"(moe 1
m {
  attention
  attention()
  moe(k = 2, experts = 8) { capacity = 1.25; expert { ffn } }
  block { x = 1 }
}
)");
  ASSERT_TRUE(h.spec) << h.errors.front();
  const SpecNode &m = h.spec->sections[0];
  EXPECT_EQ(childKinds(m), (std::vector<std::string>{"attention", "attention",
                                                     "moe", "block"}));
  const SpecNode &moe = m.children[2];
  std::vector<std::string> names;
  for (const SpecSetting &setting : moe.settings)
    names.push_back(setting.name);
  EXPECT_EQ(names, (std::vector<std::string>{"k", "experts", "capacity"}));
  EXPECT_EQ(childKinds(moe), std::vector<std::string>{"expert"});
  EXPECT_EQ(childKinds(moe.children[0]), std::vector<std::string>{"ffn"});
  EXPECT_EQ(m.children[3].index, -1);
}

TEST(FrontendTest, DuplicateSettings) {
  Harness h("moe 1\nm {\n  ffn(k = 1, k = 2)\n  moe(k = 1) { k = 2 }\n"
            "  x = 1\n  if true { x = 2 }\n  f = adamw(lr = 1, lr = 2)\n}\n");
  EXPECT_FALSE(h.spec);
  EXPECT_EQ(h.errors, (std::vector<std::string>{
                          "3:14: setting 'k' is given twice in 'ffn'",
                          "4:16: setting 'k' is given twice in 'moe'",
                          "6:13: setting 'x' is given twice in 'm'",
                          "7:21: argument 'lr' is given twice to 'adamw'",
                      }));
  EXPECT_EQ(h.notes, (std::vector<std::string>{
                         "3:7: first given here", "4:7: first given here",
                         "5:3: first given here", "7:13: first given here"}));
}

TEST(FrontendTest, PositionalLayerArguments) {
  Harness h("moe 1\nm { attention(4, heads = 2) }\n");
  EXPECT_FALSE(h.spec);
  EXPECT_EQ(h.errors, (std::vector<std::string>{
                          "2:15: layer arguments must be named, like "
                          "`attention(name = value)`"}));
}

TEST(FrontendTest, RepeatCounts) {
  Harness ok("moe 1\nm { repeat 0 { x() } repeat 2 { } }\n");
  ASSERT_TRUE(ok.spec);
  ASSERT_EQ(ok.spec->sections[0].children.size(), 2u);
  EXPECT_TRUE(ok.spec->sections[0].children[1].children.empty());

  Harness bad("moe 1\nm {\n  repeat 1.0 { }\n  repeat -2 { }\n"
              "  repeat 100001 { }\n  repeat true { }\n}\n");
  EXPECT_EQ(bad.errors,
            (std::vector<std::string>{
                "3:10: the repeat count must be an int, found float 1.0",
                "4:10: the repeat count must not be negative, found -2",
                "5:10: the repeat count 100001 is too large (the limit is "
                "100000)",
                "6:10: the repeat count must be an int, found bool true",
            }));
}

TEST(FrontendTest, RepeatedErrorReportedOnce) {
  Harness h("moe 1\nm { repeat 5 as i { x = 10 // (i - i) } }\n");
  EXPECT_FALSE(h.spec);
  EXPECT_EQ(h.errors.size(), 1u);
}

TEST(FrontendTest, ExpansionLimit) {
  Harness h("moe 1\nm { repeat 1000 { repeat 1000 { } } }\n");
  EXPECT_FALSE(h.spec);
  ASSERT_EQ(h.errors.size(), 1u);
  EXPECT_NE(h.errors[0].find(
                "the file expands to more than 1000000 layers and blocks"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// Versions, lexing, recovery
//===----------------------------------------------------------------------===//

TEST(FrontendTest, Versions) {
  Harness empty("# nothing but\n\n   # comments\nmoe 1\n");
  ASSERT_TRUE(empty.spec);
  EXPECT_TRUE(empty.spec->sections.empty());
  Harness decimal("moe 1.0\n");
  ASSERT_TRUE(decimal.spec);
  EXPECT_EQ(decimal.spec->version, "1");

  Harness unsupported("moe 2\nm { x = 1 // 0 }\n");
  EXPECT_EQ(unsupported.errors,
            (std::vector<std::string>{
                "1:5: unsupported language version 2; this moec reads "
                "version 1"}));
  Harness missing("m { x = 1 // 0 }\n");
  EXPECT_EQ(missing.errors,
            (std::vector<std::string>{
                "1:1: expected the version line `moe 1` at the start of the "
                "file",
                "1:11: division by zero: 1 // 0"}));
  Harness nothing("");
  EXPECT_EQ(nothing.errors.size(), 1u);
}

TEST(FrontendTest, LexerErrors) {
  Harness h("moe 1\nm {\n  a = \x01\n  b = 1 ! 2\n  c = \"x\\y\"\n"
            "  d = 18446744073709551616\n  e = \"open\n  f = 1\n}\n");
  EXPECT_FALSE(h.spec);
  EXPECT_EQ(h.errors,
            (std::vector<std::string>{
                "3:7: unexpected character '\\x01'",
                "4:9: unexpected character '!'; write 'not' for logical "
                "negation",
                "5:9: unknown escape '\\y' in string; the escapes are \\\", "
                "\\\\, \\n and \\t",
                "6:7: integer '18446744073709551616' is too large for a "
                "64-bit int (the largest is 9223372036854775807)",
                "7:7: unterminated string: a string must end with '\"' on "
                "the line where it starts",
            }));
}

TEST(FrontendTest, RecoveryReportsEachMistakeOnce) {
  Harness h(R"(moe 1
let d = 4 +
model lm {
  heads 4
  moe(experts = 8,
      k = $, gate = raw)
  ffn(hidden = 4 * d
  attention(heads = 2)
  vocab = 1 // 0
}
train { steps = (1 + 2 }
data { source = zz * 2 }
)");
  EXPECT_FALSE(h.spec);
  EXPECT_EQ(h.errors,
            (std::vector<std::string>{
                "2:12: expected an expression, found 'model'",
                "4:9: expected '=' after setting name 'heads', found '4'",
                "6:11: unexpected character '$'",
                "7:21: expected ',' or ')' after an argument of 'ffn', found "
                "'attention'",
                "11:24: expected ')' to close '(', found '}'",
                "9:13: division by zero: 1 // 0",
                "12:17: unknown name 'zz'",
            }));
}

TEST(FrontendTest, ErrorLimit) {
  std::string text = "moe 1\nm {\n";
  for (int i = 0; i < 60; ++i)
    text += "  x" + std::to_string(i) + " 4\n";
  text += "}\n";
  Harness h(text);
  EXPECT_FALSE(h.spec);
  ASSERT_EQ(h.errors.size(), DiagnosticReporter::kMaxErrors + 1);
  EXPECT_EQ(h.errors.back(), "53:7: too many errors (50); stopping here");
}

TEST(FrontendTest, NestingLimits) {
  std::string deep = "moe 1\nm { x = " + std::string(300, '(') + "1" +
                     std::string(300, ')') + " }\n";
  Harness parens(deep);
  ASSERT_EQ(parens.errors.size(), 1u);
  EXPECT_NE(parens.errors[0].find("nesting is too deep"), std::string::npos);

  std::string chain = "moe 1\nm { x = 1";
  for (int i = 0; i < 2000; ++i)
    chain += " + 1";
  chain += " }\n";
  Harness longChain(chain);
  ASSERT_EQ(longChain.errors.size(), 1u);
  EXPECT_NE(longChain.errors[0].find("expression is too long"),
            std::string::npos);

  std::string ok = "moe 1\nm { x = 1";
  for (int i = 0; i < 500; ++i)
    ok += " + 1";
  ok += " }\n";
  Harness fine(ok);
  ASSERT_TRUE(fine.spec);
  EXPECT_EQ(fine.spec->sections[0].settings[0].value.intValue, 501);
}

//===----------------------------------------------------------------------===//
// nearestName
//===----------------------------------------------------------------------===//

TEST(FrontendTest, NearestName) {
  std::vector<std::string> names = {"hidden", "heads", "d", "layers"};
  EXPECT_EQ(nearestName("hiden", names), "hidden");
  EXPECT_EQ(nearestName("heds", names), "heads");
  // A swap of adjacent letters is one edit.
  EXPECT_EQ(nearestName("haeds", names), "heads");
  EXPECT_EQ(nearestName("stpes", {"seed", "steps"}), "steps");
  EXPECT_EQ(nearestName("ehads", names), "heads");
  EXPECT_EQ(nearestName("hdiedn", names), "");
  EXPECT_EQ(nearestName("dd", names), "d");
  EXPECT_EQ(nearestName("layer", names), "layers");
  EXPECT_EQ(nearestName("gelu", names), "");
  // Never the name itself.
  EXPECT_EQ(nearestName("d", names), "");
  // Ties go to the first candidate.
  EXPECT_EQ(nearestName("ab", {"aa", "bb", "ac"}), "aa");
  // The threshold is max(1, len / 3): 2 edits for a 6-letter name.
  EXPECT_EQ(nearestName("hxddex", names), "hidden");
  EXPECT_EQ(nearestName("hxxdex", names), "");
  EXPECT_EQ(nearestName("x", {}), "");
}

} // namespace
