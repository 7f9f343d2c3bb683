// HostProfile: see host_profile.h.
#include "common/host_profile.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "common/tuning.h"

namespace minivllm {
namespace {

struct Table {
  std::mutex mu;
  std::map<std::string, std::pair<int64_t, int64_t>> parts;  // name -> (count, ns)
  ~Table() {
    if (parts.empty()) return;
    std::fprintf(stderr, "[host-profile] pid %d: scope, calls, total ms, mean us\n", static_cast<int>(getpid()));
    for (const auto& [name, v] : parts) {
      std::fprintf(stderr, "[host-profile]   %-22s %8lld %10.1f %9.1f\n", name.c_str(), static_cast<long long>(v.first),
                   v.second / 1e6, v.first > 0 ? v.second / 1e3 / static_cast<double>(v.first) : 0.0);
    }
  }
};

Table& table() {
  static Table t;
  return t;
}

}  // namespace

bool HostProfile::enabled() {
  static const bool on = knob_flag("MINIVLLM_PROFILE_HOST");
  return on;
}

void HostProfile::add(const char* name, int64_t ns) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto& v = t.parts[name];
  ++v.first;
  v.second += ns;
}

}  // namespace minivllm
