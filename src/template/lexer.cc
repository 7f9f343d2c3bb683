// Template lexer (see lexer.h). Mirrors jinja2's lexer: the tag end is looked for only outside
// brackets, `-` strips all whitespace on its side, lstrip_blocks removes the indentation before a
// `{%`/`{#` that starts its line, trim_blocks removes one newline after `%}`/`#}`.
#include "template/lexer.h"

#include <cctype>
#include <cstdlib>

#include "common/check.h"
#include "template/limits.h"
#include "template/py_string.h"

namespace minivllm::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

int count_newlines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  std::vector<Chunk> run() {
    while (pos_ < src_.size()) {
      size_t tag = find_tag(pos_);
      std::string text(src_.substr(pos_, tag - pos_));
      bool line_starting = pos_ == 0 || src_[pos_ - 1] == '\n';
      int text_line = line_;
      line_ += count_newlines(text);
      if (tag == src_.size()) {
        emit_text(std::move(text), text_line);
        break;
      }
      char kind = src_[tag + 1];  // '{', '%' or '#'
      char modifier = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (modifier == '-') {
        text = py_strip(text, std::nullopt, false, true);
      } else if (modifier != '+' && kind != '{') {
        lstrip_block(text, line_starting);
      }
      emit_text(std::move(text), text_line);
      pos_ = tag + 2 + (modifier == '-' || modifier == '+' ? 1 : 0);
      if (kind == '#') {
        lex_comment();
      } else {
        lex_tag(kind == '{' ? ChunkKind::kOutput : ChunkKind::kStatement);
      }
    }
    return std::move(chunks_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  // lstrip_blocks: drop spaces/tabs between the line start and the tag.
  static void lstrip_block(std::string& text, bool line_starting) {
    size_t l_pos = text.rfind('\n');
    l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
    if (l_pos == 0 && !line_starting) return;
    if (l_pos == text.size()) return;
    for (size_t i = l_pos; i < text.size(); ++i)
      if (!is_space(text[i])) return;
    text.resize(l_pos);
  }

  void emit_text(std::string text, int line) {
    if (text.empty()) return;
    Chunk c;
    c.kind = ChunkKind::kText;
    c.text = std::move(text);
    c.line = line;
    chunks_.push_back(std::move(c));
  }

  // After a tag end: `-` eats all following whitespace; otherwise trim_blocks eats one newline.
  void after_tag_end(bool minus, bool plus, bool is_block) {
    if (minus) {
      while (pos_ < src_.size() && is_space(src_[pos_])) {
        line_ += src_[pos_] == '\n';
        ++pos_;
      }
    } else if (is_block && !plus && pos_ < src_.size() && src_[pos_] == '\n') {
      ++line_;
      ++pos_;
    }
  }

  void lex_comment() {
    size_t end = src_.find("#}", pos_);
    MINIVLLM_CHECK(end != std::string_view::npos) << "chat template line " << line_ << ": unterminated comment";
    bool minus = end > pos_ && src_[end - 1] == '-';
    bool plus = end > pos_ && src_[end - 1] == '+';
    line_ += count_newlines(src_.substr(pos_, end - pos_));
    pos_ = end + 2;
    after_tag_end(minus, plus, true);
  }

  void lex_tag(ChunkKind kind) {
    Chunk chunk;
    chunk.kind = kind;
    chunk.line = line_;
    const char* close = kind == ChunkKind::kOutput ? "}}" : "%}";
    int depth = 0;
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) {
        line_ += src_[pos_] == '\n';
        ++pos_;
      }
      MINIVLLM_CHECK(pos_ < src_.size())
          << "chat template line " << chunk.line << ": unterminated " << (kind == ChunkKind::kOutput ? "{{" : "{%");
      std::string_view rest = src_.substr(pos_);
      if (depth == 0) {
        bool minus = rest.size() >= 3 && (rest[0] == '-' || rest[0] == '+') && rest.substr(1, 2) == close;
        if (minus || rest.substr(0, 2) == close) {
          Token end;
          end.kind = TokenKind::kEnd;
          end.line = line_;
          chunk.tokens.push_back(end);
          pos_ += minus ? 3 : 2;
          after_tag_end(minus && rest[0] == '-', minus && rest[0] == '+', kind == ChunkKind::kStatement);
          chunks_.push_back(std::move(chunk));
          return;
        }
      }
      Token t = lex_token(chunk.tokens.empty() ? nullptr : &chunk.tokens.back());
      if (t.kind == TokenKind::kOp) {
        if (t.text == "(" || t.text == "[" || t.text == "{") {
          // Refused here already (the parser would refuse it too) so as not to lex the rest.
          if (++depth > kMaxExpressionDepth)
            MINIVLLM_FAIL() << "chat template line " << line_ << ": expression nested too deeply: over "
                            << kMaxExpressionDepth << " levels (kMaxExpressionDepth)";
        }
        if (t.text == ")" || t.text == "]" || t.text == "}") depth = depth > 0 ? depth - 1 : 0;
      }
      chunk.tokens.push_back(std::move(t));
    }
  }

  Token lex_token(const Token* prev) {
    Token t;
    t.line = line_;
    char c = src_[pos_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t b = pos_;
      while (pos_ < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) ++pos_;
      t.kind = TokenKind::kName;
      t.text = std::string(src_.substr(b, pos_ - b));
      return t;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return lex_number(prev && prev->kind == TokenKind::kOp && prev->text == ".");
    if (c == '\'' || c == '"') return lex_string();
    // Two-character operators first, then single characters (a plain scan: templates can be long).
    static constexpr std::string_view kTwoCharOps[] = {"**", "//", "==", "!=", "<=", ">="};
    char c2 = pos_ + 1 < src_.size() ? src_[pos_ + 1] : '\0';
    for (std::string_view op : kTwoCharOps) {
      if (c == op[0] && c2 == op[1]) {
        pos_ += 2;
        t.kind = TokenKind::kOp;
        t.text = std::string(op);
        return t;
      }
    }
    static constexpr std::string_view kOneCharOps = "+-*/%~<>=()[]{}.,:|;";
    if (kOneCharOps.find(c) != std::string_view::npos) {
      ++pos_;
      t.kind = TokenKind::kOp;
      t.text = std::string(1, c);
      return t;
    }
    MINIVLLM_FAIL() << "chat template line " << line_ << ": unexpected character '" << c << "'";
    return t;
  }

  // Integers and floats; digits may be grouped with '_'. After a '.', only integers (x.0).
  Token lex_number(bool integer_only) {
    Token t;
    t.line = line_;
    std::string digits;
    auto take_digits = [&] {
      while (pos_ < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) {
        if (src_[pos_] != '_') digits.push_back(src_[pos_]);
        ++pos_;
      }
    };
    take_digits();
    bool is_float = false;
    if (!integer_only && pos_ + 1 < src_.size() && src_[pos_] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
      is_float = true;
      digits.push_back('.');
      ++pos_;
      take_digits();
    }
    if (!integer_only && pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t save = pos_;
      std::string save_digits = digits;
      digits.push_back('e');
      ++pos_;
      if (pos_ < src_.size() && (src_[pos_] == '+' || src_[pos_] == '-')) digits.push_back(src_[pos_++]);
      if (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_]))) {
        is_float = true;
        take_digits();
      } else {
        pos_ = save;
        digits = save_digits;
      }
    }
    t.text = digits;
    if (is_float) {
      t.kind = TokenKind::kFloat;
      t.float_value = std::strtod(digits.c_str(), nullptr);  // out of range: inf or 0, as Python
    } else {
      t.kind = TokenKind::kInt;
      try {
        t.int_value = std::stoll(digits);
      } catch (const std::exception&) {
        MINIVLLM_FAIL() << "chat template line " << line_ << ": integer literal out of range (integers are 64-bit here): "
                        << excerpt(digits);
      }
    }
    return t;
  }

  // Python string literal escapes (jinja decodes literals with "unicode-escape").
  Token lex_string() {
    Token t;
    t.kind = TokenKind::kString;
    t.line = line_;
    char quote = src_[pos_++];
    std::string out;
    while (true) {
      MINIVLLM_CHECK(pos_ < src_.size()) << "chat template line " << t.line << ": unterminated string literal";
      char c = src_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      MINIVLLM_CHECK(pos_ < src_.size()) << "chat template line " << t.line << ": unterminated string literal";
      char e = src_[pos_++];
      switch (e) {
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        case 'r': out.push_back('\r'); break;
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'v': out.push_back('\v'); break;
        case '0': out.push_back('\0'); break;
        case '\n': ++line_; break;  // line continuation
        case 'x': utf8_append(out, hex_escape(2, t.line)); break;
        case 'u': utf8_append(out, hex_escape(4, t.line)); break;
        case 'U': utf8_append(out, hex_escape(8, t.line)); break;
        default:  // Python keeps unknown escapes verbatim
          out.push_back('\\');
          out.push_back(e);
      }
    }
    t.text = std::move(out);
    return t;
  }

  char32_t hex_escape(int n, int line) {
    MINIVLLM_CHECK(pos_ + n <= src_.size()) << "chat template line " << line << ": truncated \\x/\\u escape";
    std::string hex(src_.substr(pos_, n));
    for (char h : hex)
      MINIVLLM_CHECK(std::isxdigit(static_cast<unsigned char>(h)))
          << "chat template line " << line << ": bad escape digits '" << hex << "'";
    pos_ += n;
    char32_t cp = static_cast<char32_t>(std::stoul(hex, nullptr, 16));
    MINIVLLM_CHECK(cp < 0x110000) << "chat template line " << line << ": illegal Unicode character \\U" << hex;
    return cp;
  }

  std::string_view src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Chunk> chunks_;
};

}  // namespace

std::vector<Chunk> lex_template(std::string_view source) { return Lexer(source).run(); }

}  // namespace minivllm::jinja
