// Task suites: the general suite loads (>= 40 tasks, a held-out split), bad YAML names the file
// and key, the HGEMM grids have the sizes, every task's LibTorch reference runs on the
// CPU and agrees with an independent check, and the host family variants (compiled with g++,
// loaded with dlopen, called through kernelrl_launch) match the references.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <cmath>
#include <fstream>
#include <set>

#include "common/error.h"
#include "data/families.h"
#include "data/tasks/task_ops.h"
#include "data/tasks/task_suite.h"
#include "test_util.h"

namespace kernelrl {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;
using testing::write_text;

const std::string kSuite = std::string(KERNELRL_SOURCE_DIR) + "/configs/tasks/general.yaml";

TEST(TaskSuite, GeneralSuiteHasFortyTasksAndAHeldOutSplit) {
  auto tasks = load_task_suite(kSuite);
  EXPECT_GE(tasks.size(), 40u);
  auto held = select_split(tasks, true), train = select_split(tasks, false);
  EXPECT_GE(held.size(), 5u);
  EXPECT_EQ(held.size() + train.size(), tasks.size());
  std::set<std::string> cats;
  for (const auto& t : tasks) {
    EXPECT_EQ(t.kind, TaskKind::general);
    cats.insert(find_op(t.op)->category);
    EXPECT_THAT(t.description, HasSubstr("inputs[0] = "));
    EXPECT_LE(general_task_dims(t).size(), 8u);
  }
  EXPECT_EQ(cats.size(), 7u);
  // Host shapes are smaller than the GPU shapes, task by task.
  auto host = load_task_suite(kSuite, "host");
  ASSERT_EQ(host.size(), tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    int64_t g = 1, h = 1;
    for (auto d : tasks[i].inputs[0].shape) g *= d;
    for (auto d : host[i].inputs[0].shape) h *= d;
    EXPECT_LT(h, g) << tasks[i].name;
  }
}

std::string suite_error(const std::string& yaml) {
  ScratchDir dir;
  write_text(dir / "s.yaml", yaml);
  try {
    load_task_suite(dir / "s.yaml");
  } catch (const UserError& e) {
    std::string m = e.what();
    return m.substr(m.find("s.yaml"));
  }
  return "<no error>";
}

TEST(TaskSuite, ErrorsNameFileAndKeyPath) {
  const std::string ok = "{name: r, op: relu, sizes: {N: 8}, host_sizes: {N: 4}}";
  EXPECT_EQ(suite_error("tasks: [" + ok + "]"), "<no error>");
  EXPECT_THAT(suite_error("tasks: [{name: r, op: nope, sizes: {N: 8}, host_sizes: {N: 4}}]"),
              HasSubstr("s.yaml: tasks[0].op: unknown op \"nope\""));
  EXPECT_THAT(suite_error("tasks: [" + ok + ", {name: q, op: relu, size: {N: 8}}]"),
              HasSubstr("s.yaml: tasks[1].size: unknown key"));
  EXPECT_THAT(suite_error("tasks: [{name: r, op: layernorm, sizes: {B: 2}, host_sizes: {B: 1, D: "
                          "2}, params: {eps: 1.0e-5}}]"),
              HasSubstr("s.yaml: tasks[0].sizes.D: missing"));
  EXPECT_THAT(suite_error("tasks: [{name: r, op: relu, sizes: {N: 8, M: 2}, host_sizes: {N: 4}}]"),
              HasSubstr("s.yaml: tasks[0].sizes.M: not a size of op relu"));
  EXPECT_THAT(suite_error("tasks: [{name: r, op: elu, sizes: {N: 8}, host_sizes: {N: 4}}]"),
              HasSubstr("s.yaml: tasks[0].params: missing"));
  EXPECT_THAT(suite_error("tasks: [" + ok + ", " + ok + "]"),
              HasSubstr("tasks[1].name: duplicate"));
  EXPECT_THAT(suite_error("tasks: [{name: r, op: relu, sizes: {N: -3}, host_sizes: {N: 4}}]"),
              HasSubstr("tasks[0].sizes.N: expected a positive integer"));
  EXPECT_THAT(suite_error("task: []"), HasSubstr("s.yaml: tasks: expected a list"));
}

TEST(TaskSuite, HgemmGrids) {
  auto full = hgemm_grid("full");
  EXPECT_EQ(full.size(), 1000u);
  std::set<std::string> names;
  for (const auto& t : full) names.insert(t.name);
  EXPECT_EQ(names.size(), 1000u);
  EXPECT_TRUE(names.count("hgemm_12288x64x16384_nn"));
  auto small = hgemm_grid("small");
  ASSERT_EQ(small.size(), 27u);
  for (const auto& t : small)
    for (int64_t d : {t.m, t.n, t.k}) EXPECT_TRUE(d == 256 || d == 4096 || d == 16384);
  auto llm = hgemm_grid("llm");
  EXPECT_EQ(llm.size(), 30u);
  for (const auto& t : llm) {
    EXPECT_EQ(t.m % 64 + t.n % 64 + t.k % 64, 0) << t.name;
    EXPECT_EQ(t.inputs[0].shape, (std::vector<int64_t>{t.m, t.k}));
  }
  // The files in configs/tasks hold the same grids.
  for (const std::string name : {"full", "small", "llm"}) {
    auto from_file =
        hgemm_grid(std::string(KERNELRL_SOURCE_DIR) + "/configs/tasks/hgemm_" + name + ".txt");
    auto built_in = hgemm_grid(name);
    ASSERT_EQ(from_file.size(), built_in.size()) << name;
    for (size_t i = 0; i < built_in.size(); ++i) EXPECT_EQ(from_file[i].name, built_in[i].name);
  }
  ScratchDir dir;
  write_text(dir / "g.txt", "# shapes\n64x128x256\n128x64x64 tn f16  # comment\n");
  auto g = hgemm_grid((dir / "g.txt").string());
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[1].name, "hgemm_128x64x64_tn_acc16");
  EXPECT_EQ(g[1].inputs[1].shape, (std::vector<int64_t>{64, 64}));  // B stored N x K
  write_text(dir / "bad.txt", "64x128x256\n64 by 64\n");
  try {
    hgemm_grid((dir / "bad.txt").string());
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("bad.txt:2: expected `MxNxK"));
  }
  EXPECT_THROW(hgemm_grid("nonexistent-grid"), UserError);
}

// The op entries (data/tasks/task_ops.h): one HGEMM entry, every general op complete and
// written by a general family, names unique, and the kind names parse back.
TEST(TaskOps, EveryEntryIsCompleteAndListedOnce) {
  std::set<std::string> names, general_families;
  for (const auto& f : kernel_families())
    if (f.kind == TaskKind::general) general_families.insert(f.name);
  int hgemm = 0;
  for (const auto& op : all_ops()) {
    EXPECT_TRUE(names.insert(op.name).second) << op.name << " listed twice";
    EXPECT_EQ(find_op(op.name), &op);
    EXPECT_NE(op.reference, nullptr) << op.name;
    EXPECT_FALSE(op.inputs.empty()) << op.name;
    EXPECT_EQ(op.outputs.size(), 1u) << op.name;
    if (op.kind == TaskKind::hgemm) {
      ++hgemm;
      EXPECT_EQ(&hgemm_op(), &op);
      EXPECT_TRUE(op.prompt_names_device);
      continue;
    }
    EXPECT_TRUE(general_families.count(op.category)) << op.name << ": " << op.category;
    // Every general op has variants on both backends from its family's grid.
    std::vector<double> params(op.params.size(), 0.5);
    for (const std::string be : {"cuda", "host"})
      EXPECT_FALSE(general_family_variants(op.category, be, op.name, params).empty())
          << op.name << " on " << be;
  }
  EXPECT_EQ(hgemm, 1);
  EXPECT_GE(names.size(), 48u);
  for (TaskKind k : {TaskKind::hgemm, TaskKind::general})
    EXPECT_EQ(parse_task_kind(task_kind_name(k)), k);
  EXPECT_THROW(parse_task_kind("gemm"), UserError);
  EXPECT_EQ(find_op("no_such_op"), nullptr);
}

// HGEMM goes through the same entry path as the general ops: its inputs are still A [M,K] and
// B ([K,N] nn, [N,K] tn) drawn in that order from the seed (fp32 normal rounded to fp16, as an
// independent generator gives them), also for a TaskSpec built by hand without tensors.
TEST(TaskOps, HgemmInputsAndReferenceFollowTheTaskVariables) {
  TaskSpec t;  // kind hgemm by default, no inputs listed
  t.m = 64;
  t.n = 96;
  t.k = 32;
  t.layout = "tn";
  auto in = make_inputs(t, 11, at::kCPU);
  ASSERT_EQ(in.size(), 2u);
  at::Generator gen = at::detail::createCPUGenerator(11);
  at::Tensor a = at::randn({64, 32}, gen, at::TensorOptions().dtype(at::kFloat)).to(at::kHalf);
  at::Tensor b = at::randn({96, 32}, gen, at::TensorOptions().dtype(at::kFloat)).to(at::kHalf);
  EXPECT_TRUE(at::equal(in[0], a));
  EXPECT_TRUE(at::equal(in[1], b));
  // The reference: fp32 products of A and B^T (B stored N x K), rounded to fp16.
  at::Tensor want = at::zeros({64, 96}, at::kFloat);
  auto af = a.to(at::kFloat), bf = b.to(at::kFloat);
  for (int64_t kk = 0; kk < 32; ++kk)
    want += af.index({at::indexing::Slice(), kk}).unsqueeze(1) *
            bf.index({at::indexing::Slice(), kk}).unsqueeze(0);
  auto ref = reference_outputs(t, in);
  ASSERT_EQ(ref.size(), 1u);
  EXPECT_EQ(ref[0].scalar_type(), at::kHalf);
  EXPECT_LE((ref[0].to(at::kFloat) - want.to(at::kHalf).to(at::kFloat)).abs().max().item<double>(),
            0.0625);
  EXPECT_EQ(op_shape(t), "64x96x32");
  EXPECT_THAT(op_prompt(t, /*host=*/false), HasSubstr("KxN stored column-major"));
}

// A family variant's triplet tags read back (the pretraining stage picks HGEMM ones by them).
TEST(TaskOps, FamilyTagsReadBackWhatVariantTripletWrote) {
  KernelVariant h;
  for (const auto& v : hgemm_family_variants("hgemm_host"))
    if (v.layout == "tn" && v.acc == "f16") h = v;
  ASSERT_FALSE(h.name.empty());
  auto f = family_tags(variant_triplet(h));
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, TaskKind::hgemm);
  EXPECT_EQ(f->family, "hgemm_host");
  EXPECT_EQ(f->backend, "host");
  EXPECT_EQ(f->layout, "tn");
  EXPECT_EQ(f->acc, "f16");
  auto g = general_family_variants("softmax", "cuda", "softmax_rows", {});
  ASSERT_FALSE(g.empty());
  auto fg = family_tags(variant_triplet(g[0]));
  ASSERT_TRUE(fg.has_value());
  EXPECT_EQ(fg->kind, TaskKind::general);
  EXPECT_EQ(fg->op, "softmax_rows");
  Triplet plain;
  plain.tags = {"kernel", "cuda"};
  EXPECT_FALSE(family_tags(plain).has_value());
}

// Independent checks of a few references (formulas written out elementwise).
TEST(TaskSuite, EveryReferenceRunsOnTheCpuWithTheDeclaredShapes) {
  for (const auto& t : load_task_suite(kSuite, "host")) {
    auto in = make_inputs(t, 7, at::kCPU);
    ASSERT_EQ(in.size(), t.inputs.size()) << t.name;
    for (size_t i = 0; i < in.size(); ++i)
      EXPECT_EQ(std::vector<int64_t>(in[i].sizes().begin(), in[i].sizes().end()), t.inputs[i].shape)
          << t.name;
    auto again = make_inputs(t, 7, at::kCPU);
    EXPECT_TRUE(at::equal(in[0], again[0])) << t.name << ": same seed, same values";
    auto out = reference_outputs(t, in);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(std::vector<int64_t>(out[0].sizes().begin(), out[0].sizes().end()),
              t.outputs[0].shape)
        << t.name;
    EXPECT_EQ(out[0].scalar_type(), t.outputs[0].dtype == "i64" ? at::kLong : at::kFloat) << t.name;
    if (out[0].is_floating_point()) {
      EXPECT_TRUE(at::isfinite(out[0]).all().item<bool>()) << t.name;
    }
    if (t.op == "softmax_rows") {
      EXPECT_TRUE(at::allclose(out[0].sum(1), at::ones({out[0].size(0)}), 1e-5, 1e-5));
    }
    if (t.op == "leaky_relu") {
      float x = in[0][3].item<float>(), y = out[0][3].item<float>();
      EXPECT_FLOAT_EQ(y, x > 0 ? x : 0.01f * x);
    }
    if (t.op == "layernorm") {
      auto row = in[0][1];
      double mean = row.mean().item<double>(), var = row.var(/*unbiased=*/false).item<double>();
      double want =
          (row[5].item<double>() - mean) / std::sqrt(var + 1e-5) * in[1][5].item<double>() +
          in[2][5].item<double>();
      EXPECT_NEAR(out[0][1][5].item<double>(), want, 1e-4);
    }
    if (t.op == "scatter_add_rows") {
      double total = in[0].sum().item<double>();
      EXPECT_NEAR(out[0].sum().item<double>(), total, 1e-2);
    }
  }
  auto h = hgemm_task(64, 128, 64, "tn");
  auto in = make_inputs(h, 1, at::kCPU);
  auto c = reference_outputs(h, in)[0];
  double want = 0;
  for (int k = 0; k < 64; ++k) want += in[0][3][k].item<double>() * in[1][5][k].item<double>();
  EXPECT_NEAR(c[3][5].item<double>(), want, 0.02 + 1e-3 * std::abs(want));
}

// ---- host family variants against the references --------------------------------------------
using LaunchFn = int (*)(const void*, void*);

struct Library {
  void* handle = nullptr;
  ~Library() {
    if (handle) dlclose(handle);
  }
};

// Compiles sources into one shared library: the preprocessor lines each source starts with
// (each distinct block once), then the rest of each source in a namespace of its own with
// kernelrl_launch renamed kernelrl_launch_<i> (each variant carries only its own code of the
// family's names, data/families_source.cpp).
void compile_host(const std::vector<std::string>& sources, const std::filesystem::path& dir,
                  Library& lib) {
  std::string heads, rests;
  std::set<std::string> seen;
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::string& s = sources[i];
    size_t at = 0;  // past the leading blank and preprocessor lines
    while (at < s.size() && (s[at] == '\n' || s[at] == '#')) {
      const size_t nl = s.find('\n', at);
      at = nl == std::string::npos ? s.size() : nl + 1;
    }
    if (seen.insert(s.substr(0, at)).second) heads += s.substr(0, at);
    rests += "namespace v" + std::to_string(i) + " {\n#define kernelrl_launch kernelrl_launch_" +
             std::to_string(i) + "\n" + s.substr(at) + "#undef kernelrl_launch\n}\n";
  }
  const std::string tu = heads + rests;
  write_text(dir / "all.cpp", tu);
  std::string cmd =
      "g++ -std=c++17 -O1 -fPIC -shared -Wall -Wextra -Werror -Wno-unused-function -I " +
      std::string(KERNELRL_SOURCE_DIR) + "/kernels -o " + (dir / "all.so").string() + " " +
      (dir / "all.cpp").string();
  auto r = testing::run_command(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  lib.handle = dlopen((dir / "all.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib.handle, nullptr) << dlerror();
}

struct Args {  // the layout of kernelrl_args (kernels/kernel_abi.h)
  const void* inputs[8];
  int n_inputs;
  void* outputs[4];
  int n_outputs;
  int64_t dims[8];
  int n_dims;
  void* workspace;
  size_t workspace_bytes;
};

TEST(HostFamilies, EveryGeneralTaskHasAHostVariantMatchingItsReference) {
  auto tasks = load_task_suite(kSuite, "host");
  std::vector<std::string> sources;
  std::vector<std::string> names;
  for (const auto& t : tasks) {
    auto vs = variants_for_task(t, "host");
    ASSERT_FALSE(vs.empty()) << t.name;
    const auto& v = vs.back();  // the blocked variant where there are several
    sources.push_back(v.source);
    names.push_back(v.name);
  }
  ScratchDir dir;
  Library lib;
  compile_host(sources, dir.path(), lib);
  if (::testing::Test::HasFatalFailure()) return;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const TaskSpec& t = tasks[i];
    auto fn = reinterpret_cast<LaunchFn>(
        dlsym(lib.handle, ("kernelrl_launch_" + std::to_string(i)).c_str()));
    ASSERT_NE(fn, nullptr);
    auto in = make_inputs(t, 11 + i, at::kCPU);
    auto ref = reference_outputs(t, in)[0];
    auto out = at::empty_like(ref);
    if (out.is_floating_point())
      out.fill_(std::nan(""));
    else
      out.fill_(-7);  // poison
    Args a{};
    for (size_t k = 0; k < in.size(); ++k) a.inputs[k] = in[k].data_ptr();
    a.n_inputs = static_cast<int>(in.size());
    a.outputs[0] = out.data_ptr();
    a.n_outputs = 1;
    auto dims = general_task_dims(t);
    for (size_t k = 0; k < dims.size(); ++k) a.dims[k] = dims[k];
    a.n_dims = static_cast<int>(dims.size());
    ASSERT_EQ(fn(&a, nullptr), 0) << names[i];
    auto o = out.to(at::kDouble), r = ref.to(at::kDouble);
    // Metric: max over elements of |out - ref| - (atol + rtol |ref|); must be <= 0.
    double excess = ((o - r).abs() - (t.atol + t.rtol * r.abs())).max().item<double>();
    EXPECT_LE(excess, 0.0) << names[i] << " on " << t.name << ": max |out-ref| "
                           << (o - r).abs().max().item<double>();
  }
}

TEST(HostFamilies, HostHgemmMatchesTheReferenceForBothLayouts) {
  std::vector<std::string> sources;
  std::vector<KernelVariant> picked;
  for (const auto& v : hgemm_family_variants("hgemm_host"))
    if (v.acc == "f32") {
      picked.push_back(v);
      sources.push_back(v.source);
    }
  ASSERT_EQ(picked.size(), 4u);  // 2 layouts x 2 tile sizes
  ScratchDir dir;
  Library lib;
  compile_host(sources, dir.path(), lib);
  if (::testing::Test::HasFatalFailure()) return;
  for (size_t i = 0; i < picked.size(); ++i) {
    auto t = hgemm_task(128, 192, 320, picked[i].layout);
    auto fn = reinterpret_cast<LaunchFn>(
        dlsym(lib.handle, ("kernelrl_launch_" + std::to_string(i)).c_str()));
    ASSERT_NE(fn, nullptr);
    auto in = make_inputs(t, 5, at::kCPU);
    auto ref = reference_outputs(t, in)[0];
    auto out = at::full_like(ref, std::nan(""));
    Args a{};
    a.inputs[0] = in[0].data_ptr();
    a.inputs[1] = in[1].data_ptr();
    a.n_inputs = 2;
    a.outputs[0] = out.data_ptr();
    a.n_outputs = 1;
    a.dims[0] = t.m;
    a.dims[1] = t.n;
    a.dims[2] = t.k;
    a.n_dims = 3;
    ASSERT_EQ(fn(&a, nullptr), 0);
    auto o = out.to(at::kDouble), r = ref.to(at::kDouble);
    // Both sides round an fp32 sum to fp16: they may differ by one fp16 ulp (2^-10 relative).
    double excess = ((o - r).abs() - (1e-3 + 2e-3 * r.abs())).max().item<double>();
    EXPECT_LE(excess, 0.0) << picked[i].name;
    a.dims[0] = 100;  // not a multiple of 64: refused
    EXPECT_NE(fn(&a, nullptr), 0);
  }
}

}  // namespace
}  // namespace kernelrl
