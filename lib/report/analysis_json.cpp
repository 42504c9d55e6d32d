#include "analysis_report.h"
#include "json_writer.h"
#include "ranks_report.h"

#include <limits>

namespace stallprof::report {

using namespace stallprof::analysis;

namespace {

const char* VerdictId(Verdict v) {
  switch (v) {
    case Verdict::kHighlyInputBound: return "highly_input_bound";
    case Verdict::kModeratelyInputBound: return "moderately_input_bound";
    case Verdict::kNotInputBound: return "not_input_bound";
  }
  return "?";
}

void WriteAccount(JsonWriter& w, const char* key, const Account& a) {
  w.Key(key).BeginObject();
  w.Field("available", a.available).Field("wall_s", a.wall_s).Field("batches", a.batches);
  w.Field("handoff_receive_cpu_s", a.handoff_receive_cpu_s);
  w.Key("lines").BeginArray();
  for (const auto& line : a.lines) {
    w.BeginObject();
    w.Field("cause", CauseId(line.cause)).Field("seconds", line.seconds).Field("share", line.share);
    w.Field("evidence", line.evidence).Field("estimated", line.estimated);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

void WriteSummary(JsonWriter& w, const char* key, const Summary& s) {
  w.Key(key).BeginObject();
  w.Field("count", s.count).Field("total_s", s.total).Field("mean_s", s.mean).Field("p50_s", s.p50);
  w.Field("p90_s", s.p90).Field("p99_s", s.p99).Field("min_s", s.min).Field("max_s", s.max);
  w.EndObject();
}

void WriteLoader(JsonWriter& w, size_t trace_index, const LoaderAnalysis& l) {
  w.BeginObject();
  w.Field("trace", static_cast<uint64_t>(trace_index));
  w.Field("name", l.config.name).Field("pid", l.pid).Field("scope", static_cast<uint32_t>(l.scope)).Field("rank", l.rank);
  w.Field("objects", static_cast<uint64_t>(std::max<size_t>(1, l.scopes.size())));
  w.Field("verdict", VerdictId(l.verdict)).Field("verdict_line", VerdictLine(l));
  w.Field("stall_fraction", l.stall_fraction).Field("stall_fraction_with_warmup", l.stall_fraction_all);
  w.Field("bottleneck", CauseId(l.bottleneck));
  w.Key("account").BeginObject();
  WriteAccount(w, "whole_run", l.account_all);
  WriteAccount(w, "steady", l.account_steady);
  w.EndObject();
  w.Field("persistent_saving_s", l.persistent_saving_s);
  w.Field("fork_refault_s_per_epoch", l.fork_refault_s_per_epoch);
  w.Key("stream_worker_batches").BeginArray();
  for (double b : l.stream_worker_batches) w.Number(b);
  w.EndArray();
  w.Key("worker_setup").BeginObject();
  w.Field("wall_s", l.worker_setup.WallS()).Field("cpu_s", l.worker_setup.CpuS());
  w.Key("by_fetch_s").BeginArray();
  for (const auto& c : l.worker_setup.by_fetch) w.Number(c.Seconds());
  w.EndArray();
  w.Field("first_item_s", l.worker_setup.first_item_s).Field("item_s", l.worker_setup.item_s);
  w.Key("warm_fetch_s");
  if (l.worker_setup.warm_fetch_s >= 0) w.Number(l.worker_setup.warm_fetch_s); else w.Null();
  w.Field("starts", l.worker_setup.starts);
  w.EndObject();
  w.Key("startup_split").BeginObject();
  w.Field("starting_s", l.startup_split.starting_s).Field("starting_epochs", l.startup_split.starting_epochs);
  w.Field("later_s", l.startup_split.later_s).Field("later_epochs", l.startup_split.later_epochs);
  w.EndObject();
  w.Key("fetch_kernel_share");
  if (l.fetch_kernel_share >= 0) w.Number(l.fetch_kernel_share); else w.Null();
  w.Key("worker_faults_per_batch");
  if (l.worker_faults_per_batch >= 0) w.Number(l.worker_faults_per_batch); else w.Null();
  w.Key("worker_cpu_outside_fetch_s");
  if (l.worker_cpu_outside_fetch_s >= 0) w.Number(l.worker_cpu_outside_fetch_s); else w.Null();
  w.Key("main_faults_per_batch");
  if (l.main_faults_per_batch >= 0) w.Number(l.main_faults_per_batch); else w.Null();
  w.Key("main_kernel_share");
  if (l.main_kernel_share >= 0) w.Number(l.main_kernel_share); else w.Null();
  w.Key("step_kernel_share");
  if (l.step_kernel_share >= 0) w.Number(l.step_kernel_share); else w.Null();
  w.Key("main_step");  // totals over the steps measured (LoaderAnalysis::main_step_*)
  if (l.main_step_compute_s > 0) {
    w.BeginObject();
    w.Field("compute_s", l.main_step_compute_s).Field("cpu_s", l.main_step_cpu_s).Field("delay_s", l.main_step_delay_s);
    w.Key("read_bytes");
    if (l.main_step_read_bytes >= 0) w.Number(l.main_step_read_bytes); else w.Null();
    w.Key("read_call_bytes");
    if (l.main_step_read_call_bytes >= 0) w.Number(l.main_step_read_call_bytes); else w.Null();
    w.Key("main_thread_cpu_s");
    if (l.main_thread_step_cpu_s >= 0) w.Number(l.main_thread_step_cpu_s); else w.Null();
    w.Key("main_thread_delay_s");
    if (l.main_thread_step_delay_s >= 0) w.Number(l.main_thread_step_delay_s); else w.Null();
    w.EndObject();
  } else {
    w.Null();
  }
  w.Key("advice").BeginArray();
  for (const auto& a : l.advice) w.String(a);
  w.EndArray();
  w.Key("worker_predictions").BeginArray();
  for (const auto& p : l.worker_predictions) {
    w.BeginObject();
    w.Field("num_workers", p.workers).Field("samples_per_s", p.samples_per_s).Field("change", p.change);
    w.Field("bottleneck", p.bottleneck).Field("handoff_s", p.handoff_s).Field("waiting_threads", p.waiting_threads);
    w.Key("whole_run_samples_per_s");
    if (p.whole_run_samples_per_s > 0) w.Number(p.whole_run_samples_per_s); else w.Null();
    w.Key("whole_run_change");
    if (p.whole_run_samples_per_s > 0) w.Number(p.whole_run_change); else w.Null();
    w.EndObject();
  }
  w.EndArray();
  const auto& c = l.config;
  w.Key("config").BeginObject();
  w.Key("batch_size");
  if (c.batch_size_known || !c.batch_size_from.empty()) w.Number(c.batch_size); else w.Null();
  w.Key("batch_size_from");
  if (c.batch_size_known && c.batch_size_from.empty()) w.String("config");
  else if (!c.batch_size_from.empty()) w.String(c.batch_size_from);
  else w.Null();
  w.Key("batch_size_set");  // the loader's batch_size where the batches' mean replaced it
  if (c.batch_size_set > 0) w.Number(c.batch_size_set); else w.Null();
  w.Field("num_workers", c.num_workers).Field("prefetch_factor", c.prefetch_factor).Field("pin_memory", c.pin_memory).Field("pin_memory_unavailable", c.pin_memory_unavailable);
  w.Field("persistent_workers", c.persistent_workers).Field("iterator_kept_by", c.iterator_kept_by);
  w.Field("sampler", c.sampler).Field("sampler_order_repeats", c.sampler_order_repeats).Field("dataset_len", c.dataset_len).Field("sampler_len", c.sampler_len);
  w.Field("dataset_bytes", c.dataset_bytes).Field("held_bytes", c.held_bytes).Field("held_files", c.held_files).Field("held_kinds", c.held_kinds);
  w.Field("multiprocessing_context", c.multiprocessing_context);
  w.Field("sharing_strategy", c.sharing_strategy).Field("allocator", c.allocator).Field("worker_init_fn", c.worker_init_fn);
  w.Field("batch_tensors", c.batch_tensors).Field("batch_bytes", c.batch_bytes);
  w.Key("intra_op_threads");
  if (c.intra_op_threads > 0) w.Int(c.intra_op_threads); else w.Null();
  w.Key("ipc_loop_cpu_s");
  if (c.ipc_loop_cpu_s >= 0) w.Number(c.ipc_loop_cpu_s); else w.Null();
  w.Key("ipc_receive_cpu_s");
  if (c.ipc_receive_cpu_s >= 0) w.Number(c.ipc_receive_cpu_s); else w.Null();
  w.Key("ipc_receive_wall_s");
  if (c.ipc_receive_wall_s >= 0) w.Number(c.ipc_receive_wall_s); else w.Null();
  w.Key("ipc_collate_shm_cpu_s");
  if (c.ipc_collate_shm_cpu_s >= 0) w.Number(c.ipc_collate_shm_cpu_s); else w.Null();
  w.Key("ipc_pace_s");
  w.Number(c.ipc_pace_s);
  w.Key("ipc_touch_cpu_s");
  if (c.ipc_touch_cpu_s >= 0) w.Number(c.ipc_touch_cpu_s); else w.Null();
  w.Key("ipc_free_cpu_s");
  if (c.ipc_free_cpu_s >= 0) w.Number(c.ipc_free_cpu_s); else w.Null();
  w.Key("ipc_startup_s");
  if (c.ipc_startup_s >= 0) w.Number(c.ipc_startup_s); else w.Null();
  w.Key("ipc_shutdown_s");
  if (c.ipc_shutdown_s >= 0) w.Number(c.ipc_shutdown_s); else w.Null();
  w.Key("ipc_context_startup_s");
  if (c.ipc_context_startup_s >= 0) w.Number(c.ipc_context_startup_s); else w.Null();
  w.Key("ipc_context_shutdown_s");
  if (c.ipc_context_shutdown_s >= 0) w.Number(c.ipc_context_shutdown_s); else w.Null();
  w.Key("ipc_rss_bytes");
  if (c.ipc_rss_bytes >= 0) w.Number(c.ipc_rss_bytes); else w.Null();
  w.Key("ipc_fork_s_per_mib");
  if (c.ipc_fork_s_per_mib >= 0) w.Number(c.ipc_fork_s_per_mib); else w.Null();
  w.Key("ipc_exit_s_per_mib");
  if (c.ipc_exit_s_per_mib >= 0) w.Number(c.ipc_exit_s_per_mib); else w.Null();
  w.Key("ipc_next_own_cpu_s");
  if (c.ipc_next_own_cpu_s >= 0) w.Number(c.ipc_next_own_cpu_s); else w.Null();
  w.EndObject();
  w.Field("iterations", static_cast<uint64_t>(l.iterations.size())).Field("stepped_iterations", l.SteppedIterations());
  w.Field("samples", l.samples);
  w.Field("active_s", l.active_s).Field("samples_per_s", l.samples_per_s).Field("steady_samples_per_s", l.steady_samples_per_s).Field("steady_fallback", l.steady_fallback).Field("reads_ahead", l.reads_ahead).Field("drain_iterations", l.drain_iterations);
  w.Key("steady").BeginObject();
  WriteSummary(w, "step", l.step_steady);
  WriteSummary(w, "wait", l.wait_steady);
  WriteSummary(w, "compute", l.compute_steady);
  w.EndObject();
  w.Key("with_warmup").BeginObject();
  WriteSummary(w, "step", l.step_all);
  WriteSummary(w, "wait", l.wait_all);
  WriteSummary(w, "compute", l.compute_all);
  w.EndObject();

  const auto& s = l.split;
  w.Key("split").BeginObject();
  w.Field("available", s.available);
  if (!s.available) w.Field("unavailable_reason", s.unavailable_reason);
  w.Field("step_s", s.step_s).Field("ingest_s", s.ingest_s).Field("cached_s", s.cached_s);
  w.Field("measured_stall_s", s.measured_stall_s).Field("fetch_stall_s", s.fetch_stall_s).Field("prep_stall_s", s.prep_stall_s);
  w.Field("scaled_to_measured_stall", s.scaled).Field("contention_s", s.contention_s).Field("handoff_s", s.handoff_s);
  w.Field("miss_cpu_s_per_batch", s.miss_cpu_s_per_batch);
  double T = s.step_s > 0 ? s.step_s : 1;
  w.Field("fetch_stall_fraction", s.fetch_stall_s / T).Field("prep_stall_fraction", s.prep_stall_s / T);
  w.Field("contention_fraction", s.contention_s / T).Field("handoff_fraction", s.handoff_s / T);
  w.EndObject();

  w.Key("epochs").BeginArray();
  for (const auto& e : l.epochs) {
    w.BeginObject();
    w.Field("index", e.index).Field("iterations", e.iterations).Field("unstepped", e.unstepped).Field("samples", e.samples).Field("seconds", e.seconds);
    w.Field("samples_per_s", e.samples_per_s).Field("stall_fraction", e.stall_fraction).Field("storage_s", e.storage_s);
    w.Field("has_system", e.has_system);
    w.Field("page_cache_growth_bytes", e.page_cache_growth_bytes).Field("disk_read_bytes", e.disk_read_bytes);
    w.Field("start_ns", e.start_ns).Field("end_ns", e.end_ns).Field("sampler_first_s", e.sampler_first_s);
    w.Field("compute_per_batch_s", e.compute_per_batch_s).Field("wait_per_batch_s", e.wait_per_batch_s);
    w.EndObject();
  }
  w.EndArray();
  if (const auto& f = l.first_epoch; f.available) {
    w.Key("first_epoch").BeginObject();
    w.Field("first_samples_per_s", f.first_samples_per_s).Field("later_samples_per_s", f.later_samples_per_s);
    w.Field("why", f.why);
    w.EndObject();
  }

  w.Key("workers").BeginArray();
  for (const auto& k : l.workers) {
    w.BeginObject();
    w.Field("pid", k.pid).Field("tid", k.tid).Field("in_main_process", k.in_main_process).Field("batches", k.batches);
    w.Field("window_s", k.window_s).Field("produce_s", k.produce_s).Field("cpu_s", k.cpu_s).Field("delay_s", k.delay_s);
    w.Field("io_s", k.io_s).Field("busy_fraction", k.busy_fraction).Field("cpu_fraction", k.cpu_fraction);
    w.Field("io_fraction", k.io_fraction).Field("delay_fraction", k.delay_fraction).Field("mean_produce_s", k.mean_produce_s);
    w.Field("straggler", k.straggler);
    w.EndObject();
  }
  w.EndArray();
  w.Field("worker_imbalance", l.worker_imbalance);
  WriteSummary(w, "produce", l.produce);
  w.Key("prefetch").BeginObject();
  w.Field("capacity", l.prefetch.capacity).Field("mean_ready", l.prefetch.mean_ready).Field("max_ready", l.prefetch.max_ready);
  w.Field("starved_fraction", l.prefetch.starved_fraction).Field("ever_full", l.prefetch.ever_full);
  w.Field("serial_gap_s", l.prefetch.serial_gap_s).Field("serial_gaps", l.prefetch.serial_gaps);
  w.Field("sends_held", l.prefetch.sends_held).Field("sends_free", l.prefetch.sends_free);
  w.Field("gil_probes_held", l.prefetch.gil_probes_held).Field("gil_probes_free", l.prefetch.gil_probes_free);
  w.EndObject();

  w.Key("stages").BeginArray();
  for (const auto& st : l.stages) {
    w.BeginObject();
    w.Field("name", st.name).Field("count", st.count).Field("wall_s", st.wall_s).Field("cpu_s", st.cpu_s);
    w.Field("cpu_source", st.cpu_source == CpuSource::kMeasured    ? "measured"
                          : st.cpu_source == CpuSource::kEstimated ? "estimated"
                                                                   : "attributed");
    w.Field("parallelism", st.parallelism).Field("elapsed_s", st.elapsed_s).Field("per_core_rate", st.per_core_rate);
    w.Field("observed_rate", st.observed_rate).Field("parallel_rate", st.parallel_rate).Field("utilization", st.utilization);
    w.Field("bottleneck", st.bottleneck);
    w.EndObject();
  }
  w.EndArray();
  w.Key("nested_loaders").BeginArray();
  for (const auto& n : l.nested_loaders) {
    w.BeginObject();
    w.Field("name", n.name).Field("runs", n.runs).Field("seconds", n.seconds);
    w.EndObject();
  }
  w.EndArray();
  w.Key("zipped_loaders").BeginArray();
  for (const auto& z : l.zipped_loaders) {
    w.BeginObject();
    w.Field("name", z.name).Field("seconds", z.seconds).Field("steady_seconds", ZippedSeconds(l, z, false));
    w.EndObject();
  }
  w.EndArray();
  w.Key("prefetch_thread");
  if (const auto& p = l.prefetch_thread; p.present) {
    w.BeginObject();
    w.Field("tid", p.tid).Field("handouts", p.handouts).Field("handout_s", p.handout_s).Field("cpu_s", p.cpu_s);
    w.Field("delay_s", p.delay_s).Field("blocked_s", p.BlockedS()).Field("steady_blocked_share", p.steady_blocked_share);
    w.Field("hands_on", p.HandsOn()).Field("loop_bound", p.LoopBound());
    w.EndObject();
  } else {
    w.Null();
  }
  w.Key("main_stages").BeginArray();
  for (const auto& st : l.main_stages) {
    w.BeginObject();
    w.Field("name", st.name).Field("count", st.count).Field("wall_s", st.wall_s).Field("cpu_s", st.cpu_s);
    w.Field("cpu_source", st.cpu_source == CpuSource::kMeasured ? "measured" : "estimated");
    w.EndObject();
  }
  w.EndArray();
  w.Key("counters").BeginObject();
  w.Field("share", l.counters.share);
  for (const auto& [key, x] : {std::pair<const char*, const SampledSums&>{"fetches", l.counters.fetches}, {"waits", l.counters.waits}}) {
    w.Key(key).BeginObject();
    w.Field("spans", x.spans).Field("measured", x.measured).Field("estimated", x.estimated);
    w.Field("cpu_estimated_s", x.cpu_estimated_s).Field("cpu_error_s", x.cpu_error_s);
    w.Field("delay_estimated_s", x.delay_estimated_s).Field("delay_error_s", x.delay_error_s);
    w.EndObject();
  }
  w.EndObject();
  w.EndObject();
}

}  // namespace

std::string AnalysisJson(const std::vector<TraceAnalysis>& traces, const JobAnalysis* job, uint32_t warmup) {
  std::string out;
  JsonWriter w(out);
  w.BeginObject();
  w.Field("schema", kAnalysisSchema).Field("warmup", warmup);
  w.Key("traces").BeginArray();
  for (const auto& t : traces) {
    w.BeginObject();
    w.Field("path", t.path).Field("hostname", t.hostname).Field("duration_s", t.duration_s).Field("usable_cores", t.usable_cores);
    // The CPU cgroup's quota in cores where below usable_cores; null: none.
    w.Key("cpu_quota_cores");
    if (t.cpu_quota_cores > 0) w.Number(t.cpu_quota_cores); else w.Null();
    w.Key("coverage").BeginObject().Field("in_epochs_s", t.coverage.in_epochs_s).Field("before_s", t.coverage.before_s);
    w.Field("between_s", t.coverage.between_s).Field("after_s", t.coverage.after_s);
    // -1: the sampler had no ticks before the first epoch.
    w.Field("before_job_cores", t.coverage.before_job_cores).Field("before_disk_read_bytes", t.coverage.before_disk_read_bytes);
    w.EndObject();
    w.Field("start_realtime_ns", t.start_realtime_ns).Field("start_monotonic_ns", t.start_monotonic_ns);
    const auto& s = t.system;
    w.Key("system").BeginObject();
    w.Field("available", s.available).Field("seconds", s.seconds).Field("machine_cpu_fraction", s.machine_cpu_fraction);
    // Of all CPU time, the hypervisor's; null where the trace did not record it.
    w.Field("steal_fraction", s.steal_measured ? s.steal_fraction : std::numeric_limits<double>::quiet_NaN());
    w.Field("job_cpu_cores", s.job_cpu_cores).Field("job_cpu_fraction", s.job_cpu_fraction);
    // Other processes' busy cores by /proc/stat (null: not sampled), and the
    // cores the job could not use (its CPU affinity's or quota's), on which
    // they took nothing from it.
    w.Field("outside_busy_cores", s.outside_busy_measured ? s.outside_busy_cores : std::numeric_limits<double>::quiet_NaN());
    w.Field("unusable_cores", s.unusable_cores);
    w.Field("disk_read_bytes", s.disk_read_bytes).Field("disk_read_bytes_per_s", s.disk_read_bytes_per_s);
    w.Field("page_cache_start_bytes", s.page_cache_start).Field("page_cache_end_bytes", s.page_cache_end);
    w.Field("page_cache_max_bytes", s.page_cache_max).Field("mem_available_min_bytes", s.mem_available_min);
    w.Field("memory_bytes", s.memory_bytes).Field("job_rss_max_bytes", s.job_rss_max).Field("dataset_bytes", s.dataset_bytes);
    w.Field("dataset_fits_in_memory", s.dataset_fits_in_memory);
    w.EndObject();
    const auto& q = t.quality;
    w.Key("quality").BeginObject();
    w.Field("spans", q.spans).Field("dropped", q.dropped).Field("laneless_dropped", q.laneless_dropped);
    w.Field("dropped_share", q.dropped_share);
    w.Field("lanes_used", q.lanes_used).Field("ring_lanes", q.ring_lanes).Field("truncated", q.truncated);
    w.Field("footer_present", q.footer_present).Field("exit_code", q.exit_code).Field("term_signal", q.term_signal).Field("invalid_records", q.invalid_records);
    w.Key("clients").BeginArray();
    for (const auto& c : q.clients) w.String(c);
    w.EndArray();
    // What ended a process: the hook's record of an uncaught exception; batch -1 = not in a loader's next().
    w.Key("uncaught_errors").BeginArray();
    for (const auto& e : q.uncaught_errors) {
      w.BeginObject();
      w.Field("pid", e.pid).Field("rank", e.rank).Field("thread", e.thread).Field("loader", e.loader).Field("batch", e.batch).Field("message", e.message);
      w.EndObject();
    }
    w.EndArray();
    w.Field("ending", DescribeEnding(q));
    w.Field("clock", q.clock).Field("clock_source", q.clock_source).Field("clock_resolution_ns", q.clock_resolution_ns);
    if (!q.clock_warning.empty()) w.Field("clock_warning", q.clock_warning);
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.Key("loaders").BeginArray();
  for (size_t i = 0; i < traces.size(); ++i)
    for (const auto& l : traces[i].loaders) WriteLoader(w, i, l);
  w.EndArray();
  w.Key("job");
  if (!job) w.Null();
  else WriteJobJson(w, *job);
  w.EndObject();
  out += '\n';
  return out;
}

}  // namespace stallprof::report
