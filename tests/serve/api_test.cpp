// The request parser of the server's API (serve/api.h): what OpenAI's and llama-server's
// clients send is read, everything else is a 400 naming the field; and the stop filter.
#include <gtest/gtest.h>

#include "serve/api.h"

namespace ember::serve {
namespace {

std::string refusal(const std::string& body, Endpoint ep = Endpoint::completions) {
  try {
    parse_completion(body, ep);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400) << body;
    return e.what();
  }
  return "";
}

TEST(Api, ReadsAnOpenAICompletionRequest) {
  const CompletionInput in = parse_completion(
      R"({"model":"m","prompt":"Hello","max_tokens":7,"temperature":0.5,"top_p":0.9,"top_k":40,)"
      R"("seed":-3,"stop":["\n","END"],"logprobs":2,"stream":true,"stream_options":{"include_usage":true},)"
      R"("user":"u","n":1,"presence_penalty":0,"frequency_penalty":null,"logit_bias":{}})",
      Endpoint::completions);
  EXPECT_EQ(in.model, "m");
  EXPECT_EQ(*in.prompt, "Hello");
  EXPECT_EQ(in.params.max_tokens, 7);
  EXPECT_EQ(in.params.sampling.temperature, 0.5f);
  EXPECT_EQ(in.params.sampling.top_p, 0.9f);
  EXPECT_EQ(in.params.sampling.top_k, 40);
  EXPECT_EQ(in.params.sampling.seed, uint64_t(-3));
  EXPECT_EQ(in.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_EQ(in.params.top_logprobs, 2);
  EXPECT_TRUE(in.stream);
  EXPECT_TRUE(in.include_usage);
}

TEST(Api, ReadsChatMessagesAndTokenIdPrompts) {
  const CompletionInput chat = parse_completion(
      R"({"model":"m","messages":[{"role":"developer","content":"be brief"},)"
      R"({"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],)"
      R"("logprobs":true,"top_logprobs":3,"max_completion_tokens":9})",
      Endpoint::chat_completions);
  ASSERT_EQ(chat.messages.size(), 2u);
  EXPECT_EQ(chat.messages[0].role, "system");
  EXPECT_EQ(chat.messages[1].content, "ab");
  EXPECT_EQ(chat.params.top_logprobs, 3);
  EXPECT_EQ(chat.params.max_tokens, 9);
  EXPECT_EQ(chat.params.sampling.temperature, 1.0f) << "OpenAI's default temperature";
  const CompletionInput ids = parse_completion(R"({"model":"m","prompt":[1,2,3]})", Endpoint::completions);
  EXPECT_EQ(ids.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  const CompletionInput llama = parse_completion(R"({"prompt":"x","n_predict":-1,"n_probs":2})",
                                                 Endpoint::llama_completion);
  EXPECT_EQ(llama.params.max_tokens, 0) << "n_predict -1: until the context ends";
  EXPECT_EQ(llama.params.top_logprobs, 2);
  EXPECT_TRUE(parse_completion(R"({"prompt":"x","return_tokens":true})", Endpoint::llama_completion).return_tokens);
  EXPECT_NE(refusal(R"({"model":"m","prompt":"x","return_tokens":true})").find("return_tokens"), std::string::npos)
      << "an OpenAI route has no such field";
}

TEST(Api, RefusesWhatItCannotHonourNamingTheField) {
  EXPECT_NE(refusal("{bad"), "");
  EXPECT_NE(refusal("[1]").find("a JSON object"), std::string::npos);
  EXPECT_NE(refusal(R"({"prompt":"a"})").find("model"), std::string::npos);
  EXPECT_NE(refusal(R"({"model":"m","prompt":"a","bogus":1})").find("bogus"), std::string::npos);
  EXPECT_NE(refusal(R"({"model":"m","prompt":"a","max_tokens":"7"})").find("max_tokens"), std::string::npos);
  EXPECT_NE(refusal(R"({"model":"m","prompt":"a","max_tokens":0})").find("max_tokens"), std::string::npos);
  EXPECT_NE(refusal(R"({"model":"m","prompt":"a","temperature":3})").find("temperature"), std::string::npos);
  EXPECT_NE(refusal(R"({"model":"m","prompt":"a","n":2})").find("n"), std::string::npos);
  EXPECT_NE(refusal(R"({"model":"m","prompt":"a","presence_penalty":0.5})").find("penalties"), std::string::npos);
  EXPECT_NE(refusal(R"({"model":"m","prompt":["a","b"]})").find("one prompt per request"), std::string::npos);
  EXPECT_NE(refusal(R"({"model":"m","prompt":""})").find("non-empty"), std::string::npos);
  EXPECT_NE(refusal(R"({"model":"m","prompt":"a","stop":["a","b","c","d","e"]})").find("stop"), std::string::npos);
  EXPECT_NE(refusal(R"({"model":"m","prompt":"a","stream_options":{"include_usage":true}})").find("stream"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"model":"m","prompt":"a","logit_bias":{"5":1}})").find("logit_bias"), std::string::npos);
  EXPECT_NE(refusal(R"({"model":"m","messages":[]})", Endpoint::chat_completions).find("messages"), std::string::npos);
  EXPECT_NE(refusal(R"({"model":"m","messages":[{"role":"tool","content":"x"}]})", Endpoint::chat_completions)
                .find("role"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"model":"m","messages":[{"role":"user","content":"x"}],"top_logprobs":2})",
                    Endpoint::chat_completions)
                .find("top_logprobs"),
            std::string::npos);
  EXPECT_NE(refusal("{\"model\":\"m\",\"prompt\":\"a\xff\"}"), "") << "invalid UTF-8";
  std::string deep(200, '[');
  EXPECT_NE(refusal(deep), "") << "nesting is bounded";
}

TEST(Api, ErrorBodyHasOpenAIsShape) {
  const auto j = nlohmann::json::parse(error_body(ApiError(404, "invalid_request_error", "no", "model_not_found")));
  EXPECT_EQ(j.at("error").at("message"), "no");
  EXPECT_EQ(j.at("error").at("type"), "invalid_request_error");
  EXPECT_EQ(j.at("error").at("code"), "model_not_found");
  EXPECT_TRUE(j.at("error").at("param").is_null());
}

TEST(StopFilter, HoldsBackPossibleStartsAndCutsAtTheFirstStop) {
  StopFilter f({"END", "\n\n"});
  EXPECT_EQ(f.push("Hello E"), "Hello ");
  EXPECT_EQ(f.push("N"), "");
  EXPECT_EQ(f.push("x"), "ENx") << "not a stop after all: released";
  EXPECT_EQ(f.push(" and E"), " and ");
  EXPECT_EQ(f.push("ND more"), "");
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(f.push("later"), "");
  EXPECT_EQ(f.flush(), "");
  StopFilter g({"\n\n"});
  EXPECT_EQ(g.push("a\n"), "a");
  EXPECT_EQ(g.flush(), "\n") << "the held tail comes out at the end";
  StopFilter none({});
  EXPECT_EQ(none.push("abc"), "abc");
}

}  // namespace
}  // namespace ember::serve
