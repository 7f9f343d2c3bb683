// Walks a parsed template (ast.h) and produces its text: Jinja scoping (a fresh scope per loop
// iteration, namespaces shared by reference, macros with their own scope), loop variables,
// break/continue, and errors that name the template line.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "template/ast.h"
#include "template/limits.h"

namespace minivllm::jinja {

class Renderer {
 public:
  // `globals` are the render variables (messages, add_generation_prompt, functions...).
  Renderer(const Body& program, const ValueDict& globals, const RenderLimits& limits = RenderLimits());
  // Throws Error on template errors and when the render breaks a limit of limits.h.
  std::string render();

 private:
  using Frame = std::unordered_map<std::string, Value>;
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec_body(const Body& body, std::string& out);
  Flow exec(const Stmt& s, std::string& out);
  Flow exec_for(const Stmt& s, std::string& out);
  void exec_set(const Stmt& s, std::string& out);
  void bind_targets(const std::vector<std::string>& targets, const Value& v);
  Value call_macro(const Stmt& macro, CallArgs& args);

  Value eval(const Expr& e);
  Value eval_node(const Expr& e);
  Value eval_unary(const Expr& e);
  Value eval_list(const Expr& e);
  Value eval_dict(const Expr& e);
  Value eval_binary(const std::string& op, const Value& a, const Value& b);
  Value eval_compare(const Expr& e);
  Value eval_call(const Expr& e);
  Value eval_filter(const Expr& e);
  Value eval_test(const Expr& e);
  Value eval_slice(const Expr& e);
  CallArgs eval_args(const Expr& e);

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v) { (*frames_.back())[name] = std::move(v); }
  void append_output(std::string& out, const std::string& text) const;

  // Counts the statements and expression nodes being evaluated (kMaxRenderDepth).
  class DepthGuard {
   public:
    DepthGuard(Renderer& r, int line);
    ~DepthGuard() { --r_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    Renderer& r_;
  };

  const Body& program_;
  std::vector<std::shared_ptr<Frame>> frames_;
  int macro_depth_ = 0;
  int depth_ = 0;
  RenderLimits limits_;
};

}  // namespace minivllm::jinja
