// The parts of the _minivllm extension module, each bound by its own file.
#pragma once

#include <nanobind/nanobind.h>

namespace minivllm::python {

void bind_engine(nanobind::module_& m);    // engine_binding.cc: Engine, its outputs, its tokenizer
void bind_sampling(nanobind::module_& m);  // module.cc: SamplingParams (from / to JSON)
void bind_bench(nanobind::module_& m);     // module.cc: the bench workload of `minivllm bench`

}  // namespace minivllm::python
