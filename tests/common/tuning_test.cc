// The knob table (common/tuning.cc): every MINIVLLM_* variable the code reads or the tests set has
// a row, every read goes through it, and each accessor enforces its row's type and range.
#include "common/tuning.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "common/check.h"
#include "scoped_env.h"

namespace minivllm {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// name -> the files it appears in, for each match of `re` (group 1: the name) in files under `dir`
// whose extension is in `exts`.
std::map<std::string, std::set<std::string>> names_in(const std::string& dir, const std::set<std::string>& exts,
                                                      const std::regex& re) {
  std::map<std::string, std::set<std::string>> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || !exts.contains(e.path().extension().string())) continue;
    const std::string text = read_file(e.path());
    for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
      out[(*it)[1].str()].insert(fs::relative(e.path(), MINIVLLM_SOURCE_DIR).string());
    }
  }
  return out;
}

bool in_table(const std::string& name) {
  for (const Knob& k : knobs()) {
    if (name == k.name) return true;
  }
  return false;
}

const std::set<std::string> kCpp = {".cc", ".h", ".cu", ".cuh"};

TEST(KnobTable, EveryVariableTheEngineReadsHasARow) {
  const std::regex read(R"re((?:knob_\w+|getenv|env_\w+)\("(MINIVLLM_[A-Z0-9_]+)")re");
  const auto names = names_in(MINIVLLM_SOURCE_DIR "/src", kCpp, read);
  EXPECT_GT(names.size(), 30u);  // the scan finds the reads
  for (const auto& [name, files] : names) {
    EXPECT_TRUE(in_table(name)) << name << " (read in " << *files.begin() << ") has no row in common/tuning.cc";
  }
}

TEST(KnobTable, OnlyTheTableReadsTheEnvironment) {
  const std::regex raw(R"re((?:std::)?(getenv|env_switch|env_int|env_choice|env_word|env_text)\("(MINIVLLM_[A-Z0-9_]+)")re");
  for (const auto& e : fs::recursive_directory_iterator(MINIVLLM_SOURCE_DIR "/src")) {
    if (!e.is_regular_file() || !kCpp.contains(e.path().extension().string())) continue;
    const std::string rel = fs::relative(e.path(), MINIVLLM_SOURCE_DIR).string();
    if (rel == "src/common/tuning.cc") continue;
    const std::string text = read_file(e.path());
    std::smatch m;
    EXPECT_FALSE(std::regex_search(text, m, raw)) << rel << " reads " << m[2] << " with " << m[1]
                                                  << ": read knobs through common/tuning.h";
  }
}

TEST(KnobTable, EveryVariableTheTestsAndToolsSetHasARow) {
  const std::regex set(R"re((?:setenv\(|environ\.get\(|environ\[)"(MINIVLLM_[A-Z0-9_]+)")re");
  for (const char* dir : {"/tests", "/tools", "/python"}) {
    const std::string root = std::string(MINIVLLM_SOURCE_DIR) + dir;
    if (!fs::exists(root)) continue;
    for (const auto& [name, files] : names_in(root, {".cc", ".h", ".py"}, set)) {
      EXPECT_TRUE(in_table(name)) << name << " (in " << *files.begin() << ") has no row in common/tuning.cc";
    }
  }
}

TEST(KnobTable, RowsAreWellFormed) {
  std::set<std::string> seen;
  for (const Knob& k : knobs()) {
    const std::string name = k.name;
    EXPECT_TRUE(name.starts_with("MINIVLLM_")) << name;
    EXPECT_TRUE(seen.insert(name).second) << name << " has two rows";
    EXPECT_NE(std::string(k.why), "") << name;
    if (k.kind == KnobKind::kInt) {
      EXPECT_LE(k.lo, k.hi) << name;
    }
    if (k.kind == KnobKind::kChoice || k.kind == KnobKind::kWord) {
      EXPECT_NE(std::string(k.values), "") << name;
    }
  }
}

using test::ScopedEnv;

void expect_error_naming(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(KnobTable, AccessorsTakeTypeRangeAndDefaultFromTheRow) {
  // The defaults below are read with the knobs unset, and a value exported by the caller comes back.
  const ScopedEnv unset({{"MINIVLLM_ROPE_VEC", nullptr},
                         {"MINIVLLM_AR_TILE_KB", nullptr},
                         {"MINIVLLM_PREFILL_KERNEL", nullptr}});
  EXPECT_TRUE(knob_flag("MINIVLLM_ROPE_VEC"));  // the row's default, 1
  {
    ScopedEnv e("MINIVLLM_ROPE_VEC", "0");
    EXPECT_FALSE(knob_flag("MINIVLLM_ROPE_VEC"));
  }
  {
    ScopedEnv e("MINIVLLM_ROPE_VEC", "yes");
    expect_error_naming([] { knob_flag("MINIVLLM_ROPE_VEC"); }, "MINIVLLM_ROPE_VEC=yes must be 0 or 1");
  }
  {
    ScopedEnv e("MINIVLLM_AR_TILE_KB", "12");  // in range, not a choice
    expect_error_naming([] { knob_number("MINIVLLM_AR_TILE_KB"); }, "must be one of 4, 8, 16");
  }
  EXPECT_EQ(knob_number("MINIVLLM_AR_TILE_KB"), 4);
  {
    ScopedEnv e("MINIVLLM_DECODE_GEMM_TOKENS", "257");
    expect_error_naming([] { knob_number("MINIVLLM_DECODE_GEMM_TOKENS"); }, "from 0 to 256");
  }
  {
    ScopedEnv e("MINIVLLM_PREFILL_KERNEL", "wgmma");
    expect_error_naming([] { knob_mode("MINIVLLM_PREFILL_KERNEL"); }, "must be one of auto, mma");
  }
  EXPECT_EQ(knob_mode("MINIVLLM_PREFILL_KERNEL"), "auto");
  {
    ScopedEnv e("MINIVLLM_NCCL_TIMEOUT_S", "2.5");
    EXPECT_DOUBLE_EQ(*knob_seconds("MINIVLLM_NCCL_TIMEOUT_S"), 2.5);
  }
  // A site that reads a row as another kind, a computed default as a constant, or a name with no
  // row is a programming error, caught at its first read.
  expect_error_naming([] { knob_int("MINIVLLM_ROPE_VEC"); }, "is a 0|1 knob");
  expect_error_naming([] { knob_flag("MINIVLLM_DECODE_MMA"); }, "default is computed");
  expect_error_naming([] { knob_switch("MINIVLLM_NO_SUCH_KNOB"); }, "no row for MINIVLLM_NO_SUCH_KNOB");
}

TEST(KnobTable, UnknownVariablesAreReported) {
  ScopedEnv typo("MINIVLLM_DECODE_MAA", "0");
  ScopedEnv known("MINIVLLM_DECODE_MMA", "0");
  const std::vector<std::string> unknown = unknown_knob_variables();
  EXPECT_NE(std::find(unknown.begin(), unknown.end(), "MINIVLLM_DECODE_MAA"), unknown.end());
  EXPECT_EQ(std::find(unknown.begin(), unknown.end(), "MINIVLLM_DECODE_MMA"), unknown.end());
}

}  // namespace
}  // namespace minivllm
