// env_switch, env_int, env_choice and env_word (common/env_switch.h): the tuning knobs, unset or
// empty meaning "default", any value but a 0 / 1, a whole number in range or one of the allowed
// words an error that names the variable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>

#include "common/env_switch.h"

namespace minivllm {
namespace {

constexpr const char* kName = "MINIVLLM_TEST_ENV_SWITCH";

TEST(EnvSwitch, UnsetEmptyZeroOne) {
  unsetenv(kName);
  EXPECT_FALSE(env_switch(kName).has_value());
  setenv(kName, "", 1);
  EXPECT_FALSE(env_switch(kName).has_value());
  setenv(kName, "0", 1);
  EXPECT_EQ(env_switch(kName), std::optional<bool>(false));
  setenv(kName, "1", 1);
  EXPECT_EQ(env_switch(kName), std::optional<bool>(true));
  unsetenv(kName);
}

// Sets kName to `bad`, then expects read() to throw an error that names "kName=bad" and says `says`.
void expect_rejected(const char* bad, const std::function<void()>& read, const std::string& says) {
  setenv(kName, bad, 1);
  try {
    read();
    ADD_FAILURE() << "accepted " << bad;
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(std::string(kName) + "=" + bad), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
  unsetenv(kName);
}

TEST(EnvSwitch, OtherValuesAreAnErrorNamingTheVariable) {
  for (const char* bad : {"2", "true", "off", " 1", "1 "}) {
    expect_rejected(bad, [] { env_switch(kName); }, "must be 0 or 1");
  }
}

TEST(EnvInt, UnsetEmptyAndValuesInRange) {
  unsetenv(kName);
  EXPECT_FALSE(env_int(kName, 0, 10).has_value());
  setenv(kName, "", 1);
  EXPECT_FALSE(env_int(kName, 0, 10).has_value());
  setenv(kName, "0", 1);
  EXPECT_EQ(env_int(kName, 0, 10), std::optional<int64_t>(0));
  setenv(kName, "10", 1);
  EXPECT_EQ(env_int(kName, 0, 10), std::optional<int64_t>(10));
  setenv(kName, "-3", 1);
  EXPECT_EQ(env_int(kName, -5, 5), std::optional<int64_t>(-3));
  setenv(kName, "1073741824", 1);
  EXPECT_EQ(env_int(kName, 16, int64_t{1} << 30), std::optional<int64_t>(int64_t{1} << 30));
  unsetenv(kName);
}

TEST(EnvInt, GarbageAndOutOfRangeAreAnErrorNamingTheVariable) {
  for (const char* bad : {"abc", "12k", "1.5", " 4", "\t4", "+4", "4 ", "11", "-1", "-", "99999999999999999999999"}) {
    expect_rejected(bad, [] { env_int(kName, 0, 10); }, "from 0 to 10");
  }
}

TEST(EnvChoice, OneOfTheValuesOrAnErrorListingThem) {
  unsetenv(kName);
  EXPECT_FALSE(env_choice(kName, {4, 8, 16}).has_value());
  for (int64_t v : {4, 8, 16}) {
    setenv(kName, std::to_string(v).c_str(), 1);
    EXPECT_EQ(env_choice(kName, {4, 8, 16}), std::optional<int64_t>(v));
  }
  // Inside the range but not a value: the list; outside it or not a number: env_int's error.
  for (const char* bad : {"5", "12"}) expect_rejected(bad, [] { env_choice(kName, {4, 8, 16}); }, "must be one of 4, 8, 16");
  for (const char* bad : {"2", "32", "8k"}) expect_rejected(bad, [] { env_choice(kName, {4, 8, 16}); }, "from 4 to 16");
}

TEST(EnvWord, OneOfTheWordsOrAnErrorListingThem) {
  unsetenv(kName);
  EXPECT_FALSE(env_word(kName, {"0", "1", "force"}).has_value());
  setenv(kName, "", 1);
  EXPECT_FALSE(env_word(kName, {"0", "1", "force"}).has_value());
  for (const char* w : {"0", "1", "force"}) {
    setenv(kName, w, 1);
    EXPECT_EQ(env_word(kName, {"0", "1", "force"}), std::optional<std::string>(w));
  }
  unsetenv(kName);
  // Exact words only: no case folding, no spaces, no prefixes.
  for (const char* bad : {"Force", "forced", " 1", "mma", "2"}) {
    expect_rejected(bad, [] { env_word(kName, {"0", "1", "force"}); }, "must be one of 0, 1, force");
  }
}

}  // namespace
}  // namespace minivllm
