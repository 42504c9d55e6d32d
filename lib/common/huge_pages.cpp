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

// A fresh mapping of `size` bytes (a multiple of kHugePageBytes) on a 2 MiB
// boundary: one huge page more is mapped and the slack around the aligned part
// unmapped. With `from` (a mapping of `from_size` < `size` bytes), its pages
// are moved there (mremap moves them, faulted in and filled, without a copy;
// huge pages stay whole, both ends being aligned) and only the rest is fresh.
// nullptr when the kernel refuses (`from` is then still mapped).
void* MapAligned(size_t size, void* from = nullptr, size_t from_size = 0) {
  void* raw = mmap(nullptr, size + kHugePageBytes, from ? PROT_NONE : PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (begin + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
  // A fixed move replaces the reservation at `aligned` by the grown mapping.
  if (from && mremap(from, from_size, size, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(aligned)) ==
                  MAP_FAILED) {
    munmap(raw, size + kHugePageBytes);
    return nullptr;
  }
  if (aligned > begin) munmap(raw, aligned - begin);
  if (const size_t tail = begin + size + kHugePageBytes - (aligned + size); tail > 0)
    munmap(reinterpret_cast<void*>(aligned + size), tail);
  madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);  // a hint: without THP, 4 KiB pages
  return reinterpret_cast<void*>(aligned);
}

// The smallest cached mapping of at least `size` bytes, cut to `size`. When
// none is that big, the biggest one grown to `size` (its pages moved, the rest
// fresh: fewer pages to fault in and zero than a new mapping; a buffer that
// grows by doubling, or a bigger table after a smaller one, reuses them), and
// every other cached mapping goes back to the kernel: the cache never adds to
// the peak memory of a process whose buffers grow. nullptr when the cache is
// empty or the kernel refuses.
void* TakeCached(size_t size) {
  MappingCache& c = Cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.free.empty()) return nullptr;
  size_t best = c.free.size();
  for (size_t i = 0; i < c.free.size(); ++i)
    if (c.free[i].second >= size && (best == c.free.size() || c.free[i].second < c.free[best].second)) best = i;
  if (best == c.free.size()) {
    size_t biggest = 0;
    for (size_t i = 1; i < c.free.size(); ++i)
      if (c.free[i].second > c.free[biggest].second) biggest = i;
    auto [grown, grown_size] = c.free[biggest];
    for (size_t i = 0; i < c.free.size(); ++i)
      if (i != biggest) munmap(c.free[i].first, c.free[i].second);
    c.free.clear();
    c.bytes = 0;
    void* p = MapAligned(size, grown, grown_size);
    if (!p) munmap(grown, grown_size);
    return p;
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
  const size_t size = RoundUp(bytes);
  if (void* cached = TakeCached(size)) return cached;
  void* p = MapAligned(size);
  if (!p) throw std::bad_alloc();
  return p;
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
