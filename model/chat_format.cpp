#include "model/chat_format.h"

#include "common/error.h"

namespace kernelrl {

const std::vector<std::string>& prompt_formats() {
  static const std::vector<std::string> formats = {"raw", "chatml", "llama3"};
  return formats;
}

std::string format_prompt(const std::string& format, const std::string& user_text) {
  if (format == "raw") return user_text;
  if (format == "chatml")
    return "<|im_start|>user\n" + user_text + "<|im_end|>\n<|im_start|>assistant\n";
  if (format == "llama3")
    return "<|start_header_id|>user<|end_header_id|>\n\n" + user_text +
           "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
  throw UserError("model.prompt_format: expected one of raw, chatml, llama3, got \"" + format +
                  "\"");
}

std::string turn_end(const std::string& format) {
  if (format == "chatml") return "<|im_end|>";
  if (format == "llama3") return "<|eot_id|>";
  return "";
}

}  // namespace kernelrl
