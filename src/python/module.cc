// The _minivllm extension module: the C++ engine for the pure-Python `minivllm` package
// (python/minivllm). Keys and checks of the engine config and the sampling parameters stay on the
// C++ side: Python hands its keyword arguments over as one JSON object.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <nlohmann/json.hpp>

#include "api/engine_config.h"
#include "cli/bench_workload.h"
#include "common/config_key.h"
#include "engine/sampling_keys.h"
#include "engine/sampling_params.h"
#include "python/bindings.h"
#include "python/errors.h"

namespace nb = nanobind;

namespace minivllm::python {

void bind_sampling(nb::module_& m) {
  nb::class_<SamplingParams>(m, "SamplingParams",
                             "The engine's sampling parameters, validated; built from a JSON object.")
      .def_static(
          "from_json",
          [](const std::string& text) {
            return raising(PyExc_ValueError, [&] { return SamplingParams::from_json(nlohmann::json::parse(text)); });
          },
          nb::arg("json"), "Parses and validates; ValueError names the key that is unknown or invalid.")
      .def("to_json", [](const SamplingParams& s) { return s.to_json().dump(); },
           "Every parameter as a JSON object, in declaration order.");
}

// The config tables as Python sees them, for docstrings: each key's (name, alias, type, default as
// JSON text, range in words, help). The tables stay the one definition of every key.
void bind_config_keys(nb::module_& m) {
  m.def(
      "config_keys",
      [](const std::string& kind) {
        if (kind != "engine" && kind != "sampling") {
          throw nb::value_error(("config_keys: kind must be 'engine' or 'sampling', got '" + kind + "'").c_str());
        }
        static constexpr const char* kTypes[] = {"bool", "int", "float", "str", "list[int]", "list[str]",
                                                     "dict[int, float]", "dict"};
        std::vector<std::tuple<std::string, std::string, std::string, std::string, std::string, std::string>> out;
        for (const ConfigKey& k : kind == "engine" ? engine_config_keys() : sampling_keys()) {
          out.emplace_back(std::string(k.spec.name), std::string(k.spec.alias),
                           std::string(kTypes[static_cast<int>(k.type)]) + (k.nullable ? " | None" : ""),
                           k.default_json, k.range_text, std::string(k.spec.help));
        }
        return out;
      },
      nb::arg("kind"), "(name, alias, type, default JSON, range, help) of each engine or sampling key.");
}

void bind_bench(nb::module_& m) {
  m.def(
      "bench_workload",
      [](const std::optional<std::string>& path) {
        return raising(PyExc_ValueError, [&] {
          cli::BenchWorkload w = path ? cli::load_workload(*path) : cli::make_seeds_workload(256);
          return std::make_pair(std::move(w.prompt_token_ids), std::move(w.max_tokens));
        });
      },
      nb::arg("path") = nb::none(),
      "(prompt_token_ids, max_tokens): nano-vllm's bench.py workload (Python's random.seed(0), 256\n"
      "sequences) as `minivllm bench` draws it, or a workload file's. A smaller run takes the first N.");
}

}  // namespace minivllm::python

NB_MODULE(_minivllm, m) {
  m.doc() = "minivllm's C++ engine; use it through the `minivllm` package.";
#ifdef MINIVLLM_PY_HAVE_CUDA
  m.attr("has_cuda") = true;
#else
  m.attr("has_cuda") = false;
#endif
  minivllm::python::bind_sampling(m);
  minivllm::python::bind_engine(m);
  minivllm::python::bind_bench(m);
  minivllm::python::bind_config_keys(m);
}
