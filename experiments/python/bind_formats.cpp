// rpsim.round, rpsim.encode, rpsim.decode: whole NumPy arrays through the
// formats library's array path (formats/array.hpp), in place of the input's
// buffer when the layout allows, with the GIL released and the core's own
// OpenMP threads; rpsim.round_scalar: one value through the scalar core
// (round_double), the reference the array path is tested against.
#include <fmt/format.h>

#include <span>

#include "bindings.hpp"
#include "rpsim/formats/array.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/io/process.hpp"

namespace rpsim::python {

namespace {

template <class T>
std::span<const T> input_span(const py::array& a) {
  return {static_cast<const T*>(a.data()), static_cast<std::size_t>(a.size())};
}
template <class T>
std::span<T> output_span(py::array& a) {
  return {static_cast<T*>(a.mutable_data()), static_cast<std::size_t>(a.size())};
}

bool is_float64(const py::array& a) {
  return py::isinstance<py::array_t<double>>(a);
}

ArrayOptions array_options(const Rounding& r, const py::object& seed, const py::object& stream, int threads) {
  io::check_threads(threads, "threads =", true);  // std::invalid_argument -> ValueError
  ArrayOptions o;
  o.rounding = r;
  o.seed = u64_arg(seed, "seed");
  o.stream = u64_arg(stream, "stream");
  o.threads = threads;
  return o;
}

// `out` checked against the input it receives the result of: an ndarray of
// the same dtype and shape, C-contiguous and writeable.
py::array out_array(const py::object& out, const py::array& like) {
  if (!py::isinstance<py::array>(out)) throw py::type_error("out: must be a NumPy array");
  py::array a = py::reinterpret_borrow<py::array>(out);
  if (a.dtype().kind() == 'f' && a.itemsize() == 2)
    throw py::type_error(
        "out: dtype float16 cannot receive round()'s result: float16 input is widened to float32 and the "
        "result is float32 (a format's values need not be float16 values: bfloat16's are not); pass a "
        "float32 out");
  if (!(is_float64(like) ? is_float64(a) : py::isinstance<py::array_t<float>>(a)))
    throw py::type_error(fmt::format("out: dtype {} differs from the input's {}",
                                     py::str(a.dtype()).cast<std::string>(),
                                     py::str(like.dtype()).cast<std::string>()));
  bool same_shape = a.ndim() == like.ndim();
  for (py::ssize_t i = 0; same_shape && i < a.ndim(); ++i) same_shape = a.shape(i) == like.shape(i);
  if (!same_shape) throw py::value_error("out: shape differs from the input's");
  if (!(a.flags() & py::array::c_style)) throw py::value_error("out: must be C-contiguous");
  if (!a.writeable()) throw py::value_error("out: is read-only");
  return a;
}

py::object round_py(py::handle x, const py::object& spec, const std::string& rounding, const py::object& seed,
                    const py::object& stream, const py::object& stochastic_bits, bool ftz, bool daz,
                    const py::object& saturate, int threads, const py::object& out) {
  const Format& fmt = format_arg(spec);
  const ArrayOptions o =
      array_options(make_rounding(rounding, stochastic_bits, ftz, daz, saturate), seed, stream, threads);
  const py::array in = float_array(x, "x");
  py::array result = out.is_none() ? empty_like(in, in.dtype()) : out_array(out, in);
  if (is_float64(in)) {
    auto s = input_span<double>(in);
    auto d = output_span<double>(result);
    py::gil_scoped_release release;
    round_values(fmt, s, d, o);
  } else {
    auto s = input_span<float>(in);
    auto d = output_span<float>(result);
    py::gil_scoped_release release;
    round_values(fmt, s, d, o);
  }
  return out.is_none() ? unwrap_0d(result) : out;
}

template <class In, class Out>
void encode_into(const Format& fmt, const py::array& in, py::array& out, const ArrayOptions& o) {
  auto s = input_span<In>(in);
  auto d = output_span<Out>(out);
  py::gil_scoped_release release;
  round_to_bits(fmt, s, d, o);
}

template <class In>
void encode_from(const Format& fmt, const py::array& in, py::array& out, const ArrayOptions& o) {
  switch (out.itemsize()) {
    case 1: return encode_into<In, std::uint8_t>(fmt, in, out, o);
    case 2: return encode_into<In, std::uint16_t>(fmt, in, out, o);
    case 4: return encode_into<In, std::uint32_t>(fmt, in, out, o);
    default: return encode_into<In, std::uint64_t>(fmt, in, out, o);
  }
}

py::object encode_py(py::handle x, const py::object& spec, const std::string& rounding,
                     const py::object& seed, const py::object& stream, const py::object& stochastic_bits,
                     bool ftz, bool daz, const py::object& saturate, int threads) {
  const Format& fmt = format_arg(spec);
  const ArrayOptions o =
      array_options(make_rounding(rounding, stochastic_bits, ftz, daz, saturate), seed, stream, threads);
  const py::array in = float_array(x, "x");
  py::array result = empty_like(in, bits_dtype(fmt));
  if (is_float64(in))
    encode_from<double>(fmt, in, result, o);
  else
    encode_from<float>(fmt, in, result, o);
  return unwrap_0d(result);
}

template <class Bits, class Out>
void decode_into(const Format& fmt, const py::array& bits, py::array& out) {
  auto s = input_span<Bits>(bits);
  auto d = output_span<Out>(out);
  py::gil_scoped_release release;
  decode(fmt, s, d);
}

template <class Out>
void decode_as(const Format& fmt, const py::array& bits, py::array& out) {
  switch (bits.itemsize()) {
    case 1: return decode_into<std::uint8_t, Out>(fmt, bits, out);
    case 2: return decode_into<std::uint16_t, Out>(fmt, bits, out);
    case 4: return decode_into<std::uint32_t, Out>(fmt, bits, out);
    default:
      if constexpr (std::is_same_v<Out, double>) return decode_into<std::uint64_t, Out>(fmt, bits, out);
      throw py::value_error(
          fmt::format("dtype float32: format {} has values that binary32 cannot hold", fmt.name));
  }
}

py::object decode_py(py::handle bits, const py::object& spec, const py::object& dtype) {
  const Format& fmt = format_arg(spec);
  const py::dtype want = py::dtype::from_args(dtype);
  const bool f64 = want.is(py::dtype::of<double>()) || (want.kind() == 'f' && want.itemsize() == 8);
  const bool f32 = want.kind() == 'f' && want.itemsize() == 4;
  if (!f64 && !f32)
    throw py::type_error(fmt::format("dtype {}: decode gives float64 or float32",
                                     py::str(py::object(want)).cast<std::string>()));
  const py::array in = bits_array(bits, fmt, "bits");
  py::array result = empty_like(in, f64 ? py::dtype::of<double>() : py::dtype::of<float>());
  if (f64)
    decode_as<double>(fmt, in, result);
  else
    decode_as<float>(fmt, in, result);
  return unwrap_0d(result);
}

py::dict round_scalar_py(double x, const py::object& spec, const std::string& rounding,
                         const py::object& seed, const py::object& stream, const py::object& index,
                         const py::object& stochastic_bits, bool ftz, bool daz, const py::object& saturate) {
  const Format& fmt = format_arg(spec);
  Rounding r = make_rounding(rounding, stochastic_bits, ftz, daz, saturate);
  // The draw element `index` of an array call gets (array.hpp).
  if (r.mode == RoundingMode::stochastic)
    r.random_bits = counter_random(u64_arg(seed, "seed"), u64_arg(stream, "stream"), u64_arg(index, "index"));
  Flags flags = 0;
  const std::uint64_t bits = round_double(fmt, x, r, flags);
  py::dict d;
  d["bits"] = bits;
  d["value"] = to_double(fmt, bits);
  d["flags"] = flag_list(flags);
  return d;
}

}  // namespace

void bind_formats(py::module_& m) {
  using py::arg;
  m.def("round", &round_py, arg("x"), arg("format"), arg("rounding") = "rne", py::kw_only(), arg("seed") = 0,
        arg("stream") = 0, arg("stochastic_bits") = 32, arg("ftz") = false, arg("daz") = false,
        arg("saturate") = py::none(), arg("threads") = 0, arg("out") = py::none(),
        R"(Round every element of x (float64, float32 or float16) to `format`; the values, as float64 for
float64 x and float32 for float32 and float16 x (float16 is widened: the values of most formats,
bfloat16's for one, are not float16 values).

format: a named format (binary16, bf16, e4m3, e5m2, e2m1, ...) or a spec (e5m10, e4m3fnuz,
exp=5,man=10,bias=15,subnormals=no). rounding: rne rna rtz rd ru rodd sr. sr draws
counter_random(seed, stream, i) for element i, so the result does not depend on threads.
ftz: flush subnormal results to zero; daz: read subnormal inputs as zero. saturate: None (the
format's default), True or False. threads: 0 is OpenMP's default. out: an array to write into
(may be x itself).)");
  m.def(
      "encode", &encode_py, arg("x"), arg("format"), arg("rounding") = "rne", py::kw_only(), arg("seed") = 0,
      arg("stream") = 0, arg("stochastic_bits") = 32, arg("ftz") = false, arg("daz") = false,
      arg("saturate") = py::none(), arg("threads") = 0,
      "Round x to `format` like round(); the encodings as uint8/uint16/uint32/uint64 by the format's width.");
  m.def("decode", &decode_py, arg("bits"), arg("format"), arg("dtype") = py::dtype::of<double>(),
        "The exact values of encodings of `format` (any integer dtype), as float64 (or float32 when every "
        "value of the format fits).");
  m.def("round_scalar", &round_scalar_py, arg("x"), arg("format"), arg("rounding") = "rne", py::kw_only(),
        arg("seed") = 0, arg("stream") = 0, arg("index") = 0, arg("stochastic_bits") = 32, arg("ftz") = false,
        arg("daz") = false, arg("saturate") = py::none(),
        "One float through the scalar core (round_double): {'bits', 'value', 'flags'}; sr draws "
        "counter_random(seed, stream, index), as element `index` of round() does.");
}

}  // namespace rpsim::python
