#include "trace.h"

#include "stage_place.h"

namespace stallprof {

std::optional<uint32_t> Trace::FindString(const std::string& text) const {
  for (uint32_t i = 0; i < strings.size(); ++i)
    if (strings[i] == text) return i;
  return std::nullopt;
}

const ProcessInfo* Trace::FindProcess(uint32_t pid) const {
  for (const auto& p : processes)
    if (p.pid == pid) return &p;
  return nullptr;
}

bool IsUserStageName(const std::string& name) {
  return name.rfind("dataloader.", 0) != 0 && name.rfind("stallprof.", 0) != 0 && !name.empty();
}

}  // namespace stallprof
