// The syntax tree of a parsed chat template: expressions and statements as plain tagged nodes,
// built by parser.cc and walked by renderer.cc.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace minivllm::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // literal
    kName,      // name
    kGetAttr,   // children[0].name
    kGetItem,   // children[0][children[1]]
    kSlice,     // children[0][children[1]:children[2]:children[3]] (null parts allowed)
    kCall,      // children[0](children[1..], kwargs)
    kFilter,    // children[0] | name(children[1..], kwargs)
    kTest,      // children[0] is name(children[1..], kwargs)
    kNot,       // not children[0]
    kNeg,       // -children[0]
    kPos,       // +children[0]
    kBinary,    // children[0] name children[1], name in + - * / // % ** ~
    kAnd,       // children[0] and children[1]
    kOr,        // children[0] or children[1]
    kCompare,   // children[0] ops[0] children[1] ops[1] ... (chained)
    kCond,      // children[0] if children[1] else children[2] (else may be null)
    kList,      // [children...]; name "tuple" for (a, b)
    kDict,      // {children[0]: children[1], ...}
  };
  Kind kind;
  int line = 0;
  int depth = 1;  // of the tree below and including this node (kMaxExpressionDepth)
  Value literal;
  std::string name;
  std::vector<ExprPtr> children;
  std::vector<std::string> ops;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches (cond, body) ... else_body
    kFor,       // for targets in expr [if filter] body [else else_body]
    kSet,       // set targets = expr; attr_target: targets = {namespace, attribute}
    kSetBlock,  // set targets[0] %} body {% endset
    kMacro,     // macro text(params) body
    kBreak,
    kContinue,
    kScope,     // a block rendered in place ({% generation %})
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::string> targets;
  bool attr_target = false;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro parameters with defaults (may be null)
};

}  // namespace minivllm::jinja
