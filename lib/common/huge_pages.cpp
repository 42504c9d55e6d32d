#include "huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>

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

bool Mapped(size_t bytes) { return !kSanitized && bytes >= kHugePageBytes; }

size_t RoundUp(size_t bytes) { return (bytes + kHugePageBytes - 1) & ~(kHugePageBytes - 1); }

}  // namespace

void* AllocateHugePages(size_t bytes) {
  if (!Mapped(bytes)) return ::operator new(bytes);
  // Map one huge page more than needed and unmap the slack around the aligned part.
  const size_t size = RoundUp(bytes);
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
  munmap(p, RoundUp(bytes));
}

}  // namespace stallprof
