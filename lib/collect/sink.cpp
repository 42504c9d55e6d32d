#include "sink.h"

#include <cstdlib>

#include "common/utf8.h"
#include "procfs.h"

namespace stallprof::collect {

void TraceSink::Write(const pb::Chunk& chunk) {
  std::lock_guard lock(mu_);
  WriteLocked(chunk);
}

void TraceSink::WriteEncoded(std::string_view chunk_bytes) {
  std::lock_guard lock(mu_);
  FlushStringsLocked();
  if (!status_.ok()) return;
  if (auto s = writer_->WriteEncoded(chunk_bytes); !s.ok()) status_ = s;
}

void TraceSink::WriteLocked(const pb::Chunk& chunk) {
  FlushStringsLocked();
  if (!status_.ok()) return;
  if (auto s = writer_->Write(chunk); !s.ok()) status_ = s;
}

void TraceSink::FlushStringsLocked() {
  if (pending_.empty() || !status_.ok()) return;
  pb::Chunk c;
  c.mutable_strings()->set_first_id(pending_first_);
  for (auto& s : pending_) c.mutable_strings()->add_value(std::move(s));
  pending_.clear();
  pending_first_ = next_id_;
  if (auto s = writer_->Write(c); !s.ok()) status_ = s;
}

uint32_t TraceSink::Intern(const std::string& text) {
  if (text.empty()) return 0;
  std::lock_guard lock(mu_);
  auto [it, inserted] = ids_.try_emplace(text, next_id_);
  if (inserted) {
    if (pending_.empty()) pending_first_ = next_id_;
    pending_.push_back(ValidUtf8(text));
    ++next_id_;
  }
  return it->second;
}

void TraceSink::NoteProcess(pid_t pid, uint64_t now_ns, Seen seen) {
  {
    std::lock_guard lock(mu_);
    const bool first = described_.insert(pid).second;
    const bool first_on_ring = seen == Seen::kOnRing && described_from_ring_.insert(pid).second;
    if (!first && !first_on_ring) return;
  }
  pb::Chunk c;
  auto* p = c.mutable_process();
  p->set_pid(static_cast<uint32_t>(pid));
  p->set_first_seen_ns(now_ns);
  if (auto st = procfs::ReadStat(pid)) {
    p->set_ppid(st->ppid);
    p->set_comm(ValidUtf8(st->comm));
  }
  for (auto& arg : procfs::ReadCmdline(pid)) p->add_cmdline(ValidUtf8(arg));
  auto int_env = [pid](const char* name, int fallback) {
    auto v = procfs::ReadEnvVar(pid, name);
    if (!v || v->empty()) return fallback;
    char* end = nullptr;
    long n = std::strtol(v->c_str(), &end, 10);
    return (end && *end == '\0') ? static_cast<int>(n) : fallback;
  };
  p->set_rank(int_env("RANK", -1));
  p->set_local_rank(int_env("LOCAL_RANK", -1));
  p->set_world_size(int_env("WORLD_SIZE", 0));
  Write(c);
}

Status TraceSink::Close() {
  std::lock_guard lock(mu_);
  FlushStringsLocked();
  Status s = writer_->Close();
  if (status_.ok() && !s.ok()) status_ = s;
  return status_;
}

Status TraceSink::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

uint64_t TraceSink::bytes_written() const {
  std::lock_guard lock(mu_);
  return writer_->bytes_written();
}

}  // namespace stallprof::collect
