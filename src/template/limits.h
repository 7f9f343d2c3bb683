// Bounds on what a chat template and its variables may make the interpreter do. A chat template
// comes from a model file anyone can publish and its variables come from clients, so neither may
// crash the process (deep recursion), hang it or exhaust its memory: every bound below turns such
// an input into a minivllm::Error that names the limit. Real chat templates stay far inside them
// (they nest a handful of blocks, loop over the messages and print kilobytes to megabytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace minivllm::jinja {

// ---- Template text (checked when parsing) ----

// Nesting of {% if / for / macro / set / generation %} blocks. The parser and the renderer recurse
// once per level; real templates nest fewer than 10 deep.
inline constexpr int kMaxBlockDepth = 256;

// Nesting of an expression: parentheses, brackets, unary operators and the depth of the parsed
// tree (a chain `a ~ b ~ c ...` of N operators is N deep). The parser recurses about 17 frames per
// parenthesis and the renderer once per tree level; real templates stay under 20, and Python
// itself rejects more than 200 nested parentheses.
inline constexpr int kMaxExpressionDepth = 256;

// ---- Values (variables and what a template builds) ----

// Nesting of a JSON variable (messages, tools, extra variables), e.g. [[[...]]]. Conversion and
// every later walk (printing, tojson, comparison, destruction) recurse once per level; tool
// schemas nest about 10 deep.
inline constexpr int kMaxJsonDepth = 256;

// Nesting of any value built while rendering (brackets around a deep variable, namespaces holding
// lists...). Same recursion as above; twice the JSON depth so that templates can wrap variables.
inline constexpr int kMaxValueDepth = 512;

// A value assigned to a namespace attribute ({% set ns.x = v %}) may be nested at most this deep
// and hold no namespace: namespaces are the only mutable values, and this rule keeps their nesting
// known when they are created (so kMaxValueDepth holds) and makes reference cycles impossible.
inline constexpr int kMaxNamespaceAttrDepth = kMaxJsonDepth;

// Length of one string, in bytes: 16 MiB is ~4M tokens of text, far beyond any context window.
// Checked before a string is built ('a' * 10**12 fails at once).
inline constexpr size_t kMaxStringBytes = size_t{16} << 20;

// Length of one list (or dict): a million items is ~50 MB of values and far more messages,
// tools or characters than a prompt holds. Checked before a list is built ([1] * 10**10).
inline constexpr size_t kMaxListItems = 1'000'000;

// Total rendered text of one render, in bytes: the prompt is tokenized afterwards, and 16 MiB is
// beyond any context window.
inline constexpr size_t kMaxOutputBytes = size_t{16} << 20;

// For-loop iterations of one render, summed over all loops (candidates rejected by a loop's `if`
// filter included). range() gives at most 100000 items, so this binds nested loops; a template
// loops over the messages a few times. An iteration costs 0.3-0.5 us (-O2), so reaching this takes
// a few seconds; a loop whose body does anything hits kMaxRenderWork first.
inline constexpr uint64_t kMaxLoopIterations = 10'000'000;

// Recursion of a macro into itself (or others): as jinja2's sandbox would hit Python's limit.
inline constexpr int kMaxMacroDepth = 64;

// Stack depth of the renderer: statements and expression nodes being evaluated at once, macro
// calls included. Blocks and expressions are bounded at parse time, but a macro call restarts
// them; this keeps the native stack use of a render under 2 MB even in an ASan debug build (the
// tests pass with `ulimit -s 2048`), a quarter of the usual 8 MB main-thread stack.
inline constexpr int kMaxRenderDepth = 1024;

// Work of one render, in units of roughly a nanosecond: bytes of strings built, scanned or
// compared (1 each), list items visited (kWorkPerItem), list items created (kWorkPerNewItem:
// allocation), statements and expression nodes evaluated (kWorkPerNode). The limits above bound
// sizes; this bounds time (0.3-3 s of CPU at -O2, depending on the kind of work) against repeated
// work, e.g. `x in big_list` or big_list|unique inside nested loops, or a macro calling itself
// twice per level. A render of a long conversation uses a few percent of it.
inline constexpr uint64_t kMaxRenderWork = uint64_t{1} << 30;
inline constexpr uint64_t kWorkPerItem = 16;
inline constexpr uint64_t kWorkPerNewItem = 64;
inline constexpr uint64_t kWorkPerNode = 32;

// Error messages quote at most this many bytes of a template or variable.
inline constexpr size_t kMaxErrorExcerpt = 80;
// ... and a template's raise_exception() message is cut to this many bytes.
inline constexpr size_t kMaxRaisedMessage = 256;

// The render-time limits, overridable per ChatTemplate (tests lower them to hit them quickly).
struct RenderLimits {
  size_t max_string_bytes = kMaxStringBytes;
  size_t max_list_items = kMaxListItems;
  size_t max_output_bytes = kMaxOutputBytes;
  uint64_t max_loop_iterations = kMaxLoopIterations;
  uint64_t max_work = kMaxRenderWork;
};

// The limits and counters of the render running on this thread: created by the renderer for the
// duration of a render. Outside a render the default limits apply and nothing is counted.
class RenderBudget {
 public:
  explicit RenderBudget(const RenderLimits& limits);
  ~RenderBudget();
  RenderBudget(const RenderBudget&) = delete;
  RenderBudget& operator=(const RenderBudget&) = delete;

  const RenderLimits& limits() const { return limits_; }
  // The budget of the render running on this thread, or nullptr.
  static RenderBudget* active();

  void charge(uint64_t units) {
    work_ += units;
    if (work_ > limits_.max_work) exceeded_work();
  }
  void count_iteration() {
    if (++iterations_ > limits_.max_loop_iterations) exceeded_iterations();
  }

 private:
  [[noreturn]] void exceeded_work() const;
  [[noreturn]] void exceeded_iterations() const;

  RenderLimits limits_;
  uint64_t work_ = 0;
  uint64_t iterations_ = 0;
  RenderBudget* previous_;
};

// The limits in force on this thread (the running render's, or the defaults).
const RenderLimits& active_limits();
// Charges work to the running render (no-op outside one); throws TypeError past the budget.
inline void charge_work(uint64_t units) {
  if (RenderBudget* b = RenderBudget::active()) b->charge(units);
}
// Throw TypeError naming the limit when a string of `bytes` or a list of `items` would be too big.
void check_string_size(uint64_t bytes);
void check_list_size(uint64_t items);

// At most `max` bytes of `s` (cut at a UTF-8 character boundary), with "..." and the full size
// appended when cut: what error messages quote of templates and variables.
std::string excerpt(std::string_view s, size_t max = kMaxErrorExcerpt);

}  // namespace minivllm::jinja
