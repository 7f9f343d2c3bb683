// The engine for Python: LLMEngine behind a lock, with the GIL released while it works (a step, a
// load, tokenizing), its outputs as read-only objects, and its tokenizer and chat template.
#include <Python.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <nlohmann/json.hpp>

#include "api/llm_engine.h"
#include "api/model_source.h"
#include "common/check.h"
#include "python/bindings.h"
#include "python/errors.h"

namespace nb = nanobind;

namespace minivllm::python {
namespace {

using Prompt = std::variant<std::string, std::vector<int64_t>>;

// One LLMEngine and the lock that serialises calls into it: the GIL is released while the engine
// works, so another Python thread could otherwise enter it at the same time.
class Engine {
 public:
  explicit Engine(const std::string& config_json) {
    const EngineConfig config =
        raising(PyExc_ValueError, [&] { return EngineConfig::from_json(nlohmann::json::parse(config_json)); });
    raising(PyExc_FileNotFoundError, [&] { return find_model(config.model); });
    engine_ = raising(PyExc_RuntimeError, [&] {
      nb::gil_scoped_release unlocked;
      return std::make_unique<LLMEngine>(config);
    });
  }

  // Runs `body(engine)` without the GIL, holding the engine's lock; its exceptions become `type`.
  template <typename F>
  auto call(PyObject* type, F&& body) {
    return raising(type, [&] {
      nb::gil_scoped_release unlocked;
      std::lock_guard<std::mutex> lock(mu_);
      MINIVLLM_CHECK(engine_) << "the engine has exited";
      return body(*engine_);
    });
  }

  // Stops the engine and frees it (weights, KV cache, worker processes) now, not when Python
  // collects this object. Later calls raise RuntimeError; exit() again does nothing.
  void exit() {
    std::unique_ptr<LLMEngine> engine;
    {
      nb::gil_scoped_release unlocked;
      std::lock_guard<std::mutex> lock(mu_);
      engine = std::move(engine_);
      if (engine) engine->exit();
      engine.reset();
    }
  }

  bool exited() const { return engine_ == nullptr; }

 private:
  std::mutex mu_;
  std::unique_ptr<LLMEngine> engine_;
};

std::vector<int32_t> to_token_ids(const std::vector<int64_t>& ids) {
  std::vector<int32_t> out(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    MINIVLLM_CHECK(ids[i] >= 0 && ids[i] <= INT32_MAX)
        << "token " << ids[i] << " at position " << i << " is not a token id";
    out[i] = static_cast<int32_t>(ids[i]);
  }
  return out;
}

nlohmann::json parse_object(const std::string& text, const char* what) {
  nlohmann::json j = nlohmann::json::parse(text);
  MINIVLLM_CHECK(j.is_object()) << what << " must be a dict";
  return j;
}

const Tokenizer& require_tokenizer(const LLMEngine& e) {
  MINIVLLM_CHECK(e.tokenizer() != nullptr) << "model '" << e.config().model << "' has no tokenizer";
  return *e.tokenizer();
}

nb::list logprobs_list(const std::vector<TokenLogprob>& lps) {
  nb::list out;
  for (const TokenLogprob& lp : lps) {
    nb::list top;
    for (const auto& [id, value] : lp.top) top.append(nb::make_tuple(id, value));
    nb::dict d;
    d["token_id"] = lp.token_id;
    d["logprob"] = lp.logprob;
    d["top"] = top;
    out.append(d);
  }
  return out;
}

void bind_outputs(nb::module_& m) {
  nb::class_<RequestOutput>(m, "RequestOutput",
                            "One finished choice of a request. Unpacks as (request_id, token_ids), as the\n"
                            "seeds' step() outputs do.")
      .def_ro("request_id", &RequestOutput::request_id)
      .def_ro("index", &RequestOutput::index, "the choice, 0..n-1")
      .def_ro("prompt_token_ids", &RequestOutput::prompt_token_ids)
      .def_ro("token_ids", &RequestOutput::token_ids, "the completion's token ids")
      .def_ro("text", &RequestOutput::text, "the completion as text (stop strings cut off)")
      .def_ro("finish_reason", &RequestOutput::finish_reason, "stop, length, abort or error")
      .def_prop_ro("error", [](const RequestOutput& o) { return message_for_users(o.error); },
                   "why the request failed, when finish_reason is error")
      .def_ro("num_cached_tokens", &RequestOutput::num_cached_tokens, "prompt tokens found in the prefix cache")
      .def_prop_ro("logprobs", [](const RequestOutput& o) { return logprobs_list(o.logprobs); })
      .def_ro("embedding", &RequestOutput::embedding,
              "an embedding request's last-token state after the final norm (not normalised)")
      .def_prop_ro(
          "prompt_logprobs", [](const RequestOutput& o) { return logprobs_list(o.prompt_logprobs); },
          "with prompt_logprobs: one per prompt token after the first (scored by the position before it)")
      .def("__iter__", [](const RequestOutput& o) { return nb::iter(nb::make_tuple(o.request_id, o.token_ids)); })
      .def("__repr__", [](const RequestOutput& o) {
        return std::string("RequestOutput(request_id=")
            .append(std::to_string(o.request_id))
            .append(", index=")
            .append(std::to_string(o.index))
            .append(", finish_reason='")
            .append(o.finish_reason)
            .append("', tokens=")
            .append(std::to_string(o.token_ids.size()))
            .append(")");
      });
  nb::class_<RequestDelta>(m, "RequestDelta", "What one step added to a request still running, or just finished.")
      .def_ro("request_id", &RequestDelta::request_id)
      .def_ro("index", &RequestDelta::index)
      .def_ro("token_ids", &RequestDelta::token_ids)
      .def_ro("text", &RequestDelta::text, "new text, safe to print (a possible stop string is held back)")
      .def_prop_ro("logprobs", [](const RequestDelta& d) { return logprobs_list(d.logprobs); });
  nb::class_<StepResult>(m, "StepResult")
      .def_ro("finished", &StepResult::finished)
      .def_ro("deltas", &StepResult::deltas)
      .def_ro("num_tokens", &StepResult::num_tokens, "> 0 prefill tokens, < 0 decoded sequences, 0 idle");
}

}  // namespace

void bind_engine(nb::module_& m) {
  bind_outputs(m);
  nb::class_<Engine>(m, "Engine", "LLMEngine: the config is a JSON object of the engine's config keys.")
      .def(nb::init<const std::string&>(), nb::arg("config_json"))
      .def(
          "add_request",
          [](Engine& self, const Prompt& prompt, const SamplingParams& params) {
            return self.call(PyExc_ValueError, [&](LLMEngine& e) {
              if (const auto* text = std::get_if<std::string>(&prompt)) return e.add_request(*text, params);
              return e.add_request(to_token_ids(std::get<std::vector<int64_t>>(prompt)), params);
            });
          },
          nb::arg("prompt"), nb::arg("params"))
      .def(
          "add_embedding_request",
          [](Engine& self, const Prompt& prompt) {
            return self.call(PyExc_ValueError, [&](LLMEngine& e) {
              const SamplingParams params = SamplingParams::embedding_request();
              if (const auto* text = std::get_if<std::string>(&prompt)) return e.add_request(*text, params);
              return e.add_request(to_token_ids(std::get<std::vector<int64_t>>(prompt)), params);
            });
          },
          nb::arg("prompt"))
      .def(
          "add_chat_request",
          [](Engine& self, const std::string& messages_json, const SamplingParams& params, const std::string& vars_json,
             bool add_generation_prompt, bool continue_final_message) {
            return self.call(PyExc_ValueError, [&](LLMEngine& e) {
              return e.add_chat_request(nlohmann::json::parse(messages_json), params,
                                        parse_object(vars_json, "chat_template_kwargs"),
                                        ChatRender{add_generation_prompt, continue_final_message});
            });
          },
          nb::arg("messages_json"), nb::arg("params"), nb::arg("vars_json") = "{}",
          nb::arg("add_generation_prompt") = true, nb::arg("continue_final_message") = false)
      .def("step", [](Engine& self) { return self.call(PyExc_RuntimeError, [](LLMEngine& e) { return e.step(); }); })
      .def("is_finished",
           [](Engine& self) { return self.call(PyExc_RuntimeError, [](LLMEngine& e) { return e.is_finished(); }); })
      .def(
          "abort",
          [](Engine& self, int64_t id) { return self.call(PyExc_RuntimeError, [&](LLMEngine& e) { return e.abort(id); }); },
          nb::arg("request_id"))
      .def("reset_prefix_cache",
           [](Engine& self) {
             return self.call(PyExc_RuntimeError, [](LLMEngine& e) { return e.reset_prefix_cache(); });
           })
      .def("exit", &Engine::exit)
      .def_prop_ro("exited", &Engine::exited)
      .def(
          "encode",
          [](Engine& self, const std::string& text, bool add_special_tokens) {
            return self.call(PyExc_ValueError, [&](LLMEngine& e) {
              return require_tokenizer(e).encode(text, add_special_tokens);
            });
          },
          nb::arg("text"), nb::arg("add_special_tokens") = true)
      .def(
          "decode",
          [](Engine& self, const std::vector<int64_t>& ids, bool skip_special_tokens) {
            return self.call(PyExc_ValueError, [&](LLMEngine& e) {
              return require_tokenizer(e).decode(to_token_ids(ids), skip_special_tokens);
            });
          },
          nb::arg("token_ids"), nb::arg("skip_special_tokens") = false)
      .def(
          "apply_chat_template",
          [](Engine& self, const std::string& messages_json, bool add_generation_prompt, const std::string& vars_json) {
            return self.call(PyExc_ValueError, [&](LLMEngine& e) {
              return e.apply_chat_template(nlohmann::json::parse(messages_json), add_generation_prompt,
                                           parse_object(vars_json, "chat template variables"));
            });
          },
          nb::arg("messages_json"), nb::arg("add_generation_prompt") = true, nb::arg("vars_json") = "{}")
      .def("tokenizer_info",
           [](Engine& self) {
             return self.call(PyExc_ValueError, [](LLMEngine& e) {
               const Tokenizer* t = e.tokenizer();
               if (t == nullptr) return std::make_tuple(false, int64_t{-1}, -1, -1, std::string(), std::string());
               return std::make_tuple(true, t->vocab_size(), t->bos_token_id(), t->eos_token_id(), t->bos_token(),
                                      t->eos_token());
             });
           },
           "(has_tokenizer, vocab_size, bos_token_id, eos_token_id, bos_token, eos_token)")
      .def("resolved_config",
           [](Engine& self) {
             return self.call(PyExc_RuntimeError, [](LLMEngine& e) {
               const EngineConfig& c = e.config();
               return std::make_tuple(c.max_model_length, c.num_kvcache_blocks, c.block_size, c.world_size,
                                      e.model_config().vocab_size);
             });
           },
           "(max_model_len, num_kvcache_blocks, block_size, world_size, vocab_size) after loading")
      .def("generation_defaults",
           [](Engine& self) {
             return self.call(PyExc_RuntimeError, [](LLMEngine& e) { return e.generation_defaults().keys.dump(); });
           },
           "the model's sampling defaults (generation_config.json) as a JSON object of sampling keys");
}

}  // namespace minivllm::python
