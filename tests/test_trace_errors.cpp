// LoadTrace on broken input: every failure is one clear line naming the file,
// and nothing crashes.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <fstream>
#include <random>
#include <sstream>

#include "trace/reader.h"
#include "trace/writer.h"

using namespace stallprof;

namespace {

std::string TempPath(const char* tag) {
  return std::string("/tmp/stallprof-test-err-") + tag + "-" + std::to_string(getpid()) + ".pb";
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

pb::TraceHeader Header(uint32_t major = kTraceVersionMajor) {
  pb::TraceHeader h;
  h.set_version_major(major);
  h.set_version_minor(3);
  h.set_hostname("h");
  return h;
}

// A small valid trace: header, strings, thread, three span batches, footer.
// Returns the byte offsets at which each chunk ends.
std::vector<size_t> WriteSmallTrace(const std::string& path) {
  std::vector<size_t> ends;
  auto w = TraceWriter::Create(path, Header());
  REQUIRE(w.ok());
  ends.push_back((*w)->bytes_written());
  pb::Chunk c;
  c.mutable_strings()->set_first_id(1);
  c.mutable_strings()->add_value("dataloader.wait");
  REQUIRE((*w)->Write(c).ok());
  ends.push_back((*w)->bytes_written());
  c.mutable_thread()->set_thread_id(0);
  c.mutable_thread()->set_pid(1);
  REQUIRE((*w)->Write(c).ok());
  ends.push_back((*w)->bytes_written());
  SpanBatchBuilder b(0);
  for (int batch = 0; batch < 3; ++batch) {
    for (uint64_t i = 0; i < 10; ++i) b.Add({.start_ns = 100 * i, .duration_ns = 10, .name = 1, .arg = i});
    b.TakeInto(c);
    REQUIRE((*w)->Write(c).ok());
    ends.push_back((*w)->bytes_written());
  }
  c.mutable_footer()->set_spans(30);
  REQUIRE((*w)->Write(c).ok());
  ends.push_back((*w)->bytes_written());
  REQUIRE((*w)->Close().ok());
  return ends;
}

bool Mentions(const Error& e, const std::string& text) { return e.message.find(text) != std::string::npos; }

}  // namespace

TEST_CASE("a missing file is an input error naming the path") {
  auto t = LoadTrace("/nonexistent/dir/trace.pb");
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().kind == ErrorKind::kInput);
  CHECK(Mentions(t.error(), "/nonexistent/dir/trace.pb"));
  CHECK(Mentions(t.error(), "no such file"));
}

TEST_CASE("an empty file says it is empty") {
  const auto path = TempPath("empty");
  WriteBytes(path, "");
  auto t = LoadTrace(path);
  REQUIRE_FALSE(t.ok());
  CHECK(Mentions(t.error(), "empty"));
  CHECK(Mentions(t.error(), path));
  std::remove(path.c_str());
}

TEST_CASE("random bytes and a bad magic are not a stallprof trace") {
  const auto path = TempPath("random");
  std::mt19937 rng(1);
  std::string junk(4096, '\0');
  for (auto& ch : junk) ch = static_cast<char>(rng());
  WriteBytes(path, junk);
  auto t = LoadTrace(path);
  REQUIRE_FALSE(t.ok());
  CHECK(Mentions(t.error(), "not a stallprof trace"));
  WriteBytes(path, "SPTRACX\n" + junk);
  CHECK(Mentions(LoadTrace(path).error(), "not a stallprof trace"));
  std::remove(path.c_str());
}

TEST_CASE("random bytes after a valid magic are rejected cleanly, never a crash") {
  const auto path = TempPath("junkbody");
  std::mt19937 rng(2);
  for (int round = 0; round < 200; ++round) {
    std::string junk(rng() % 300, '\0');
    for (auto& ch : junk) ch = static_cast<char>(rng());
    WriteBytes(path, std::string(kTraceMagic, 8) + junk);
    auto t = LoadTrace(path);
    if (!t.ok()) CHECK(Mentions(t.error(), path));
  }
  std::remove(path.c_str());
}

TEST_CASE("a trace cut at every byte offset loads up to its last complete chunk") {
  const auto path = TempPath("whole");
  const auto cut_path = TempPath("cut");
  auto ends = WriteSmallTrace(path);
  const std::string whole = ReadBytes(path);
  REQUIRE(ends.back() == whole.size());
  for (size_t cut = 1; cut < whole.size(); ++cut) {
    INFO("cut at " << cut);
    WriteBytes(cut_path, whole.substr(0, cut));
    auto t = LoadTrace(cut_path);
    if (cut < ends[0]) {
      // Not even the header survived.
      REQUIRE_FALSE(t.ok());
      CHECK(Mentions(t.error(), "no header"));
      continue;
    }
    REQUIRE(t.ok());
    const bool on_boundary = std::find(ends.begin(), ends.end(), cut) != ends.end();
    CHECK(t->truncated == !on_boundary);
    // Spans of complete batches only: 10 per batch chunk that ended before the cut.
    size_t batches = 0;
    for (size_t i = 3; i < 6; ++i) batches += ends[i] <= cut;
    CHECK(t->spans.size() == 10 * batches);
    CHECK_FALSE(t->footer.has_value());
  }
  auto full = LoadTrace(path);
  REQUIRE(full.ok());
  CHECK_FALSE(full->truncated);
  CHECK(full->footer.has_value());
  std::remove(path.c_str());
  std::remove(cut_path.c_str());
}

TEST_CASE("a flipped byte inside a chunk is a CRC error at that chunk's offset") {
  const auto path = TempPath("crc");
  auto ends = WriteSmallTrace(path);
  std::string bytes = ReadBytes(path);
  bytes[ends[3] + 3] ^= 0x40;  // inside the second span batch
  WriteBytes(path, bytes);
  auto t = LoadTrace(path);
  REQUIRE_FALSE(t.ok());
  CHECK(Mentions(t.error(), "corrupt"));
  CHECK(Mentions(t.error(), "CRC"));
  CHECK(Mentions(t.error(), "offset " + std::to_string(ends[3])));
  std::remove(path.c_str());
}

TEST_CASE("a trace from a newer major version asks to upgrade") {
  const auto path = TempPath("newer");
  REQUIRE(TraceWriter::Create(path, Header(kTraceVersionMajor + 1)).ok());
  auto t = LoadTrace(path);
  REQUIRE_FALSE(t.ok());
  CHECK(Mentions(t.error(), "newer stallprof"));
  CHECK(Mentions(t.error(), "trace version 2.3"));
  CHECK(Mentions(t.error(), "upgrade stallprof"));
  auto r = ChunkReader::Open(path);
  REQUIRE(r.ok());
  pb::Chunk c;
  CHECK_FALSE((*r)->Next(c).ok());
  std::remove(path.c_str());
}

TEST_CASE("a trace that starts without a header chunk is rejected") {
  const auto path = TempPath("noheader");
  {
    auto w = TraceWriter::Create(path, Header());
    REQUIRE(w.ok());
  }
  // Rewrite it with the strings chunk first: build by hand with a second writer's bytes.
  const auto tmp = TempPath("noheader2");
  {
    auto w = TraceWriter::Create(tmp, Header());
    pb::Chunk c;
    c.mutable_strings()->set_first_id(1);
    c.mutable_strings()->add_value("x");
    REQUIRE((*w)->Write(c).ok());
    REQUIRE((*w)->Close().ok());
  }
  const std::string header_only = ReadBytes(path);
  const std::string both = ReadBytes(tmp);
  WriteBytes(path, std::string(kTraceMagic, 8) + both.substr(header_only.size()));
  auto t = LoadTrace(path);
  REQUIRE_FALSE(t.ok());
  CHECK(Mentions(t.error(), "no header chunk"));
  std::remove(path.c_str());
  std::remove(tmp.c_str());
}

namespace {
// Writes header + strings("a") + thread 0 + `bad`, and returns LoadTrace's result.
Result<Trace> LoadWith(const std::string& path, const pb::Chunk& bad) {
  auto w = TraceWriter::Create(path, Header());
  REQUIRE(w.ok());
  pb::Chunk c;
  c.mutable_strings()->set_first_id(1);
  c.mutable_strings()->add_value("a");
  REQUIRE((*w)->Write(c).ok());
  c.mutable_thread()->set_thread_id(0);
  REQUIRE((*w)->Write(c).ok());
  REQUIRE((*w)->Write(bad).ok());
  REQUIRE((*w)->Close().ok());
  return LoadTrace(path);
}
}  // namespace

TEST_CASE("undefined ids and inconsistent columns are rejected as corrupt") {
  const auto path = TempPath("ids");
  auto expect_corrupt = [&](const pb::Chunk& bad, const char* why) {
    INFO(why);
    auto t = LoadWith(path, bad);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().kind == ErrorKind::kInput);
    CHECK(Mentions(t.error(), "corrupt"));
    CHECK(Mentions(t.error(), path));
  };
  pb::Chunk c;
  auto* s = c.mutable_spans();
  s->set_thread_id(5);
  s->add_start_delta_ns(0);
  s->add_duration_ns(1);
  s->add_arg(0);
  s->add_name(1);
  expect_corrupt(c, "spans of an undefined thread");
  s->set_thread_id(0);
  s->set_name(0, 9);
  expect_corrupt(c, "an undefined span name");
  s->set_name(0, 1);
  s->add_arg(1);
  expect_corrupt(c, "column lengths differ");
  s->mutable_arg()->RemoveLast();
  s->add_kind(2);
  expect_corrupt(c, "an unknown kind");
  s->set_kind(0, 1);
  s->add_has_cpu_bits(1);
  expect_corrupt(c, "a has_cpu bit without cpu time");
  s->add_cpu_ns(5);
  s->add_delay_ns(1);
  s->set_has_cpu_bits(0, 2);
  expect_corrupt(c, "a has_cpu bit beyond the last span");
  s->set_has_cpu_bits(0, 1);
  REQUIRE(LoadWith(path, c).ok());  // now consistent

  pb::Chunk th;
  th.mutable_thread()->set_thread_id(3);
  expect_corrupt(th, "a thread id out of sequence");
  th.mutable_thread()->set_thread_id(1);
  th.mutable_thread()->set_name(77);
  expect_corrupt(th, "an undefined thread name");

  pb::Chunk str;
  str.mutable_strings()->set_first_id(9);
  expect_corrupt(str, "strings out of sequence");

  pb::Chunk cfg;
  cfg.mutable_config()->set_key(40);
  cfg.mutable_config()->set_u64(1);
  expect_corrupt(cfg, "an undefined config key");

  pb::Chunk ps;
  ps.mutable_process_samples()->add_t_ns(1);
  expect_corrupt(ps, "process sample columns differ");

  // Every column of one row, but the main thread's CPU with two.
  pb::Chunk main_thread;
  auto* row = main_thread.mutable_process_samples();
  row->add_t_ns(1), row->add_cpu_ns(1), row->add_read_bytes(0), row->add_rchar(0), row->add_rss_bytes(0);
  row->add_delay_ns(0), row->add_threads(1), row->add_main_thread_cpu_ns(1), row->add_main_thread_cpu_ns(2);
  expect_corrupt(main_thread, "process sample columns differ");

  pb::Chunk drops;
  drops.mutable_drops()->set_thread_id(8);
  expect_corrupt(drops, "drops of an undefined thread");

  pb::Chunk header;
  *header.mutable_header() = Header();
  expect_corrupt(header, "a second header");
  std::remove(path.c_str());
}
