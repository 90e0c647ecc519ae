// rpsim._train: the C++ half of rpsim.train (rpsim/_train.py turns its CSV
// text into arrays). The same calls as `rpsim train`: the config loader
// (any vocabulary, overrides as --set takes them), parse, run.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "bind_config.hpp"
#include "bindings.hpp"
#include "rpsim/config/config_loader.hpp"
#include "rpsim/config/policy_json.hpp"
#include "rpsim/config/run_plan.hpp"
#include "rpsim/io/process.hpp"
#include "rpsim/io/progress.hpp"
#include "rpsim/io/results_io.hpp"
#include "rpsim/train/trainer.hpp"

namespace rpsim::python {

namespace {

namespace train = sim::train;

// A JSON value (nlohmann) as Python objects, through the json module: meta
// holds only what json.loads reads back exactly.
py::object to_python(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

// train::run on a worker thread while this one, holding the GIL only while
// it looks, lets Python's SIGINT handler run: Ctrl-C sets the flag the
// trainer polls, which stops at a step boundary with nothing written.
train::RunResult run_interruptibly(const train::Config& config, const train::RunOptions& options) {
  io::interrupted().store(false);
  std::future<train::RunResult> done;
  {
    py::gil_scoped_release release;
    done = std::async(std::launch::async, [&] { return train::run(config, options); });
  }
  bool keyboard_interrupt = false;
  for (;;) {
    {
      py::gil_scoped_release release;
      if (done.wait_for(std::chrono::milliseconds(100)) == std::future_status::ready) break;
    }
    if (!keyboard_interrupt && PyErr_CheckSignals() != 0) {
      keyboard_interrupt = true;
      io::interrupted().store(true);
    }
  }
  train::RunResult result;
  {
    py::gil_scoped_release release;
    result = done.get();  // rethrows what the run threw
  }
  io::interrupted().store(false);
  if (keyboard_interrupt) throw py::error_already_set();  // the KeyboardInterrupt Python raised
  return result;
}

py::dict train_py(const py::object& config, const std::vector<std::string>& overrides, const py::object& out,
                  int threads, bool progress) {
  const sim::config::LoadedConfig loaded = config_arg(config, overrides);
  const train::Config parsed = loaded.parse();    // ConfigError (invalid_argument) -> ValueError
  io::check_threads(threads, "threads =", true);  // std::invalid_argument -> ValueError
  // The CLI's checks before any work (a batch larger than the data, a run
  // larger than the machine's memory: ValueError), and what it announces
  // first: a config without "steps" trains whole epochs, said as a warning.
  const sim::config::RunPlan plan = sim::config::plan_run(parsed);
  if (parsed.steps == 0)
    PyErr_WarnEx(PyExc_UserWarning,
                 fmt::format("rpsim.train: the config has no \"steps\" limit: {} steps = {} epoch{} of {} "
                             "(steps=N stops earlier), about {}",
                             plan.total_steps, parsed.epochs, parsed.epochs > 1 ? "s" : "",
                             plan.steps_per_epoch, io::format_duration(plan.estimate_s))
                     .c_str(),
                 1);
  train::RunOptions options;
  options.threads = threads;
  options.data = plan.data;  // a text set read once, by the plan (as `rpsim train`)
  options.progress = progress ? stderr : nullptr;
  if (!out.is_none()) {
    options.out_dir = py::str(out).cast<std::string>();
    if (options.out_dir.empty()) throw py::value_error("out = '': an empty folder name");
    io::ensure_writable_dir(options.out_dir);  // IoError -> OSError
  }
  const train::RunResult r = run_interruptibly(parsed, options);
  py::dict d;
  d["steps_csv"] = r.steps_csv;
  d["histograms_csv"] = r.histograms_csv;
  d["meta"] = to_python(r.meta);
  d["evaluations_csv"] = r.evaluations_csv;  // the CSV's columns, as steps and histograms
  d["ignored"] = py::cast(loaded.ignored);
  d["notes"] = py::cast(loaded.notes);
  d["vocabulary"] = loaded.vocabulary;
  return d;
}

}  // namespace

void bind_train(py::module_& m) {
  using py::arg;
  m.def("_train", &train_py, arg("config"), arg("overrides"), arg("out") = py::none(), arg("threads") = 0,
        arg("progress") = false,
        "One `rpsim train` run: the config (a dict or a file in any vocabulary the CLI reads) with "
        "overrides as --set takes them ('optimizer.lr=0.1'); steps.csv and histograms.csv as text, meta "
        "as a dict. out: also write the CLI's three files there. rpsim.train wraps it.");
}

nlohmann::json json_arg(const py::object& value) {
  return nlohmann::json::parse(py::module_::import("json").attr("dumps")(value).cast<std::string>());
}

sim::config::LoadedConfig config_arg(const py::object& config, const std::vector<std::string>& overrides) {
  if (py::isinstance<py::dict>(config))
    return sim::config::read_config_json(json_arg(config), "config dict", overrides);
  if (py::isinstance<py::str>(config) || py::hasattr(config, "__fspath__"))
    return sim::config::read_config_file(py::str(config).cast<std::string>(), overrides);
  throw py::type_error(fmt::format("config: {} is neither a dict nor a path",
                                   py::str(py::type::handle_of(config)).cast<std::string>()));
}

sim::train::PrecisionPolicy policy_arg(const py::object& spec) {
  return sim::config::policy_from_json(json_arg(spec), "policy");
}

}  // namespace rpsim::python
