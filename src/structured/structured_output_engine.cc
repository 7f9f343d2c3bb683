// StructuredOutputEngine with xgrammar: the tokenizer's vocabulary as raw bytes, one grammar
// compiler (with its cache), and a matcher per sequence.
#include "structured/structured_output_engine.h"

#include <optional>
#include <string>

#include <xgrammar/xgrammar.h>

#include "common/check.h"
#include "common/config_key.h"
#include "common/error_text.h"
#include "structured/xgrammar_constraint.h"

namespace minivllm {
namespace {

// The special tokens that mark harmony's messages (gpt-oss): a harmony_first grammar spells them.
constexpr const char* kHarmonyMarkers[] = {"<|channel|>", "<|message|>", "<|end|>", "<|start|>"};

// Whether the vocabulary is harmony's (its markers are special tokens).
bool harmony_vocab(const Tokenizer& tokenizer) {
  for (const char* m : kHarmonyMarkers) {
    const std::optional<int32_t> id = tokenizer.token_to_id(m);
    if (!id || !tokenizer.is_special(*id)) return false;
  }
  return true;
}

// Each token's bytes, as xgrammar's RAW vocabulary type takes them. Special tokens (and ids the
// tokenizer lacks) are "": xgrammar never allows an empty token inside a grammar, so the model
// cannot emit <|im_end|> in the middle of a JSON string; the stop ids end a completed grammar.
// Harmony's markers are the exception in a harmony vocabulary: its replies' structure is made of
// them, so a grammar can ask for them (kHarmonyPrefix).
std::vector<std::string> raw_vocab(const Tokenizer& tokenizer) {
  std::vector<std::string> vocab(static_cast<size_t>(tokenizer.vocab_size()));
  for (size_t id = 0; id < vocab.size(); ++id) {
    const auto t = static_cast<int32_t>(id);
    if (tokenizer.has_piece(t) && !tokenizer.is_special(t)) vocab[id] = std::string(tokenizer.token_bytes(t));
  }
  if (harmony_vocab(tokenizer)) {
    for (const char* m : kHarmonyMarkers) vocab[static_cast<size_t>(*tokenizer.token_to_id(m))] = m;
  }
  return vocab;
}

// An EBNF string literal of `s` (xgrammar's escapes).
std::string ebnf_literal(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: out += c;
    }
  }
  return out + "\"";
}

// xgrammar's message without its "[hh:mm:ss] /path/file.cc:83: " prefix: the reason is for the
// client, the source path is not.
std::string xgrammar_reason(const std::string& what) {
  if (what.empty() || what[0] != '[') return what;
  const size_t src = what.find(".cc:");
  const size_t colon = src == std::string::npos ? std::string::npos : what.find(": ", src + 4);
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

}  // namespace

// An optional <think>...</think> block and a little whitespace (StructuredOutputs::think_first).
// The thoughts are any text in which "</think>" does not occur, as pieces that each leave the tag:
// a character other than '<', or a '<' followed by parts of the tag each cut off by another '<'
// (think_restart), then a part and a character that is neither the tag's next nor '<'
// (think_leave); the thoughts may end inside a part of the tag (think_tail). The tag's characters
// are all different, so no other overlap can occur. Special tokens are no text (raw_vocab), so
// none can be thought. (No lookahead: xgrammar does not enforce it.)
// think_open's prefix is the same block without its opening tag, and not optional.
constexpr const char* kThinkPrefix = R"(root ::= think_block | ""
think_block ::= "<think>" think_thoughts
think_thoughts ::= think_piece* think_tail "</think>" [ \t\r\n]{0,8}
think_piece ::= [^<] | "<" think_restart* think_leave
think_restart ::= think_part "<"
think_part ::= "" | "/" | "/t" | "/th" | "/thi" | "/thin" | "/think"
think_leave ::= [^/<] | "/" [^t<] | "/t" [^h<] | "/th" [^i<] | "/thi" [^n<] | "/thin" [^k<] | "/think" [^><]
think_tail ::= "" | "<" think_restart* think_part
)";

// A harmony reply (gpt-oss; StructuredOutputs::harmony_first) up to its final message's body, which
// the grammar then constrains: analysis messages first, if any, each ended by <|end|> and the next
// opened by <|start|>assistant (the first message's role is in the prompt). Their text may hold
// '<' but never "<|", so no marker can be thought.
// A forced call's prefix is the analysis messages alone (harmony_thoughts): its own header follows.
constexpr const char* kHarmonyPrefix = R"(root ::= harmony_thoughts "<|channel|>final<|message|>"
harmony_thoughts ::= harmony_analysis*
harmony_analysis ::= "<|channel|>analysis<|message|>" harmony_text "<|end|><|start|>assistant"
harmony_text ::= ([^<] | "<"+ [^|<])* "<"*
)";

struct StructuredOutputEngine::Impl {
  int vocab_size;
  xgrammar::GrammarCompiler compiler;

  // compile(s), or a ConfigKeyError naming `key` and xgrammar's reason.
  xgrammar::CompiledGrammar compile_or_refuse(const StructuredOutputs& s, const char* key) {
    MINIVLLM_CHECK_EQ(s.num_set(), 1) << "a grammar takes exactly one kind of structured output";
    try {
      return compile(s);
    } catch (const std::exception& e) {
      throw ConfigKeyError("", key, "cannot be compiled into a grammar: " + text_excerpt(xgrammar_reason(e.what()), 400));
    }
  }

  // Compact JSON (any_whitespace off): a small model left free to add whitespace can spend its
  // whole budget on newlines, and no schema asks for it.
  xgrammar::CompiledGrammar compile(const StructuredOutputs& s) {
    if (s.think_open) return compiler.CompileGrammar(xgrammar::Grammar::Concat({think_open_prefix(), grammar(s)}));
    if (s.think_first) return compiler.CompileGrammar(xgrammar::Grammar::Concat({think_prefix(), grammar(s)}));
    if (!s.harmony_calls.empty()) return compiler.CompileGrammar(harmony_calls(s.harmony_calls));
    if (s.harmony_first) return compiler.CompileGrammar(xgrammar::Grammar::Concat({harmony_prefix(), grammar(s)}));
    if (!s.json.empty()) return compiler.CompileJSONSchema(s.json, /*any_whitespace=*/false);
    if (s.json_object) return compiler.CompileJSONSchema(R"({"type": "object"})", /*any_whitespace=*/false);
    if (!s.regex.empty()) return compiler.CompileRegex(s.regex);
    if (!s.choice.empty()) return compiler.CompileGrammar(choice_ebnf(s.choice));
    return compiler.CompileGrammar(s.grammar, "root");
  }

  static std::string choice_ebnf(const std::vector<std::string>& choice) {
    std::string ebnf = "root ::= ";
    for (size_t i = 0; i < choice.size(); ++i) ebnf += (i > 0 ? " | " : "") + ebnf_literal(choice[i]);
    return ebnf;
  }

  // The same grammars uncompiled, for think_first's concatenation.
  static xgrammar::Grammar grammar(const StructuredOutputs& s) {
    if (!s.json.empty()) return xgrammar::Grammar::FromJSONSchema(s.json, /*any_whitespace=*/false);
    if (s.json_object) return xgrammar::Grammar::FromJSONSchema(R"({"type": "object"})", /*any_whitespace=*/false);
    if (!s.regex.empty()) return xgrammar::Grammar::FromRegex(s.regex);
    if (!s.choice.empty()) return xgrammar::Grammar::FromEBNF(choice_ebnf(s.choice));
    return xgrammar::Grammar::FromEBNF(s.grammar, "root");
  }

  static const xgrammar::Grammar& think_prefix() {
    static const xgrammar::Grammar g = xgrammar::Grammar::FromEBNF(kThinkPrefix);
    return g;
  }
  static const xgrammar::Grammar& harmony_prefix() {
    static const xgrammar::Grammar g = xgrammar::Grammar::FromEBNF(kHarmonyPrefix);
    return g;
  }
  // Analysis messages, then one call: a commentary message to one of the functions (the header as
  // gpt-oss's template writes a past call's), its body the function's arguments.
  static xgrammar::Grammar harmony_calls(const std::vector<StructuredOutputs::HarmonyCall>& calls) {
    static const xgrammar::Grammar thoughts = xgrammar::Grammar::FromEBNF(kHarmonyPrefix, "harmony_thoughts");
    std::vector<xgrammar::Grammar> each;
    for (const StructuredOutputs::HarmonyCall& c : calls) {
      const std::string header = "<|channel|>commentary to=functions." + c.name + " <|constrain|>json<|message|>";
      each.push_back(xgrammar::Grammar::Concat({xgrammar::Grammar::FromEBNF("root ::= " + ebnf_literal(header)),
                                                xgrammar::Grammar::FromJSONSchema(c.parameters, false)}));
    }
    return xgrammar::Grammar::Concat({thoughts, each.size() == 1 ? each[0] : xgrammar::Grammar::Union(each)});
  }
  static const xgrammar::Grammar& think_open_prefix() {
    static const xgrammar::Grammar g = xgrammar::Grammar::FromEBNF(kThinkPrefix, "think_thoughts");
    return g;
  }
};

StructuredOutputEngine::StructuredOutputEngine(const Tokenizer& tokenizer, int64_t vocab_size,
                                               const std::vector<int64_t>& stop_ids) {
  std::vector<int32_t> stops;
  for (int64_t id : stop_ids) {
    if (id >= 0 && id < vocab_size) stops.push_back(static_cast<int32_t>(id));
  }
  std::vector<std::string> vocab = raw_vocab(tokenizer);
  // Ids past the model's logits can never be sampled (a tokenizer may list more than the model has).
  if (static_cast<int64_t>(vocab.size()) > vocab_size) vocab.resize(static_cast<size_t>(vocab_size));
  xgrammar::TokenizerInfo info(vocab, xgrammar::VocabType::RAW, static_cast<int>(vocab_size), stops);
  impl_ = std::unique_ptr<Impl>(new Impl{static_cast<int>(vocab_size),
                                         xgrammar::GrammarCompiler(info, /*max_threads=*/2, /*cache_enabled=*/true)});
}

StructuredOutputEngine::~StructuredOutputEngine() = default;

std::unique_ptr<TokenConstraint> StructuredOutputEngine::make_constraint(const StructuredOutputs& spec,
                                                                         const char* key) {
  return make_xgrammar_constraint(impl_->compile_or_refuse(spec, key), impl_->vocab_size);
}

void StructuredOutputEngine::compile(const StructuredOutputs& spec, const char* key) {
  impl_->compile_or_refuse(spec, key);
}

bool StructuredOutputEngine::available() { return true; }

}  // namespace minivllm
