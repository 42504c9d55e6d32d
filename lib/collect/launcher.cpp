// Run(): the launcher. Order matters: everything that can fail for a reason
// the user must fix (output path, shared memory) fails before the command starts.
#include <fcntl.h>
#include <fmt/core.h>
#include <limits.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "collect.h"
#include "common/units.h"
#include "drain.h"
#include "handoff.h"
#include "machine.h"
#include "procfs.h"
#include "ring/consumer.h"
#include "sampler.h"
#include "sink.h"

extern char** environ;

namespace stallprof::collect {
namespace {

namespace fs = std::filesystem;

// ---- output path ----

std::string Hostname() {
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "localhost";
  return host;
}

// ---- signals: forwarded to the child's process group, never acted on ----

volatile sig_atomic_t g_child_pgid = 0;
volatile sig_atomic_t g_pending_signal = 0;
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};

void ForwardSignal(int sig) {
  const int saved = errno;
  const pid_t pgid = g_child_pgid;
  if (pgid > 0)
    kill(-pgid, sig);
  else
    g_pending_signal = sig;  // arrived before the child existed: sent once it does
  errno = saved;
}

void InstallForwarding() {
  struct sigaction sa {};
  sa.sa_handler = ForwardSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: waitpid wakes up, which is harmless
  for (int sig : kForwarded) sigaction(sig, &sa, nullptr);
}

void RestoreDefaultSignals() {
  for (int sig : kForwarded) signal(sig, SIG_DFL);
  g_child_pgid = 0;
}

// ---- the hook: python dir and client library, found from the binary's own place ----

struct Hook {
  std::string python_dir;  // holds stallprof/ and bootstrap/
  std::string client_lib;  // libstallprof_client.so
};

// The directory where loaders without workers leave their batch's tensor
// sizes: <tmp>/stallprof-handoff.<launcher pid>.XXXXXX, removed at the end of
// the run. A launcher killed with SIGKILL cannot remove its own; the next run
// removes those of launchers that no longer exist (ours only).
constexpr std::string_view kHandoffDirPrefix = "stallprof-handoff.";

void RemoveStaleHandoffDirs() {
  std::error_code ec;
  for (fs::directory_iterator it(fs::temp_directory_path(ec), ec), end; !ec && it != end; it.increment(ec)) {
    const fs::directory_entry& entry = *it;
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(kHandoffDirPrefix)) continue;
    const std::string rest = name.substr(kHandoffDirPrefix.size());
    const auto dot = rest.find('.');
    if (dot == std::string::npos || dot == 0) continue;
    pid_t pid = 0;
    if (std::from_chars(rest.data(), rest.data() + dot, pid).ec != std::errc{} || pid <= 0) continue;
    struct stat st{};
    if (lstat(entry.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) continue;
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;  // its launcher (or a process with its pid) lives
    std::error_code ignored;
    fs::remove_all(entry.path(), ignored);
  }
}

// One rule for both layouts, relative to /proc/self/exe so that neither the
// working directory nor the source tree matters:
//   build tree: build/stallprof, build/libstallprof_client.so, build/python/
//   installed:  <prefix>/bin/stallprof, <prefix>/<libdir>/libstallprof_client.so,
//               <prefix>/<libdir>/stallprof/python/ (lib/client/CMakeLists.txt)
// STALLPROF_BINDIR_TO_LIBDIR is <libdir> relative to <bindir> (lib/collect/CMakeLists.txt).
std::optional<Hook> FindHook(std::string& looked_in) {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  const fs::path dir = exe.parent_path();
  const fs::path libdir = (dir / STALLPROF_BINDIR_TO_LIBDIR).lexically_normal();
  const std::pair<fs::path, fs::path> layouts[] = {
      {dir / "libstallprof_client.so", dir / "python"},
      {libdir / "libstallprof_client.so", libdir / "stallprof" / "python"},
  };
  for (const auto& [lib, py] : layouts) {
    if (fs::exists(lib, ec) && fs::exists(py / "bootstrap", ec))
      return Hook{fs::weakly_canonical(py, ec).string(), fs::weakly_canonical(lib, ec).string()};
    if (!looked_in.empty()) looked_in += " and ";
    looked_in += py.parent_path().string();
  }
  return std::nullopt;
}

// The child's environment: ours, plus the ring and the hook.
std::vector<std::string> ChildEnvironment(const std::string& ring_env, const std::optional<Hook>& hook) {
  std::vector<std::string> env;
  std::string pythonpath;
  for (char** e = environ; *e; ++e) {
    std::string_view kv(*e);
    if (kv.starts_with(SP_RING_ENV "=") || kv.starts_with("STALLPROF_CLIENT_LIB=")) continue;
    if (kv.starts_with("PYTHONPATH=")) {
      pythonpath = std::string(kv.substr(11));
      continue;
    }
    env.emplace_back(kv);
  }
  env.push_back(std::string(SP_RING_ENV) + "=" + ring_env);
  if (hook) {
    std::string pp = hook->python_dir + "/bootstrap:" + hook->python_dir;
    if (!pythonpath.empty()) pp += ":" + pythonpath;
    env.push_back("PYTHONPATH=" + pp);
    env.push_back("STALLPROF_CLIENT_LIB=" + hook->client_lib);
  } else if (!pythonpath.empty()) {
    env.push_back("PYTHONPATH=" + pythonpath);
  }
  return env;
}

// ---- spawning ----

struct Child {
  pid_t pid = -1;
  int exec_errno = 0;  // non-zero: exec failed with this errno
};

Child Spawn(const std::vector<std::string>& command, const std::vector<std::string>& env, bool take_terminal) {
  std::vector<char*> argv, envp;
  for (auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  // exec failures come back through a close-on-exec pipe: EOF means exec worked.
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return {-1, errno};
  Child child;
  child.pid = fork();
  if (child.pid < 0) {
    close(report[0]);
    close(report[1]);
    return {-1, errno};
  }
  if (child.pid == 0) {
    close(report[0]);
    setpgid(0, 0);
    if (take_terminal) {
      signal(SIGTTOU, SIG_IGN);
      tcsetpgrp(STDIN_FILENO, getpid());
      signal(SIGTTOU, SIG_DFL);
    }
    RestoreDefaultSignals();
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execvpe(argv[0], argv.data(), envp.data());
    int err = errno;
    ssize_t ignored = write(report[1], &err, sizeof(err));
    (void)ignored;
    _exit(err == ENOENT ? 127 : 126);
  }
  close(report[1]);
  setpgid(child.pid, child.pid);  // both sides set it: no race with the first signal
  if (take_terminal) {
    signal(SIGTTOU, SIG_IGN);
    tcsetpgrp(STDIN_FILENO, child.pid);
    signal(SIGTTOU, SIG_DFL);
  }
  g_child_pgid = child.pid;
  if (g_pending_signal) kill(-child.pid, g_pending_signal);
  int err = 0;
  ssize_t n;
  do n = read(report[0], &err, sizeof(err));
  while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n == sizeof(err)) child.exec_errno = err;
  return child;
}

// ---- live status ----

class StatusLine {
 public:
  void Draw(uint64_t elapsed_ns, const LiveCounters& live, uint64_t now_ns) {
    const double stall = live.RecentStallPercent(now_ns);
    std::string stall_text = stall < 0 ? std::string("-") : fmt::format("{:.0f}%", stall);
    std::string line = fmt::format("stallprof: {:.1f} s | {} iterations | stall {} | {} events | {} dropped",
                                   static_cast<double>(elapsed_ns) / 1e9, live.iterations.load(), stall_text,
                                   live.records.load(), live.dropped.load());
    fmt::print(stderr, "\r{}\033[K", line);
    std::fflush(stderr);
    drawn_ = true;
  }
  void Clear() {
    if (drawn_) {
      fmt::print(stderr, "\r\033[K");
      std::fflush(stderr);
    }
  }

 private:
  bool drawn_ = false;
};

// Sleeps until `deadline` or until `stop` is set.
class Stopper {
 public:
  void Stop() {
    std::lock_guard lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  // false once stopped.
  bool SleepFor(std::chrono::microseconds d) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, d, [this] { return stop_; });
    return !stop_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
};

// ---- the span clock ----

// How long the launcher calibrates the TSC before the command starts: with
// readings bracketed to ~25 ns this sets the rate to a few ppm, and the drain
// re-anchors it all run long (Segment::ReanchorTsc).
constexpr uint64_t kTscCalibrationNs = 10'000'000;

}  // namespace

ring::TscClock ChooseSpanClock(std::vector<std::string>& warnings) {
  const char* env = std::getenv("STALLPROF_CLOCK");
  const std::string wanted = env ? env : "";
  if (wanted == "monotonic") return {};
  if (!wanted.empty() && wanted != "tsc" && wanted != "auto")
    warnings.push_back(fmt::format("STALLPROF_CLOCK={} is not one of auto, tsc, monotonic; choosing automatically", wanted));
  if (auto tsc = ring::CalibrateTsc(kTscCalibrationNs)) return *tsc;
  if (wanted == "tsc")
    warnings.push_back("STALLPROF_CLOCK=tsc, but this CPU has no invariant TSC (or it did not calibrate): spans are "
                       "timed with CLOCK_MONOTONIC");
  return {};
}

Result<std::string> ExpandOutputPath(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') {
      out.push_back(pattern[i]);
      continue;
    }
    if (i + 1 == pattern.size())
      return UsageError(fmt::format("bad --output '{}', it ends with a lone '%', use %r, %h, %p or %%", pattern));
    switch (pattern[++i]) {
      case 'r': {
        // RANK comes from the environment: keep it a plain file-name part
        // (a '/' or ".." in it must not move the trace to another directory).
        const char* rank = std::getenv("RANK");
        std::string_view value = (rank && *rank) ? rank : "0";
        for (char c : value) out.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' ? c : '_');
        break;
      }
      case 'h': out += Hostname(); break;
      case 'p': out += std::to_string(getpid()); break;
      case '%': out.push_back('%'); break;
      default:
        return UsageError(fmt::format("bad --output '{}', unknown placeholder '%{}', use %r (rank), %h (host), "
                                      "%p (pid) or %%",
                                      pattern, pattern[i]));
    }
  }
  if (out.empty()) return UsageError("bad --output '', it is empty, pass a file name such as trace.pb");
  return out;
}

Status CheckOutputDirectory(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return UsageError(fmt::format("cannot write trace '{}', directory '{}' does not exist, create it first (mkdir -p {})",
                                  path, dir.string(), dir.string()));
  if (access(dir.c_str(), W_OK) != 0)
    return UsageError(fmt::format("cannot write trace '{}', directory '{}' is not writable, choose another -o",
                                  path, dir.string()));
  struct stat target {};
  if (stat(path.c_str(), &target) == 0 && S_ISDIR(target.st_mode))
    return UsageError(fmt::format("cannot write trace '{}', it is a directory, pass a file name with -o", path));
  return Status::Ok();
}

std::optional<std::string> PythonFlagSkippingHook(const std::vector<std::string>& command) {
  if (command.empty()) return std::nullopt;
  const std::string name = fs::path(command[0]).filename().string();
  if (!name.starts_with("python")) return std::nullopt;
  for (size_t i = 1; i < command.size(); ++i) {
    const std::string& arg = command[i];
    if (arg.size() < 2 || arg[0] != '-' || arg == "--") return std::nullopt;  // the script: options end
    if (arg[1] == '-') continue;                                              // --long options take no part here
    for (size_t k = 1; k < arg.size(); ++k) {
      const char c = arg[k];
      if (c == 'E' || c == 'I' || c == 'S') return "-" + std::string(1, c);
      // These take a value (the rest of the word or the next one): options end.
      if (c == 'c' || c == 'm') return std::nullopt;
      if (c == 'W' || c == 'X') {
        if (k + 1 == arg.size()) ++i;
        break;
      }
    }
  }
  return std::nullopt;
}

bool IsTorchrun(const std::vector<std::string>& command) {
  for (size_t i = 0; i < command.size(); ++i) {
    const std::string name = fs::path(command[i]).filename().string();
    if (name == "torchrun") return true;
    if (i + 1 < command.size() && command[i] == "-m" &&
        (command[i + 1] == "torch.distributed.run" || command[i + 1] == "torch.distributed.launch"))
      return true;
    if (i == 0 && !name.starts_with("python")) return false;  // torchrun is the command or python -m's module
  }
  return false;
}

// After the job: times the worker handoff of each loader's first batch (one
// calibration per distinct Python and batch) and records it as that loader's
// config: ipc_collate_shm_cpu_s, ipc_touch_cpu_s, ipc_free_cpu_s and
// ipc_batches; for a loader that ran with workers ipc_next_own_cpu_s (the
// iterator's own code in a next() without them), and for one that ran
// without them ipc_loop_cpu_s,
// ipc_receive_cpu_s, ipc_receive_wall_s, ipc_pace_s, ipc_startup_s,
// ipc_shutdown_s, ipc_rss_bytes and the fork's and exit's cost a MiB (a
// profile with workers measured those itself), and where it would spawn its
// workers (or fork them from a fork server) ipc_context_startup_s and
// ipc_context_shutdown_s, a worker started and joined that way.
// A calibration that fails is a warning: whatif then says it was not timed.
void RecordHandoffTimings(const std::string& dir, const std::string& python_dir, const RunOptions& options,
                          TraceSink& sink, RunSummary& summary) {
  const auto requests = ReadHandoffRequests(dir);
  if (requests.empty() || summary.term_signal != 0) return;  // a job stopped by a signal: do not hold the user up
  // Ctrl-C reaches the timing in our process group and ends it; we go on to
  // close the trace, timing no more.
  g_pending_signal = 0;
  InstallForwarding();
  if (options.live_status != LiveStatus::kOff)
    fmt::print(stderr, "stallprof: {} (whatif needs it; --no-handoff-timing skips it)\n",
               std::all_of(requests.begin(), requests.end(), [](const HandoffRequest& r) { return r.had_workers; })
                   ? "timing what a DataLoader worker's batch in shared memory costs beyond one in the heap"
                   : "timing how a DataLoader worker would hand over this job's batches");
  // At most this many timings a run (a loader made per epoch with batches of
  // varying shape would make a request each); beyond it a request takes the
  // timing of the batch closest in bytes from the same Python, or none.
  constexpr size_t kMaxTimings = 4;
  const auto total = [](const HandoffRequest& r) {
    double sum = 0;
    for (uint64_t b : r.bytes) sum += static_cast<double>(b);
    return sum;
  };
  // The distinct batches (by Python and tensor sizes, the first request's
  // pace), timed in one process per Python: torch imported once.
  std::vector<const HandoffRequest*> timed;
  for (const HandoffRequest& r : requests)
    if (timed.size() < kMaxTimings && std::none_of(timed.begin(), timed.end(), [&](const HandoffRequest* t) {
          // A loader that would spawn its workers asks that process to time a spawn too.
          return t->python == r.python && t->bytes == r.bytes && t->start_method == r.start_method;
        }))
      timed.push_back(&r);
  std::vector<std::string> pythons;
  for (const HandoffRequest* t : timed)
    if (std::find(pythons.begin(), pythons.end(), t->python) == pythons.end()) pythons.push_back(t->python);
  std::vector<std::pair<const HandoffRequest*, Result<HandoffTiming>>> done;
  for (const std::string& python : pythons) {
    if (g_pending_signal) break;
    std::vector<const HandoffRequest*> same_python;
    for (const HandoffRequest* t : timed)
      if (t->python == python) same_python.push_back(t);
    auto results = TimeHandoffs(same_python, python_dir, 60);
    for (size_t k = 0; k < same_python.size(); ++k) {
      const std::string warning = results[k].ok() ? "" : "could not time a worker's batch handoff (" +
                                                               results[k].error().message +
                                                               "); whatif takes it as 0 for loaders without workers";
      if (!warning.empty() && std::find(summary.warnings.begin(), summary.warnings.end(), warning) == summary.warnings.end())
        summary.warnings.push_back(warning);  // once for a run that failed for all its batches
      done.emplace_back(same_python[k], std::move(results[k]));
    }
  }
  for (const HandoffRequest& r : requests) {
    const Result<HandoffTiming>* timing = nullptr;
    for (const auto& [seen, result] : done)
      if (seen->python == r.python && seen->bytes == r.bytes) timing = &result;
    if (!timing) {  // beyond kMaxTimings: the timed batch closest in bytes from the same Python
      double best = -1;
      for (const auto& [seen, result] : done)
        if (result.ok() && seen->python == r.python && (best < 0 || std::abs(total(*seen) - total(r)) < best)) {
          best = std::abs(total(*seen) - total(r));
          timing = &result;
        }
    }
    if (!timing || !timing->ok()) continue;
    const auto config = [&](const char* key, double value) {
      pb::Chunk chunk;
      auto* c = chunk.mutable_config();
      c->set_pid(static_cast<uint32_t>(r.pid));
      c->set_scope(r.scope);
      c->set_key(sink.Intern(key));
      c->set_f64(value);
      sink.Write(chunk);
    };
    config("ipc_collate_shm_cpu_s", (*timing)->collate_shm_cpu_s);
    config("ipc_touch_cpu_s", (*timing)->touch_cpu_s);
    if ((*timing)->free_cpu_s >= 0) config("ipc_free_cpu_s", (*timing)->free_cpu_s);
    config("ipc_batches", (*timing)->batches);
    if (r.had_workers) {
      if ((*timing)->next_own_cpu_s >= 0) config("ipc_next_own_cpu_s", (*timing)->next_own_cpu_s);
      continue;
    }
    config("ipc_loop_cpu_s", (*timing)->loop_cpu_s);
    config("ipc_receive_cpu_s", (*timing)->receive_cpu_s);
    if ((*timing)->receive_wall_s >= 0) config("ipc_receive_wall_s", (*timing)->receive_wall_s);
    config("ipc_pace_s", (*timing)->pace_s);
    if ((*timing)->startup_s >= 0) config("ipc_startup_s", (*timing)->startup_s);
    if ((*timing)->shutdown_s >= 0) config("ipc_shutdown_s", (*timing)->shutdown_s);
    if ((*timing)->rss_bytes >= 0) config("ipc_rss_bytes", (*timing)->rss_bytes);
    if ((*timing)->fork_s_per_mib >= 0) config("ipc_fork_s_per_mib", (*timing)->fork_s_per_mib);
    if ((*timing)->exit_s_per_mib >= 0) config("ipc_exit_s_per_mib", (*timing)->exit_s_per_mib);
    // A loader that would spawn its workers (or fork them from a fork server):
    // a worker started that way, importing torch afresh.
    const bool spawn = r.start_method == "spawn", server = r.start_method == "forkserver";
    const double context_startup = spawn ? (*timing)->spawn_startup_s : server ? (*timing)->forkserver_startup_s : -1;
    const double context_shutdown = spawn ? (*timing)->spawn_shutdown_s : server ? (*timing)->forkserver_shutdown_s : -1;
    if (context_startup >= 0) config("ipc_context_startup_s", context_startup);
    if (context_shutdown >= 0) config("ipc_context_shutdown_s", context_shutdown);
  }
  RestoreDefaultSignals();
}

Result<RunSummary> Run(const RunOptions& options) {
  if (options.command.empty())
    return UsageError("no command to run, put it after '--': stallprof run -- python3 train.py");
  if (options.sample_ms == 0) return UsageError("bad --sample-ms 0, it must be at least 1");
  if (const uint64_t max_ring = MaxRingBytes(); options.ring_bytes > max_ring)
    return UsageError(fmt::format("bad --ring-size {}, it is more than half of this machine's memory ({}), "
                                  "use at most {} (the default 64M is enough for most jobs)",
                                  FormatBytes(static_cast<double>(options.ring_bytes)),
                                  FormatBytes(static_cast<double>(max_ring * 2)),
                                  FormatBytes(static_cast<double>(max_ring))));
  const uint64_t start_ns = MonotonicNs();

  RunSummary summary;
  auto path = ExpandOutputPath(options.output);
  if (!path.ok()) return path.error();
  summary.trace_path = *path;
  if (auto s = CheckOutputDirectory(*path); !s.ok()) return s.error();

  const ring::TscClock tsc = ChooseSpanClock(summary.warnings);
  auto segment = ring::Segment::Create(options.ring_bytes, options.lanes, tsc);
  if (!segment.ok()) return segment.error();
  ring::Segment& ring = **segment;

  auto header = DescribeMachine(options.command, {ring.size(), options.lanes}, options.sample_ms,
                                ring.header()->run_id);
  header.set_clock_source(tsc.valid() ? "tsc" : "monotonic");
  if (tsc.valid()) header.set_tsc_hz(tsc.Hz());
  // Written under a temporary name until the command has started: a command
  // that cannot be executed (a typo) leaves an existing trace untouched.
  auto writer = TraceWriter::Create(*path, header, TraceWriter::Placement::kTemporary);
  if (!writer.ok()) return writer.error();
  TraceSink sink(std::move(*writer));

  std::string looked_in;
  auto hook = FindHook(looked_in);
  if (!hook)
    fmt::print(stderr,
               "stallprof: warning: Python hook not found (looked in {}), running without it: only C clients "
               "will record\n",
               looked_in);

  if (IsTorchrun(options.command))
    fmt::print(stderr,
               "stallprof: note: every rank torchrun starts records into this one trace ({}); 'stallprof analyze {}' "
               "shows them per rank\n",
               *path, *path);

  // Orphaned grandchildren (DataLoader workers whose parent died) become ours,
  // so the sampler still sees them and they are reaped here.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  const bool take_terminal = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
  InstallForwarding();
  auto env = ChildEnvironment(ring.EnvValue(), hook);
  // Loaders without workers leave their batch's tensor sizes here (handoff.h).
  std::string handoff_dir;
  if (hook && options.time_handoffs) {
    RemoveStaleHandoffDirs();
    std::string pattern =
        (fs::temp_directory_path() / fmt::format("{}{}.XXXXXX", kHandoffDirPrefix, getpid())).string();
    if (mkdtemp(pattern.data())) {
      handoff_dir = pattern;
      env.push_back("STALLPROF_IPC_DIR=" + handoff_dir);
    }
  }
  Child child = Spawn(options.command, env, take_terminal);
  if (child.pid < 0) {
    RestoreDefaultSignals();
    return RuntimeError(fmt::format("cannot start '{}', fork failed: {}, free some memory or processes",
                                    options.command[0], std::strerror(child.exec_errno)));
  }
  LiveCounters live;
  live.main_pid = child.pid;
  if (child.exec_errno == 0) {
    if (auto s = sink.Publish(); !s.ok()) summary.write_error = s.error();
  } else {
    std::string why = std::strerror(child.exec_errno);
    if (!why.empty()) why[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(why[0])));
    summary.launch_error = Error{ErrorKind::kRuntime, fmt::format("cannot run '{}', {}, check the command name and PATH",
                                                                  options.command[0], why)};
  }

  Drainer drainer(sink, live);
  Stopper stop_sampler, stop_status;
  std::atomic<bool> drain_stopped{false};  // the drain sleeps on the ring's doorbell, not on a Stopper
  std::thread drain_thread([&] {
    auto last_reclaim = std::chrono::steady_clock::now();
    auto last_flush = last_reclaim;
    uint64_t laneless_seen = 0;
    auto pause = std::chrono::microseconds(2000);
    do {
      // Read before the drain: a producer ringing during it ends the wait below at once.
      const uint32_t rung = ring.DoorbellCount();
      ring.ReanchorTsc();
      const auto stats = ring.DrainOnce(drainer);
      live.dropped.store(ring.TotalDropped(), std::memory_order_relaxed);
      const auto now = std::chrono::steady_clock::now();
      // A thread found every lane taken (it rang): free the lanes of threads
      // gone without a release now, not at the next 50 ms.
      if (now - last_reclaim >= std::chrono::milliseconds(50) || ring.LanelessDropped() != laneless_seen) {
        ring.ReclaimLanes(drainer);
        last_reclaim = now;
        laneless_seen = ring.LanelessDropped();
      }
      if (now - last_flush >= std::chrono::milliseconds(100)) {
        drainer.FlushAll();
        last_flush = now;
      }
      // Come back before the fullest lane could pass an eighth of its
      // capacity at the rate it filled since the last drain, within 1-50 ms:
      // a wake-up is not free (on this VM a thread woken per batch costs
      // 1.6-3x the CPU of one kept busy; each wake here also walks the 128
      // lanes' control words, a page apart), and a job writing a steady
      // stream kept this thread waking every 1 ms for lanes a few percent
      // full. At 50 ms a lane of 512 KiB is an eighth full only at 80 k
      // records a second from one thread (the fast loader writes 27 k).
      // Idle: back off to 50 ms.
      constexpr auto kMinPause = std::chrono::microseconds(1000), kMaxPause = std::chrono::microseconds(50000);
      if (stats.records == 0) pause = std::min(pause * 2, kMaxPause);
      else if (stats.max_fill > 0)
        pause = std::clamp(std::chrono::microseconds(static_cast<int64_t>(
                               static_cast<double>(pause.count()) * (0.125 / stats.max_fill))),
                           kMinPause, kMaxPause);
      else pause = kMinPause;
      // Sleep until the pause ends or a producer rings: its lane passed a quarter full.
      ring.WaitForDoorbell(rung, pause);
    } while (!drain_stopped.load(std::memory_order_acquire));
  });
  Sampler sampler(sink, getpid());
  std::thread sampler_thread([&] {
    do sampler.Tick(MonotonicNs());
    while (stop_sampler.SleepFor(std::chrono::milliseconds(options.sample_ms)));
    sampler.Flush();
  });
  std::thread status_thread;
  StatusLine status;
  if (options.live_status == LiveStatus::kAuto && isatty(STDERR_FILENO)) {
    status_thread = std::thread([&] {
      while (stop_status.SleepFor(std::chrono::milliseconds(250))) {
        const uint64_t now = MonotonicNs();
        status.Draw(now - start_ns, live, now);
      }
    });
  }

  // Wait for the command; reap adopted orphans on the way.
  int wstatus = 0;
  for (;;) {
    pid_t r = waitpid(-1, &wstatus, take_terminal ? WUNTRACED : 0);
    if (r == child.pid && WIFSTOPPED(wstatus)) {
      // Ctrl-Z stopped the command: stop ourselves too, as a shell job would,
      // so the user's shell gets the terminal back; on `fg`, hand it on again.
      signal(SIGTTOU, SIG_IGN);
      tcsetpgrp(STDIN_FILENO, getpgrp());
      raise(SIGSTOP);
      tcsetpgrp(STDIN_FILENO, child.pid);
      signal(SIGTTOU, SIG_DFL);
      kill(-child.pid, SIGCONT);
      continue;
    }
    if (r == child.pid) break;
    if (r < 0 && errno != EINTR) break;  // ECHILD: cannot happen while the child lives
  }
  g_child_pgid = 0;
  const uint64_t job_end_ns = MonotonicNs();
  if (WIFEXITED(wstatus)) {
    summary.exit_code = WEXITSTATUS(wstatus);
  } else if (WIFSIGNALED(wstatus)) {
    summary.term_signal = WTERMSIG(wstatus);
    summary.exit_code = 128 + summary.term_signal;
  }
  if (take_terminal) {
    signal(SIGTTOU, SIG_IGN);
    tcsetpgrp(STDIN_FILENO, getpgrp());
    signal(SIGTTOU, SIG_DFL);
  }

  // Leftover descendants (workers still shutting down) get a short grace
  // period to finish and flush their lanes; they are never killed.
  const auto grace_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.grace_ms);
  while (!procfs::Descendants(getpid()).empty() && std::chrono::steady_clock::now() < grace_end) {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  RestoreDefaultSignals();

  stop_status.Stop();
  if (status_thread.joinable()) status_thread.join();
  status.Clear();
  stop_sampler.Stop();
  sampler_thread.join();
  drain_stopped.store(true, std::memory_order_release);
  ring.RingDoorbell();
  drain_thread.join();
  // Final drain: whatever is left, then every lane still owned.
  ring.ReanchorTsc();
  ring.DrainOnce(drainer);
  ring.ReleaseAll(drainer);
  drainer.FlushAll();

  if (!handoff_dir.empty()) {
    if (!summary.launch_error) RecordHandoffTimings(handoff_dir, hook->python_dir, options, sink, summary);
    std::error_code ec;
    fs::remove_all(handoff_dir, ec);
  }

  summary.spans = drainer.spans();
  const auto skipping_flag = hook && drainer.producers() == 0 ? PythonFlagSkippingHook(options.command) : std::nullopt;
  if (skipping_flag)
    summary.warnings.push_back(fmt::format(
        "no process was recorded: python ran with {}, which skips {} and with it the stallprof hook; run it "
        "without {}",
        *skipping_flag, *skipping_flag == "-S" ? "the site import" : "PYTHONPATH", *skipping_flag));
  // A job that loads its data without a DataLoader (pytorch/examples'
  // word_language_model batches a tensor by hand) gives analyze nothing to
  // report: say so now rather than at the next command.
  else if (!summary.launch_error && live.iterations.load() == 0)
    summary.notes.push_back(
        "no DataLoader iteration was recorded, so analyze will find no steps: stallprof records the batches a "
        "Python process takes from a torch.utils.data.DataLoader (this job took none), or the dataloader.* spans "
        "a program emits through the C API");
  summary.dropped = ring.TotalDropped();
  summary.laneless_dropped = ring.LanelessDropped();
  summary.invalid = ring.TotalInvalid();
  pb::Chunk footer;
  auto* f = footer.mutable_footer();
  f->set_exit_code(summary.exit_code);
  f->set_term_signal(summary.term_signal);
  f->set_end_monotonic_ns(MonotonicNs());
  f->set_job_end_monotonic_ns(job_end_ns);
  f->set_spans(summary.spans);
  f->set_dropped(summary.dropped);
  f->set_invalid_records(summary.invalid);
  if (tsc.valid()) {
    const ring::TscReport& report = ring.tsc_report();
    f->set_tsc_drift_ns(report.drift_ns);
    f->set_tsc_drift_over_ns(report.over_ns);
    f->set_tsc_max_error_ns(report.max_step_ns);
  }
  if (summary.launch_error) {
    // Nothing ran: keep whatever trace was there before.
    sink.Discard();
    summary.trace_written = false;
    return summary;
  }
  sink.Write(footer);
  if (sink.status().ok()) {
    if (auto s = sink.Close(); !s.ok() && !summary.write_error) summary.write_error = s.error();
  } else {
    f->set_write_failed_ns(sink.failed_at_ns());
    f->set_events_lost(sink.events_lost());
    sink.WriteFooterAfterFailure(footer);
    (void)sink.Close();
  }
  summary.trace_bytes = sink.bytes_written();
  summary.duration_s = static_cast<double>(MonotonicNs() - start_ns) / 1e9;
  if (const uint64_t failed = sink.failed_at_ns(); failed != 0) {
    summary.incomplete = true;
    summary.events_lost = sink.events_lost();
    const double at_s = static_cast<double>(failed - start_ns) / 1e9;
    const int err = sink.failed_errno();
    std::string why = err ? std::strerror(err) : "write error";
    if (!why.empty()) why[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(why[0])));
    const std::string dir = fs::path(summary.trace_path).parent_path().empty()
                                ? std::string(".")
                                : fs::path(summary.trace_path).parent_path().string();
    summary.write_error = Error{
        ErrorKind::kRuntime,
        fmt::format("trace '{}' is incomplete, writing it failed {:.1f} s into the run ({}): it ends there with {} "
                    "events ({}), {} events after that were lost; free space in {} or write elsewhere with -o",
                    summary.trace_path, at_s, why, sink.events_written(),
                    FormatBytes(static_cast<double>(summary.trace_bytes)), summary.events_lost, dir)};
  }
  return summary;
}

}  // namespace stallprof::collect
