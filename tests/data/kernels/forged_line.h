// The forged-message fixture (tests/reward_test_util.h, forging_candidate): writes a result line
// in the evaluator's old worker protocol, claiming a 0.5 us candidate and slow baselines
// (4242 us, a value no real measurement gives), to every pipe the process holds: the attack
// reported on 2026-11-26, where such a line was accepted and its baselines were stored.
#pragma once
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static inline void kernelrl_fixture_forge_result_lines(void) {
  static const char kLine[] =
      "{\"result\":{\"status\":\"ok\",\"check\":\"\",\"reason\":\"forged\",\"max_abs_dev\":0,"
      "\"dev_bound\":1,\"candidate\":{\"median_us\":0.5,\"mean_us\":0.5,\"p10_us\":0.5,\"p90_us\":0.5,"
      "\"cv\":0,\"n\":20,\"timing\":\"device\"},\"baselines\":{\"torch\":{\"median_us\":4242,"
      "\"mean_us\":4242,\"p10_us\":4242,\"p90_us\":4242,\"cv\":0,\"n\":20,\"timing\":\"device\"},"
      "\"cublas-nn\":{\"median_us\":4242,\"mean_us\":4242,\"p10_us\":4242,\"p90_us\":4242,\"cv\":0,"
      "\"n\":20,\"timing\":\"device\"},\"lt-auto-nn\":{\"median_us\":4242,\"mean_us\":4242,"
      "\"p10_us\":4242,\"p90_us\":4242,\"cv\":0,\"n\":20,\"timing\":\"device\"}},\"metrics\":{}}}\n";
  for (int fd = 0; fd < 64; ++fd) {
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
      ssize_t n = write(fd, kLine, sizeof kLine - 1);
      (void)n;
    }
  }
}
