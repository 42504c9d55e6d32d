#include "sink.h"

#include <cerrno>
#include <cstdlib>

#include "common/utf8.h"
#include "machine.h"
#include "procfs.h"

namespace stallprof::collect {

void TraceSink::Write(const pb::Chunk& chunk) {
  std::lock_guard lock(mu_);
  WriteLocked(chunk);
}

void TraceSink::WriteEncoded(std::string_view chunk_bytes, uint64_t events) {
  std::lock_guard lock(mu_);
  FlushStringsLocked();
  if (!status_.ok()) {
    events_lost_ += events;
    return;
  }
  NoteResult(writer_->WriteEncoded(chunk_bytes), events);
}

void TraceSink::NoteResult(const Status& s, uint64_t events) {
  if (s.ok()) {
    events_written_ += events;
    return;
  }
  if (status_.ok()) {
    failed_errno_ = errno;
    failed_at_ns_ = MonotonicNs();
    status_ = s;
  }
  events_lost_ += events;
}

void TraceSink::WriteFooterAfterFailure(const pb::Chunk& footer) {
  std::lock_guard lock(mu_);
  (void)writer_->Write(footer);  // best effort: the disk may still be full
}

Status TraceSink::Publish() {
  std::lock_guard lock(mu_);
  return writer_->Publish();
}

void TraceSink::Discard() {
  std::lock_guard lock(mu_);
  writer_->Discard();
}

uint64_t TraceSink::failed_at_ns() const {
  std::lock_guard lock(mu_);
  return failed_at_ns_;
}

int TraceSink::failed_errno() const {
  std::lock_guard lock(mu_);
  return failed_errno_;
}

uint64_t TraceSink::events_written() const {
  std::lock_guard lock(mu_);
  return events_written_;
}

uint64_t TraceSink::events_lost() const {
  std::lock_guard lock(mu_);
  return events_lost_;
}

void TraceSink::WriteLocked(const pb::Chunk& chunk) {
  FlushStringsLocked();
  if (!status_.ok()) return;
  NoteResult(writer_->Write(chunk), 0);
}

void TraceSink::FlushStringsLocked() {
  if (pending_.empty() || !status_.ok()) return;
  pb::Chunk c;
  c.mutable_strings()->set_first_id(pending_first_);
  for (auto& s : pending_) c.mutable_strings()->add_value(std::move(s));
  pending_.clear();
  pending_first_ = next_id_;
  NoteResult(writer_->Write(c), 0);
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
    if (first_on_ring) new_on_ring_.push_back(pid);
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

std::vector<pid_t> TraceSink::TakeNewOnRing() {
  std::lock_guard lock(mu_);
  std::vector<pid_t> out;
  out.swap(new_on_ring_);
  return out;
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
