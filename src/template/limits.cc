// Render budgets and the size checks of limits.h.
#include "template/limits.h"

#include "template/value.h"

namespace minivllm::jinja {
namespace {

thread_local RenderBudget* g_active = nullptr;

const RenderLimits& default_limits() {
  static const RenderLimits kDefaults;
  return kDefaults;
}

}  // namespace

RenderBudget::RenderBudget(const RenderLimits& limits) : limits_(limits), previous_(g_active) { g_active = this; }

RenderBudget::~RenderBudget() { g_active = previous_; }

RenderBudget* RenderBudget::active() { return g_active; }

void RenderBudget::exceeded_work() const {
  throw TypeError("template does too much work: over " + std::to_string(limits_.max_work) +
                  " units in one render (kMaxRenderWork)");
}

void RenderBudget::exceeded_iterations() const {
  throw TypeError("too many loop iterations: over " + std::to_string(limits_.max_loop_iterations) +
                  " in one render (kMaxLoopIterations)");
}

const RenderLimits& active_limits() {
  RenderBudget* b = RenderBudget::active();
  return b ? b->limits() : default_limits();
}

void check_string_size(uint64_t bytes) {
  size_t max = active_limits().max_string_bytes;
  if (bytes > max)
    throw TypeError("string too long: " + std::to_string(bytes) + " bytes, the limit is " + std::to_string(max) +
                    " (kMaxStringBytes)");
}

void check_list_size(uint64_t items) {
  size_t max = active_limits().max_list_items;
  if (items > max)
    throw TypeError("list too long: " + std::to_string(items) + " items, the limit is " + std::to_string(max) +
                    " (kMaxListItems)");
}

std::string excerpt(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
  return std::string(s.substr(0, cut)) + "... (" + std::to_string(s.size()) + " bytes)";
}

}  // namespace minivllm::jinja
