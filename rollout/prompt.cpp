#include "rollout/prompt.h"

#include <cstdio>
#include <sstream>

#include "data/tasks/task_ops.h"
#include "model/chat_format.h"
#include "model/tokenizer.h"
#include "rollout/edit_blocks.h"

namespace kernelrl {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

const char* kContract =
    "Contract: include \"kernel_abi.h\" and define, with C linkage,\n"
    "  int kernelrl_launch(const kernelrl_args* args, void* stream);\n"
    "returning 0 on success. args->inputs[i] / args->outputs[i] are device pointers in task\n"
    "order, args->dims holds the sizes, args->workspace is 32 MiB of scratch. All work goes on\n"
    "`stream`; no other streams, events, graphs, threads, files, or library GEMM calls.\n";

}  // namespace

std::string describe_task(const TaskSpec& task, const std::string& backend) {
  std::ostringstream s;
  const bool host = backend == "host";
  // The task statement is the op entry's (data/tasks/task_ops.h); the contract is the prompt's.
  s << op_prompt(task, host);
  s << kContract;
  if (host) s << "This is the CPU backend: plain C++, `stream` is null, pointers are host memory.\n";
  return s.str();
}

std::string exemplar_block(size_t index, const std::string& source, double score) {
  char head[96];
  if (score >= 0)
    std::snprintf(head, sizeof head, "Earlier kernel %zu, measured score %.3f:\n", index + 1, score);
  else
    std::snprintf(head, sizeof head, "Earlier kernel %zu:\n", index + 1);
  return head + source + "\n";
}

std::string edit_base_of(const PromptParts& parts) {
  if (parts.completion != "edit") return "";
  if (!parts.previous_verdict.empty()) return parts.previous_code;
  return parts.exemplars.empty() ? "" : parts.exemplars.back().source;
}

std::string edit_base_block(const std::string& source, double score) {
  char head[96];
  if (score >= 0)
    std::snprintf(head, sizeof head, "Kernel to edit, measured score %.3f:\n", score);
  else
    std::snprintf(head, sizeof head, "Kernel to edit:\n");
  return head + source + "\n";
}

std::string device_line(const std::string& device) { return "Target device: " + device + ".\n"; }

std::string speed_aim(const std::string& device) {
  return "Rank 1 of the variants measured at this shape on " + device + ".";
}

std::string speed_annotation(int64_t rank, int64_t of, const std::string& device, double time_us,
                             const std::string& timing, const std::string& reference,
                             double reference_us) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                " %lld measured; device time %.2f us (%s)", static_cast<long long>(of), time_us,
                timing.c_str());
  std::string s = "Rank " + std::to_string(rank) + " of the variants measured at this shape on " +
                  device + "." + buf;
  if (reference_us > 0) {
    std::snprintf(buf, sizeof buf, "; %s %.2f us, speedup %.3fx", reference.c_str(), reference_us,
                  reference_us / time_us);
    s += buf;
  }
  return s + ".";
}

std::string task_instruction(const TaskSpec& task, const PromptParts& parts) {
  std::string s = (parts.device.empty() ? "" : device_line(parts.device)) +
                  describe_task(task, parts.backend);
  s += "Make it as fast as possible while staying correct.";
  if (parts.response_format == "sections")
    s += " First analyse why the earlier kernels scored as they did, then describe your design, "
         "then write the code.";
  if (parts.completion == "edit")
    s += std::string(" Edit the kernel shown: answer with SEARCH/REPLACE blocks (a line ") +
         kEditSearchMarker + ", the exact lines to replace, a line " + kEditDividerMarker +
         ", the new lines, a line " + kEditReplaceMarker + ").";
  return s;
}

std::string build_prompt(const TaskSpec& task, const PromptParts& parts_in) {
  PromptParts parts = parts_in;
  const std::string base = edit_base_of(parts);
  const bool edit = !base.empty();
  if (!edit) parts.completion = "full";  // nothing to edit: a whole kernel
  std::ostringstream p;
  p << kInstructionMarker << task_instruction(task, parts);
  p << "\n" << kContextMarker;
  if (!parts.device.empty()) p << speed_aim(parts.device) << "\n";
  if (!parts.context.empty()) p << parts.context << "\n";
  if (!parts.profile.empty()) p << "Profile of earlier candidates:\n" << parts.profile << "\n";
  const bool revision = !parts.previous_verdict.empty();
  // Edit mode: the best exemplar (the last) is the kernel to edit, shown after the others.
  const size_t shown = edit && !revision ? parts.exemplars.size() - 1 : parts.exemplars.size();
  for (size_t i = 0; i < shown; ++i)
    p << exemplar_block(i, parts.exemplars[i].source, parts.exemplars[i].score);
  if (edit && !revision) p << edit_base_block(base, parts.exemplars.back().score);
  if (revision) {
    p << "Your previous kernel:\n"
      << (parts.previous_code.empty() ? std::string("(no code)") : parts.previous_code) << "\n"
      << "The evaluator's verdict: " << parts.previous_verdict << "\n"
      << (edit ? "Edit it: fix what failed, or make it faster if it passed.\n"
               : "Write a revised kernel: fix what failed, or make it faster if it passed.\n");
  }
  if (parts.prompt_format != "raw") {  // a user turn: ask for code the way chat models answer
    p << (edit ? "Reply with SEARCH/REPLACE blocks only."
               : "Reply with the complete kernel source in one ```cuda code block.");
    return format_prompt(parts.prompt_format, p.str());
  }
  p << (parts.response_format == "sections" ? kAnalysisMarker : kCodeMarker);
  return p.str();
}

ParsedResponse parse_response(const std::string& completion, const std::string& response_format,
                              const std::string& edit_base) {
  ParsedResponse r;
  std::string text = completion;
  size_t end = text.find(kEndMarker);
  if (end != std::string::npos) text = text.substr(0, end);
  std::string code;
  const std::string code_marker = kCodeMarker;
  size_t cm = text.rfind(code_marker);
  if (response_format == "sections") {
    // The prompt opened the analysis section; design and code follow their markers.
    size_t dm = text.find(kDesignMarker);
    if (cm == std::string::npos) {
      r.reason = "format: no " + code_marker + " section in the response";
      r.failure = "format_no_code";
      r.edit_base = edit_base;
      return r;
    }
    r.analysis = trim(text.substr(0, dm != std::string::npos && dm < cm ? dm : cm));
    if (dm != std::string::npos && dm < cm)
      r.design = trim(text.substr(dm + std::string(kDesignMarker).size(),
                                  cm - dm - std::string(kDesignMarker).size()));
    code = text.substr(cm + code_marker.size());
  } else {
    // The prompt ended with the code marker: the completion is the code.
    code = cm != std::string::npos ? text.substr(cm + code_marker.size()) : text;
  }
  if (!edit_base.empty()) {  // edit mode: the section holds blocks (text around them ignored)
    r.edit_base = edit_base;
    EditResult e = apply_edit_completion(edit_base, code);
    if (!e.ok()) {
      r.failure = edit_failure_name(e.failure);
      r.reason = r.failure + ": " + e.reason;
      return r;
    }
    r.code = std::move(e.code);
    r.edit_blocks = static_cast<int64_t>(e.blocks.size());
    r.ok = true;
    return r;
  }
  // Markdown fences (models pretrained elsewhere): keep the last fenced block's body.
  size_t fence_end = code.rfind("```");
  if (fence_end != std::string::npos) {
    size_t fence_begin = code.rfind("```", fence_end == 0 ? 0 : fence_end - 1);
    if (fence_begin != std::string::npos && fence_begin < fence_end) {
      size_t body = code.find('\n', fence_begin);
      if (body != std::string::npos && body < fence_end)
        code = code.substr(body + 1, fence_end - body - 1);
    }
  }
  r.code = trim(code);
  if (r.code.empty()) {
    r.reason = "format: the response holds no code";
    r.failure = "format_no_code";
    return r;
  }
  r.code += "\n";
  r.ok = true;
  return r;
}

}  // namespace kernelrl
