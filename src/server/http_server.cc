#include "server/http_server.h"

#include <httplib.h>

#include <cstdio>
#include <sstream>
#include <thread>

#include "common/check.h"
#include "server/api_error.h"
#include "server/embeddings.h"
#include "server/generation.h"
#include "server/json_body.h"
#include "server/metrics_text.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/request_deadline.h"
#include "server/response_input_items.h"
#include "server/responses_api.h"
#include "server/responses_stream.h"
#include "server/socket_lookup.h"
#include "server/tool_parsers/tool_call_syntax.h"

namespace minivllm::server {

using nlohmann::json;

namespace {

constexpr const char* kVersion = "0.1.0";
// Connections the kernel queues before the accept thread takes them: a whole benchmark's burst.
constexpr int kListenBacklog = 4096;
// How long a graceful stop lets streams write the error event of the requests it ended.
constexpr std::chrono::milliseconds kErrorFlushTime{2000};

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump_body(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  if (e.retry_after_s() > 0) res.set_header("Retry-After", std::to_string(e.retry_after_s()));
  send_json(res, e.status(), error_json(e));
}

// Runs a handler; whatever it throws becomes OpenAI's error JSON, so one request never takes the
// server down.
template <class F>
httplib::Server::Handler guarded(F&& f) {
  return [f = std::forward<F>(f)](const httplib::Request& req, httplib::Response& res) {
    try {
      f(req, res);
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, "internal error: " + public_message(e)));
    }
  };
}

// Compares without an early exit, so the time taken says nothing about how much of the key matched.
bool same_secret(const std::string& given, const std::string& key) {
  if (given.size() != key.size() || key.empty()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < key.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ key[i]);
  return diff == 0;
}

// The model's API needs the key; health, version and metrics stay open for monitoring (as vLLM).
bool needs_key(const std::string& path) { return path.rfind("/v1/", 0) == 0 || path == "/tokenize" || path == "/detokenize"; }

}  // namespace

HttpServer::HttpServer(AsyncEngine& engine, ServerOptions options)
    : engine_(engine), options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
  if (options_.model_name.empty()) options_.model_name = engine_.config().model;
  const int threads = std::max(4, options_.num_threads);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_tcp_nodelay(true);
  http_->set_keep_alive_max_count(10000);
  context_.reset(new ServingContext{engine_, options_.model_name, stopping_, options_.request_timeout_s});
  const std::string chat_template = engine_.chat_template_source();
  if (options_.tool_call_parser == "auto") {
    context_->tool_parser = pick_tool_parser(engine_.model_config().arch_name, chat_template);
  } else if (options_.tool_call_parser != "none") {
    context_->tool_parser = tool_parser_from_name(options_.tool_call_parser);
    MINIVLLM_CHECK(context_->tool_parser) << "unknown tool-call parser '" << options_.tool_call_parser
                                          << "': auto, hermes, llama3_json, mistral, glm45, qwen3_coder, seed_oss, "
                                          << "openai or none";
  }
  const std::string& rp = options_.reasoning_parser;
  MINIVLLM_CHECK(rp == "auto" || rp == "qwen3" || rp == "seed_oss" || rp == "openai_gptoss" || rp == "none")
      << "unknown reasoning parser '" << rp << "': auto, qwen3, seed_oss, openai_gptoss or none";
  // A harmony reply (gpt-oss) is read whole by one parser: its channels and its calls.
  context_->harmony = rp == "openai_gptoss" || context_->tool_parser == ToolParserKind::kOpenAi ||
                      (rp == "auto" && is_harmony_template(chat_template));
  MINIVLLM_CHECK(!context_->harmony || rp != "qwen3")
      << "--reasoning-parser qwen3 reads <think> blocks, and this model writes harmony (gpt-oss): use openai_gptoss";
  MINIVLLM_CHECK(!context_->harmony || !context_->tool_parser || context_->tool_parser == ToolParserKind::kOpenAi)
      << "--tool-call-parser " << options_.tool_call_parser
      << ": a harmony reply (gpt-oss) has its calls read by the openai parser";
  if (rp == "seed_oss") context_->think_tags = kSeedThinkTags;
  if (rp == "auto") context_->think_tags = template_think_tags(chat_template);
  context_->model_thinks = template_thinks(chat_template, context_->think_tags);
  context_->template_reasoning_effort = chat_template.find("reasoning_effort") != std::string::npos;
  context_->reasoning_parser =
      context_->harmony ? rp != "none" : rp == "qwen3" || rp == "seed_oss" || (rp == "auto" && context_->model_thinks);
  add_routes();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
  } else {
    port_ = http_->bind_to_port(options_.host, options_.port) ? options_.port : -1;
  }
  MINIVLLM_CHECK(port_ > 0) << "cannot listen on " << options_.host << ":" << options_.port
                            << " (address in use, not an address of this machine, or not permitted)";
  // httplib's backlog of 5 resets or delays (by SYN retransmits of 1 s and more) a burst of clients;
  // the kernel caps this at net.core.somaxconn.
  if (!raise_listen_backlog(port_, kListenBacklog)) {
    std::fprintf(stderr, "minivllm serve: warning: could not raise the listen backlog of port %d; a burst of "
                 "connections may wait or be reset\n", port_);
  }
  return port_;
}

ResponseStore::Stored HttpServer::find_stored_response(const std::string& id, const char* param) const {
  std::optional<ResponseStore::Stored> kept = responses_->find(id);
  if (!kept) {
    throw ApiError(404,
                   "no stored response '" + id + "': this server keeps the last " +
                       std::to_string(responses_->capacity()) +
                       " stored responses in memory, none across a restart, and none sent with store: false",
                   param);
  }
  return std::move(*kept);
}

void HttpServer::serve() {
  MINIVLLM_CHECK(port_ > 0) << "serve() before bind()";
  http_->listen_after_bind();
}

void HttpServer::stop() {
  if (stopping_.exchange(true)) return;
  engine_.abort_all();  // streams end, so the connection threads can be joined
  http_->stop();
}

void HttpServer::drain(std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  draining_ = true;
  auto wait_idle = [this](Clock::time_point until) {
    while (context_->num_active.load() > 0 && !stopping_.load() && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };
  wait_idle(Clock::now() + timeout);
  if (context_->num_active.load() > 0 && !stopping_.load()) {
    std::ostringstream why;
    why << "the server is shutting down and the request did not finish within the shutdown timeout ("
        << std::chrono::duration<double>(timeout).count() << " s)";
    engine_.abort_all("error", why.str());
    wait_idle(Clock::now() + kErrorFlushTime);  // streams write their error event before the sockets close
  }
  stop();
}

std::shared_ptr<ActiveCall> HttpServer::admit_call() {
  auto active = std::make_shared<ActiveCall>(context_->num_active);  // counted before the checks
  if (stopping_ || draining_) throw ApiError(503, "the server is shutting down");
  if (!engine_.healthy()) throw ApiError(503, "the engine died (" + engine_.death() + "); the server is exiting");
  return active;
}

void HttpServer::add_routes() {
  httplib::Server& s = *http_;

  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options_.api_key.empty() || !needs_key(req.path)) return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string bearer = "Bearer ";
    const bool ok = auth.rfind(bearer, 0) == 0 && same_secret(auth.substr(bearer.size()), options_.api_key);
    if (ok) return httplib::Server::HandlerResponse::Unhandled;
    send_json(res, 401, error_json(401, "a valid API key is required: send the header 'Authorization: Bearer <key>'"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Statuses httplib sets itself (no route, body too large, unreadable request) get a JSON body.
  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = "request failed";
    if (res.status == 404) message = "no route for " + req.method + " " + req.path;
    if (res.status == 413) message = "the request body is larger than " + std::to_string(options_.max_body_bytes) + " bytes";
    if (res.status == 400) message = "malformed HTTP request";
    send_json(res, res.status, error_json(res.status, message));
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string message = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      message += ": " + public_message(e);
    } catch (...) {
    }
    send_json(res, 500, error_json(500, message));
  });

  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    res.status = stopping_ || draining_ || !engine_.healthy() ? 503 : 200;
  });
  s.Get("/version", [](const httplib::Request&, httplib::Response& res) { send_json(res, 200, {{"version", kVersion}}); });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(prometheus_text(engine_.stats(), options_.model_name), "text/plain; version=0.0.4");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const ResponseHeader h = make_header(false, options_.model_name);
    json model = {{"id", options_.model_name},     {"object", "model"},
                  {"created", h.created},          {"owned_by", "minivllm"},
                  {"root", engine_.config().model}, {"max_model_len", engine_.config().max_model_length}};
    send_json(res, 200, {{"object", "list"}, {"data", json::array({model})}});
  });

  s.Post("/tokenize", guarded([this](const httplib::Request& req, httplib::Response& res) {
           const TokenizeRequest t = parse_tokenize_request(parse_json_body(req.body));
           std::vector<int32_t> ids;
           try {
             if (t.chat && t.chat_template_kwargs.contains("tools")) {  // as a chat request renders them
               nlohmann::ordered_json vars = nlohmann::ordered_json::parse(t.chat_template_kwargs.dump());
               vars["tools"] = tools_in_order(req.body);
               ids = engine_.tokenize_chat(nlohmann::ordered_json::parse(t.messages.dump()), vars, t.render);
             } else {
               ids = t.chat ? engine_.tokenize_chat(t.messages, t.chat_template_kwargs, t.render)
                            : engine_.tokenize_text(t.prompt, t.add_special_tokens);
             }
           } catch (const Error& e) {
             throw bad_param(t.chat ? "messages" : "prompt", public_message(e));
           }
           json out = {{"count", ids.size()}, {"max_model_len", engine_.config().max_model_length}, {"tokens", ids}};
           if (t.return_token_strs) {
             json strs = json::array();
             for (int32_t id : ids) strs.push_back(engine_.tokenizer()->id_to_token(id));
             out["token_strs"] = std::move(strs);
           }
           send_json(res, 200, out);
         }));
  s.Post("/detokenize", guarded([this](const httplib::Request& req, httplib::Response& res) {
           const std::vector<int32_t> ids = parse_detokenize_request(parse_json_body(req.body));
           const int64_t vocab = engine_.model_config().vocab_size;
           for (int32_t id : ids) {
             if (id >= vocab) throw bad_param("tokens", "token id " + std::to_string(id) + " is outside the vocabulary");
           }
           send_json(res, 200, {{"prompt", engine_.detokenize(ids)}});
         }));

  auto generation = [this](bool chat) {
    return guarded([this, chat](const httplib::Request& req, httplib::Response& res) {
      auto active = admit_call();
      const auto now = AsyncEngine::Clock::now();
      const json body = parse_json_body(req.body);
      GenerationRequest g = chat ? parse_chat_request(body, engine_.generation_defaults())
                                 : parse_completion_request(body, engine_.generation_defaults());
      if (!g.tools.tools.is_null()) g.tools.tools_in_order = tools_in_order(req.body);
      const auto deadline = request_deadline(body, options_.request_timeout_s, now);
      ClientWatch client(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
      serve_generation(*context_, g, deadline, std::move(active), client, res);
    });
  };
  s.Post("/v1/completions", generation(false));
  s.Post("/v1/chat/completions", generation(true));
  // The Responses API through the chat path (server/responses_api.h): its body in chat's terms, the
  // chat completion back in its own.
  s.Post("/v1/responses", guarded([this](const httplib::Request& req, httplib::Response& res) {
           auto active = admit_call();
           const auto now = AsyncEngine::Clock::now();
           // Items named by reference are a kept response's: in place from here on (stored that way too).
           const json body = resolve_item_references(parse_json_body(req.body),
                                                     [this](const std::string& id) { return responses_->find_item(id); });
           json previous = json::array();
           if (body.contains("previous_response_id") && body["previous_response_id"].is_string()) {
             const std::string id = body["previous_response_id"].get<std::string>();
             previous = find_stored_response(id, "previous_response_id").conversation;
           }
           const json chat = responses_to_chat_body(body, previous);
           // A response is kept for a later previous_response_id unless the request says store: false.
           const bool store = !(body.contains("store") && body["store"] == false);
           auto keep = [kept = responses_, store, previous, body](const json& response) {
             if (!store) return;
             const std::string id = response.at("id").get<std::string>();
             kept->put(id, {response, conversation_after(previous, body, response),
                            responses_input_items(body, id.substr(id.find('_') + 1))});
           };
           GenerationRequest g = parse_chat_request(chat, engine_.generation_defaults());
           check_reasoning_effort(*context_, g, "reasoning");  // named as the client wrote it
           if (!g.tools.tools.is_null()) g.tools.tools_in_order = responses_tools_in_order(req.body);
           const auto deadline = request_deadline(chat, options_.request_timeout_s, now);
           ClientWatch client(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
           if (g.stream) {  // the chat chunks rewritten as Responses events as they are written
             auto stream = std::make_shared<ResponsesStream>(body, keep);
             serve_generation(*context_, g, deadline, std::move(active), client, res,
                              [stream](std::string_view sse) { return stream->rewrite(sse); });
             return;
           }
           serve_generation(*context_, g, deadline, std::move(active), client, res);
           if (res.status != 200) return;  // an error's body is already OpenAI's error JSON
           const json response = chat_completion_to_response(json::parse(res.body), body);
           keep(response);
           res.set_content(response.dump(), "application/json");
         }));
  // A stored response's input items, a page at a time (OpenAI's list input items).
  s.Get(R"(/v1/responses/([^/]+)/input_items)", guarded([this](const httplib::Request& req, httplib::Response& res) {
          std::vector<std::string> names;
          for (const auto& [name, value] : req.params) names.push_back(name);
          auto param = [&](const std::string& name) -> std::optional<std::string> {
            if (!req.has_param(name)) return std::nullopt;
            return req.get_param_value(name);
          };
          send_json(res, 200,
                    input_items_page(find_stored_response(req.matches[1], "response_id").input_items, param, names));
        }));
  // A stored response (OpenAI's retrieve and delete); its id in the path.
  s.Get(R"(/v1/responses/([^/]+))", guarded([this](const httplib::Request& req, httplib::Response& res) {
          send_json(res, 200, find_stored_response(req.matches[1], "response_id").response);
        }));
  s.Delete(R"(/v1/responses/([^/]+))", guarded([this](const httplib::Request& req, httplib::Response& res) {
             const std::string id = req.matches[1];
             if (!responses_->erase(id)) find_stored_response(id, "response_id");  // throws the 404
             send_json(res, 200, {{"id", id}, {"object", "response"}, {"deleted", true}});
           }));
  s.Post("/v1/embeddings", guarded([this](const httplib::Request& req, httplib::Response& res) {
           auto active = admit_call();
           const auto now = AsyncEngine::Clock::now();
           const json body = parse_json_body(req.body);
           const EmbeddingRequest e = parse_embedding_request(body, engine_.model_config().hidden_size);
           ClientWatch client(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
           serve_embeddings(*context_, e, request_deadline(body, options_.request_timeout_s, now), client, res);
         }));
}

}  // namespace minivllm::server
