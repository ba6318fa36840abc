#include "reward/worker/candidate.h"

#include <chrono>
#include <cstring>
#include <optional>
#include <sstream>
#include <thread>

#include "reward/worker/task_kind.h"
#include "reward/worker/timing.h"

#ifdef KERNELRL_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime.h>

#include "reward/worker/cu_driver.h"
#include "reward/worker/graph_cuda.h"
#endif

namespace kernelrl::worker {

namespace {

bool inside(const Range& r, uint64_t a) { return a >= r.first && a < r.second; }
bool within(const Range& outer, const Range& in) { return in.first >= outer.first && in.second <= outer.second; }

std::string key_of(const kernelrl_args& a) { return args_json(a).dump(); }

}  // namespace

std::string hex_address(uint64_t a) {
  std::ostringstream s;
  s << "0x" << std::hex << a;
  return s.str();
}

#ifdef KERNELRL_HAVE_CUDA
struct Candidate::Module {
  CandidateModule module;
  explicit Module(const std::string& so) : module(so) {}
};
struct Candidate::Prepared {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  ~Prepared() {
    if (exec) cu().cuGraphExecDestroy(exec);
    if (graph) cu().cuGraphDestroy(graph);
  }
};
#else
struct Candidate::Module {};
struct Candidate::Prepared {};
#endif

Candidate::Candidate(Backend& be, Runner& runner, const std::string& so, double timeout_s)
    : be_(be), runner_(runner), timeout_s_(timeout_s) {
#ifdef KERNELRL_HAVE_CUDA
  auto load_module = [&] {
    ProfScope p("fatbin_load");
    try {
      module_ = std::make_unique<Module>(so);
    } catch (const std::exception& e) {
      fail("load", e.what(), "load_error");
    }
  };
  if (be_.gpu() && runner_.capture_mode() == "shim") {
    // Shim capture (cudart_shim.h): the device code first, so that the runner, which has no
    // CUDA context, can ask this context about its kernels while it captures.
    load_module();
    static const nlohmann::json device_table = shim_device_table();  // one device per worker
    ProfScope p("runner_start_load");
    runner_.start(so, timeout_s_, device_table,
                  [this](const nlohmann::json& q) { return answer_shim_query(q, module_->module); });
    return;
  }
#endif
  {
    ProfScope p("runner_start_load");
    runner_.start(so, timeout_s_);
  }
#ifdef KERNELRL_HAVE_CUDA
  if (be_.gpu()) load_module();
#endif
}

Candidate::~Candidate() {
  runner_.stop();
#ifdef KERNELRL_HAVE_CUDA
  if (be_.gpu()) {
    // Its kernels may still run (a check failed mid-flight): unload only once the stream is
    // idle, within the call timeout. A kernel still running after that (a hang) leaves its
    // module loaded; the worker is replaced anyway.
    auto stream = static_cast<cudaStream_t>(be_.stream());
    const auto t0 = std::chrono::steady_clock::now();
    cudaError_t e;
    while ((e = cudaStreamQuery(stream)) == cudaErrorNotReady &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < timeout_s_)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (e != cudaSuccess) {
      for (auto& [key, p] : prepared_) p.release();  // leaked with the module, on purpose
      module_.release();
      return;
    }
  }
#endif
  prepared_.clear();  // graphs before the module whose functions they launch
  module_.reset();
}

void Candidate::release_runner() {
  released_ = true;
  runner_.stop();
}

// What a description may do with the call's memory: write only into the call's outputs and
// workspace (memset/memcpy nodes: exact ranges, so a write elsewhere is a verdict here). A
// parameter word or copy source inside another call's buffer is only a suspect (PeerWord):
// returned for the harness to test by running the call alone.
std::vector<PeerWord> Candidate::check_image(const GraphImage& g, const CallBuffers& b) const {
  std::vector<Range> own = b.inputs;
  own.insert(own.end(), b.outputs.begin(), b.outputs.end());
  own.push_back(b.workspace);
  auto is_own = [&](uint64_t a) {
    for (const auto& r : own)
      if (inside(r, a)) return true;
    return false;
  };
  std::vector<PeerWord> found;
  for (const auto& w : g.parameter_words()) {
    if (is_own(w.word)) continue;
    for (size_t p = 0; p < peers_.size(); ++p)
      if (inside(peers_[p], w.word)) {
        const auto& n = g.nodes[w.node];
        found.push_back({n.type == NodeImage::Type::kernel ? n.kernel.name : "memcpy", w.node, w.offset, w.word, p});
        break;
      }
  }
  for (const auto& w : g.written_ranges()) {
    bool ok = within(b.workspace, w);
    for (const auto& r : b.outputs) ok = ok || within(r, w);
    if (ok) continue;
    for (const auto& r : b.inputs)
      if (within(r, w)) fail("input_modified", "the call's captured work writes into an input (memset/memcpy)");
    for (const auto& p : peers_)
      if (inside(p, w.first))
        fail("cross_call_work", "the call's captured work writes into another call's buffer", "reward_hack");
    fail("out_of_bounds_write", "the call's captured work writes outside its outputs and workspace (memset/memcpy at " +
                                    hex_address(w.first) + ")");
  }
  return found;
}

std::vector<PeerWord> Candidate::peer_words(const kernelrl_args& a) const {
  auto it = peer_words_.find(key_of(a));
  return it == peer_words_.end() ? std::vector<PeerWord>{} : it->second;
}

Candidate::Prepared& Candidate::prepared(const kernelrl_args& a, const CallBuffers& b) {
  const std::string key = key_of(a);
  auto it = prepared_.find(key);
  if (it != prepared_.end()) return *it->second;
  if (released_) throw std::runtime_error("a candidate call with arguments that were not prepared before timing");
  auto p = std::make_unique<Prepared>();
#ifdef KERNELRL_HAVE_CUDA
  std::optional<ProfScope> phase(std::in_place, "capture_msg");
  GraphImage image = runner_.capture(a, timeout_s_);
  phase.emplace("graph_rebuild");
  ++captures_;
  if (auto words = check_image(image, b); !words.empty()) peer_words_[key] = std::move(words);
  try {
    p->graph = build_graph(image, module_->module);
  } catch (const NotReplayable& e) {
    fail(e.check, e.what(), e.check == "device_state" ? "reward_hack" : "wrong_answer");
  }
  const CUresult r = cu().cuGraphInstantiateWithFlags(&p->exec, p->graph, 0);
  if (r != CUDA_SUCCESS) {
    const char* n = nullptr;
    cu().cuGetErrorName(r, &n);
    fail("launch_failed", std::string("the captured work cannot be instantiated: ") + (n ? n : "?"), "launch_error");
  }
#else
  (void)b;
#endif
  return *prepared_.emplace(key, std::move(p)).first->second;
}

void Candidate::prepare(const kernelrl_args& a, const CallBuffers& b) {
  if (be_.gpu()) prepared(a, b);
}

void Candidate::call(const kernelrl_args& a, const CallBuffers& b) {
  if (!be_.gpu()) {
    runner_.call({a}, timeout_s_);
    return;
  }
#ifdef KERNELRL_HAVE_CUDA
  Prepared& p = prepared(a, b);
  auto stream = static_cast<cudaStream_t>(be_.stream());
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess)
    throw LaunchFailure("cannot query the stream's capture state");
  if (status == cudaStreamCaptureStatusActive) {
    // Inside the timing engine's capture: the call's graph becomes a child node in order.
    auto cs = reinterpret_cast<CUstream>(stream);
    CUstreamCaptureStatus st{};
    CUgraph g = nullptr;
    const CUgraphNode* deps = nullptr;
    const CUgraphEdgeData* edges = nullptr;
    size_t n = 0;
    CUgraphNode child = nullptr;
    if (cu().cuStreamGetCaptureInfo(cs, &st, nullptr, &g, &deps, &edges, &n) != CUDA_SUCCESS ||
        cu().cuGraphAddChildGraphNode(&child, g, deps, n, p.graph) != CUDA_SUCCESS ||
        cu().cuStreamUpdateCaptureDependencies(cs, &child, nullptr, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES) != CUDA_SUCCESS)
      throw CaptureFailure("cannot add the candidate's captured work to the timing graph");
    return;
  }
  const CUresult r = cu().cuGraphLaunch(p.exec, reinterpret_cast<CUstream>(stream));
  if (r != CUDA_SUCCESS) {
    const char* n = nullptr;
    cu().cuGetErrorName(r, &n);
    throw LaunchFailure(std::string("launching the candidate's captured work failed: ") + (n ? n : "?"));
  }
#endif
}

void Candidate::call_many(const std::vector<kernelrl_args>& as, const std::vector<CallBuffers>& bs) {
  if (!be_.gpu()) {
    runner_.call(as, timeout_s_ * static_cast<double>(std::max<size_t>(1, as.size())));
    return;
  }
  for (size_t i = 0; i < as.size(); ++i) call(as[i], bs.at(i));
}

}  // namespace kernelrl::worker
