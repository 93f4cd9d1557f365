// Profile sessions (include/ingot/profile.h); ingot.profile() wraps them as a context manager.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "convert.h"
#include "ingot/profile.h"

namespace ingot::python {

void bind_profile(nb::module_& m) {
  using profile::Session;
  nb::class_<Session>(m, "ProfileSession", "Records per-kernel times of evaluations from creation until stop().")
      .def(nb::init<>())
      .def("stop", &Session::stop, "Stops recording (idempotent).")
      .def_prop_ro("recording", &Session::recording, "True until stop().")
      .def("rows", [](const Session& s) {
             nb::list out;
             for (const profile::KernelStats& k : s.rows()) {
               nb::dict d;
               d["name"] = k.name;
               d["backend"] = k.category;
               d["count"] = k.count;
               d["total_s"] = static_cast<double>(k.total_ns) / 1e9;
               d["mean_s"] = static_cast<double>(k.total_ns) / 1e9 / static_cast<double>(k.count);
               d["share"] = k.share;
               out.append(d);
             }
             return out;
           }, "Per kernel: name, backend, count, total_s, mean_s, share (largest total first).")
      .def("events", [](const Session& s) {
             nb::list out;
             for (const profile::Event& e : s.events()) {
               nb::dict d;
               d["name"] = e.name;
               d["backend"] = e.category;
               d["detail"] = e.detail;
               d["start_s"] = static_cast<double>(e.start_ns) / 1e9;
               d["duration_s"] = static_cast<double>(e.duration_ns) / 1e9;
               d["thread"] = e.thread;
               out.append(d);
             }
             return out;
           }, "Every recorded kernel run, in order.")
      .def("summary", &Session::summary, "A table: kernel, backend, count, total ms, mean us, share.")
      .def("chrome_trace", &Session::chrome_trace, "The Chrome/Perfetto trace JSON text.")
      .def("write_chrome_trace", &Session::write_chrome_trace, nb::arg("path"),
           "Writes the Chrome/Perfetto trace JSON to `path`.");
}

}  // namespace ingot::python
