#include "run_cli.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace minivllm::test {
namespace {

std::string shell_quote(const std::string& s) {
  std::string q(1, '\'');
  for (char c : s) {
    if (c == '\'') q.append("'\\''");
    else q.push_back(c);
  }
  q.push_back('\'');
  return q;
}

}  // namespace

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

CliResult run_cli(const std::vector<std::string>& args, const std::string& stdin_text) {
  char dir_template[] = "/tmp/minivllm_cli_test_XXXXXX";
  // std::filesystem::path and a stream rather than string operator+: GCC 12 gives a false
  // -Wrestrict on the latter at -O3.
  const std::filesystem::path dir = mkdtemp(dir_template);
  const std::string in = dir / "in", out = dir / "out", err = dir / "err";
  std::ofstream(in, std::ios::binary) << stdin_text;
  std::ostringstream cmd;
  cmd << shell_quote(MINIVLLM_BINARY_DIR "/minivllm");
  for (const std::string& a : args) cmd << ' ' << shell_quote(a);
  cmd << " < " << in << " > " << out << " 2> " << err;
  const int status = std::system(cmd.str().c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text_file(out);
  r.err = read_text_file(err);
  std::remove(in.c_str());
  std::remove(out.c_str());
  std::remove(err.c_str());
  rmdir(dir.c_str());
  return r;
}

}  // namespace minivllm::test
