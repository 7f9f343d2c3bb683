// The one table of MINIVLLM_* environment variables (tuning.cc): every knob the engine reads, with
// its values, its default and why it exists, and the variables the tests and tools read, so that
// a variable the table lacks is a typo worth a warning. `minivllm knobs` prints the table.
//
// Call sites read a knob by name through the accessors below. The accessor takes the knob's type,
// range or modes from its row, so a site cannot disagree with the table, and a name missing from the
// table is a programming error (tests/common/tuning_test.cc checks every name in the source). A
// knob is read at each call, so a test may set it between two engines; hot paths cache it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace minivllm {

enum class KnobKind {
  kSwitch,   // 0 or 1
  kInt,      // a whole number in [lo, hi]
  kChoice,   // one of a few whole numbers (`values`, "|"-separated)
  kWord,     // one of a few words (`values`, "|"-separated)
  kSeconds,  // a non-negative number of seconds
  kText,     // free text: a path, a rank:method pair
};

enum class KnobGroup {
  kTuning,     // changes which kernel or algorithm runs; every default is measured (PERFORMANCE.md)
  kProfiling,  // adds timing or probes; off by default
  kFault,      // fault injection for the tests
  kPath,       // where the engine finds a program or models
  kTooling,    // read by the tests, benchmarks and scripts, not by the engine
};

struct Knob {
  const char* name;
  KnobGroup group;
  KnobKind kind;
  const char* values;    // kChoice / kWord: the allowed values, "|"-separated; otherwise a note
  int64_t lo, hi;        // kInt: the range
  const char* fallback;  // what unset means ("1", "auto: by batch size", ...)
  const char* why;       // one line: what it changes and where it was measured
};

std::span<const Knob> knobs();
// The row named `name`; throws (a programming error) when the table has none.
const Knob& knob(std::string_view name);
const char* knob_group_name(KnobGroup g);
const char* knob_kind_name(KnobKind k);

// nullopt when unset or empty; a value outside the row's type or range is an error naming the
// variable. Each checks that the row has that kind.
std::optional<bool> knob_switch(const char* name);
std::optional<int64_t> knob_int(const char* name);     // kInt and kChoice
std::optional<std::string> knob_word(const char* name);
std::optional<double> knob_seconds(const char* name);
std::optional<std::string> knob_text(const char* name);

// The same with the row's default where it is a constant ("0" / "1", a number, one of the words):
// the default then lives in the table alone. A row whose default is computed ("auto ...") is read
// with the optional accessors above; these throw for it.
bool knob_flag(const char* name);
int64_t knob_number(const char* name);
std::string knob_mode(const char* name);

// MINIVLLM_* variables in this process's environment that the table does not list.
std::vector<std::string> unknown_knob_variables();
// Prints one warning a variable for unknown_knob_variables() to stderr, once a process.
void warn_unknown_knob_variables();

}  // namespace minivllm
