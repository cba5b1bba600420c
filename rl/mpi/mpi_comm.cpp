#include "rl/mpi/mpi_comm.h"

#include <fmt/format.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "looptool/ir/error.h"

namespace looptune::mpi {

namespace {

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

/// Completes `request` while sleeping between tests (blocking MPI waits spin a core).
void lazy_wait(MPI_Request *request) {
    for (;;) {
        int done = 0;
        MPI_Test(request, &done, MPI_STATUS_IGNORE);
        if (done) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

volatile std::sig_atomic_t g_sigterm = 0;
extern "C" void on_sigterm(int) { g_sigterm = 1; }

}  // namespace

Session::Session() {
    int finalized = 0, initialized = 0;
    MPI_Finalized(&finalized);
    MPI_Initialized(&initialized);
    if (finalized || initialized)
        throw looptool::Error(
            "--distributed mpi: MPI was already used in this process (one run per process)");
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_FUNNELED) {
        MPI_Finalize();
        throw looptool::Error(
            "--distributed mpi: this MPI library does not provide MPI_THREAD_FUNNELED");
    }
}

Session::~Session() { MPI_Finalize(); }

void bcast(void *data, int count, MPI_Datatype type, int root) {
    MPI_Request r;
    MPI_Ibcast(data, count, type, root, MPI_COMM_WORLD, &r);
    lazy_wait(&r);
}

std::string first_error(const Session &session, const std::string &mine) {
    int candidate = mine.empty() ? INT_MAX : session.rank, failed = INT_MAX;
    MPI_Request r;
    MPI_Iallreduce(&candidate, &failed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &r);
    lazy_wait(&r);
    if (failed == INT_MAX) return "";
    int length = failed == session.rank ? static_cast<int>(mine.size()) : 0;
    bcast(&length, 1, MPI_INT, failed);
    std::string text = failed == session.rank ? mine : std::string(length, ' ');
    bcast(text.data(), length, MPI_CHAR, failed);
    return failed == 0 ? text : fmt::format("rank {}: {}", failed, text);
}

std::vector<std::string> host_names() {
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int length = 0;
    MPI_Get_processor_name(name, &length);
    if (const char *fake = std::getenv("LOOPTUNE_HOST_NAME"); fake && *fake)
        std::snprintf(name, sizeof name, "%s", fake);
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    std::vector<char> all(size * MPI_MAX_PROCESSOR_NAME);
    MPI_Request r;
    MPI_Iallgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
                   MPI_CHAR, MPI_COMM_WORLD, &r);
    lazy_wait(&r);
    std::vector<std::string> out;
    for (int i = 0; i < size; ++i) out.emplace_back(all.data() + i * MPI_MAX_PROCESSOR_NAME);
    return out;
}

void Outgoing::send(int dest, int tag, std::vector<char> bytes) {
    sends_.push_back({dest, tag, std::move(bytes), MPI_REQUEST_NULL});
    Send &s = sends_.back();
    MPI_Isend(s.bytes.data(), static_cast<int>(s.bytes.size()), MPI_BYTE, dest, tag, MPI_COMM_WORLD,
              &s.request);
}

void Outgoing::progress() {
    for (auto it = sends_.begin(); it != sends_.end();) {
        int done = 0;
        MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
        it = done ? sends_.erase(it) : std::next(it);
    }
}

size_t Outgoing::pending(int dest, int tag) const {
    size_t n = 0;
    for (const Send &s : sends_) n += s.dest == dest && s.tag == tag;
    return n;
}

bool Outgoing::drain(double seconds) {
    const double until = now() + seconds;
    for (progress(); !sends_.empty() && now() < until; progress())
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return sends_.empty();
}

bool try_receive(int source, int *from, int *tag, std::vector<char> *bytes) {
    int found = 0;
    MPI_Message message;
    MPI_Status status;
    MPI_Improbe(source, MPI_ANY_TAG, MPI_COMM_WORLD, &found, &message, &status);
    if (!found) return false;
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    bytes->resize(count);
    MPI_Mrecv(bytes->data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE);
    *from = status.MPI_SOURCE;
    *tag = status.MPI_TAG;
    return true;
}

SilenceClock::SilenceClock(int peers) : last_heard_(peers, now()), last_poll_(now()) {}

void SilenceClock::poll() {
    const double t = now(), away = t - last_poll_;
    if (away > 1.0)
        for (double &h : last_heard_) h += away;
    last_poll_ = t;
}

void SilenceClock::heard(int peer) { last_heard_[peer] = now(); }

double SilenceClock::silent(int peer) const { return now() - last_heard_[peer]; }

void abort_job(const std::string &message) {
    fmt::print(stderr, "error: {}\n", message);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::_Exit(1);  // not reached
}

SigtermWatch::SigtermWatch(std::function<void()> on_term) {
    g_sigterm = 0;
    struct sigaction sa = {};
    sa.sa_handler = on_sigterm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old_);
    watch_ = std::thread([this, on_term = std::move(on_term)] {
        while (!over_) {
            if (g_sigterm != 0) on_term();
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    });
}

SigtermWatch::~SigtermWatch() {
    over_ = true;
    watch_.join();
    sigaction(SIGTERM, &old_, nullptr);
}

bool barrier(double seconds) {
    MPI_Request r;
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
        int done = 0;
        MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        if (done) return true;
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

}  // namespace looptune::mpi
