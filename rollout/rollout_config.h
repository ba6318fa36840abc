// RolloutConfig: prompts, contrastive exemplars and sampling, mirrored 1:1 by `rollout:`.
#pragma once

#include <string>

#include "common/config.h"

namespace kernelrl {

struct SamplingConfig {
  double temperature = 1.0;     // softmax temperature
  int64_t top_k = 0;            // 0 = off
  double top_p = 1.0;           // nucleus mass; 1 = off
  int64_t max_new_tokens = 512; // completion budget

  void visit(cfg::Visitor& v) {
    v.field("temperature", temperature, "softmax temperature", cfg::greater_than(0));
    v.field("top_k", top_k, "top-k filter; 0 = off", cfg::at_least(0));
    v.field("top_p", top_p, "nucleus mass; 1 = off", cfg::in_open_closed(0, 1));
    v.field("max_new_tokens", max_new_tokens, "completion budget", cfg::at_least(1));
  }
};

struct RolloutConfig {
  int64_t group_size = 8;          // G completions per prompt
  int64_t prompts_per_step = 4;    // B prompts per step
  int64_t n_exemplars = 2;         // contrastive exemplars in each prompt
  double exemplar_temperature = 1.0;  // τ of the bucket softmax
  int64_t n_buckets = 8;           // score buckets in the exemplar store
  std::string response_format = "code";  // code | sections (analysis, design, code)
  std::string completion = "full";  // full: the policy writes the whole kernel | edit:
                                   // SEARCH/REPLACE blocks against the code the prompt shows
                                   // (the best exemplar; on later turns the previous kernel),
                                   // applied before compiling (rollout/edit_blocks.h)
  int64_t seed_exemplars = 4;      // kernel-family variants evaluated to seed an empty pool
  std::string seed_grid = "";      // HGEMM on a GPU: a family-sweep CSV (e.g.
                                   // docs/data/family_grid_h100.csv); an empty pool is seeded
                                   // with the variants measured best at the nearest training
                                   // shape (rollout/seed_grid.h), evaluated here; "" = variants
                                   // round-robin over the families
  bool reuse_evaluations = true;   // a source already evaluated for the task on this device
                                   // reuses its stored result instead of being re-timed
  int64_t demonstrations = 0;      // per group, completions replaced by the task's best verified
                                   // kernel (off-policy guidance, as LUFFY mixes demonstrations
                                   // into GRPO groups); 0 = pure on-policy GRPO
  int64_t dynamic_sampling_rounds = 0;  // DAPO dynamic sampling: extra sampling rounds per step
                                   // while fewer than prompts_per_step groups have reward
                                   // spread; 0 = off
  int64_t turns = 1;               // multi-turn refinement: turns per trajectory; after each
                                   // turn the policy sees its code and the evaluator's verdict
  double turn_discount = 0.4;      // γ: a turn's return is r_k + γ·r_{k+1} + γ²·r_{k+2} + ...
  int64_t overlap = 0;             // 1: while step t's candidates compile, the policy generates
                                   // step t+1 (one step off-policy: the update's ratio is taken
                                   // against the log-probs of the policy that sampled the rows)
  std::string prompt_device = "";  // the device the HGEMM prompts name, asking for rank 1 at
                                   // the shape, e.g. "NVIDIA H100 80GB HBM3" (the wording of
                                   // `kernelrl lift annotate --device`'s examples, and of the
                                   // pretraining family triplets shown as RL prompts); "" = none
  int64_t probe_samples = 0;       // RL stages: completions per training task in the fixed probe
                                   // taken before the first update and after the last (the same
                                   // prompts and sampling seed both times; trainer/rl_summary.h
                                   // judges learning on it); 0 = off
  SamplingConfig sampling;

  void visit(cfg::Visitor& v) {
    v.field("group_size", group_size, "G completions per prompt", cfg::at_least(1));
    v.field("prompts_per_step", prompts_per_step, "B prompts per step", cfg::at_least(1));
    v.field("n_exemplars", n_exemplars, "contrastive exemplars per prompt", cfg::at_least(0));
    v.field("exemplar_temperature", exemplar_temperature, "τ of the bucket softmax",
            cfg::greater_than(0));
    v.field("n_buckets", n_buckets, "score buckets", cfg::at_least(1));
    v.field("response_format", response_format, "code | sections", {"code", "sections"});
    v.field("completion", completion,
            "full: the whole kernel | edit: SEARCH/REPLACE blocks against the kernel the prompt "
            "shows, applied before compiling",
            {"full", "edit"});
    v.field("seed_exemplars", seed_exemplars, "family variants to seed an empty pool",
            cfg::at_least(0));
    v.field("seed_grid", seed_grid,
            "family-sweep CSV whose best variants at the nearest training shape seed HGEMM pools "
            "(GPU); \"\" = round robin over the families");
    v.field("reuse_evaluations", reuse_evaluations, "reuse stored results of identical sources");
    v.field("demonstrations", demonstrations,
            "per group, completions replaced by the task's best verified kernel; 0 = off",
            cfg::at_least(0));
    v.field("dynamic_sampling_rounds", dynamic_sampling_rounds,
            "DAPO dynamic sampling: extra rounds while groups lack reward spread; 0 = off",
            cfg::at_least(0));
    v.field("turns", turns, "multi-turn refinement: turns per trajectory (1 = single turn)",
            cfg::at_least(1));
    v.field("turn_discount", turn_discount, "γ of a turn's return over later turns",
            cfg::in_closed(0, 1));
    v.field("overlap", overlap,
            "1: generate step t+1 while step t's candidates compile (one step off-policy); 0 = off",
            cfg::in_closed(0, 1));
    v.field("prompt_device", prompt_device,
            "device named in HGEMM prompts, asking for rank 1 at the shape (the speed-annotated "
            "examples' wording); \"\" = none");
    v.field("probe_samples", probe_samples,
            "completions per training task in the before/after-RL probe (same prompts and seeds); "
            "0 = off",
            cfg::at_least(0));
    v.section("sampling", sampling, "sampling parameters");
  }
};

}  // namespace kernelrl
