//===- TrackingIterator.h - A char iterator that records its reach -*- C++
//-*-===//
//
// TrackingIterator: a `const char*` input iterator for parsers that take
// iterators (nlohmann-style JSON readers), recording the furthest byte read so
// that an error can be located in the text.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_SUPPORT_TRACKINGITERATOR_H
#define ARCHC_SUPPORT_TRACKINGITERATOR_H

#include <cstddef>
#include <iterator>

namespace archc {

/// A `const char*` iterator that records the furthest position read.
struct TrackingIterator {
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char *;
  using reference = const char &;

  const char *p = nullptr;
  const char **furthest = nullptr;

  reference operator*() const { return *p; }
  TrackingIterator &operator++() {
    ++p;
    if (furthest && p > *furthest)
      *furthest = p;
    return *this;
  }
  TrackingIterator operator++(int) {
    TrackingIterator t = *this;
    ++*this;
    return t;
  }
  bool operator==(const TrackingIterator &o) const { return p == o.p; }
  bool operator!=(const TrackingIterator &o) const { return p != o.p; }
};

} // namespace archc

#endif // ARCHC_SUPPORT_TRACKINGITERATOR_H
