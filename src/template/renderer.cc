// Statement execution of the template renderer (see renderer.h); expressions are in
// renderer_expr.cc.
#include "template/renderer.h"

#include "common/check.h"
#include "template/builtins.h"

namespace minivllm::jinja {

namespace {

// What an error message quotes of a TypeError: its text, cut (limits.h: messages stay short even
// when some part of them quotes a template or a variable).
std::string message_of(const TypeError& e) { return excerpt(e.what(), 4 * kMaxErrorExcerpt); }

}  // namespace

Renderer::Renderer(const Body& program, const ValueDict& globals, const RenderLimits& limits)
    : program_(program), limits_(limits) {
  auto root = std::make_shared<Frame>();
  for (const auto& [k, v] : globals.entries) (*root)[k] = v;
  frames_.push_back(std::move(root));
}

std::string Renderer::render() {
  RenderBudget budget(limits_);
  std::string out;
  Flow flow;
  try {
    flow = exec_body(program_, out);
  } catch (const TypeError& e) {  // thrown outside any statement (none expected; kept as Error)
    MINIVLLM_FAIL() << "chat template: " << message_of(e);
  }
  MINIVLLM_CHECK(flow == Flow::kNormal) << "chat template: 'break' or 'continue' outside a for loop";
  return out;
}

Renderer::DepthGuard::DepthGuard(Renderer& r, int line) : r_(r) {
  if (r_.depth_ >= kMaxRenderDepth)
    MINIVLLM_FAIL() << "chat template line " << line << ": template nested too deeply when rendering: over "
                    << kMaxRenderDepth << " statements and expressions at once, macro calls included"
                    << " (kMaxRenderDepth)";
  ++r_.depth_;
}

void Renderer::append_output(std::string& out, const std::string& text) const {
  if (out.size() + text.size() > limits_.max_output_bytes)
    throw TypeError("rendered output too long: over " + std::to_string(limits_.max_output_bytes) +
                    " bytes (kMaxOutputBytes)");
  charge_work(text.size());
  out += text;
}

Value Renderer::lookup(const std::string& name) const {
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
    auto hit = (*it)->find(name);
    if (hit != (*it)->end()) return hit->second;
  }
  return Value::undefined(std::string("'").append(excerpt(name)).append("' is undefined"));
}

Renderer::Flow Renderer::exec_body(const Body& body, std::string& out) {
  for (const auto& s : body) {
    Flow f = exec(*s, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::exec(const Stmt& s, std::string& out) {
  DepthGuard guard(*this, s.line);
  try {
    charge_work(kWorkPerNode);
    switch (s.kind) {
      case Stmt::Kind::kText: append_output(out, s.text); return Flow::kNormal;
      case Stmt::Kind::kOutput: append_output(out, to_str(eval(*s.expr))); return Flow::kNormal;
      case Stmt::Kind::kIf:
        for (const auto& [cond, body] : s.branches)
          if (truthy(eval(*cond))) return exec_body(body, out);
        return exec_body(s.else_body, out);
      case Stmt::Kind::kFor: return exec_for(s, out);
      case Stmt::Kind::kSet:
      case Stmt::Kind::kSetBlock: exec_set(s, out); return Flow::kNormal;
      case Stmt::Kind::kMacro: {
        const Stmt* macro = &s;
        assign(s.text, Value::callable(s.text, [this, macro](CallArgs& args) { return call_macro(*macro, args); }));
        return Flow::kNormal;
      }
      case Stmt::Kind::kBreak: return Flow::kBreak;
      case Stmt::Kind::kContinue: return Flow::kContinue;
      case Stmt::Kind::kScope: return exec_body(s.body, out);
    }
  } catch (const TypeError& e) {
    MINIVLLM_FAIL() << "chat template line " << s.line << ": " << message_of(e);
  }
  return Flow::kNormal;
}

void Renderer::bind_targets(const std::vector<std::string>& targets, const Value& v) {
  if (targets.size() == 1) {
    assign(targets[0], v);
    return;
  }
  ValueList items = iterate(v);
  if (items.size() != targets.size())
    throw TypeError("cannot unpack " + std::to_string(items.size()) + " values into " +
                    std::to_string(targets.size()) + " names");
  for (size_t i = 0; i < items.size(); ++i) assign(targets[i], items[i]);
}

Renderer::Flow Renderer::exec_for(const Stmt& s, std::string& out) {
  Value iterable = eval(*s.expr);
  ValueList own;
  const ValueList* list = &own;
  if (iterable.is_list()) {
    list = &iterable.as_list();  // lists are immutable: no copy
  } else {
    own = iterate(iterable);
  }
  if (s.filter) {  // `for x in xs if cond`: the loop (and loop.length) sees only the kept items
    ValueList kept;
    for (const Value& item : *list) {
      RenderBudget::active()->count_iteration();
      frames_.push_back(std::make_shared<Frame>());
      bind_targets(s.targets, item);
      bool keep = truthy(eval(*s.filter));
      frames_.pop_back();
      if (keep) kept.push_back(item);
    }
    own = std::move(kept);
    list = &own;
  }
  const ValueList& items = *list;
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    if (!s.filter) RenderBudget::active()->count_iteration();  // filtered loops counted their candidates
    ValueDict loop;
    loop.entries = {
        {"index", Value::integer(i + 1)},
        {"index0", Value::integer(i)},
        {"revindex", Value::integer(n - i)},
        {"revindex0", Value::integer(n - i - 1)},
        {"first", Value::boolean(i == 0)},
        {"last", Value::boolean(i == n - 1)},
        {"length", Value::integer(n)},
        {"depth", Value::integer(1)},
        {"depth0", Value::integer(0)},
        {"previtem", i > 0 ? items[i - 1] : Value::undefined("there is no previous item")},
        {"nextitem", i + 1 < n ? items[i + 1] : Value::undefined("there is no next item")},
        {"cycle", Value::callable("loop.cycle", [i](CallArgs& a) {
           if (a.positional.empty()) throw TypeError("loop.cycle needs at least one argument");
           return a.positional[static_cast<size_t>(i) % a.positional.size()];
         })},
    };
    frames_.push_back(std::make_shared<Frame>());
    assign("loop", Value::make_namespace(std::move(loop)));
    bind_targets(s.targets, items[i]);
    Flow f;
    try {
      f = exec_body(s.body, out);
    } catch (...) {
      frames_.pop_back();
      throw;
    }
    frames_.pop_back();
    if (f == Flow::kBreak) break;
  }
  if (n == 0) return exec_body(s.else_body, out);
  return Flow::kNormal;
}

void Renderer::exec_set(const Stmt& s, std::string& out) {
  if (s.kind == Stmt::Kind::kSetBlock) {
    std::string captured;
    Flow f = exec_body(s.body, captured);
    if (f != Flow::kNormal) throw TypeError("'break'/'continue' inside a set block");
    assign(s.targets[0], Value::string(std::move(captured)));
    return;
  }
  Value v = eval(*s.expr);
  if (!s.attr_target) {
    bind_targets(s.targets, v);
    return;
  }
  Value ns = lookup(s.targets[0]);
  if (ns.kind() != Value::Kind::kNamespace)
    throw TypeError("cannot assign attribute '" + excerpt(s.targets[1]) + "' on '" + excerpt(s.targets[0]) +
                    "': not a namespace() object");
  check_namespace_attr(s.targets[0] + "." + s.targets[1], v);
  ns.mutable_namespace().set(s.targets[1], std::move(v));
}

Value Renderer::call_macro(const Stmt& macro, CallArgs& args) {
  MINIVLLM_CHECK(macro_depth_ < kMaxMacroDepth)
      << "chat template line " << macro.line << ": macro '" << excerpt(macro.text) << "' recursion too deep: over "
      << kMaxMacroDepth << " calls (kMaxMacroDepth)";
  if (args.positional.size() > macro.params.size())
    throw TypeError("macro '" + excerpt(macro.text) + "' takes " + std::to_string(macro.params.size()) + " arguments (" +
                    std::to_string(args.positional.size()) + " given)");
  // A macro sees the render variables and top-level names, never its caller's locals.
  std::vector<std::shared_ptr<Frame>> saved = {frames_[0], std::make_shared<Frame>()};
  saved.swap(frames_);
  ++macro_depth_;
  std::string out;
  try {
    for (size_t i = 0; i < macro.params.size(); ++i) {
      const auto& [name, dflt] = macro.params[i];
      Value v = Value::undefined("'" + name + "' is undefined");
      if (i < args.positional.size()) v = args.positional[i];
      else if (dflt) v = eval(*dflt);
      assign(name, v);
    }
    for (const auto& [key, v] : args.keyword) {
      bool known = false;
      for (const auto& p : macro.params) known |= p.first == key;
      if (!known) throw TypeError("macro '" + excerpt(macro.text) + "' has no argument '" + excerpt(key) + "'");
      assign(key, v);
    }
    exec_body(macro.body, out);
  } catch (...) {
    saved.swap(frames_);
    --macro_depth_;
    throw;
  }
  saved.swap(frames_);
  --macro_depth_;
  return Value::string(std::move(out));
}

}  // namespace minivllm::jinja
