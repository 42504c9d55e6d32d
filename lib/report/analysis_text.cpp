#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "analysis_report.h"
#include "terminal.h"
#include "common/units.h"
#include "model/model.h"
#include "ranks_report.h"

namespace stallprof::report {

using namespace stallprof::analysis;

namespace {

std::string Pct(double fraction) { return fmt::format("{:.0f}%", fraction * 100); }
std::string Pct1(double fraction) { return fmt::format("{:.1f}%", fraction * 100); }
std::string Ms(double seconds) { return fmt::format("{:.2f}", seconds * 1e3); }

struct Style {
  Colour colour;
  std::string Paint(const std::string& text, const char* code) const {
    return colour == Colour::kOn ? fmt::format("\x1b[{}m{}\x1b[0m", code, text) : text;
  }
  std::string Bold(const std::string& t) const { return Paint(t, "1"); }
  std::string Dim(const std::string& t) const { return Paint(t, "2"); }
  std::string ForVerdict(const std::string& t, Verdict v) const {
    switch (v) {
      case Verdict::kHighlyInputBound: return Paint(t, "1;31");
      case Verdict::kModeratelyInputBound: return Paint(t, "1;33");
      case Verdict::kNotInputBound: return Paint(t, "1;32");
    }
    return t;
  }
};

void Heading(std::string& out, const Style& style, const std::string& title) {
  out += "\n" + style.Bold(title) + "\n";
}

void SummaryRow(std::string& out, const char* label, const Summary& s) {
  out += fmt::format("    {:<8} {:>9} {:>9} {:>9} {:>9} {:>10}\n", label, Ms(s.mean), Ms(s.p50), Ms(s.p90), Ms(s.p99),
                     FormatSeconds(s.total));
}

std::string BatchSizeText(const LoaderConfig& c) {
  if (c.batch_size_from == "getitem spans")
    return c.batch_size_set > 0 ? fmt::format("{:g}, {:.3g} samples a batch on average (from getitem spans: {} "
                                              "partial)",
                                              c.batch_size_set, c.batch_size,
                                              c.num_workers > 0 ? "the workers' last batches" : "each epoch's last batch")
                                : fmt::format("{:.3g} (mean, from getitem spans)", c.batch_size);
  if (!c.batch_size_known) return "? (batches counted as samples)";
  if (c.batch_size_from == "first batch") return fmt::format("{:g} (the first batch's leading dimension)", c.batch_size);
  return fmt::format("{:g}", c.batch_size);
}

void LoaderSection(std::string& out, const Style& style, const TraceAnalysis& trace, const LoaderAnalysis& l,
                   uint32_t warmup) {
  const auto& c = l.config;
  std::string who = fmt::format("{} (pid {}{}, loader {})", TerminalSafe(c.name), l.pid, l.rank >= 0 ? fmt::format(", rank {}", l.rank) : "",
                                l.scope);
  Heading(out, style, "== " + who + " ==");
  out += fmt::format("  {}{}\n", TerminalSafe(LoaderSetupLine(c)),
                     c.dataset_len ? fmt::format(", dataset {} samples{}", c.dataset_len,
                                                 c.dataset_bytes   ? " (" + FormatBytes(static_cast<double>(c.dataset_bytes)) + ")"
                                                 : c.held_bytes   ? fmt::format(" ({} in the {} {} it reads)", FormatBytes(static_cast<double>(c.held_bytes)),
                                                                               TerminalSafe(c.held_kinds),
                                                                               c.held_files == 1 ? "file" : "files")
                                                                  : "")
                                   : "");
  if (l.scopes.size() > 1)
    out += fmt::format("  {} DataLoader objects created one after another under this name (the settings above are the "
                       "last one's)\n",
                       l.scopes.size());
  const uint64_t unstepped = l.iterations.size() - l.SteppedIterations();
  out += fmt::format("  {} iterations in {} epoch(s){}, {:.0f} samples in {}: {:.1f} samples/s whole run (start-up "
                     "included), {}\n",
                     l.iterations.size(), l.epochs.size(),
                     !unstepped        ? std::string()
                     : l.reads_ahead ? fmt::format(" ({} the last of an epoch, its step after the StopIteration not "
                                                   "seen: not counted)",
                                                   unstepped)
                                     : fmt::format(" ({} taken as the loop left an epoch, their steps not seen: not "
                                                   "counted)",
                                                   unstepped),
                     l.samples, FormatSeconds(l.active_s), l.samples_per_s,
                     l.steady_samples_per_s > 0 && l.steady_fallback
                         ? fmt::format("{:.1f} samples/s over all iterations (no full batch past the warm-up, so no steady state: "
                                       "whatif compares the whole run)",
                                       l.steady_samples_per_s)
                     : l.steady_samples_per_s > 0
                         ? fmt::format("{:.1f} samples/s steady state (past the warm-up; what whatif and recommend compare "
                                       "with)",
                                       l.steady_samples_per_s)
                         : std::string("no steady state (no step of known length: whatif and recommend have nothing to "
                                       "compare with)"));
  for (const auto& n : l.nested_loaders)
    out += fmt::format("  loader '{}' ran whole inside this loader's steps {} time(s), {} in all: left out of this "
                       "loader's times (its own account is below)\n",
                       TerminalSafe(n.name), n.runs, FormatSeconds(n.seconds));

  Heading(out, style, "  Step time (ms)");
  out += fmt::format("    {:<8} {:>9} {:>9} {:>9} {:>9} {:>10}\n", "", "mean", "p50", "p90", "p99", "total");
  if (l.steady_fallback)
    out += fmt::format("    steady state: no full batch past the {} warm-up iterations of an epoch{}; all {} iterations used\n",
                       warmup, l.drain_iterations ? fmt::format(" before its last {}", l.drain_iterations) : "", l.step_steady.count);
  else
    out += fmt::format("    steady state ({} iterations, first {}{} of each epoch skipped)\n", l.step_steady.count, warmup,
                       l.drain_iterations ? fmt::format(" and last {} (in flight when the sampler ran out)", l.drain_iterations) : "");
  SummaryRow(out, "step", l.step_steady);
  SummaryRow(out, "wait", l.wait_steady);
  SummaryRow(out, "compute", l.compute_steady);
  out += fmt::format("    with warm-up ({} iterations): stall {}\n", l.step_all.count, Pct(l.stall_fraction_all));
  SummaryRow(out, "step", l.step_all);
  SummaryRow(out, "wait", l.wait_all);
  SummaryRow(out, "compute", l.compute_all);

  Heading(out, style, "  Where the wall time goes (the account; lines sum to the wall time)");
  const auto& all = l.account_all;
  const auto& steady = l.account_steady;
  bool estimated = false;
  out += fmt::format("    {:<22} {:>10} {:>6}  {:>10} {:>6}  {}\n", "", "whole run", "", l.steady_fallback ? "steady*" : "steady", "",
                     "evidence (whole run)");
  for (size_t k = 0; k < all.lines.size() && k < steady.lines.size(); ++k) {
    const auto& a = all.lines[k];
    const auto& st = steady.lines[k];
    estimated |= a.estimated;
    out += fmt::format("    {:<22} {:>10} {:>6}  {:>10} {:>6}  {}\n", std::string(ToString(a.cause, l.config.num_workers)) + (a.estimated ? " ~" : ""),
                       FormatSeconds(a.seconds), Pct1(a.share), FormatSeconds(st.seconds), Pct1(st.share), a.evidence);
  }
  out += fmt::format("    {:<22} {:>10} {:>6}  {:>10} {:>6}\n", "wall time", FormatSeconds(all.wall_s), "", FormatSeconds(steady.wall_s), "");
  if (l.steady_fallback) out += "    * no full batch past the warm-up: the steady columns are the whole run\n";
  if (estimated)
    out += "    ~ estimated in part: the counter budget sampled CPU, delay and bytes read; the evidence gives the 95% bound\n";
  if (!l.advice.empty()) {
    out += "    advice:\n";
    for (const auto& a : l.advice) out += "      - " + a + "\n";
  }

  Heading(out, style, "  DS-Analyzer view of the steady account");
  const auto& s = l.split;
  auto row = [&](const char* label, double seconds) {
    out += fmt::format("    {:<44} {:>10} {:>7}\n", label, FormatSeconds(seconds), s.step_s > 0 ? Pct1(seconds / s.step_s) : "-");
  };
  row("T = wall time", s.step_s);
  row("T_ingest = compute", s.ingest_s);
  row("T_prep = T - fetch stall (fully cached)", s.cached_s);
  row("stall = T - compute - stallprof's own cost", s.measured_stall_s);
  row("  fetch stall = storage", s.fetch_stall_s);
  row("  prep stall = worker CPU + CPU contention", s.prep_stall_s);
  row("  handoff", s.handoff_s);

  if (!l.epochs.empty()) {
    Heading(out, style, "  Epochs");
    out += fmt::format("    {:>5} {:>7} {:>9} {:>10} {:>10} {:>6} {:>13} {:>11}\n", "epoch", "iters", "samples", "time", "samples/s",
                       "stall", "page cache +", "disk read");
    auto epoch_row = [&](const EpochStats& e) {
      out += fmt::format("    {:>5} {:>7} {:>9.0f} {:>10} {:>10.1f} {:>6} {:>13} {:>11}\n", e.index, e.iterations, e.samples,
                         FormatSeconds(e.seconds), e.samples_per_s, Pct(e.stall_fraction),
                         e.has_system ? FormatBytes(e.page_cache_growth_bytes) : "-",
                         e.has_system ? FormatBytes(e.disk_read_bytes) : "-");
    };
    // A long run (200 epochs of CIFAR, an iterator per step) folds past a
    // dozen rows: the first epochs (cold reads, worker start), a line for the
    // middle ones with their spread and the slowest, the last ones.
    constexpr size_t kMostRows = 12, kFirstRows = 4, kLastRows = 3;
    const size_t n = l.epochs.size();
    if (n <= kMostRows) {
      for (const auto& e : l.epochs) epoch_row(e);
    } else {
      for (size_t i = 0; i < kFirstRows; ++i) epoch_row(l.epochs[i]);
      const std::span<const EpochStats> middle(l.epochs.data() + kFirstRows, n - kFirstRows - kLastRows);
      const auto slowest = std::min_element(middle.begin(), middle.end(), [](const EpochStats& a, const EpochStats& b) {
        return a.samples_per_s < b.samples_per_s;
      });
      out += fmt::format("    ... {} epochs ({} to {}): {}; the slowest epoch {} ({:.1f} samples/s); every one in --json\n",
                         middle.size(), middle.front().index, middle.back().index, EpochsSpread(middle), slowest->index,
                         slowest->samples_per_s);
      for (size_t i = n - kLastRows; i < n; ++i) epoch_row(l.epochs[i]);
    }
    if (const auto& f = l.first_epoch; f.available)
      out += fmt::format("    first epoch {:.1f} samples/s, later epochs {:.1f} samples/s ({})\n", f.first_samples_per_s,
                         f.later_samples_per_s, f.why);
  }

  if (!l.workers.empty()) {
    Heading(out, style, "  Workers");
    out += fmt::format("    {:>8} {:>8} {:>7} {:>6} {:>6} {:>7} {:>7} {:>11}\n", "pid", "batches", "busy", "CPU", "I/O", "runq", "mean", "");
    // Workers that do not persist are new processes each epoch: past a
    // dozen rows, the first 8 and a line for the rest (--json has all).
    constexpr size_t kMostRows = 12, kRowsWhenFolded = 8;
    const size_t rows = l.workers.size() > kMostRows ? kRowsWhenFolded : l.workers.size();
    for (size_t i = 0; i < rows; ++i) {
      const auto& w = l.workers[i];
      out += fmt::format("    {:>8} {:>8} {:>7} {:>6} {:>6} {:>7} {:>7} {:>11}\n", w.in_main_process ? "main" : std::to_string(w.pid),
                         w.batches, Pct(w.busy_fraction), Pct(w.cpu_fraction), Pct(w.io_fraction), Pct(w.delay_fraction),
                         FormatSeconds(w.mean_produce_s), w.straggler ? style.Paint("straggler", "1;33") : "");
    }
    if (rows < l.workers.size()) {
      uint64_t batches = 0;
      double produce_s = 0;
      size_t stragglers = 0;
      for (size_t i = rows; i < l.workers.size(); ++i) {
        batches += l.workers[i].batches;
        produce_s += l.workers[i].mean_produce_s * l.workers[i].batches;
        stragglers += l.workers[i].straggler;
      }
      out += fmt::format("    ... {} more workers ({}), {} batches, {} a batch{}; every one in --json\n", l.workers.size() - rows,
                         l.config.persistent_workers ? "persistent" : "not persistent: each epoch starts its own", batches,
                         FormatSeconds(batches ? produce_s / batches : 0),
                         stragglers ? style.Paint(fmt::format(", {} straggler(s)", stragglers), "1;33") : "");
    }
    out += fmt::format("    imbalance (max/min batches - 1): {}; batch produce time p50 {} p99 {}\n", Pct(l.worker_imbalance),
                       FormatSeconds(l.produce.p50), FormatSeconds(l.produce.p99));
    if (l.config.num_workers > 0)
      out += "    " + TerminalSafe(PrefetchQueueLine(l)) + "\n";
  }

  if (!l.stages.empty()) {
    Heading(out, style, "  Stages (Plumber; rates in samples/s)");
    out += fmt::format("    {:<24} {:>7} {:>9} {:>9} {:>4} {:>10} {:>10} {:>10} {:>6}\n", "stage", "count", "wall", "CPU", "par",
                       "per-core", "parallel", "observed", "util");
    bool attributed = false, estimated_cpu = false;
    for (const auto& st : l.stages) {
      attributed |= st.cpu_source == CpuSource::kAttributed;
      estimated_cpu |= st.cpu_source == CpuSource::kEstimated;
      out += fmt::format("    {:<24} {:>7} {:>9} {:>9} {:>4} {:>10.1f} {:>10.1f} {:>10.1f} {:>6} {}\n", TerminalSafe(st.name), st.count,
                         FormatSeconds(st.wall_s), FormatSeconds(st.cpu_s) + (st.cpu_source == CpuSource::kAttributed   ? "*"
                                                    : st.cpu_source == CpuSource::kEstimated ? "~"
                                                                                             : ""),
                         st.parallelism, st.per_core_rate, st.parallel_rate, st.observed_rate, Pct(st.utilization),
                         !st.bottleneck     ? ""
                         : l.StagesBound() ? style.Paint("<- bottleneck", "1;33")
                                           : "<- slowest stage (the loader's bottleneck is elsewhere)");
    }
    if (estimated_cpu) out += "    ~ CPU estimated: the spans' sampled CPU per wall second times their wall time (counter budget)\n";
    if (attributed) out += "    * CPU attributed from the wall time with the fetch spans' CPU/wall ratio (the span has no CPU of its own)\n";
  }
  if (!l.main_stages.empty()) {
    Heading(out, style, "  Main-thread stages (yours, between next() calls: in the compute line, not the pipeline)");
    out += fmt::format("    {:<24} {:>7} {:>9} {:>9} {:>10} {:>11}\n", "stage", "count", "wall", "CPU", "per batch", "of compute");
    const double batches = static_cast<double>(l.account_all.batches);
    const double compute = l.account_all.Seconds(Cause::kCompute);
    for (const auto& st : l.main_stages)
      out += fmt::format("    {:<24} {:>7} {:>9} {:>9} {:>10} {:>11}\n", TerminalSafe(st.name), st.count, FormatSeconds(st.wall_s),
                         FormatSeconds(st.cpu_s) + (st.cpu_source == CpuSource::kEstimated ? "~" : ""),
                         batches > 0 ? FormatSeconds(st.wall_s / batches) : "-", compute > 0 ? Pct(st.wall_s / compute) : "-");
  }
  (void)trace;
}

}  // namespace

std::string CoverageLine(const TraceAnalysis& t) {
  const auto& c = t.coverage;
  if (!(t.duration_s > 0 && c.in_epochs_s > 0)) return {};
  // What the time before the first epoch went on, where the sampler saw it:
  // a cold start's library and index reads, set-up's CPU.
  std::string before;
  if (c.before_job_cores >= 0) before += fmt::format(": the job {:.2f} cores busy", c.before_job_cores);
  if (c.before_disk_read_bytes >= 0)
    before += fmt::format("{} {} read from the device", before.empty() ? ":" : ",", FormatBytes(c.before_disk_read_bytes));
  return fmt::format("run {}: in the loaders' epochs {} ({}), before the first {} (the interpreter's start, imports, set-up{}), "
                     "between epochs {}, after the last {}",
                     FormatSeconds(t.duration_s), FormatSeconds(c.in_epochs_s), Pct(c.in_epochs_s / t.duration_s),
                     FormatSeconds(c.before_s), before, FormatSeconds(c.between_s), FormatSeconds(c.after_s));
}

std::string EpochsSpread(std::span<const EpochStats> epochs) {
  std::vector<double> seconds, rate, stall;
  for (const auto& e : epochs) {
    seconds.push_back(e.seconds);
    rate.push_back(e.samples_per_s);
    stall.push_back(e.stall_fraction);
  }
  return fmt::format("time {}; samples/s {}; stall {}", SpreadText(seconds, [](double x) { return FormatSeconds(x); }),
                     SpreadText(rate, [](double x) { return fmt::format("{:.1f}", x); }), SpreadText(stall, Pct));
}

std::string OutsideEpochsNote(const TraceAnalysis& t) {
  const double outside = analysis::TimeOutsideEpochs(t);
  if (!(outside > 0)) return {};
  return fmt::format("{} of the run's {} ({}) passed outside the loaders' epochs, after the last or between them: the "
                     "verdicts cover the epochs' {}. Training that went on there drew from no traced loader "
                     "(itertools.cycle(loader) replays the first epoch's batches, the same augmentations), or the time "
                     "went to work without a DataLoader (evaluation, checkpoints)",
                     FormatSeconds(outside), FormatSeconds(t.duration_s), Pct(outside / t.duration_s),
                     FormatSeconds(t.coverage.in_epochs_s));
}

std::string StealNote(const TraceAnalysis& t) {
  const auto& s = t.system;
  if (!s.available || !s.steal_measured || s.steal_fraction < model::kStealSlowsHost) return {};
  return fmt::format("the hypervisor took {} of this machine's CPU time: every time here is a slowed host's (its threads "
                     "ran late, its sleepers woke late); compare it with runs, and whatif's predictions, that saw "
                     "little steal",
                     Pct1(s.steal_fraction));
}

std::string UsableCoresText(const TraceAnalysis& t, const std::string& share) {
  if (t.cpu_quota_cores > 0)
    return fmt::format("{} of its CPU quota of {:g} core{}; {} usable", share, t.cpu_quota_cores,
                       t.cpu_quota_cores == 1 ? "" : "s", t.usable_cores);
  return fmt::format("{} of {} usable", share, t.usable_cores);
}

std::string OtherProcessesText(const TraceAnalysis& t) {
  const auto& s = t.system;
  if (!s.available || !s.outside_busy_measured || s.outside_busy_cores < 0.05) return {};
  if (s.unusable_cores <= 0) return fmt::format("other processes kept {:.2f} cores busy", s.outside_busy_cores);
  return fmt::format("other processes kept {:.2f} cores busy, {:.2f} beyond the {:g} core{} the job could not use (its "
                     "CPU quota or affinity)",
                     s.outside_busy_cores, std::max(0.0, s.outside_busy_cores - s.unusable_cores), s.unusable_cores,
                     s.unusable_cores == 1 ? "" : "s");
}

std::string CpuQuotaNote(const TraceAnalysis& t) {
  const auto& s = t.system;
  // 90% of the quota busy: the rest is the periods' edges, where a thread
  // throttled late in one period leaves the quota's last slice unspent.
  constexpr double kQuotaSpent = 0.9;
  if (!(t.cpu_quota_cores > 0) || !s.available || s.job_cpu_fraction < kQuotaSpent) return {};
  return fmt::format("the job's CPU cgroup allows {:g} core{} (cpu.cfs_quota_us or cpu.max: a container's CPU limit) and "
                     "the job kept {:.2f} busy: its threads waited for the quota in the run queue, which the account "
                     "shows as CPU contention, and as compute where the step waited; predict a larger quota with "
                     "`stallprof whatif --cores N`",
                     t.cpu_quota_cores, t.cpu_quota_cores == 1 ? "" : "s", s.job_cpu_cores);
}

std::string PrefetchQueueLine(const analysis::LoaderAnalysis& l) {
  const auto& p = l.prefetch;
  // A batch is fetched when its fetch span ends; where the worker's next
  // fetch held the GIL, its sending thread could not send it until then.
  const std::string held =
      p.SendsHeld() ? fmt::format(" (fetched, not sent: {} of {} batches that finished while their worker ran a later "
                                  "fetch were held in it until that fetch ended, its sending thread waiting for the "
                                  "GIL; the handoff line above)",
                                  p.sends_held, p.sends_held + p.sends_free)
                    : "";
  return fmt::format("prefetch queue: {:.1f} batches fetched and not yet taken on average at next(){} (max {}, capacity "
                     "{}); none at {} of next() calls; {}",
                     p.mean_ready, held, p.max_ready, p.capacity, Pct(p.starved_fraction),
                     p.ever_full ? "was full: workers idled, the pipeline outran the model"
                                 : "never full: the workers never got ahead by a full queue");
}

std::string LoaderSetupLine(const analysis::LoaderConfig& c) {
  // Without workers the start method and the prefetch depth set nothing.
  const std::string workers =
      c.num_workers == 0
          ? "0 workers (the main process fetches)"
          : fmt::format("{} workers{}, prefetch {}", c.num_workers,
                        c.multiprocessing_context.empty() ? "" : " (" + c.multiprocessing_context + ")", c.prefetch_factor);
  std::string text = fmt::format("batch {}, {}, pin_memory {}, ", BatchSizeText(c), workers,
                                 c.pin_memory                 ? "on"
                                 : c.pin_memory_unavailable ? "off (True asked for, but no CUDA device: torch pins nothing)"
                                                              : "off");
  text += !c.iterator_kept_by.empty()
                         ? fmt::format("workers kept across epochs ({}: one iterator for every epoch), ", c.iterator_kept_by)
                     : c.persistent_workers ? "persistent workers, "
                                            : "";
  // An IterableDataset's loader has torch's placeholder sampler: say what it is.
  text += c.Iterable() ? "an IterableDataset (no sampler)" : c.sampler.empty() ? "sampler ?" : c.sampler;
  if (c.sampler_order_repeats)
    text += " (the same order every epoch: set_epoch(epoch) was not called before each epoch's iterator, so the shuffle "
            "repeats)";
  return text;
}

std::string VerdictLine(const LoaderAnalysis& l) {
  std::string split;
  if (l.split.available && l.split.step_s > 0) {
    const double step = l.split.step_s;
    // The stall's other parts, so that the parts add up to it: the DS-Analyzer
    // split has no line for blocking without device reads or for start-up
    // (in the steady account only when no iteration is past the warm-up).
    const auto part = [&](const char* name, double seconds) {
      return seconds >= 0.005 * step ? fmt::format(", {} {}", name, Pct(seconds / step)) : std::string();
    };
    const auto& a = l.account_steady;
    // Storage the first epoch paid (the page cache warming) is in the steady
    // state's epoch 0 too: say so, since a longer run pays it once.
    const bool first_epoch_fetch = l.split.fetch_stall_s >= 0.005 * step && StoragePaidInFirstEpoch(l);
    split = fmt::format(" (fetch {}{}, prep {}{}{}{})", Pct(l.split.fetch_stall_s / step),
                        first_epoch_fetch ? " from the first epoch's cold reads" : "", Pct(l.split.prep_stall_s / step),
                        part("handoff", l.split.handoff_s), part("other blocking", a.Seconds(Cause::kOtherBlocking)),
                        part("start-up", a.Seconds(Cause::kStartup)));
  }
  // The verdict is the steady state's; start-up can still take most of the
  // run (spawned workers on short epochs: 86% of it, a 6% steady stall).
  std::string whole_run;
  if (const double startup = WholeRunStartupShare(l); startup > 0)
    whole_run = fmt::format("; whole run: {} epoch start-up", Pct(startup));
  // A loader iterated with another (zip): its steps also wait for the other's
  // data, inside its compute line; the stall above is its own.
  std::string zipped;
  for (const auto& z : l.zipped_loaders)
    if (const double share = ZippedShare(l, z); share >= kZippedNamedShare)
      zipped += fmt::format("; and {} for loader '{}' (zipped)", Pct(share), z.name);
  // Iterated on a prefetch thread: the steps are that thread's, and the
  // training loop's own wait is at most the thread's.
  const auto& prefetch = l.prefetch_thread;
  if (prefetch.LoopBound())
    return fmt::format("{}: {}: iterated on a prefetch thread (tid {}) that waited {} of the time for the training loop "
                       "to take its batches: the loop sets the pace; the thread's own wait for data {}{}; bottleneck: {}{}",
                       l.config.name, ToString(l.verdict), prefetch.tid, Pct(prefetch.steady_blocked_share),
                       Pct(l.stall_fraction), split, ToString(l.bottleneck, l.config.num_workers), whole_run);
  if (prefetch.HandsOn())
    return fmt::format("{}: {}: up to {} of step time waiting for data{} (iterated on a prefetch thread (tid {}) the "
                       "training loop never held up: the loop waits at most what the thread waits){}; bottleneck: {}{}",
                       l.config.name, ToString(l.verdict), Pct(l.stall_fraction), split, prefetch.tid, zipped,
                       ToString(l.bottleneck, l.config.num_workers), whole_run);
  return fmt::format("{}: {}: {} of step time waiting for data{}{}; bottleneck: {}{}", l.config.name, ToString(l.verdict),
                     Pct(l.stall_fraction), split, zipped, ToString(l.bottleneck, l.config.num_workers), whole_run);
}

namespace {

// A trace's data-quality warnings in one line ("" when none): what the text
// still says of a trace whose detail it leaves out.
std::string QualityIssues(const DataQuality& q) {
  std::vector<std::string> issues;
  if (q.dropped) issues.push_back(fmt::format("{} spans dropped ({} of records)", q.dropped, Pct1(q.dropped_share)));
  if (!q.clock_warning.empty()) issues.push_back(q.clock_warning);
  if (q.truncated) issues.push_back("truncated (analyzed up to its last complete chunk)");
  if (!q.footer_present) issues.push_back("no footer (the run did not finish cleanly)");
  else if (const auto ending = DescribeEnding(q); !ending.empty()) issues.push_back(ending);
  if (q.invalid_records) issues.push_back(fmt::format("{} invalid records rejected", q.invalid_records));
  std::string out;
  for (const auto& i : issues) out += (out.empty() ? "" : "; ") + i;
  return TerminalSafe(out);
}

}  // namespace

std::string AnalysisText(const std::vector<TraceAnalysis>& traces, const JobAnalysis* job, uint32_t warmup, Colour colour,
                         RankTable rank_table) {
  Style style{colour};
  std::string out;
  // Many ranks: one headline per loader over the ranks instead of one per rank.
  const bool rank_headlines = job && job->ranks.size() > kManyRanks;
  for (const auto& t : traces)
    for (const auto& l : t.loaders)
      if (!rank_headlines || !IsRankProcess(*job, t.path, l.pid))
        out += style.ForVerdict((job ? WhoInJob(*job, t.path, l) : "") + TerminalSafe(VerdictLine(l)), l.verdict) + "\n";
  if (rank_headlines) out += JobHeadlines(*job);
  for (const auto& t : traces)
    if (const std::string note = OutsideEpochsNote(t); !note.empty())
      out += (traces.size() > 1 ? TerminalSafe(t.path) + ": " : "") + note + "\n";
  // A job that failed: what ended it, above the figures that cover the run up to it.
  size_t endings = 0;
  for (const auto& t : traces) {
    const std::string line = EndingLine(t.quality);
    if (line.empty() || ++endings > 3) continue;
    out += style.Paint((traces.size() > 1 ? TerminalSafe(t.path) + ": " : "") + TerminalSafe(line) + "\n", "33");
  }
  if (endings > 3) out += fmt::format("{} more traces had an uncaught exception or did not exit 0 (each one's data quality says which)\n", endings - 3);
  size_t lossy = 0;
  for (const auto& t : traces) {
    const std::string line = LostRecordsLine(t.quality);
    if (line.empty() || ++lossy > 3) continue;
    out += style.Paint((traces.size() > 1 ? TerminalSafe(t.path) + ": " : "") + line + "\n", "33");
  }
  if (lossy > 3) out += fmt::format("{} more traces lost records (each one's data quality says how many)\n", lossy - 3);
  if (job) out += JobText(*job, rank_table, colour);

  // Many ranks: the detail of a few (DetailedRank); the other ranks' traces
  // are counted, and named where their data quality needs a word.
  const bool few_details = rank_headlines && rank_table == RankTable::kAuto;
  const std::vector<int32_t> detailed_ranks = few_details ? DetailedRanks(*job) : std::vector<int32_t>{};
  size_t undetailed = 0;
  std::string undetailed_notes;
  for (const auto& t : traces) {
    std::vector<const LoaderAnalysis*> detailed;
    for (const auto& l : t.loaders)
      if (!few_details || !IsRankProcess(*job, t.path, l.pid) || DetailedRank(*job, detailed_ranks, t.path, l.pid))
        detailed.push_back(&l);
    if (few_details && detailed.empty()) {
      ++undetailed;
      if (const std::string issues = QualityIssues(t.quality); !issues.empty())
        undetailed_notes += "  " + TerminalSafe(t.path) + ": " + issues + "\n";
      continue;
    }
    if (traces.size() > 1) Heading(out, style, "#### " + TerminalSafe(t.path) + " (" + TerminalSafe(t.hostname) + ")");
    for (const LoaderAnalysis* l : detailed) LoaderSection(out, style, t, *l, warmup);

    Heading(out, style, "System");
    if (const std::string coverage = CoverageLine(t); !coverage.empty()) out += "  " + coverage + "\n";
    const auto& s = t.system;
    if (s.available) {
      const std::string others = OtherProcessesText(t);
      out += fmt::format("  machine CPU {} busy{}; the job kept {:.2f} cores busy ({}){}\n", Pct(s.machine_cpu_fraction),
                         s.steal_measured ? fmt::format(" (steal {}: the hypervisor running other guests)", Pct1(s.steal_fraction)) : "",
                         s.job_cpu_cores, UsableCoresText(t, Pct(s.job_cpu_fraction)),
                         others.empty() ? "" : "; " + others);
      out += fmt::format("  disk read {} ({}/s); page cache {} -> {} (max {}); memory available min {} of {}; job RSS max {}\n",
                         FormatBytes(s.disk_read_bytes), FormatBytes(s.disk_read_bytes_per_s), FormatBytes(s.page_cache_start),
                         FormatBytes(s.page_cache_end), FormatBytes(s.page_cache_max), FormatBytes(s.mem_available_min),
                         FormatBytes(s.memory_bytes), FormatBytes(s.job_rss_max));
      if (const std::string steal = StealNote(t); !steal.empty()) out += "  " + steal + "\n";
      if (const std::string quota = CpuQuotaNote(t); !quota.empty()) out += "  " + quota + "\n";
    } else {
      out += "  no sampler series in the trace (fewer than two /proc ticks)\n";
    }
    if (const std::string note = DatasetMemoryNote(t); !note.empty()) out += "  " + note + "\n";

    Heading(out, style, "Data quality");
    const auto& q = t.quality;
    std::string clients;
    for (const auto& c : q.clients) clients += (clients.empty() ? "" : ", ") + c;
    out += fmt::format("  {} spans, {} dropped ({} of records){}; {} lanes used of {}; clients: {}; clock {} (resolution {} ns)\n", q.spans,
                       q.dropped, Pct1(q.dropped_share), q.dropped ? ": figures cover the records that arrived" : "", q.lanes_used,
                       q.ring_lanes, clients.empty() ? "none" : TerminalSafe(clients), q.clock, q.clock_resolution_ns);
    if (!q.clock_warning.empty()) out += style.Paint("  " + q.clock_warning + "\n", "33");
    if (q.truncated) out += style.Paint("  the trace is truncated (the run was killed?): analyzed up to its last complete chunk\n", "33");
    if (!q.footer_present) out += "  no footer: the run did not finish cleanly\n";
    else if (const auto ending = DescribeEnding(q); !ending.empty()) out += style.Paint("  " + TerminalSafe(ending) + "\n", "33");
    if (q.invalid_records) out += fmt::format("  {} invalid records were rejected by the collector\n", q.invalid_records);
  }
  if (undetailed > 0) {
    Heading(out, style, fmt::format("The other ranks' traces ({}: stallprof analyze --ranks details them)", undetailed));
    out += undetailed_notes.empty() ? "  no data-quality note in any of them\n" : undetailed_notes;
  }
  return out;
}

}  // namespace stallprof::report
