// The stub StructuredOutputEngine of a build without xgrammar: every constrained request is
// refused (a 400 naming the parameter), never run unconstrained.
#include "common/config_key.h"
#include "structured/structured_output_engine.h"

namespace minivllm {

struct StructuredOutputEngine::Impl {};

StructuredOutputEngine::StructuredOutputEngine(const Tokenizer&, int64_t, const std::vector<int64_t>&) {}
StructuredOutputEngine::~StructuredOutputEngine() = default;

std::unique_ptr<TokenConstraint> StructuredOutputEngine::make_constraint(const StructuredOutputs&, const char* key) {
  throw ConfigKeyError("", key,
                       "is not supported by this build: it was built without xgrammar (tools/install_xgrammar.sh)");
}

void StructuredOutputEngine::compile(const StructuredOutputs& spec, const char* key) { make_constraint(spec, key); }

bool StructuredOutputEngine::available() { return false; }

}  // namespace minivllm
