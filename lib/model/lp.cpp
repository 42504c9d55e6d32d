#include "model/lp.h"

#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <memory>

namespace stallprof::model {

const char* ToString(RowKind kind) {
  switch (kind) {
    case RowKind::kStageCpu: return "stage CPU";
    case RowKind::kCores: return "cores";
    case RowKind::kPoolCores: return "one core per worker";
    case RowKind::kOccupancy: return "worker occupancy";
    case RowKind::kBandwidth: return "storage bandwidth";
    case RowKind::kMemory: return "memory";
    case RowKind::kIngest: return "model ingest";
  }
  return "?";
}

const char* ToString(CachePoint point) {
  switch (point) {
    case CachePoint::kNone: return "none";
    case CachePoint::kRawFiles: return "raw files";
    case CachePoint::kDecoded: return "decoded samples";
  }
  return "?";
}

const LpRow* LpSolution::Binding() const {
  constexpr RowKind kRank[] = {RowKind::kIngest, RowKind::kCores, RowKind::kBandwidth, RowKind::kMemory,
                               RowKind::kOccupancy, RowKind::kStageCpu, RowKind::kPoolCores};
  constexpr double kTiny = 1e-9;
  // At a degenerate vertex GLPK may put the dual on another tight row; a
  // tight ingest row still means faster input cannot help.
  for (const LpRow& row : rows)
    if (row.kind == RowKind::kIngest && row.activity >= row.bound * (1 - 1e-7)) return &row;
  for (RowKind kind : kRank)
    for (const LpRow& row : rows)
      if (row.kind == kind && row.dual > kTiny) return &row;
  return nullptr;
}

namespace {
// A tiny cost per core and per pool member: among equally fast plans GLPK
// returns the one that uses the fewest, without moving the optimum visibly.
constexpr double kResourceCost = 1e-7;

struct ProblemDeleter {
  void operator()(glp_prob* p) const { glp_delete_prob(p); }
};
}  // namespace

Result<LpSolution> SolvePipelineLp(const PipelineLp& lp) {
  const int stages = static_cast<int>(lp.stages.size());
  const int pools = static_cast<int>(lp.pools.size());
  for (const LpStage& s : lp.stages) {
    if (s.pool >= lp.pools.size()) return RuntimeError("stage '" + s.name + "' names a pool that does not exist");
    if (!(s.cpu_s_per_sample >= 0)) return RuntimeError("stage '" + s.name + "' has a negative CPU cost");
  }
  if (!(lp.cores >= 0) || !(lp.memory_bytes >= 0))
    return RuntimeError("the LP has negative cores or memory; nothing can run");

  glp_term_out(GLP_OFF);  // GLPK prints scaling and solver chatter to stdout otherwise
  std::unique_ptr<glp_prob, ProblemDeleter> prob(glp_create_prob());
  glp_prob* p = prob.get();
  glp_set_obj_dir(p, GLP_MAX);
  const int x = 1;
  auto core_col = [](int s) { return 2 + s; };
  auto member_col = [stages](int q) { return 2 + stages + q; };
  glp_add_cols(p, 1 + stages + pools);
  glp_set_col_bnds(p, x, GLP_LO, 0, 0);
  glp_set_obj_coef(p, x, 1);
  for (int s = 0; s < stages; ++s) {
    glp_set_col_bnds(p, core_col(s), GLP_LO, 0, 0);
    glp_set_obj_coef(p, core_col(s), -kResourceCost);
  }
  for (int q = 0; q < pools; ++q) {
    glp_set_col_bnds(p, member_col(q), GLP_LO, 0, 0);
    glp_set_obj_coef(p, member_col(q), -kResourceCost);
  }

  std::vector<int> ia{0}, ja{0};
  std::vector<double> ar{0};
  LpSolution out;
  auto add_row = [&](RowKind kind, std::string name, double bound, std::vector<std::pair<int, double>> terms) {
    const int row = glp_add_rows(p, 1);
    glp_set_row_bnds(p, row, GLP_UP, 0, bound);
    for (auto [col, coef] : terms) {
      ia.push_back(row);
      ja.push_back(col);
      ar.push_back(coef);
    }
    out.rows.push_back({kind, std::move(name), 0, bound, 0});
  };
  for (int s = 0; s < stages; ++s)
    add_row(RowKind::kStageCpu, "cpu[" + lp.stages[s].name + "]", 0,
            {{x, lp.stages[s].cpu_s_per_sample}, {core_col(s), -1}});
  {
    std::vector<std::pair<int, double>> all;
    for (int s = 0; s < stages; ++s) all.push_back({core_col(s), 1});
    if (!all.empty()) add_row(RowKind::kCores, "cores", lp.cores, all);
  }
  std::vector<std::vector<size_t>> member_rows(pools);  // each pool's rows holding -members
  for (int q = 0; q < pools; ++q) {
    std::vector<std::pair<int, double>> terms;
    for (int s = 0; s < stages; ++s)
      if (static_cast<int>(lp.stages[s].pool) == q) terms.push_back({core_col(s), 1});
    terms.push_back({member_col(q), -1});
    member_rows[q].push_back(out.rows.size());
    add_row(RowKind::kPoolCores, "cores<=members[" + lp.pools[q].name + "]", 0, terms);
    if (lp.pools[q].latency_s_per_sample > 0) {
      member_rows[q].push_back(out.rows.size());
      add_row(RowKind::kOccupancy, "occupancy[" + lp.pools[q].name + "]", 0,
              {{x, lp.pools[q].latency_s_per_sample}, {member_col(q), -1}});
    }
  }
  if (lp.storage_bandwidth > 0 && lp.storage_bytes_per_sample > 0)
    add_row(RowKind::kBandwidth, "storage bandwidth", lp.storage_bandwidth, {{x, lp.storage_bytes_per_sample}});
  if (std::isfinite(lp.memory_bytes)) {
    std::vector<std::pair<int, double>> terms;
    for (int q = 0; q < pools; ++q)
      if (lp.pools[q].memory_bytes_per_member > 0) terms.push_back({member_col(q), lp.pools[q].memory_bytes_per_member});
    if (!terms.empty()) add_row(RowKind::kMemory, "memory", lp.memory_bytes, terms);
  }
  if (std::isfinite(lp.max_samples_per_s)) add_row(RowKind::kIngest, "model ingest", lp.max_samples_per_s, {{x, 1}});

  glp_load_matrix(p, static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
  glp_scale_prob(p, GLP_SF_AUTO);
  glp_smcp parm;
  glp_init_smcp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  const int rc = glp_simplex(p, &parm);
  if (rc != 0) return RuntimeError("the LP solver failed (GLPK code " + std::to_string(rc) + "); please report this trace");
  const int status = glp_get_status(p);
  if (status == GLP_UNBND)
    return UnsupportedError("nothing in the profile limits throughput (no compute, CPU, io or bandwidth measured); "
                            "record a run with steady-state iterations");
  if (status != GLP_OPT) return RuntimeError("the LP has no optimal solution (GLPK status " + std::to_string(status) + ")");

  out.samples_per_s = glp_get_col_prim(p, x);
  for (int s = 0; s < stages; ++s) out.stage_cores.push_back(glp_get_col_prim(p, core_col(s)));
  for (size_t r = 0; r < out.rows.size(); ++r) {
    out.rows[r].activity = glp_get_row_prim(p, static_cast<int>(r) + 1);
    out.rows[r].dual = glp_get_row_dual(p, static_cast<int>(r) + 1);
  }
  // A pool's members are bounded below only (its cores, its occupancy) and
  // cost memory, so the fewest that meet both are as fast. GLPK need not
  // return them: the tiny cost per member is within its optimality tolerance
  // once the memory row is scaled, and a loader whose workers' RSS was unknown
  // came back with 32119 workers filling 23.5 GiB of 0.75 MiB prefetch buffers.
  double memory = 0;
  for (int q = 0; q < pools; ++q) {
    double cores = 0;
    for (int s = 0; s < stages; ++s)
      if (static_cast<int>(lp.stages[s].pool) == q) cores += out.stage_cores[s];
    const double solved = glp_get_col_prim(p, member_col(q));
    const double fewest = std::min(solved, std::max(cores, out.samples_per_s * lp.pools[q].latency_s_per_sample));
    out.pool_members.push_back(fewest);
    for (size_t r : member_rows[q]) out.rows[r].activity += solved - fewest;
    memory += fewest * lp.pools[q].memory_bytes_per_member;
  }
  for (auto& row : out.rows)
    if (row.kind == RowKind::kMemory) row.activity = memory;
  return out;
}

}  // namespace stallprof::model
