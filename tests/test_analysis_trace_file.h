// Writes a hand-built Trace (TraceBuilder) to a trace.pb file through the real
// writer, for tests of what reads files (streaming, parallel analysis).
#pragma once

#include <catch2/catch.hpp>
#include <unistd.h>

#include <string>

#include "trace/reader.h"
#include "trace/writer.h"

namespace stallprof::testing {

// Writes a hand-built Trace to a trace.pb file through the real writer.
inline std::string WriteTrace(const Trace& t, const std::string& name) {
  std::string path = "/tmp/stallprof-test-" + std::to_string(getpid()) + "-" + name + ".pb";
  pb::TraceHeader h;
  h.set_version_major(kTraceVersionMajor);
  h.set_version_minor(kTraceVersionMinor);
  h.set_usable_cores(t.header.usable_cores);
  h.set_memory_bytes(t.header.memory_bytes);
  h.set_start_monotonic_ns(t.header.start_monotonic_ns);
  h.set_start_realtime_ns(t.header.start_realtime_ns);
  auto writer = TraceWriter::Create(path, h);
  REQUIRE(writer.ok());
  pb::Chunk c;
  auto* strings = c.mutable_strings();
  strings->set_first_id(1);
  for (size_t i = 1; i < t.strings.size(); ++i) strings->add_value(t.strings[i]);
  REQUIRE((*writer)->Write(c).ok());
  for (const auto& p : t.processes) {
    pb::Chunk pc;
    pc.mutable_process()->set_pid(p.pid);
    pc.mutable_process()->set_ppid(p.ppid);
    pc.mutable_process()->set_rank(p.rank);
    REQUIRE((*writer)->Write(pc).ok());
  }
  for (size_t i = 0; i < t.threads.size(); ++i) {
    pb::Chunk tc;
    auto* th = tc.mutable_thread();
    th->set_thread_id(static_cast<uint32_t>(i));
    th->set_pid(t.threads[i].pid);
    th->set_tid(t.threads[i].tid);
    th->set_lane(t.threads[i].lane);
    th->set_client(static_cast<uint32_t>(t.threads[i].client));
    REQUIRE((*writer)->Write(tc).ok());
  }
  for (const auto& cv : t.configs) {
    pb::Chunk cc;
    auto* config = cc.mutable_config();
    config->set_pid(cv.pid);
    config->set_scope(cv.scope);
    config->set_key(*t.FindString(cv.key));
    if (cv.type == ConfigValue::Type::kStr) config->set_str(cv.str); else config->set_u64(cv.u64);
    REQUIRE((*writer)->Write(cc).ok());
  }
  for (size_t thread = 0; thread < t.threads.size(); ++thread) {
    SpanBatchBuilder batch(static_cast<uint32_t>(thread));
    const auto& s = t.spans;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s.thread[i] != thread) continue;
      SpanRow row;
      row.start_ns = s.start_ns[i];
      row.duration_ns = s.duration_ns[i];
      row.name = s.name[i];
      row.arg = s.arg[i];
      row.scope = s.scope[i];
      row.kind = static_cast<uint32_t>(s.kind[i]);
      row.has_cpu = s.has_cpu[i] ? CpuMeasured::kYes : CpuMeasured::kNo;
      row.cpu_ns = s.cpu_ns[i];
      row.delay_ns = s.delay_ns[i];
      batch.Add(row);
    }
    if (batch.empty()) continue;
    pb::Chunk sc;
    batch.TakeInto(sc);
    REQUIRE((*writer)->Write(sc).ok());
  }
  REQUIRE((*writer)->Close().ok());
  return path;
}

}  // namespace stallprof::testing
