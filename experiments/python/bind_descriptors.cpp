// rpsim.formats (the descriptor table as dicts), rpsim.format_info (one
// format or spec) and rpsim.explain (what `rpsim explain` prints, as a dict,
// from the same library function rpsim::explain).
#include <cmath>
#include <cstring>

#include "bindings.hpp"
#include "rpsim/formats/explain.hpp"
#include "rpsim/formats/print.hpp"
#include "rpsim/formats/unpacked.hpp"

namespace rpsim::python {

namespace {

const char* nonfinite_name(NonFinite n) {
  switch (n) {
    case NonFinite::ieee: return "ieee";
    case NonFinite::nan_only: return "nan_only";
    case NonFinite::finite_only: return "finite_only";
  }
  return "?";
}

const char* nan_name(NanEncoding n) {
  switch (n) {
    case NanEncoding::ieee: return "ieee";
    case NanEncoding::all_ones: return "all_ones";
    case NanEncoding::negative_zero: return "negative_zero";
    case NanEncoding::none: return "none";
  }
  return "?";
}

const char* overflow_name(Overflow o) {
  switch (o) {
    case Overflow::infinity: return "infinity";
    case Overflow::nan: return "nan";
    case Overflow::saturate: return "saturate";
  }
  return "?";
}

py::dict descriptor(const Format& f) {
  py::dict d;
  d["name"] = f.name;
  d["bits"] = f.bits;
  d["exp_bits"] = f.exp_bits;
  d["man_bits"] = f.man_bits;
  d["precision"] = f.precision();
  d["bias"] = f.bias;
  d["emin"] = f.emin;
  d["emax"] = f.emax;
  d["has_sign"] = f.has_sign;
  d["has_zero"] = f.has_zero;
  d["subnormals"] = f.subnormals;
  d["nonfinite"] = nonfinite_name(f.nonfinite);
  d["nan"] = nan_name(f.nan);
  d["overflow"] = overflow_name(f.overflow);
  d["max_finite"] = f.max_finite();
  d["min_normal"] = f.min_normal();
  d["min_positive"] = f.min_positive();
  d["unit_roundoff"] = std::ldexp(1.0, -f.precision());
  return d;
}

py::list formats_py() {
  py::list l;
  for (const Format& f : named_formats()) l.append(descriptor(f));
  return l;
}

py::dict encoding(const Format& f, std::uint64_t bits) {
  py::dict d;
  d["bits"] = bits;
  d["hex"] = hex_bits(f, bits);
  d["fields"] = binary_fields(f, bits);
  d["class"] = classify(f, bits);
  d["value"] = to_double(f, bits);
  d["decimal"] = decimal(f, bits);
  return d;
}

py::object optional_encoding(const Format& f, const std::optional<std::uint64_t>& bits) {
  return bits ? py::object(encoding(f, *bits)) : py::object(py::none());
}

py::object optional_float(const std::optional<double>& v) {
  return v ? py::object(py::float_(*v)) : py::object(py::none());
}

py::dict explain_py(const py::object& value, const std::string& spec, const std::string& rounding,
                    std::uint64_t seed) {
  const Format& f = format_arg(spec);
  const RoundingMode mode = parse_rounding(rounding);
  // Text is read as the CLI reads VALUE (hex floats, exactly the nearest binary64).
  ParsedNumber parsed;
  if (py::isinstance<py::str>(value))
    parsed = parse_number(value.cast<std::string>());
  else if (py::isinstance<py::float_>(value) || py::isinstance<py::int_>(value) ||
           py::hasattr(value, "__float__"))
    parsed.value = py::float_(value).cast<double>();
  else
    throw py::type_error("value: must be a number or a string such as '0.1' or '0x1.8p-3'");
  const Explanation x = explain(f, parsed.value, mode, seed);
  std::uint64_t value_bits;
  std::memcpy(&value_bits, &x.value, 8);
  py::dict d;
  d["value"] = x.value;
  d["value_exact"] = exact_decimal(x.value);
  d["value_binary64_bits"] = value_bits;
  d["note"] = parsed.note.empty() ? py::object(py::none()) : py::object(py::str(parsed.note));
  d["format"] = descriptor(f);
  d["rounding"] = std::string(rounding_name(x.mode));
  d["seed"] = x.seed;
  d["result"] = encoding(f, x.result);
  d["result_exact"] =
      is_nan(f, x.result) ? py::object(py::none()) : py::object(py::str(exact_decimal(x.result_value)));
  d["flags"] = flag_list(x.flags);
  d["representable"] = x.representable;
  d["below"] = optional_encoding(f, x.below);
  d["above"] = optional_encoding(f, x.above);
  d["spacing"] = optional_float(x.spacing);
  d["position"] = optional_float(x.position);
  d["abs_error"] = optional_float(x.abs_error);
  d["rel_error"] = optional_float(x.rel_error);
  d["ulp"] = optional_float(x.ulp);
  d["error_ulps"] = optional_float(x.error_ulps);
  d["unit_roundoff"] = x.unit_roundoff;
  d["sr_probability_away"] = optional_float(x.sr_probability_away);
  d["subnormal"] = classify(f, x.result) == "subnormal";
  d["overflowed"] = (x.flags & flag_overflow) != 0;
  d["underflowed"] = (x.flags & flag_underflow) != 0;
  py::dict modes;
  for (const auto& [m, bits] : x.all_modes) modes[py::str(std::string(rounding_name(m)))] = encoding(f, bits);
  d["all_modes"] = modes;
  return d;
}

}  // namespace

void bind_descriptors(py::module_& m) {
  using py::arg;
  m.def("formats", &formats_py,
        "The named formats (the descriptor table, formats/src/format.cpp) as a list of dicts: name, bits, "
        "exp_bits, man_bits, precision, bias, emin, emax, has_sign, has_zero, subnormals, nonfinite, nan, "
        "overflow, max_finite, min_normal, min_positive, unit_roundoff.");
  m.def(
      "format_info", [](const std::string& spec) { return descriptor(format_arg(spec)); }, arg("format"),
      "One format's descriptor as formats() gives it: a name, an alias (fp16, bf16, ...) or a spec (e5m10, "
      "exp=5,man=10,subnormals=no).");
  m.def("explain", &explain_py, arg("value"), arg("format") = "binary16", arg("rounding") = "rne",
        py::kw_only(), arg("seed") = 0,
        R"(How one value rounds to `format`, as `rpsim explain` prints it: a dict with the exact binary64
(value_exact), the neighbours below/above, where the value lies between them (position, spacing),
the result, its errors (abs_error, rel_error, ulp, error_ulps), the IEEE flags and every
deterministic mode's result (all_modes). value: a number or text ('0.1', '0x1.8p-3', 'inf');
sr takes one draw, counter_random(seed, 0, 0).)");
}

}  // namespace rpsim::python
