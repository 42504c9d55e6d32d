#include "collect/handoff.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/core.h>

namespace stallprof::collect {
namespace fs = std::filesystem;

Result<HandoffRequest> ParseHandoffRequest(const std::string& text) {
  std::istringstream in(text);
  HandoffRequest r;
  long long pid = 0, scope = 0;
  std::string ids;
  if (!std::getline(in, ids) || !(std::istringstream(ids) >> pid >> scope) || pid <= 0 || scope < 0 ||
      scope > UINT32_MAX)
    return InputError("a handoff request without 'pid scope' on its first line");
  r.pid = static_cast<pid_t>(pid);
  r.scope = static_cast<uint32_t>(scope);
  if (!std::getline(in, r.python) || r.python.empty() || r.python[0] != '/')
    return InputError("a handoff request without an absolute Python path on its second line");
  std::string sizes;
  std::getline(in, sizes);
  std::istringstream size_in(sizes);
  for (std::string field; size_in >> field;) {
    char* end = nullptr;
    const long long v = std::strtoll(field.c_str(), &end, 10);
    if (end == field.c_str() || *end != '\0') return InputError("a handoff request with a tensor size that is not a number");
    if (v < 0) return InputError("a handoff request with a negative tensor size");
    r.bytes.push_back(static_cast<uint64_t>(v));
  }
  if (r.bytes.empty()) return InputError("a handoff request without tensor sizes");
  // Then "pace_s <seconds>", "rss_bytes <bytes>", "workers <count>",
  // "batch_size <indices>" and "start_method <fork|spawn|forkserver>", each optional.
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    std::istringstream line_in(line);
    std::string key;
    if (line.rfind("start_method ", 0) == 0) {
      std::string method, rest;
      line_in >> key >> method;
      if ((method != "fork" && method != "spawn" && method != "forkserver") || (line_in >> rest))
        return InputError("a handoff request with a start method that is not fork, spawn or forkserver");
      r.start_method = method;
      continue;
    }
    double value = -1;
    const bool read = (line_in >> key >> value) && value >= 0;
    const bool pace = read && key == "pace_s" && value <= 3600, rss = read && key == "rss_bytes" && value < 1e15;
    const bool workers = read && key == "workers" && value <= 1e6;
    const bool batch_size = read && key == "batch_size" && value <= (1 << 30) && value == std::floor(value);
    if (!pace && !rss && !workers && !batch_size)
      return InputError("a handoff request with a line that is not 'pace_s <seconds>', 'rss_bytes <bytes>', "
                        "'workers <count>', 'batch_size <indices>' or 'start_method <name>'");
    if (pace) r.pace_s = value;
    else if (rss) r.rss_bytes = static_cast<uint64_t>(value);
    else if (workers) r.had_workers = value > 0;
    else r.batch_size = static_cast<int64_t>(value);
  }
  return r;
}

Result<HandoffTiming> ParseHandoffTiming(const std::string& output) {
  // The last line that starts with the first key: Python may warn before it.
  std::istringstream in(output);
  std::string line, found;
  while (std::getline(in, line))
    if (line.rfind("loop_cpu_s ", 0) == 0) found = line;
  if (found.empty()) return InputError("the calibration printed no 'loop_cpu_s' line");
  std::istringstream fields(found);
  HandoffTiming t;
  std::string key;
  int seen = 0;  // one bit per required key
  const auto take = [&](double value, double& into, int bit) {
    if (!(value >= 0)) return;  // negative or NaN: left unseen, so the line is refused
    into = value;
    seen |= bit;
  };
  for (double value; fields >> key >> value;) {
    if (key == "loop_cpu_s") take(value, t.loop_cpu_s, 1);
    else if (key == "receive_cpu_s") take(value, t.receive_cpu_s, 2);
    else if (key == "collate_shm_cpu_s") take(value, t.collate_shm_cpu_s, 4);
    else if (key == "touch_cpu_s") take(value, t.touch_cpu_s, 8);
    else if (key == "batches") t.batches = static_cast<uint32_t>(value);
    else if (key == "pace_s" && value >= 0) t.pace_s = value;
    else if (key == "startup_s" && value >= 0) t.startup_s = value;
    else if (key == "shutdown_s" && value >= 0) t.shutdown_s = value;
    else if (key == "receive_wall_s" && value >= 0) t.receive_wall_s = value;
    else if (key == "free_cpu_s" && value >= 0) t.free_cpu_s = value;
    else if (key == "rss_bytes" && value >= 0) t.rss_bytes = value;
    else if (key == "fork_s_per_mib" && value >= 0) t.fork_s_per_mib = value;
    else if (key == "exit_s_per_mib" && value >= 0) t.exit_s_per_mib = value;
    else if (key == "next_own_cpu_s" && value >= 0) t.next_own_cpu_s = value;
    else if (key == "spawn_startup_s" && value >= 0) t.spawn_startup_s = value;
    else if (key == "spawn_shutdown_s" && value >= 0) t.spawn_shutdown_s = value;
    else if (key == "forkserver_startup_s" && value >= 0) t.forkserver_startup_s = value;
    else if (key == "forkserver_shutdown_s" && value >= 0) t.forkserver_shutdown_s = value;
  }
  if (seen != 15 || t.batches == 0)
    return InputError("the calibration's line lacks loop_cpu_s, receive_cpu_s, collate_shm_cpu_s, touch_cpu_s or "
                      "batches: " + found);
  return t;
}

std::vector<HandoffRequest> ReadHandoffRequests(const std::string& dir) {
  std::vector<HandoffRequest> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() != ".req") continue;
    std::ifstream f(entry.path());
    std::stringstream text;
    text << f.rdbuf();
    if (auto r = ParseHandoffRequest(text.str()); r.ok()) out.push_back(std::move(*r));
  }
  return out;
}

namespace {
// Runs the calibration for `requests`; its output, or why it failed.
Result<std::string> RunCalibration(const std::vector<const HandoffRequest*>& requests, const std::string& python_dir,
                                   double timeout_s) {
  const std::string& python = requests.front()->python;
  std::vector<std::string> args = {python, "-m", "stallprof.calibrate_ipc"};
  for (const HandoffRequest* request : requests) {
    std::string batch;
    for (uint64_t b : request->bytes) batch += (batch.empty() ? "" : ",") + std::to_string(b);
    if (request->pace_s > 0) batch += fmt::format("@{:.6f}", request->pace_s);
    // A profile without workers measures the iterator's own code itself.
    if (request->had_workers && request->batch_size >= 0) batch += fmt::format("/{}", request->batch_size);
    args.push_back(std::move(batch));
  }
  uint64_t job_rss = 0;
  for (const HandoffRequest* request : requests) job_rss = std::max(job_rss, request->rss_bytes);
  if (job_rss > 0) args.push_back("--job-rss-bytes=" + std::to_string(job_rss));
  // Those loaders' forks were measured in the job: time none (5 forks of a
  // process grown to the job's size, about a second).
  if (std::all_of(requests.begin(), requests.end(), [](const HandoffRequest* r) { return r->had_workers; }))
    args.push_back("--no-fork-timing");
  // Loaders without workers that would spawn them: start one that way too.
  for (const char* method : {"spawn", "forkserver"})
    if (std::any_of(requests.begin(), requests.end(),
                    [&](const HandoffRequest* r) { return !r->had_workers && r->start_method == method; }))
      args.push_back(std::string("--start-method=") + method);
  std::vector<std::string> env = {"PYTHONPATH=" + python_dir, "OMP_NUM_THREADS=1"};
  for (const char* keep : {"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "GLIBC_TUNABLES"})
    if (const char* v = std::getenv(keep)) env.push_back(std::string(keep) + "=" + v);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return RuntimeError(std::string("pipe: ") + std::strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    return RuntimeError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, STDIN_FILENO);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(out[1]);
  std::string output;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // the deadline check ends the loop
    char buf[4096];
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the calibration closed its output
    if (output.size() < (1u << 16)) output.append(buf, static_cast<size_t>(n));
  }
  close(out[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return RuntimeError("it took longer than " + std::to_string(static_cast<int>(timeout_s)) + " s");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    // Its last line says why (a Python traceback ends with the exception).
    std::string last;
    std::istringstream in(output);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) last = line;
    return RuntimeError(python + " -m stallprof.calibrate_ipc failed" + (last.empty() ? "" : ": " + last));
  }
  return output;
}
}  // namespace

std::vector<Result<HandoffTiming>> TimeHandoffs(const std::vector<const HandoffRequest*>& requests,
                                                const std::string& python_dir, double timeout_s) {
  std::vector<Result<HandoffTiming>> out;
  if (requests.empty()) return out;
  const auto output = RunCalibration(requests, python_dir, timeout_s * static_cast<double>(requests.size()));
  if (!output.ok()) return std::vector<Result<HandoffTiming>>(requests.size(), output.error());
  // A line a request, in order; Python may warn between them.
  std::istringstream in(*output);
  for (std::string line; out.size() < requests.size() && std::getline(in, line);) {
    if (line.rfind("loop_cpu_s ", 0) == 0) out.push_back(ParseHandoffTiming(line));
    else if (line.rfind("failed ", 0) == 0) out.push_back(RuntimeError("the calibration " + line));
  }
  while (out.size() < requests.size()) out.push_back(InputError("the calibration printed no line for this batch"));
  return out;
}

}  // namespace stallprof::collect
