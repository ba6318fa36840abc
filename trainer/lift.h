// The lift experiment's machinery (issue 25): does HGEMM RL make the policy better on shapes it
// never trained on, and does it find kernels the family sweep did not?
//   - speed-annotated pretraining examples from measured family grids (speed_annotated_triplets);
//   - per held-out shape (data.hgemm_heldout, data/tasks/hgemm_split.h), at one sample budget, one
//     prompt and one seed: the best of N samples of the policy before HGEMM RL and after it, the
//     sweep's best family variant and the best exemplar the prompt showed, all evaluated in one
//     evaluator batch (measure_lift), with novelty and a per-shape table;
//   - the summary and the curves by step (lift_summary, lift_curves);
//   - discoveries: RL kernels that beat every family variant measured at their shape,
//     re-verified in a fresh evaluation (verify_discoveries), for the catalog with provenance rl;
//   - issue 39's proof: every sample's class (listed, new_tuple, new_body, or its failure), the
//     controls in the same batch (best-of-N of the pre-RL policy at the RL budget, the family
//     list's best), off-grid shapes and zero-shot prompts, bootstrap intervals and best-of-k
//     curves over seeds (lift_proof).
// Sampling and evaluation go through rollout/ and reward/; the catalog is catalog/'s.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "data/corpus/triplet.h"
#include "data/families.h"
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
// The tokens novelty compares: common/cpp_lexer.h's similarity_tokens (canonical C++ tokens:
// identifiers, pp-numbers, whole punctuators such as `::` and `>>`; a literal's delimiters
// without its contents; no comments).
std::vector<std::string> novelty_tokens(const std::string& source);
// Normalized token edit distance: Levenshtein distance over token lists / the longer length,
// in [0, 1]. Computed exactly below `cap` (distances at or above cap come back as cap: a banded
// computation, O(n·cap·n)).
double token_edit_distance(const std::vector<std::string>& a, const std::vector<std::string>& b,
                           double cap = 1.0);

// A kernel's tokens split into its body and its parameter tuple. Every HGEMM family variant ends
// in an instance block `using Cfg = <family>::Config<args>;` (data/families.cpp instance_block):
// the tuple is the argument tokens (to the matching `>`, nested `<...>` included), and the body
// is every token with each identifier or number of those arguments replaced by "#" (the
// punctuation stays, so `Shape<_128,_64>` and `Shape<#,#>` keep their arity). No `using Cfg`:
// the tuple is empty and the body is the tokens.
struct ParamSplit {
  std::vector<std::string> body;
  std::string tuple;  // the arguments' tokens joined by single spaces ("" = none)
};
ParamSplit split_parameters(const std::vector<std::string>& tokens);

// A sample's class (issue 39). A passing sample is
//   listed     its body is a family variant's body and its tuple is one that family lists
//              (an exact family variant is one of these; so is a listed tuple in a sibling
//              variant's text);
//   new_tuple  its body is a family variant's body, its tuple is not in that family's list;
//   new_body   its body is no family variant's (parameters normalized, then the tokens diffed):
//              body_distance says how far (normalized token edit distance to the nearest family
//              body, capped).
// A failing sample's class is its failure: the evaluator's status name (compile_error,
// wrong_answer, ...), "format" (no code in the response) or "not_evaluated".
struct SampleClass {
  std::string cls;
  std::string family;        // the family whose body it has (listed, new_tuple); the nearest
                             // body's family for new_body
  std::string tuple;         // its parameter tuple (ParamSplit::tuple)
  double body_distance = 0;  // 0 unless new_body
};
bool is_new_class(const std::string& cls);  // new_tuple or new_body

// The family list (lift measure: every HGEMM variant of the evaluator's backend and arch, both
// layouts and accumulations), indexed for classify().
class NoveltyClassifier {
 public:
  explicit NoveltyClassifier(const std::vector<KernelVariant>& variants);
  // The class of a passing sample's source. body_distance is computed below `cap` (capped).
  SampleClass classify(const std::string& source, double cap = 0.5) const;
  size_t variants() const { return variants_; }

 private:
  struct Body {
    std::string family;
    std::vector<std::string> tokens;
    std::unordered_map<std::string, int64_t> bag;
  };
  std::vector<Body> bodies_;                                    // distinct bodies
  std::unordered_map<std::string, size_t> body_index_;          // joined body -> bodies_
  std::set<std::pair<std::string, std::string>> listed_;        // (family, tuple)
  size_t variants_ = 0;
};

// ---- statistics -----------------------------------------------------------------------------
// A bootstrap percentile interval of the mean over items (shapes). Resample b (0..resamples-1)
// draws n items with replacement, draw j of all taken as index splitmix64(seed + c) % n with c
// counting draws from 0 across resamples (common/hash.h); the resample means sorted ascending,
// lo = means[r], hi = means[resamples - 1 - r] with r = llround((1 - level) / 2 * resamples).
// tests/golden/bootstrap_golden.py computes the same in Python. Empty x: n = 0, all 0.
struct Interval {
  double mean = 0, lo = 0, hi = 0;
  int64_t n = 0, resamples = 0;
};
Interval bootstrap_mean(const std::vector<double>& x, int64_t resamples, uint64_t seed,
                        double level = 0.95);

// Best of k samples drawn without replacement from one shape's n samples (speedups, 0 = the
// sample failed): the unbiased estimators over all C(n, k) subsets (as pass@k, Chen et al. 2021,
// eq. 1): pass = 1 - C(n - c, k) / C(n, k) with c passing; combined = E[max] =
// sum_i v_(i) C(i - 1, k - 1) / C(n, k) over the values sorted ascending (i = 1..n), failures
// counting 0; speed = combined / pass, the expected best speedup given that one passed (0 when
// pass is 0). k above n is taken as n.
struct BestOfK {
  double pass = 0, combined = 0, speed = 0;
};
BestOfK best_of_k(std::vector<double> speedups, int64_t k);

// ---- measures -----------------------------------------------------------------------------
struct LiftOptions {
  std::filesystem::path run_dir;  // a run of a job with an hgemm_rl stage
  std::string before;             // checkpoint "stage" or "stage/step_N" of the policy before
                                  // HGEMM RL; "" = the newest of the stage before hgemm_rl
  std::string after;              // the policy after it; "" = the newest of the hgemm_rl stage
  int64_t samples = 16;           // best-of-N budget per policy per shape
  uint64_t seed = 0;              // sampling seed (the same for both policies)
  std::filesystem::path sweep_csv;  // family-sweep CSV naming the sweep's best variant per
                                    // shape; "" (or no row for a shape) = the shape's family
                                    // portfolio (3 per family on a GPU) is evaluated here
  std::string device;             // the CSV's device name ("" = the evaluator's)
  // Which shapes: "heldout" = the job's hash-split held-out grid shapes (data.hgemm_heldout);
  // otherwise a grid file (MxNxK lines, e.g. configs/grids/offgrid_llm.txt). Either way no
  // measured shape may be a training shape of the job or have an RL candidate in the run's
  // store (checked; an error names the shape).
  std::string shapes = "heldout";
  std::string split;              // the rows' split label; "" = grid (heldout) or offgrid (a file)
  // exemplars: the prompt shows the shape's seed variants that passed there, with the score
  // measured there (as RL prompts do); zero_shot: the same seed variants (rollout.seed_grid's
  // pick at the nearest training shape, or round-robin), no score, nothing measured at the shape
  // before sampling.
  std::string prompt_mode = "exemplars";
  // The best-of-N control: the before policy's samples per shape in total, the first `samples`
  // of them being the before arm. -1 = samples + the RL stage's evaluations per training shape
  // (candidates summed over its metrics / training shapes, rounded up): the after arm's budget
  // at a shape, its training amortized; 0 = no control beyond the before arm.
  int64_t best_of_n = -1;
  // The family-list arm: every variant the portfolio offers at the shape, evaluated in the
  // shape's batch (data/family_portfolio.h per_family; 0 = every candidate; -1 = off).
  int family_list = -1;
  // A family sweep CSV over the measured shapes (`kernelrl bench --families all --per-family N`,
  // run beside RL on a spare GPU of the same model): per shape each family's fastest of its
  // list. The arm then times those winners in the shape's batch (a few sources instead of the
  // whole list); a shape without a row falls back to the portfolio (family_list per family).
  std::filesystem::path family_list_csv;
  int64_t max_shapes = 0;         // shapes to measure (taken one size bin after another,
                                  // so a prefix spreads over the bins); 0 = all
  double time_budget_s = 0;       // stop starting shapes after this long; 0 = no limit
  std::vector<std::string> set;   // key.path=value overrides of the run's job (e.g. the reward.*
                                  // timing of the measure where the RL stage timed coarser)
  std::filesystem::path out;      // lift directory (per_shape.jsonl, prompts.jsonl,
                                  // samples.jsonl, rl.json, kernels/, lift.sqlite)
  // all: measure; before: only draw each shape's prompt and sample the before policy
  // (out/prompts.jsonl), so a later call, on another machine, measures with the same prompts.
  std::string phase = "all";
};

// The RL stage's evaluation budget, from the run's metrics.jsonl (out/rl.json).
struct RlBudget {
  int64_t steps = 0;            // RL steps logged
  int64_t candidates = 0;       // evaluations of policy samples, summed over the steps
  int64_t training_shapes = 0;  // the job's HGEMM training split
  double step_s = 0;            // wall seconds of the steps, summed (step_s)
  int64_t per_shape() const {   // evaluations per training shape, rounded up
    return training_shapes > 0 ? (candidates + training_shapes - 1) / training_shapes : 0;
  }
};
RlBudget rl_budget(const std::filesystem::path& run_dir, const std::string& stage,
                   int64_t training_shapes);
nlohmann::json to_json(const RlBudget& b);

// One measured shape's row (also a line of out/per_shape.jsonl). Speedups are each arm's best
// over the reference; 0 = no sample of that arm passed (a pass-rate entry, never a speed).
struct LiftShape {
  std::string task, shape;  // hgemm_MxNxK_nn, "MxNxK"
  int64_t m = 0, n = 0, k = 0;
  std::string layout, acc;
  std::string split = "grid", prompt_mode = "exemplars";
  uint64_t run_seed = 0;  // the run's run.seed (one recipe, several seeds)
  double before = 0, after = 0, sweep = 0, exemplar = 0;
  double best_of_n = 0, family_list = 0;  // the controls (0 also when not measured: see *_samples)
  int64_t before_passed = 0, after_passed = 0, samples = 0;
  int64_t best_of_n_passed = 0, best_of_n_samples = 0;  // the best-of-N control (before included)
  int64_t family_list_variants = 0;                     // variants timed in the family-list arm
  int64_t exemplars_shown = 0;
  // Passing samples by class (SampleClass): novel = new_tuple + new_body.
  int64_t after_novel = 0, before_novel = 0;
  int64_t after_new_tuple = 0, after_new_body = 0, before_new_tuple = 0, before_new_body = 0;
  std::string after_class;                    // the best after-RL kernel's class
  double after_min_distance = 0;              // its body distance (SampleClass::body_distance)
  std::string sweep_variant, family_list_variant;  // the fastest there
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
  double novelty_after = 0, novelty_before = 0;  // novel (new_tuple, new_body) / passing samples
  double mean_best_of_n = 0, mean_family_list = 0;  // the controls' means (0 = none passed)
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

// ---- the proof (issue 39) ------------------------------------------------------------------
// Reads lift directories (one per seed x split x prompt mode: per_shape.jsonl, samples.jsonl,
// rl.json; discoveries.jsonl where `lift promote --discoveries` wrote one) and judges issue 39's
// targets. Per group (split, prompt mode) and seed, per arm (before, after, exemplar, sweep,
// family_list, best_of_n): the pass rate over shapes, the mean best speedup over the shapes where
// the arm passed, and the combined score (the mean with a failed shape counting 0, i.e. pass
// rate x speed). The gain of after RL over a control: per shape where both passed,
// after / control - 1; its mean with a bootstrap interval over those shapes (bootstrap_mean).
// The best non-RL control at a shape is the fastest of {exemplar, best_of_n, sweep} there that
// passed (stricter than the best control's mean). Best-of-k curves for k = 1..max_k from the
// samples (best_of_k; before: its first `samples`, after, and best_of_n's pool).
struct ProofOptions {
  std::vector<std::filesystem::path> lift_dirs;
  int64_t resamples = 10000;   // bootstrap resamples
  uint64_t seed = 0;           // bootstrap seed
  double target_gain = 0.03;   // after over the best control: >= 3 % with the interval above 0
  double target_novel = 0.20;  // share of passing after-RL samples that are new
  double target_discovery = 0.10;  // shapes with a new kernel >= 2 % over the family list
  int64_t target_steps = 200;  // RL steps per seed
  double target_rl_s = 1800;   // within 30 GPU-minutes (the RL stage's step_s summed)
  int64_t min_shapes = 5;      // fewer shapes where both passed: the gain is not measurable
  int64_t max_k = 16;
};
struct ProofReport {
  nlohmann::json summary;    // groups, seeds, arms, gains, targets
  std::string markdown;      // the tables and each target met / missed with its numbers
  std::string curves_csv;    // group,seed,arm,k,pass,combined,speed (means over shapes)
  std::string per_shape_csv; // every row of every lift directory, one line each
};
ProofReport lift_proof(const ProofOptions& options);

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
