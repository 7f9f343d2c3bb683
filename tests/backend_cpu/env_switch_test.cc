// env_switch (common/env_switch.h): the 0 / 1 tuning knobs, unset or empty meaning "default", any
// other value an error that names the variable.
#include <gtest/gtest.h>

#include <cstdlib>
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

TEST(EnvSwitch, OtherValuesAreAnErrorNamingTheVariable) {
  for (const char* bad : {"2", "true", "off", " 1", "1 "}) {
    setenv(kName, bad, 1);
    try {
      env_switch(kName);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(kName) + "=" + bad), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("must be 0 or 1"), std::string::npos) << e.what();
    }
  }
  unsetenv(kName);
}

}  // namespace
}  // namespace minivllm
