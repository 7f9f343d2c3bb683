// Parses lexed chunks into a statement tree (ast.h). Jinja's grammar and operator precedence;
// unknown or unsupported tags are errors that name the tag and the template line.
#pragma once

#include <string_view>

#include "template/ast.h"

namespace minivllm::jinja {

Body parse_template(std::string_view source);

}  // namespace minivllm::jinja
