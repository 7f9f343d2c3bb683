// How engine errors reach Python: the engine throws one type (minivllm::Error); each binding says
// which Python exception its failures are, ValueError for bad parameters (config keys, sampling
// parameters, prompts, chat messages), FileNotFoundError for a model that is not there, and
// RuntimeError for the rest (loading, a device failure). The message is the engine's own, as the
// CLI prints it (message_for_users: no source paths).
#pragma once

#include <Python.h>

#include <exception>

#include <nanobind/nanobind.h>

#include "common/error_text.h"

namespace minivllm::python {

// Runs `body`; a C++ exception out of it becomes `type` (a Python exception class) with the message.
// `body` may release the GIL inside: its scope has ended (the GIL is held again) when this catches.
template <typename F>
auto raising(PyObject* type, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const nanobind::python_error&) {
    throw;
  } catch (const nanobind::builtin_exception&) {
    throw;
  } catch (const std::exception& e) {
    PyErr_SetString(type, message_for_users(e.what()).c_str());
    throw nanobind::python_error();
  }
}

}  // namespace minivllm::python
