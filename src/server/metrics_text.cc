#include "server/metrics_text.h"

#include <sstream>

namespace minivllm::server {

namespace {

class Writer {
 public:
  explicit Writer(const std::string& model_name) : labels_("model_name=\"" + escape(model_name) + "\"") {}

  template <class T>
  void sample(const std::string& name, const char* type, const char* help, T value) {
    header(name, type, help);
    os_ << name << "{" << labels_ << "} " << value << "\n";
  }
  void header(const std::string& name, const char* type, const char* help) {
    os_ << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  }
  void labelled(const std::string& name, const std::string& label, const std::string& value, int64_t v) {
    os_ << name << "{" << labels_ << "," << label << "=\"" << escape(value) << "\"} " << v << "\n";
  }
  void histogram(const std::string& name, const char* help, const Histogram& h) {
    header(name, "histogram", help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.upper_bounds().size(); ++i) {
      cumulative += h.counts()[i];
      os_ << name << "_bucket{" << labels_ << ",le=\"" << h.upper_bounds()[i] << "\"} " << cumulative << "\n";
    }
    os_ << name << "_bucket{" << labels_ << ",le=\"+Inf\"} " << h.count() << "\n";
    os_ << name << "_sum{" << labels_ << "} " << h.sum() << "\n";
    os_ << name << "_count{" << labels_ << "} " << h.count() << "\n";
  }
  std::string str() const { return os_.str(); }

 private:
  // Label values escape backslash, quote and newline.
  static std::string escape(const std::string& s) {
    std::string out;
    for (char c : s) {
      if (c == '\\') out += "\\\\";
      else if (c == '"') out += "\\\"";
      else if (c == '\n') out += "\\n";
      else out += c;
    }
    return out;
  }
  std::string labels_;
  std::ostringstream os_;
};

}  // namespace

std::string prometheus_text(const ServingStats& stats, const std::string& model_name) {
  Writer w(model_name);
  const EngineStats& c = stats.engine;
  w.sample("minivllm:num_requests_running", "gauge", "Requests in the engine's running queue.", c.num_running);
  w.sample("minivllm:num_requests_waiting", "gauge", "Requests waiting to be scheduled.", c.num_waiting);
  w.sample("minivllm:num_requests_in_flight", "gauge", "Requests submitted to the server and not yet ended.",
           stats.num_requests_in_flight);
  w.sample("minivllm:kv_cache_blocks_total", "gauge", "KV-cache blocks.", c.kv_blocks_total);
  w.sample("minivllm:kv_cache_blocks_free", "gauge", "KV-cache blocks not held by any request.", c.kv_blocks_free);
  const double usage = c.kv_blocks_total > 0 ? 1.0 - static_cast<double>(c.kv_blocks_free) / c.kv_blocks_total : 0.0;
  w.sample("minivllm:kv_cache_usage_perc", "gauge", "KV-cache usage: 1 is full.", usage);
  w.sample("minivllm:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
           c.prefix_cache_queried_tokens);
  w.sample("minivllm:prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.",
           c.prefix_cache_hit_tokens);
  const double hit_rate = c.prefix_cache_queried_tokens > 0
                              ? static_cast<double>(c.prefix_cache_hit_tokens) / c.prefix_cache_queried_tokens
                              : 0.0;
  w.sample("minivllm:prefix_cache_hit_rate", "gauge", "Prefix-cache hits over queries, in tokens.", hit_rate);
  w.sample("minivllm:prompt_tokens_total", "counter", "Prompt tokens processed.", c.prompt_tokens_total);
  w.sample("minivllm:generation_tokens_total", "counter", "Tokens generated.", c.generation_tokens_total);
  w.sample("minivllm:num_preemptions_total", "counter", "Requests preempted for lack of KV blocks.",
           c.num_preemptions);
  w.sample("minivllm:num_requests_rejected_total", "counter",
           "Requests refused with 503 because the waiting queue held max_waiting_requests sequences.",
           stats.num_requests_rejected);
  w.sample("minivllm:num_requests_timed_out_total", "counter",
           "Requests ended with an error at their deadline (request_timeout).", stats.num_requests_timed_out);
  w.header("minivllm:request_success_total", "counter", "Choices ended, by finish reason.");
  for (const auto& [reason, count] : stats.finished_by_reason) {
    w.labelled("minivllm:request_success_total", "finished_reason", reason, count);
  }
  w.histogram("minivllm:time_to_first_token_seconds", "Time to first token, from arrival at the engine.",
              stats.time_to_first_token);
  w.histogram("minivllm:inter_token_latency_seconds", "Time between consecutive tokens of a choice.",
              stats.inter_token_latency);
  w.histogram("minivllm:e2e_request_latency_seconds", "Time from arrival at the engine to the request's end.",
              stats.e2e_request_latency);
  return w.str();
}

}  // namespace minivllm::server
