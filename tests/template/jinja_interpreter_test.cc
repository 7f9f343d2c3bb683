// Unit tests of the Jinja interpreter. Table cases: expected strings are jinja2 3.1.6's renders in
// transformers' chat-template environment (ImmutableSandboxedEnvironment, trim_blocks,
// lstrip_blocks, loopcontrols, transformers' tojson), with the variables of kVariables.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/check.h"
#include "template/chat_template.h"

namespace minivllm {
namespace {

const char* kVariables = R"({"d": {"x": 1, "y": 2},
  "users": [{"name": "a", "active": true}, {"name": "b", "active": false}],
  "s": "héllo wörld", "n": null,
  "msgs": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]})";

struct Case {
  const char* name;
  const char* source;
  const char* expected;
};

const Case kCases[] = {
    {"loop_vars",
     "{% for i in ['a','b','c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}",
     "1032TrueFalse3|2121FalseFalse3|3210FalseTrue3|"},
    {"loop_last_separator",
     "{% for u in users %}{{ u.name }}{% if not loop.last %}, {% endif %}{% endfor %}",
     "a, b"},
    {"loop_filter_and_else",
     "{% for i in range(5) if i is odd %}{{ i }}/{{ loop.length }} {% else %}none{% endfor %}|{% for i in [] %}x{% else %}empty{% endfor %}",
     "1/2 3/2 |empty"},
    {"loop_unpack_items",
     "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d|items %}{{ k }}{% endfor %}",
     "x=1;y=2;xy"},
    {"loop_break_continue",
     "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}",
     "0134"},
    {"loop_cycle_prev_next",
     "{% for x in 'abc' %}{{ loop.cycle('o', 'e') }}{{ loop.previtem }}{{ loop.nextitem }}.{% endfor %}",
     "ob.eac.ob."},
    {"loop_scope",
     "{% set x = 'outer' %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}",
     "outer1outer2outer"},
    {"namespace",
     "{% set ns = namespace(total=0, last='') %}{% for i in range(4) %}{% set ns.total = ns.total + i %}{% set ns.last = i|string %}{% endfor %}{{ ns.total }} {{ ns.last }}",
     "6 3"},
    {"set_toplevel_and_tuple",
     "{% set a, b = [1, 2] %}{% set msgs = msgs[1:] %}{{ a + b }} {{ msgs|length }} {{ msgs[0].role }}",
     "3 1 user"},
    {"set_block",
     "{% set x %}  block {{ 1 + 1 }} {% endset %}[{{ x }}]",
     "[  block 2 ]"},
    {"macro",
     "{% macro f(a, b='x') %}[{{ a }}{{ b }}]{% endmacro %}{{ f(1) }}{{ f(2, b=3) }}{{ f('q', 'r') }}",
     "[1x][23][qr]"},
    {"if_elif_else",
     "{% for v in [1, none, 'x'] %}{% if v is none %}N{% elif v is string %}S{% else %}O{% endif %}{% endfor %}",
     "ONS"},
    {"slicing",
     "{{ 'abcdef'[::-1] }} {{ 'abcdef'[1:3] }} {{ s[1:4] }} {{ s[-5:] }} {{ [1,2,3,4,5][1:-1:2] }} {{ [1,2,3][::-2] }} {{ 'abc'[-1] }} {{ [1,2,3][:10] }}",
     "fedcba bc éll wörld [2, 4] [3, 1] c [1, 2, 3]"},
    {"whitespace_trim_lstrip",
     "<\n  {% if true %}\n  x\n  {% endif %}\n  y\n  {# c #}\n>",
     "<\n  x\n  y\n>"},
    {"whitespace_minus",
     "a  {%- if true -%}  b  {%- endif -%}  c {{- '  d  ' -}}  e",
     "abc  d  e"},
    {"whitespace_plus",
     "  {%+ if true %}x{% endif +%}\ny",
     "  x\ny"},
    {"whitespace_template_indent",
     "{%- for m in msgs %}\n    {%- if loop.first %}\n        {{- 'first ' }}\n    {%- endif %}\n    {{- m.role }}\n{%- endfor %}\n",
     "first systemuser"},
    {"filters_strings",
     "{{ '  a b  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'ab'|upper }}|{{ 'AB'|lower }}|{{ 'hELLO wORLD'|capitalize }}|{{ 'hello world-foo(bar'|title }}|{{ 'a-b-a'|replace('a', 'x') }}|{{ 'a-b-a'|replace('a', 'x', 1) }}",
     "a b|a|AB|ab|Hello world|Hello World-Foo(Bar|x-b-x|x-b-a"},
    {"filters_sequences",
     "{{ [1,2,3]|join(', ') }}|{{ users|map(attribute='name')|join }}|{{ [4,5]|first }}|{{ [4,5]|last }}|{{ 'abc'|list }}|{{ d|length }}|{{ s|length }}|{{ [3,1,2]|sort }}|{{ [1,2,2,1]|unique|list }}|{{ [1,2,3]|reverse|list }}|{{ [1,2]|sum }}",
     "1, 2, 3|ab|4|5|['a', 'b', 'c']|2|11|[1, 2, 3]|[1, 2]|[3, 2, 1]|3"},
    {"filters_conversion",
     "{{ 5|string }}|{{ '42'|int + 1 }}|{{ '4.7'|int }}|{{ 'x'|int }}|{{ 3|float }}|{{ -3|abs }}|{{ d|items|list }}",
     "5|43|4|0|3.0|3|[('x', 1), ('y', 2)]"},
    {"filters_default",
     "{{ undefined_var|default('dflt') }}|{{ ''|default('e', true) }}|{{ none|default('n') }}|{{ 'v'|d('w') }}",
     "dflt|e|None|v"},
    {"filters_selectattr",
     "{{ users|selectattr('active')|map(attribute='name')|list }}|{{ users|rejectattr('active')|map(attribute='name')|list }}|{{ users|selectattr('name', 'equalto', 'b')|list|length }}|{{ [1,2,3,4]|select('even')|list }}",
     "['a']|['b']|1|[2, 4]"},
    {"tojson",
     "{{ {'b': 1, 'a': [1.0, 'é\"<>&\\n', none, true]}|tojson }}|{{ 'x'|tojson }}|{{ {'k': [1, {}], 'e': []}|tojson(indent=2) }}",
     "{\"b\": 1, \"a\": [1.0, \"é\\\"<>&\\n\", null, true]}|\"x\"|{\n  \"k\": [\n    1,\n    {}\n  ],\n  \"e\": []\n}"},
    {"tests",
     "{{ 'abc' is string }}{{ {} is mapping }}{{ [] is mapping }}{{ none is none }}{{ 3 is odd }}{{ 4 is even }}{{ 6 is divisibleby 3 }}{{ [] is iterable }}{{ 1 is number }}{{ true is boolean }}{{ false is false }}{{ undefined_var is defined }}{{ d is defined }}{{ undefined_var is undefined }}",
     "TrueTrueFalseTrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrue"},
    {"operators",
     "{{ 1 < 2 < 3 }} {{ 'a' not in 'abc' }} {{ 2 in [1,2] }} {{ 'x' in d }} {{ not true and false }} {{ 1 == 1.0 }} {{ 0 or 'y' }} {{ 'z' and 0 }} {{ 'a' ~ 1 ~ none }} {{ 10 / 4 }} {{ 10 // 4 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 'ab' * 2 }} {{ [1] + [2] }} {{ 0.1 + 0.2 }} {{ 1e20 }}",
     "True False True True False True y 0 a1None 2.5 2 -4 2 1024 abab [1, 2] 0.30000000000000004 1e+20"},
    {"inline_if",
     "{{ 'a' if 1 else 'b' }}{{ 'x' if false }}{{ 'c' if 0 else 'd' if 0 else 'e' }}",
     "ae"},
    {"dict_access",
     "{{ d['x'] }}|{{ d.x }}|{{ d.get('y') }}|{{ d.get('zz', 3) }}|{{ d.get('zz') }}|{{ msgs.0.role }}|{{ d.keys()|list }}|{{ d.values()|list }}",
     "1|1|2|3|None|system|['x', 'y']|[1, 2]"},
    {"string_methods",
     "{{ 'Hello'.startswith('He') }}{{ 'Hello'.endswith(('x', 'lo')) }}|{{ ' x '.strip() }}|{{ '\\n\\nab'.lstrip('\\n') }}|{{ 'ab\\n'.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ '  a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'x</think>y'.split('</think>')[-1] }}|{{ 'aXa'.replace('a', 'b') }}|{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}",
     "TrueTrue|x|ab|ab|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|y|bXb|ABab"},
    {"undefined_behaviour",
     "[{{ undefined_var }}]{{ undefined_var|length }}{{ undefined_var ~ 'x' }}{% for x in undefined_var %}no{% endfor %}{% if undefined_var %}no{% else %}falsy{% endif %}{{ undefined_var == undefined_other }}{{ d.missing is defined }}[{{ d.missing }}]",
     "[]0xfalsyTrueFalse[]"},
    {"printing",
     "{{ none }} {{ true }} {{ [1, 'a', none, 1.5, {'k': 'v'}] }} {{ (1, 2) }} {{ \"it's\" }}",
     "None True [1, 'a', None, 1.5, {'k': 'v'}] (1, 2) it's"},
    {"string_escapes",
     "{{ 'a\\tb\\u00e9\\x41\\\\' }}{{ \"con\" 'cat' }}",
     "a\tbéA\\concat"},
    {"raise_in_untaken_branch",
     "{% if false %}{{ raise_exception('never') }}{% endif %}ok",
     "ok"},
};

std::string render(const std::string& source, const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) {
  return ChatTemplate(source).render(nlohmann::ordered_json::array(), false, extra);
}

// The message of the Error thrown by `fn` ("" when nothing is thrown).
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(JinjaInterpreter, MatchesJinja2) {
  auto vars = nlohmann::ordered_json::parse(kVariables);
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(render(c.source, vars), c.expected) << "template: " << c.source;
  }
}

TEST(JinjaInterpreter, RaiseExceptionThrowsErrorWithMessage) {
  std::string msg = error_of([] { render("line1\n{{ raise_exception('Conversation roles must alternate!') }}"); });
  EXPECT_TRUE(contains(msg, "Conversation roles must alternate!")) << msg;
}

TEST(JinjaInterpreter, UnknownFilterIsAParseErrorNamingItAndTheLine) {
  // Even in a branch that is never taken: jinja2 rejects unknown filters at compile time.
  std::string msg = error_of([] { ChatTemplate("a\nb\n{% if false %}{{ x | frobnicate }}{% endif %}"); });
  EXPECT_TRUE(contains(msg, "unknown filter 'frobnicate'")) << msg;
  EXPECT_TRUE(contains(msg, "line 3")) << msg;
}

TEST(JinjaInterpreter, UnknownTestIsAParseError) {
  std::string msg = error_of([] { ChatTemplate("{{ x is frobnicated }}"); });
  EXPECT_TRUE(contains(msg, "unknown test 'frobnicated'")) << msg;
}

TEST(JinjaInterpreter, UnsupportedAndUnknownTagsNameTheTag) {
  std::string msg = error_of([] { ChatTemplate("x\n{% include 'other.jinja' %}"); });
  EXPECT_TRUE(contains(msg, "unsupported tag 'include'")) << msg;
  EXPECT_TRUE(contains(msg, "line 2")) << msg;
  msg = error_of([] { ChatTemplate("{% frobnicate %}"); });
  EXPECT_TRUE(contains(msg, "unknown tag 'frobnicate'")) << msg;
  msg = error_of([] { ChatTemplate("{% raw %}{{ x }}{% endraw %}"); });
  EXPECT_TRUE(contains(msg, "unsupported tag 'raw'")) << msg;
}

TEST(JinjaInterpreter, SyntaxErrorsNameTheLine) {
  std::string msg = error_of([] { ChatTemplate("{% for m in messages %}\n{{ m }}\n"); });
  EXPECT_TRUE(contains(msg, "'endfor'")) << msg;
  msg = error_of([] { ChatTemplate("\n\n{{ 1 + }}"); });
  EXPECT_TRUE(contains(msg, "line 3")) << msg;
  msg = error_of([] { ChatTemplate("{% endif %}"); });
  EXPECT_TRUE(contains(msg, "unexpected tag 'endif'")) << msg;
  msg = error_of([] { ChatTemplate("{{ 'unterminated }}"); });
  EXPECT_TRUE(contains(msg, "unterminated string")) << msg;
}

TEST(JinjaInterpreter, UnsupportedMethodIsAnErrorNamingIt) {
  std::string msg = error_of([] { render("\n{{ 'x'.zfill(3) }}"); });
  EXPECT_TRUE(contains(msg, "'zfill'")) << msg;
  EXPECT_TRUE(contains(msg, "line 2")) << msg;
}

TEST(JinjaInterpreter, UndefinedVariableBehaviour) {
  // Printing, testing and iterating an undefined value is fine ...
  EXPECT_EQ(render("[{{ nope }}]{{ nope is defined }}{{ nope is undefined }}{% if not nope %}falsy{% endif %}"),
            "[]FalseTruefalsy");
  // ... but attribute access, arithmetic and calls on it are errors naming the variable.
  EXPECT_TRUE(contains(error_of([] { render("{{ nope.attr }}"); }), "'nope' is undefined"));
  EXPECT_TRUE(contains(error_of([] { render("{{ nope + 'x' }}"); }), "'nope' is undefined"));
  EXPECT_TRUE(contains(error_of([] { render("{{ nope() }}"); }), "'nope' is undefined"));
  // A missing key is undefined too; going one level deeper is an error naming the key.
  auto vars = nlohmann::ordered_json::parse(R"({"m": {"role": "user"}})");
  EXPECT_EQ(render("{{ m.content is defined }}[{{ m.content }}]", vars), "False[]");
  EXPECT_TRUE(contains(error_of([&] { render("{{ m.content.x }}", vars); }), "has no attribute 'content'"));
}

TEST(JinjaInterpreter, TypeErrorsNameTheLine) {
  std::string msg = error_of([] { render("\n\n{{ 'a' + 1 }}"); });
  EXPECT_TRUE(contains(msg, "line 3")) << msg;
  EXPECT_TRUE(contains(msg, "'str' and 'int'")) << msg;
  msg = error_of([] { render("{% set ns = 5 %}{% set ns.x = 1 %}"); });
  EXPECT_TRUE(contains(msg, "namespace")) << msg;
}

TEST(JinjaInterpreter, BosEosAndToolsDefaults) {
  // As in transformers: tools and documents are none unless given; special tokens come from extra.
  EXPECT_EQ(render("{{ tools is none }}{{ documents is none }}{{ bos_token is defined }}"), "TrueTrueFalse");
  EXPECT_EQ(render("{{ bos_token }}x{{ eos_token }}", {{"bos_token", "<s>"}, {"eos_token", "</s>"}}), "<s>x</s>");
}

TEST(JinjaInterpreter, AddGenerationPromptAndMessages) {
  ChatTemplate tmpl("{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}{{ add_generation_prompt }}");
  auto msgs = nlohmann::json::parse(R"([{"role":"user","content":"a"},{"role":"assistant","content":"b"}])");
  EXPECT_EQ(tmpl.render(msgs, true), "user:a;assistant:b;True");
  EXPECT_EQ(tmpl.render(msgs, false), "user:a;assistant:b;False");
}

TEST(JinjaInterpreter, TojsonKeepsCallerKeyOrder) {
  auto vars = nlohmann::ordered_json::parse(R"({"t": {"zeta": 1, "alpha": {"b": 2, "a": 3}}})");
  EXPECT_EQ(render("{{ t|tojson }}", vars), R"({"zeta": 1, "alpha": {"b": 2, "a": 3}})");
  EXPECT_EQ(render("{{ t|tojson(sort_keys=true) }}", vars), R"({"alpha": {"a": 3, "b": 2}, "zeta": 1})");
}

}  // namespace
}  // namespace minivllm
