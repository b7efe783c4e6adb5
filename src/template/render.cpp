// The native renderers: one function per recognised template, each written from that
// template's Jinja source branch for branch (the source is quoted in docs/templates.md and kept
// in tests/template/data/). Only the no-tools paths exist; tools and tool calls are refused when
// the conversation is read.
#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "template/chat_template.h"
#include "util/error.h"

namespace ember::tmpl {
namespace {

// Python's str.isspace() for one code point.
bool python_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Length of the UTF-8 sequence that starts with byte b (1 for a stray byte: never a space).
size_t seq_len(unsigned char b) {
  if (b < 0x80) return 1;
  if ((b >> 5) == 0x6) return 2;
  if ((b >> 4) == 0xE) return 3;
  if ((b >> 3) == 0x1E) return 4;
  return 1;
}

uint32_t decode_at(std::string_view s, size_t i, size_t n) {
  const auto b = [&](size_t k) { return uint32_t(static_cast<unsigned char>(s[i + k])); };
  switch (n) {
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    case 4: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
    default: return b(0);
  }
}

std::string_view strip_char(std::string_view s, char c, bool left, bool right) {
  if (left) while (!s.empty() && s.front() == c) s.remove_prefix(1);
  if (right) while (!s.empty() && s.back() == c) s.remove_suffix(1);
  return s;
}
std::string lstrip_nl(std::string_view s) { return std::string(strip_char(s, '\n', true, false)); }
std::string rstrip_nl(std::string_view s) { return std::string(strip_char(s, '\n', false, true)); }
std::string strip_nl(std::string_view s) { return std::string(strip_char(s, '\n', true, true)); }

// Python's s.split(sep)[-1] and s.split(sep)[0].
std::string after_last(std::string_view s, std::string_view sep) {
  const size_t p = s.rfind(sep);
  return std::string(p == std::string_view::npos ? s : s.substr(p + sep.size()));
}
std::string before_first(std::string_view s, std::string_view sep) {
  return std::string(s.substr(0, s.find(sep)));
}
bool contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

// transformers' tojson filter on a string: json.dumps(s, ensure_ascii=False).
std::string python_json_string(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          static const char* hex = "0123456789abcdef";
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

// strftime_now("%d %b %Y") as Python's datetime.now() gives it in the C locale.
std::string today_date_string() {
  static const char* months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char day[4];
  std::snprintf(day, sizeof day, "%02d", tm.tm_mday);
  return std::string(day) + " " + months[tm.tm_mon] + " " + std::to_string(tm.tm_year + 1900);
}

// Meta Llama 3 (original): every message as header + content|trim + <|eot_id|>, bos_token
// before the first, and the assistant header always (this template ignores
// add_generation_prompt).
std::string render_llama3(const ChatTemplate& t, const std::vector<Message>& m) {
  std::string out;
  for (size_t i = 0; i < m.size(); ++i) {
    if (i == 0) out += t.bos_token;
    out += "<|start_header_id|>" + m[i].role + "<|end_header_id|>\n\n" + python_strip(m[i].content) + "<|eot_id|>";
  }
  return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

// Meta Llama 3.2 Instruct, tools = none.
std::string render_llama32(const ChatTemplate& t, const std::vector<Message>& all, const RenderOptions& o) {
  std::string out = t.bos_token;
  const std::string date = o.date_string ? *o.date_string : today_date_string();
  size_t first = 0;
  std::string system_message;
  if (all[0].role == "system") {
    system_message = python_strip(all[0].content);
    first = 1;
  }
  out += "<|start_header_id|>system<|end_header_id|>\n\n";
  out += "Cutting Knowledge Date: December 2023\n";
  out += "Today Date: " + date + "\n\n";
  out += system_message;
  out += "<|eot_id|>";
  for (size_t i = first; i < all.size(); ++i) {
    const Message& msg = all[i];
    if (!(msg.role == "ipython" || msg.role == "tool")) {
      out += "<|start_header_id|>" + msg.role + "<|end_header_id|>\n\n" + python_strip(msg.content) + "<|eot_id|>";
    } else {
      // `message.content is mapping or message.content is iterable`: a string is iterable in
      // Jinja, so string content goes through tojson.
      out += "<|start_header_id|>ipython<|end_header_id|>\n\n" + python_json_string(msg.content) + "<|eot_id|>";
    }
  }
  if (o.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// The `tool` branch shared by both ChatML templates: consecutive tool messages share one
// user turn.
void chatml_tool(std::string& out, const std::vector<Message>& m, size_t i) {
  if (i == 0 || m[i - 1].role != "tool") out += "<|im_start|>user";
  out += "\n<tool_response>\n" + m[i].content + "\n</tool_response>";
  if (i + 1 == m.size() || m[i + 1].role != "tool") out += "<|im_end|>\n";
}

// Qwen2.5 Instruct, tools = none (and so no assistant tool_calls).
std::string render_qwen25(const std::vector<Message>& m, const RenderOptions& o) {
  std::string out;
  if (m[0].role == "system")
    out += "<|im_start|>system\n" + m[0].content + "<|im_end|>\n";
  else
    out += "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n";
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string& role = m[i].role;
    if (role == "user" || (role == "system" && i != 0) || role == "assistant")
      out += "<|im_start|>" + role + "\n" + m[i].content + "<|im_end|>\n";
    else if (role == "tool")
      chatml_tool(out, m, i);
  }
  if (o.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// Qwen3, tools = none.
std::string render_qwen3(const std::vector<Message>& m, const RenderOptions& o) {
  std::string out;
  if (m[0].role == "system") out += "<|im_start|>system\n" + m[0].content + "<|im_end|>\n";
  // The last user message that is not a wrapped tool response (the "query").
  bool multi_step_tool = true;
  size_t last_query_index = m.size() - 1;
  for (size_t k = m.size(); k-- > 0;) {
    const std::string& c = m[k].content;
    const bool tool_response = c.starts_with("<tool_response>") && c.ends_with("</tool_response>");
    if (multi_step_tool && m[k].role == "user" && !tool_response) {
      multi_step_tool = false;
      last_query_index = k;
    }
  }
  for (size_t i = 0; i < m.size(); ++i) {
    const Message& msg = m[i];
    if (msg.role == "user" || (msg.role == "system" && i != 0)) {
      out += "<|im_start|>" + msg.role + "\n" + msg.content + "<|im_end|>\n";
    } else if (msg.role == "assistant") {
      std::string content = msg.content;
      std::string reasoning;
      if (msg.reasoning_content) {
        reasoning = *msg.reasoning_content;
      } else if (contains(msg.content, "</think>")) {
        content = lstrip_nl(after_last(msg.content, "</think>"));
        reasoning = lstrip_nl(after_last(rstrip_nl(before_first(msg.content, "</think>")), "<think>"));
      }
      // The comparison is loop.index0 > ns.last_query_index, with last_query_index as set.
      if (i > last_query_index && (i + 1 == m.size() || !reasoning.empty()))
        out += "<|im_start|>" + msg.role + "\n<think>\n" + strip_nl(reasoning) + "\n</think>\n\n" + lstrip_nl(content);
      else
        out += "<|im_start|>" + msg.role + "\n" + content;
      out += "<|im_end|>\n";
    } else if (msg.role == "tool") {
      chatml_tool(out, m, i);
    }
  }
  if (o.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (o.enable_thinking && !*o.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace

std::string python_strip(std::string_view s) {
  size_t begin = 0, end = s.size();
  while (begin < end) {
    const size_t n = seq_len(static_cast<unsigned char>(s[begin]));
    if (begin + n > end || !python_space(decode_at(s, begin, n))) break;
    begin += n;
  }
  while (end > begin) {
    size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80 && end - start < 4) --start;
    const size_t n = seq_len(static_cast<unsigned char>(s[start]));
    if (start + n != end || !python_space(decode_at(s, start, n))) break;
    end = start;
  }
  return std::string(s.substr(begin, end - begin));
}

std::string render(const ChatTemplate& t, const std::vector<Message>& messages, const RenderOptions& options) {
  // Each template reads messages[0]; Jinja would raise on an empty list.
  if (messages.empty()) fail_field("chat template " + t.name, "messages", "at least one message", "none");
  switch (t.kind) {
    case TemplateKind::llama3: return render_llama3(t, messages);
    case TemplateKind::llama32: return render_llama32(t, messages, options);
    case TemplateKind::qwen25: return render_qwen25(messages, options);
    case TemplateKind::qwen3: return render_qwen3(messages, options);
  }
  EMBER_CHECK(false);
  return {};
}

}  // namespace ember::tmpl
