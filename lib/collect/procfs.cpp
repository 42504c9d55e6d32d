#include "procfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <unordered_map>

namespace stallprof::collect::procfs {
namespace {

uint64_t ToU64(std::string_view s) {
  uint64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

// Splits on spaces (runs of them count once).
std::vector<std::string_view> Fields(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t')) ++i;
    size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '\n' && s[j] != '\t') ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// Whole disks only: partitions, loop, RAM and device-mapper devices would count
// the same reads twice or count none that touch storage.
bool IsWholeDisk(std::string_view name, Files& files) {
  for (const char* skip : {"loop", "ram", "zram", "dm-", "md", "sr", "fd", "nbd"})
    if (name.rfind(skip, 0) == 0) return false;
  return files.IsBlockDevice(std::string(name));
}

std::string ProcPath(pid_t pid, const char* file) { return "/proc/" + std::to_string(pid) + "/" + file; }

}  // namespace

uint64_t NsPerTick() {
  static const uint64_t ns = 1'000'000'000ull / static_cast<uint64_t>(sysconf(_SC_CLK_TCK));
  return ns;
}

std::optional<std::string> ReadFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

Files::~Files() {
  for (auto& [path, file] : open_) close(file.fd);
}

int Files::FdFor(const std::string& path, int flags, bool& keep) {
  if (auto it = open_.find(path); it != open_.end()) {
    it->second.used = true;
    keep = true;
    return it->second.fd;
  }
  const int fd = open(path.c_str(), flags | O_RDONLY | O_CLOEXEC);
  keep = fd >= 0 && open_.size() < max_open_;
  if (keep) open_.emplace(path, Open{fd, true});
  return fd;
}

void Files::Drop(const std::string& path) {
  if (auto it = open_.find(path); it != open_.end()) {
    close(it->second.fd);
    open_.erase(it);
  }
}

std::optional<std::string_view> Files::Read(const std::string& path) {
  bool keep = false;
  const int fd = FdFor(path, 0, keep);
  if (fd < 0) return std::nullopt;
  buffer_.clear();
  char chunk[4096];
  for (;;) {
    const ssize_t n = pread(fd, chunk, sizeof(chunk), static_cast<off_t>(buffer_.size()));
    if (n < 0) {
      // Gone (ESRCH once the process is reaped): a later read opens the path anew.
      keep ? Drop(path) : void(close(fd));
      return std::nullopt;
    }
    if (n == 0) break;
    buffer_.append(chunk, static_cast<size_t>(n));
  }
  if (!keep) close(fd);
  return std::string_view(buffer_);
}

std::vector<pid_t> Files::ListNumeric(const std::string& dir) {
  std::vector<pid_t> out;
  bool keep = false;
  const int fd = FdFor(dir, O_DIRECTORY, keep);
  if (fd < 0) return out;
  alignas(8) char entries[8192];
  bool failed = lseek(fd, 0, SEEK_SET) != 0;
  while (!failed) {
    const long n = syscall(SYS_getdents64, fd, entries, sizeof(entries));
    if (n <= 0) {
      failed = n < 0;
      break;
    }
    for (long at = 0; at < n;) {
      const auto* e = reinterpret_cast<const dirent64*>(entries + at);
      if (e->d_name[0] >= '0' && e->d_name[0] <= '9') out.push_back(static_cast<pid_t>(ToU64(e->d_name)));
      at += e->d_reclen;
    }
  }
  if (failed) out.clear();
  if (failed && keep) Drop(dir);
  else if (!keep) close(fd);
  return out;
}

void Files::Sweep() {
  for (auto it = open_.begin(); it != open_.end();) {
    if (it->second.used) {
      it->second.used = false;
      ++it;
    } else {
      close(it->second.fd);
      it = open_.erase(it);
    }
  }
}

bool Files::IsBlockDevice(const std::string& name) {
  auto [it, fresh] = block_devices_.try_emplace(name, false);
  if (fresh) it->second = access(("/sys/block/" + name).c_str(), F_OK) == 0;
  return it->second;
}

std::optional<ProcStat> ReadStat(pid_t pid) {
  Files files;
  return ReadStat(pid, files);
}

std::optional<ProcStat> ReadStat(pid_t pid, Files& files) {
  auto text = files.Read(ProcPath(pid, "stat"));
  if (!text) return std::nullopt;
  // "pid (comm) state ppid ..."; comm may hold spaces and parentheses.
  size_t open = text->find('('), close = text->rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  ProcStat st;
  st.comm = std::string(text->substr(open + 1, close - open - 1));
  auto f = Fields(text->substr(close + 1));
  // f[0] is field 3 (state): field N is f[N - 3].
  if (f.size() < 22) return std::nullopt;
  st.ppid = static_cast<uint32_t>(ToU64(f[1]));
  st.cpu_ns = (ToU64(f[11]) + ToU64(f[12])) * NsPerTick();
  st.system_cpu_ns = ToU64(f[12]) * NsPerTick();
  st.minor_faults = ToU64(f[7]);
  st.threads = static_cast<uint32_t>(ToU64(f[17]));
  st.rss_bytes = ToU64(f[21]) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return st;
}

std::optional<ProcIo> ReadIo(pid_t pid) {
  Files files;
  return ReadIo(pid, files);
}

std::optional<ProcIo> ReadIo(pid_t pid, Files& files) {
  auto text = files.Read(ProcPath(pid, "io"));
  if (!text) return std::nullopt;
  ProcIo io;
  auto f = Fields(*text);
  for (size_t i = 0; i + 1 < f.size(); i += 2) {
    if (f[i] == "rchar:") io.rchar = ToU64(f[i + 1]);
    if (f[i] == "read_bytes:") io.read_bytes = ToU64(f[i + 1]);
  }
  return io;
}

ThreadTimes ReadThreadTimes(pid_t pid) {
  Files files;
  return ReadThreadTimes(pid, files);
}

ThreadTimes ReadThreadTimes(pid_t pid, Files& files) {
  ThreadTimes times;
  const std::string task_dir = ProcPath(pid, "task/");
  for (pid_t tid : files.ListNumeric(task_dir)) {
    auto text = files.Read(task_dir + std::to_string(tid) + "/schedstat");
    if (!text) continue;
    auto f = Fields(*text);
    if (f.size() < 2) continue;
    times.delay_ns += ToU64(f[1]);
    if (tid == pid) {
      times.main_cpu_ns = ToU64(f[0]);
      times.main_delay_ns = ToU64(f[1]);
    }
  }
  return times;
}

std::vector<pid_t> Descendants(pid_t root) {
  // Read once a second or less: kept open, these files would only crowd the
  // sampler's (a scan reads every process of the machine).
  Files files;
  static const bool has_children_files = access("/proc/thread-self/children", F_OK) == 0;
  if (!has_children_files) return DescendantsByScan(root);
  std::vector<pid_t> out, parents = {root};
  for (size_t next = 0; next < parents.size(); ++next) {
    const std::string task_dir = ProcPath(parents[next], "task/");
    for (pid_t tid : files.ListNumeric(task_dir)) {
      auto text = files.Read(task_dir + std::to_string(tid) + "/children");
      if (!text) continue;  // the thread ended
      for (auto field : Fields(*text)) {
        // A pid can show up twice when it is re-parented between two reads.
        const auto child = static_cast<pid_t>(ToU64(field));
        if (child <= 0 || child == root || std::find(out.begin(), out.end(), child) != out.end()) continue;
        out.push_back(child);
        parents.push_back(child);
      }
    }
  }
  return out;
}

std::vector<pid_t> DescendantsByScan(pid_t root) {
  Files files;
  std::unordered_map<pid_t, pid_t> parent;
  for (pid_t pid : files.ListNumeric("/proc")) {
    auto text = files.Read(ProcPath(pid, "stat"));
    if (!text) continue;
    size_t close = text->rfind(')');
    if (close == std::string::npos) continue;
    auto f = Fields(text->substr(close + 1));
    if (f.size() >= 2) parent[pid] = static_cast<pid_t>(ToU64(f[1]));
  }
  std::vector<pid_t> out;
  for (auto [pid, ppid] : parent) {
    // Walk up; /proc is a snapshot taken over time, so bound the walk.
    pid_t p = ppid;
    for (int depth = 0; depth < 64 && p > 1; ++depth) {
      if (p == root) {
        out.push_back(pid);
        break;
      }
      auto it = parent.find(p);
      if (it == parent.end()) break;
      p = it->second;
    }
  }
  return out;
}

std::vector<std::string> ReadCmdline(pid_t pid) {
  std::vector<std::string> out;
  auto text = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
  if (!text) return out;
  size_t i = 0;
  while (i < text->size()) {
    size_t j = text->find('\0', i);
    if (j == std::string::npos) j = text->size();
    out.push_back(text->substr(i, j - i));
    i = j + 1;
  }
  return out;
}

std::optional<std::string> ReadEnvVar(pid_t pid, const std::string& name) {
  auto text = ReadFile("/proc/" + std::to_string(pid) + "/environ");
  if (!text) return std::nullopt;
  const std::string prefix = name + "=";
  size_t i = 0;
  while (i < text->size()) {
    size_t j = text->find('\0', i);
    if (j == std::string::npos) j = text->size();
    if (text->compare(i, prefix.size(), prefix) == 0) return text->substr(i + prefix.size(), j - i - prefix.size());
    i = j + 1;
  }
  return std::nullopt;
}

std::string ReadThreadName(pid_t pid, pid_t tid) {
  auto text = ReadFile("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm");
  if (!text) return "";
  while (!text->empty() && text->back() == '\n') text->pop_back();
  return *text;
}

uint64_t MeminfoBytes(std::string_view text, const std::string& field) {
  const std::string key = field + ":";
  size_t at = 0;
  while ((at = text.find(key, at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') {
      auto f = Fields(text.substr(at + key.size(), 40));
      return f.empty() ? 0 : ToU64(f[0]) * 1024;
    }
    at += key.size();
  }
  return 0;
}

SystemSnapshot ReadSystem() {
  Files files;
  return ReadSystem(files);
}

SystemSnapshot ReadSystem(Files& files) {
  SystemSnapshot s;
  if (auto stat = files.Read("/proc/stat")) {
    auto line = stat->substr(0, stat->find('\n'));
    auto f = Fields(line);
    // cpu user nice system idle iowait irq softirq steal (guest is inside user)
    if (f.size() >= 9 && f[0] == "cpu") {
      uint64_t total = 0;
      for (size_t i = 1; i <= 8; ++i) total += ToU64(f[i]);
      const uint64_t idle = ToU64(f[4]) + ToU64(f[5]);
      s.cpu_total_ns = total * NsPerTick();
      s.cpu_busy_ns = (total - idle) * NsPerTick();
      s.cpu_steal_ns = ToU64(f[8]) * NsPerTick();
    }
  }
  if (auto mem = files.Read("/proc/meminfo")) {
    s.page_cache_bytes = MeminfoBytes(*mem, "Cached");
    s.mem_available_bytes = MeminfoBytes(*mem, "MemAvailable");
    s.mem_total_bytes = MeminfoBytes(*mem, "MemTotal");
  }
  if (auto disk = files.Read("/proc/diskstats")) {
    size_t i = 0;
    while (i < disk->size()) {
      size_t j = disk->find('\n', i);
      if (j == std::string::npos) j = disk->size();
      auto f = Fields(disk->substr(i, j - i));
      // major minor name reads merged sectors_read ...
      if (f.size() >= 6 && IsWholeDisk(f[2], files)) s.disk_read_bytes += ToU64(f[5]) * 512;
      i = j + 1;
    }
  }
  return s;
}

}  // namespace stallprof::collect::procfs
