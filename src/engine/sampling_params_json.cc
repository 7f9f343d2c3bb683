// SamplingParams from and to JSON: the Python package's keyword arguments arrive here as one JSON
// object, so that the C++ side alone knows the keys and their checks.
#include <nlohmann/json.hpp>

#include "common/check.h"
#include "engine/sampling_params.h"

namespace minivllm {

SamplingParams SamplingParams::from_json(const nlohmann::json& j) {
  MINIVLLM_CHECK(j.is_object()) << "sampling parameters must be a JSON object";
  SamplingParams s;
  for (const auto& [key, v] : j.items()) {
    try {
      if (key == "temperature") s.temperature = v.get<float>();
      else if (key == "top_k") s.top_k = v.get<int>();
      else if (key == "top_p") s.top_p = v.get<float>();
      else if (key == "min_p") s.min_p = v.get<float>();
      else if (key == "max_tokens") s.max_tokens = v.get<int>();
      else if (key == "ignore_eos") s.ignore_eos = v.get<bool>();
      else if (key == "seed") {
        if (v.is_null()) s.seed.reset();
        else {
          MINIVLLM_CHECK(v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0))
              << "sampling parameter 'seed' must be null or an integer >= 0, got " << v.dump();
          s.seed = v.get<uint64_t>();
        }
      } else if (key == "stop_token_ids") s.stop_token_ids = v.get<std::vector<int64_t>>();
      else if (key == "stop") {
        if (v.is_null()) s.stop.clear();
        else if (v.is_string()) s.stop = {v.get<std::string>()};
        else s.stop = v.get<std::vector<std::string>>();
      } else if (key == "n") s.n = v.get<int>();
      else if (key == "logprobs") s.logprobs = v.is_null() ? -1 : v.get<int>();
      else if (key == "presence_penalty") s.presence_penalty = v.get<float>();
      else if (key == "frequency_penalty") s.frequency_penalty = v.get<float>();
      else if (key == "repetition_penalty") s.repetition_penalty = v.get<float>();
      else MINIVLLM_FAIL() << "unknown sampling parameter '" << key << "'";
      // nlohmann converts a bool to a number and a number to a bool; a flag given as 1 or a count
      // given as true is a mistake worth naming.
      MINIVLLM_CHECK(v.is_null() || v.is_boolean() == (key == "ignore_eos"))
          << "sampling parameter '" << key << "' has the wrong type: " << v.type_name();
    } catch (const nlohmann::json::exception& e) {
      MINIVLLM_FAIL() << "sampling parameter '" << key << "' has the wrong type: " << v.type_name();
    }
  }
  s.validate();
  return s;
}

nlohmann::ordered_json SamplingParams::to_json() const {
  return {{"temperature", temperature},
          {"top_k", top_k},
          {"top_p", top_p},
          {"min_p", min_p},
          {"max_tokens", max_tokens},
          {"ignore_eos", ignore_eos},
          {"seed", seed ? nlohmann::ordered_json(*seed) : nlohmann::ordered_json(nullptr)},
          {"stop_token_ids", stop_token_ids},
          {"stop", stop},
          {"n", n},
          {"logprobs", logprobs},
          {"presence_penalty", presence_penalty},
          {"frequency_penalty", frequency_penalty},
          {"repetition_penalty", repetition_penalty}};
}

}  // namespace minivllm
