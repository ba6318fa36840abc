// Prompt formats: how a checkpoint expects a user's request and where its answer ends, so an
// instruct model sees the turn layout it was tuned on (ModelConfig.prompt_format).
//   raw     the text as is (policies pretrained here, base checkpoints)
//   chatml  <|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n   (Qwen2/2.5/3 instruct)
//   llama3  <|start_header_id|>user<|end_header_id|>\n\n{text}<|eot_id|>
//           <|start_header_id|>assistant<|end_header_id|>\n\n          (Llama 3 instruct; the
//           tokenizer's bos, <|begin_of_text|>, comes first as for every prompt)
// No system turn is written (the templates' optional defaults are left out).
#pragma once

#include <string>
#include <vector>

namespace kernelrl {

const std::vector<std::string>& prompt_formats();  // raw, chatml, llama3
// `user_text` as the user turn of `format`, followed by the opening of the assistant's turn.
std::string format_prompt(const std::string& format, const std::string& user_text);
// The special token that ends the assistant's turn in `format` ("" for raw).
std::string turn_end(const std::string& format);

}  // namespace kernelrl
