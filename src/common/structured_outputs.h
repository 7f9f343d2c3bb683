// StructuredOutputs: what a request's completion must match (vLLM's `structured_outputs`
// extension; OpenAI's response_format maps onto json and json_object). A plain value, so that it
// is a sampling key like any other (config_table.h reads and writes it as a JSON object); the
// grammar engine that enforces it is src/structured/'s.
#pragma once

#include <string>
#include <vector>

namespace minivllm {

struct StructuredOutputs {
  std::string json;                 // a JSON schema, as JSON text ("" when unset)
  bool json_object = false;         // any JSON object
  std::string regex;                // the whole completion matches it
  std::vector<std::string> choice;  // the completion is exactly one of these
  std::string grammar;              // an EBNF grammar (xgrammar's dialect, root rule `root`)
  // Not a request key: the server sets it for a reasoning model that thinks (--reasoning-parser
  // qwen3, thinking on). The constrained reply may follow one <think>...</think> block (free text,
  // then up to 8 whitespace characters), as vLLM applies the grammar once reasoning ends.
  bool think_first = false;
  // Not a request key either: the prompt already opened the block (the chat template ends the
  // generation prompt with <think>: DeepSeek-R1's distills, QwQ, Qwen3's thinking-only models), so
  // the reply's thoughts run until </think> (then up to 8 whitespace characters) before the
  // constrained part.
  bool think_open = false;
  // Not a request key: the server sets it for a model that writes OpenAI's harmony format (gpt-oss).
  // The constrained part is the body of the reply's final message; analysis messages may come first.
  bool harmony_first = false;
  // Not a request key: a forced tool call (tool_choice required or named) of a harmony model. The
  // reply, after any analysis messages, is a commentary message to one of these functions whose
  // body is that function's arguments: {name, JSON schema of its parameters}.
  struct HarmonyCall {
    std::string name;
    std::string parameters;
    bool operator==(const HarmonyCall&) const = default;
  };
  std::vector<HarmonyCall> harmony_calls;

  // How many of the five (and harmony_calls) are set: 0 (unconstrained) or 1 (more is refused when read).
  int num_set() const {
    return (json.empty() ? 0 : 1) + (json_object ? 1 : 0) + (regex.empty() ? 0 : 1) + (choice.empty() ? 0 : 1) +
           (grammar.empty() ? 0 : 1) + (harmony_calls.empty() ? 0 : 1);
  }
  bool empty() const { return num_set() == 0; }
  bool operator==(const StructuredOutputs&) const = default;
};

}  // namespace minivllm
