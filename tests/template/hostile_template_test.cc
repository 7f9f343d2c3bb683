// Hostile chat templates and variables (template/limits.h): each used to crash (stack overflow,
// SIGFPE), hang or exhaust memory, and now fails fast with an Error naming the limit, quoting at
// most a short excerpt of the input. Normal behaviour at and below the limits is unchanged.
#include <chrono>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/check.h"
#include "template/chat_template.h"
#include "template/limits.h"

namespace minivllm {
namespace {

using nlohmann::ordered_json;

std::string repeat(const std::string& s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

std::string render(const std::string& source, const ordered_json& extra = ordered_json::object(),
                   const jinja::RenderLimits& limits = jinja::RenderLimits()) {
  ChatTemplate t(source);
  t.set_limits(limits);
  return t.render(ordered_json::array(), false, extra);
}

// The message of the Error thrown by `fn`; fails the test when there is none, when it takes too
// long, or when the message is long (it may quote only a short excerpt of the input).
template <typename Fn>
std::string error_of(Fn&& fn) {
  auto start = std::chrono::steady_clock::now();
  std::string msg;
  try {
    fn();
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    msg = e.what();
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 2.0) << msg;
  EXPECT_LT(msg.size(), 600u) << msg.substr(0, 1000);
  return msg;
}

std::string render_error(const std::string& source, const ordered_json& extra = ordered_json::object(),
                         const jinja::RenderLimits& limits = jinja::RenderLimits()) {
  return error_of([&] { render(source, extra, limits); });
}

std::string parse_error(const std::string& source) {
  return error_of([&] { ChatTemplate t(source); });
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

#define EXPECT_HAS(msg, needle) EXPECT_TRUE(contains(msg, needle)) << (msg)

std::string nested_array(size_t depth) { return repeat("[", depth) + repeat("]", depth); }

// ---- 1. Deep input ----

TEST(HostileTemplate, DeeplyNestedMessagesAreRefused) {
  ChatTemplate t("{% for m in messages %}{{ m.content|length }}{% endfor %}");
  std::string text = R"([{"role": "user", "content": )" + nested_array(70000) + "}]";
  auto ordered = ordered_json::parse(text);  // nlohmann parses and destroys without recursion
  std::string msg = error_of([&] { t.render(ordered, false); });
  EXPECT_HAS(msg, "chat template variable 'messages': nested deeper than 256 levels (kMaxJsonDepth)");
  auto plain = nlohmann::json::parse(R"([{"role": "user", "content": )" + nested_array(10000) + "}]");
  EXPECT_HAS(error_of([&] { t.render(plain, false); }), "kMaxJsonDepth");
}

TEST(HostileTemplate, DeeplyNestedExtraVariableIsRefused) {
  ordered_json extra = ordered_json::object();
  extra["tools"] = ordered_json::parse(nested_array(20000));  // moved: a copy would recurse
  std::string msg = render_error("{{ tools }}", extra);
  EXPECT_HAS(msg, "'tools'");
  EXPECT_HAS(msg, "kMaxJsonDepth");
}

TEST(HostileTemplate, JsonNestingUpToTheLimitWorks) {
  // messages (1 level) holding 255 more: 256 levels in all.
  auto ok = ordered_json::parse(R"([{"content": )" + nested_array(254) + "}]");
  EXPECT_EQ(ChatTemplate("{{ messages[0].content|length }}").render(ok, false), "1");
  auto too_deep = ordered_json::parse(R"([{"content": )" + nested_array(255) + "}]");
  EXPECT_HAS(error_of([&] { ChatTemplate("x").render(too_deep, false); }), "kMaxJsonDepth");
}

TEST(HostileTemplate, DeeplyNestedBlocksAreRefused) {
  std::string msg = parse_error(repeat("{% if true %}", 20000) + "x" + repeat("{% endif %}", 20000));
  EXPECT_HAS(msg, "blocks nested too deeply: over 256 levels (kMaxBlockDepth)");
  msg = parse_error(repeat("{% for i in [1] %}", 5000) + "x" + repeat("{% endfor %}", 5000));
  EXPECT_HAS(msg, "kMaxBlockDepth");
  // 256 levels still render (and are walked recursively without trouble).
  EXPECT_EQ(render(repeat("{% if true %}", 256) + "x" + repeat("{% endif %}", 256)), "x");
  EXPECT_EQ(render(repeat("{% for i in [1] %}", 100) + "{{ i }}" + repeat("{% endfor %}", 100)), "1");
}

TEST(HostileTemplate, DeeplyNestedExpressionsAreRefused) {
  const char* kLimit = "expression nested too deeply: over 256 levels (kMaxExpressionDepth)";
  EXPECT_HAS(parse_error("{{ " + repeat("(", 100000) + "1" + repeat(")", 100000) + " }}"), kLimit);
  const size_t n = 5000;  // far past the limit
  EXPECT_HAS(parse_error("{{ " + repeat("[", n) + repeat("]", n) + " }}"), kLimit);
  EXPECT_HAS(parse_error("{{ " + repeat("{'a': ", n) + "1" + repeat("}", n) + " }}"), kLimit);
  EXPECT_HAS(parse_error("{{ " + repeat("not ", n) + "x }}"), kLimit);
  EXPECT_HAS(parse_error("{{ " + repeat("- ", n) + "1 }}"), kLimit);
  EXPECT_HAS(parse_error("{{ " + repeat("1 if x else ", n) + "1 }}"), kLimit);
  EXPECT_HAS(parse_error("{% if " + repeat("f(", n) + repeat(")", n) + " %}{% endif %}"), kLimit);
  // Long chains parse without recursion but would be walked recursively: their depth counts.
  EXPECT_HAS(parse_error("{{ 1" + repeat(" + 1", n) + " }}"), kLimit);
  EXPECT_HAS(parse_error("{{ x" + repeat(".a", n) + " }}"), kLimit);
  EXPECT_HAS(parse_error("{{ x" + repeat("[0]", n) + " }}"), kLimit);
  EXPECT_HAS(parse_error("{{ x" + repeat("|string", n) + " }}"), kLimit);
  EXPECT_HAS(parse_error("{{ 'a'" + repeat(" ~ 'a'", n) + " }}"), kLimit);
  // Up to the limit they work.
  EXPECT_EQ(render("{{ " + repeat("(", 200) + "1" + repeat(")", 200) + " }}"), "1");
  EXPECT_EQ(render("{{ 1" + repeat(" + 1", 200) + " }}"), "201");
  EXPECT_EQ(render("{{ " + repeat("[", 200) + repeat("]", 200) + "|length }}"), "1");
}

// ---- 2. Arithmetic ----

TEST(HostileTemplate, PowerIsBySquaringWithOverflowChecks) {
  // ** is left-associative in Jinja (1 ** 10 ** 18 is (1 ** 10) ** 18): the exponents here are 10**18.
  EXPECT_EQ(render("{{ 1 ** (10**18) }}|{{ (-1) ** (10**18 + 1) }}|{{ 0 ** (10**18) }}|{{ 7 ** 0 }}"), "1|-1|0|1");
  EXPECT_EQ(render("{{ 1 ** 10**18 }}|{{ 2 ** 3 ** 2 }}"), "1|64");
  EXPECT_EQ(render("{{ 2 ** 62 }}|{{ (-2) ** 63 }}|{{ 3 ** 39 }}|{{ 10 ** 18 }}"),
            "4611686018427387904|-9223372036854775808|4052555153018976267|1000000000000000000");
  EXPECT_EQ(render("{{ 2 ** -1 }}|{{ 2.0 ** 3 }}|{{ 4 ** 0.5 }}"), "0.5|8.0|2.0");
  EXPECT_HAS(render_error("{{ 2 ** (10**18) }}"), "integer overflow in **");
  EXPECT_HAS(render_error("{{ (-3) ** (10**18 + 1) }}"), "integer overflow in **");
  EXPECT_HAS(render_error("{{ 2 ** 63 }}"), "integer overflow in **");
  EXPECT_HAS(render_error("{{ 0 ** -1 }}"), "0.0 cannot be raised to a negative power");
}

TEST(HostileTemplate, FloorDivisionAndModuloOfTheMinimumByMinusOne) {
  // Both trapped (SIGFPE) in hardware. Python: the quotient overflows int64, the remainder is 0.
  std::string msg = render_error("\n{{ (-9223372036854775807 - 1) // -1 }}");
  EXPECT_HAS(msg, "line 2");
  EXPECT_HAS(msg, "integer overflow in //");
  EXPECT_EQ(render("{{ (-9223372036854775807 - 1) % -1 }}"), "0");
  EXPECT_EQ(render("{{ (-9223372036854775807 - 1) is divisibleby(-1) }}"), "True");
  // Python's floor semantics, unchanged.
  EXPECT_EQ(render("{{ -7 // 2 }} {{ 7 // -2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7 // 1 }} {{ 7 % 1 }} {{ -7 // -1 }}"),
            "-4 -4 2 -2 7 0 7");
  EXPECT_EQ(render("{{ -7.5 // 2 }} {{ -7.5 % 2 }}"), "-4.0 0.5");
  EXPECT_HAS(render_error("{{ 1 // 0 }}"), "integer division by zero");
  EXPECT_HAS(render_error("{{ 1 % 0 }}"), "modulo by zero");
}

TEST(HostileTemplate, IntegerOverflowIsAnError) {
  EXPECT_HAS(render_error("{{ 9223372036854775807 + 1 }}"), "integer overflow in +");
  EXPECT_HAS(render_error("{{ -9223372036854775807 - 2 }}"), "integer overflow in -");
  EXPECT_HAS(render_error("{{ 4294967296 * 4294967296 }}"), "integer overflow in *");
  EXPECT_HAS(render_error("{{ -(-9223372036854775807 - 1) }}"), "integer overflow in unary -");
  EXPECT_HAS(render_error("{{ [9223372036854775807, 1]|sum }}"), "integer overflow in sum");
  EXPECT_HAS(render_error("{{ (-9223372036854775807 - 1)|abs }}"), "integer overflow in abs()");
  EXPECT_HAS(render_error("{{ 1e300|int }}"), "integer overflow in int()");
  EXPECT_HAS(render_error("{{ '1e300'|int }}"), "integer overflow in int()");
  EXPECT_HAS(render_error("{{ '99999999999999999999'|int }}"), "integer overflow in int()");
  EXPECT_EQ(render("{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }}"), "42 4 0 7");
  EXPECT_HAS(parse_error("{{ 99999999999999999999 }}"), "integer literal out of range");
  // Up to the edges the values are exact.
  EXPECT_EQ(render("{{ 9223372036854775806 + 1 }}|{{ -9223372036854775807 - 1 }}|{{ 3037000499 * 3037000499 }}"),
            "9223372036854775807|-9223372036854775808|9223372030926249001");
  EXPECT_EQ(render("{{ range(9223372036854775800, 9223372036854775807, 5)|list }}"),
            "[9223372036854775800, 9223372036854775805]");
  EXPECT_EQ(render("{{ [1, 2, 3][::9223372036854775807] }}{{ 'abc'[::-9223372036854775807] }}"), "[1]c");
  EXPECT_EQ(render("{{ 1e400 }} {{ -1e400 }} {{ 1e-400 }}"), "inf -inf 0.0");
}

TEST(HostileTemplate, JsonIntegerBeyondInt64IsRefused) {
  auto msgs = ordered_json::parse(R"([{"role": "user", "content": 18446744073709551615}])");
  EXPECT_HAS(error_of([&] { ChatTemplate("x").render(msgs, false); }),
             "integer 18446744073709551615 does not fit in 64 bits");
}

// ---- 3. Sizes ----

TEST(HostileTemplate, HugeStringRepeatIsRefusedBeforeAllocating) {
  std::string msg = render_error("{{ 'a' * 10**12 }}");
  EXPECT_HAS(msg, "string too long: 1000000000000 bytes, the limit is 16777216 (kMaxStringBytes)");
  EXPECT_HAS(render_error("{{ 10**12 * 'ab' }}"), "kMaxStringBytes");
  EXPECT_HAS(render_error("{{ 'abc' * 9223372036854775807 }}"), "kMaxStringBytes");
  EXPECT_EQ(render("{{ 'ab' * 3 }}|{{ 'ab' * 0 }}|{{ 'ab' * -2 }}|{{ ('a' * 16777216)|length }}"), "ababab|||16777216");
}

TEST(HostileTemplate, StringDoublingInALoopIsRefused) {
  const char* kTemplates[] = {
      "{% set ns = namespace(s='a') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
      "{% set ns = namespace(s='a') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
      "{% set ns = namespace(s='a') %}{% for i in range(100) %}{% set ns.s = ns.s * 2 %}{% endfor %}",
      "{% set ns = namespace(s='a') %}{% for i in range(100) %}{% set ns.s = [ns.s, ns.s]|join %}{% endfor %}",
      "{% set ns = namespace(s='a') %}{% for i in range(100) %}{% set ns.s = ns.s.replace('a', 'aa') %}{% endfor %}",
      "{% set ns = namespace(s='a') %}{% for i in range(100) %}{% set ns.s = ns.s|indent(ns.s|length, true) %}"
      "{% endfor %}",
  };
  jinja::RenderLimits small;  // the same code paths as with 16 MiB, faster under sanitizers
  small.max_string_bytes = 1 << 17;
  for (const char* t : kTemplates) {
    SCOPED_TRACE(t);
    EXPECT_HAS(render_error(t, ordered_json::object(), small), "(kMaxStringBytes)");
  }
  // With the default limit too.
  EXPECT_HAS(render_error(kTemplates[0]), "the limit is 16777216 (kMaxStringBytes)");
}

TEST(HostileTemplate, HugeListRepeatIsRefusedBeforeAllocating) {
  std::string msg = render_error("{{ ([1] * 10**10)|length }}");
  EXPECT_HAS(msg, "list too long: 10000000000 items, the limit is 1000000 (kMaxListItems)");
  EXPECT_HAS(render_error("{{ ([1, 2] * 9223372036854775807)|length }}"), "kMaxListItems");
  EXPECT_HAS(render_error("{{ ([1] * 1000001)|length }}"), "list too long: 1000001 items");
  EXPECT_EQ(render("{{ [1, 2] * 2 }}|{{ 2 * [0] }}|{{ [1] * -1 }}"), "[1, 2, 1, 2]|[0, 0]|[]");
  // Other ways to build long lists (with a lower limit: the same code, faster under sanitizers).
  jinja::RenderLimits small;
  small.max_list_items = 1000;
  const char* kTemplates[] = {
      "{{ ((',' * 1000).split(','))|length }}",
      "{{ (('a b ' * 1000).split())|length }}",
      "{{ (('a,' * 1000).rsplit(',', 5000))|length }}",
      "{{ (('a\n' * 1001).splitlines())|length }}",
      "{{ (('a' * 1001)|list)|length }}",
      "{{ ([1] * 600 + [2] * 600)|length }}",
      "{% set ns = namespace(l=[]) %}{% for i in range(2000) %}{% set ns.l = ns.l + [i] %}{% endfor %}",
  };
  for (const char* t : kTemplates) {
    SCOPED_TRACE(t);
    EXPECT_HAS(render_error(t, ordered_json::object(), small), "(kMaxListItems)");
  }
  EXPECT_EQ(render("{{ ((',' * 999).split(','))|length }}|{{ ([1] * 1000)|length }}", ordered_json::object(), small),
            "1000|1000");
}

TEST(HostileTemplate, OtherWaysToBuildHugeStringsAreRefused) {
  EXPECT_HAS(render_error("{{ 'x'|indent(10**12) }}"), "kMaxStringBytes");
  EXPECT_HAS(render_error("{{ {'a': [[1]]}|tojson(indent=10**9) }}"), "kMaxStringBytes");
  jinja::RenderLimits small;  // 128 KiB: the same code paths as with 16 MiB, faster under sanitizers
  small.max_string_bytes = 1 << 17;
  const char* kTemplates[] = {
      "{{ ('a' * 30000).replace('', 'bcde') }}",
      "{{ ('a' * 40000).replace('a', 'bcde') }}",
      "{{ ('a' * 40000)|replace('a', 'bcde') }}",
      "{{ (['a' * 50000] * 3)|join }}",
      "{{ (['a' * 50000] * 3)|join(',') }}",
      "{{ ['a' * 50000, 'b' * 50000, 'c' * 50000]|string }}",
      "{{ {'a': 'a' * 50000, 'b': 'b' * 50000, 'c': 'c' * 50000}|string }}",
      "{{ (['a' * 50000] * 3)|tojson }}",
      "{{ ('a\n' * 1000)|indent(200) }}",
      "{{ 'a' * 70000 ~ 'b' * 70000 }}",
      "{{ [1] * 50000 ~ '' }}",
  };
  for (const char* t : kTemplates) {
    SCOPED_TRACE(t);
    EXPECT_HAS(render_error(t, ordered_json::object(), small), "(kMaxStringBytes)");
  }
  // 100000 copies of a 16 MiB string share it (values are immutable): no 1.6 TB list.
  EXPECT_EQ(render("{% set big = ['a' * 16777216] * 100000 %}{{ big|length }} {{ big[99999]|length }}"),
            "100000 16777216");
}

TEST(HostileTemplate, RenderedOutputIsBounded) {
  std::string msg = render_error("{% set s = 'a' * 1000000 %}{% for i in range(100) %}{{ s }}{% endfor %}");
  EXPECT_HAS(msg, "rendered output too long: over 16777216 bytes (kMaxOutputBytes)");
  jinja::RenderLimits small;
  small.max_output_bytes = 1000;
  EXPECT_HAS(render_error("{% for i in range(1000) %}text{% endfor %}", ordered_json::object(), small),
             "kMaxOutputBytes");
  EXPECT_EQ(render("{% for i in range(250) %}text{% endfor %}", ordered_json::object(), small).size(), 1000u);
}

// ---- 4. Time ----

TEST(HostileTemplate, LoopIterationsAreBounded) {
  jinja::RenderLimits small;  // the default, 10M, would take seconds to reach under sanitizers
  small.max_loop_iterations = 2000;
  const ordered_json vars = ordered_json::object();
  EXPECT_HAS(render_error("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", vars, small),
             "too many loop iterations: over 2000 in one render (kMaxLoopIterations)");
  // Candidates rejected by a loop filter count too.
  EXPECT_HAS(render_error("{% for i in range(3000) if false %}{% endfor %}", vars, small), "kMaxLoopIterations");
  EXPECT_EQ(render("{% for i in range(20) %}{% for j in range(99) %}{% endfor %}{% endfor %}ok", vars, small), "ok");
  EXPECT_EQ(jinja::RenderLimits().max_loop_iterations, 10'000'000u);
}

TEST(HostileTemplate, RepeatedWorkIsBounded) {
  jinja::RenderLimits small;  // the default budget takes a second or more to use up
  small.max_work = 500'000;
  const char* kTemplates[] = {
      // O(n) membership tests inside loops.
      "{% set big = range(2000)|list %}{% for i in range(1000) %}{% if -1 in big %}{% endif %}{% endfor %}",
      // Quadratic unique.
      "{{ (range(2000)|list)|unique|list|length }}",
      // A macro calling itself twice per level: 2**40 calls, each printing nothing.
      "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}",
      // Rescanning or copying a long string or list.
      "{% set s = 'a' * 20000 %}{% for i in range(1000) %}{% if s.endswith('b') %}{% endif %}{% endfor %}",
      "{% set s = 'a' * 20000 %}{% for i in range(1000) %}{% set t = s ~ 'b' %}{% endfor %}",
      "{% set l = range(2000)|list %}{% for i in range(1000) %}{% set t = l[1:] %}{% endfor %}",
      "{% set l = range(2000)|list %}{% for i in range(1000) %}{% set t = l == l %}{% endfor %}",
  };
  for (const char* t : kTemplates) {
    SCOPED_TRACE(t);
    EXPECT_HAS(render_error(t, ordered_json::object(), small),
               "template does too much work: over 500000 units in one render (kMaxRenderWork)");
  }
  EXPECT_EQ(jinja::RenderLimits().max_work, uint64_t{1} << 30);
}

// ---- 5. Values built by templates ----

TEST(HostileTemplate, NamespacesCannotNestDeeplyOrHoldThemselves) {
  // {% set ns.x = [ns.x] %} in a loop would build a list 100000 deep (destroyed recursively).
  std::string msg = render_error(
      "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}");
  EXPECT_HAS(msg, "cannot assign namespace attribute 'ns.x'");
  EXPECT_HAS(msg, "kMaxNamespaceAttrDepth");
  // A cycle would print forever (and leak).
  EXPECT_HAS(render_error("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns }}"), "kMaxNamespaceAttrDepth");
  EXPECT_HAS(render_error("{% set a = namespace() %}{% set b = namespace(a=a) %}{% set a.b = [b] %}"),
             "kMaxNamespaceAttrDepth");
  // Through the dict a bound method holds.
  EXPECT_HAS(render_error("{% set ns = namespace(d={}) %}{% for i in range(1000) %}"
                          "{% set ns.d = {'f': ns.d.items} %}{% endfor %}"),
             "kMaxNamespaceAttrDepth");
  // Ordinary namespaces are unchanged.
  EXPECT_EQ(render("{% set ns = namespace(a=[1], n=0) %}{% for i in range(3) %}{% set ns.a = ns.a + [i] %}"
                   "{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.a }} {{ ns.n }} {{ namespace(x=ns).x.n }}"),
            "[1, 0, 1, 2] 3 3");
}

TEST(HostileTemplate, ValueNestingIsBounded) {
  // A 256-deep variable wrapped in 200 + 100 brackets: over 512 levels.
  ordered_json extra = {{"v", ordered_json::parse(nested_array(256))}};
  std::string w = "{% set w = " + repeat("[", 200) + "v" + repeat("]", 200) + " %}";
  EXPECT_HAS(render_error(w + "{{ " + repeat("[", 100) + "w" + repeat("]", 100) + "|length }}", extra),
             "value nested too deeply: over 512 levels (kMaxValueDepth)");
  EXPECT_EQ(render(w + "{{ " + repeat("[", 56) + "w" + repeat("]", 56) + "|length }}", extra), "1");
}

TEST(HostileTemplate, MacroRecursionAndRenderDepthAreBounded) {
  EXPECT_HAS(render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
             "recursion too deep: over 64 calls (kMaxMacroDepth)");
  // Each call nests 200 blocks: the native stack is bounded by the render depth, not by the macro
  // recursion limit.
  std::string deep_macro = "{% macro f(n) %}" + repeat("{% if true %}", 200) + "{{ f(n + 1) }}" +
                           repeat("{% endif %}", 200) + "{% endmacro %}{{ f(0) }}";
  EXPECT_HAS(render_error(deep_macro), "over 1024 statements and expressions at once, macro calls included (kMaxRenderDepth)");
  // The same with expressions as deep as they may be around the call.
  for (const std::string& call : {repeat("[", 250) + "f(n + 1)" + repeat("]", 250), "f(n + 1)" + repeat("|string", 250),
                                  repeat("-", 250) + "f(n + 1)|length", "x" + repeat(" ~ (x", 250) + " ~ f(n + 1)" + repeat(")", 250)}) {
    SCOPED_TRACE(call.substr(0, 40));
    EXPECT_HAS(render_error("{% macro f(n) %}{{ " + call + " }}{% endmacro %}{{ f(0) }}"), "(kMaxRenderDepth)");
  }
  // Legitimate recursion (a schema printer) works.
  ordered_json extra = {{"schema", ordered_json::parse(R"({"a": {"b": {"c": {"d": 1}}}})")}};
  EXPECT_EQ(render("{% macro show(x) %}{% if x is mapping %}{% for k, v in x|items %}{{ k }}({{ show(v) }}){% endfor %}"
                   "{% else %}{{ x }}{% endif %}{% endmacro %}{{ show(schema) }}",
                   extra),
            "a(b(c(d(1))))");
}

// ---- 6. Error messages quote only excerpts ----

TEST(HostileTemplate, ErrorMessagesQuoteShortExcerpts) {
  const std::string long_name(100000, 'z');
  // error_of also checks that each message stays short.
  EXPECT_HAS(parse_error("{{ " + std::string(100000, '9') + " }}"), "integer literal out of range");
  EXPECT_HAS(parse_error("{% " + long_name + " %}"), "unknown tag 'zzzz");
  EXPECT_HAS(parse_error("{{ x|" + long_name + " }}"), "unknown filter 'zzzz");
  EXPECT_HAS(parse_error("{{ x is " + long_name + " }}"), "unknown test 'zzzz");
  EXPECT_HAS(parse_error("{{ 1 " + long_name + " }}"), "(100000 bytes)");
  EXPECT_HAS(render_error("{{ " + long_name + ".x }}"), "(100000 bytes)' is undefined");
  EXPECT_HAS(render_error("{{ {}['" + long_name + "'].x }}"), "has no attribute");
  EXPECT_HAS(render_error("{{ {}[[1] * 100000].x }}"), "has no item [1, 1, 1");
  EXPECT_HAS(render_error("{{ 'x'|map(" + long_name + "='y') }}"), "unexpected keyword argument");
  std::string msg = render_error("{{ raise_exception('bad: ' ~ 'q' * 1000000) }}");
  EXPECT_HAS(msg, "chat template raised an exception: bad: qqqq");
  EXPECT_HAS(msg, "(1000005 bytes)");
  ordered_json extra = {{long_name, 1}, {"messages", 2}};
  EXPECT_HAS(error_of([&] { ChatTemplate("x").render(ordered_json::array(), false, extra); }), "collides");
  // Variables named in conversion errors are cut too.
  ordered_json deep = {{long_name, ordered_json::parse(nested_array(300))}};
  EXPECT_HAS(render_error("x", deep), "kMaxJsonDepth");
}

TEST(HostileTemplate, MiscellaneousCrashesAreErrors) {
  EXPECT_HAS(parse_error("{{ '\\U00110000' }}"), "illegal Unicode character");
  // Found by the chat_template fuzzer: std::stod threw std::out_of_range past the Error handlers.
  EXPECT_HAS(parse_error("{%1e309"), "chat template");
  EXPECT_EQ(render("{{ 1e309 }}"), "inf");
  EXPECT_HAS(render_error("{{ 'abc'|indent(1.5) }}"), "expected an integer, got float");
  EXPECT_HAS(render_error("{{ 'abc'|replace('a', 'b', 'c') }}"), "expected an integer, got str");
  ordered_json extra = {{"users", ordered_json::parse(R"([{"n": [1]}])")}};
  EXPECT_EQ(render("{{ users|map(attribute='n.99999999999999999999')|list }}", extra), "[Undefined]");
}

}  // namespace
}  // namespace minivllm
