#include "common/file_contents.h"

#include <fstream>
#include <sstream>

#include "common/check.h"

namespace minivllm {

std::string read_file_contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MINIVLLM_CHECK(in) << "cannot open " << path;
  std::ostringstream text;
  text << in.rdbuf();
  MINIVLLM_CHECK(!in.bad()) << "cannot read " << path;
  return text.str();
}

}  // namespace minivllm
