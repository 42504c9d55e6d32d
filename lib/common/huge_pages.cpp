#include "huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

namespace stallprof {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

bool Mapped(size_t bytes) { return !kSanitized && bytes >= kMappedBytes; }

size_t RoundUp(size_t bytes) { return (bytes + kHugePageBytes - 1) & ~(kHugePageBytes - 1); }

// Mappings freed and kept for the next allocation, up to kCachedBytesMax:
// their pages are already faulted in, where a fresh mapping is zeroed by the
// kernel page by page (and on a VM whose host reclaimed the memory, faulted in
// by the host first: ~0.7 GB/s measured, against ~18 GB/s for memory the guest
// reuses). Analysis frees and allocates tables of a row per iteration or fetch
// again and again, trace after trace.
struct MappingCache {
  MappingCache() { free.reserve(kCachedBytesMax / kHugePageBytes); }  // KeepCached never allocates
  std::mutex mutex;
  std::vector<std::pair<void*, size_t>> free;  // (mapping, size), sizes multiples of kHugePageBytes
  size_t bytes = 0;
};

MappingCache& Cache() {
  static MappingCache* cache = new MappingCache();  // never destroyed: buffers may be freed during exit
  return *cache;
}

// The smallest cached mapping of at least `size` bytes, cut to `size`; nullptr
// when none, and then every cached mapping goes back to the kernel: the fresh
// mapping about to be made can reuse their pages (recently used, so not
// reclaimed by a VM's host), and the cache never adds to the peak memory of a
// process whose buffers grow.
void* TakeCached(size_t size) {
  MappingCache& c = Cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  size_t best = c.free.size();
  for (size_t i = 0; i < c.free.size(); ++i)
    if (c.free[i].second >= size && (best == c.free.size() || c.free[i].second < c.free[best].second)) best = i;
  if (best == c.free.size()) {
    for (auto [p, have] : c.free) munmap(p, have);
    c.free.clear();
    c.bytes = 0;
    return nullptr;
  }
  auto [p, have] = c.free[best];
  c.free.erase(c.free.begin() + static_cast<std::ptrdiff_t>(best));
  c.bytes -= have;
  if (have > size) munmap(static_cast<char*>(p) + size, have - size);  // the rest: back to the kernel
  return p;
}

// Keeps `p` (a mapping of `size` bytes) for reuse; false when the cache is full.
bool KeepCached(void* p, size_t size) {
  MappingCache& c = Cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.bytes + size > kCachedBytesMax) return false;
  c.free.emplace_back(p, size);
  c.bytes += size;
  return true;
}

}  // namespace

size_t CachedHugePageBytes() {
  MappingCache& c = Cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.bytes;
}

void* AllocateHugePages(size_t bytes) {
  if (!Mapped(bytes)) return ::operator new(bytes);
  // Map one huge page more than needed and unmap the slack around the aligned part.
  const size_t size = RoundUp(bytes);
  if (void* cached = TakeCached(size)) return cached;
  void* raw = mmap(nullptr, size + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (begin + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
  if (aligned > begin) munmap(raw, aligned - begin);
  if (const size_t tail = begin + size + kHugePageBytes - (aligned + size); tail > 0)
    munmap(reinterpret_cast<void*>(aligned + size), tail);
  madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);  // a hint: without THP, 4 KiB pages
  return reinterpret_cast<void*>(aligned);
}

void FreeHugePages(void* p, size_t bytes) noexcept {
  if (!p) return;
  if (!Mapped(bytes)) {
    ::operator delete(p);
    return;
  }
  if (!KeepCached(p, RoundUp(bytes))) munmap(p, RoundUp(bytes));
}

}  // namespace stallprof
