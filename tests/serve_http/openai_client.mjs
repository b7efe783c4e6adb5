// The official OpenAI Node client against a running `ember serve` (started by test_serve.py):
// completions and chat, plain and streamed, and the streamed text must equal the plain text.
// Usage: node openai_client.mjs BASE_URL MODEL [API_KEY]   prints one JSON line of results.
import OpenAI from "openai";

const [baseURL, model, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: apiKey || "none", maxRetries: 0, timeout: 60_000 });
const prompt = "Once upon a time, there was a little dog named Max. Max liked to";
const out = {};

const plain = await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0, logprobs: 1 });
out.completion = plain.choices[0].text;
out.completion_finish = plain.choices[0].finish_reason;
out.completion_logprobs = plain.choices[0].logprobs.token_logprobs;
out.system_fingerprint = plain.system_fingerprint;
out.usage = plain.usage;

let streamed = "";
let finish = null;
const stream = await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0, stream: true });
for await (const chunk of stream) {
  for (const c of chunk.choices) {
    streamed += c.text;
    if (c.finish_reason) finish = c.finish_reason;
  }
}
out.completion_streamed = streamed;
out.completion_streamed_finish = finish;

const messages = [{ role: "user", content: "Tell me about Max the dog." }];
const chat = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0.7, seed: 42 });
out.chat = chat.choices[0].message.content;
out.chat_role = chat.choices[0].message.role;
let chatStreamed = "";
const chatStream = await client.chat.completions.create({
  model, messages, max_tokens: 16, temperature: 0.7, seed: 42, stream: true,
  stream_options: { include_usage: true },
});
for await (const chunk of chatStream) {
  for (const c of chunk.choices) chatStreamed += c.delta.content ?? "";
  if (chunk.usage) out.chat_stream_usage = chunk.usage;
}
out.chat_streamed = chatStreamed;

try {
  await client.completions.create({ model: "no-such-model", prompt, max_tokens: 2 });
  out.unknown_model = "accepted";
} catch (e) {
  out.unknown_model = { status: e.status, code: e.code, type: e.type };
}
console.log(JSON.stringify(out));
