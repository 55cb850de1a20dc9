#pragma once
// Vectors of floats that grow without zeroing what they add. A restore reserves a model's state (gigabytes) and
// overwrites every value it adds: the zeros std::vector writes first were a pass over all of it, after the kernel's
// own zeroing of the fresh pages, and on the reading or broadcasting thread.
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace arclight {

// std::allocator, except that a value added without one (resize, emplace_back()) is left unset.
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* at) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(at)) U;
  }
  template <class U, class... Args>
  void construct(U* at, Args&&... args) {
    ::new (static_cast<void*>(at)) U(std::forward<Args>(args)...);
  }
};

// resize() and the count constructor leave the values they add unset: only where they are written before they are
// read. (Unoptimised builds still loop over them, doing nothing.)
using UninitFloats = std::vector<float, DefaultInitAllocator<float>>;

}  // namespace arclight
