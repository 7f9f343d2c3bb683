// HttpServer: OpenAI's HTTP API over an AsyncEngine, on cpp-httplib (a thread per connection from
// a fixed pool; a streaming response holds its thread while it streams).
//
//   POST /v1/completions, /v1/chat/completions   (stream: server-sent events)
//   GET  /v1/models, /health, /version, /metrics
//   POST /tokenize, /detokenize
//
// Every failure is OpenAI's error JSON with a status: 400 naming the parameter, 401 without the
// API key, 404 for an unknown model or path, 413 for a body over the limit, 500 when generation
// failed, 503 while shutting down, once the engine died, or when the waiting queue is full (with
// Retry-After). One request's failure never stops the server; /health answers 503 while it stops.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "api/async_engine.h"
#include "server/response_store.h"

namespace httplib {
class Server;
}

namespace minivllm::server {

struct ServingContext;
class ActiveCall;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                  // 0: any free port (see HttpServer::port)
  std::string api_key;              // "": no authentication
  std::string model_name;           // the name clients use; "" -> the engine's model argument
  size_t max_body_bytes = 32 << 20;  // larger bodies get 413
  int num_threads = 512;            // connections served at once (streams hold theirs)
  double request_timeout_s = 0;     // a generation's deadline when the request sets none; 0: none
  // tool_choice auto's parser: auto (picked from the model: tool_parsers/tool_call_syntax.h),
  // hermes, llama3_json, mistral, or none (auto is refused; required and named still work).
  std::string tool_call_parser = "auto";
  // auto (qwen3 when the chat template thinks in <think>...</think>), qwen3, or none.
  std::string reasoning_parser = "auto";
};

class HttpServer {
 public:
  HttpServer(AsyncEngine& engine, ServerOptions options);
  ~HttpServer();

  // Binds the socket; throws an Error naming host:port when it cannot. Returns the port.
  int bind();
  int port() const { return port_; }
  // Serves until stop(); returns after the connections' threads have ended.
  void serve();
  // Ends every stream and request in flight, and makes serve() return. Thread-safe (not from a
  // signal handler: set a flag there and call it from a thread).
  void stop();
  // A graceful stop (SIGTERM): new generation requests get 503 and /health 503 at once; the calls
  // in flight get up to `timeout` to finish; those left then end with an error (an error event,
  // or a 500); then stop(). Returns when serve() may return. Thread-safe; a stop() meanwhile cuts
  // the wait short.
  void drain(std::chrono::milliseconds timeout);

  const std::string& model_name() const { return options_.model_name; }

 private:
  void add_routes();
  // A generation or embeddings call, counted (so that a graceful stop that begins meanwhile waits
  // for it) before it is refused with a 503 while the server stops or the engine is dead.
  std::shared_ptr<ActiveCall> admit_call();
  // The stored response `id`; else a 404 naming `param` and what the store keeps.
  ResponseStore::Stored find_stored_response(const std::string& id, const char* param) const;

  AsyncEngine& engine_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> draining_{false};  // refusing new generations, finishing those in flight
  std::unique_ptr<ServingContext> context_;  // what the handlers (and streams outliving them) use
  // POST /v1/responses' stored responses (previous_response_id); shared with the streams that store.
  std::shared_ptr<ResponseStore> responses_ = std::make_shared<ResponseStore>();
  int port_ = -1;
};

}  // namespace minivllm::server
