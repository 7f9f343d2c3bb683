// Kernel-time profiler for any CUDA process, without nsys: a CUPTI injection library.
//
//   CUDA_INJECTION64_PATH=/path/libkernel_profile.so MINIVLLM_KPROF_OUT=/tmp/prof minivllm bench ...
//
// The CUDA driver loads it at cuInit and calls InitializeInjection(). It records every kernel
// (those replayed inside CUDA graphs included), memcpy and memset through CUPTI's activity API and,
// when the process exits, writes one table per process to $MINIVLLM_KPROF_OUT.<pid>.txt (stderr
// when unset): per kernel name and per place (in a graph or launched eagerly), the count, the total
// and mean time, and the share of all GPU time. Why: the GPU machine has no nsys, and the engine's
// step profiler (MINIVLLM_PROFILE_STEPS) sees a graph replay only as one number.
//
// It also finds where the GPU idles: every kernel, copy and memset interval is kept, and the time
// no interval covers is charged to the pair (what ran last, what ran next). A gap between a graph's
// last kernel and the next step's first is the host's; a gap between two kernels of one graph is
// a dependency bubble (launch latency the graph did not hide). Table in the same file.
//
// And, for runs with programmatic dependent launch left on (MINIVLLM_NO_PDL unset), what each kernel
// adds to the chain's end: report_exposed.
//
// Build: tools/kernel_profile/build.sh (CUPTI's headers and library come from NVIDIA's
// nvidia-cuda-cupti wheel). Tracing adds a little time to each kernel; use it for shares, and
// `minivllm bench` without it for speed.
#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

struct Totals {
  uint64_t count = 0;
  uint64_t ns = 0;
};

std::mutex g_mu;
std::map<std::string, Totals> g_kernels;  // key: "graph|name" or "eager|name"
std::map<std::string, Totals> g_copies;
struct Interval {
  uint64_t start, end;
  const std::string* name;  // the key in g_kernels or g_copies (a std::map key never moves)
};
std::vector<Interval> g_intervals;
uint64_t g_first_start = UINT64_MAX, g_last_end = 0;
bool g_reported = false;

constexpr size_t kBufferBytes = 8u << 20;

void warn(const char* what, CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  std::fprintf(stderr, "[kernel_profile] %s: %s\n", what, s != nullptr ? s : "?");
}

// Demangled, without our namespaces and the parameter list: full names run to hundreds of
// characters, and one row per template instance is what says where time goes.
std::string short_name(const char* mangled) {
  if (mangled == nullptr) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = (status == 0 && d != nullptr) ? d : mangled;
  std::free(d);
  // The namespaces are the same for every kernel of ours and the parameter list repeats what the
  // template arguments say; dropping them keeps the template arguments, which tell one instance
  // (a gemv's epilogue, say) from another.
  for (const std::string ns : {"minivllm::cuda::(anonymous namespace)::", "minivllm::cuda::", "minivllm::"}) {
    for (size_t at; (at = s.find(ns)) != std::string::npos;) s.erase(at, ns.size());
  }
  if (!s.empty() && s.back() == ')') {  // "void k<...>(args)": cut the parameter list
    int depth = 0;
    for (size_t i = s.size(); i-- > 0;) {
      depth += s[i] == ')' ? 1 : s[i] == '(' ? -1 : 0;
      if (depth == 0) {
        s.erase(i);
        break;
      }
    }
  }
  if (s.size() > 200) s = s.substr(0, 197) + "...";
  return s;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void add(std::map<std::string, Totals>& m, const std::string& key, uint64_t start, uint64_t end) {
  auto& [name, t] = *m.try_emplace(key).first;
  g_intervals.push_back({start, end, &name});
  t.count += 1;
  t.ns += end - start;
  g_first_start = std::min(g_first_start, start);
  g_last_end = std::max(g_last_end, end);
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_mu);
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      add(g_kernels, std::string(k->graphId != 0 ? "graph|" : "eager|") + short_name(k->name), k->start, k->end);
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* c = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
      static const char* kinds[] = {"?", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
      const char* kind = c->copyKind < 11 ? kinds[c->copyKind] : "?";
      add(g_copies, std::string(c->graphId != 0 ? "graph|memcpy " : "eager|memcpy ") + kind, c->start, c->end);
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
      add(g_copies, std::string(m->graphId != 0 ? "graph|memset" : "eager|memset"), m->start, m->end);
    }
  }
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  if (dropped != 0) std::fprintf(stderr, "[kernel_profile] %zu records dropped\n", dropped);
  std::free(buffer);
}

// Idle time between intervals, charged to (last to end before the gap, first to start after it).
void report_idle(FILE* f) {
  std::sort(g_intervals.begin(), g_intervals.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  std::map<std::pair<const std::string*, const std::string*>, Totals> gaps;
  uint64_t covered_to = 0, idle = 0;
  const std::string* last = nullptr;
  for (const Interval& iv : g_intervals) {
    if (last != nullptr && iv.start > covered_to) {
      Totals& t = gaps[{last, iv.name}];
      t.count += 1;
      t.ns += iv.start - covered_to;
      idle += iv.start - covered_to;
    }
    if (iv.end >= covered_to) {
      covered_to = iv.end;
      last = iv.name;
    }
  }
  std::vector<std::pair<std::pair<const std::string*, const std::string*>, Totals>> rows(gaps.begin(), gaps.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  std::fprintf(f, "\n# idle: %.3f s of the span with no kernel, copy or memset running; by (before, after):\n",
               idle * 1e-9);
  std::fprintf(f, "%8s %10s %10s  %s\n", "total_ms", "count", "mean_us", "before -> after");
  for (size_t i = 0; i < rows.size() && i < 40; ++i) {
    const auto& [k, t] = rows[i];
    std::fprintf(f, "%8.1f %10llu %10.2f  %s -> %s\n", t.ns * 1e-6, static_cast<unsigned long long>(t.count),
                 t.ns * 1e-3 / t.count, k.first->c_str(), k.second->c_str());
  }
}

// Under programmatic dependent launch (the engine's default) a kernel starts before its predecessor
// ends, so its own time includes its wait and the table above double-counts. What the chain pays for
// a kernel is how much later the work ends because of it: with the intervals in order of their ends,
// end - max(the previous end, its own start) (time before its start, when nothing ran, is the idle
// table's). Summed, these are the busy span; by kernel, they say which kernels the step waits on.
void report_exposed(FILE* f) {
  std::vector<Interval> ivs = g_intervals;
  std::sort(ivs.begin(), ivs.end(), [](const Interval& a, const Interval& b) { return a.end < b.end; });
  std::map<const std::string*, Totals> exposed;
  uint64_t prev_end = 0, overlapped = 0, total = 0;
  for (const Interval& iv : ivs) {
    const uint64_t from = std::max(prev_end, iv.start);
    Totals& t = exposed[iv.name];
    t.count += 1;
    if (iv.end > from) {
      t.ns += iv.end - from;
      total += iv.end - from;
    }
    if (iv.start < prev_end) ++overlapped;
    prev_end = std::max(prev_end, iv.end);
  }
  std::vector<std::pair<const std::string*, Totals>> rows(exposed.begin(), exposed.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  std::fprintf(f, "\n# exposed: %.3f s by the ends of %zu intervals (%llu started before the previous one ended)\n",
               total * 1e-9, ivs.size(), static_cast<unsigned long long>(overlapped));
  std::fprintf(f, "%8s %6s %10s %10s  %s\n", "total_ms", "share", "count", "mean_us", "where|kernel");
  for (size_t i = 0; i < rows.size() && i < 40; ++i) {
    const auto& [k, t] = rows[i];
    std::fprintf(f, "%8.1f %5.1f%% %10llu %10.2f  %s\n", t.ns * 1e-6, total != 0 ? 100.0 * t.ns / total : 0.0,
                 static_cast<unsigned long long>(t.count), t.ns * 1e-3 / t.count, k->c_str());
  }
}

void report() {
  if (g_reported) return;
  g_reported = true;
  const CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (r != CUPTI_SUCCESS) warn("cuptiActivityFlushAll", r);
  std::lock_guard<std::mutex> lock(g_mu);
  FILE* f = stderr;
  const char* prefix = std::getenv("MINIVLLM_KPROF_OUT");
  std::string path;
  if (prefix != nullptr && *prefix != '\0') {
    path = std::string(prefix) + "." + std::to_string(getpid()) + ".txt";
    f = std::fopen(path.c_str(), "w");
    if (f == nullptr) f = stderr;
  }
  std::vector<std::pair<std::string, Totals>> rows(g_kernels.begin(), g_kernels.end());
  rows.insert(rows.end(), g_copies.begin(), g_copies.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  uint64_t all = 0, graph = 0;
  for (const auto& [k, t] : rows) {
    all += t.ns;
    if (k.rfind("graph|", 0) == 0) graph += t.ns;
  }
  const double span = g_last_end > g_first_start ? static_cast<double>(g_last_end - g_first_start) : 0.0;
  std::fprintf(f, "# pid %d: GPU busy %.3f s (in graphs %.3f s, eager %.3f s) over a %.3f s span\n",
               static_cast<int>(getpid()), all * 1e-9, graph * 1e-9, (all - graph) * 1e-9, span * 1e-9);
  std::fprintf(f, "%8s %6s %10s %10s  %s\n", "total_ms", "share", "count", "mean_us", "where|kernel");
  for (const auto& [k, t] : rows) {
    std::fprintf(f, "%8.1f %5.1f%% %10llu %10.2f  %s\n", t.ns * 1e-6, all != 0 ? 100.0 * t.ns / all : 0.0,
                 static_cast<unsigned long long>(t.count), t.count != 0 ? t.ns * 1e-3 / t.count : 0.0, k.c_str());
  }
  report_idle(f);
  report_exposed(f);
  if (f != stderr) std::fclose(f);
}

}  // namespace

extern "C" int InitializeInjection() {
  CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) {
    warn("cuptiActivityRegisterCallbacks", r);
    return 0;
  }
  for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                               CUPTI_ACTIVITY_KIND_MEMSET}) {
    r = cuptiActivityEnable(k);
    if (r != CUPTI_SUCCESS) warn("cuptiActivityEnable", r);
  }
  std::atexit(report);
  return 1;
}
