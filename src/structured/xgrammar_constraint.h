// A TokenConstraint over an xgrammar GrammarMatcher (structured_output_engine.h makes them).
#pragma once

#include <memory>

#include <xgrammar/xgrammar.h>

#include "engine/token_constraint.h"

namespace minivllm {

std::unique_ptr<TokenConstraint> make_xgrammar_constraint(const xgrammar::CompiledGrammar& grammar, int vocab_size);

}  // namespace minivllm
