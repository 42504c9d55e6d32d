// HugeVector: a std::vector whose big buffers (1 MiB and up) are 2 MiB-aligned
// anonymous mappings marked MADV_HUGEPAGE, for the arrays analysis fills once
// with millions of rows (the span columns, the iterations). Filling fresh
// memory costs one page fault per 4 KiB page touched, and on a virtual machine
// a fault costs microseconds: they were ~25% of `analyze` on a 10 M-span trace.
// A huge page is one fault per 2 MiB. The alignment matters: a malloc'ed
// buffer starts inside a huge page, and everything up to the first 2 MiB
// boundary would still fault 4 KiB at a time. Pages never written are never
// touched, so a generous reserve() costs address space, not memory. Freed
// mappings are kept for reuse, up to kCachedBytesMax.
// Small buffers, and every buffer under a sanitizer (which must see them),
// come from operator new.
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <vector>

namespace stallprof {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;
// Bytes from which a buffer is its own huge-page mapping, at most twice its
// size. Below it, operator new: a heap page faults 4 KiB at a time, but only
// the first time (cmd_analyze keeps freed memory in the process).
inline constexpr size_t kMappedBytes = size_t{1} << 20;
// Freed mappings kept for reuse, at most (see huge_pages.cpp): what it may add
// to the peak resident memory.
inline constexpr size_t kCachedBytesMax = size_t{32} << 20;

// operator new for small buffers, else an aligned mapping; std::bad_alloc when it fails.
void* AllocateHugePages(size_t bytes);
// Frees what AllocateHugePages(bytes) returned. A mapping is kept for the next
// allocation of its size or less while the kept ones total kCachedBytesMax or
// less: its pages are already faulted in (a fresh mapping is zeroed page by
// page), and analysis frees and allocates tables of the same sizes again and
// again. An allocation no kept mapping fits grows the biggest one (mremap: its
// pages move along, only the rest is fresh) and returns the others to the kernel.
void FreeHugePages(void* p, size_t bytes) noexcept;
// Bytes of freed mappings kept for reuse.
size_t CachedHugePageBytes();

template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(AllocateHugePages(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { FreeHugePages(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const noexcept { return true; }
};

template <typename T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

// The same elements, whatever the allocators (tests compare columns with literals).
template <typename T, typename A, typename B>
  requires(!std::is_same_v<A, B>)
bool operator==(const std::vector<T, A>& a, const std::vector<T, B>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

}  // namespace stallprof
