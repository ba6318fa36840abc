// The lift experiment's machinery (issue 25): does HGEMM RL make the policy better on shapes it
// never trained on, and does it find kernels the family sweep did not?
//   - speed-annotated pretraining examples from measured family grids (speed_annotated_triplets);
//   - per held-out shape (data.hgemm_heldout, data/tasks/hgemm_split.h), at one sample budget, one
//     prompt and one seed: the best of N samples of the policy before HGEMM RL and after it, the
//     sweep's best family variant and the best exemplar the prompt showed, all evaluated in one
//     evaluator batch (measure_lift), with novelty and a per-shape table;
//   - the summary and the curves by step (lift_summary, lift_curves);
//   - discoveries: RL kernels that beat every family variant measured at their shape,
//     re-verified in a fresh evaluation (verify_discoveries), for the catalog with provenance rl.
// Sampling and evaluation go through rollout/ and reward/; the catalog is catalog/'s.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "data/corpus/triplet.h"
#include "data/speed_annotation.h"
#include "reward/result_store.h"

namespace kernelrl {

// ---- speed-annotated pretraining examples -------------------------------------------------
// One triplet per measured kernel of every shape: the instruction is the RL prompt's for that
// shape with the device named (rollout.prompt_device), the context the kernel's annotation
// (rollout/prompt.h speed_annotation: its rank among the kernels measured at the shape, its
// device time and the reference's), the code the kernel. Shapes with `holdout` set are left out.
// Tags: annotated, gpu|host, hgemm, layout_*, acc_*, rank_<r>.
std::vector<Triplet> speed_annotated_triplets(const std::vector<MeasuredShape>& shapes,
                                              const std::string& backend,
                                              const std::string& reference);

// ---- novelty ------------------------------------------------------------------------------
// The tokens novelty compares: data/corpus/minhash.h's code_tokens (identifiers, numbers, single
// punctuation) of the source with comments and string literals blanked.
std::vector<std::string> novelty_tokens(const std::string& source);
// Normalized token edit distance: Levenshtein distance over token lists / the longer length,
// in [0, 1]. Computed exactly below `cap` (distances at or above cap come back as cap: a banded
// computation, O(n·cap·n)).
double token_edit_distance(const std::vector<std::string>& a, const std::vector<std::string>& b,
                           double cap = 1.0);

// ---- measures -----------------------------------------------------------------------------
struct LiftOptions {
  std::filesystem::path run_dir;  // a run of a job with an hgemm_rl stage
  std::string before;             // checkpoint "stage" or "stage/step_N" of the policy before
                                  // HGEMM RL; "" = the newest of the stage before hgemm_rl
  std::string after;              // the policy after it; "" = the newest of the hgemm_rl stage
  int64_t samples = 16;           // best-of-N budget per policy per shape
  uint64_t seed = 0;              // sampling seed (the same for both policies)
  std::filesystem::path sweep_csv;  // family-sweep CSV naming the sweep's best variant per
                                    // shape; "" = the shape's family variants are evaluated here
  std::string device;             // the CSV's device name ("" = the evaluator's)
  double novelty_threshold = 0.1; // a passing sample is novel when its token edit distance to
                                  // every family variant of the task is >= this
  int64_t max_shapes = 0;         // held-out shapes to measure (taken one size bin after another,
                                  // so a prefix spreads over the bins); 0 = all
  double time_budget_s = 0;       // stop starting shapes after this long; 0 = no limit
  std::vector<std::string> set;   // key.path=value overrides of the run's job (e.g. the reward.*
                                  // timing of the measure where the RL stage timed coarser)
  std::filesystem::path out;      // lift directory (per_shape.jsonl, prompts.jsonl,
                                  // samples.jsonl, kernels/, lift.sqlite)
  // all: measure; before: only draw each shape's prompt and sample the before policy
  // (out/prompts.jsonl), so a later call, on another machine, measures with the same prompts.
  std::string phase = "all";
};

// One held-out shape's row (also a line of out/per_shape.jsonl).
struct LiftShape {
  std::string task, shape;  // hgemm_MxNxK_nn, "MxNxK"
  int64_t m = 0, n = 0, k = 0;
  std::string layout, acc;
  // Best speedup over the reference (0 = none passed) and pass counts out of `samples`.
  double before = 0, after = 0, sweep = 0, exemplar = 0;
  int64_t before_passed = 0, after_passed = 0, samples = 0;
  int64_t after_novel = 0, before_novel = 0;  // passing samples that are novel
  double after_min_distance = 1;              // the best after-RL kernel's distance to the families
  std::string sweep_variant;                  // the sweep's best variant there
  std::string after_kernel;                   // file of the best after-RL kernel (under out/)
  std::string after_hash;                     // its evaluator hash
  int64_t after_step = -1;                    // the after checkpoint's step
  std::string reference;                      // lt-auto (gpu) | torch (host)
};
nlohmann::json to_json(const LiftShape& s);
LiftShape lift_shape_from_json(const nlohmann::json& j);

// Measures every held-out shape not yet in out/per_shape.jsonl (resumable) and returns all rows.
// Per shape: the prompt (exemplars drawn from the shape's family variants, evaluated here, as RL
// seeds a pool) and the before policy's N samples come from out/prompts.jsonl when an earlier
// call (phase before) wrote them; then the after policy's N samples with the same prompt and
// seed; then one evaluator batch of both sides, the sweep's best variant (named by sweep_csv, or
// the shape's family portfolio) and the exemplars the prompt showed. Every sample's verdict
// (status, speedup, hash; the after side's code) goes to out/samples.jsonl, a line per shape.
std::vector<LiftShape> measure_lift(const LiftOptions& options);

struct LiftSummary {
  int64_t shapes = 0, samples = 0;
  double mean_before = 0, mean_after = 0, mean_sweep = 0, mean_exemplar = 0;  // best-of-N means
  double share_after_ge_1 = 0, share_before_ge_1 = 0;  // shapes with a best >= 1.0x
  double share_after_beats_sweep = 0, share_after_beats_exemplar = 0;
  double share_after_beats_sweep_2pct = 0;  // after >= 1.02 x sweep
  // Shapes where no sweep variant passed (not measured, failed or timed out there): they count
  // in the denominators of the shares against the sweep but never as beaten.
  int64_t sweep_missing = 0;
  double novelty_after = 0, novelty_before = 0;  // novel / passing samples
  double lift = 0;                  // mean_after / mean_before - 1
  int64_t small_shapes = 0;         // held-out shapes below 2^27
  double mean_after_small = 0;      // their best-of-N mean after RL
};
LiftSummary lift_summary(const std::vector<LiftShape>& rows);
nlohmann::json to_json(const LiftSummary& s);
// The per-shape table and the summary in Markdown (the targets marked met / missed).
std::string format_lift(const std::vector<LiftShape>& rows, const LiftSummary& s);

// The RL stage's curves by step from a run's metrics.jsonl: step, reward_mean,
// sampled_correct_rate, best_speedup (CSV text, one line per step of `stage`).
std::string lift_curves_csv(const std::filesystem::path& run_dir, const std::string& stage);

// ---- discoveries --------------------------------------------------------------------------
struct Discovery {
  StoredResult fresh;     // the re-verification's evaluation (a fresh store, nothing reused)
  double sweep_speedup;   // the sweep's best variant, timed in the same fresh evaluation
  std::string run, stage;
  int64_t step = -1;
  // With a family list (family_list >= 0): how many variants of the sweep variant's family were
  // timed beside it, and the fastest of them (0 / "" without one).
  int64_t family_variants = 0;
  double family_best_speedup = 0;
  std::string family_best_variant;
};
// The measured rows' after-RL kernels that beat the sweep's best variant by `margin` (1.02:
// 2 %), evaluated again in a fresh evaluator (store out/verify.sqlite recreated, reuse off)
// beside that variant; those that still beat it by the margin come back. With family_list >= 0
// the same evaluation also times the sweep variant's family as the portfolio lists it at that
// shape (data/family_portfolio.h, per_family = family_list; 0 = every candidate it offers:
// hgemm_small's whole grid, the curated lists of hgemm_wgmma and hgemm_cutlass), and a
// kernel must beat the fastest of those by the margin too: the sweep measures a few variants
// per family, and a kernel that only matches one it left out is no discovery (issue 25,
// docs/history/2026-11-27-sweep-headroom-issue25.md).
std::vector<Discovery> verify_discoveries(const LiftOptions& options,
                                          const std::vector<LiftShape>& rows, double margin,
                                          int family_list = -1);

}  // namespace kernelrl
