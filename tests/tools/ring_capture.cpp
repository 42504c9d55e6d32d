// Test-only stand-in for `stallprof run`: creates a ring, runs a command with
// the environment `run` sets (STALLPROF_RING, PYTHONPATH with the bootstrap
// dir, STALLPROF_CLIENT_LIB), drains until the command exits, and writes every
// record as one JSON line with resolved names.
//
// Usage: ring_capture [-o FILE] [--build DIR] [--ring-bytes N] [--lanes N] -- CMD ARGS...
// Exit status: the command's (128+N on signal N); 125 on a usage or setup error.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "ring/consumer.h"

namespace {

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

const char* KindName(uint8_t kind) {
  switch (kind) {
    case SP_KIND_SPAN: return "span";
    case SP_KIND_INSTANT: return "instant";
    case SP_KIND_COUNTER: return "counter";
    default: return "config";
  }
}

class JsonVisitor : public stallprof::ring::Visitor {
 public:
  // quiet: count records without formatting them (for -o /dev/null, benchmarks).
  JsonVisitor(FILE* out, bool quiet) : out_(out), quiet_(quiet) {}
  void OnRecords(const stallprof::ring::LaneOwner& o, const sp_record* records, size_t count) override {
    if (quiet_) {
      spans_ += count;
      return;
    }
    for (size_t i = 0; i < count; ++i) OnRecord(o, records[i]);
  }
  void OnLaneOwner(const stallprof::ring::LaneOwner& o) override {
    names_[{o.lane, o.generation}].clear();
    std::fprintf(out_, "{\"type\":\"thread\",\"lane\":%u,\"gen\":%llu,\"pid\":%u,\"tid\":%u,\"flags\":%u}\n", o.lane,
                 static_cast<unsigned long long>(o.generation), o.pid, o.tid, o.flags);
  }
  void OnName(const stallprof::ring::LaneOwner& o, uint32_t id, std::string_view text) override {
    names_[{o.lane, o.generation}][id] = std::string(text);
  }
  void OnRecord(const stallprof::ring::LaneOwner& o, const sp_record& r) override {
    auto& names = names_[{o.lane, o.generation}];
    const std::string& name = names[r.name];
    if (r.kind >= SP_KIND_CONFIG_U64) {
      std::string value;
      if (r.kind == SP_KIND_CONFIG_U64) value = "\"u64\":" + std::to_string(r.arg);
      if (r.kind == SP_KIND_CONFIG_STR) value = "\"str\":" + JsonString(names[static_cast<uint32_t>(r.arg)]);
      if (r.kind == SP_KIND_CONFIG_F64) {
        double d;
        std::memcpy(&d, &r.arg, sizeof d);
        char buf[64];
        std::snprintf(buf, sizeof buf, "\"f64\":%.17g", d);
        value = buf;
      }
      std::fprintf(out_, "{\"type\":\"config\",\"pid\":%u,\"tid\":%u,\"scope\":%u,\"key\":%s,%s}\n", o.pid, o.tid,
                   r.scope, JsonString(name).c_str(), value.c_str());
      return;
    }
    ++spans_;
    std::fprintf(out_,
                 "{\"type\":\"%s\",\"name\":%s,\"pid\":%u,\"tid\":%u,\"lane\":%u,\"flags\":%u,\"start\":%llu,"
                 "\"dur\":%llu,\"cpu\":%llu,\"delay\":%llu,\"has_cpu\":%s,\"arg\":%llu,\"scope\":%u}\n",
                 KindName(r.kind), JsonString(name).c_str(), o.pid, o.tid, o.lane, o.flags,
                 static_cast<unsigned long long>(r.start_ns), static_cast<unsigned long long>(r.duration_ns),
                 static_cast<unsigned long long>(r.cpu_ns), static_cast<unsigned long long>(r.delay_ns),
                 (r.flags & SP_SPAN_HAS_CPU) ? "true" : "false", static_cast<unsigned long long>(r.arg), r.scope);
  }
  void OnLaneReleased(const stallprof::ring::LaneOwner& o, uint64_t dropped) override {
    dropped_ += dropped;
    std::fprintf(out_, "{\"type\":\"released\",\"lane\":%u,\"pid\":%u,\"tid\":%u,\"dropped\":%llu}\n", o.lane, o.pid,
                 o.tid, static_cast<unsigned long long>(dropped));
  }
  uint64_t spans() const { return spans_; }

 private:
  FILE* out_;
  bool quiet_ = false;
  std::map<std::pair<uint32_t, uint64_t>, std::map<uint32_t, std::string>> names_;
  uint64_t spans_ = 0;
  uint64_t dropped_ = 0;
};

std::string DirOf(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

int main(int argc, char** argv) {
  std::string output = "-";
  // Default build dir: this binary lives in <build>/tests/tools.
  char self[4096] = {0};
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  std::string build = n > 0 ? DirOf(DirOf(DirOf(self))) : ".";
  uint64_t ring_bytes = 64ull << 20;
  uint32_t lanes = SP_DEFAULT_LANES;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (i + 1 >= argc) break;
    if (a == "-o") output = argv[++i];
    else if (a == "--build") build = argv[++i];
    else if (a == "--ring-bytes") ring_bytes = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--lanes") lanes = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
    else break;
  }
  if (i >= argc) {
    std::fprintf(stderr, "usage: ring_capture [-o FILE] [--build DIR] [--ring-bytes N] [--lanes N] -- CMD ARGS...\n");
    return 125;
  }
  FILE* out = output == "-" ? stdout : std::fopen(output.c_str(), "w");
  if (out == nullptr) {
    std::fprintf(stderr, "ring_capture: cannot write %s\n", output.c_str());
    return 125;
  }
  auto segment = stallprof::ring::Segment::Create(ring_bytes, lanes);
  if (!segment.ok()) {
    std::fprintf(stderr, "ring_capture: %s\n", segment.error().message.c_str());
    return 125;
  }
  setenv(SP_RING_ENV, (*segment)->EnvValue().c_str(), 1);
  setenv("STALLPROF_CLIENT_LIB", (build + "/libstallprof_client.so").c_str(), 1);
  std::string pythonpath = build + "/python/bootstrap:" + build + "/python";
  if (const char* old = std::getenv("PYTHONPATH"); old != nullptr && *old != '\0') pythonpath += std::string(":") + old;
  setenv("PYTHONPATH", pythonpath.c_str(), 1);

  pid_t child = fork();
  if (child < 0) return 125;
  if (child == 0) {
    execvp(argv[i], argv + i);
    std::fprintf(stderr, "ring_capture: cannot run %s: %s\n", argv[i], std::strerror(errno));
    _exit(127);
  }
  signal(SIGINT, SIG_IGN);
  JsonVisitor visitor(out, output == "/dev/null");
  uint64_t invalid = 0;
  int status = 0;
  for (int round = 0;; ++round) {
    invalid += (*segment)->DrainOnce(visitor).invalid;
    if (round % 16 == 0) (*segment)->ReclaimLanes(visitor);
    pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // Grandchildren (e.g. persistent workers) may still be exiting; give their
  // last records a moment, then take everything.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  (*segment)->ReclaimLanes(visitor);
  (*segment)->ReleaseAll(visitor);
  std::fprintf(out, "{\"type\":\"summary\",\"spans\":%llu,\"dropped\":%llu,\"invalid\":%llu}\n",
               static_cast<unsigned long long>(visitor.spans()),
               static_cast<unsigned long long>((*segment)->TotalDropped()),
               static_cast<unsigned long long>((*segment)->TotalInvalid()));
  (void)invalid;
  if (out != stdout) std::fclose(out);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}
