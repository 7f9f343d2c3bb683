// Statement parser for Jinja templates (see parser.h): if/elif/else, for/else with a filter,
// set (plain, tuple, namespace attribute, block), macro, break/continue and transformers'
// {% generation %}. Expressions are parsed by expr_parser.cc.
#include "template/parser.h"

#include <initializer_list>
#include <set>

#include "common/check.h"
#include "template/expr_parser.h"
#include "template/limits.h"

namespace minivllm::jinja {
namespace {

const std::set<std::string> kUnsupportedTags = {"include", "import", "from", "extends", "block", "call",
                                                "filter",  "raw",    "with", "do",      "autoescape", "trans"};

class StmtParser {
 public:
  explicit StmtParser(std::vector<Chunk> chunks) : chunks_(std::move(chunks)) {}

  Body parse_all() {
    std::string stop;
    Body body = parse_body({}, &stop);
    return body;
  }

 private:
  std::unique_ptr<Stmt> make_stmt(Stmt::Kind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  // Parses statements until a tag named in `stops` (left in tokens_ after its name) or the end.
  Body parse_body(std::initializer_list<std::string_view> stops, std::string* stop_found) {
    Body body;
    while (next_ < chunks_.size()) {
      const Chunk& c = chunks_[next_++];
      if (c.kind == ChunkKind::kText) {
        auto s = make_stmt(Stmt::Kind::kText, c.line);
        s->text = c.text;
        body.push_back(std::move(s));
        continue;
      }
      tokens_ = std::make_unique<Tokens>(&c.tokens);
      if (c.kind == ChunkKind::kOutput) {
        auto s = make_stmt(Stmt::Kind::kOutput, c.line);
        s->expr = parse_tuple(*tokens_);
        tokens_->expect_end("{{ ... }}");
        body.push_back(std::move(s));
        continue;
      }
      std::string tag = tokens_->expect_name();
      for (std::string_view stop : stops) {
        if (tag == stop) {
          *stop_found = tag;
          return body;
        }
      }
      body.push_back(parse_statement(tag, c.line));
    }
    if (stops.size() != 0) {
      std::string expected;
      for (std::string_view s : stops) expected += (expected.empty() ? "'" : " or '") + std::string(s) + "'";
      MINIVLLM_FAIL() << "chat template: unexpected end of template, expected " << expected
                      << " to close the block opened at line " << block_line_;
    }
    return body;
  }

  std::unique_ptr<Stmt> parse_statement(const std::string& tag, int line) {
    // Blocks nest by recursion here and in the renderer.
    if (block_depth_ >= kMaxBlockDepth)
      MINIVLLM_FAIL() << "chat template line " << line << ": blocks nested too deeply: over " << kMaxBlockDepth
                      << " levels (kMaxBlockDepth)";
    ++block_depth_;
    int saved = block_line_;
    block_line_ = line;
    std::unique_ptr<Stmt> s;
    if (tag == "if") {
      s = parse_if(line);
    } else if (tag == "for") {
      s = parse_for(line);
    } else if (tag == "set") {
      s = parse_set(line);
    } else if (tag == "macro") {
      s = parse_macro(line);
    } else if (tag == "break" || tag == "continue") {
      s = make_stmt(tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, line);
      tokens_->expect_end(tag);
    } else if (tag == "generation") {  // transformers' AssistantTracker: renders its body in place
      tokens_->expect_end(tag);
      s = make_stmt(Stmt::Kind::kScope, line);
      std::string stop;
      s->body = parse_body({"endgeneration"}, &stop);
      tokens_->expect_end(stop);
    } else if (tag.rfind("end", 0, 3) == 0 || tag == "elif" || tag == "else") {
      MINIVLLM_FAIL() << "chat template line " << line << ": unexpected tag '" << excerpt(tag) << "'";
    } else if (kUnsupportedTags.count(tag)) {
      MINIVLLM_FAIL() << "chat template line " << line << ": unsupported tag '" << tag << "'";
    } else {
      MINIVLLM_FAIL() << "chat template line " << line << ": unknown tag '" << excerpt(tag) << "'";
    }
    block_line_ = saved;
    --block_depth_;
    return s;
  }

  std::unique_ptr<Stmt> parse_if(int line) {
    auto s = make_stmt(Stmt::Kind::kIf, line);
    std::string stop = "elif";
    while (stop == "elif") {
      ExprPtr cond = parse_tuple(*tokens_);
      tokens_->expect_end(stop == "elif" && s->branches.empty() ? "if" : "elif");
      Body body = parse_body({"elif", "else", "endif"}, &stop);
      s->branches.emplace_back(std::move(cond), std::move(body));
    }
    if (stop == "else") {
      tokens_->expect_end("else");
      s->else_body = parse_body({"endif"}, &stop);
    }
    tokens_->expect_end("endif");
    return s;
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    bool paren = tokens_->skip_op("(");
    do {
      names.push_back(tokens_->expect_name());
    } while (tokens_->skip_op(","));
    if (paren) tokens_->expect_op(")");
    return names;
  }

  std::unique_ptr<Stmt> parse_for(int line) {
    auto s = make_stmt(Stmt::Kind::kFor, line);
    s->targets = parse_targets();
    if (!tokens_->skip_name("in")) tokens_->fail("expected 'in' in for loop");
    s->expr = parse_tuple(*tokens_, false);
    if (tokens_->skip_name("if")) s->filter = parse_expression(*tokens_);
    if (tokens_->at_name("recursive")) tokens_->fail("unsupported recursive for loop");
    tokens_->expect_end("for");
    std::string stop;
    s->body = parse_body({"else", "endfor"}, &stop);
    if (stop == "else") {
      tokens_->expect_end("else");
      s->else_body = parse_body({"endfor"}, &stop);
    }
    tokens_->expect_end("endfor");
    return s;
  }

  std::unique_ptr<Stmt> parse_set(int line) {
    auto s = make_stmt(Stmt::Kind::kSet, line);
    std::string first = tokens_->expect_name();
    s->targets.push_back(first);
    if (tokens_->skip_op(".")) {
      s->attr_target = true;
      s->targets.push_back(tokens_->expect_name());
    } else {
      while (tokens_->skip_op(",")) s->targets.push_back(tokens_->expect_name());
    }
    if (tokens_->skip_op("=")) {
      s->expr = parse_tuple(*tokens_);
      tokens_->expect_end("set");
      return s;
    }
    if (s->attr_target || s->targets.size() != 1) tokens_->fail("expected '=' in set");
    if (tokens_->at_op("|")) tokens_->fail("unsupported filtered block set");
    tokens_->expect_end("set");
    s->kind = Stmt::Kind::kSetBlock;
    std::string stop;
    s->body = parse_body({"endset"}, &stop);
    tokens_->expect_end("endset");
    return s;
  }

  std::unique_ptr<Stmt> parse_macro(int line) {
    auto s = make_stmt(Stmt::Kind::kMacro, line);
    s->text = tokens_->expect_name();
    tokens_->expect_op("(");
    while (!tokens_->at_op(")")) {
      std::string name = tokens_->expect_name();
      ExprPtr def;
      if (tokens_->skip_op("=")) def = parse_expression(*tokens_);
      s->params.emplace_back(name, std::move(def));
      if (!tokens_->skip_op(",")) break;
    }
    tokens_->expect_op(")");
    tokens_->expect_end("macro");
    std::string stop;
    s->body = parse_body({"endmacro"}, &stop);
    tokens_->expect_end("endmacro");
    return s;
  }

  std::vector<Chunk> chunks_;
  size_t next_ = 0;
  std::unique_ptr<Tokens> tokens_;
  int block_line_ = 0;
  int block_depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) { return StmtParser(lex_template(source)).parse_all(); }

}  // namespace minivllm::jinja
