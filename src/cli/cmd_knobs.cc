// `minivllm knobs`: the MINIVLLM_* environment variables from the one table (common/tuning.cc).
#include <iostream>

#include "cli/cli_io.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "common/tuning.h"

namespace minivllm::cli {

int run_knobs(const std::vector<std::string>& argv) {
  ArgParser p("knobs", "knobs [--all] [--json]",
              "Lists the MINIVLLM_* environment variables the engine reads: values, default and why.");
  p.flag("--all", "also the variables the tests, benchmarks and scripts read");
  p.flag("--json", "one JSON array of objects instead of text");
  return run_command(p, argv, [](const ParsedArgs& a) {
    const bool all = a.has("--all");
    nlohmann::json rows = nlohmann::json::array();
    for (const Knob& k : knobs()) {
      if (!all && k.group == KnobGroup::kTooling) continue;
      const std::string values = k.kind == KnobKind::kInt
                                     ? std::to_string(k.lo) + ".." + std::to_string(k.hi)
                                     : (k.kind == KnobKind::kChoice || k.kind == KnobKind::kWord
                                            ? std::string(k.values)
                                            : std::string(knob_kind_name(k.kind)));
      if (a.has("--json")) {
        rows.push_back({{"name", k.name}, {"group", knob_group_name(k.group)}, {"values", values},
                        {"note", k.values}, {"default", k.fallback}, {"why", k.why}});
        continue;
      }
      std::cout << k.name << "  [" << knob_group_name(k.group) << "]  " << values;
      if (k.kind != KnobKind::kChoice && k.kind != KnobKind::kWord && k.values[0] != '\0') {
        std::cout << " (" << k.values << ")";
      }
      if (k.fallback[0] != '\0') std::cout << "  default: " << k.fallback;
      std::cout << "\n    " << k.why << "\n";
    }
    if (a.has("--json")) std::cout << dump_json(rows) << "\n";
    return kExitOk;
  });
}

}  // namespace minivllm::cli
