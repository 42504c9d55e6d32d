#include "model/simulate.h"

#include <algorithm>
#include <deque>
#include <limits>

namespace stallprof::model {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kDone = 1e-12;  // seconds of work left that count as none (rounding of the fluid steps)

enum class MainPhase { kNext, kFetchCpu, kFetchIo, kReceive, kComputeCpu, kComputeOff, kFinished };
enum class WorkerPhase { kStarting, kIdle, kCpu, kIo, kGap };

struct Worker {
  WorkerPhase phase = WorkerPhase::kIdle;
  double left = 0;             // CPU seconds (kCpu) or seconds (kStarting, kIo, kGap)
  uint64_t batch = 0;
  std::deque<uint64_t> queue;  // batch indices sent to this worker, FIFO
  // The worker's sending threads (torch's queue feeder pickling the batch,
  // the fd sharer): fetched batches wait here, FIFO, for the loop CPU.
  std::deque<uint64_t> outbox;
  bool sending = false;
  double send_left = 0;        // CPU seconds of the batch at the front of the outbox
  // SimConfig::fetch_holds_gil: the sent batches' loop CPU beyond the serial
  // part, run off the GIL (pipe writes, the fds' kernel work) beside the fetch.
  double beside_left = 0;
  // SimConfig::fetch_holds_gil: whether the sending thread holds the
  // worker's GIL (it runs, the fetch's CPU waits).
  bool sender_has_gil = true;
  bool fetch_ended = false;    // the fetch just ended: its thread let the GIL go, taking the next index
  uint32_t fetches = 0;        // fetches begun: the first ones pay SimConfig::worker_setup
};

class Simulation {
 public:
  explicit Simulation(const SimConfig& c)
      : c_(c), done_(c.batches, 0), fetched_(c.workers ? c.batches : 0, 0), worker_of_(c.workers ? c.batches : 0),
        workers_(c.workers) {}

  SimResult Run() {
    if (c_.batches == 0) return out_;
    step_ends_.reserve(c_.batches);
    const uint64_t w = c_.workers;
    if (w > 0) {
      if (c_.worker_quota.size() == w) {
        epoch_len_ = 0;
        for (uint64_t q : c_.worker_quota) epoch_len_ += q;
        dealt_.assign(w, 0);
      }
      FillPipeline();
      // Workers start one after another, spread over one batch's production:
      // started at once, equal costs would keep them in lock step for good
      // under fluid sharing, every CPU phase contended, where the kernel's
      // time slices part them within a round (8 workers of 5 ms CPU and 30 ms
      // waiting a batch on 2 cores: predicted 24% slow).
      const double spread = w > 1 ? MeanProduction() / static_cast<double>(w) : 0;
      for (uint64_t i = 0; i < w; ++i) {
        workers_[i].phase = WorkerPhase::kStarting;
        workers_[i].left = c_.startup_s + static_cast<double>(i) * spread;
      }
      main_ = MainPhase::kNext;
    } else {
      StartMainFetch();
    }
    // Each pass either finishes a phase or moves time to the next finish, so
    // the loop ends after O(batches x (workers + phases)) passes.
    while (main_ != MainPhase::kFinished) {
      Settle();
      if (main_ == MainPhase::kFinished) break;
      if (!Advance()) break;  // nothing can progress (cannot happen with finite costs)
    }
    out_.seconds = now_;
    const size_t n = step_ends_.size();
    if (epoch_len_ > 0 && n / epoch_len_ >= 3) {
      // Epochs after the first: an uneven split slows each epoch's end, so the
      // window is analyze's, per epoch (past its warm-up, before its drain),
      // else the whole epochs. Measured over whole epochs where analyze left
      // out the drain, a 2-worker stream's baseline erred -5% to -17%.
      double steps = 0;
      size_t counted = 0;
      const size_t last = (n / epoch_len_) * epoch_len_;
      for (size_t k = epoch_len_; k < last; ++k) {
        const size_t index = k % epoch_len_;
        if (index < c_.steady_skip_first || index + c_.steady_skip_last >= epoch_len_) continue;
        steps += step_ends_[k] - step_ends_[k - 1];
        ++counted;
      }
      const size_t from = epoch_len_ - 1, to = last - 1;
      out_.steady_step_s = counted > 0 ? steps / static_cast<double>(counted)
                                       : (step_ends_[to] - step_ends_[from]) / static_cast<double>(to - from);
    } else if (n >= 4) {
      // The middle half: the pipeline has filled and not yet drained.
      const size_t from = n / 4, to = n - n / 4;
      out_.steady_step_s = (step_ends_[to - 1] - step_ends_[from - 1]) / static_cast<double>(to - from);
    } else if (n > 0) {
      out_.steady_step_s = now_ / static_cast<double>(n);
    }
    return out_;
  }

 private:
  // Sends the next batch index to its worker: in turn, skipping workers whose
  // stream has ended this epoch (worker_quota).
  void SendIndex() {
    const uint64_t w = workers_.size();
    uint64_t worker = sent_ % w;
    if (epoch_len_ > 0) {
      if (sent_ % epoch_len_ == 0) {  // a new iterator: its cycle starts at worker 0
        std::fill(dealt_.begin(), dealt_.end(), 0);
        cycle_ = 0;
      }
      do worker = cycle_++ % w;
      while (dealt_[worker] >= c_.worker_quota[worker]);
      ++dealt_[worker];
    }
    worker_of_[sent_] = static_cast<uint32_t>(worker);
    workers_[worker].queue.push_back(sent_++);
  }

  // Up to workers x prefetch_factor indices outstanding, within the epoch of
  // the batch the main loop takes next.
  void FillPipeline() {
    const uint64_t window = workers_.size() * std::max<uint32_t>(1, c_.prefetch_factor);
    uint64_t end = std::min<uint64_t>(c_.batches, current_ + window);
    if (epoch_len_ > 0) end = std::min(end, (current_ / epoch_len_ + 1) * epoch_len_);
    while (sent_ < end) SendIndex();
  }

  // A batch's mean CPU and off-CPU seconds in a worker.
  double MeanProduction() const {
    if (c_.costs.empty()) return std::max(0.0, c_.fetch_extra_cpu_s);
    double sum = 0;
    for (const auto& cost : c_.costs)
      sum += std::max(0.0, cost.cpu_s * c_.cpu_scale + c_.fetch_extra_cpu_s) + cost.io_s * c_.io_scale;
    return sum / static_cast<double>(c_.costs.size());
  }

  BatchCost Cost(uint64_t batch) const {
    if (c_.costs.empty()) return {};
    const BatchCost& raw = c_.costs[(batch + c_.cost_offset) % c_.costs.size()];
    return {static_cast<float>(raw.cpu_s * c_.cpu_scale), static_cast<float>(raw.io_s * c_.io_scale)};
  }

  void StartMainFetch() {
    main_ = MainPhase::kFetchCpu;
    main_left_ = std::max(0.0, Cost(current_).cpu_s + c_.fetch_extra_cpu_s);
  }

  void StartWorkerBatch(Worker& worker) {
    if (worker.queue.empty()) {
      worker.phase = WorkerPhase::kIdle;
      return;
    }
    worker.batch = worker.queue.front();
    worker.queue.pop_front();
    worker.phase = WorkerPhase::kCpu;
    worker.left = std::max(0.0, Cost(worker.batch).cpu_s + c_.fetch_extra_cpu_s) +
                  (worker.fetches < c_.worker_setup.size() ? c_.worker_setup[worker.fetches].cpu_s : 0);
  }

  // A fetched batch is sent by the worker's sending threads when there is
  // loop CPU to pay, else it is ready at once.
  void Fetched(Worker& worker) {
    fetched_[worker.batch] = 1;
    if (c_.worker_loop_cpu_s > kDone) worker.outbox.push_back(worker.batch);
    else done_[worker.batch] = 1;
    worker.fetch_ended = true;
  }

  // Applies every transition that takes no time, until none is left.
  void Settle() {
    for (bool changed = true; changed;) {
      changed = false;
      for (auto& worker : workers_) {
        if (worker.phase == WorkerPhase::kStarting && worker.left <= kDone) {
          StartWorkerBatch(worker);
          changed = true;
        } else if (worker.phase == WorkerPhase::kIdle && !worker.queue.empty()) {
          StartWorkerBatch(worker);
          changed = true;
        } else if (worker.phase == WorkerPhase::kCpu && worker.left <= kDone) {
          worker.phase = WorkerPhase::kIo;
          worker.left = Cost(worker.batch).io_s +
                        (worker.fetches < c_.worker_setup.size() ? c_.worker_setup[worker.fetches].io_s : 0);
          worker.fetches++;
          changed = true;
        } else if (worker.phase == WorkerPhase::kIo && worker.left <= kDone) {
          Fetched(worker);
          // Straight on to the next index, after its loop's serial part.
          if (c_.worker_gap_s > kDone && !worker.queue.empty()) {
            worker.phase = WorkerPhase::kGap;
            worker.left = c_.worker_gap_s;
          } else {
            StartWorkerBatch(worker);
          }
          changed = true;
        } else if (worker.phase == WorkerPhase::kGap && worker.left <= kDone) {
          StartWorkerBatch(worker);
          changed = true;
        }
        if (worker.sending && worker.send_left <= kDone) {
          done_[worker.outbox.front()] = 1;
          worker.outbox.pop_front();
          worker.sending = false;
          if (c_.fetch_holds_gil) worker.beside_left += c_.worker_loop_cpu_s - SerialSendSeconds();
          changed = true;
        }
        if (!worker.sending && !worker.outbox.empty()) {
          worker.sending = true;
          worker.send_left = c_.fetch_holds_gil ? SerialSendSeconds() : c_.worker_loop_cpu_s;
          worker.sender_has_gil = false;
          changed = true;
        }
        // The sending thread takes the GIL when the fetch is off CPU or has
        // just ended (the worker's loop lets it go to take the next index).
        if (worker.sending && !worker.sender_has_gil &&
            (!c_.fetch_holds_gil || worker.phase != WorkerPhase::kCpu || worker.fetch_ended)) {
          worker.sender_has_gil = true;
          changed = true;
        }
        worker.fetch_ended = false;
      }
      switch (main_) {
        case MainPhase::kNext:
          if (done_[current_]) {
            main_ = MainPhase::kReceive;
            main_left_ = c_.receive_cpu_s;
            changed = true;
          }
          break;
        case MainPhase::kFetchCpu:
          if (main_left_ <= kDone) {
            main_ = MainPhase::kFetchIo;
            main_left_ = Cost(current_).io_s;
            changed = true;
          }
          break;
        case MainPhase::kFetchIo:
          if (main_left_ <= kDone) {  // then the iterator's own code in next() (receive_cpu_s without workers)
            main_ = MainPhase::kReceive;
            main_left_ = c_.receive_cpu_s;
            changed = true;
          }
          break;
        case MainPhase::kReceive:
          if (main_left_ <= kDone) {
            if (deliverable_) out_.handoff_s += now_ - next_called_;
            else if (held_call_) out_.handoff_s += receiving_s_;
            // torch sends the next index once it has received a batch
            // (_get_data, then _process_data's _try_put_index): a worker
            // without one waits for the main thread's unpickling too.
            if (!workers_.empty() && sent_ < c_.batches && (epoch_len_ == 0 || sent_ / epoch_len_ == current_ / epoch_len_))
              SendIndex();
            main_ = MainPhase::kComputeCpu;
            main_left_ = c_.compute_cpu_s;
            changed = true;
          }
          break;
        case MainPhase::kComputeCpu:
          if (main_left_ <= kDone) {
            main_ = MainPhase::kComputeOff;
            main_left_ = c_.compute_off_s;
            changed = true;
          }
          break;
        case MainPhase::kComputeOff:
          if (main_left_ <= kDone) {
            step_ends_.push_back(now_);
            if (++current_ >= c_.batches) {
              main_ = MainPhase::kFinished;
              return;
            }
            if (workers_.empty()) {
              StartMainFetch();
            } else {
              main_ = MainPhase::kNext;
              if (epoch_len_ > 0 && current_ % epoch_len_ == 0) FillPipeline();  // the next epoch's iterator
              NextCalled();
            }
            changed = true;
          }
          break;
        case MainPhase::kFinished: return;
      }
    }
  }

  // The main loop calls next() for batch current_ (SimResult::handoff_s).
  void NextCalled() {
    next_called_ = now_;
    deliverable_ = held_call_ = false;
    receiving_s_ = 0;
    if (current_ >= sent_ || !fetched_[current_]) return;  // not yet sent to a worker, or its fetch still runs
    const WorkerPhase phase = workers_[worker_of_[current_]].phase;
    deliverable_ = phase != WorkerPhase::kCpu && phase != WorkerPhase::kIo;
    held_call_ = c_.fetch_holds_gil && !deliverable_;
  }

  // Whether a worker's fetch progresses on CPU now: not while its sending
  // thread holds the GIL the fetch needs (SimConfig::fetch_holds_gil).
  bool FetchRuns(const Worker& worker) const {
    return worker.phase == WorkerPhase::kCpu && !(c_.fetch_holds_gil && worker.sending && worker.sender_has_gil);
  }
  bool SendRuns(const Worker& worker) const { return worker.sending && worker.sender_has_gil; }
  bool BesideRuns(const Worker& worker) const { return worker.beside_left > kDone; }

  // Of a batch's loop CPU, what its sending thread holds the worker's GIL for
  // (SimConfig::fetch_holds_gil): the worker's serial gap, measured. The rest
  // runs beside the next fetch.
  double SerialSendSeconds() const { return std::min(c_.worker_gap_s, c_.worker_loop_cpu_s); }

  // Receiving a batch from a worker whose fetch holds the GIL waits while
  // that worker's GIL is taken, by its fetch or its sending thread
  // (SimConfig::fetch_holds_gil): the worker's thread that hands the batch's
  // shared memory over needs it. Measured: a 10 ms fetch of pure Python
  // handed its previous batch over only as it ended.
  bool ReceiveBlocked() const {
    if (!c_.fetch_holds_gil || main_ != MainPhase::kReceive || workers_.empty()) return false;
    const Worker& worker = workers_[worker_of_[current_]];
    return FetchRuns(worker) || SendRuns(worker);
  }

  // Threads of the main process that want a core now (the step counts as its width).
  double MainWidth() const {
    if (ReceiveBlocked()) return 0;
    switch (main_) {
      case MainPhase::kFetchCpu:
      case MainPhase::kReceive: return 1;
      case MainPhase::kComputeCpu: return std::max(1.0, c_.compute_threads);
      default: return 0;
    }
  }

  // A parallel step whose threads lose cores to others progresses as one
  // thread at its share. Demand beyond the cores by a fraction of a thread
  // (a background of 0.03 busy threads) is such a thread for that fraction
  // of the time: the step runs at its width the rest of it. Held up
  // throughout, a 2-thread step on 2 cores beside 0.03 busy threads was
  // predicted at half its measured speed (a baseline error of -37%).
  double HeldUpRate(double width, double demand) const {
    const double excess = demand - c_.cores;
    const double one_more = c_.cores / (c_.cores + 1);  // a whole thread more: the share of each
    return excess >= 1 ? c_.cores / demand : (1 - excess) * width + excess * one_more;
  }

  // Moves time to the next phase end. False when nothing is in progress.
  bool Advance() {
    const double main_width = MainWidth();
    double runnable = main_width;
    for (const auto& worker : workers_)
      runnable += (FetchRuns(worker) ? 1 : 0) + (SendRuns(worker) ? 1 : 0) + (BesideRuns(worker) ? 1 : 0);
    const double demand = runnable + std::max(0.0, c_.background_threads);
    const double share = demand > c_.cores ? c_.cores / demand : 1;  // of a core, per runnable thread

    // Rates: CPU phases progress at share (x width for the step), off-CPU ones at 1.
    const bool receive_blocked = ReceiveBlocked();  // the batch still held in its worker: a wait, not receiving
    const bool main_timed = main_ != MainPhase::kNext && main_ != MainPhase::kFinished && !receive_blocked;
    const bool held_up = main_ == MainPhase::kComputeCpu && c_.compute_parallel && share < 1;
    const double main_rate = main_width <= 0 ? 1 : held_up ? HeldUpRate(main_width, demand) : main_width * share;
    double dt = main_timed ? main_left_ / main_rate : kInf;
    for (const auto& worker : workers_) {
      if (FetchRuns(worker)) dt = std::min(dt, worker.left / share);
      else if (worker.phase == WorkerPhase::kIo || worker.phase == WorkerPhase::kStarting || worker.phase == WorkerPhase::kGap)
        dt = std::min(dt, worker.left);
      if (SendRuns(worker)) dt = std::min(dt, worker.send_left / share);
      if (BesideRuns(worker)) dt = std::min(dt, worker.beside_left / share);
    }
    if (!(dt < kInf)) return false;
    dt = std::max(dt, 0.0);

    if (main_timed) main_left_ = std::max(0.0, main_left_ - main_rate * dt);
    for (auto& worker : workers_) {
      if (FetchRuns(worker)) {
        worker.left = std::max(0.0, worker.left - share * dt);
        out_.worker_delay_s += (1 - share) * dt;
      } else if (worker.phase == WorkerPhase::kIo || worker.phase == WorkerPhase::kStarting ||
                 worker.phase == WorkerPhase::kGap) {
        worker.left = std::max(0.0, worker.left - dt);
      }
      if (SendRuns(worker)) {
        worker.send_left = std::max(0.0, worker.send_left - share * dt);
        out_.job_delay_s += (1 - share) * dt;  // not the fetch spans': a thread of its own
      }
      if (BesideRuns(worker)) {
        worker.beside_left = std::max(0.0, worker.beside_left - share * dt);
        out_.job_delay_s += (1 - share) * dt;
      }
    }
    const double main_delay = main_width * (1 - share) * dt;
    out_.job_delay_s += main_delay;
    out_.job_cpu_s += runnable * share * dt;
    switch (main_) {
      case MainPhase::kNext:
      case MainPhase::kFetchCpu:
      case MainPhase::kFetchIo: out_.wait_s += dt; break;
      case MainPhase::kReceive:
        (receive_blocked ? out_.wait_s : out_.receive_s) += dt;
        if (!receive_blocked) receiving_s_ += dt;
        break;
      case MainPhase::kComputeCpu:
        out_.compute_delay_s += main_delay;
        out_.compute_s += dt;
        break;
      case MainPhase::kComputeOff: out_.compute_s += dt; break;
      case MainPhase::kFinished: break;
    }
    now_ += dt;
    return true;
  }

  const SimConfig& c_;
  std::vector<uint8_t> done_;     // per batch: produced
  std::vector<uint8_t> fetched_;  // per batch: its fetch ended (W >= 1)
  std::vector<uint32_t> worker_of_;  // per batch: the worker its index went to
  std::vector<Worker> workers_;
  std::vector<double> step_ends_;
  MainPhase main_ = MainPhase::kNext;
  double main_left_ = 0;
  uint64_t current_ = 0;          // the batch the main loop takes next
  double next_called_ = 0;        // when the main loop called next() for current_
  bool deliverable_ = false;      // current_ was fetched then, its worker not fetching
  bool held_call_ = false;        // fetch_holds_gil: current_ was fetched then, its worker in a later fetch
  double receiving_s_ = 0;        // of this call, the wall time receiving, not held (SimResult::handoff_s)
  uint64_t sent_ = 0;             // batch indices sent to workers
  uint64_t epoch_len_ = 0;        // worker_quota's sum; 0 = no epochs
  std::vector<uint64_t> dealt_;   // per worker: indices dealt this epoch
  uint64_t cycle_ = 0;            // the epoch's turn counter over the workers
  double now_ = 0;
  SimResult out_;
};

}  // namespace

SimResult SimulateLoader(const SimConfig& config) {
  Simulation simulation(config);
  SimResult result = simulation.Run();
  result.job_delay_s += result.worker_delay_s;
  return result;
}

}  // namespace stallprof::model
