// `kernelrl train --nproc N`: starts N ranks of the same command on this host, the way
// `torchrun --standalone --nproc-per-node N` would (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT=<a free port>), and watches them: when a
// rank dies or fails, it prints one line naming the rank and how it ended, stops the others
// (SIGTERM, then SIGKILL after a grace period) and returns non-zero. Ranks die with it
// (PR_SET_PDEATHSIG). Multi-node jobs use torchrun; this is the one-host convenience.
#pragma once

#include <string>
#include <vector>

namespace kernelrl {

// Runs `args` (args[0]: the executable) as `nproc` ranks; returns the job's exit code: 0 when
// every rank exited 0, else the first failing rank's exit code (128 + signal when killed).
int launch_local_ranks(int nproc, const std::vector<std::string>& args, double grace_s = 10.0);

}  // namespace kernelrl
