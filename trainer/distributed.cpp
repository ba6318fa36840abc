#include "trainer/distributed.h"

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef KERNELRL_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <thread>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/hash.h"
#include "common/log.h"
#include "model/device.h"

namespace kernelrl::dist {

namespace {

std::string first_line(const std::string& s) {
  auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

// An integer environment variable, or `fallback` when unset; throws naming it when malformed.
int env_int(const char* name, int fallback, int lo, int hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(v, &end, 10);
  if (errno || *end || x < lo || x > hi)
    throw UserError(std::string(name) + "=\"" + v + "\" is not an integer in [" +
                    std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<int>(x);
}

Group* g_group = nullptr;
LaunchEnv g_env;  // the session's launch environment (node rank and count)

}  // namespace

LaunchEnv read_launch_env() {
  LaunchEnv env;
  const bool has_rank = std::getenv("RANK") && *std::getenv("RANK");
  env.world_size = env_int("WORLD_SIZE", 1, 1, 1 << 20);
  if (!has_rank) {
    if (env.world_size > 1)
      throw UserError("WORLD_SIZE=" + std::to_string(env.world_size) +
                      " but RANK is not set; launch with torchrun or `kernelrl train --nproc N`");
    return env;
  }
  env.rank = env_int("RANK", 0, 0, 1 << 20);
  if (env.rank >= env.world_size)
    throw UserError("RANK=" + std::to_string(env.rank) + " is not below WORLD_SIZE=" +
                    std::to_string(env.world_size) + " (ranks are 0 .. WORLD_SIZE-1)");
  env.local_world_size = env_int("LOCAL_WORLD_SIZE", env.world_size, 1, env.world_size);
  env.local_rank = env_int("LOCAL_RANK", env.rank, 0, 1 << 20);
  if (env.local_rank >= env.local_world_size)
    throw UserError("LOCAL_RANK=" + std::to_string(env.local_rank) +
                    " is not below LOCAL_WORLD_SIZE=" + std::to_string(env.local_world_size));
  // Nodes: torchrun's GROUP_RANK / GROUP_WORLD_SIZE, else nodes of LOCAL_WORLD_SIZE ranks.
  const int default_nnodes = (env.world_size + env.local_world_size - 1) / env.local_world_size;
  env.nnodes = env_int("GROUP_WORLD_SIZE", default_nnodes, 1, env.world_size);
  env.node_rank = env_int("GROUP_RANK", env.rank / env.local_world_size, 0, 1 << 20);
  if (env.node_rank >= env.nnodes)
    throw UserError("GROUP_RANK=" + std::to_string(env.node_rank) +
                    " is not below the job's node count " + std::to_string(env.nnodes) +
                    " (GROUP_WORLD_SIZE, or WORLD_SIZE / LOCAL_WORLD_SIZE)");
  if (const char* id = std::getenv("TORCHELASTIC_RUN_ID")) env.run_id = id;
  if (const char* f = std::getenv("TORCHELASTIC_ERROR_FILE")) env.error_file = f;
  if (env.world_size == 1) return env;
  const char* addr = std::getenv("MASTER_ADDR");
  if (!addr || !*addr)
    throw UserError("MASTER_ADDR is not set (RANK=" + std::to_string(env.rank) + " of WORLD_SIZE=" +
                    std::to_string(env.world_size) + " needs the rendezvous host)");
  env.master_addr = addr;
  if (!std::getenv("MASTER_PORT") || !*std::getenv("MASTER_PORT"))
    throw UserError("MASTER_PORT is not set (the rendezvous port on MASTER_ADDR)");
  env.master_port = env_int("MASTER_PORT", 0, 1, 65535);
  const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  env.agent_store = agent && std::string(agent) == "True";
  env.restart_count = env_int("TORCHELASTIC_RESTART_COUNT", 0, 0, 1 << 20);
  return env;
}

// ---- collectives shared by every backend ----------------------------------------------------

std::vector<std::string> Group::all_gather_bytes(const std::string& bytes) {
  auto sizes = all_gather(torch::tensor({static_cast<int64_t>(bytes.size())}, torch::kInt64));
  sizes = sizes.reshape({-1}).cpu();
  const int64_t max_size = std::max<int64_t>(1, sizes.max().item<int64_t>());
  auto buf = torch::zeros({max_size}, torch::kUInt8);
  std::memcpy(buf.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  auto all = all_gather(buf).cpu().contiguous();
  std::vector<std::string> out;
  for (int r = 0; r < size(); ++r)
    out.emplace_back(reinterpret_cast<const char*>(all[r].data_ptr<uint8_t>()),
                     static_cast<size_t>(sizes[r].item<int64_t>()));
  return out;
}

std::string Group::broadcast_bytes(const std::string& bytes, int root) {
  auto n = torch::tensor({static_cast<int64_t>(bytes.size())}, torch::kInt64);
  broadcast(n, root);
  const int64_t len = n.item<int64_t>();
  auto buf = torch::zeros({std::max<int64_t>(1, len)}, torch::kUInt8);
  if (rank() == root) std::memcpy(buf.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  broadcast(buf, root);
  return std::string(reinterpret_cast<const char*>(buf.data_ptr<uint8_t>()),
                     static_cast<size_t>(len));
}

void Group::check_same(const std::string& what, uint64_t value) {
  auto all = all_gather(torch::tensor({static_cast<int64_t>(value)}, torch::kInt64)).reshape({-1});
  std::string bad;
  for (int r = 1; r < size(); ++r)
    if (all[r].item<int64_t>() != all[0].item<int64_t>())
      bad += (bad.empty() ? "" : ", ") + std::to_string(r);
  if (!bad.empty())
    throw PeerFailure(what + " differ between rank 0 and rank(s) " + bad +
                      " (a data-parallel run must keep every rank's copy identical)");
}

Group* group() {
  return g_group;
}
int rank() {
  return g_group ? g_group->rank() : 0;
}
int world_size() {
  return g_group ? g_group->size() : 1;
}
int node_rank() {
  return g_group ? g_env.node_rank : 0;
}
int nnodes() {
  return g_group ? g_env.nnodes : 1;
}

uint64_t tensors_hash(const std::vector<torch::Tensor>& tensors) {
  uint64_t h = 1469598103934665603ull;
  for (const auto& t : tensors) {
    auto c = t.detach().to(torch::kCPU).contiguous();
    h = fnv1a(std::string_view(static_cast<const char*>(c.data_ptr()), c.nbytes()), h);
  }
  return h;
}

// ---- the c10d group ------------------------------------------------------------------------

namespace {

using Clock = std::chrono::steady_clock;

class C10dGroup final : public Group {
 public:
  C10dGroup(c10::intrusive_ptr<c10d::Backend> backend, std::string name, int rank, int size,
            int local_rank, torch::Device aux, std::function<void(const std::string&)> on_failure)
      : backend_(std::move(backend)),
        name_(std::move(name)),
        rank_(rank),
        size_(size),
        local_rank_(local_rank),
        aux_(aux),
        on_failure_(std::move(on_failure)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  const std::string& backend() const override { return name_; }

  void all_reduce_sum(torch::Tensor& t) override { all_reduce_sum_async(t)->wait(); }

  std::unique_ptr<Pending> all_reduce_sum_async(torch::Tensor& t) override {
    std::vector<at::Tensor> v{t};
    c10d::AllreduceOptions o;
    o.reduceOp = c10d::ReduceOp::SUM;
    return std::make_unique<Work>(this, "all_reduce",
                                  start("all_reduce", [&] { return backend_->allreduce(v, o); }));
  }

  torch::Tensor all_gather(const torch::Tensor& t) override {
    auto in = t.to(aux_).contiguous();
    std::vector<std::vector<at::Tensor>> outs(1);
    for (int r = 0; r < size_; ++r) outs[0].push_back(torch::empty_like(in));
    std::vector<at::Tensor> ins{in};
    Work(this, "all_gather", start("all_gather", [&] { return backend_->allgather(outs, ins); }))
        .wait();
    return torch::stack(outs[0]).to(t.device());
  }

  void broadcast(torch::Tensor& t, int root) override {
    auto buf = t.to(aux_).contiguous();
    std::vector<at::Tensor> v{buf};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    Work(this, "broadcast", start("broadcast", [&] { return backend_->broadcast(v, o); })).wait();
    if (!buf.is_same(t)) t.copy_(buf);
  }

  void barrier() override {
    auto one = torch::ones({1}, torch::TensorOptions().dtype(torch::kFloat32).device(aux_));
    all_reduce_sum(one);
    if (aux_.is_cuda()) one.cpu();  // waits for the NCCL stream too
  }

  void shutdown() {
    try {
      backend_->shutdown();
    } catch (const std::exception&) {
    }
  }

 private:
  class Work final : public Pending {
   public:
    Work(C10dGroup* g, const char* op, c10::intrusive_ptr<c10d::Work> w)
        : g_(g), op_(op), w_(std::move(w)) {}
    void wait() override {
      if (!w_) return;
      try {
        w_->wait();
      } catch (const std::exception& e) {
        g_->failed(op_, e.what());
      }
      w_.reset();
    }

   private:
    C10dGroup* g_;
    const char* op_;
    c10::intrusive_ptr<c10d::Work> w_;
  };

  template <class F>
  c10::intrusive_ptr<c10d::Work> start(const char* op, F&& f) {
    try {
      return f();
    } catch (const std::exception& e) {
      failed(op, e.what());
    }
    return {};
  }

  [[noreturn]] void failed(const char* op, const std::string& what) {
    const std::string msg =
        std::string(op) + " failed on rank " + std::to_string(rank_) + ": " + first_line(what);
    on_failure_(msg);  // lets the watchdog name a dead peer first (it may end the process)
    throw PeerFailure(msg);
  }

  c10::intrusive_ptr<c10d::Backend> backend_;
  std::string name_;
  int rank_, size_, local_rank_;
  torch::Device aux_;
  std::function<void(const std::string&)> on_failure_;
};

}  // namespace

// ---- the session: store, backend, watchdog -------------------------------------------------

struct Session::Impl {
  LaunchEnv env;
  DistConfig config;
  c10::intrusive_ptr<c10d::Store> store;     // the job's keys (prefix kernelrl/)
  c10::intrusive_ptr<c10d::Store> hb_store;  // the watchdog's own connection
  std::unique_ptr<C10dGroup> group;
  std::thread watchdog;
  std::atomic<bool> stop{false};
  std::atomic<bool> failed{false};
  std::atomic<bool> suspect{false};  // a collective failed: a silent peer is named sooner
  std::mutex mu;

  std::string store_host() const {
    if (!env.agent_store) return "rank 0";
    return env.nnodes > 1 ? "node 0's torchrun agent" : "the torchrun agent";
  }
  std::string key(const char* what, int r) const {
    return std::string(what) + "/" + std::to_string(r);
  }

  // "rank 1 of 2", and on several nodes where it ran ("node 1 on host-b, pid 4242"), as the
  // rank wrote it into the store at its start; without the store, the number alone.
  std::string who(int p) {
    std::string s = "rank " + std::to_string(p) + " of " + std::to_string(env.world_size);
    if (env.nnodes <= 1) return s;
    try {
      if (hb_store->check({key("where", p)})) {
        auto v = hb_store->get(key("where", p));
        s += " (" + std::string(v.begin(), v.end()) + ")";
      }
    } catch (const std::exception&) {
    }
    return s;
  }

  // torchrun's agent reads a failed rank's message from TORCHELASTIC_ERROR_FILE (the JSON of
  // torch.distributed.elastic's error handler: {"message": ..., "timestamp": ...}) and prints it
  // in its failure summary, which is what a user of a multi-node job reads first.
  void write_error_file(const std::string& line) const {
    if (env.error_file.empty()) return;
    const nlohmann::json j = {
        {"message", line}, {"timestamp", std::to_string(static_cast<int64_t>(std::time(nullptr)))}};
    if (FILE* f = std::fopen(env.error_file.c_str(), "w")) {
      const std::string text = j.dump();
      std::fwrite(text.data(), 1, text.size(), f);
      std::fclose(f);
    }
  }

  // One clear line, then the process ends: the job cannot go on without the peer.
  [[noreturn]] void fatal(const std::string& msg) {
    const std::string line = "rank " + std::to_string(env.rank) + " stopping: " + msg +
                             " (continue the run with --resume)";
    std::fprintf(stderr, "kernelrl: error: %s\n", line.c_str());
    std::fflush(stderr);
    write_error_file(line);
    std::_Exit(3);
  }

  void watch() {
    const auto start = Clock::now();
    std::vector<int64_t> last(env.world_size, -1);
    std::vector<Clock::time_point> seen(env.world_size, start);
    std::vector<bool> done(env.world_size, false);
    while (!stop.load()) {
      // After a failed collective a live peer still ticks every second: 3 s of silence then
      // is enough to name it.
      const auto timeout = std::chrono::duration<double>(
          suspect.load() ? std::min(3.0, config.heartbeat_s) : config.heartbeat_s);
      try {
        hb_store->add(key("hb", env.rank), 1);
        for (int p = 0; p < env.world_size; ++p) {
          if (p == env.rank || done[p]) continue;
          if (hb_store->check({key("exit", p)})) {
            auto v = hb_store->get(key("exit", p));
            std::string msg(v.begin(), v.end());
            if (msg == "ok") {
              done[p] = true;
              continue;
            }
            fatal(who(p) + " failed: " + msg);
          }
          const int64_t n = hb_store->add(key("hb", p), 0);
          const auto now = Clock::now();
          if (n != last[p]) {
            last[p] = n;
            seen[p] = now;
          } else if (now - seen[p] > timeout) {
            fatal(who(p) + " stopped responding (no heartbeat for " +
                  std::to_string(
                      static_cast<int>(std::chrono::duration<double>(now - seen[p]).count())) +
                  " s: killed, crashed or hung)");
          }
        }
      } catch (const std::exception& e) {
        if (stop.load()) return;
        fatal(store_host() + " is gone: the rendezvous store at " + env.master_addr + ":" +
              std::to_string(env.master_port) + " stopped answering (" + first_line(e.what()) +
              ")");
      }
      for (int i = 0; i < 10 && !stop.load(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  // A collective failed: a dead or failed peer is the usual reason; give the watchdog the time
  // it needs to say which one (it ends the process), else let the caller throw.
  void on_collective_failure(const std::string& msg) {
    KRL_LOG(info) << msg << "; asking the watchdog which rank failed";
    suspect = true;
    const auto until = Clock::now() + std::chrono::duration<double>(config.heartbeat_s + 3);
    while (Clock::now() < until && !stop.load())
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
};

Session::Session(const LaunchEnv& env, const DistConfig& config, const std::string& run_device)
    : impl_(std::make_unique<Impl>()) {
  if (env.world_size <= 1) return;
  auto& m = *impl_;
  // Rank 0 speaks for the job; the others only warn (their log files say the same).
  if (env.rank != 0 && log::level() < log::Level::warn) log::set_level(log::Level::warn);
  m.env = env;
  m.config = config;
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(config.timeout_s * 1000));

  // The rank's device: cuda:LOCAL_RANK when the run uses CUDA (resolve_device then returns it).
  const bool cuda = run_device == "cuda" || (run_device == "auto" && cuda_device_count() > 0);
  if (cuda) {
    const int n = cuda_device_count();
    if (env.local_rank >= n)
      throw UserError("LOCAL_RANK=" + std::to_string(env.local_rank) + " but this host shows " +
                      std::to_string(n) + " CUDA device(s); start at most one rank per GPU");
#ifdef KERNELRL_C10D_NCCL
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(env.local_rank));
#endif
    set_default_cuda_index(env.local_rank);
  }
  std::string backend = config.backend;
  if (backend == "auto") backend = cuda ? "nccl" : "gloo";
#ifndef KERNELRL_C10D_NCCL
  if (backend == "nccl")
    throw NotAvailableError(
        "run.dist.backend: nccl needs a KernelRL build with CUDA and nccl.h; "
        "use run.dist.backend=gloo");
#endif
  if (backend == "nccl" && !cuda)
    throw UserError(
        "run.dist.backend: nccl needs run.device cuda (or auto with a GPU); use gloo on CPUs");

  // Rendezvous: torchrun's agent hosts the store when it says so; else rank 0 does.
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(env.master_port);
  so.isServer = !env.agent_store && env.rank == 0;
  so.numWorkers = static_cast<size_t>(env.world_size);
  so.waitWorkers = false;
  so.timeout = timeout;
  so.multiTenant = true;
  c10::intrusive_ptr<c10d::Store> tcp;
  try {
    tcp = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
  } catch (const std::exception& e) {
    throw UserError("rank " + std::to_string(env.rank) + ": cannot reach the rendezvous store at " +
                    env.master_addr + ":" + std::to_string(env.master_port) + " (" +
                    first_line(e.what()) + ")");
  }
  const std::string prefix = "kernelrl/" + std::to_string(env.restart_count);
  m.store = c10::make_intrusive<c10d::PrefixStore>(prefix, tcp);
  m.hb_store = c10::make_intrusive<c10d::PrefixStore>(prefix + "/watch", tcp->clone());
  if (env.nnodes > 1) {  // where this rank runs, for the line that names it if it dies
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    m.hb_store->set(m.key("where", env.rank), "node " + std::to_string(env.node_rank) + " on " +
                                                  host + ", pid " + std::to_string(::getpid()));
  }

  c10::intrusive_ptr<c10d::Backend> be;
  torch::Device aux = torch::kCPU;
  if (backend == "gloo") {
    auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
    const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
    opts->devices.push_back(ifname && *ifname
                                ? c10d::ProcessGroupGloo::createDeviceForInterface(ifname)
                                : c10d::ProcessGroupGloo::createDefaultDevice());
    be = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("gloo", m.store), env.rank, env.world_size, opts);
  } else {
#ifdef KERNELRL_C10D_NCCL
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = timeout;
    be = c10::make_intrusive<c10d::ProcessGroupNCCL>(
        c10::make_intrusive<c10d::PrefixStore>("nccl", m.store), env.rank, env.world_size, opts);
    aux = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
#endif
  }
  Impl* impl = impl_.get();
  m.group = std::make_unique<C10dGroup>(
      be, backend, env.rank, env.world_size, env.local_rank, aux,
      [impl](const std::string& msg) { impl->on_collective_failure(msg); });
  g_group = m.group.get();
  g_env = env;
  // Every rank is up: only now can a silent peer be taken for a dead one.
  m.group->barrier();
  m.watchdog = std::thread([impl] { impl->watch(); });
  KRL_LOG(info) << "rank " << env.rank << " of " << env.world_size << " (node " << env.node_rank
                << " of " << env.nnodes << ", local " << env.local_rank << " of "
                << env.local_world_size << "), " << backend << " over "
                << (env.agent_store ? "torchrun's" : "rank 0's") << " store at " << env.master_addr
                << ":" << env.master_port
                << (env.run_id.empty() ? std::string() : ", torchrun run id " + env.run_id);
}

void Session::report_failure(const std::string& message) {
  auto& m = *impl_;
  if (!m.group || m.failed.exchange(true)) return;
  m.write_error_file(first_line(message));
  try {
    m.hb_store->set(m.key("exit", m.env.rank), first_line(message));
  } catch (const std::exception&) {
  }
}

Session::~Session() {
  auto& m = *impl_;
  if (!m.group) return;
  if (!m.failed.load()) {
    try {
      // Finished: say so (the peers' watchdogs stop watching this rank), stop watching, then
      // wait until every rank has left: rank 0 hosts the store, so it must leave last.
      m.hb_store->set(m.key("exit", m.env.rank), "ok");
      m.stop = true;
      if (m.watchdog.joinable()) m.watchdog.join();
      m.store->add("left", 1);
      const bool hosts_store = m.env.rank == 0 && !m.env.agent_store;
      const auto until = Clock::now() + std::chrono::duration<double>(m.config.heartbeat_s);
      while (hosts_store && Clock::now() < until && m.store->add("left", 0) < m.env.world_size)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    } catch (const std::exception&) {
    }
  } else if (m.env.rank == 0 && !m.env.agent_store) {
    std::this_thread::sleep_for(std::chrono::seconds(2));  // peers read this rank's failure first
  }
  m.stop = true;
  if (m.watchdog.joinable()) m.watchdog.join();
  g_group = nullptr;
  m.group->shutdown();
  m.group.reset();
}

}  // namespace kernelrl::dist
