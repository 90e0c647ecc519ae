#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/unpacked.hpp"

namespace rpsim {
namespace {

enum class Order { less, equal, greater, unordered };

// Every format up to binary64 converts exactly to double, so the order of
// the doubles is the order of the values.
Order order(const Format& f, std::uint64_t a, std::uint64_t b, bool signaling, Flags& fl) {
  const Unpacked x = unpack(f, a), y = unpack(f, b);
  if (x.is_nan() || y.is_nan()) {
    if (signaling || x.cls == Class::signaling_nan || y.cls == Class::signaling_nan) fl |= flag_invalid;
    return Order::unordered;
  }
  const double dx = to_double(f, a), dy = to_double(f, b);
  return dx < dy ? Order::less : dx > dy ? Order::greater : Order::equal;
}

}  // namespace

bool eq(const Format& f, std::uint64_t a, std::uint64_t b, Flags& fl) {
  return order(f, a, b, false, fl) == Order::equal;
}
bool eq_signaling(const Format& f, std::uint64_t a, std::uint64_t b, Flags& fl) {
  return order(f, a, b, true, fl) == Order::equal;
}
bool le(const Format& f, std::uint64_t a, std::uint64_t b, Flags& fl) {
  const Order o = order(f, a, b, true, fl);
  return o == Order::less || o == Order::equal;
}
bool le_quiet(const Format& f, std::uint64_t a, std::uint64_t b, Flags& fl) {
  const Order o = order(f, a, b, false, fl);
  return o == Order::less || o == Order::equal;
}
bool lt(const Format& f, std::uint64_t a, std::uint64_t b, Flags& fl) {
  return order(f, a, b, true, fl) == Order::less;
}
bool lt_quiet(const Format& f, std::uint64_t a, std::uint64_t b, Flags& fl) {
  return order(f, a, b, false, fl) == Order::less;
}

}  // namespace rpsim
