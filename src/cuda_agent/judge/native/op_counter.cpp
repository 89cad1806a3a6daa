// Counts the ATen ops a candidate's forward dispatches, in every call the judge makes.
//
// A global RecordFunction callback sees every op that goes through the dispatcher, from Python or
// C++, on any thread. It is installed once, before the candidate is imported, and stays for the
// life of the process, so checked and timed calls run with exactly the same instrumentation: a
// solution cannot tell the calls that are recorded from the others, because none are not. Its
// cost is one callback per op (a flag test, and a map update while a call is open), too small to
// show against a kernel.
#include <ATen/record_function.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>

namespace {

std::atomic<bool> open_call{false};
std::mutex counts_mutex;
std::map<std::string, int64_t> counts;
at::CallbackHandle handle = 0;

std::unique_ptr<at::ObserverContext> on_op(const at::RecordFunction& fn) {
    if (open_call.load(std::memory_order_relaxed)) {
        std::lock_guard<std::mutex> lock(counts_mutex);
        ++counts[fn.name()];
    }
    return nullptr;
}

void install() {
    if (handle == 0) {
        handle = at::addGlobalCallback(
            at::RecordFunctionCallback(on_op).needsInputs(false).scopes({at::RecordScope::FUNCTION}));
    }
}

void begin() { open_call.store(true); }

void end() { open_call.store(false); }

std::map<std::string, int64_t> take() {
    std::lock_guard<std::mutex> lock(counts_mutex);
    std::map<std::string, int64_t> out;
    out.swap(counts);
    return out;
}

// Whether the counter still sees this thread's ops: installed, and RecordFunction not switched
// off for the thread (which a solution could try in C++).
bool watching() { return handle != 0 && at::hasGlobalCallbacks() && at::isRecordFunctionEnabled(); }

}  // namespace

PYBIND11_MODULE(cuda_agent_op_counter, m) {
    m.def("install", &install, "register the op callback (once)");
    m.def("begin", &begin, "start counting: a call is open");
    m.def("end", &end, "stop counting");
    m.def("take", &take, "the counts since the last take, by op name; resets them");
    m.def("watching", &watching, "whether the callback still sees this thread's ops");
}
