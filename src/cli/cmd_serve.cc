// `minivllm serve`: OpenAI's HTTP API (src/server) over an AsyncEngine. Prints where it listens
// once the model is loaded. SIGTERM (what a supervisor sends) stops gracefully: no new requests,
// those in flight get --shutdown-timeout to finish, the rest end with an error. SIGINT (Ctrl-C),
// or a second signal, ends the streams in flight at once. Either way the listener and the engine
// (its tensor-parallel workers exit with it) stop and the exit code is 0. When the engine dies (a
// tensor-parallel worker killed), every request ends with an error, /health answers 503, and the
// server exits 1 within seconds, so that a supervisor restarts it.
#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <thread>

#include "api/async_engine.h"
#include "cli/cli_io.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "server/http_server.h"
#include "server/tool_parsers/tool_call_syntax.h"

namespace minivllm::cli {
namespace {

// Set by the signal handler (lock-free atomics are async-signal-safe); a watcher thread acts on them.
std::atomic<int> g_signal{0};  // the first signal; -1 when serve() ended without one
std::atomic<int> g_num_signals{0};

void on_signal(int sig) {
  int none = 0;
  g_signal.compare_exchange_strong(none, sig);
  g_num_signals.fetch_add(1);
}

// Kubernetes kills a pod 30 s after its SIGTERM: a drain of 20 s leaves time for the error events
// and the engine's exit.
constexpr double kDefaultShutdownTimeoutS = 20;

constexpr double kMaxSeconds = 1e7;  // ~4 months: more is "no limit", and fits the clocks' ranges

double seconds_flag(const ParsedArgs& a, const std::string& name, double fallback) {
  const double s = a.get_float(name, fallback);
  if (s < 0 || s > kMaxSeconds) {
    throw UsageError(name + " must be in [0, " + std::to_string(static_cast<int>(kMaxSeconds)) + "] seconds, got " +
                     a.get(name).value_or(""));
  }
  return s;
}

// After the engine died: how long /health keeps answering 503 before the port closes, so that
// whoever polls it sees why.
constexpr std::chrono::milliseconds kDeadEngineLinger{1000};

// Acts on the first signal: SIGTERM drains, anything else stops now; a second signal during the
// drain stops now too. A dead engine stops the server too, once its streams had their error events.
void watch(server::HttpServer& http, const AsyncEngine& engine, std::chrono::milliseconds shutdown_timeout) {
  while (g_signal.load() == 0 && engine.healthy()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (!engine.healthy()) {
    std::cerr << "minivllm serve: the engine died: " << engine.death() << "; stopping" << std::endl;
    std::this_thread::sleep_for(kDeadEngineLinger);
    http.drain(std::chrono::milliseconds(0));  // its requests have ended: what is left is their last writes
    return;
  }
  if (g_signal.load() != SIGTERM) {
    http.stop();
    return;
  }
  std::atomic<bool> drained{false};
  std::thread impatient([&] {
    while (!drained.load()) {
      if (g_num_signals.load() > 1) {
        http.stop();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  http.drain(shutdown_timeout);
  drained = true;
  impatient.join();
}

server::ServerOptions server_options_from(const ParsedArgs& a) {
  server::ServerOptions o;
  o.host = a.get("--host").value_or(o.host);
  o.port = static_cast<int>(a.get_int("--port", o.port, 0, 65535));
  o.api_key = a.get("--api-key").value_or("");
  o.model_name = a.get("--served-model-name").value_or("");
  o.max_body_bytes = static_cast<size_t>(a.get_int("--max-body-bytes", static_cast<int64_t>(o.max_body_bytes), 1024,
                                                   int64_t{1} << 34));
  o.num_threads = static_cast<int>(a.get_int("--http-threads", o.num_threads, 4, 65536));
  o.request_timeout_s = seconds_flag(a, "--request-timeout", o.request_timeout_s);
  o.tool_call_parser = a.get("--tool-call-parser").value_or(o.tool_call_parser);
  if (o.tool_call_parser != "auto" && o.tool_call_parser != "none" &&
      !server::tool_parser_from_name(o.tool_call_parser)) {
    throw UsageError("--tool-call-parser must be auto, hermes, llama3_json, mistral, glm45, qwen3_coder, seed_oss, "
                     "openai or none, got '" + o.tool_call_parser + "'");
  }
  o.reasoning_parser = a.get("--reasoning-parser").value_or(o.reasoning_parser);
  if (o.reasoning_parser != "auto" && o.reasoning_parser != "qwen3" && o.reasoning_parser != "seed_oss" &&
      o.reasoning_parser != "openai_gptoss" && o.reasoning_parser != "none") {
    throw UsageError("--reasoning-parser must be auto, qwen3, seed_oss, openai_gptoss or none, got '" +
                     o.reasoning_parser + "'");
  }
  return o;
}

}  // namespace

int run_serve(const std::vector<std::string>& argv) {
  ArgParser p("serve", "serve --model M [--host 127.0.0.1] [--port 8000] [--api-key K] [options]",
              "OpenAI-compatible HTTP server: /v1/completions, /v1/chat/completions (stream: true for\n"
              "server-sent events), /v1/models, /tokenize, /detokenize, /health, /version, /metrics.");
  p.option("--host", "ADDR", "address to listen on (default 127.0.0.1)")
      .option("--port", "N", "port to listen on, 0 for any free one (default 8000)")
      .option("--api-key", "K", "require 'Authorization: Bearer K' on /v1/*, /tokenize, /detokenize")
      .option("--served-model-name", "NAME", "the model's name in the API (default: the --model argument)")
      .option("--max-body-bytes", "N", "larger request bodies get 413 (default 33554432)")
      .option("--http-threads", "N", "connections served at once; each stream holds one (default 512)")
      .option("--request-timeout", "S",
              "seconds a generation may take before it ends with an error, for requests without their own "
              "request_timeout (default 0: no limit)")
      .option("--tool-call-parser", "NAME",
              "how tool calls are read from replies when tool_choice is auto: hermes, llama3_json, mistral, glm45, "
              "qwen3_coder, seed_oss, openai (gpt-oss's harmony), none, or auto (default: from the model's chat "
              "template)")
      .option("--reasoning-parser", "NAME",
              "qwen3 (<think>...</think> into reasoning_content), seed_oss (<seed:think>), openai_gptoss "
              "(harmony's analysis channel), none, or auto (default: from the chat template)")
      .option("--shutdown-timeout", "S",
              "after SIGTERM, seconds the requests in flight get to finish before they end with an error "
              "(default 20)");
  add_engine_options(p);
  return run_command(p, argv, [](const ParsedArgs& a) {
    const EngineConfig config = engine_config_from(a);
    const server::ServerOptions options = server_options_from(a);
    const auto shutdown_timeout = std::chrono::milliseconds(
        static_cast<int64_t>(1000 * seconds_flag(a, "--shutdown-timeout", kDefaultShutdownTimeoutS)));
    // A client that hangs up makes a write fail with EPIPE instead of killing the process.
    std::signal(SIGPIPE, SIG_IGN);
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);

    AsyncEngine engine(config);
    server::HttpServer http(engine, options);
    const int port = http.bind();
    std::thread watcher([&http, &engine, shutdown_timeout] { watch(http, engine, shutdown_timeout); });
    std::cout << "minivllm serve: model " << http.model_name() << " at http://" << options.host << ":" << port
              << "/v1 (max_model_len " << engine.config().max_model_length << ", "
              << engine.config().num_kvcache_blocks << " KV blocks)" << std::endl;
    http.serve();
    int none = 0;
    g_signal.compare_exchange_strong(none, -1);  // serve() ended on its own: release the watcher
    watcher.join();
    engine.shutdown();
    if (!engine.healthy()) {
      std::cerr << "minivllm serve: stopped because the engine died: " << engine.death() << std::endl;
      return kExitRuntimeError;
    }
    std::cerr << "minivllm serve: stopped" << std::endl;
    return kExitOk;
  });
}

}  // namespace minivllm::cli
