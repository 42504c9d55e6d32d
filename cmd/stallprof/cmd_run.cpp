// stallprof run [options] -- command args...: thin CLI over collect::Run.
#include <fmt/core.h>
#include <unistd.h>

#include "cli.h"
#include "collect/collect.h"
#include "common/units.h"

namespace stallprof::cli {
namespace {

// --strict: what `run` returns when the trace is incomplete (writing it failed
// or the ring dropped events), whatever the command returned.
constexpr int kExitIncompleteTrace = 4;

struct RunFlags {
  std::string output = "trace.pb";
  std::string ring_size = "64M";
  uint32_t lanes = SP_DEFAULT_LANES;
  uint32_t sample_ms = 100;
  bool quiet = false;
  bool strict = false;
  bool no_handoff_timing = false;
  std::vector<std::string> command;
};

int RunCommand(const RunFlags& flags) {
  collect::RunOptions options;
  options.command = flags.command;
  options.output = flags.output;
  auto ring = ParseBytes(flags.ring_size, "--ring-size");
  if (!ring.ok()) return ReportError(ring.error());
  if (*ring < (1u << 20))
    return ReportError(UsageError(fmt::format("bad --ring-size {}, it is below 1M, use at least 1M (default 64M)",
                                              flags.ring_size)));
  options.ring_bytes = *ring;
  options.lanes = flags.lanes;
  options.sample_ms = flags.sample_ms;
  options.live_status = flags.quiet ? collect::LiveStatus::kOff : collect::LiveStatus::kAuto;
  options.time_handoffs = !flags.no_handoff_timing;

  auto result = collect::Run(options);
  if (!result.ok()) return ReportError(result.error());
  const auto& r = *result;
  if (r.launch_error) ReportError(*r.launch_error);
  if (r.write_error) ReportError(*r.write_error);
  for (const auto& w : r.warnings) fmt::print(stderr, "stallprof: warning: {}\n", w);
  if (r.dropped > r.laneless_dropped) {
    const uint64_t bigger = std::max<uint64_t>(options.ring_bytes * 4, 256ull << 20);
    fmt::print(stderr, "stallprof: warning: {} events dropped (ring full); use --ring-size {}M\n",
               r.dropped - r.laneless_dropped, bigger >> 20);
  }
  if (r.laneless_dropped > 0)
    fmt::print(stderr, "stallprof: warning: {} events dropped (all {} ring lanes taken by threads at once); use --lanes {}\n",
               r.laneless_dropped, options.lanes, sp_suggested_lanes(options.lanes));
  // One summary line, terminal or not (batch logs need to know where the trace went).
  if (!flags.quiet && r.trace_written)
    fmt::print(stderr, "stallprof: wrote {} ({} events, {} dropped, {:.1f} s, {}){}\n", r.trace_path,
               r.spans - std::min(r.spans, r.events_lost),
               r.dropped, r.duration_s, FormatBytes(static_cast<double>(r.trace_bytes)),
               r.incomplete ? ", INCOMPLETE" : "");
  if (!flags.quiet && r.trace_written)
    for (const auto& n : r.notes) fmt::print(stderr, "stallprof: note: {}\n", n);
  if (flags.strict && (r.incomplete || r.dropped > 0 || r.write_error)) return kExitIncompleteTrace;
  return r.exit_code;
}

}  // namespace

void RegisterRun(CLI::App& app, Action& action) {
  auto flags = std::make_shared<RunFlags>();
  auto* sub = app.add_subcommand("run", "Run a command and record its input pipeline into a trace");
  sub->footer(
      "The command runs unchanged: Python scripts that use torch.utils.data.DataLoader are\n"
      "recorded automatically; stallprof returns the command's own exit status.\n"
      "A trace that lost events (disk full, ring full, every lane taken) is reported on stderr; with --strict\n"
      "the run then exits 4 instead of the command's status.\n"
      "Everything after '--' belongs to the command, flags included.\n\n"
      "Examples:\n"
      "  stallprof run -- /usr/bin/python3 train.py --epochs 2      # writes ./trace.pb\n"
      "  stallprof run -o runs/rank%r.pb --sample-ms 50 -- ./my_loader_bench\n"
      "  stallprof analyze trace.pb");
  sub->add_option("-o,--output", flags->output,
                  "Trace file to write (default trace.pb); %r = RANK, %h = hostname, %p = pid. "
                  "Its directory must exist");
  sub->add_option("--ring-size", flags->ring_size,
                  "Shared-memory ring size, e.g. 64M, 256M, 1G (default 64M); raise it if events are dropped. "
                  "The ring is held for the whole run and the pages its lanes touch stay resident, up to the "
                  "full size; at most half of the machine's memory");
  AddWholeNumber(sub, "--lanes", flags->lanes, "Ring lanes: threads that can record at once (default 128)", 1, SP_MAX_LANES);
  AddWholeNumber(sub, "--sample-ms", flags->sample_ms, "Period of the /proc sampler in milliseconds (default 100)", 1, 60000);
  sub->add_flag("-q,--quiet", flags->quiet, "No live status line and no summary line on stderr");
  sub->add_flag("--strict", flags->strict,
                "Exit 4 (not the command's status) when the trace is incomplete: writing it failed (disk "
                "full) or the ring dropped events");
  sub->add_flag("--no-handoff-timing", flags->no_handoff_timing,
                "Skip timing after the job what handing its DataLoaders' batches from a worker to the main "
                "process costs (a few seconds in the job's Python): whatif uses it to predict workers from "
                "num_workers=0, and to take the batches' shared memory out of a profile with workers to predict "
                "none");
  sub->add_option("command", flags->command, "The command to run, after '--'")->required();
  sub->positionals_at_end(true);
  sub->callback([flags, &action] { action = [flags] { return RunCommand(*flags); }; });
}

}  // namespace stallprof::cli
