#include "data/tasks/task.h"

#include "common/error.h"

namespace kernelrl {

std::string task_kind_name(TaskKind kind) {
  return kind == TaskKind::hgemm ? "hgemm" : "general";
}

TaskKind parse_task_kind(const std::string& name) {
  if (name == "hgemm") return TaskKind::hgemm;
  if (name == "general") return TaskKind::general;
  throw UserError("task kind \"" + name + "\": expected hgemm or general");
}

}  // namespace kernelrl
