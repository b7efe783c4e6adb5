#include "serve/api.h"

#include <cmath>

#include "util/error.h"
#include "util/json_fields.h"
#include "util/json_strict.h"

namespace ember::serve {

using nlohmann::json;

namespace {

constexpr const char* kWhere = "request";

[[noreturn]] void bad(const std::string& message, std::string code = "") {
  throw ApiError(400, "invalid_request_error", message, std::move(code));
}

// Any Error from the strict readers becomes a 400 with its one-line message.
template <class Fn>
auto checked(Fn&& fn) {
  try {
    return fn();
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    bad(e.what());
  }
}

// OpenAI clients send null for "not given": those members are dropped before the strict read.
json without_nulls(const json& j) {
  json out = json::object();
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!it.value().is_null()) out[it.key()] = it.value();
  return out;
}

std::vector<tmpl::Message> read_messages(StrictObject& o, const ApiLimits& limits) {
  const json& arr = o.array("messages", limits.max_messages);
  if (arr.empty()) bad(std::string(kWhere) + ": messages: expected at least one message, found none");
  std::vector<tmpl::Message> out;
  size_t bytes = 0;
  for (size_t i = 0; i < arr.size(); ++i) {
    const json m = arr[i].is_object() ? without_nulls(arr[i]) : arr[i];
    StrictObject mo(m, o.element("messages", i), kWhere);
    tmpl::Message msg;
    msg.role = mo.string("role", 64);
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "developer")
      fail_field(kWhere, mo.field("role"), "system, developer, user or assistant", msg.role);
    if (msg.role == "developer") msg.role = "system";  // OpenAI's newer name for the same turn
    if (mo.has("content") && m.at("content").is_array()) {
      // [{"type": "text", "text": ...}, ...]: the text parts joined, as OpenAI reads them.
      const json& parts = mo.array("content", 1024);
      for (size_t p = 0; p < parts.size(); ++p) {
        StrictObject po(parts[p], mo.element("content", p), kWhere);
        const std::string type = po.string("type", 32);
        if (type != "text") fail_field(kWhere, po.field("type"), "text (ember serves text models)", type);
        msg.content += po.string("text", limits.max_prompt_bytes);
        po.done();
      }
    } else {
      msg.content = mo.string("content", limits.max_prompt_bytes);  // UTF-8: checked by the parse
    }
    if (mo.has("name")) (void)mo.string("name", 256);
    mo.done();
    bytes += msg.content.size();
    if (bytes > limits.max_prompt_bytes)
      fail_field(kWhere, "messages", "at most " + std::to_string(limits.max_prompt_bytes) + " bytes of content",
                 "more");
    out.push_back(std::move(msg));
  }
  return out;
}

// A string or an array of up to 4 non-empty strings.
std::vector<std::string> read_stop(StrictObject& o, const json& j) {
  std::vector<std::string> out;
  if (!o.has("stop")) return out;
  if (j.at("stop").is_string()) {
    out.push_back(o.string("stop", 256));
  } else {
    const json& arr = o.array("stop", 4);
    for (size_t i = 0; i < arr.size(); ++i) {
      if (!arr[i].is_string()) fail_field(kWhere, o.element("stop", i), "a string", json_type_name(arr[i]));
      out.push_back(arr[i].get<std::string>());
      if (out.back().size() > 256) fail_field(kWhere, o.element("stop", i), "at most 256 bytes", "more");
    }
  }
  for (const std::string& s : out)
    if (s.empty()) fail_field(kWhere, "stop", "non-empty strings", "an empty string");
  return out;
}

void read_sampling(StrictObject& o, Endpoint endpoint, const ApiLimits& limits, CompletionInput& in) {
  GenerationParams& p = in.params;
  const bool llama = endpoint == Endpoint::llama_completion;
  const char* max_key = llama ? "n_predict" : "max_tokens";
  if (endpoint == Endpoint::chat_completions && o.has("max_completion_tokens"))
    p.max_tokens = int(o.integer("max_completion_tokens", 1, 1 << 24));
  if (o.has(max_key)) {
    // llama-server's n_predict -1 means "until the context ends".
    const int64_t v = o.integer(max_key, llama ? -1 : 1, 1 << 24);
    p.max_tokens = v < 0 ? 0 : int(v);
  }
  if (o.has("temperature")) {
    const double t = o.number("temperature");
    if (t < 0 || t > 2) fail_field(kWhere, "temperature", "a number in [0, 2]", std::to_string(t));
    p.sampling.temperature = float(t);
  } else {
    // OpenAI's default is 1 (sampling); ember's determinism makes either reproducible.
    p.sampling.temperature = 1.0f;
  }
  if (o.has("top_p")) {
    const double t = o.number("top_p");
    if (!(t > 0 && t <= 1)) fail_field(kWhere, "top_p", "a number in (0, 1]", std::to_string(t));
    p.sampling.top_p = float(t);
  }
  if (o.has("top_k")) p.sampling.top_k = int(o.integer("top_k", 0, 1 << 30));
  if (o.has("seed")) {
    const int64_t s = o.integer("seed", INT64_MIN, INT64_MAX);
    p.sampling.seed = uint64_t(s);
  }
  for (const char* penalty : {"presence_penalty", "frequency_penalty", "repeat_penalty"})
    if (o.has(penalty)) {
      const double v = o.number(penalty);
      const double neutral = std::string(penalty) == "repeat_penalty" ? 1.0 : 0.0;
      if (v != neutral)
        fail_field(kWhere, penalty, std::to_string(neutral) + " (ember does not apply penalties)", std::to_string(v));
    }
  if (o.has("n")) (void)o.integer("n", 1, 1);  // one choice per request
  if (o.has("ignore_eos")) p.ignore_eos = o.boolean("ignore_eos");
  // logprobs: completions take an integer (the top n), chat a boolean plus top_logprobs.
  if (endpoint == Endpoint::chat_completions) {
    const bool want = o.has("logprobs") && o.boolean("logprobs");
    int top = 0;
    if (o.has("top_logprobs")) {
      top = int(o.integer("top_logprobs", 0, limits.max_top_logprobs));
      if (!want) fail_field(kWhere, "top_logprobs", "logprobs: true beside it", "logprobs absent or false");
    }
    p.top_logprobs = want ? top : -1;
  } else if (o.has("logprobs")) {
    p.top_logprobs = int(o.integer("logprobs", 0, limits.max_top_logprobs));
  } else if (llama && o.has("n_probs")) {
    p.top_logprobs = int(o.integer("n_probs", 0, limits.max_top_logprobs));
  }
}

}  // namespace

std::string error_body(const ApiError& e) {
  json err = {{"message", e.what()}, {"type", e.type}, {"param", nullptr},
              {"code", e.code.empty() ? json(nullptr) : json(e.code)}};
  return json{{"error", err}}.dump();
}

json parse_object(const std::string& body) {
  return checked([&] {
    json j = parse_json_strict(body, kWhere, 16, 1 << 20);
    if (!j.is_object()) fail_field(kWhere, "body", "a JSON object", json_type_name(j));
    return j;
  });
}

CompletionInput parse_completion(const std::string& body, Endpoint endpoint, const ApiLimits& limits) {
  return checked([&] {
    const json raw = parse_object(body);
    const json j = without_nulls(raw);
    StrictObject o(j, "", kWhere);
    CompletionInput in;
    in.endpoint = endpoint;
    if (o.has("model")) in.model = o.string("model", 256);
    else if (endpoint != Endpoint::llama_completion) fail_field(kWhere, "model", "present", "missing");
    if (endpoint == Endpoint::chat_completions) {
      in.messages = read_messages(o, limits);
    } else {
      const char* key = "prompt";
      if (!o.has(key)) fail_field(kWhere, key, "present", "missing");
      const json& pj = j.at(key);
      if (pj.is_string()) {
        in.prompt = o.string(key, limits.max_prompt_bytes);
      } else if (pj.is_array() && !pj.empty() && pj.at(0).is_number_integer()) {
        const json& arr = o.array(key, 1 << 20);
        for (size_t i = 0; i < arr.size(); ++i) {
          if (!arr[i].is_number_integer() || arr[i].get<int64_t>() < 0 || arr[i].get<int64_t>() > INT32_MAX)
            fail_field(kWhere, o.element(key, i), "a token id (integer >= 0)", arr[i].dump());
          in.prompt_ids.push_back(int32_t(arr[i].get<int64_t>()));
        }
      } else if (pj.is_array() && pj.size() == 1 && pj.at(0).is_string()) {
        (void)o.array(key, 1);
        in.prompt = pj.at(0).get<std::string>();
        if (in.prompt->size() > limits.max_prompt_bytes)
          fail_field(kWhere, key, "at most " + std::to_string(limits.max_prompt_bytes) + " bytes", "more");
      } else {
        fail_field(kWhere, key, "a string, [string] or an array of token ids (one prompt per request)",
                   json_type_name(pj) + (pj.is_array() ? " of " + std::to_string(pj.size()) : ""));
      }
      if (in.prompt && in.prompt->empty()) fail_field(kWhere, key, "a non-empty prompt", "\"\"");
      if (endpoint == Endpoint::completions) {
        if (o.has("echo")) in.echo = o.boolean("echo");
        if (o.has("suffix")) fail_field(kWhere, "suffix", "absent (no fill-in-the-middle)", "a suffix");
        if (o.has("best_of")) (void)o.integer("best_of", 1, 1);
      }
      if (endpoint == Endpoint::llama_completion && o.has("return_tokens")) in.return_tokens = o.boolean("return_tokens");
    }
    read_sampling(o, endpoint, limits, in);
    if (o.has("stream")) in.stream = o.boolean("stream");
    if (o.has("stream_options")) {
      StrictObject so = o.object("stream_options");
      if (so.has("include_usage")) in.include_usage = so.boolean("include_usage");
      so.done();
      if (!in.stream) fail_field(kWhere, "stream_options", "stream: true beside it", "stream absent or false");
    }
    in.stop = read_stop(o, j);
    // Accepted for compatibility, with no effect on the output (ember always reuses prefixes,
    // bit-exactly, so llama-server's cache_prompt changes nothing).
    if (o.has("user")) (void)o.string("user", 256);
    if (o.has("cache_prompt")) (void)o.boolean("cache_prompt");
    if (o.has("store")) (void)o.boolean("store");
    if (o.has("service_tier")) (void)o.string("service_tier", 32);
    if (o.has("metadata")) (void)o.object("metadata");
    if (o.has("logit_bias")) {
      (void)o.object("logit_bias");
      if (!j.at("logit_bias").empty()) fail_field(kWhere, "logit_bias", "{} (ember does not bias logits)", "a bias");
    }
    o.done();
    return in;
  });
}

std::string StopFilter::push(const std::string& text) {
  if (stopped_) return "";
  held_ += text;
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of a stop string.
  size_t keep = 0;
  for (const std::string& s : stops_)
    for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k)
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopFilter::flush() {
  if (stopped_) return "";
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace ember::serve
